package shell

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"path"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/policy"
	"github.com/computerfs/computerfs/spec"
	"github.com/computerfs/computerfs/wsfs"
)

// The red team's attacks on the fast-path built-ins that read or write
// many files or take their paths and patterns from data: rg, patch,
// unzip, tar, xargs, ln, cp, mv, tee, od, xxd and redirections. See
// docs/security.md, "Findings and tests".

// redteamRunaways are inputs that made a built-in ignore the call's
// end, each with the fixture it needs (written before it runs).
var redteamRunaways = []struct {
	script  string
	fixture func(t *testing.T, fs *wsfs.FS)
}{
	// unzip's wildcard match recursed on every *: exponential in the
	// stars against a member's name, with no look at the call's end
	{`unzip -l z.zip '` + strings.Repeat("*a", 24) + `*b'`, zipFixture},
	{`unzip -t z.zip '` + strings.Repeat("*a", 24) + `*b'`, zipFixture},
	{`unzip -p z.zip '` + strings.Repeat("*a", 24) + `*b' > /dev/null`, zipFixture},
	{`unzip -Z1 z.zip '` + strings.Repeat("*?", 24) + `*b'`, zipFixture},
	{`unzip -l z.zip '` + strings.Repeat("[a]*", 24) + `b' '` + strings.Repeat("*\a", 24) + `b'`, zipFixture},
	// patch looked for a hunk at every line, comparing all its lines,
	// for each fuzz and once more reversed, with no look at the end
	{`patch -p0 --dry-run < q.diff`, patchFixture},
	{`patch big q.diff`, patchFixture},
	{`patch -R -p0 < q.diff`, patchFixture},
	{`patch -F 2 -o /tmp/out big < q.diff`, patchFixture},
	// tar wrote a sparse member's holes out, with no look at the end
	{`tar xf sp.tar`, sparseTarFixture},
	{`cat sp.tar | tar xf -`, sparseTarFixture},
	{`mkdir d && tar xf sp.tar -C d`, sparseTarFixture},
	{`tar xf sp.tar -C /tmp`, sparseTarFixture},
	{`tar xvf sp.tar --to-stdout > /dev/null`, sparseTarFixture},
	{`gzip -c sp.tar > sp.tgz && tar xzf sp.tgz`, sparseTarFixture},
	// held already, kept as variants
	{`rg -L x loop loop loop`, nil},
	{`rg --max-depth 100000 -L x loop`, nil},
	{`xxd sparse > /dev/null`, nil},
	{`od -An -tx1 sparse > /dev/null`, nil},
	{`od -c sparse | tail -1`, nil},
	{`xxd -s 1099511627000 -l 1000000000 sparse > /dev/null`, nil},
	{`xargs -n 1 -a /dev/zero true`, nil},
	{`find . | xargs -I{} cat {} > /dev/null`, nil},
	{`yes sparse | xargs cat > /dev/null`, nil},
	{`tee a b c < /dev/zero`, nil},
	{`cat /dev/zero > big`, nil},
	{`cp -r loop /tmp/l2`, nil},
	{`ln -s loop/self l && cp -rL l /tmp/l3`, nil},
}

// TestRedteamFileRunaways: each attack returns near its timeout (1 s)
// and its work stops (runRunaway: no goroutine left, no CPU, nothing
// written after the call).
func TestRedteamFileRunaways(t *testing.T) {
	s, fs := newShell(t)
	setupRunaways(t, fs)
	base, _ := shellGoroutines()
	for _, a := range redteamRunaways {
		t.Run(strings.ReplaceAll(a.script, "/", "∕"), func(t *testing.T) {
			if a.fixture != nil {
				a.fixture(t, fs)
			}
			start := time.Now()
			runRunaway(t, s, fs, a.script, time.Second, base)
			t.Logf("%v", time.Since(start).Round(time.Millisecond))
		})
	}
}

// zipFixture is z.zip, whose one member's name is 300 a's.
func zipFixture(t *testing.T, fs *wsfs.FS) {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, err := zw.Create(strings.Repeat("a", 300))
	check(t, err)
	w.Write([]byte("x\n"))
	check(t, zw.Close())
	check(t, fs.WriteFile("z.zip", b.Bytes(), 0o644))
}

// patchFixture is big, two million equal lines, and q.diff, a hunk of
// 40,000 of them that differs from the file in its middle line only:
// 8e10 line comparisons for each fuzz.
func patchFixture(t *testing.T, fs *wsfs.FS) {
	check(t, fs.WriteFile("big", bytes.Repeat([]byte("a\n"), 2_000_000), 0o644))
	var p strings.Builder
	p.WriteString("--- big\n+++ big\n@@ -1000000,40001 +1000000,40001 @@\n")
	p.WriteString(strings.Repeat(" a\n", 20000))
	p.WriteString("-b\n+c\n")
	p.WriteString(strings.Repeat(" a\n", 20000))
	check(t, fs.WriteFile("q.diff", []byte(p.String()), 0o644))
}

// sparseTarFixture is sp.tar: 10 KB, one member of a TiB, all holes but
// its last 512 bytes.
func sparseTarFixture(t *testing.T, fs *wsfs.FS) {
	check(t, fs.WriteFile("sp.tar", gnuSparseTar(t, "huge", 1<<40), 0o644))
}

// gnuSparseTar is a tar of one old-GNU sparse member ('S') of realsize
// bytes whose data is 512 bytes of "D" at its end.
func gnuSparseTar(t testing.TB, name string, realsize int64) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	check(t, tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: 512, Format: tar.FormatGNU}))
	tw.Write(bytes.Repeat([]byte("D"), 512))
	check(t, tw.Close())
	b := buf.Bytes()
	h := b[:512]
	h[156] = tar.TypeGNUSparse
	num := func(off, n int, v int64) {
		if v < 1<<33 {
			copy(h[off:off+n], fmt.Sprintf("%0*o\x00", n-1, v))
			return
		}
		for i := off + n - 1; i > off; i-- { // base-256, as GNU tar writes big numbers
			h[i] = byte(v)
			v >>= 8
		}
		h[off] = 0x80
	}
	num(386, 12, realsize-512) // the first sparse entry: offset, then length
	num(398, 12, 512)
	num(483, 12, realsize) // the real size
	copy(h[148:156], "        ")
	sum := 0
	for _, c := range h {
		sum += int(c)
	}
	copy(h[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return b
}

// TestRedteamSparseTarKeepsHoles: a sparse member is extracted with its
// holes (64 MiB were 131,072 blocks written).
func TestRedteamSparseTarKeepsHoles(t *testing.T) {
	s, fs := newShell(t)
	check(t, fs.WriteFile("sp.tar", gnuSparseTar(t, "huge", 64<<20), 0o644))
	for _, script := range []string{`tar xf sp.tar`, `mkdir -p d && cd d && tar xf - < ../sp.tar`} {
		if out, errs, code := sh(t, s, script); code != 0 {
			t.Fatalf("%s: %d %s %s", script, code, out, errs)
		}
	}
	for _, p := range []string{"huge", "d/huge"} {
		a, err := fs.Stat(p)
		check(t, err)
		data, err := fs.ReadFile(p)
		check(t, err)
		if a.Size != 64<<20 || !bytes.Equal(data[len(data)-512:], bytes.Repeat([]byte("D"), 512)) || !allZero(data[:len(data)-512]) {
			t.Errorf("%s: size %d: not the member's content", p, a.Size)
		}
		if a.Blocks*512 > 1<<20 {
			t.Errorf("%s: %d blocks: the holes were written", p, a.Blocks)
		}
	}
	// to standard output the member is printed whole, holes as zeros, as
	// GNU tar does (it printed nothing)
	out, errs, code := sh(t, s, `tar xOf sp.tar | wc -c; tar xOf sp.tar | tail -c 512 | tr -d D | wc -c`)
	if code != 0 || out != fmt.Sprintf("%d\n0\n", 64<<20) {
		t.Errorf("tar xO of the sparse member: %d %q %s", code, out, errs)
	}
}

// unzipMatchRecursive is unzipMatch as it was (exponential in the
// stars): the reference the new one must agree with.
func unzipMatchRecursive(p, s string) bool {
	for len(p) > 0 {
		switch p[0] {
		case '*':
			for i := len(s); i >= 0; i-- {
				if unzipMatchRecursive(p[1:], s[i:]) {
					return true
				}
			}
			return false
		case '\\':
			if len(p) > 1 {
				p = p[1:]
			}
			if s == "" || p[0] != s[0] {
				return false
			}
			p, s = p[1:], s[1:]
		case '?':
			if s == "" {
				return false
			}
			p, s = p[1:], s[1:]
		case '[':
			end := strings.IndexByte(p[1:], ']')
			if end < 0 || s == "" {
				if s == "" || s[0] != '[' {
					return false
				}
				p, s = p[1:], s[1:]
				continue
			}
			set := p[1 : 1+end]
			neg := strings.HasPrefix(set, "!") || strings.HasPrefix(set, "^")
			if neg {
				set = set[1:]
			}
			in := false
			for i := 0; i < len(set); i++ {
				if i+2 < len(set) && set[i+1] == '-' {
					if s[0] >= set[i] && s[0] <= set[i+2] {
						in = true
					}
					i += 2
				} else if set[i] == s[0] {
					in = true
				}
			}
			if in == neg {
				return false
			}
			p, s = p[2+end:], s[1:]
		default:
			if s == "" || p[0] != s[0] {
				return false
			}
			p, s = p[1:], s[1:]
		}
	}
	return s == ""
}

// TestUnzipMatchAgrees: the linear wildcard match answers as the
// recursive one did, on 200,000 random small patterns and names.
func TestUnzipMatchAgrees(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	toks := []string{"a", "b", "/", "*", "*", "?", "[ab]", "[!a]", "[^b]", "[a-c]", "\\*", "\\", "[", "]", "[]"}
	for i := 0; i < 200_000; i++ {
		var p, s strings.Builder
		for n := r.Intn(7); n > 0; n-- {
			p.WriteString(toks[r.Intn(len(toks))])
		}
		for n := r.Intn(9); n > 0; n-- {
			s.WriteByte("ab/c[*\\"[r.Intn(7)])
		}
		if got, want := unzipMatch(p.String(), s.String()), unzipMatchRecursive(p.String(), s.String()); got != want {
			t.Fatalf("unzipMatch(%q, %q) = %v, want %v", p.String(), s.String(), got, want)
		}
	}
	long := strings.Repeat("a", 65535)
	start := time.Now()
	if unzipMatch(strings.Repeat("*a", 100)+"*b", long) || !unzipMatch(strings.Repeat("*a", 100)+"*", long) {
		t.Error("long name: wrong answer")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("long name: %v", d)
	}
}

// redteamMemBombs take memory a built-in held without charging it to
// the call: each gets stdinMiB MiB of the pattern on its stdin.
var redteamMemBombs = []struct {
	script, pattern string
}{
	{`xargs -0 true`, "a\x00"},           // 2,224 MiB of heap for a 256 MiB budget
	{`xargs -d x true`, "x"},             // 1,203 MiB
	{`xargs -I{} true`, "\n"},            // 1,251 MiB
	{`xargs true`, "a "},                 // 1,677 MiB
	{`xargs -n 1 -P 4 true`, "a\n"},      //
	{`xargs -0 -n 100000 true`, "\x00a"}, //
}

// TestRedteamMemory runs redteamMemBombs in a child in a memory cgroup
// (see runInMemCgroup): each must stop for its memory with the heap
// near its budget, and xargs must still work after.
func TestRedteamMemory(t *testing.T) {
	if os.Getenv("COMPUTERFS_REDTEAM_MEM_CHILD") == "1" {
		redteamMemChild(t)
		return
	}
	limit := int64(4 << 30)
	if raceEnabled {
		limit = 10 << 30
	}
	runInMemCgroup(t, "TestRedteamMemory", "COMPUTERFS_REDTEAM_MEM_CHILD", limit)
}

func redteamMemChild(t *testing.T) {
	waitForCgroup(t)
	s, _ := newShell(t)
	peak, stopSampling := heapPeak()
	defer stopSampling()
	const budget = 256 << 20
	for _, b := range redteamMemBombs {
		in := bytes.Repeat([]byte(b.pattern), (60<<20)/len(b.pattern))
		runtime.GC()
		peak.Store(0)
		var out bytes.Buffer
		start := time.Now()
		res, err := s.Exec(context.Background(), b.script, ExecOptions{Stdin: bytes.NewReader(in), Stdout: &out, Stderr: &out,
			Timeout: 2 * time.Minute, MaxOutput: 1 << 20})
		p := peak.Load()
		t.Logf("%-30s %-14s %5.1fs peak heap %4d MiB %.100q", b.script, res.Stopped, time.Since(start).Seconds(), p>>20, out.String())
		if err != nil || res.ExitCode == 0 {
			t.Errorf("%s: not stopped: %v %+v", b.script, err, res)
		}
		if p > 3*budget+128<<20 {
			t.Errorf("%s: the heap reached %d MiB for a budget of %d MiB", b.script, p>>20, budget>>20)
		}
	}
	for script, want := range map[string]string{
		`seq 100000 | xargs -n 1000 echo | wc -l`:                               "100\n",
		`printf 'a\0b c\0' | xargs -0 -n 1 echo`:                                "a\nb c\n",
		`printf 'a b\n"c d" e\\ f\n' | xargs -n 1 echo`:                         "a\nb\nc d\ne f\n",
		`printf 'x,y,,z,' | xargs -d , -n 1 echo`:                               "x\ny\n\nz\n",
		`printf ' a\nb\n\n' | xargs -I{} echo '<{}>'`:                           "<a>\n<b>\n",
		`printf '' | xargs echo none`:                                           "none\n",
		`head -c 3000000 /dev/zero | tr '\0' a | xargs -0 sh -c 'echo ${#1}' _`: "3000000\n",
	} {
		if out, errs, code := sh(t, s, script); out != want || code != 0 {
			t.Errorf("%s: %q %q %d, want %q", script, out, errs, code, want)
		}
	}
}

// The red team's workspace: files under each kind of rule, a pattern
// file that is denied, a directory of the operator's (root's, 0755) and
// a shell as the daemon makes it for the agent (its identity, the rules).
const (
	rtAgent  = 200001
	rtNeedle = "needle-42"
)

func redteamPolicyShell(t *testing.T) (*Shell, *wsfs.FS, *wsfs.FS) {
	t.Helper()
	_, root := newShell(t)
	agent := wsfs.New(root.Store(), wsfs.Owner{UID: rtAgent, GID: rtAgent})
	check(t, root.Lchown("/", rtAgent, rtAgent))
	for p, c := range map[string]string{
		"secrets/token": secret, "keys/a.pem": secret, "keys/pat.pem": "^needle-[0-9]+$\n", "x/y/.env": secret,
		"ro/conf": "original\n", "ro/sub/f": "original\n", "ok/file": "fine\n", "ok/hay": rtNeedle + "\nhay\n",
		"mod/go.mod": "module m\n", "ok/hex": "00000000: 6368 616e 6765 640a                 changed.\n",
	} {
		check(t, agent.MkdirAll(path.Dir(p), 0o755))
		check(t, agent.WriteFile(p, []byte(c), 0o644))
	}
	check(t, root.Mkdir("opdir", 0o755))
	check(t, root.WriteFile("opdir/file", []byte("operator\n"), 0o644))
	rules := policy.New(&spec.Policy{
		Deny:          []string{"/secrets", "**/*.pem", ".env"},
		ReadOnlyPaths: []string{"/ro", "**/go.mod"},
	})
	// the archives and diffs the attacks use
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	for _, h := range []tar.Header{
		{Name: "ro/conf", Typeflag: tar.TypeReg, Size: 8}, {Name: "ro/new", Typeflag: tar.TypeReg, Size: 8},
		{Name: "keys/t.pem", Typeflag: tar.TypeReg, Size: 8}, {Name: "secrets/x", Typeflag: tar.TypeReg, Size: 8},
		{Name: "t.pem/", Typeflag: tar.TypeDir}, {Name: "hl", Typeflag: tar.TypeLink, Linkname: "secrets/token"},
		{Name: "hl2", Typeflag: tar.TypeLink, Linkname: "ro/conf"}, {Name: "hl2", Typeflag: tar.TypeReg, Size: 8},
		{Name: "hl3", Typeflag: tar.TypeLink, Linkname: "keys/a.pem"}, {Name: "hl4", Typeflag: tar.TypeLink, Linkname: "/workspace/secrets/token"},
		{Name: "sl", Typeflag: tar.TypeSymlink, Linkname: "ro"}, {Name: "sl/conf", Typeflag: tar.TypeReg, Size: 8},
		{Name: "sk", Typeflag: tar.TypeSymlink, Linkname: "keys"}, {Name: "sk/n.pem", Typeflag: tar.TypeReg, Size: 8},
		{Name: "sa", Typeflag: tar.TypeSymlink, Linkname: "/workspace/ro/conf"}, {Name: "sa", Typeflag: tar.TypeReg, Size: 8},
		{Name: "x/../ro/conf", Typeflag: tar.TypeReg, Size: 8}, {Name: "/workspace/ro/conf", Typeflag: tar.TypeReg, Size: 8},
		{Name: "opdir/file", Typeflag: tar.TypeReg, Size: 8}, {Name: "opdir/new", Typeflag: tar.TypeReg, Size: 8},
		{Name: "mod/go.mod", Typeflag: tar.TypeReg, Size: 8}, {Name: "suid", Typeflag: tar.TypeReg, Size: 8, Mode: 0o6755, Uid: 0, Gid: 0},
		{Name: "dev", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}, {Name: "fifo", Typeflag: tar.TypeFifo},
	} {
		h.Format = tar.FormatGNU
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		check(t, tw.WriteHeader(&h))
		if h.Size > 0 {
			tw.Write([]byte("changed\n"))
		}
	}
	check(t, tw.Close())
	check(t, agent.WriteFile("ok/evil.tar", tb.Bytes(), 0o644))
	var zb bytes.Buffer
	zw := zip.NewWriter(&zb)
	for _, n := range []string{"../ro/conf", "/workspace/ro/conf", "keys/z.pem"} {
		w, err := zw.Create(n)
		check(t, err)
		w.Write([]byte("changed\n"))
	}
	check(t, zw.Close())
	check(t, agent.WriteFile("ok/e.zip", zb.Bytes(), 0o644))
	for name, d := range map[string]string{
		"ok/ro.diff":     "--- ro/conf\n+++ ro/conf\n@@ -1 +1 @@\n-original\n+changed\n",
		"ok/ro1.diff":    "--- a/conf\n+++ b/conf\n@@ -1 +1 @@\n-original\n+changed\n",
		"ok/abs.diff":    "--- /workspace/ro/conf\n+++ /workspace/ro/conf\n@@ -1 +1 @@\n-original\n+changed\n",
		"ok/up.diff":     "--- ../../workspace/ro/conf\n+++ ../../workspace/ro/conf\n@@ -1 +1 @@\n-original\n+changed\n",
		"ok/fuzz.diff":   "--- ro/conf\n+++ ro/conf\n@@ -1 +1,2 @@\n original\n+changed\n",
		"ok/del.diff":    "--- ro/conf\n+++ /dev/null\n@@ -1 +0,0 @@\n-original\n",
		"ok/mod.diff":    "--- mod/go.mod\n+++ mod/go.mod\n@@ -1 +1 @@\n-module m\n+module evil\n",
		"ok/new.diff":    "--- /dev/null\n+++ keys/new.pem\n@@ -0,0 +1 @@\n+x\n--- /dev/null\n+++ ro/sub/new\n@@ -0,0 +1 @@\n+x\n--- /dev/null\n+++ secrets/new\n@@ -0,0 +1 @@\n+x\n--- /dev/null\n+++ x/.env\n@@ -0,0 +1 @@\n+x\n",
		"ok/secret.diff": "--- secrets/token\n+++ ok/leak\n@@ -1 +1 @@\n-echo\n+x\n",
		"ok/rej.diff":    "--- secrets/token\n+++ secrets/token\n@@ -1 +1 @@\n-nomatch\n+x\n",
		"ok/op.diff":     "--- opdir/file\n+++ opdir/file\n@@ -1 +1 @@\n-operator\n+changed\n--- /dev/null\n+++ opdir/new\n@@ -0,0 +1 @@\n+x\n",
	} {
		check(t, agent.WriteFile(name, []byte(d), 0o644))
	}
	return New(agent.ForAgent().WithPolicy(rules), Options{UID: rtAgent, GID: rtAgent}), agent, root
}

// TestRedteamFilesPolicy: with path rules and the agent's identity, no
// built-in that takes its paths from data (archives, diffs, pattern
// and ignore files, xargs' input, links) reads a denied file, changes a
// read-only one or the operator's, makes a name a deny rule covers, or
// leaves a file that is not the agent's; every call returns.
func TestRedteamFilesPolicy(t *testing.T) {
	s, agent, root := redteamPolicyShell(t)
	beforeRO, beforeMod, beforeOp := snapshot(t, root, "/ro"), fileState(t, root, "/mod/go.mod"), snapshot(t, root, "/opdir")
	scripts := []string{
		// rg: walks, links, pattern files, globs, ignore files
		`rg TOP`, `rg -uu TOP`, `rg -L -uu TOP`, `rg TOP secrets keys x`, `rg --files -uu`, `rg -uu -l .`,
		`rg -f keys/pat.pem ok/hay`, `rg -f keys/pat.pem -uu`, `rg -e x -f secrets/token ok`, `rg -f /workspace/keys/pat.pem ok/hay`,
		`ln -s ../keys ok/kl; rg -f ok/kl/pat.pem ok/hay`, `ln -s ../secrets ok/sl; rg -L -uu TOP ok`, `rg -uu -g '*.pem' TOP`,
		`rg -g '!ok' --hidden TOP /workspace`, `rg --max-depth 1000 -L -uu TOP`, `rg -c '' secrets/token keys/a.pem`,
		`printf '!secrets\n!*.pem\n' > .ignore; rg -uu TOP; rm .ignore`, `rg -uu --no-ignore -L TOP /workspace/x`,
		`cd secrets && rg TOP`, `rg -uu TOP /workspace/x/y/.env`, `rg -o -uu 'TOP.*' .`, `echo secrets/token | rg -f - ok/hay`,
		// other pattern and list files
		`grep -f keys/pat.pem ok/hay`, `grep -rf keys/pat.pem ok`, `awk -f keys/pat.pem ok/hay`, `sed -f keys/pat.pem ok/hay`,
		`jq -R -f keys/pat.pem ok/hay`, `tar cf - -T secrets/token`, `find . -name '*.pem' | xargs cat`, `echo secrets/token | xargs cat`,
		`printf 'keys/a.pem\0' | xargs -0 cat`, `echo ro/conf | xargs -I{} sh -c 'echo x > {}'`, `echo keys/n.pem | xargs touch`,
		`ls | xargs -I{} cp ok/file {}/conf`, `echo ro | xargs -n1 rm -rf`,
		// patch
		`patch -p0 < ok/ro.diff`, `patch ro/conf ok/ro.diff`, `patch -p1 -d ro < ok/ro1.diff`, `patch -p0 < ok/abs.diff`,
		`patch -p0 < ok/up.diff`, `patch -p0 < ok/fuzz.diff`, `patch -p0 < ok/del.diff`, `patch -p0 < ok/mod.diff`,
		`patch -p0 < ok/new.diff`, `patch -p0 < ok/secret.diff; cat ok/leak`, `patch -p0 < ok/rej.diff; cat secrets/token.rej`,
		`patch -o ok/out secrets/token ok/rej.diff; cat ok/out`, `patch -o ro/new ok/file < ok/ro.diff`,
		`patch -o keys/o.pem ro/conf < ok/ro.diff`, `ln -s ../ro/conf ok/rl; patch ok/rl ok/ro.diff`,
		`ln -s ro rol; patch -p1 -d rol < ok/ro1.diff`, `patch -i keys/a.pem ok/file`, `patch -p0 < ok/op.diff`,
		`patch --dry-run -p0 < ok/secret.diff`, `cd ro && patch conf < ../ok/ro.diff`,
		// unzip (extraction is the sandbox's; -p writes where it is told)
		`unzip -p ok/e.zip > ro/conf`, `unzip -p ok/e.zip > keys/z.pem`, `unzip -p ok/e.zip > opdir/file`, `unzip -l keys/a.pem`,
		`unzip -t secrets/token`, `unzip -o ok/e.zip`, `cd ro && unzip ../ok/e.zip`, `unzip -p ok/e.zip | tee ro/conf`,
		// tar
		`tar xf ok/evil.tar`, `tar xf ok/evil.tar -C ro`, `tar xpf ok/evil.tar --same-owner`, `tar xkf ok/evil.tar`,
		`mkdir -p t1 && tar xf ok/evil.tar -C t1 && cat t1/hl t1/hl3 t1/hl4`, `cd ro && tar xf ../ok/evil.tar`, `tar xPf ok/evil.tar`,
		`tar xf ok/evil.tar --strip-components=0 -C /workspace`, `cat ok/evil.tar | tar xf - -C /workspace/ro`,
		`tar cf - secrets keys | tar xf - -C /tmp; cat /tmp/secrets/token /tmp/keys/a.pem`, `tar chf - ok | tar tvf -`,
		`tar cf /tmp/a.tar ok; tar xf /tmp/a.tar -C ro`, `tar cf ro/a.tar ok`, `tar cf keys/a.tar.pem ok`,
		// ln, cp, mv across links
		`ln -f ok/file ro/conf`, `ln -sf ok/file ro/conf`, `ln -s ../ro ok/r2; cp ok/file ok/r2/conf`, `mv -f ok/file ro/conf`,
		`cp -f ok/file ro/conf`, `mv ok/hay ro/`, `cp -a ok ro/`, `cp -rL ok/sl ok/copy; cat ok/copy/token`, `ln keys/a.pem ok/k`,
		`ln ro/conf ok/h; mv ok/h ok/h2; echo y >> ok/h2`, `mv ro/../ok/hex ro/x`, `ln -s /workspace/ro/conf ok/abs; cp ok/file ok/abs`,
		`cp -r ok/r2 ok/r3; echo x > ok/r3/conf`, `ln -s ../secrets/token ok/st; cp ok/st ok/stc; cat ok/stc`, `cp -L ok/st ok/st2`,
		`ln -s keys kk; ln kk/a.pem ok/k2`, `mv keys/a.pem ok/a.txt`, `mv x/y/.env ok/env`, `ln -s . me; mv me/ro me/ro2`,
		`cp ok/file opdir/file`, `mv ok/file opdir/`, `ln -s x opdir/l`, `ln ok/file opdir/h`, `chmod 777 opdir/file`, `rm -rf opdir`,
		`mv opdir/file ok/o`, `touch opdir/file`, `touch -d 2000-01-01 opdir/file`,
		// tee and redirections
		`echo x | tee ro/conf`, `echo x | tee -a ro/conf`, `echo x | tee ok/a keys/n.pem`, `echo x | tee /workspace/secrets/token`,
		`echo x | tee opdir/file`, `echo x > ro/conf`, `echo x >| ro/conf`, `echo x &> ro/conf`, `exec 3>ro/conf; echo x >&3`,
		`exec 3<>ro/conf; echo x >&3`, `echo x 2> ro/conf`, `: >> keys/n.pem`, `cat < ok/file > ro/sub/f`, `printf x > ro/conf`,
		`echo x > ok/r2/conf`, `cd ro; echo x > ./conf`, `echo x > /workspace/./ro//conf`, `echo x > opdir/file`, `echo x > opdir/new`,
		`echo x >> mod/go.mod`, `echo x > mod/../mod/go.mod`, `exec 4<>secrets/token; cat <&4`, `cat <> keys/a.pem`,
		// od, xxd and the rest that write
		`od -c secrets/token`, `xxd keys/a.pem`, `xxd -r ok/hex ro/conf`, `xxd -r ok/hex > keys/x.pem`, `xxd -r ok/hex ok/r2/conf`,
		`xxd -r ok/hex opdir/file`, `xxd -r ok/hex mod/go.mod`, `od -An -c x/y/.env`, `gzip ro/conf`, `gzip -c ok/file > ro/conf`,
		`gzip -c ok/file > ok/f.gz; gunzip -c ok/f.gz > ro/conf`, `cp ok/f.gz ro/; gunzip ro/f.gz`, `sed -i s/original/changed/ ro/conf`,
		`mktemp -p ro`, `mktemp ro/XXXX`, `mktemp -d -p opdir`, `touch -r secrets/token ok/t`, `split -b 1 ok/file ro/s`,
		`install ok/file ro/conf`, `truncate -s 0 ro/conf`, `dd if=ok/file of=ro/conf`, `cp ok/file /dev/stdout > ro/conf`,
	}
	for _, script := range scripts {
		var out bytes.Buffer
		start := time.Now()
		res, err := s.Exec(context.Background(), script, ExecOptions{Stdout: &out, Stderr: &out, Timeout: 20 * time.Second})
		if err != nil {
			t.Fatalf("%s: %v", script, err)
		}
		if took := time.Since(start); res.Stopped != "" || took > 21*time.Second {
			t.Errorf("%s: stopped %q after %v", script, res.Stopped, took)
		}
		if os.Getenv("REDTEAM_VERBOSE") != "" {
			t.Logf("%s: %d %q", script, res.ExitCode, out.String())
		}
		if o := out.String(); strings.Contains(o, "TOPSECRET") || strings.Contains(o, rtNeedle) {
			t.Errorf("%s: denied content came out:\n%s", script, o)
		}
	}
	if after := snapshot(t, root, "/ro"); after != beforeRO {
		t.Errorf("the read-only /ro changed:\nbefore %s\nafter  %s", beforeRO, after)
	}
	if after := fileState(t, root, "/mod/go.mod"); after != beforeMod {
		t.Errorf("the read-only go.mod changed:\nbefore %s\nafter  %s", beforeMod, after)
	}
	if after := snapshot(t, root, "/opdir"); after != beforeOp {
		t.Errorf("the operator's /opdir changed:\nbefore %s\nafter  %s", beforeOp, after)
	}
	c := policy.New(&spec.Policy{Deny: []string{"/secrets", "**/*.pem", ".env"}})
	walk(t, root, "/", func(p string, a kv.Attr) {
		switch {
		case c.Denied(p) != nil && p != "/secrets" && p != "/secrets/token" && p != "/keys/a.pem" && p != "/keys/pat.pem" && p != "/x/y/.env":
			t.Errorf("%s was made: a deny rule covers it", p)
		case strings.HasPrefix(p, "/opdir"):
			if a.Uid != 0 {
				t.Errorf("%s: the operator's, now uid %d", p, a.Uid)
			}
		case a.Uid != rtAgent || a.Gid != rtAgent:
			t.Errorf("%s: owner %d:%d, not the agent's", p, a.Uid, a.Gid)
		}
		if !a.IsDir() && a.Mode&(kv.S_ISUID|kv.S_ISGID) != 0 {
			t.Errorf("%s: mode %o", p, a.Mode)
		}
		if a.IsRegular() {
			data, err := root.ReadFile(p)
			check(t, err)
			if (strings.Contains(string(data), "TOPSECRET") || strings.Contains(string(data), "needle-[0-9]")) && c.Denied(p) == nil {
				t.Errorf("the denied content is readable at %s", p)
			}
		}
	})
	for p, want := range map[string]string{"/secrets/token": secret, "/keys/a.pem": secret, "/keys/pat.pem": "^needle-[0-9]+$\n", "/x/y/.env": secret} {
		if data, err := agent.ReadFile(p); err != nil || string(data) != want {
			t.Errorf("%s: %q, %v: the denied file changed", p, data, err)
		}
	}
}

// fileState describes one file: mode, size, times, links, content.
func fileState(t *testing.T, raw *wsfs.FS, p string) string {
	a, err := raw.Lstat(p)
	check(t, err)
	data, err := raw.ReadFile(p)
	check(t, err)
	return fmt.Sprintf("%o %d %d %d %d %q", a.Mode, a.Size, a.Mtime, a.Ctime, a.Nlink, data)
}

// TestRedteamConcurrentArchives runs the archive and patch attacks of
// TestRedteamFilesPolicy at once, on one workspace, as an agent's
// parallel calls would: the same must hold, and no call may wedge.
func TestRedteamConcurrentArchives(t *testing.T) {
	s, _, root := redteamPolicyShell(t)
	beforeRO := snapshot(t, root, "/ro")
	scripts := []string{
		`for i in 1 2 3 4 5; do mkdir -p c$i; tar xf ok/evil.tar -C c$i; done`,
		`for i in 1 2 3 4 5; do patch -p0 < ok/ro.diff; patch -p0 < ok/new.diff; done`,
		`for i in 1 2 3 4 5; do ln -sf ../ro c1/l$i; echo x > c1/l$i/conf; done`,
		`for i in 1 2 3 4 5; do mv ro ro$i; mv ok ok$i && mv ok$i ok; done`,
		`for i in 1 2 3 4 5; do rm -rf c2 c3; cp -a ok c2; tar xf ok/evil.tar -C c2; done`,
	}
	var wg sync.WaitGroup
	for _, script := range scripts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out bytes.Buffer
			start := time.Now()
			res, err := s.Exec(context.Background(), script, ExecOptions{Stdout: &out, Stderr: &out, Timeout: 60 * time.Second})
			if err != nil || res.Stopped != "" || time.Since(start) > 61*time.Second {
				t.Errorf("%s: %v %+v after %v", script, err, res, time.Since(start))
			}
		}()
	}
	wg.Wait()
	if after := snapshot(t, root, "/ro"); after != beforeRO {
		t.Errorf("the read-only /ro changed:\nbefore %s\nafter  %s", beforeRO, after)
	}
}

// TestRedteamReadsAsTheAgent: the fast path reads what the agent's
// identity may read, as its programs on the mount do: not the
// operator's 0600 file nor the inside of its 0700 directory (both were
// read, copied and archived), but a 0711 directory's files by name, a
// file of the agent's group by the group's bits, anyone's 0644 file.
func TestRedteamReadsAsTheAgent(t *testing.T) {
	s, _, root := redteamPolicyShell(t)
	for _, d := range []struct {
		p    string
		mode uint32
	}{{"private", 0o700}, {"search", 0o711}, {"grp", 0o750}} {
		check(t, root.Mkdir(d.p, d.mode))
	}
	for _, f := range []struct {
		p, content string
		mode       uint32
		gid        uint32
	}{
		{"ok/netrc", "hunter2-netrc\n", 0o600, 0}, {"private/f", "hunter2-private\n", 0o644, 0},
		{"search/f", "readable-by-name\n", 0o644, 0}, {"grp/f", "readable-by-group\n", 0o640, rtAgent},
		{"ok/grp-no", "hunter2-group\n", 0o640, 0}, {"ok/world", "readable-by-all\n", 0o604, 0},
	} {
		check(t, root.WriteFile(f.p, []byte(f.content), f.mode))
		check(t, root.Lchown(f.p, 0, f.gid))
	}
	check(t, root.Lchown("grp", 0, rtAgent))
	for _, script := range []string{
		`cat ok/netrc`, `cat private/f`, `cat ok/grp-no`, `ls private`, `ls -la private/`, `cp ok/netrc ok/c1; cat ok/c1`,
		`cp -r private ok/c2; cat ok/c2/f`, `cp -a ok ok3; cat ok3/netrc`, `tar cf - ok private | tar xOf -`, `grep -r hunter2 .`,
		`rg -uu hunter2`, `rg -uu --files`, `find . -type f -exec cat {} +`, `sort ok/netrc`, `diff ok/netrc /dev/null`,
		`xargs cat < /dev/null; echo ok/netrc | xargs cat`, `head -c 100 ok/grp-no`, `md5sum ok/netrc; base64 ok/netrc`,
		`od -c ok/netrc`, `xxd private/f`, `gzip -c ok/netrc | gunzip`, `patch -o ok/p ok/netrc < ok/ro.diff; cat ok/p`,
		`tar cf ok/t.tar private; tar xOf ok/t.tar`, `ln -s ../private ok/pl; cat ok/pl/f`, `ln ok/netrc ok/hl; cat ok/hl`,
		`mv ok/netrc ok/moved; cat ok/moved`, `while read l; do echo $l; done < ok/netrc`, `echo "$(< private/f)"`,
		`. ok/netrc`, `sh ok/netrc`, `awk '{print}' ok/netrc`, `sed p private/f`, `jq -R . ok/netrc`, `wc -c ok/netrc`,
		`git init -q g && cp ok/netrc g/ && cd g && git add . && git show :netrc`,
	} {
		out, errs, _ := sh(t, s, script)
		if strings.Contains(out+errs, "hunter2") {
			t.Errorf("%s: read what the agent may not:\n%s%s", script, out, errs)
		}
	}
	out, errs, code := sh(t, s, `cat search/f grp/f ok/world; ls grp; ls search 2>&1 | grep -c denied`)
	if want := "readable-by-name\nreadable-by-group\nreadable-by-all\nf\n1\n"; out != want || code != 0 {
		t.Errorf("what the agent may read: %q %q %d, want %q", out, errs, code, want)
	}
	// the agent's own files stay its own to read, whatever their mode
	if out, errs, _ := sh(t, s, `echo mine > ok/m; chmod 000 ok/m; cat ok/m`); out != "mine\n" {
		t.Errorf("the agent's 000 file: %q %q", out, errs)
	}
}

// TestRedteamStickyDirectory: in the operator's sticky 1777 directory
// the agent removes, renames and replaces only its own entries, as the
// kernel lets it (the fast path removed and renamed root's).
func TestRedteamStickyDirectory(t *testing.T) {
	s, _, root := redteamPolicyShell(t)
	check(t, root.Mkdir("shared", 0o777))
	check(t, root.Chmod("shared", 0o1777))
	check(t, root.WriteFile("shared/rootfile", []byte("operator\n"), 0o644))
	check(t, root.Mkdir("shared/rootdir", 0o755))
	check(t, root.WriteFile("shared/rootdir/f", []byte("operator\n"), 0o644))
	check(t, root.Symlink("rootfile", "shared/rootlink"))
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	for _, n := range []string{"shared/rootfile", "shared/rootlink", "shared/rootdir"} {
		check(t, tw.WriteHeader(&tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: 0o644, Size: 8}))
		tw.Write([]byte("changed\n"))
	}
	check(t, tw.Close())
	check(t, root.WriteFile("ok/sticky.tar", tb.Bytes(), 0o644))
	// the operator's entries: what the attacks must leave as they are
	operators := func() string {
		var b strings.Builder
		for _, p := range []string{"/shared/rootfile", "/shared/rootlink", "/shared/rootdir", "/shared/rootdir/f"} {
			a, err := root.Lstat(p)
			check(t, err)
			fmt.Fprintf(&b, "%s %d %o %d %d %d;", p, a.Ino, a.Mode, a.Uid, a.Size, a.Mtime)
		}
		data, err := root.ReadFile("/shared/rootfile")
		check(t, err)
		return b.String() + string(data)
	}
	before := operators()
	for _, script := range []string{
		`rm -f shared/rootfile`, `rm -rf shared/rootdir`, `rm shared/rootlink`, `rmdir shared/rootdir`, `rm -rf shared`,
		`mv shared/rootfile shared/x`, `mv shared/rootdir shared/y`, `mv shared/rootfile ok/`, `mv ok/file shared/rootfile`,
		`mv ok/file shared/rootlink`, `mkdir ok/d; mv ok/d shared/rootdir`, `ln -f ok/hay shared/rootfile`, `ln -sf x shared/rootlink`,
		`cp -f ok/file shared/rootfile`, `cp ok/file shared/rootlink`, `tar xf ok/sticky.tar`, `tar xf ok/sticky.tar --overwrite`,
		`sed -i s/operator/x/ shared/rootfile`, `gzip shared/rootfile`, `echo x > shared/rootfile`, `echo x >> shared/rootlink`,
		`patch -p0 < ok/ro.diff -d shared`, `cd shared && mv rootfile .hidden`, `find shared -name 'root*' -delete`,
		`find shared -type f -exec rm {} +`, `echo shared/rootfile | xargs rm`, `chmod 777 shared/rootfile`, `touch shared/rootfile`,
	} {
		sh(t, s, script)
		if after := operators(); after != before {
			t.Fatalf("%s changed the operator's entries in its sticky directory:\nbefore %s\nafter  %s", script, before, after)
		}
	}
	// the agent's own entries there are its own: made, renamed, removed
	if out, errs, code := sh(t, s, `echo a > shared/mine && mv shared/mine shared/m2 && rm shared/m2 && mkdir shared/d && mv shared/d shared/e && rmdir shared/e && echo ok`); out != "ok\n" {
		t.Errorf("the agent's own entries: %q %q %d", out, errs, code)
	}
}
