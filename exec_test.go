package computerfs_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/computerfs/computerfs"
	"github.com/computerfs/computerfs/internal/proc"
	"github.com/computerfs/computerfs/internal/testmount"
	"github.com/computerfs/computerfs/sandbox"
)

// execOn runs a request through the daemon's control socket.
func execOn(t *testing.T, mount string, req computerfs.ExecRequest) (computerfs.ExecResult, string, string, error) {
	t.Helper()
	c, err := computerfs.Dial(mount)
	if err != nil {
		t.Fatal(err)
	}
	// The client waits for the command's own timeout and then some (a
	// cold go test in the sandbox of a loaded machine takes minutes).
	wait := 2 * time.Minute
	if d, err := time.ParseDuration(req.Timeout); err == nil && d+time.Minute > wait {
		wait = d + time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var out, errb strings.Builder
	res, err := c.Exec(ctx, req, &out, &errb)
	return res, out.String(), errb.String(), err
}

// A store deeper than a unix socket address can name still gets its
// control socket, and the CLI reaches it.
func TestControlSocketLongStorePath(t *testing.T) {
	store := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60), "ws")
	if len(store) <= 108 {
		t.Fatalf("store path %s is short enough for a socket address", store)
	}
	m := testmount.Start(t, store)
	res, out, _, err := execOn(t, m.Dir, computerfs.ExecRequest{Command: "echo hi > f && cat f"})
	if err != nil || res.ExitCode != 0 || out != "hi\n" {
		t.Fatalf("exec: %v %+v %q", err, res, out)
	}
	got, err := exec.Command(testmount.Binary(t), "status", "-w", m.Dir).CombinedOutput()
	if err != nil || !strings.Contains(string(got), store) {
		t.Fatalf("computerfs status: %v\n%s", err, got)
	}
}

func TestExecSandbox(t *testing.T) {
	m := testmount.Start(t, filepath.Join(t.TempDir(), "ws"))

	res, out, errOut, err := execOn(t, m.Dir, computerfs.ExecRequest{Backend: "sandbox",
		Command: `id -u; pwd; echo made > by-sandbox; readlink /proc/self/exe; echo oops >&2; exit 3`})
	if err != nil {
		t.Fatal(err)
	}
	if res.Backend != "sandbox" || res.ExitCode != 3 || out != "1000\n/workspace\n/usr/bin/readlink\n" || errOut != "oops\n" {
		t.Fatalf("sandbox exec: %+v stdout %q stderr %q", res, out, errOut)
	}
	if res.PeakMemory <= 0 {
		t.Errorf("no peak memory reported: %+v", res)
	}
	if res.Warm {
		t.Errorf("the first sandboxed command ran warm: warm sandboxes start only once the workspace uses its sandbox: %+v", res)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(m.Dir, "by-sandbox"), &st); err != nil || st.Uid != statusOf(t, m.Dir).Agent.UID {
		t.Fatalf("file written in the sandbox: %v uid %d", err, st.Uid)
	}
	logOut, err := exec.Command(testmount.Binary(t), "log", "-w", m.Dir, "--path", "/by-sandbox", "--json").CombinedOutput()
	if err != nil || !strings.Contains(string(logOut), `"sandbox":"`) {
		t.Fatalf("the journal does not name the sandbox: %v\n%s", err, logOut)
	}

	// auto: a native program goes to the sandbox and the result says why;
	// the shell's own commands stay on the fast path.
	res, out, _, err = execOn(t, m.Dir, computerfs.ExecRequest{Command: `gcc -dumpmachine | tr -d 0-9`})
	if err != nil || res.Backend != "sandbox" || !strings.Contains(res.Why, "gcc is not built in") || !strings.Contains(out, "linux-gnu") {
		t.Fatalf("auto with gcc: %v %+v %q", err, res, out)
	}
	res, out, _, err = execOn(t, m.Dir, computerfs.ExecRequest{Command: `cat by-sandbox`})
	if err != nil || res.Backend != "shell" || out != "made\n" {
		t.Fatalf("auto with cat: %v %+v %q", err, res, out)
	}

	// Now a sandbox waits for the next command.
	if res, _, _, err := execOn(t, m.Dir, computerfs.ExecRequest{Backend: "sandbox", Command: "true"}); err != nil || !res.Warm {
		t.Errorf("after a first sandboxed command, the next one should run warm (--sandbox-warm 1): %v %+v", err, res)
	}

	// Stdin, env and cwd reach the program.
	if err := os.Mkdir(filepath.Join(m.Dir, "sub"), 0o777); err != nil {
		t.Fatal(err)
	}
	res, out, _, err = execOn(t, m.Dir, computerfs.ExecRequest{Backend: "sandbox", Cwd: "sub", Env: []string{"GREETING=hi"},
		Stdin: []byte("one\ntwo\n"), Command: `echo "$GREETING $(pwd)"; wc -l`})
	if err != nil || res.ExitCode != 0 || out != "hi /workspace/sub\n2\n" {
		t.Fatalf("stdin/env/cwd: %v %+v %q", err, res, out)
	}

	// A timeout kills the whole tree and reads as 124 on both backends.
	start := time.Now()
	res, _, _, err = execOn(t, m.Dir, computerfs.ExecRequest{Backend: "sandbox", Timeout: "1s", Command: `sleep 30 & sleep 30`})
	if err != nil || res.ExitCode != 124 || res.Stopped != "timeout" || time.Since(start) > 20*time.Second {
		t.Fatalf("timeout: %v %+v after %v", err, res, time.Since(start))
	}

	// The host's network is refused unless the daemon allows it; a
	// missing program is 127.
	if _, _, _, err = execOn(t, m.Dir, computerfs.ExecRequest{Backend: "sandbox", Network: "host", Command: "true"}); err == nil || !strings.Contains(err.Error(), "--sandbox-network") {
		t.Fatalf("network host allowed: %v", err)
	}
	res, _, errOut, err = execOn(t, m.Dir, computerfs.ExecRequest{Backend: "sandbox", Command: "no-such-program-x"})
	if err != nil || res.ExitCode != 127 || !strings.Contains(errOut, "not found") {
		t.Fatalf("missing program: %v %+v %q", err, res, errOut)
	}

	// The CLI: exit status and -v's report of the backend.
	cmd := exec.Command(testmount.Binary(t), "exec", "-v", "-w", m.Dir, "--", "gcc -dumpmachine; exit 5")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Run()
	if cmd.ProcessState.ExitCode() != 5 || stdout.String() == "" || !strings.Contains(stderr.String(), "backend sandbox") {
		t.Fatalf("computerfs exec -v: exit %d stdout %q stderr %q", cmd.ProcessState.ExitCode(), stdout.String(), stderr.String())
	}
}

func TestExecNoSandbox(t *testing.T) {
	m := testmount.Start(t, filepath.Join(t.TempDir(), "ws"), "--no-sandbox")
	_, _, _, err := execOn(t, m.Dir, computerfs.ExecRequest{Backend: "sandbox", Command: "true"})
	if err == nil || !strings.Contains(err.Error(), "started without the sandbox") {
		t.Fatalf("sandbox on a daemon without one: %v", err)
	}
	_, _, _, err = execOn(t, m.Dir, computerfs.ExecRequest{Command: "gcc --version"})
	if err == nil || !strings.Contains(err.Error(), "gcc is not built in") {
		t.Fatalf("auto with gcc on a daemon without sandbox: %v", err)
	}
	res, out, _, err := execOn(t, m.Dir, computerfs.ExecRequest{Command: "echo ok"})
	if err != nil || res.Backend != "shell" || out != "ok\n" {
		t.Fatalf("shell: %v %+v %q", err, res, out)
	}
}

// The sandbox runs as the workspace's agent, cold and warm: 1000:1000
// inside, the agent on the host.
func TestExecSandboxRunsAsAgent(t *testing.T) {
	m := testmount.Start(t, filepath.Join(t.TempDir(), "ws"))
	a := statusOf(t, m.Dir).Agent
	for i, warm := range []bool{false, true} {
		name := fmt.Sprintf("mine%d", i)
		res, out, _, err := execOn(t, m.Dir, computerfs.ExecRequest{Backend: "sandbox", Command: `echo "$(id -u):$(id -g)"; touch ` + name})
		if err != nil || res.ExitCode != 0 || out != "1000:1000\n" || res.Warm != warm {
			t.Fatalf("command %d: %v %+v %q, want warm %v", i, err, res, out, warm)
		}
		wantAgentOwns(t, m, a, "sandbox", name)
	}
}

// With warm sandboxes holding the mount in their namespaces, an unmount
// from outside still ends the daemon.
func TestWarmSandboxesDoNotHoldTheMount(t *testing.T) {
	for _, how := range []string{"umount", "computerfs unmount"} {
		t.Run(how, func(t *testing.T) {
			m := testmount.Start(t, filepath.Join(t.TempDir(), "ws"), "--sandbox-warm", "2")
			for i, warm := range []bool{false, true} {
				if res, _, _, err := execOn(t, m.Dir, computerfs.ExecRequest{Backend: "sandbox", Command: "true"}); err != nil || res.Warm != warm {
					t.Fatalf("command %d: %v %+v, want warm %v", i, err, res, warm)
				}
			}
			var cmd *exec.Cmd
			if how == "umount" {
				cmd = exec.Command("umount", m.Dir)
			} else {
				cmd = exec.Command(testmount.Binary(t), "unmount", m.Dir)
			}
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s: %v %s", how, err, out)
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				if !proc.Running(m.Pid) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the daemon (pid %d) still runs 30 s after %s", m.Pid, how)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if !strings.Contains(m.Log(), "store closed") {
				t.Fatalf("the daemon did not close its store; log:\n%s", m.Log())
			}
			m.Remount(t) // for the test's cleanup
		})
	}
}

// A daemon killed while it keeps a warm sandbox leaves that sandbox's
// state and cgroups (its pid 1 exits with the daemon); the next daemon on
// the same state directory removes them when it starts.
func TestSandboxLeftoversOfDeadDaemon(t *testing.T) {
	state := testmount.PublicDir(t, "sandbox-state-")
	containers := func() []string {
		es, _ := os.ReadDir(filepath.Join(state, "containers"))
		var ids []string
		for _, e := range es {
			ids = append(ids, e.Name())
		}
		return ids
	}
	t.Cleanup(func() {
		if removed, err := sandbox.GC(state); err != nil || len(removed) > 0 {
			t.Errorf("sandboxes left at the end: %v %v", removed, err)
		}
	})
	args := []string{"--sandbox-state-dir", state, "--sandbox-warm", "1"}
	m := testmount.Start(t, filepath.Join(t.TempDir(), "ws"), args...)
	if res, _, _, err := execOn(t, m.Dir, computerfs.ExecRequest{Backend: "sandbox", Command: "true"}); err != nil || res.ExitCode != 0 {
		t.Fatalf("sandbox command: %v %+v", err, res)
	}
	// The warm sandbox has started once its state is written.
	started := func() bool {
		ids := containers()
		if len(ids) == 0 {
			return false
		}
		_, err := os.Stat(filepath.Join(state, "containers", ids[0], "state.json"))
		return err == nil
	}
	for deadline := time.Now().Add(30 * time.Second); !started(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no warm sandbox started")
		}
	}
	m.Kill(t)
	left := containers()
	if len(left) == 0 {
		t.Fatal("the killed daemon left no sandbox state: nothing to test")
	}
	m.Remount(t, args...)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		still := 0
		for _, id := range containers() {
			if slices.Contains(left, id) {
				still++
			}
		}
		if still == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("30 s after a new daemon started, %d of the dead daemon's sandboxes %v are left; log:\n%s", still, left, m.Log())
		}
	}
	// The log line comes once GC has returned, a moment after the
	// removal the loop above saw.
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(m.Log(), "removed the sandboxes of dead daemons"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the daemon did not log what it removed; log:\n%s", m.Log())
		}
	}
}

// Shutting the workspace down stops the commands that run in it: a
// sandboxed command would otherwise hold the mount, and the daemon would
// wait for it.
func TestShutdownStopsRunningCommands(t *testing.T) {
	for _, how := range []string{"SIGTERM", "umount"} {
		t.Run(how, func(t *testing.T) {
			m := testmount.Start(t, filepath.Join(t.TempDir(), "ws"))
			cmd := exec.Command(testmount.Binary(t), "exec", "-w", m.Dir, "--backend", "sandbox", "--", "touch started; sleep 300")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if _, err := os.Stat(filepath.Join(m.Dir, "started")); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the sandboxed command did not start")
				}
			}
			start := time.Now()
			if how == "SIGTERM" {
				if err := syscall.Kill(m.Pid, syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
			} else if out, err := exec.Command("umount", m.Dir).CombinedOutput(); err != nil {
				t.Fatalf("umount: %v %s", err, out)
			}
			for {
				if !proc.Running(m.Pid) {
					break
				}
				if time.Since(start) > 30*time.Second {
					t.Fatalf("the daemon still runs 30 s after %s, waiting for the sandboxed sleep", how)
				}
				time.Sleep(50 * time.Millisecond)
			}
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("computerfs exec succeeded although its command was stopped")
				}
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				t.Fatal("computerfs exec still waits after the daemon ended")
			}
			m.Remount(t) // for the test's cleanup
		})
	}
}
