package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/computerfs/computerfs/internal/agentid"
	"github.com/computerfs/computerfs/internal/testmount"
	"github.com/computerfs/computerfs/sandbox"
)

func TestMain(m *testing.M) { os.Exit(testmount.Run(m)) }

// binary is sandboxctl built from this checkout, once per test binary.
func binary(t *testing.T) string { return testmount.Command(t, "sandboxctl", false) }

type setup struct {
	bin, ws, state string
}

func newSetup(t *testing.T) *setup {
	t.Helper()
	m := testmount.Start(t, t.TempDir())
	if err := os.Chown(m.Dir, 101000, 101000); err != nil {
		t.Fatal(err)
	}
	s := &setup{bin: binary(t), ws: m.Dir, state: testmount.PublicDir(t, "sandboxctl-state-")}
	t.Cleanup(func() {
		if out, err := exec.Command(s.bin, "gc", "--state-dir", s.state).CombinedOutput(); err != nil || len(out) > 0 {
			t.Errorf("left behind: %s %v", out, err)
		}
	})
	return s
}

// run runs sandboxctl with args and stdin, and returns its exit code and
// output.
func (s *setup) run(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	if len(args) > 0 && args[0] == "run" {
		args = append([]string{"run", "--state-dir", s.state, "-w", s.ws}, args[1:]...)
		if !sandbox.SeccompSupported { // go test without -tags seccomp
			args = append([]string{"run", "--no-seccomp"}, args[1:]...)
		}
	}
	return s.raw(t, stdin, args...)
}

// raw runs sandboxctl with exactly args.
func (s *setup) raw(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(s.bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, stdout.String(), stderr.String()
}

func TestRun(t *testing.T) {
	s := newSetup(t)
	for _, c := range []struct {
		args           []string
		stdin          string
		code           int
		stdout, stderr string
	}{
		{[]string{"--", "true"}, "", 0, "", ""},
		{[]string{"--", "sh", "-c", "exit 3"}, "", 3, "", ""},
		{[]string{"--", "sh", "-c", "kill -TERM $$"}, "", 143, "", ""},
		{[]string{"--", "sh", "-c", "cat; echo err >&2"}, "in\n", 0, "in\n", "err\n"},
		{[]string{"--env", "A=1", "--env", "B=x=y", "--", "sh", "-c", "echo $A $B"}, "", 0, "1 x=y\n", ""},
		{[]string{"--cwd", "/tmp", "--", "pwd"}, "", 0, "/tmp\n", ""},
		{[]string{"--", "pwd"}, "", 0, "/workspace\n", ""},
		{[]string{"--uid", "0", "--gid", "0", "--", "id", "-u"}, "", 0, "0\n", ""},
		{[]string{"--", "no-such-program"}, "", 127, "", "sandboxctl: no-such-program: program not found in the sandbox\n"},
		{[]string{"--timeout", "300ms", "--", "sleep", "10"}, "", 137, "", "sandboxctl: timed out after 300ms: killed\n"},
		{[]string{"--memory", "32M", "--", "tail", "/dev/zero"}, "", 137, "", "sandboxctl: out of memory (limit 33554432 bytes): killed\n"},
		{[]string{"--output-limit", "1K", "--", "yes"}, "", 137, strings.Repeat("y\n", 512), "sandboxctl: output passed 1024 bytes: cut and killed\n"},
	} {
		code, stdout, stderr := s.run(t, c.stdin, append([]string{"run"}, c.args...)...)
		if code != c.code || stdout != c.stdout || stderr != c.stderr {
			t.Errorf("%v: got exit %d stdout %q stderr %q, want %d %q %q", c.args, code, stdout, stderr, c.code, c.stdout, c.stderr)
		}
	}
	if b, err := os.ReadFile(filepath.Join(s.ws, "made")); err == nil {
		t.Errorf("unexpected file %q", b)
	}
	if code, _, stderr := s.run(t, "", "run", "--", "sh", "-c", "echo data > made"); code != 0 {
		t.Fatal(stderr)
	}
	if b, err := os.ReadFile(filepath.Join(s.ws, "made")); err != nil || string(b) != "data\n" {
		t.Errorf("file made in the sandbox: %q %v", b, err)
	}
}

func TestBadInput(t *testing.T) {
	s := newSetup(t)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "Usage"},
		{[]string{"frobnicate"}, 2, "unknown command"},
		{[]string{"run", "--", "true"}, 2, "-w MOUNTPOINT is required"},
		{[]string{"run", "-w", s.ws}, 2, "no program given"},
		{[]string{"run", "-w", "/no/such/mount", "--", "true"}, 125, "workspace: stat /no/such/mount: no such file or directory"},
		{[]string{"run", "-w", s.ws, "--memory", "lots", "--", "true"}, 2, `"lots" is not a size`},
		{[]string{"run", "-w", s.ws, "--pids", "x", "--", "true"}, 2, "invalid value"},
		{[]string{"run", "-w", s.ws, "--timeout", "5", "--", "true"}, 2, "invalid value"},
		{[]string{"run", "-w", s.ws, "--network", "bridge", "--", "true"}, 125, `network "bridge"`},
		{[]string{"run", "-w", s.ws, "--rootfs", "/no/such/dir", "--", "true"}, 125, "rootfs: stat /no/such/dir"},
		{[]string{"run", "-w", s.ws, "--uid", "70000", "--", "true"}, 2, "--uid and --gid"},
		{[]string{"run", "-w", s.ws, "--env", "NOEQUALS", "--", "true"}, 2, "KEY=VALUE"},
	} {
		code, _, stderr := s.raw(t, "", c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, stderr, c.code, c.want)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "100": 100, "1K": 1024, "512M": 512 << 20, "2G": 2 << 30, "1.5G": 3 << 29, "64MiB": 64 << 20, "10kb": 10240} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "M", "-1", "1X", "lots"} {
		if _, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q): no error", in)
		}
	}
}

// sleepers lists the host processes that run "sleep token".
func sleepers(token string) []string {
	var found []string
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, _ := os.ReadFile(filepath.Join(d, "cmdline"))
		if string(b) == "sleep\x00"+token+"\x00" {
			found = append(found, filepath.Base(d))
		}
	}
	return found
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestKillAndGC: sandboxctl killed with SIGKILL takes its sandbox's
// processes with it; what is left (state, cgroups) goes with gc, which
// leaves running sandboxes alone.
func TestKillAndGC(t *testing.T) {
	s := newSetup(t)
	token := fmt.Sprintf("1000.%d", time.Now().UnixNano()%1000000)
	start := func(token string) *exec.Cmd {
		cmd := exec.Command(s.bin, "run", "--no-seccomp="+fmt.Sprint(!sandbox.SeccompSupported), "--state-dir", s.state, "-w", s.ws, "--", "sleep", token)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		waitFor(t, "the sandbox to start", func() bool { return len(sleepers(token)) == 1 })
		return cmd
	}
	victim := start(token)
	survivorToken := token + "1"
	survivor := start(survivorToken)

	victim.Process.Signal(syscall.SIGKILL)
	victim.Wait()
	waitFor(t, "the killed sandboxctl's sleep to die", func() bool { return len(sleepers(token)) == 0 })

	containers := func() []string {
		ents, _ := os.ReadDir(filepath.Join(s.state, "containers"))
		var ids []string
		for _, e := range ents {
			ids = append(ids, e.Name())
		}
		return ids
	}
	cgroups := func() []string {
		dirs, _ := filepath.Glob("/sys/fs/cgroup/*/computerfs-sandbox-*/cfs-*")
		var mine []string
		for _, d := range dirs {
			for _, id := range containers() {
				if filepath.Base(d) == id {
					mine = append(mine, d)
				}
			}
		}
		return mine
	}
	if n := len(containers()); n != 2 {
		t.Fatalf("%d containers in the state directory, want the dead one and the running one", n)
	}
	if len(cgroups()) == 0 {
		t.Fatal("no cgroups of the sandboxes found")
	}
	code, stdout, stderr := s.run(t, "", "gc", "--state-dir", s.state)
	if code != 0 || strings.Count(stdout, "removed cfs-") != 1 {
		t.Fatalf("gc: exit %d\n%s%s", code, stdout, stderr)
	}
	left := containers()
	if len(left) != 1 {
		t.Fatalf("after gc: %v", left)
	}
	for _, d := range cgroups() {
		if filepath.Base(d) != left[0] {
			t.Errorf("cgroup %s left after gc", d)
		}
	}
	if len(sleepers(survivorToken)) != 1 {
		t.Fatal("gc hurt a running sandbox")
	}
	survivor.Process.Signal(syscall.SIGTERM) // passed on to sleep
	if err := survivor.Wait(); err == nil || survivor.ProcessState.ExitCode() != 143 {
		t.Errorf("survivor: %v", err)
	}
	if left := containers(); len(left) != 0 {
		t.Errorf("containers left after a normal end: %v", left)
	}
}

// TestJournalNamesSandbox: a change made in a sandbox is journaled with
// the sandbox it came from, the program and its host uid.
func TestJournalNamesSandbox(t *testing.T) {
	s := newSetup(t)
	if code, _, stderr := s.run(t, "", "run", "--", "sh", "-c", "echo data > from-sandbox"); code != 0 {
		t.Fatal(stderr)
	}
	if err := os.WriteFile(filepath.Join(s.ws, "from-host"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(testmount.Binary(t), "log", "-w", s.ws, "--json").CombinedOutput()
	if err != nil {
		t.Fatalf("computerfs log: %v\n%s", err, out)
	}
	var sandboxed, host bool
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var e struct {
			Op, Path string
			Actor    struct {
				Uid           uint32
				Comm, Sandbox string
			}
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		switch {
		case e.Op == "create" && e.Path == "/from-sandbox":
			sandboxed = e.Actor.Sandbox != "" && e.Actor.Uid == 101000 && e.Actor.Comm == "sh"
			if !sandboxed {
				t.Errorf("sandbox write journaled as %+v", e.Actor)
			}
		case e.Op == "create" && e.Path == "/from-host":
			host = e.Actor.Sandbox == "" && e.Actor.Uid == 0
			if !host {
				t.Errorf("host write journaled as %+v", e.Actor)
			}
		}
	}
	if !sandboxed || !host {
		t.Fatalf("journal lacks the writes:\n%s", out)
	}
}

// Without flags a sandbox has the default memory and pids limits: read in
// its cgroups on the host while it runs.
func TestDefaultLimits(t *testing.T) {
	s := newSetup(t)
	cmd := exec.Command(s.bin, "run", "--state-dir", s.state, "-w", s.ws, "--", "sleep", "60")
	if !sandbox.SeccompSupported {
		cmd.Args = append(cmd.Args[:2], append([]string{"--no-seccomp"}, cmd.Args[2:]...)...)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Signal(syscall.SIGTERM)
	h := sha256.Sum256([]byte(filepath.Clean(s.state)))
	parent := "computerfs-sandbox-" + hex.EncodeToString(h[:6])
	read := func(patterns ...string) string {
		for _, p := range patterns {
			ms, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", p))
			for _, m := range ms {
				if b, err := os.ReadFile(m); err == nil {
					return strings.TrimSpace(string(b))
				}
			}
		}
		return ""
	}
	deadline := time.Now().Add(time.Minute)
	for {
		mem := read("memory/"+parent+"/cfs-*/memory.limit_in_bytes", parent+"/cfs-*/memory.max")
		pids := read("pids/"+parent+"/cfs-*/pids.max", parent+"/cfs-*/pids.max")
		if mem == fmt.Sprint(sandbox.DefaultLimits.Memory) && pids == fmt.Sprint(sandbox.DefaultLimits.Pids) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sandbox's limits: memory %q pids %q, want %d and %d", mem, pids, sandbox.DefaultLimits.Memory, sandbox.DefaultLimits.Pids)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if sandbox.DefaultLimits.Memory <= 0 || sandbox.DefaultLimits.Pids <= 0 || sandbox.DefaultLimits.Pids > 4096 {
		t.Fatalf("default limits %+v", sandbox.DefaultLimits)
	}
}

// On a computerfs workspace, sandboxctl runs as its agent (the owner of
// the workspace's root): what the program writes is the agent's, and
// without the agent (--agent none) the sandbox cannot write there.
func TestRunsAsWorkspaceAgent(t *testing.T) {
	m := testmount.Start(t, t.TempDir(), "--no-sandbox")
	var root syscall.Stat_t
	if err := syscall.Stat(m.Dir, &root); err != nil {
		t.Fatal(err)
	}
	s := &setup{bin: binary(t), ws: m.Dir, state: testmount.PublicDir(t, "sandboxctl-state-")}
	if code, out, errOut := s.run(t, "", "run", "--", "sh", "-c", "id -u; mkdir -p a/b; touch a/b/c"); code != 0 || out != "1000\n" {
		t.Fatalf("exit %d %q %s", code, out, errOut)
	}
	for _, p := range []string{"a", "a/b", "a/b/c"} {
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(m.Dir, p), &st); err != nil || st.Uid != root.Uid || st.Gid != root.Gid {
			t.Errorf("%s: %v owner %d:%d, want the agent %d:%d", p, err, st.Uid, st.Gid, root.Uid, root.Gid)
		}
	}
	if code, _, _ := s.run(t, "", "run", "--agent", "none", "--", "touch", "x"); code == 0 {
		t.Error("with --agent none the sandbox's shared user wrote the agent's workspace")
	}
	if code, _, errOut := s.run(t, "", "run", "--agent", "0:0", "--", "true"); code != 2 || !strings.Contains(errOut, "not root") {
		t.Errorf("--agent 0:0: exit %d %s", code, errOut)
	}
	if out, err := exec.Command(s.bin, "gc", "--state-dir", s.state).CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("left behind: %s %v", out, err)
	}
}

// On a workspace whose agent was named (--agent), sandboxctl gives the
// sandbox the id block the registry gave that agent, as the daemon does,
// not the block every sandbox without one shares.
func TestNamedAgentBlock(t *testing.T) {
	m := testmount.Start(t, t.TempDir(), "--no-sandbox", "--agent", "4343:4343")
	s := &setup{bin: binary(t), ws: m.Dir, state: testmount.PublicDir(t, "sandboxctl-state-")}
	base, count, ok := agentid.RegisteredBlock("", 4343)
	if !ok {
		t.Fatal("the registry has no block for the named agent 4343")
	}
	code, out, errOut := s.run(t, "", "run", "--", "cat", "/proc/self/uid_map")
	if code != 0 {
		t.Fatalf("exit %d %s", code, errOut)
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		if len(f) != 3 {
			t.Fatalf("uid_map line %q", l)
		}
		host, _ := strconv.ParseUint(f[1], 10, 32)
		size, _ := strconv.ParseUint(f[2], 10, 32)
		if host == 4343 && size == 1 {
			continue
		}
		if host < uint64(base) || host+size > uint64(base+count) {
			t.Fatalf("uid_map line %q outside the agent's block %d+%d:\n%s", l, base, count, out)
		}
	}
}

// A mount under a directory the sandbox binds from the host (here
// /usr/share, in a mount namespace of the test's own) is named in a clear
// error instead of the kernel's EINVAL.
func TestMountUnderHostDirNamed(t *testing.T) {
	s := newSetup(t)
	args := []string{"-m", "--propagation", "private", "sh", "-c", `mount -t tmpfs -o size=1m t /usr/share && exec "$@"`, "sh",
		s.bin, "run", "--state-dir", s.state, "-w", s.ws}
	if !sandbox.SeccompSupported {
		args = append(args, "--no-seccomp")
	}
	out, err := exec.Command("unshare", append(args, "--", "true")...).CombinedOutput()
	ee, _ := err.(*exec.ExitError)
	if ee == nil || ee.ExitCode() != 125 || !strings.Contains(string(out), "/usr/share is a mount point under /usr") {
		t.Fatalf("%v: %s", err, out)
	}
}
