package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/computerfs/computerfs/internal/proc"
	"github.com/computerfs/computerfs/internal/testmount"
)

// run runs bin with args and stdin and returns its stdout, stderr and exit
// status.
func runWith(t *testing.T, stdin string, bin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("%s %q: %v", bin, args, err)
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

// variable are the parts of -v's report that differ from run to run.
// (a sandboxed command is warm when one waits already).
var variable = regexp.MustCompile(`\d+ ms|request \d+|CPU \d+ ms|peak memory \d+ KiB`)

// TestThinClientAgrees: computerfs-exec ARGS answers as computerfs exec
// ARGS: the same stdout, stderr and exit status, on both backends, with
// stdin, flags, timeouts, the daemon's errors and usage errors.
func TestThinClientAgrees(t *testing.T) {
	bin, thin := testmount.Binary(t), testmount.Tool(t, "computerfs-exec")
	m := testmount.Start(t, filepath.Join(t.TempDir(), "ws"))
	if _, errOut, code := cli(t, bin, "exec", "-w", m.Dir, "--", "mkdir -p /workspace/d && seq 1 3 > /workspace/d/n"); code != 0 {
		t.Fatalf("setup: exit %d: %s", code, errOut)
	}
	notMounted := t.TempDir()
	for _, tc := range []struct {
		stdin string
		args  []string
	}{
		{"", []string{"-w", m.Dir, "--", "echo out; echo err >&2; exit 3"}},
		{"", []string{"-w", m.Dir, "--", "printf", "'%s\\n'", "a", "b"}},
		{"x\ny\n", []string{"-w", m.Dir, "--", "wc -l"}},
		{"", []string{"-w", m.Dir, "--cwd", "/workspace/d", "--", "pwd; cat n"}},
		{"", []string{"--cwd", "/workspace/d", "cat n", "-w", m.Dir}}, // flags after the command
		{"", []string{"-w", m.Dir, "--env", "A=1", "--env", "B=2", "--", "echo $A$B"}},
		{"", []string{"-w", m.Dir, "--", "seq 1 100000"}}, // many output events
		{"", []string{"-w", m.Dir, "--", "cat /workspace/nosuch"}},
		{"", []string{"-w", m.Dir, "--timeout", "1s", "--", "sleep 30"}},
		{"", []string{"-w", m.Dir, "--timeout", "soon", "--", "ls"}},
		{"", []string{"-w", m.Dir, "--backend", "bogus", "--", "ls"}},
		{"", []string{"-w", m.Dir, "-v", "--", "ls d"}},
		{"", []string{"-w", m.Dir, "-v", "--backend", "sandbox", "--", "echo boxed; cat d/n >&2; exit 5"}},
		{"", []string{"--", "ls"}},
		{"", []string{"-w", m.Dir}},
		{"", []string{"-w", m.Dir, "--bogus", "--", "ls"}},
		{"", []string{"-w", m.Dir, "--timeout"}},
		{"", []string{"-w", notMounted, "--", "ls"}},
		{"", []string{"-w", filepath.Join(notMounted, "nosuch"), "--", "ls"}},
	} {
		out, errOut, code := runWith(t, tc.stdin, bin, append([]string{"exec"}, tc.args...)...)
		tout, terrOut, tcode := runWith(t, tc.stdin, thin, tc.args...)
		norm := func(s string) string { return variable.ReplaceAllString(strings.ReplaceAll(s, ", warm", ""), "N") }
		errOut, terrOut = norm(errOut), norm(terrOut)
		if tout != out || terrOut != errOut || tcode != code {
			t.Errorf("exec %q:\ncomputerfs exec: exit %d, stdout %.200q, stderr %q\ncomputerfs-exec: exit %d, stdout %.200q, stderr %q",
				tc.args, code, out, errOut, tcode, tout, terrOut)
		}
	}
	out, errOut, code := runWith(t, "", thin, "-h")
	if code != 0 || errOut != "" || !strings.HasPrefix(out, "computerfs-exec: run a shell command") || !strings.Contains(out, "-backend string") {
		t.Errorf("computerfs-exec -h: exit %d, stderr %q, stdout:\n%s", code, errOut, out)
	}

	// The daemon gone: the same message from both.
	if err := syscall.Kill(m.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); proc.Running(m.Pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("daemon %d survived SIGKILL", m.Pid)
		}
	}
	want := fmt.Sprintf("computerfs exec: the daemon for %s, pid %d, is gone: run computerfs mount --store %s %s\n", m.Dir, m.Pid, m.Store, m.Dir)
	for _, b := range []string{bin, thin} {
		args := []string{"-w", m.Dir, "--", "ls"}
		if b == bin {
			args = append([]string{"exec"}, args...)
		}
		if out, errOut, code := runWith(t, "", b, args...); code != 1 || out != "" || errOut != want {
			t.Errorf("%s with its daemon killed: exit %d, stdout %q, stderr %q; want exit 1 and %q", filepath.Base(b), code, out, errOut, want)
		}
	}
	m.Remount(t) // over the dead mount, as the message says; for the test's cleanup
}

// TestThinClientDaemonDies: a command whose daemon is killed while it runs
// says that the daemon is gone, through the Go thin client and the C one.
func TestThinClientDaemonDies(t *testing.T) {
	for _, thin := range []string{testmount.Tool(t, "computerfs-exec"), testmount.CClient(t, false)} {
		m := testmount.Start(t, filepath.Join(t.TempDir(), "ws"), "--no-sandbox")
		cmd := exec.Command(thin, "-w", m.Dir, "--", "echo started; sleep 120")
		var errb bytes.Buffer
		out := &lineWaiter{lines: make(chan string, 1)}
		cmd.Stdout, cmd.Stderr = out, &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-out.lines:
		case <-time.After(time.Minute):
			t.Fatal("exec did not start")
		}
		m.Kill(t)
		cmd.Wait()
		want := fmt.Sprintf("computerfs exec: the daemon for %s, pid %d, is gone: run computerfs mount --store %s %s\n", m.Dir, m.Pid, m.Store, m.Dir)
		if code := cmd.ProcessState.ExitCode(); code != 1 || errb.String() != want {
			t.Errorf("%s when its daemon was killed: exit %d, stderr %q; want exit 1, %q", filepath.Base(thin), code, errb.String(), want)
		}
	}
}

// TestExecInterrupted: SIGINT or SIGTERM to the client (computerfs exec,
// the Go computerfs-exec or the C one) stops the command in the daemon:
// what it would have done later is never done, and the client ends with
// status 1, saying "context canceled".
func TestExecInterrupted(t *testing.T) {
	bin, thin, cthin := testmount.Binary(t), testmount.Tool(t, "computerfs-exec"), testmount.CClient(t, false)
	m := testmount.Start(t, filepath.Join(t.TempDir(), "ws"), "--no-sandbox")
	for i, tc := range []struct {
		bin string
		sig syscall.Signal
	}{{bin, syscall.SIGINT}, {thin, syscall.SIGINT}, {cthin, syscall.SIGINT}, {bin, syscall.SIGTERM}, {thin, syscall.SIGTERM}, {cthin, syscall.SIGTERM}} {
		late := fmt.Sprintf("late%d", i)
		args := []string{"-w", m.Dir, "--", "echo started; sleep 3; touch /workspace/" + late}
		if tc.bin == bin {
			args = append([]string{"exec"}, args...)
		}
		cmd := exec.Command(tc.bin, args...)
		out := &lineWaiter{lines: make(chan string, 1)}
		var errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = out, &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-out.lines:
		case <-time.After(time.Minute):
			t.Fatal("exec did not start")
		}
		cmd.Process.Signal(tc.sig)
		cmd.Wait()
		if code := cmd.ProcessState.ExitCode(); code != 1 || errb.String() != "computerfs exec: context canceled\n" {
			t.Errorf("%s after %v: exit %d, stderr %q; want 1, context canceled", filepath.Base(tc.bin), tc.sig, code, errb.String())
		}
		time.Sleep(5 * time.Second) // past the command's sleep
		if _, err := os.Stat(filepath.Join(m.Dir, late)); err == nil {
			t.Errorf("%s after %v: the command went on in the daemon", filepath.Base(tc.bin), tc.sig)
		}
	}
}
