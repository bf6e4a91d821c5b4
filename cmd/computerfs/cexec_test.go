package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/computerfs/computerfs/internal/proc"
	"github.com/computerfs/computerfs/internal/testmount"
)

// cClients are the C exec client as `make build` builds it and, if the
// compiler has them, under the address and undefined-behaviour
// sanitizers.
func cClients(t *testing.T) []string {
	clients := []string{testmount.CClient(t, false)}
	ok := t.Run("sanitizers", func(t *testing.T) { clients = append(clients, testmount.CClient(t, true)) })
	if !ok {
		t.FailNow()
	}
	return clients
}

// invocation is a run of an exec client.
type invocation struct {
	dir   string // the working directory; "" for the test's
	stdin string
	args  []string
}

// runClient runs bin as inv says and returns its stdout, stderr and exit
// status. A sanitized C client's finding fails the test.
func runClient(t *testing.T, bin string, inv invocation) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, inv.args...)
	cmd.Dir = inv.dir
	cmd.Stdin = strings.NewReader(inv.stdin)
	cmd.Env = append(os.Environ(), testmount.SanitizerEnv...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("%s %q: %v", bin, inv.args, err)
	}
	if code := cmd.ProcessState.ExitCode(); code == 99 || strings.Contains(errb.String(), "Sanitizer") || strings.Contains(errb.String(), "runtime error:") {
		t.Fatalf("%s %q: exit %d, a sanitizer's finding:\n%s", bin, inv.args, code, errb.String())
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

// agree runs inv with the Go client (thin) and each C client and fails
// unless their stdout, stderr (with -v's varying figures normalised) and
// exit status are the same.
func agree(t *testing.T, thin string, cs []string, inv invocation) {
	t.Helper()
	norm := func(s string) string { return variable.ReplaceAllString(strings.ReplaceAll(s, ", warm", ""), "N") }
	out, errOut, code := runClient(t, thin, inv)
	for _, c := range cs {
		cout, cerrOut, ccode := runClient(t, c, inv)
		if cout != out || norm(cerrOut) != norm(errOut) || ccode != code {
			t.Errorf("%q (in %q):\nGo client: exit %d, stdout %.300q, stderr %q\nC client:  exit %d, stdout %.300q, stderr %q",
				inv.args, inv.dir, code, out, errOut, ccode, cout, cerrOut)
		}
	}
}

// TestCClientAgrees: the C client (clients/c) answers as the Go
// computerfs-exec on a real mount: the same stdout, stderr and exit
// status, for both backends, stdin, flags where they may be, the
// daemon's errors, usage errors, help, paths to the mount point of every
// kind, and once the daemon is killed.
func TestCClientAgrees(t *testing.T) {
	thin := testmount.Tool(t, "computerfs-exec")
	cs := cClients(t)
	m := testmount.Start(t, filepath.Join(t.TempDir(), "ws"))
	if _, errOut, code := runClient(t, thin, invocation{args: []string{"-w", m.Dir, "--", "mkdir -p /workspace/d && seq 1 3 > /workspace/d/n"}}); code != 0 {
		t.Fatalf("setup: exit %d: %s", code, errOut)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(m.Dir, link); err != nil {
		t.Fatal(err)
	}
	notMounted := t.TempDir()
	binary := "\x00\xff\xfe\r\n<&>\u2028é" + strings.Repeat("y", 1<<20)
	for _, inv := range []invocation{
		{args: []string{"-w", m.Dir, "--", "echo out; echo err >&2; exit 3"}},
		{args: []string{"-w", m.Dir, "--", "printf", "'%s\\n'", "a", "b"}},
		{args: []string{"-w", m.Dir, "--", "printf", "'%s\\n'", "-v", "--cwd", "-w", "x"}}, // flags after "--" are the command's
		{stdin: "x\ny\n", args: []string{"-w", m.Dir, "--", "wc -l"}},
		{stdin: binary, args: []string{"-w", m.Dir, "--", "wc -c; head -c 20 | od -c"}},
		{args: []string{"-w", m.Dir, "--cwd", "/workspace/d", "--", "pwd; cat n"}},
		{args: []string{"--cwd", "/workspace/d", "cat n", "-w", m.Dir}}, // flags after the command
		{args: []string{"--w=" + m.Dir, "-v=false", "--", "true"}},
		{args: []string{"-w", m.Dir, "-v=1", "--backend=shell", "--", "echo", "hi"}},
		{args: []string{"-w", m.Dir, "--env", "A=1", "--env", "B=<&>\u00e9\x01", "--", "echo $A$B"}},
		{args: []string{"-w", m.Dir, "--", "echo '\xff\xfe<\u2028>'; printf '\\033[31m\\x00\\n'"}},
		{args: []string{"-w", m.Dir, "--", "seq 1 100000"}}, // many output events
		{args: []string{"-w", m.Dir, "--", "seq 1 20000 >&2; echo done"}},
		{args: []string{"-w", m.Dir, "--", "cat /workspace/nosuch"}},
		{args: []string{"-w", m.Dir, "--", "exit 255"}},
		{args: []string{"-w", m.Dir, "--timeout", "1s", "--", "sleep 30"}},
		{args: []string{"-w", m.Dir, "--timeout", "soon", "--", "ls"}},
		{args: []string{"-w", m.Dir, "--backend", "bogus", "--", "ls"}},
		{args: []string{"-w", m.Dir, "--cwd", "/workspace/\x1b]0;x\x07", "--", "ls"}},
		{args: []string{"-w", m.Dir, "--network", "host", "--backend", "sandbox", "--", "true"}},
		{args: []string{"-w", m.Dir, "-v", "--", "ls d"}},
		{args: []string{"-w", m.Dir, "-v", "--backend", "sandbox", "--", "echo boxed; cat d/n >&2; exit 5"}},
		{dir: filepath.Dir(m.Dir), args: []string{"-w", filepath.Base(m.Dir), "--", "pwd"}}, // a relative mount point
		{args: []string{"-w", m.Dir + "/./", "--", "pwd"}},
		{args: []string{"-w", link, "--", "pwd"}},
		{args: []string{"--", "ls"}},
		{args: []string{"-w", m.Dir}},
		{args: []string{"-w", ""}},
		{args: []string{"-w", m.Dir, "--bogus", "--", "ls"}},
		{args: []string{"-w", m.Dir, "-v=maybe\x1b[2J\xff", "--", "ls"}},
		{args: []string{"---w", m.Dir}},
		{args: []string{"-=x"}},
		{args: []string{"-w", m.Dir, "--timeout"}},
		{args: []string{"-h"}},
		{args: []string{"--help", "--bogus"}},
		{args: []string{"-w", m.Dir, "-help"}},
		{args: []string{"-w", notMounted, "--", "ls"}},
		{args: []string{"-w", filepath.Join(notMounted, "nosuch\n"), "--", "ls"}},
		{args: []string{"-w", "/proc", "--", "ls"}},
		{stdin: "", args: []string{"-w", "/", "--", "ls"}},
		// stdin past 16 MiB: refused whole (it was cut, silently), exactly 16 MiB passed on
		{stdin: strings.Repeat("z", 16<<20+1), args: []string{"-w", m.Dir, "--", "wc -c"}},
		{stdin: strings.Repeat("z", 16<<20), args: []string{"-w", m.Dir, "--", "wc -c"}},
	} {
		agree(t, thin, cs, inv)
	}
	// Standard input over 16 MiB is refused, never cut; 16 MiB passes whole.
	if out, errOut, code := runClient(t, thin, invocation{stdin: strings.Repeat("z", 16<<20+1), args: []string{"-w", m.Dir, "--", "wc -c"}}); code != 1 || out != "" ||
		errOut != "computerfs exec: standard input is over 16 MiB: write it to a file in the workspace and redirect from it\n" {
		t.Errorf("stdin of 16 MiB + 1: exit %d, %q, %q", code, out, errOut)
	}
	if out, errOut, code := runClient(t, thin, invocation{stdin: strings.Repeat("z", 16<<20), args: []string{"-w", m.Dir, "--", "wc -c"}}); code != 0 || strings.TrimSpace(out) != "16777216" {
		t.Errorf("stdin of 16 MiB: exit %d, %q, %q", code, out, errOut)
	}
	// Standard input that cannot be read.
	for _, c := range append([]string{thin}, cs...) {
		cmd := exec.Command(c, "-w", m.Dir, "--", "cat")
		if f, err := os.Open(notMounted); err == nil {
			cmd.Stdin = f
			defer f.Close()
		}
		cmd.Env = append(os.Environ(), testmount.SanitizerEnv...)
		out, _ := cmd.CombinedOutput()
		if want := "computerfs exec: read /dev/stdin: is a directory\n"; cmd.ProcessState.ExitCode() != 1 || string(out) != want {
			t.Errorf("%s with a directory for stdin: exit %d, %q; want 1, %q", filepath.Base(c), cmd.ProcessState.ExitCode(), out, want)
		}
	}

	// The daemon gone: the same message.
	if err := syscall.Kill(m.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); proc.Running(m.Pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("daemon %d survived SIGKILL", m.Pid)
		}
	}
	want := fmt.Sprintf("computerfs exec: the daemon for %s, pid %d, is gone: run computerfs mount --store %s %s\n", m.Dir, m.Pid, m.Store, m.Dir)
	for _, c := range cs {
		if out, errOut, code := runClient(t, c, invocation{args: []string{"-w", m.Dir, "--", "ls"}}); code != 1 || out != "" || errOut != want {
			t.Errorf("the C client with its daemon killed: exit %d, stdout %q, stderr %q; want exit 1 and %q", code, out, errOut, want)
		}
	}
	m.Remount(t) // over the dead mount, as the message says; for the test's cleanup
}
