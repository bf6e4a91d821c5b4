package shell

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/wsfs"
)

// runaways are never-ending or huge instances of every command of the
// fast path. Every built-in must have at least one (TestRunawaysCoverEveryCommand),
// so that a new command cannot be forgotten.
var runaways = map[string][]string{
	"awk":       {`awk 'BEGIN{while(1);}'`, `awk 'BEGIN{while(1) s=s "x"}'`, `awk '{print}' /dev/zero > /dev/null`, `yes | awk '{n++}'`},
	"gawk":      {`gawk 'BEGIN{for(;;) a[i++]=i}'`},
	"mawk":      {`mawk 'BEGIN{for(;;) x++}'`},
	"nawk":      {`nawk 'BEGIN{while(1) printf "%*d", 1000000, 1}' > /dev/null`},
	"base64":    {`base64 /dev/zero > /dev/null`, `base64 -d /dev/zero`},
	"basename":  {`while :; do basename a/b; done`},
	"bash":      {`bash -c 'while :; do :; done'`, `bash -c 'f(){ f; }; f'`},
	"sh":        {`sh -c 'cat /dev/zero' > /dev/null`},
	"dash":      {`yes 'while :; do :; done' | dash`},
	"cat":       {`cat /dev/zero > /dev/null`, `cat sparse > copy`, `cat /dev/zero | cat | cat > /dev/null`},
	"chgrp":     {`while :; do chgrp 0 f; done`},
	"chown":     {`while :; do chown -R 0 .; done`},
	"chmod":     {`while :; do chmod -R u+w .; done`, `chmod -R 644 loop`},
	"comm":      {`comm /dev/zero /dev/zero`},
	"cp":        {`cp sparse copy`, `cp /dev/zero copy`, `cp -r . /tmp/x`, `cp -rL loop /tmp/y`},
	"cut":       {`cut -c1 /dev/zero`, `yes | cut -c1 > /dev/null`},
	"date":      {`while :; do date; done > /dev/null`},
	"diff":      {`diff sparse /dev/zero`, `diff <(yes) <(yes a)`},
	"dirname":   {`while :; do dirname a/b; done`},
	"du":        {`while :; do du -s . ; done`, `du -L loop`},
	"egrep":     {`egrep x /dev/zero`},
	"fgrep":     {`yes | fgrep -c x`},
	"grep":      {`grep x /dev/zero`, `grep -r x .`, `grep -R x loop`, `grep -c x sparse`},
	"rg":        {`rg x /dev/zero`, `rg x`, `rg -L x loop`, `rg -c x sparse`, `yes | rg -c y`, `rg -uu --no-require-git x`},
	"env":       {`env sh -c 'while :; do :; done'`},
	"printenv":  {`while :; do printenv HOME; done > /dev/null`},
	"find":      {`while :; do find . > /dev/null; done`, `find -L loop`, `find . -exec sleep 1000 \;`},
	"git":       {`git init -q r && cd r && cp ../sparse s && git add s`, `while :; do git status; done`},
	"gzip":      {`gzip -c /dev/zero > /dev/null`, `gzip -c sparse > s.gz`},
	"gunzip":    {`yes | gunzip`, `gzip -c /dev/zero | gunzip > /dev/null`},
	"zcat":      {`gzip -c /dev/zero | zcat > /dev/null`},
	"head":      {`head -c 1000000000000 /dev/zero > /dev/null`, `head -n -1 /dev/zero`},
	"hostname":  {`while :; do hostname; done`},
	"id":        {`while :; do id; done`},
	"jq":        {`jq -n '[range(1e9)]'`, `jq -n 'def f: f; f'`, `jq -n 'repeat(1)' > /dev/null`, `jq -n '"x" * 1e9'`, `jq -n 'reduce range(1e9) as $i ([]; .+[$i])'`, `jq -n '[limit(1e9; repeat(1))]'`, `yes '{}' | jq . > /dev/null`, `jq . /dev/zero`, `jq -n '[range(2000000) | 0] as $x | $x | .[$x[:1000000]]'`},
	"ln":        {`while :; do ln -sf a b; done`},
	"ls":        {`ls -R loop`, `while :; do ls -laR . ; done > /dev/null`},
	"md5sum":    {`md5sum /dev/zero`, `md5sum sparse`},
	"sha1sum":   {`sha1sum /dev/zero`},
	"sha256sum": {`sha256sum /dev/zero`},
	"sha512sum": {`sha512sum sparse`},
	"mkdir":     {`while :; do mkdir -p a/b/c/d/e/f/g/h; done`, `mkdir -p $(printf 'd/%.0s' {1..3000})`},
	"mktemp":    {`while :; do mktemp; done > /dev/null`},
	"mv":        {`while :; do mv f g; mv g f; done`},
	"nl":        {`nl /dev/zero`, `yes | nl > /dev/null`},
	"nproc":     {`while :; do nproc; done > /dev/null`},
	"paste":     {`paste /dev/zero /dev/zero`, `yes | paste - - > /dev/null`},
	"readlink":  {`while :; do readlink -f loop; done > /dev/null`},
	"realpath":  {`while :; do realpath loop/x; done > /dev/null`},
	"rev":       {`rev /dev/zero`, `yes | rev > /dev/null`},
	"rm":        {`while :; do mkdir -p x/y; rm -r x; done`, `rm -r loop/`},
	"rmdir":     {`while :; do mkdir x; rmdir x; done`},
	"sed":       {`sed p /dev/zero`, `echo x | sed ':a;ba'`, `echo x | sed ':a;H;x;G;ba'`, `yes | sed s/y/n/ > /dev/null`},
	"seq":       {`seq 1 1e18 > /dev/null`, `seq 1e18 | sort`},
	"sleep":     {`sleep 1000`, `sleep infinity`},
	"sort":      {`sort /dev/zero`, `yes | sort`, `seq 1e18 | sort -n`},
	"stat":      {`while :; do stat f; done > /dev/null`},
	"sync":      {`while :; do sync; done`},
	"tac":       {`tac /dev/zero`, `yes | tac`},
	"tail":      {`tail -f f`, `tail /dev/zero`, `yes | tail -n 1`, `tail -c 1 sparse`},
	"tar":       {`tar cf t.tar sparse`, `tar cf - . | tar tf - > /dev/null`, `tar cf - /dev/zero > /dev/null`},
	"tee":       {`tee x < /dev/zero`, `yes | tee /tmp/t > /dev/null`},
	"touch":     {`while :; do touch f; done`},
	"tr":        {`tr a b < /dev/zero > /dev/null`, `yes | tr y n > /dev/null`},
	"tree":      {`tree loop`, `while :; do tree; done > /dev/null`},
	"uname":     {`while :; do uname -s; done > /dev/null`},
	"uniq":      {`uniq /dev/zero`, `yes | uniq`},
	"wc":        {`wc /dev/zero`, `wc -l sparse`, `yes | wc -l`},
	"which":     {`while :; do which ls; done > /dev/null`},
	"whoami":    {`while :; do whoami; done > /dev/null`},
	"xargs":     {`yes | xargs echo > /dev/null`, `yes | xargs -n1 sleep`},
	"yes":       {`yes > /dev/null`, `yes | head -c 1000000000000 > /dev/null`},
}

// shellRunaways are never-ending or huge scripts of the shell itself.
var shellRunaways = []string{
	`while :; do :; done`,
	`seq 1e18 | while read l; do :; done`,
	`for ((;;)); do :; done`,
	`until false; do :; done`,
	`sleep 1000 | read x`,
	`read x < /dev/stdin; cat`, // stdin is a pipe that never ends: see runRunaway
	`read -r x < /dev/zero`,
	`f(){ f|f& }; f`,
	`f(){ f; }; f`,
	`f(){ echo $(f); }; f`,
	`x=$(cat /dev/zero)`,
	`x=$(yes)`,
	`x=$(</dev/zero)`,
	`x=a; while :; do x=$x$x; done`,
	`a=(); while :; do a+=($RANDOM); done`,
	`declare -A m; i=0; while :; do m[$((i++))]=xxxxxxxxxxxxxxxxxxxx; done`,
	`x=$(printf '%01000000d' {1..1000}); echo ${#x}`,
	`printf '%01000000d' {1..100000} > /dev/null`,
	`eval "$(yes 'echo' | head -c 100000000)"`,
	`eval "$(yes '(' | head -n 100000 | tr -d '\n')"`,
	`eval "$(yes '{' | head -n 100000 | tr -d '\n')"`,
	`eval "$(yes 'if true; then' | head -n 100000)"`,
	`eval "$(yes '$(' | head -n 100000 | tr -d '\n')"`,
	`eval "$(yes '$((' | head -n 100000 | tr -d '\n')"`,
	`bash -c "$(yes '(' | head -n 100000 | tr -d '\n')"`,
	`echo {1..100000000}`,
	`echo {1..10000}{1..10000}`,
	`echo /*/*/*/*/*/*/*/*/*/*`,
	`echo loop/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*`,
	`cat <(yes) > /dev/null`,
	`yes > >(cat > /dev/null)`,
	`yes | yes | yes | head -c 100000000000 > /dev/null`,
	`while :; do echo > /dev/null & done`,
	`x=$(seq 1e18)`,
	`: $((2**62)); while :; do : $((i++)); done`,
}

// TestRunawaysCoverEveryCommand: every built-in has a runaway.
func TestRunawaysCoverEveryCommand(t *testing.T) {
	for _, name := range Builtins() {
		if len(runaways[name]) == 0 {
			t.Errorf("built-in %q has no runaway in runaways: add a never-ending or huge instance of it", name)
		}
	}
}

// endless is a stdin that never ends and never gives anything.
type endless struct{ ctx context.Context }

func (e endless) Read([]byte) (int, error) {
	<-e.ctx.Done()
	return 0, e.ctx.Err()
}

// TestRunaways runs every runaway under a short timeout: each call must
// return within the timeout and some slack, and once it has returned
// the work behind it must stop: no goroutine left, no write to the
// workspace, no CPU burnt.
func TestRunaways(t *testing.T) {
	s, fs := newShell(t)
	setupRunaways(t, fs)
	var scripts []string
	names := make([]string, 0, len(runaways))
	for n := range runaways {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		scripts = append(scripts, runaways[n]...)
	}
	scripts = append(scripts, shellRunaways...)
	if testing.Short() {
		scripts = scripts[:20]
	}
	base, _ := shellGoroutines()
	const timeout = time.Second
	for _, script := range scripts {
		t.Run(strings.ReplaceAll(script, "/", "∕"), func(t *testing.T) {
			runRunaway(t, s, fs, script, timeout, base)
		})
	}
}

func setupRunaways(t *testing.T, fs *wsfs.FS) {
	f, err := fs.Open("sparse", O_RDWR|O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 40); err != nil { // a TiB of holes
		t.Fatal(err)
	}
	f.Close()
	if err := fs.WriteFile("f", []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// loop/self -> .. : a loop; loop/root -> / : the namespace's root
	if err := fs.Mkdir("loop", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, l := range [][2]string{{"..", "loop/up"}, {".", "loop/self"}, {"/", "loop/root"}, {"/workspace/loop", "loop/abs"}} {
		if err := fs.Symlink(l[0], l[1]); err != nil {
			t.Fatal(err)
		}
	}
}

// runRunaway runs one runaway and checks that it ends, and that its work ends.
func runRunaway(t *testing.T, s *Shell, fs *wsfs.FS, script string, timeout time.Duration, base int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb bytes.Buffer
	done := make(chan Result, 1)
	start := time.Now()
	go func() {
		res, err := s.Exec(ctx, script, ExecOptions{Stdin: endless{ctx}, Stdout: &out, Stderr: &errb,
			Timeout: timeout, MaxOutput: 1 << 20, MaxMemory: 128 << 20})
		if err != nil {
			t.Errorf("Exec: %v", err)
		}
		done <- res
	}()
	var res Result
	// The bounds are loose: a loaded 2-core machine under -race is slow,
	// and a runaway that ignores its context runs on for minutes.
	select {
	case res = <-done:
	case <-time.After(timeout + 60*time.Second):
		t.Fatalf("did not return within %v", timeout+60*time.Second)
	}
	took := time.Since(start)
	if took > timeout+30*time.Second {
		t.Errorf("returned after %v (timeout %v)", took, timeout)
	}
	if res.Stopped == "" && res.ExitCode == 0 && !strings.HasPrefix(script, "git init") {
		t.Logf("ran to its end: %+v %q", res, errb.String())
	}
	// its work stops: the goroutines end, nothing is written, no CPU
	cancel()
	settle(t, base)
	before := storeSize(t, fs)
	// A runaway burns CPU in every window; a garbage collection after a
	// big call, or the store's compaction, in one of them. So the call
	// fails only if five windows in a row are busy.
	var used []time.Duration
	for range 5 {
		cpu0 := cpuTime()
		time.Sleep(300 * time.Millisecond)
		u := cpuTime() - cpu0
		if u <= 150*time.Millisecond {
			used = nil
			break
		}
		used = append(used, u)
	}
	if used != nil {
		t.Errorf("CPU used in each of five 300ms windows after the call returned: %v", used)
	}
	if after := storeSize(t, fs); after != before {
		t.Errorf("the workspace changed after the call returned: %s -> %s", before, after)
	}
	cleanRunaway(t, s)
}

// settle waits until no more than base goroutines of the shell (its
// commands, the interpreter, the engines) run; base 0 only waits for the
// count to stop changing. The store's own goroutines (flushes,
// compactions after a big write) are not the call's.
func settle(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	last := -1
	for {
		n, stacks := shellGoroutines()
		if base > 0 && n <= base || base == 0 && n == last {
			return
		}
		if time.Now().After(deadline) {
			if base > 0 {
				t.Fatalf("%d goroutines of the shell are still running after the call (%d before):\n%s", n, base, stacks)
			}
			return
		}
		last = n
		time.Sleep(50 * time.Millisecond)
	}
}

// shellGoroutines counts the goroutines running the shell's code, less
// the test's own and the memory watchdog's.
func shellGoroutines() (int, string) {
	buf := make([]byte, 4<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var keep []string
	for _, p := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(p, "testing.tRunner") || strings.Contains(p, "memWatch") {
			continue
		}
		if strings.Contains(p, "computerfs/sandbox/shell") || strings.Contains(p, "mvdan.cc/sh") ||
			strings.Contains(p, "goawk") || strings.Contains(p, "gojq") {
			keep = append(keep, p)
		}
	}
	return len(keep) + 1, strings.Join(keep[:min(len(keep), 6)], "\n\n")
}

// storeSize is the bytes and entries of the workspace's files.
func storeSize(t *testing.T, fs *wsfs.FS) string {
	var total int64
	n := 0
	var walk func(p string)
	walk = func(p string) {
		fs.ReadDir(p, "", func(d kv.Dirent) bool {
			q := strings.TrimPrefix(p+"/"+d.Name, "/")
			n++
			if a, err := fs.Lstat(q); err == nil {
				total += int64(a.Size)
				if a.Mode&kv.S_IFMT == kv.S_IFDIR {
					walk(q)
				}
			}
			return true
		})
	}
	walk("")
	return fmt.Sprintf("%d entries %d bytes", n, total)
}

// cleanRunaway removes what a runaway made, keeping the fixture.
func cleanRunaway(t *testing.T, s *Shell) {
	var out bytes.Buffer
	res, err := s.Exec(context.Background(), `for f in * .[!.]*; do case $f in sparse|f|loop|'.[!.]*') ;; *) rm -rf -- "$f";; esac; done; rm -rf /tmp/*; touch f`,
		ExecOptions{Stdout: &out, Stderr: &out, Timeout: 30 * time.Second})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("clean up: %v %+v %s", err, res, out.String())
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// jq's order-keeping decoder and encoder and the registration table of
// objects' key order (jq_order.go): a value that shares its parts prints
// as 2^60 leaves, nested objects fill the table.
func init() {
	runaways["jq"] = append(runaways["jq"],
		`jq -n 'reduce range(60) as $i (0; [., .])' > /dev/null`,
		`jq -n 'reduce range(60) as $i ({}; {b: ., a: .}) | tojson | length'`,
		`jq -n 'reduce range(1e9) as $i (null; {b: $i, a: .})'`,
		`yes '{"b":1,"a":[2,{"d":3,"c":4}]}' | jq -c 'keys_unsorted, to_entries' > /dev/null`,
		`jq -n '[range(1e9)] | @csv'`,
		`jq -n 'reduce range(1e9) as $i ("x"; "\(.)")' > /dev/null`)
}
