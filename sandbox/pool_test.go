package sandbox_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/computerfs/computerfs/sandbox"
)

// newPool makes a pool of base with a state directory of its own (so
// that what it leaves behind, or not, is its own) and closes it at the
// end, checking that nothing is left.
func newPool(t *testing.T, base sandbox.Options, size int) (*sandbox.Pool, sandbox.Options) {
	t.Helper()
	state := privateStateDir(t)
	base.StateDir = state
	base.NoSeccomp = !sandbox.SeccompSupported
	p, err := sandbox.NewPool(sandbox.PoolOptions{Options: base, Size: size})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Close()
		if left := leftovers(state); len(left) > 0 {
			t.Errorf("left behind by the pool: %v", left)
		}
	})
	return p, base
}

// privateStateDir is a state directory for one test (t.TempDir's parent
// is not reachable by the sandbox's users).
func privateStateDir(t *testing.T) string {
	t.Helper()
	state, err := os.MkdirTemp("", "sandbox-pool-")
	if err == nil {
		err = os.Chmod(state, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// What the test's pools and sandboxes left (nothing, if they were
		// closed) and the state directory's cgroup parent go with it.
		if _, err := sandbox.GC(state); err != nil {
			t.Errorf("GC: %v", err)
		}
		if left := cgroupParentsOf(state); len(left) > 0 {
			t.Errorf("cgroup parents left after GC: %v", left)
		}
		os.RemoveAll(state)
	})
	return state
}

// cgroupParentsOf lists the cgroup parents of a state directory, one per
// hierarchy.
func cgroupParentsOf(state string) []string {
	v1, _ := filepath.Glob("/sys/fs/cgroup/*/computerfs-sandbox-" + stateHash(state))
	v2, _ := filepath.Glob("/sys/fs/cgroup/computerfs-sandbox-" + stateHash(state))
	return append(v1, v2...)
}

// waitIdle waits until the pool has n sandboxes waiting.
func waitIdle(t *testing.T, p *sandbox.Pool, n int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); p.Idle() < n; {
		if time.Now().After(deadline) {
			t.Fatalf("the pool has %d sandboxes waiting after 30 s, want %d", p.Idle(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// leftovers lists the containers' state, cgroups and processes of a state
// directory.
func leftovers(state string) []string {
	var left []string
	ids, _ := os.ReadDir(filepath.Join(state, "containers"))
	for _, e := range ids {
		left = append(left, "state "+e.Name())
	}
	for _, d := range cgroupsOf(state) {
		left = append(left, "cgroup "+d)
	}
	return left
}

// cgroupsOf lists the cgroups of the sandboxes of a state directory (its
// own cgroup parent, see cgroupParent).
func cgroupsOf(state string) []string {
	// Every sandbox's id is in its state; ids of removed state are found
	// by the parent the directory has: its cgroups hold only "cfs-" ones.
	var found []string
	parents, _ := filepath.Glob("/sys/fs/cgroup/*/computerfs-sandbox-*")
	for _, parent := range parents {
		if !strings.HasSuffix(parent, "-"+stateHash(state)) {
			continue
		}
		ds, _ := filepath.Glob(filepath.Join(parent, "cfs-*"))
		found = append(found, ds...)
	}
	return found
}

// pidsIn lists the processes of the sandboxes' cgroups of a state
// directory.
func pidsIn(state string) []int {
	var pids []int
	for _, d := range cgroupsOf(state) {
		b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

func poolRun(t *testing.T, p *sandbox.Pool, opts sandbox.Options) output {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	if opts.Stdout == nil {
		opts.Stdout = &stdout
	}
	if opts.Stderr == nil {
		opts.Stderr = &stderr
	}
	res, err := p.Run(ctx, opts)
	if ctx.Err() != nil {
		t.Fatalf("Run took more than a minute: %v", opts.Args)
	}
	return output{res, stdout.String(), stderr.String(), err}
}

func TestPool(t *testing.T) {
	ws := workspace(t)
	p, base := newPool(t, sandbox.Options{Workspace: ws}, 2)
	cmd := func(args ...string) sandbox.Options {
		o := base
		o.Args = args
		return o
	}
	warm := func(t *testing.T, o output) {
		t.Helper()
		if !o.res.Warm {
			t.Errorf("not run warm:\n%v", o)
		}
	}

	t.Run("ExitCodes", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct {
			cmd    string
			code   int
			signal syscall.Signal
		}{
			{"true", 0, 0},
			{"exit 3", 3, 0},
			{"kill -TERM $$", 143, syscall.SIGTERM},
			{"kill -KILL $$", 137, syscall.SIGKILL},
		} {
			o := poolRun(t, p, cmd("sh", "-c", c.cmd))
			warm(t, o)
			if o.err != nil || o.res.ExitCode != c.code || o.res.Signal != c.signal {
				t.Errorf("%s: want exit %d signal %d, got\n%v", c.cmd, c.code, c.signal, o)
			}
		}
		o := poolRun(t, p, cmd("no-such-program"))
		var se *sandbox.StartError
		if !errors.As(o.err, &se) || !errors.Is(o.err, syscall.ENOENT) || o.res.ExitCode != 127 {
			t.Errorf("missing program: %v", o)
		}
		o = poolRun(t, p, cmd("/etc/passwd"))
		if !errors.As(o.err, &se) || !errors.Is(o.err, syscall.EACCES) || o.res.ExitCode != 126 {
			t.Errorf("not executable: %v", o)
		}
		if o := poolRun(t, p, cmd()); o.err == nil || !strings.Contains(o.err.Error(), "no program") {
			t.Errorf("no program: %v", o)
		}
	})

	t.Run("Stdio", func(t *testing.T) {
		t.Parallel()
		in := strings.Repeat("line of input\n", 50000) // more than a pipe holds
		o := cmd("sh", "-c", "cat; echo to-stderr >&2; echo done")
		o.Stdin = strings.NewReader(in)
		out := poolRun(t, p, o)
		warm(t, out)
		if out.err != nil || out.res.ExitCode != 0 || out.stdout != in+"done\n" || out.stderr != "to-stderr\n" {
			t.Errorf("stdout %d bytes (want %d), stderr %q, %+v %v", len(out.stdout), len(in)+5, out.stderr, out.res, out.err)
		}
		// Files as they are.
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "in"), []byte("from a file\n"), 0o644)
		fin, _ := os.Open(filepath.Join(dir, "in"))
		defer fin.Close()
		fout, _ := os.Create(filepath.Join(dir, "out"))
		defer fout.Close()
		o = cmd("cat")
		o.Stdin, o.Stdout = fin, fout
		out = poolRun(t, p, o)
		warm(t, out)
		if b, _ := os.ReadFile(fout.Name()); out.err != nil || string(b) != "from a file\n" {
			t.Errorf("files: %q\n%v", b, out)
		}
		// No stdin: /dev/null.
		if out := poolRun(t, p, cmd("wc", "-c")); strings.TrimSpace(out.stdout) != "0" {
			t.Errorf("no stdin:\n%v", out)
		}
	})

	t.Run("EnvAndCwd", func(t *testing.T) {
		t.Parallel()
		o := cmd("sh", "-c", `echo "$FOO|$HOME|$PATH|$(pwd)"`)
		o.Env = []string{"FOO=bar baz", "HOME=/workspace"}
		want := "bar baz|/workspace|" + sandbox.DefaultPath + "|/workspace\n"
		if out := poolRun(t, p, o); out.err != nil || out.stdout != want || !out.res.Warm {
			t.Errorf("want %q\n%v", want, out)
		}
		if out := poolRun(t, p, cmd("mkdir", "-p", "pool/sub")); out.err != nil || out.res.ExitCode != 0 {
			t.Fatal(out)
		}
		for cwd, want := range map[string]string{"pool/sub": "/workspace/pool/sub", "/tmp": "/tmp", "/": "/", "/tmp/made/here": "/tmp/made/here"} {
			o := cmd("pwd")
			o.Cwd = cwd
			if out := poolRun(t, p, o); out.err != nil || out.stdout != want+"\n" || !out.res.Warm {
				t.Errorf("cwd %s: want %s\n%v", cwd, want, out)
			}
		}
		o = cmd("pwd")
		o.Cwd = "no/such/dir"
		if out := poolRun(t, p, o); out.err == nil || !strings.Contains(out.err.Error(), "working directory") {
			t.Errorf("missing cwd:\n%v", out)
		}
		o.Cwd = "/etc/passwd" // outside the workspace: found out inside
		if out := poolRun(t, p, o); out.err == nil || !strings.Contains(out.err.Error(), "working directory") || !out.res.Warm {
			t.Errorf("cwd not a directory:\n%v", out)
		}
	})

	t.Run("NoReuse", func(t *testing.T) {
		t.Parallel()
		// Each command finds a fresh /tmp, and nothing running from the
		// one before.
		token := fmt.Sprintf("1000.%d", time.Now().UnixNano()%1000000+3)
		for i := range 4 {
			out := poolRun(t, p, cmd("sh", "-c", `ls -A /tmp; echo secret > /tmp/mark; (sleep $0 &); sleep $0 &`, token))
			warm(t, out)
			if out.err != nil || out.res.ExitCode != 0 || out.stdout != "" {
				t.Errorf("run %d saw what an earlier one left in /tmp:\n%v", i, out)
			}
			if left := processesWith(token); len(left) > 0 {
				t.Errorf("processes left after run %d: %v", i, left)
			}
		}
	})

	t.Run("Concurrent", func(t *testing.T) {
		t.Parallel()
		const n = 10
		var wg sync.WaitGroup
		outs := make([]output, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				outs[i] = poolRun(t, p, cmd("sh", "-c", `test ! -e /tmp/used && touch /tmp/used && echo "run $0" > /tmp/x && sleep 0.1 && cat /tmp/x`, fmt.Sprint(i)))
			}()
		}
		wg.Wait()
		for i, o := range outs {
			warm(t, o)
			if want := fmt.Sprintf("run %d\n", i); o.err != nil || o.res.ExitCode != 0 || o.stdout != want {
				t.Errorf("run %d: want %q\n%v", i, want, o)
			}
		}
	})

	t.Run("TimeoutKillsGrandchildren", func(t *testing.T) {
		t.Parallel()
		token := fmt.Sprintf("1000.%d", time.Now().UnixNano()%1000000+7)
		o := cmd("sh", "-c", `sleep $0 & (sleep $0 &) ; (trap '' TERM HUP; exec sleep $0) & sleep $0`, token)
		o.Limits.Timeout = time.Second
		start := time.Now()
		out := poolRun(t, p, o)
		warm(t, out)
		if out.err != nil || !out.res.TimedOut || out.res.ExitCode != 137 || out.res.Signal != syscall.SIGKILL {
			t.Errorf("want a timeout:\n%v", out)
		}
		if d := time.Since(start); d > 10*time.Second || out.res.Duration < time.Second {
			t.Errorf("took %v (duration %v) for a 1 s timeout", d, out.res.Duration)
		}
		if left := processesWith(token); len(left) > 0 {
			t.Errorf("processes left after the timeout: %v", left)
		}
	})

	t.Run("Cancel", func(t *testing.T) {
		t.Parallel()
		token := fmt.Sprintf("1000.%d", time.Now().UnixNano()%1000000+9)
		// Cancelled once the command runs (a deadline of its own would
		// fall before the start on a loaded machine).
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		o := cmd("sh", "-c", `(sleep $0 &); echo started; sleep $0`, token)
		o.Stdout = writerFunc(func(b []byte) (int, error) {
			if bytes.Contains(b, []byte("started")) {
				time.AfterFunc(100*time.Millisecond, cancel)
			}
			return len(b), nil
		})
		res, err := p.Run(ctx, o)
		if !errors.Is(err, context.Canceled) || res.Signal != syscall.SIGKILL || !res.Warm {
			t.Errorf("cancelled run: %+v %v", res, err)
		}
		if left := processesWith(token); len(left) > 0 {
			t.Errorf("processes left after cancel: %v", left)
		}
	})

	t.Run("Signals", func(t *testing.T) {
		t.Parallel()
		sigs := make(chan os.Signal, 1)
		sigs <- syscall.SIGTERM
		o := cmd("sleep", "100")
		o.Signals = sigs
		if out := poolRun(t, p, o); out.err != nil || out.res.ExitCode != 143 || out.res.Signal != syscall.SIGTERM || !out.res.Warm {
			t.Errorf("SIGTERM passed on:\n%v", out)
		}
	})

	t.Run("Output", func(t *testing.T) {
		t.Parallel()
		o := cmd("sh", "-c", "echo start >&2; sleep 0.2; yes") // see TestLimits/Output
		o.Limits.OutputBytes = 100000
		out := poolRun(t, p, o)
		warm(t, out)
		if out.err != nil || !out.res.OutputLimited || out.res.Signal != syscall.SIGKILL {
			t.Errorf("%v", out.res)
		}
		if n := len(out.stdout) + len(out.stderr); n != 100000 || out.stderr != "start\n" {
			t.Errorf("%d bytes of output, stderr %q", n, out.stderr)
		}
	})

	t.Run("Stats", func(t *testing.T) {
		t.Parallel()
		out := poolRun(t, p, cmd("sh", "-c", "head -c 20000000 /dev/urandom | md5sum"))
		warm(t, out)
		if out.err != nil || out.res.ExitCode != 0 {
			t.Fatal(out)
		}
		if out.res.CPUTime < 10*time.Millisecond || out.res.PeakMemory < 1<<20 || out.res.Duration < out.res.CPUTime/2 {
			t.Errorf("implausible figures: %+v", out.res)
		}
	})

	t.Run("Exec", func(t *testing.T) {
		t.Parallel()
		var buf bytes.Buffer
		o := base
		o.Stdout = &buf
		res, err := p.Exec(context.Background(), "echo $((6*7)) | tee answer", o)
		if err != nil || res.ExitCode != 0 || buf.String() != "42\n" || !res.Warm {
			t.Errorf("Exec: %+v %v %q", res, err, buf.String())
		}
		if b, _ := os.ReadFile(filepath.Join(ws, "answer")); string(b) != "42\n" {
			t.Errorf("answer in the workspace: %q", b)
		}
	})

	t.Run("OtherOptionsCold", func(t *testing.T) {
		t.Parallel()
		o := cmd("hostname")
		o.Hostname = "elsewhere"
		if out := poolRun(t, p, o); out.err != nil || out.stdout != "elsewhere\n" || out.res.Warm {
			t.Errorf("another hostname: %v", out)
		}
		o = cmd("hostname")
		o.Hostname = "sandbox" // the default, as the pool has it
		if out := poolRun(t, p, o); out.err != nil || out.stdout != "sandbox\n" || !out.res.Warm {
			t.Errorf("the pool's hostname: %v", out)
		}
		o = cmd("true")
		o.Limits.Memory = 64 << 20
		if out := poolRun(t, p, o); out.err != nil || out.res.Warm {
			t.Errorf("a memory limit: %v", out)
		}
		o = cmd("true")
		o.Workspace = "/no/such/dir"
		if out := poolRun(t, p, o); out.err == nil || !strings.Contains(out.err.Error(), "no such file") {
			t.Errorf("bad workspace: %v", out)
		}
	})
}

// TestPoolLimits: the cgroup limits of a pool's sandboxes, set before the
// command came, hold for it and are reported for it alone.
func TestPoolLimits(t *testing.T) {
	t.Run("Pids", func(t *testing.T) {
		t.Parallel()
		p, base := newPool(t, sandbox.Options{}, 1)
		o := withArgs(base, "true")
		o.Limits.Pids = 10
		// Not the pool's options: a cold start.
		if out := poolRun(t, p, o); out.res.Warm || out.err != nil {
			t.Fatalf("%v", out)
		}
		pp, base := newPool(t, sandbox.Options{Limits: sandbox.Limits{Pids: 10}}, 1)
		for range 2 {
			out := poolRun(t, pp, withArgs(base, "perl", "-e", `my $n = 0; while ($n < 30) { my $p = fork; last unless defined $p; if ($p == 0) { sleep 30; exit } $n++ } print "$n\n"`))
			if out.err != nil || !out.res.PidsLimited || out.res.ExitCode != 0 || !out.res.Warm {
				t.Errorf("%v", out)
			}
			// As on a cold start: pid 1's allowance in the first moments.
			if n, _ := strconv.Atoi(strings.TrimSpace(out.stdout)); n < 9 || n > 9+12 {
				t.Errorf("%d sleeps ran under a limit of 10 processes\n%v", n, out)
			}
		}
		if out := poolRun(t, pp, withArgs(base, "true")); out.err != nil || out.res.PidsLimited || !out.res.Warm {
			t.Errorf("a fresh sandbox reports the pids limit hit:\n%v", out)
		}
	})

	t.Run("Memory", func(t *testing.T) {
		t.Parallel()
		const limit = 64 << 20
		p, base := newPool(t, sandbox.Options{Limits: sandbox.Limits{Memory: limit}}, 1)
		o := withArgs(base, "tail", "/dev/zero")
		o.Limits.Timeout = 30 * time.Second
		out := poolRun(t, p, o)
		if out.err != nil || !out.res.OOMKilled || out.res.ExitCode != 137 || out.res.TimedOut || !out.res.Warm {
			t.Errorf("want an OOM kill:\n%v", out)
		}
		if out.res.PeakMemory < limit*3/4 || out.res.PeakMemory > limit {
			t.Errorf("peak memory %d, limit %d", out.res.PeakMemory, limit)
		}
		// The next command, in a fresh sandbox: neither the OOM kill
		// nor the peak of the one before (the sandbox's pid 1, a race
		// build of the test binary, holds some 16 MiB of its own).
		out = poolRun(t, p, withArgs(base, "true"))
		if out.err != nil || out.res.OOMKilled || out.res.PeakMemory > limit/2 || !out.res.Warm {
			t.Errorf("after an OOM kill:\n%v", out)
		}
	})

	t.Run("CPUOfTheCommandAlone", func(t *testing.T) {
		t.Parallel()
		// A cold start charges the setup of the container (libcontainer's
		// init, our pid 1) to the cgroup; a warm one counts from the
		// handoff.
		p, base := newPool(t, sandbox.Options{}, 1)
		var cold, hot time.Duration
		for range 5 {
			waitIdle(t, p, 1)
			out := poolRun(t, p, withArgs(base, "true"))
			if out.err != nil || !out.res.Warm {
				t.Fatal(out)
			}
			hot += out.res.CPUTime
			o := run(t, withArgs(base, "true"))
			if o.err != nil {
				t.Fatal(o)
			}
			cold += o.res.CPUTime
		}
		t.Logf("CPU time of true: cold %v, warm %v (5 runs)", cold/5, hot/5)
		if hot*2 > cold {
			t.Errorf("warm runs of true used %v of CPU, cold ones %v: the setup is counted", hot/5, cold/5)
		}
	})
}

func withArgs(o sandbox.Options, args ...string) sandbox.Options {
	o.Args = args
	return o
}

// TestPoolClose: Close destroys the waiting sandboxes and leaves nothing
// behind; Run then says the pool is closed.
func TestPoolClose(t *testing.T) {
	state := privateStateDir(t)
	base := sandbox.Options{StateDir: state, NoSeccomp: !sandbox.SeccompSupported}
	p, err := sandbox.NewPool(sandbox.PoolOptions{Options: base, Size: 3})
	if err != nil {
		t.Fatal(err)
	}
	waitIdle(t, p, 3)
	// One command in flight while Close comes: it finishes.
	done := make(chan output)
	go func() { done <- poolRun(t, p, withArgs(base, "sh", "-c", "sleep 0.5; echo finished")) }()
	time.Sleep(100 * time.Millisecond)
	pids := pidsIn(state)
	if len(pids) < 3 {
		t.Fatalf("processes of the pool: %v", pids)
	}
	if left := leftovers(state); len(left) < 3 {
		t.Fatalf("the pool's containers: %v", left)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if out := <-done; out.err != nil || out.stdout != "finished\n" {
		t.Errorf("command running at Close: %v", out)
	}
	if left := leftovers(state); len(left) > 0 {
		t.Errorf("left after Close: %v", left)
	}
	for _, pid := range pids {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			t.Errorf("process %d left after Close: %q", pid, b)
		}
	}
	if _, err := p.Run(context.Background(), withArgs(base, "true")); !errors.Is(err, sandbox.ErrPoolClosed) {
		t.Errorf("Run after Close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := sandbox.NewPool(sandbox.PoolOptions{Options: sandbox.Options{Network: "bridge"}}); err == nil || !strings.Contains(err.Error(), "network") {
		t.Errorf("bad options: %v", err)
	}
	if _, err := sandbox.NewPool(sandbox.PoolOptions{Options: sandbox.Options{Rootfs: "/no/such/rootfs"}}); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("bad rootfs: %v", err)
	}
}

// poolHelperEnv makes the test binary a process that keeps a pool (in the
// state directory it names) and is killed by TestPoolOwnerKilled.
const poolHelperEnv = "SANDBOX_TEST_POOL_HELPER"

func poolHelper(state string) int {
	p, err := sandbox.NewPool(sandbox.PoolOptions{
		Options: sandbox.Options{StateDir: state, NoSeccomp: !sandbox.SeccompSupported, Limits: sandbox.Limits{Pids: 50}},
		Size:    2,
	})
	if err != nil {
		fmt.Println(err)
		return 1
	}
	for p.Idle() < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	fmt.Println("ready")
	time.Sleep(time.Hour)
	return 0
}

// TestPoolOwnerKilled: the sandboxes of a pool whose process is killed
// with SIGKILL end (their pid 1 sees EOF on its socket), and GC removes
// their state and cgroups.
func TestPoolOwnerKilled(t *testing.T) {
	state := privateStateDir(t)
	helper := exec.Command(os.Args[0], "-test.run=^$")
	helper.Env = append(os.Environ(), poolHelperEnv+"="+state)
	stdout, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { helper.Process.Kill(); helper.Wait() })
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if line != "ready\n" {
		t.Fatalf("helper: %q", line)
	}
	pids := pidsIn(state)
	if len(pids) < 2 {
		t.Fatalf("processes of the pool: %v", pids)
	}
	// While the pool's process lives, GC leaves its sandboxes alone.
	if removed, err := sandbox.GC(state); err != nil || len(removed) > 0 {
		t.Fatalf("GC with the pool alive: %v %v", removed, err)
	}
	if n := len(pidsIn(state)); n < 2 {
		t.Fatalf("GC with the pool alive: %d processes left", n)
	}
	helper.Process.Signal(syscall.SIGKILL)
	helper.Wait()
	for deadline := time.Now().Add(20 * time.Second); len(pidsIn(state)) > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("the pool's sandboxes still run: %v", pidsIn(state))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if left := leftovers(state); len(left) < 2 {
		t.Fatalf("want the state and cgroups of the dead pool's sandboxes, got %v", left)
	}
	removed, err := sandbox.GC(state)
	if err != nil || len(removed) != 2 {
		t.Errorf("GC: %v %v", removed, err)
	}
	if left := leftovers(state); len(left) > 0 {
		t.Errorf("left after GC: %v", left)
	}
}

// stateHash is the suffix of the cgroup parent of a state directory.
func stateHash(state string) string {
	h := sha256.Sum256([]byte(filepath.Clean(state)))
	return hex.EncodeToString(h[:6])
}

// writerFunc is an io.Writer made of a function.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
