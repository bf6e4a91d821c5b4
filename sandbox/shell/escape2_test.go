package shell

import (
	"archive/tar"
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/computerfs/computerfs/kv"
)

// TestFastPathConfinement is the escape battery of the fast path. It has
// no /proc/self/status to look at: it asserts what the fast path really
// confines. No host file is read (a secret file on the host stays out of
// every output), none is written or changed (a marker directory on the
// host stays as it is), no host process is started (the test process
// gains no child), no connection is made (a listener on the host's
// loopback accepts none), and the daemon's pid, environment and user
// database stay out of reach.
func TestFastPathConfinement(t *testing.T) {
	s, fs := newShell(t)
	hostDir := t.TempDir()
	secretFile := filepath.Join(hostDir, "secret")
	const secret = "hunter2-host-secret"
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("COMPUTERFS_TEST_SECRET", secret)
	t.Setenv("BASH_ENV", secretFile)
	t.Setenv("ENV", secretFile)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	var udpGot atomic.Int32
	go func() {
		buf := make([]byte, 100)
		for {
			if _, _, err := udp.ReadFrom(buf); err != nil {
				return
			}
			udpGot.Add(1)
		}
	}()
	uport := strconv.Itoa(udp.LocalAddr().(*net.UDPAddr).Port)

	// links planted in the workspace, pointing at the host
	for _, l := range [][2]string{
		{secretFile, "abs-secret"},
		{hostDir, "abs-dir"},
		{strings.Repeat("../", 20) + strings.TrimPrefix(secretFile, "/"), "rel-secret"},
		{"/proc/self/root" + secretFile, "proc-root"},
		{"/proc/self/cwd", "proc-cwd"},
		{"/", "root"},
	} {
		if err := fs.Symlink(l[0], l[1]); err != nil {
			t.Fatal(err)
		}
	}
	tarEvil := tarBytes(t, []tar.Header{
		{Name: hostDir + "/planted-abs", Typeflag: tar.TypeReg, Mode: 0o644},
		{Name: "../../../../../../" + strings.TrimPrefix(hostDir, "/") + "/planted-rel", Typeflag: tar.TypeReg, Mode: 0o644},
		{Name: "lnk", Typeflag: tar.TypeSymlink, Linkname: hostDir},
		{Name: "lnk/planted-link", Typeflag: tar.TypeReg, Mode: 0o644},
		{Name: "hard", Typeflag: tar.TypeLink, Linkname: secretFile},
	})
	if err := fs.WriteFile("evil.tar", tarEvil, 0o644); err != nil {
		t.Fatal(err)
	}
	h := secretFile
	d := hostDir
	scripts := []string{
		// reads
		"cat " + h, "cat abs-secret rel-secret proc-root", "cat abs-dir/secret", "cat root" + h,
		"cat /proc/self/root" + h, "cd /proc/self/root && cat ." + h, "cd / && cat ." + h,
		"cd " + d + "; cat secret", "cat ../../.." + h, "cat /workspace/../.." + h,
		"cat < " + h, "x=$(< " + h + "); echo $x", "read x < " + h + "; echo $x",
		"mapfile a < " + h + "; echo ${a[@]}", "readarray a < " + h + "; echo ${a[@]}",
		"while read l; do echo $l; done < abs-secret", "exec 3< " + h + "; cat <&3",
		"source " + h, ". " + h, "source abs-secret", "eval \"$(cat " + h + ")\"",
		"command -p cat " + h, "builtin cat " + h, "enable -n cat; cat " + h, "enable cat; cat " + h,
		"PATH=/usr/bin:/bin cat " + h, "PATH=" + d + " secret", "PATH=/ ; cat " + h, "hash -p /bin/cat c; c " + h,
		"BASH_ENV=" + h + " bash -c true", "ENV=" + h + " sh -i -c true", "bash -c true", "sh -c 'echo $ENV $BASH_ENV'",
		"env", "set", "export -p", "declare -x", "printenv", "echo $COMPUTERFS_TEST_SECRET", "env -i sh -c env",
		"cat <(cat " + h + ")", "diff " + h + " /dev/null", "diff -r " + d + " .", "cmp " + h + " x",
		"cp " + h + " x; cat x", "cp -r " + d + " y; cat y/secret", "cp -rL abs-dir z; cat z/secret", "cp -a abs-dir w; cat w/secret",
		"ln " + h + " hard; cat hard", "mv " + h + " m; cat m", "tar cf - " + d + " | tar xOf -", "tar chf - abs-dir | tar xOf -",
		"tar cf - abs-secret | tar xOf -", "gzip -c " + h + " | zcat", "grep -r hunter " + d, "grep -R hunter .", "grep -r hunter root/",
		"find " + d, "find -L . -name secret -exec cat {} \\;", "ls -la " + d, "ls -R root/", "du -a " + d, "stat " + h,
		"head " + h, "tail " + h, "sort " + h, "wc " + h, "md5sum " + h, "base64 " + h + " | base64 -d",
		"sed -n p " + h, "sed -n '1r " + h + "' evil.tar", "awk '{print}' " + h, "awk 'BEGIN{while((getline l < \"" + h + "\")>0) print l}'",
		"awk -f " + h, "jq -R . " + h, "jq -n --rawfile x " + h + " '$x'", "jq -n --slurpfile x " + h + " '$x'", "jq -n 'env'",
		"jq -n '$ENV'", "jq -n 'input' " + h, "grep -f " + h + " evil.tar", "xargs -a " + h + " echo",
		"git -C " + d + " status", "git init -q g && cd g && git remote add o " + d + " && git fetch o", "git clone " + d + " c",
		"git init -q g2 && cd g2 && git config core.fsmonitor 'cat " + h + "' && git status",
		"git init -q g3 && cd g3 && git config core.hooksPath " + d + " && git commit --allow-empty -m x",
		"readlink -f abs-secret; realpath abs-secret", "echo ~root ~daemon ~nobody ~$(id -un)",
		"cat /etc/passwd; echo ~bin",
		"echo " + h + "*", "echo " + d + "/*", "echo /proc/*/environ", "echo root/*",
		"trap 'cat " + h + "' EXIT", "ulimit -a", "umask 000; touch u",
		// writes
		"echo x > " + d + "/w1", "echo x >> abs-secret", "echo x > abs-dir/w2", "touch " + d + "/w3", "mkdir " + d + "/w4",
		"cp evil.tar " + d + "/", "cp evil.tar abs-dir/", "mv evil.tar abs-dir/ 2>/dev/null; cp abs-dir/evil.tar .",
		"ln -s x " + d + "/w5", "tar xf evil.tar", "tar xf evil.tar -C " + d, "tar xPf evil.tar", "tar xf evil.tar -C abs-dir",
		"rm -rf " + d + "/secret", "rm -rf abs-dir/", "rm -rf root/", "chmod 777 " + h, "chmod -R 777 abs-dir/", "touch -d 2000-01-01 " + h,
		"sed -i s/hunter/x/ " + h, "sed -i s/hunter/x/ abs-secret", "sed -n 'w " + d + "/w6' evil.tar", "tee " + d + "/w7 < /dev/null",
		"gzip abs-secret", "gunzip -c evil.tar > " + d + "/w8", "split -b 1 abs-secret " + d + "/w9", "mktemp -p " + d,
		"cd abs-dir && echo x > w10", "cd /proc/self/root" + d + " && touch w11",
		"git init -q " + d + "/repo", "awk 'BEGIN{print 1 > \"" + d + "/w12\"}'", "echo x > /dev/tcp/127.0.0.1/" + port,
		// processes and network
		"exec /bin/true", "/bin/sh -c 'touch " + d + "/p1'", "python3 -c 1", "nohup true", "timeout 1 true",
		"kill -0 " + strconv.Itoa(os.Getpid()), "kill -STOP " + strconv.Itoa(os.Getpid()), "kill 0", "kill -9 -1",
		"coproc cat", "exec 3<>/dev/tcp/127.0.0.1/" + port, "cat < /dev/tcp/127.0.0.1/" + port, "echo x > /dev/udp/127.0.0.1/" + uport,
		"curl http://127.0.0.1:" + port, "wget -O- 127.0.0.1:" + port, "nc 127.0.0.1 " + port, "git clone http://127.0.0.1:" + port + "/x",
		"git ls-remote git://127.0.0.1:" + port + "/x", "git ls-remote ssh://127.0.0.1:" + port + "/x",
		"echo $$ $PPID $BASHPID", "echo $HOME $UID $EUID; unset HOME UID; sh -c 'echo $HOME $UID'",
	}
	before := hostListing(t, hostDir)
	children := childCount(t)
	pid, ppid := strconv.Itoa(os.Getpid()), strconv.Itoa(os.Getppid())
	for _, script := range scripts {
		var out bytes.Buffer
		res, err := s.Exec(context.Background(), script, ExecOptions{Stdout: &out, Stderr: &out, Timeout: 20 * time.Second})
		if err != nil {
			t.Errorf("%q: %v", script, err)
			continue
		}
		if res.Stopped == "timeout" {
			t.Errorf("%q: timed out", script)
		}
		all := out.String()
		if strings.Contains(all, secret) {
			t.Errorf("%q read the host's secret:\n%s", script, all)
		}
		for _, f := range strings.Fields(all) {
			if f == pid || f == ppid {
				t.Errorf("%q shows the daemon's pid: %q", script, all)
			}
		}
		if strings.Contains(all, "/root") && strings.Contains(script, "~") || strings.Contains(all, "daemon:x:") || strings.Contains(all, "/nologin") {
			t.Errorf("%q shows the host's user database: %q", script, all)
		}
		if after := hostListing(t, hostDir); after != before {
			t.Fatalf("%q changed the host directory:\nbefore %s\nafter  %s", script, before, after)
		}
		if n := childCount(t); n != children {
			t.Errorf("%q: the test process has %d children (had %d)", script, n, children)
		}
		if accepted.Load() != 0 || udpGot.Load() != 0 {
			t.Fatalf("%q connected to the host's network", script)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if accepted.Load() != 0 || udpGot.Load() != 0 {
		t.Fatal("a script connected to the host's network")
	}
}

// hostTree lists a host directory: names, sizes, modes and times.
func hostListing(t *testing.T, dir string) string {
	var b strings.Builder
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		b.WriteString(p + " " + fi.Mode().String() + " " + strconv.FormatInt(fi.Size(), 10) + " " + fi.ModTime().String() + "\n")
		return nil
	})
	return b.String()
}

// childCount is how many children the test process has.
func childCount(t *testing.T) int {
	n := 0
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	for _, f := range tasks {
		data, _ := os.ReadFile(f)
		n += len(strings.Fields(string(data)))
	}
	return n
}

func tarBytes(t *testing.T, hs []tar.Header) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range hs {
		h := h
		h.Format = tar.FormatGNU
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
	}
	tw.Close()
	return buf.Bytes()
}

// TestNoSetIDFiles: nothing the fast path makes is setuid or setgid (on
// the mount they would be the owner's programs), nor sticky; a
// directory keeps setgid and sticky, as on a nosuid mount.
func TestNoSetIDFiles(t *testing.T) {
	s, fs := newShell(t)
	var hs []tar.Header
	for i, m := range []int64{0o4755, 0o2755, 0o6755, 0o1644, 0o7777} {
		hs = append(hs, tar.Header{Name: "t" + strconv.Itoa(i), Typeflag: tar.TypeReg, Mode: m})
	}
	hs = append(hs, tar.Header{Name: "tdir", Typeflag: tar.TypeDir, Mode: 0o3775})
	if err := fs.WriteFile("suid.tar", tarBytes(t, hs), 0o644); err != nil {
		t.Fatal(err)
	}
	script := `set -e
echo x > f; chmod 4755 f; chmod u+s,g+s f; chmod 6777 f
echo y > g; chmod +t g; chmod 1777 g
mkdir -m 4777 d1; mkdir d2; chmod 7777 d2; mkdir -m 2775 d3
cp -p f f2; cp -a f f3; install -m 4755 f f4 2>/dev/null || cp f f4
mkdir x; cd x; tar xpf ../suid.tar; tar xf ../suid.tar --same-permissions; cd ..
echo z > /tmp/t; chmod 4755 /tmp/t; cp -p /tmp/t tt; mv /tmp/t tm
gzip -c f > f.gz; chmod 4755 f.gz; gunzip -f f.gz
`
	if out, errs, code := sh(t, s, script); code != 0 {
		t.Fatalf("%d %s %s", code, out, errs)
	}
	var walk func(p string)
	walk = func(p string) {
		fs.ReadDir(p, "", func(d kv.Dirent) bool {
			q := strings.TrimPrefix(p+"/"+d.Name, "/")
			a, err := fs.Lstat(q)
			if err != nil {
				t.Fatal(err)
			}
			isDir := a.Mode&kv.S_IFMT == kv.S_IFDIR
			switch {
			case !isDir && a.Mode&(kv.S_ISUID|kv.S_ISGID|kv.S_ISVTX) != 0:
				t.Errorf("%s: mode %o: a setuid, setgid or sticky file", q, a.Mode)
			case isDir && a.Mode&kv.S_ISUID != 0:
				t.Errorf("%s: mode %o: a setuid directory", q, a.Mode)
			}
			if isDir {
				walk(q)
			}
			return true
		})
	}
	walk("")
	// what stays: the permission bits, setgid and sticky on directories
	if out, _, _ := sh(t, s, "stat -c '%a %n' f2 f3 g d2 x/tdir x/t0 tt; stat -c %a d3 | cut -c1"); out != "777 f2\n777 f3\n777 g\n3777 d2\n3775 x/tdir\n755 x/t0\n755 tt\n2\n" {
		t.Errorf("modes kept: %q", out)
	}
	// /tmp too
	if out, _, _ := sh(t, s, "echo a > /tmp/s; chmod 6755 /tmp/s; stat -c %a /tmp/s"); out != "755\n" {
		t.Errorf("/tmp setuid: %q", out)
	}
}

// TestTildeUser: ~user answers from the workspace's users, never from the
// host's user database.
func TestTildeUser(t *testing.T) {
	s, fs := newShell(t)
	for script, want := range map[string]string{
		`echo ~`:                       "/workspace\n",
		`echo ~root/x`:                 "/workspace/x\n", // the fast path's user is root here: its home is the workspace
		`echo ~daemon ~bin/x ~nobody`:  "~daemon ~bin/x ~nobody\n",
		`echo ~$(whoami)`:              "~root\n", // as bash: a tilde is expanded before the substitution
		`cd ~; pwd`:                    "/workspace\n",
		`x=~nobody; echo $x`:           "~nobody\n",
		`echo ~+ ~-`:                   "~+ ~-\n",
		`unset HOME; sh -c 'echo ~'`:   "~\n",
		`HOME=/tmp; echo ~ ~root`:      "/tmp /workspace\n",
		`echo "$(getent passwd 2>&1)"`: "bash: line 1: getent: command not found\n",
	} {
		out, errs, _ := sh(t, s, script)
		if out+errs != want && out != want {
			t.Errorf("%s: %q %q, want %q", script, out, errs, want)
		}
	}
	other := New(fs, Options{UID: 1000, GID: 1000})
	if out, _, _ := sh(t, other, `echo ~user ~root`); out != "/workspace ~root\n" {
		t.Errorf("uid 1000: %q", out)
	}
}

// TestSymlinkWalks: commands that walk trees treat links as GNU does (cp
// -r copies them as links, -L follows, -H follows operands; grep -r
// skips them, -R follows) and a loop of links or a link to / never
// makes a walk endless or leave the workspace.
func TestSymlinkWalks(t *testing.T) {
	s, _ := newShell(t)
	setup := `rm -rf src srclink b && mkdir -p src/d && echo f > src/d/f && ln -s d src/dl && ln -s .. src/up && ln -s / src/root && ln -s . src/self && ln -s d/f src/fl && ln -s src srclink`
	if _, errs, code := sh(t, s, setup); code != 0 {
		t.Fatal(errs)
	}
	cases := []struct{ script, want string }{
		{`cp -r src a && find a | sort && readlink a/dl a/root a/up`, "a\na/d\na/d/f\na/dl\na/fl\na/root\na/self\na/up\nd\n/\n..\n"},
		{`cp -R src a && [ -L a/dl ] && [ -L a/root ] && echo links`, "links\n"},
		{`cp -a src a && [ -L a/dl ] && [ -L a/fl ] && echo links`, "links\n"},
		{`cp -r srclink a && [ -L a ] && echo link`, "link\n"}, // -r: the operand is copied as a link too
		{`cp -rH srclink a && [ -d a ] && [ ! -L a ] && [ -L a/dl ] && echo followed-operand`, "followed-operand\n"},
		{`cp -rL src/d a && [ -f a/f ] && echo ok`, "ok\n"},
		{`cp srclink/fl a && [ -f a ] && [ ! -L a ] && cat a`, "f\n"}, // not recursive: follows
		{`grep -r f src | sort`, "src/d/f:f\n"},
		{`grep -R -l f src 2>/dev/null | sort | head -3`, "src/d/f\nsrc/dl/f\nsrc/fl\n"},
		{`find src | wc -l`, "8\n"},
		{`find -L src/d src/fl | sort`, "src/d\nsrc/d/f\nsrc/fl\n"},
		{`du -s src > /dev/null && echo ok`, "ok\n"},
		{`chmod -R 700 src && stat -c %a src/d/f && stat -c %a src/d`, "700\n700\n"},
		{`ls -R src > /dev/null && echo ok`, "ok\n"},
		{`tar cf t.tar src && tar tvf t.tar | grep -c '^l'`, "5\n"},
		{`rm -r srclink && [ -d src/d ] && echo kept`, "kept\n"},
		{`rm -r src/root && ls / | wc -l`, "3\n"},
	}
	for _, tc := range cases {
		var out, errb bytes.Buffer
		start := time.Now()
		_, err := s.Exec(context.Background(), "set -e; rm -rf a t.tar; "+tc.script, ExecOptions{Stdout: &out, Stderr: &errb, Timeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if out.String() != tc.want {
			t.Errorf("%s: %q (stderr %q), want %q", tc.script, out.String(), errb.String(), tc.want)
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("%s: took %v", tc.script, took)
		}
		if _, errs, code := sh(t, s, setup); code != 0 {
			t.Fatal(errs)
		}
	}
	// loops followed with -L end, with GNU's complaint, and in the workspace
	for _, script := range []string{`cp -rL src b`, `find -L src > /dev/null`, `grep -R x src`, `du -L src`, `ls -RL src`, `tree -l src`, `chmod -R -L 755 src`} {
		var out bytes.Buffer
		start := time.Now()
		res, err := s.Exec(context.Background(), script, ExecOptions{Stdout: &out, Stderr: &out, Timeout: 20 * time.Second})
		if err != nil || res.Stopped != "" {
			t.Errorf("%s: %v %+v", script, err, res)
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("%s: took %v", script, took)
		}
	}
	if out, _, _ := sh(t, s, `ls b/root 2>/dev/null | head -3`); strings.Contains(out, "etc") || strings.Contains(out, "usr") {
		t.Errorf("cp -rL of a link to / reached the host: %q", out)
	}
}

// TestSparseCopy: cp of a sparse file keeps its holes.
func TestSparseCopy(t *testing.T) {
	s, fs := newShell(t)
	f, err := fs.Open("sparse", O_RDWR|O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(64 << 20)
	f.Seek(32<<20, 0)
	f.Write([]byte("middle"))
	f.Close()
	if _, errs, code := sh(t, s, "cp sparse copy && cp sparse /tmp/c && cp /tmp/c back && md5sum < sparse > /tmp/s && md5sum < copy > /tmp/c2 && md5sum < back > /tmp/b && diff /tmp/s /tmp/c2 && diff /tmp/s /tmp/b"); code != 0 {
		t.Fatal(errs)
	}
	for _, p := range []string{"copy", "back"} {
		a, err := fs.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if a.Size != 64<<20 || a.Blocks*512 > 1<<20 {
			t.Errorf("%s: size %d, %d blocks: the holes were written", p, a.Size, a.Blocks)
		}
	}
}
