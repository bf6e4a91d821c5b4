package shell

import (
	"errors"
	"fmt"
	"github.com/computerfs/computerfs/internal/benchtab"
	"io/fs"
	"os"
	"path"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/policy"
	"github.com/computerfs/computerfs/spec"
	"github.com/computerfs/computerfs/wsfs"
)

// The secret's content: a shell command, so that sourcing or running the
// file would print it too.
const secret = "echo TOPSECRET"

// policyShell is a shell whose workspace has files under each kind of
// rule, and the workspace without the rules, to look behind the shell's
// back.
func policyShell(t *testing.T) (*Shell, *wsfs.FS) {
	t.Helper()
	_, raw := newShell(t)
	for p, c := range map[string]string{
		"secrets/token": secret, "secrets/sub/deep": secret, "keys/a.pem": secret, "x/y/.env": secret,
		"ro/conf": "original\n", "ro/sub/f": "original\n", "ok/file": "fine\n", "mod/go.mod": "module m\n",
	} {
		check(t, raw.MkdirAll(path.Dir(p), 0o755))
		check(t, raw.WriteFile(p, []byte(c), 0o644))
	}
	c := policy.New(&spec.Policy{
		Deny:          []string{"/secrets", "**/*.pem", ".env"},
		ReadOnlyPaths: []string{"/ro", "**/go.mod"},
	})
	sh := New(raw.WithPolicy(c), Options{})
	return sh, raw
}

func check(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Every way a script might read a denied file through the fast path: the
// output never holds its content.
func TestPolicyFastPathReads(t *testing.T) {
	s, raw := policyShell(t)
	for _, script := range []string{
		`cat secrets/token`, `cat sec""rets/token`, `cat s*/t*`, `cat /workspace/secrets/token`,
		`cd secrets && cat token`, `cd secrets; cat *`, `cd ok && cat ../secrets/token`, `cat ok/../secrets/token`,
		`cat ./secrets//token`, `cat secrets/sub/../token`, `x=secrets; cat $x/token`, `cat $(echo secrets)/token`,
		`cat keys/a.pem`, `cat keys/*`, `cat x/y/.env`, `cat x/*/.env`, `cat x/y/.e*`,
		`ln -s secrets/token l1; cat l1`, `ln -s /workspace/secrets l2; cat l2/token`,
		`ln -s ../secrets ok/l3; cat ok/l3/token`, `ln -s /workspace/keys/a.pem l4; cat l4`,
		`ln -s l5b l5a; ln -s secrets l5b; cat l5a/token`, `ln -s . self; cat self/self/secrets/token`,
		`ln secrets/token hard; cat hard`, `ln keys/a.pem hard2; cat hard2`,
		`mv secrets/token moved; cat moved`, `mv secrets s2; cat s2/token`, `mv keys/a.pem a.txt; cat a.txt`,
		`mv x xx; cat xx/y/.env`, `mv x/y/.env env; cat env`,
		`cp secrets/token c; cat c`, `cp -r secrets cdir; cat cdir/token`, `cp -r keys kdir; cat kdir/*`, `cp -a . /tmp/all; cat /tmp/all/secrets/token`,
		`tar cf - secrets | tar xOf -`, `tar cf /tmp/a.tar .; tar xOf /tmp/a.tar`, `tar czf - . | gunzip | cat`,
		`grep -r TOP .`, `grep -r . .`, `grep -rh . secrets`, `grep TOP secrets/token`, `grep -r TOP /workspace`,
		`find . -type f -exec cat {} \;`, `find . -name token -exec cat {} +`, `find . | xargs cat`, `find / -type f | xargs cat`,
		`head secrets/token`, `tail secrets/token`, `sed -n p secrets/token`, `awk '{print}' secrets/token`,
		`sort secrets/token`, `uniq secrets/token`, `cut -c1- secrets/token`, `tr a a < secrets/token`, `rev secrets/token | rev`,
		`base64 secrets/token | base64 -d`, `gzip -c secrets/token | gunzip`, `diff secrets/token ok/file`, `diff -r secrets ok`,
		`comm secrets/token ok/file`, `paste secrets/token`, `nl secrets/token`, `tac secrets/token`, `md5sum secrets/token; sha256sum secrets/token`,
		`jq -R . secrets/token`, `tee < secrets/token`, `cat < secrets/token`, `echo "$(< secrets/token)"`,
		`while read l; do echo "$l"; done < secrets/token`, `read -r v < secrets/token; echo "$v"`, `exec 3< secrets/token; cat <&3`,
		`. secrets/token`, `source ./secrets/token`, `sh secrets/token`, `bash keys/a.pem`, `mapfile a < secrets/token; echo "${a[@]}"`,
		`ls secrets`, `ls -la secrets/`, `ls -R .`, `tree`, `du -a secrets`, `stat secrets/token`, `readlink -f secrets/token`,
		`wc -c secrets/token`, `ls keys`, `echo secrets/*`, `echo */*`, `echo **/.env`,
	} {
		out, errOut, _ := sh(t, s, script)
		if strings.Contains(out+errOut, "TOPSECRET") {
			t.Errorf("%s: the denied content came out:\n%s%s", script, out, errOut)
		}
		if strings.Contains(out, "sub") && strings.Contains(script, "secrets") && strings.Contains(script, "ls") {
			t.Errorf("%s: a name under a denied directory was listed:\n%s", script, out)
		}
	}
	assertDeniedStay(t, raw)
}

// assertDeniedStay checks, behind the policy's back, that every file with
// the secret's content is still at a denied path and nowhere else.
func assertDeniedStay(t *testing.T, raw *wsfs.FS) {
	t.Helper()
	c := policy.New(&spec.Policy{Deny: []string{"/secrets", "**/*.pem", ".env"}})
	walk(t, raw, "/", func(p string, a kv.Attr) {
		if !a.IsRegular() {
			return
		}
		data, err := raw.ReadFile(p)
		check(t, err)
		if strings.Contains(string(data), "TOPSECRET") && c.Denied(p) == nil {
			t.Errorf("the denied content is readable at %s", p)
		}
	})
	for _, p := range []string{"/secrets/token", "/keys/a.pem"} {
		if data, err := raw.ReadFile(p); err != nil || string(data) != secret {
			t.Errorf("%s: %q, %v: the denied file changed", p, data, err)
		}
	}
}

func walk(t *testing.T, raw *wsfs.FS, dir string, fn func(string, kv.Attr)) {
	t.Helper()
	var ents []kv.Dirent
	check(t, raw.ReadDir(dir, "", func(d kv.Dirent) bool { ents = append(ents, d); return true }))
	for _, d := range ents {
		p := path.Join(dir, d.Name)
		a, err := raw.Lstat(p)
		check(t, err)
		fn(p, a)
		if a.IsDir() {
			walk(t, raw, p, fn)
		}
	}
}

// Every way a script might change a read-only or denied path, or make a
// name a deny rule covers: nothing changes.
func TestPolicyFastPathChanges(t *testing.T) {
	s, raw := policyShell(t)
	check(t, raw.MkdirAll("/other", 0o755))
	before := snapshot(t, raw, "/ro")
	beforeMod := snapshot(t, raw, "/mod")
	for _, script := range []string{
		`echo x > ro/conf`, `echo x >> ro/conf`, `: > ro/conf`, `echo x > /workspace/ro/../ro/conf`, `cd ro && echo x > conf`,
		`rm ro/conf`, `rm -f ro/sub/f`, `rm -rf ro`, `rm -r ro/sub`, `rmdir ro/sub`, `mv ro/conf x1`, `mv ro rox`, `mv ok/file ro/conf`,
		`mv ro/sub other/`, `cp ok/file ro/conf`, `cp -r ok ro/`, `touch ro/new`, `touch ro/conf`, `mkdir ro/d`, `mkdir -p ro/a/b`,
		`ln -s x ro/l`, `ln ok/file ro/hl`, `ln ro/conf hl; echo x > hl`, `chmod 777 ro/conf`, `chmod -R 777 ro`,
		`sed -i s/original/changed/ ro/conf`, `tar cf /tmp/t.tar ok; cd ro && tar xf /tmp/t.tar`, `cp -r ro /tmp/r; tar cf /tmp/r.tar -C /tmp r; tar xf /tmp/r.tar -C / `,
		`ln -s ro rolink; echo x > rolink/conf`, `ln -s /workspace/ro/conf rl2; echo x > rl2`, `mv mod mod2`, `echo x > mod/go.mod`, `mv mod/go.mod m2`,
		`echo x > new.pem`, `touch keys/b.pem`, `mkdir d.pem`, `cp ok/file k.pem`, `mv ok/file ok/f.pem`, `ln -s ok k2.pem`, `echo x > secrets/new`,
		`rm secrets/token`, `rm -rf secrets`, `mv secrets/token secrets/t2`, `echo x > secrets/token`, `chmod 000 secrets/token`, `mkdir x/y/.env2; mv x/y/.env2 x/y/.env`,
		`echo x > .env`, `mkdir -p a/b/.env`, `touch secrets`, `mkdir secrets/d`,
	} {
		sh(t, s, script)
	}
	if after := snapshot(t, raw, "/ro"); after != before {
		t.Errorf("the read-only /ro changed:\nbefore %s\nafter  %s", before, after)
	}
	if after := snapshot(t, raw, "/mod"); after != beforeMod {
		t.Errorf("the read-only go.mod changed:\nbefore %s\nafter  %s", beforeMod, after)
	}
	c := policy.New(&spec.Policy{Deny: []string{"/secrets", "**/*.pem", ".env"}})
	walk(t, raw, "/", func(p string, a kv.Attr) {
		if c.Denied(p) != nil && p != "/secrets" && p != "/secrets/token" && p != "/secrets/sub" && p != "/secrets/sub/deep" &&
			p != "/keys/a.pem" && p != "/x/y/.env" && p != "/xx/y/.env" {
			t.Errorf("%s was made: a deny rule covers it", p)
		}
	})
	assertDeniedStay(t, raw)
}

// snapshot describes a tree: names, modes, sizes, times and contents.
func snapshot(t *testing.T, raw *wsfs.FS, dir string) string {
	var b strings.Builder
	a, err := raw.Lstat(dir)
	check(t, err)
	fmt.Fprintf(&b, "%s %o %d %d;", dir, a.Mode, a.Mtime, a.Ctime)
	walk(t, raw, dir, func(p string, a kv.Attr) {
		fmt.Fprintf(&b, "%s %o %d %d %d", p, a.Mode, a.Size, a.Mtime, a.Nlink)
		if a.IsRegular() {
			data, _ := raw.ReadFile(p)
			fmt.Fprintf(&b, " %q", data)
		}
		b.WriteString(";")
	})
	return b.String()
}

// Allowed paths work as before under the same policy.
func TestPolicyFastPathAllows(t *testing.T) {
	s, raw := policyShell(t)
	out, errOut, code := sh(t, s, `cat ok/file ro/conf mod/go.mod; echo new > ok/new; mv ok/new ok/n2; cp -r ok ok2; ln ok/n2 ok/h; mkdir -p d/e; rm -r ok2; cp ro/conf copy; echo y >> copy; cat copy; ls`)
	if code != 0 || errOut != "" {
		t.Fatalf("status %d: %s", code, errOut)
	}
	for _, w := range []string{"fine", "original", "module m", "keys", "ro", "copy"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "secrets\n") {
		t.Errorf("ls lists the denied secrets:\n%s", out)
	}
	if _, err := raw.Stat("/ok/h"); err != nil {
		t.Error(err)
	}
	// refusals say what a program would
	_, errOut, code = sh(t, s, `cat secrets/token; echo x > ro/conf`)
	if low := strings.ToLower(errOut); code == 0 || !strings.Contains(low, "permission denied") || !strings.Contains(low, "read-only file system") {
		t.Errorf("status %d, stderr %q", code, errOut)
	}
	var rf *policy.Refusal
	_, err := raw.WithPolicy(policy.New(&spec.Policy{Deny: []string{"/secrets"}})).ReadFile("/secrets/token")
	if !errors.As(err, &rf) || !errors.Is(err, fs.ErrPermission) {
		t.Errorf("ReadFile of a denied file: %v", err)
	}
}

// git on the fast path writes the work tree through the same rules:
// checkout, restore, reset, stash, rm and mv cannot change a read-only
// path or make a denied one.
func TestPolicyFastPathGit(t *testing.T) {
	plain, raw := newShell(t)
	setup := `mkdir -p repo/secrets repo/ro repo/ok && cd repo && git init -q && git config user.email a@b && git config user.name a &&
echo "` + secret + `" > secrets/token && echo v1 > ro/conf && echo a > ok/f && git add -A && git commit -qm one &&
echo v2 > ro/conf && rm secrets/token && git add -A && git commit -qm two`
	if out, errOut, code := sh(t, plain, setup); code != 0 {
		t.Fatalf("setup: %d %s %s", code, out, errOut)
	}
	c := policy.New(&spec.Policy{Deny: []string{"/repo/secrets"}, ReadOnlyPaths: []string{"/repo/ro"}})
	s := New(raw.WithPolicy(c), Options{})
	for _, script := range []string{
		`git checkout HEAD~1 -- ro/conf`, `git checkout HEAD~1 -- .`, `git restore --source HEAD~1 ro/conf`, `git restore -s HEAD~1 .`,
		`git reset --hard HEAD~1`, `git checkout -q HEAD~1`, `git switch -q -c old HEAD~1`, `git checkout -f HEAD~1`,
		`echo b > ok/f; git stash`, `git rm -q ro/conf`, `git rm -rq ro`, `git mv ro/conf ok/c`, `git mv ro ro2`,
	} {
		sh(t, s, "cd repo && "+script)
		if data, err := raw.ReadFile("/repo/ro/conf"); err != nil || string(data) != "v2\n" {
			t.Fatalf("%s: the read-only ro/conf is now %q, %v", script, data, err)
		}
		if _, err := raw.Lstat("/repo/secrets/token"); err == nil {
			t.Fatalf("%s: wrote the denied secrets/token", script)
		}
	}
}

// benchRules are ten globs of the kinds policies use.
var benchRules = &spec.Policy{
	Deny:          []string{"/secrets", "**/*.pem", "**/.env", "/private/**", "*.key"},
	ReadOnlyPaths: []string{"/vendor", "**/go.sum", "/.github", "/ro/**", "Makefile"},
}

// benchAgent is the agent identity of the benchmarks: an unprivileged
// host uid and gid that owns the workspace's files.
const benchAgent = 200000

// BenchmarkPolicyFastPath measures what the agent identity and the path
// rules cost the fast path: the same scripts (cat of 1,000 small files in
// 20 directories three levels down, grep -rn over them, find, ls -lR, a
// loop writing 500 files) on one store through the four workspaces the
// daemon could build: as root (the old default) and as the agent (owner
// the agent's identity, ForAgent: what exec.go builds), each without path
// rules and with ten (benchRules). The variants alternate within every
// round, in an order that turns each round, so that the machine's noise
// falls on all of them alike. It prints two tables, of the CPU time the
// process spent on each run (the measure: on a loaded machine wall time
// is mostly other processes') and of wall time: the median of each
// variant and the median of the ratios of runs next to each other in time,
// with their interquartile range (the noise). BENCH_POLICY_ROUNDS sets
// the rounds (default 31).
//
//	go test -run '^$' -bench PolicyFastPath -benchtime 1x ./sandbox/shell/
func BenchmarkPolicyFastPath(b *testing.B) {
	_, raw := newShell(b)
	st := raw.Store()
	agent := wsfs.New(st, wsfs.Owner{UID: benchAgent, GID: benchAgent})
	check(b, agent.Lchown("/", benchAgent, benchAgent))
	for d := range 20 {
		dir := fmt.Sprintf("/src/pkg%02d/sub", d)
		check(b, agent.MkdirAll(dir, 0o755))
		for f := range 50 {
			check(b, agent.WriteFile(fmt.Sprintf("%s/f%02d.go", dir, f), []byte("package sub\n\nfunc F() {}\n"), 0o644))
		}
	}
	rules := policy.New(benchRules)
	root := wsfs.New(st, wsfs.Owner{})
	asAgent := Options{UID: benchAgent, GID: benchAgent}
	names := []string{"root", "root+rules", "agent", "agent+rules"}
	shells := []*Shell{
		New(root, Options{}),
		New(root.WithPolicy(rules), Options{}),
		New(agent.ForAgent(), asAgent),
		New(agent.ForAgent().WithPolicy(rules), asAgent), // what the daemon runs
	}
	workloads := []struct{ name, script, want, cleanup string }{
		{"cat 1,000 files", `cat src/*/*/*.go | wc -l`, "3000\n", ""},
		{"grep -rn", `grep -rn func src | wc -l`, "1000\n", ""},
		{"find", `find src | wc -l`, "1041\n", ""},
		{"ls -lR", `ls -lR src | wc -l`, "1162\n", ""},
		{"write 500 files", `mkdir w && for i in $(seq 500); do echo x > w/f$i; done; echo ok`, "ok\n", "rm -rf w"},
	}
	rounds := benchRounds(b, 31)
	for b.Loop() {
		var rows []benchtab.Row[benchSample]
		for _, w := range workloads {
			run := func(v int) benchSample {
				runtime.GC() // the garbage of the run before is not this one's
				cpu0, start := processCPU(b), time.Now()
				out, errOut, code := sh(b, shells[v], w.script)
				s := benchSample{wall: time.Since(start), cpu: processCPU(b) - cpu0}
				if code != 0 || out != w.want {
					b.Fatalf("%s, %s: status %d, %q %q", names[v], w.name, code, out, errOut)
				}
				if w.cleanup != "" {
					if _, errOut, code := sh(b, shells[0], w.cleanup); code != 0 {
						b.Fatalf("%s: %s", w.cleanup, errOut)
					}
				}
				return s
			}
			rows = append(rows, benchtab.Row[benchSample]{Name: w.name, Runs: benchtab.Interleave(len(names), rounds, run)})
		}
		ratios := []benchtab.Pair{benchtab.Of(1, 0), benchtab.Of(3, 2), benchtab.Of(2, 0), benchtab.Of(3, 0)}
		title := fmt.Sprintf("fast path (in-process shell), %d rounds", rounds)
		fmt.Println("\n" + benchtab.Table(title+", CPU time", names, rows, ratios, benchCPU))
		fmt.Println(benchtab.Table(title+", wall time", names, rows, ratios, benchWall))
		for i, r := range rows {
			q := benchtab.Ratios(r.Runs, benchtab.Of(3, 2), benchCPU)
			b.ReportMetric(q[len(q)/2], fmt.Sprintf("rules/none-cpu-%d", i))
		}
	}
}

// processCPU is the CPU time the process has used, all threads.
func processCPU(b *testing.B) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ts.Nano())
}

// benchSample is one timed run.
type benchSample struct{ wall, cpu time.Duration }

func benchCPU(s benchSample) time.Duration  { return s.cpu }
func benchWall(s benchSample) time.Duration { return s.wall }

// benchRounds is BENCH_POLICY_ROUNDS, or def.
func benchRounds(b *testing.B, def int) int {
	if n, err := strconv.Atoi(os.Getenv("BENCH_POLICY_ROUNDS")); err == nil && n > 0 {
		return n
	}
	return def
}
