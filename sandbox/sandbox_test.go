package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/computerfs/computerfs/internal/testmount"
	"github.com/computerfs/computerfs/sandbox"
)

// stateDir is this test binary's own state directory (and cgroup parent),
// so that nothing here touches the sandboxes of anything else.
var stateDir string

func TestMain(m *testing.M) {
	sandbox.Init()
	if state := os.Getenv(poolHelperEnv); state != "" {
		os.Exit(poolHelper(state))
	}
	dir, err := os.MkdirTemp("", "sandbox-state-")
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	stateDir = dir
	code := testmount.Run(m)
	if removed, err := sandbox.GC(stateDir); err != nil || len(removed) > 0 {
		fmt.Fprintf(os.Stderr, "sandboxes left behind: %v %v\n", removed, err)
		code = 1
	}
	if left := cgroupParentsOf(stateDir); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "cgroup parents left after GC: %v\n", left)
		code = 1
	}
	os.RemoveAll(stateDir)
	os.Exit(code)
}

// hostUser is the host uid and gid of sandbox.DefaultUser.
const hostUser = 101000

// workspace mounts a fresh computerfs store and gives its root to the
// sandbox's default user.
func workspace(t *testing.T) string {
	t.Helper()
	m := testmount.Start(t, t.TempDir())
	if err := os.Chown(m.Dir, hostUser, hostUser); err != nil {
		t.Fatal(err)
	}
	return m.Dir
}

type output struct {
	res            sandbox.Result
	stdout, stderr string
	err            error
}

func (o output) String() string {
	return fmt.Sprintf("result %+v err %v\nstdout:\n%s\nstderr:\n%s", o.res, o.err, o.stdout, o.stderr)
}

// run runs opts (with this binary's state directory) and fails the test
// if Run takes more than a minute.
func run(t *testing.T, opts sandbox.Options) output {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	opts.StateDir = stateDir
	// Built without seccomp (go test without -tags seccomp), test the rest.
	opts.NoSeccomp = opts.NoSeccomp || !sandbox.SeccompSupported
	if opts.Stdout == nil {
		opts.Stdout = &stdout
	}
	if opts.Stderr == nil {
		opts.Stderr = &stderr
	}
	res, err := sandbox.Run(ctx, opts)
	if ctx.Err() != nil {
		t.Fatalf("Run took more than a minute: %v", opts.Args)
	}
	return output{res, stdout.String(), stderr.String(), err}
}

// sh runs a shell command in the workspace and wants it to succeed.
func sh(t *testing.T, ws, command string) output {
	t.Helper()
	o := run(t, sandbox.Options{Workspace: ws, Args: []string{"/bin/sh", "-c", command}})
	if o.err != nil || o.res.ExitCode != 0 {
		t.Fatalf("%s:\n%v", command, o)
	}
	return o
}

func TestBehaviour(t *testing.T) {
	ws := workspace(t)

	t.Run("ExitCodes", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct {
			cmd    string
			code   int
			signal syscall.Signal
		}{
			{"true", 0, 0},
			{"exit 3", 3, 0},
			{"exit 255", 255, 0},
			{"kill -TERM $$", 143, syscall.SIGTERM},
			{"kill -SEGV $$", 128 + 11, syscall.SIGSEGV},
			{"kill -KILL $$", 137, syscall.SIGKILL},
		} {
			o := run(t, sandbox.Options{Workspace: ws, Args: []string{"sh", "-c", c.cmd}})
			if o.err != nil || o.res.ExitCode != c.code || o.res.Signal != c.signal {
				t.Errorf("%s: want exit %d signal %d, got\n%v", c.cmd, c.code, c.signal, o)
			}
		}
	})

	t.Run("StartErrors", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct {
			prog  string
			code  int
			errno syscall.Errno
		}{
			{"no-such-program", 127, syscall.ENOENT},
			{"/usr/bin/no-such-program", 127, syscall.ENOENT},
			{"/etc/passwd", 126, syscall.EACCES},
			{"/etc", 126, syscall.EISDIR},
		} {
			o := run(t, sandbox.Options{Workspace: ws, Args: []string{c.prog}})
			var se *sandbox.StartError
			if !errors.As(o.err, &se) || !errors.Is(o.err, c.errno) || o.res.ExitCode != c.code {
				t.Errorf("%s: want a StartError (%v) and exit %d, got\n%v", c.prog, c.errno, c.code, o)
			}
			if c.code == 127 && !strings.Contains(fmt.Sprint(o.err), "not found") {
				t.Errorf("%s: unclear message %q", c.prog, o.err)
			}
		}
		// A shell says it itself, with the exit code shells use.
		o := run(t, sandbox.Options{Workspace: ws, Args: []string{"sh", "-c", "no-such-program"}})
		if o.err != nil || o.res.ExitCode != 127 || !strings.Contains(o.stderr, "not found") {
			t.Errorf("sh -c no-such-program:\n%v", o)
		}
	})

	t.Run("Stdio", func(t *testing.T) {
		t.Parallel()
		in := strings.Repeat("line of input\n", 50000) // 700 KB, more than a pipe holds
		var stdout, stderr bytes.Buffer
		o := run(t, sandbox.Options{
			Workspace: ws,
			Args:      []string{"sh", "-c", "cat; echo to-stderr >&2; echo done"},
			Stdin:     strings.NewReader(in),
			Stdout:    &stdout, Stderr: &stderr,
		})
		if o.err != nil || o.res.ExitCode != 0 {
			t.Fatal(o)
		}
		if stdout.String() != in+"done\n" || stderr.String() != "to-stderr\n" {
			t.Errorf("stdout %d bytes (want %d), stderr %q", stdout.Len(), len(in)+5, stderr.String())
		}
		// Files are passed as they are.
		dir := t.TempDir()
		inFile := filepath.Join(dir, "in")
		os.WriteFile(inFile, []byte("from a file\n"), 0o644)
		fin, _ := os.Open(inFile)
		defer fin.Close()
		fout, _ := os.Create(filepath.Join(dir, "out"))
		defer fout.Close()
		o = run(t, sandbox.Options{Workspace: ws, Args: []string{"cat"}, Stdin: fin, Stdout: fout})
		if o.err != nil || o.res.ExitCode != 0 {
			t.Fatal(o)
		}
		if b, _ := os.ReadFile(fout.Name()); string(b) != "from a file\n" {
			t.Errorf("file stdout %q", b)
		}
		// No stdin: /dev/null.
		o = run(t, sandbox.Options{Workspace: ws, Args: []string{"wc", "-c"}})
		if strings.TrimSpace(o.stdout) != "0" {
			t.Errorf("no stdin:\n%v", o)
		}
	})

	t.Run("EnvAndCwd", func(t *testing.T) {
		t.Parallel()
		o := run(t, sandbox.Options{
			Workspace: ws,
			Args:      []string{"sh", "-c", `echo "$FOO|$HOME|$PATH|$(pwd)"`},
			Env:       []string{"FOO=bar baz", "HOME=/workspace"},
		})
		want := "bar baz|/workspace|" + sandbox.DefaultPath + "|/workspace\n"
		if o.err != nil || o.stdout != want {
			t.Errorf("want %q\n%v", want, o)
		}
		sh(t, ws, "mkdir -p sub/dir")
		for cwd, want := range map[string]string{"sub/dir": "/workspace/sub/dir", "/tmp": "/tmp", "/": "/"} {
			o := run(t, sandbox.Options{Workspace: ws, Cwd: cwd, Args: []string{"pwd"}})
			if o.err != nil || o.stdout != want+"\n" {
				t.Errorf("cwd %s: want %s\n%v", cwd, want, o)
			}
		}
		// Without a workspace the program starts in /.
		o = run(t, sandbox.Options{Args: []string{"pwd"}})
		if o.err != nil || o.stdout != "/\n" {
			t.Errorf("no workspace:\n%v", o)
		}
		o = run(t, sandbox.Options{Workspace: ws, Cwd: "no/such/dir", Args: []string{"pwd"}})
		if o.err == nil || !strings.Contains(o.err.Error(), "working directory") {
			t.Errorf("missing cwd:\n%v", o)
		}
	})

	t.Run("WorkspaceFiles", func(t *testing.T) {
		t.Parallel()
		sh(t, ws, "mkdir -p files && echo written-inside > files/a && ln -s a files/link")
		// Through the mount at once, as the sandbox's user.
		b, err := os.ReadFile(filepath.Join(ws, "files", "a"))
		if err != nil || string(b) != "written-inside\n" {
			t.Fatalf("read on the host: %q %v", b, err)
		}
		var st syscall.Stat_t
		syscall.Stat(filepath.Join(ws, "files", "a"), &st)
		if st.Uid != hostUser || st.Gid != hostUser {
			t.Errorf("owner %d:%d, want %d:%d", st.Uid, st.Gid, hostUser, hostUser)
		}
		// And the other way.
		if err := os.WriteFile(filepath.Join(ws, "files", "b"), []byte("written-outside\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		o := sh(t, ws, "cat files/b files/link")
		if o.stdout != "written-outside\nwritten-inside\n" {
			t.Errorf("inside: %q", o.stdout)
		}
	})

	t.Run("Concurrent", func(t *testing.T) {
		t.Parallel()
		sh(t, ws, "mkdir -p conc")
		const n = 8
		var wg sync.WaitGroup
		outs := make([]output, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				outs[i] = run(t, sandbox.Options{
					Workspace: ws,
					Args:      []string{"sh", "-c", `echo "run $0" > conc/$0 && sleep 0.2 && cat conc/$0 && hostname`, fmt.Sprint(i)},
					Hostname:  fmt.Sprintf("box%d", i),
				})
			}()
		}
		wg.Wait()
		for i, o := range outs {
			want := fmt.Sprintf("run %d\nbox%d\n", i, i)
			if o.err != nil || o.res.ExitCode != 0 || o.stdout != want {
				t.Errorf("run %d: want %q\n%v", i, want, o)
			}
			if b, err := os.ReadFile(filepath.Join(ws, "conc", fmt.Sprint(i))); err != nil || string(b) != fmt.Sprintf("run %d\n", i) {
				t.Errorf("file of run %d on the host: %q %v", i, b, err)
			}
		}
	})

	t.Run("Signals", func(t *testing.T) {
		t.Parallel()
		// Sent before the sandbox runs: passed on once pid 1 can.
		sigs := make(chan os.Signal, 1)
		sigs <- syscall.SIGTERM
		o := run(t, sandbox.Options{Workspace: ws, Args: []string{"sleep", "100"}, Signals: sigs})
		if o.err != nil || o.res.ExitCode != 143 || o.res.Signal != syscall.SIGTERM {
			t.Errorf("SIGTERM passed on:\n%v", o)
		}
		// A program that handles the signal decides. The signal is sent
		// once the trap is set.
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer pr.Close()
		got := make(chan string, 1)
		go func() {
			b, _ := io.ReadAll(io.TeeReader(pr, signalOnWrite{sigs, syscall.SIGINT, new(sync.Once)}))
			got <- string(b)
		}()
		o = run(t, sandbox.Options{Workspace: ws, Signals: sigs, Stdout: pw,
			Args: []string{"sh", "-c", `trap 'echo got INT; exit 7' INT; echo armed; sleep 100 & wait`}})
		pw.Close()
		if out := <-got; o.err != nil || o.res.ExitCode != 7 || out != "armed\ngot INT\n" {
			t.Errorf("SIGINT handled: %q\n%v", out, o)
		}
	})

	t.Run("Cancel", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		res, err := sandbox.Run(ctx, sandbox.Options{Workspace: ws, StateDir: stateDir, Args: []string{"sleep", "100"}, NoSeccomp: !sandbox.SeccompSupported})
		if !errors.Is(err, context.DeadlineExceeded) || res.Signal != syscall.SIGKILL {
			t.Errorf("cancelled run: %+v %v", res, err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("cancel took %v", d)
		}
	})

	t.Run("BadInput", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct {
			opts sandbox.Options
			want string
		}{
			{sandbox.Options{}, "no program"},
			{sandbox.Options{Workspace: "/no/such/mount", Args: []string{"true"}}, "no such file"},
			{sandbox.Options{Workspace: "/etc/passwd", Args: []string{"true"}}, "not a directory"},
			{sandbox.Options{Rootfs: "/no/such/rootfs", Args: []string{"true"}}, "no such file"},
			{sandbox.Options{Rootfs: t.TempDir(), Args: []string{"true"}}, "cannot reach it"},
			{sandbox.Options{Rootfs: testmount.PublicDir(t, "rootfs-"), Args: []string{"true"}}, "missing directories /proc, /dev, /tmp"},
			{sandbox.Options{Network: "bridge", Args: []string{"true"}}, "network"},
			{sandbox.Options{Limits: sandbox.Limits{Memory: -1}, Args: []string{"true"}}, "negative"},
			{sandbox.Options{Limits: sandbox.Limits{Memory: 1000}, Args: []string{"true"}}, "below 4 MiB"},
		} {
			o := run(t, c.opts)
			if o.err == nil || !strings.Contains(o.err.Error(), c.want) {
				t.Errorf("%+v: want an error with %q, got %v", c.opts, c.want, o.err)
			}
		}
	})

	t.Run("Exec", func(t *testing.T) {
		t.Parallel()
		var out bytes.Buffer
		res, err := sandbox.Exec(context.Background(), "echo $((6*7)) | tee answer", sandbox.Options{Workspace: ws, StateDir: stateDir, Stdout: &out, NoSeccomp: !sandbox.SeccompSupported})
		if err != nil || res.ExitCode != 0 || out.String() != "42\n" {
			t.Errorf("Exec: %+v %v %q", res, err, out.String())
		}
	})
}

// signalOnWrite sends a signal at the first write.
type signalOnWrite struct {
	c    chan os.Signal
	sig  os.Signal
	once *sync.Once
}

func (w signalOnWrite) Write(b []byte) (int, error) {
	w.once.Do(func() { w.c <- w.sig })
	return len(b), nil
}

// hostProcess starts a process on the host whose command line holds a
// unique token, and returns the token and its pid.
func hostProcess(t *testing.T) (string, int) {
	t.Helper()
	token := fmt.Sprintf("1000.%d%d", os.Getpid(), time.Now().UnixNano()%1000000)
	p, err := os.StartProcess("/bin/sleep", []string{"sleep", token}, &os.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill(); p.Wait() })
	return token, p.Pid
}

// processesWith lists the host processes whose command line holds token.
func processesWith(token string) []string {
	var found []string
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, _ := os.ReadFile(filepath.Join(d, "cmdline"))
		if bytes.Contains(b, []byte(token)) {
			found = append(found, filepath.Base(d)+": "+string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
		}
	}
	return found
}

func TestLimits(t *testing.T) {
	ws := workspace(t)

	t.Run("TimeoutKillsGrandchildren", func(t *testing.T) {
		t.Parallel()
		token := fmt.Sprintf("1000.%d", time.Now().UnixNano()%1000000)
		start := time.Now()
		o := run(t, sandbox.Options{
			Workspace: ws,
			Limits:    sandbox.Limits{Timeout: time.Second},
			// A background child, a grandchild whose parent is gone (a
			// daemon) and one that ignores SIGTERM and SIGHUP.
			Args: []string{"sh", "-c", `sleep $0 & (sleep $0 &) ; (trap '' TERM HUP; exec sleep $0) & sleep $0`, token},
		})
		if o.err != nil || !o.res.TimedOut || o.res.ExitCode != 137 || o.res.Signal != syscall.SIGKILL {
			t.Errorf("want a timeout:\n%v", o)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("took %v for a 1 s timeout", d)
		}
		if left := processesWith(token); len(left) > 0 {
			t.Errorf("processes left after the timeout: %v", left)
		}
	})

	t.Run("ExitKillsBackground", func(t *testing.T) {
		t.Parallel()
		token := fmt.Sprintf("1000.%d", time.Now().UnixNano()%1000000+1)
		o := run(t, sandbox.Options{Workspace: ws, Args: []string{"sh", "-c", `(sleep $0 &); sleep $0 & echo started`, token}})
		if o.err != nil || o.res.ExitCode != 0 || o.stdout != "started\n" {
			t.Errorf("%v", o)
		}
		if left := processesWith(token); len(left) > 0 {
			t.Errorf("processes left after the program ended: %v", left)
		}
	})

	t.Run("ForkBomb", func(t *testing.T) {
		t.Parallel()
		o := run(t, sandbox.Options{
			Workspace: ws,
			Limits:    sandbox.Limits{Pids: 64, Timeout: 3 * time.Second},
			Args:      []string{"bash", "-c", `bomb() { bomb | bomb & }; bomb; wait`},
		})
		if !o.res.PidsLimited {
			t.Errorf("the pids limit was not hit:\n%v", o)
		}
		if len(o.stderr) > 300 {
			o.stderr = o.stderr[:300]
		}
		if !strings.Contains(o.stderr, "fork") {
			t.Errorf("no failed fork reported:\n%v", o)
		}
	})

	t.Run("PidsLimit", func(t *testing.T) {
		t.Parallel()
		// The limit is the program's: perl and 9 children; in the first
		// moments, before pid 1 has moved out, pid 1's allowance too.
		o := run(t, sandbox.Options{
			Workspace: ws,
			Limits:    sandbox.Limits{Pids: 10},
			// Children that sleep, forked until fork fails; they die
			// with the sandbox.
			Args: []string{"perl", "-e", `my $n = 0; while ($n < 30) { my $p = fork; last unless defined $p; if ($p == 0) { sleep 30; exit } $n++ } print "$n\n"`},
		})
		if o.err != nil || !o.res.PidsLimited || o.res.ExitCode != 0 {
			t.Errorf("%v", o)
		}
		if n, _ := strconv.Atoi(strings.TrimSpace(o.stdout)); n < 9 || n > 9+12 {
			t.Errorf("%d sleeps ran under a limit of 10 processes\n%v", n, o)
		}
	})

	t.Run("MemoryHog", func(t *testing.T) {
		t.Parallel()
		const limit = 64 << 20
		o := run(t, sandbox.Options{
			Workspace: ws,
			Limits:    sandbox.Limits{Memory: limit, Timeout: 30 * time.Second},
			Args:      []string{"tail", "/dev/zero"}, // keeps every byte looking for a newline
		})
		if o.err != nil || !o.res.OOMKilled || o.res.Signal != syscall.SIGKILL || o.res.ExitCode != 137 || o.res.TimedOut {
			t.Errorf("want an OOM kill:\n%v", o)
		}
		if o.res.PeakMemory < limit*3/4 || o.res.PeakMemory > limit {
			t.Errorf("peak memory %d, limit %d", o.res.PeakMemory, limit)
		}
	})

	t.Run("CPU", func(t *testing.T) {
		t.Parallel()
		o := run(t, sandbox.Options{
			Workspace: ws,
			Limits:    sandbox.Limits{CPU: 0.2, Timeout: 2 * time.Second},
			Args:      []string{"sh", "-c", "while :; do :; done"},
		})
		if !o.res.TimedOut {
			t.Fatalf("%v", o)
		}
		// 0.2 of a core for 2 s: 0.4 s (and a period's slack).
		// (No lower bound but some: on a loaded machine it gets less.)
		if o.res.CPUTime < 20*time.Millisecond || o.res.CPUTime > 700*time.Millisecond {
			t.Errorf("CPU time %v with a limit of 0.2 cores for 2 s", o.res.CPUTime)
		}
	})

	t.Run("Output", func(t *testing.T) {
		t.Parallel()
		o := run(t, sandbox.Options{
			Workspace: ws,
			Limits:    sandbox.Limits{OutputBytes: 100000},
			// The pause: both outputs count against the limit, and the copy
			// of stdout must not pass it before the one of stderr has read.
			Args: []string{"sh", "-c", "echo start >&2; sleep 0.2; yes"},
		})
		if o.err != nil || !o.res.OutputLimited || o.res.Signal != syscall.SIGKILL {
			t.Errorf("%v", o.res)
		}
		if n := len(o.stdout) + len(o.stderr); n != 100000 || o.stderr != "start\n" {
			t.Errorf("%d bytes of output, stderr %q", n, o.stderr)
		}
	})

	t.Run("Stats", func(t *testing.T) {
		t.Parallel()
		o := run(t, sandbox.Options{Workspace: ws, Args: []string{"sh", "-c", "head -c 20000000 /dev/urandom | md5sum"}})
		if o.err != nil || o.res.ExitCode != 0 {
			t.Fatal(o)
		}
		if o.res.CPUTime < 10*time.Millisecond || o.res.PeakMemory < 1<<20 || o.res.Duration < o.res.CPUTime/2 {
			t.Errorf("implausible figures: %+v", o.res)
		}
	})
}

// TestThreadsStayHome checks that no thread of this process stays in a
// sandbox's mount namespace after runs (which would keep the workspace
// mount alive: see the init function of the package).
func TestThreadsStayHome(t *testing.T) {
	ws := workspace(t)
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run(t, sandbox.Options{Workspace: ws, Args: []string{"true"}})
		}()
	}
	wg.Wait()
	home, _ := os.Readlink("/proc/self/ns/mnt")
	var away []string
	for deadline := time.Now().Add(5 * time.Second); ; {
		away = nil
		tasks, _ := filepath.Glob("/proc/self/task/*/ns/mnt")
		for _, p := range tasks {
			if ns, err := os.Readlink(p); err == nil && ns != home {
				away = append(away, p+" "+ns)
			}
		}
		if len(away) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(away) > 0 {
		t.Errorf("threads in another mount namespace than %s: %v", home, away)
	}
}
