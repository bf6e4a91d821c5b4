package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/computerfs/computerfs/internal/proc"
	"github.com/computerfs/computerfs/internal/testmount"
)

// The tests run the built binary, as a user would.

func TestMain(m *testing.M) { os.Exit(testmount.Run(m)) }

// cli runs the computerfs binary and returns its stdout, stderr and exit
// status.
func cli(t *testing.T, bin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("computerfs %q: %v", args, err)
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

// TestHelp: every command's -h, --help and `help CMD` exit 0 and start with
// its one-line summary and an example; -h and help list every command.
func TestHelp(t *testing.T) {
	bin := testmount.Binary(t)
	for _, c := range commands {
		head := fmt.Sprintf("computerfs %s: %s\n\nExample:\n  computerfs %s", c.name, c.summary, c.name)
		for _, args := range [][]string{{c.name, "-h"}, {c.name, "--help"}, {"help", c.name}} {
			out, errOut, code := cli(t, bin, args...)
			if code != 0 || errOut != "" || !strings.HasPrefix(out, head) {
				t.Errorf("computerfs %s: exit %d, stderr %q, stdout starts %q; want exit 0, nothing on stderr, stdout starting %q",
					strings.Join(args, " "), code, errOut, out[:min(len(out), len(head)+20)], head)
			}
		}
		if strings.Contains(c.summary, "\n") || strings.HasSuffix(c.summary, ".") {
			t.Errorf("%s: the summary is not one line without a period: %q", c.name, c.summary)
		}
	}
	out, _, _ := cli(t, bin, "mount", "-h")
	if !strings.Contains(out, "\nFlags:\n") || !strings.Contains(out, "-store string") || !strings.Contains(out, "(default 16)") {
		t.Errorf("mount -h has no flags:\n%s", out)
	}
	if strings.Contains(out, "ready-fd") {
		t.Errorf("mount -h shows an internal flag:\n%s", out)
	}
	if out, _, _ := cli(t, bin, "mount", "--cache-size", "99", "-h"); !strings.Contains(out, "(default 16)") {
		t.Errorf("mount --cache-size 99 -h does not show the default:\n%s", out)
	}
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}} {
		out, errOut, code := cli(t, bin, args...)
		if code != 0 || errOut != "" {
			t.Errorf("computerfs %s: exit %d, stderr %q", args[0], code, errOut)
		}
		for _, c := range commands {
			if !strings.Contains(out, fmt.Sprintf("\n  %-9s %s\n", c.name, c.summary)) {
				t.Errorf("computerfs %s does not list %s with its summary:\n%s", args[0], c.name, out)
			}
		}
	}
	// No command: the list, on stderr, and the usage error's status.
	out, errOut, code := cli(t, bin)
	if code != 2 || out != "" || !strings.Contains(errOut, "\n  mount    ") {
		t.Errorf("computerfs alone: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestUsageErrors: a bad flag, a missing or extra argument, a mistyped
// command: one line on stderr, the error first, with a pointer to the
// help, exit 2; nothing on stdout and no flag dump.
func TestUsageErrors(t *testing.T) {
	bin := testmount.Binary(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"mount"}, "computerfs mount: missing MOUNTPOINT; see 'computerfs mount -h'"},
		{[]string{"mount", "/mnt/x"}, "computerfs mount: missing --store DIR; see 'computerfs mount -h'"},
		{[]string{"mount", "--store", "/s", "/a", "/b"}, `computerfs mount: unexpected argument "/b"; see 'computerfs mount -h'`},
		{[]string{"mount", "--bogus", "/mnt/x"}, "computerfs mount: flag provided but not defined: -bogus; see 'computerfs mount -h'"},
		{[]string{"mount", "--cache-size", "x", "--store", "/s", "/m"}, `computerfs mount: invalid value "x" for flag -cache-size: parse error; see 'computerfs mount -h'`},
		{[]string{"mount", "--cache-size", "0", "--store", "/s", "/m"}, "computerfs mount: --cache-size must be positive, not 0; see 'computerfs mount -h'"},
		{[]string{"import", "--store", "/s"}, "computerfs import: missing --spec FILE; see 'computerfs import -h'"},
		{[]string{"status"}, "computerfs status: missing -w MOUNTPOINT or --store DIR; see 'computerfs status -h'"},
		{[]string{"status", "-w", "/m", "--store", "/s"}, "computerfs status: give -w MOUNTPOINT or --store DIR, not both; see 'computerfs status -h'"},
		{[]string{"sync"}, "computerfs sync: missing -w MOUNTPOINT; see 'computerfs sync -h'"},
		{[]string{"sync", "-w", "/m", "extra"}, `computerfs sync: unexpected argument "extra"; see 'computerfs sync -h'`},
		{[]string{"refresh"}, "computerfs refresh: missing -w MOUNTPOINT or --store DIR; see 'computerfs refresh -h'"},
		{[]string{"log", "-w"}, "computerfs log: flag needs an argument: -w; see 'computerfs log -h'"},
		{[]string{"log", "--store", "/s", "--follow"}, "computerfs log: --follow needs -w MOUNTPOINT (a running workspace); see 'computerfs log -h'"},
		{[]string{"exec", "--", "ls"}, "computerfs exec: missing -w MOUNTPOINT; see 'computerfs exec -h'"},
		{[]string{"exec", "-w", "/m"}, "computerfs exec: missing COMMAND, as in: computerfs exec -w /m -- 'ls -l'; see 'computerfs exec -h'"},
		{[]string{"mcp"}, "computerfs mcp: missing -w MOUNTPOINT; see 'computerfs mcp -h'"},
		{[]string{"mcp", "-w", "/m", "--tls-cert", "c"}, "computerfs mcp: --tls-cert and --tls-key go together; see 'computerfs mcp -h'"},
		{[]string{"unmount"}, "computerfs unmount: missing MOUNTPOINT; see 'computerfs unmount -h'"},
		{[]string{"umount", "--timeout", "soon", "/m"}, `computerfs unmount: invalid value "soon" for flag -timeout: parse error; see 'computerfs unmount -h'`},
		{[]string{"fsck"}, "computerfs fsck: missing --store DIR; see 'computerfs fsck -h'"},
		{[]string{"bench"}, "computerfs bench: missing NAME=DIR...; see 'computerfs bench -h'"},
		{[]string{"bench", "--reps", "x", "a=/tmp"}, `computerfs bench: invalid value "x" for flag -reps: parse error; see 'computerfs bench -h'`},
		{[]string{"bench", "/tmp"}, `computerfs bench: want NAME=DIR, got "/tmp"; see 'computerfs bench -h'`},
		{[]string{"version", "now"}, `computerfs version: unexpected argument "now"; see 'computerfs version -h'`},
		{[]string{"help", "a", "b"}, `computerfs help: unexpected argument "b"; see 'computerfs help -h'`},
		{[]string{"moutn", "--store", "/s", "/m"}, `computerfs: unknown command "moutn" (did you mean "mount"?); see 'computerfs help'`},
		{[]string{"stauts"}, `computerfs: unknown command "stauts" (did you mean "status"?); see 'computerfs help'`},
		{[]string{"stat"}, `computerfs: unknown command "stat" (did you mean "status"?); see 'computerfs help'`},
		{[]string{"umnount"}, `computerfs: unknown command "umnount" (did you mean "unmount"?); see 'computerfs help'`},
		{[]string{"xyzzy"}, `computerfs: unknown command "xyzzy"; see 'computerfs help'`},
		{[]string{"help", "syn"}, `computerfs help: unknown command "syn" (did you mean "sync"?); see 'computerfs help'`},
		{[]string{"--store"}, `computerfs: unknown command "--store"; see 'computerfs help'`},
	} {
		out, errOut, code := cli(t, bin, tc.args...)
		if code != 2 || out != "" || errOut != tc.want+"\n" {
			t.Errorf("computerfs %s:\n exit %d, stdout %q, stderr %q\nwant exit 2, stderr %q", strings.Join(tc.args, " "), code, out, errOut, tc.want)
		}
	}
}

func TestSuggest(t *testing.T) {
	for in, want := range map[string]string{"moutn": "mount", "mout": "mount", "exce": "exec", "lgo": "log", "umount": "unmount",
		"verison": "version", "hlep": "help", "x": "", "qq": "", "mountmount": "", "": ""} {
		if got := suggest(in); got != want {
			t.Errorf("suggest(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestVersion: `computerfs version` prints the version the build was
// stamped with (the Makefile's -ldflags), and the MCP server reports the
// same as its implementation's version.
func TestVersion(t *testing.T) {
	out, errOut, code := cli(t, testmount.Binary(t), "version")
	if code != 0 || errOut != "" || !regexp.MustCompile(`^computerfs \S+.*, built with go1\.\S+\n$`).MatchString(out) {
		t.Fatalf("version: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	// The Makefile stamps the version this way.
	mk, err := exec.Command("make", "-C", "../..", "-n", "build", "VERSION=v9.8.7-test").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n build: %v\n%s", err, mk)
	}
	if !strings.Contains(string(mk), "-ldflags '-X github.com/computerfs/computerfs/internal/version.stamped=v9.8.7-test' -o bin/computerfs ./cmd/computerfs") {
		t.Fatalf("make build does not stamp the version:\n%s", mk)
	}
	stamped := filepath.Join(t.TempDir(), "computerfs")
	b, err := exec.Command("go", "build", "-tags", "seccomp", "-ldflags", "-X github.com/computerfs/computerfs/internal/version.stamped=v9.8.7-test", "-o", stamped, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	out, _, code = cli(t, stamped, "version")
	if code != 0 || !strings.HasPrefix(out, "computerfs v9.8.7-test, built with go1.") {
		t.Fatalf("stamped version: exit %d, %q", code, out)
	}

	m := testmount.Start(t, filepath.Join(t.TempDir(), "ws"), "--no-sandbox")
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(),
		&mcp.CommandTransport{Command: exec.Command(stamped, "mcp", "-w", m.Dir)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if info := cs.InitializeResult().ServerInfo; info.Name != "computerfs" || info.Version != "v9.8.7-test" {
		t.Fatalf("MCP server info %+v, want computerfs v9.8.7-test", info)
	}
}

// TestDeadDaemon: every command that talks to a workspace's daemon says
// that it is gone, and how to mount the store again, when it was killed;
// mounting as it says brings the workspace back.
func TestDeadDaemon(t *testing.T) {
	bin := testmount.Binary(t)
	store := filepath.Join(t.TempDir(), "ws")
	m := testmount.Start(t, store, "--no-sandbox")
	if _, errOut, code := cli(t, bin, "exec", "-w", m.Dir, "--", "echo hi > /workspace/f"); code != 0 {
		t.Fatalf("exec: exit %d: %s", code, errOut)
	}
	time.Sleep(time.Second) // the store writes out what it holds every 100 ms: f survives the kill
	if err := syscall.Kill(m.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); proc.Running(m.Pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("daemon %d survived SIGKILL", m.Pid)
		}
	}
	gone := fmt.Sprintf("the daemon for %s, pid %d, is gone: run computerfs mount --store %s %s", m.Dir, m.Pid, store, m.Dir)
	for _, args := range [][]string{
		{"status", "-w", m.Dir},
		{"status", "--store", store}, // not opened behind its dead mount
		{"sync", "-w", m.Dir},
		{"exec", "-w", m.Dir, "--", "cat /workspace/f"},
		{"log", "-w", m.Dir},
		{"log", "-w", m.Dir, "--tools"},
		{"refresh", "-w", m.Dir},
		{"mcp", "-w", m.Dir},
	} {
		out, errOut, code := cli(t, bin, args...)
		want := "computerfs " + args[0] + ": " + gone + "\n"
		if code != 1 || out != "" || errOut != want {
			t.Errorf("computerfs %s: exit %d, stdout %q, stderr %q; want exit 1 and %q", strings.Join(args, " "), code, out, errOut, want)
		}
	}
	// As the message says: the store is mounted again, over the dead mount.
	if out, errOut, code := cli(t, bin, "mount", "--background", "--no-sandbox", "--store", store, m.Dir); code != 0 {
		t.Fatalf("mount again: exit %d: %s", code, errOut)
	} else {
		m.Pid, _ = strconv.Atoi(strings.TrimSpace(out))
	}
	out, errOut, code := cli(t, bin, "exec", "-w", m.Dir, "--", "cat /workspace/f")
	if code != 0 || out != "hi\n" {
		t.Fatalf("exec after the mount again: exit %d, %q, %q", code, out, errOut)
	}
}

// TestStatusStore: `status --store` describes a store that is not mounted
// (opened here: agent, usage against the spec's quota, sources) and asks
// the daemon of one that is; a directory that is no store is an error.
func TestStatusStore(t *testing.T) {
	bin := testmount.Binary(t)
	dir := t.TempDir()
	specFile := filepath.Join(dir, "ws.yaml")
	if err := os.WriteFile(specFile, []byte("quota: 10MiB\nsources:\n  - path: /README\n    content: \"hello\\n\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(dir, "ws")
	if _, errOut, code := cli(t, bin, "import", "--log-level", "warn", "--spec", specFile, "--store", store); code != 0 {
		t.Fatalf("import: exit %d: %s", code, errOut)
	}
	out, errOut, code := cli(t, bin, "status", "--store", store)
	lines := strings.Split(out, "\n")
	first := regexp.MustCompile(`^store ` + regexp.QuoteMeta(store) + `, not mounted \(agent (\d+:\d+)\)$`).FindStringSubmatch(lines[0])
	if code != 0 || errOut != "" || first == nil || len(lines) != 4 ||
		!regexp.MustCompile(`^  usage \d+\.\d MiB of a 10\.0 MiB quota: files \d+\.\d MiB, journal \d+\.\d MiB, audit \d+\.\d MiB$`).MatchString(lines[1]) ||
		!regexp.MustCompile(`^  /README +\S+ +sync: none +inline$`).MatchString(lines[2]) {
		t.Fatalf("status --store of an unmounted store: exit %d, stderr %q, stdout:\n%s", code, errOut, out)
	}
	if _, err := os.Stat(filepath.Join(store, "ballast")); err == nil {
		t.Errorf("status --store made a ballast file in the store")
	}

	if out, errOut, code := cli(t, bin, "fsck", "--store", store); code != 0 || out != store+": no problems\n" {
		t.Fatalf("fsck --store: exit %d, %q, %q", code, out, errOut)
	}
	if out, errOut, code := cli(t, bin, "log", "--store", store); code != 0 || errOut != "" {
		t.Fatalf("log --store: exit %d, %q, %q", code, out, errOut)
	}

	mnt := testmount.PublicDir(t, "computerfs-mnt-")
	pidOut, errOut, code := cli(t, bin, "mount", "--background", "--no-sandbox", "--store", store, mnt)
	if code != 0 {
		t.Fatalf("mount: exit %d: %s", code, errOut)
	}
	defer cli(t, bin, "unmount", mnt)
	out, errOut, code = cli(t, bin, "status", "--store", store)
	want := fmt.Sprintf("workspace %s (store %s, daemon pid %s, agent %s)\n", mnt, store, strings.TrimSpace(pidOut), first[1])
	if code != 0 || errOut != "" || !strings.HasPrefix(out, want) || !strings.Contains(out, "/README") {
		t.Fatalf("status --store of a mounted store: exit %d, stderr %q, stdout:\n%s\nwant it to start %q", code, errOut, out, want)
	}
	if byMount, _, _ := cli(t, bin, "status", "-w", mnt); byMount != out {
		t.Fatalf("status -w says\n%s\nstatus --store says\n%s", byMount, out)
	}
	// The commands that open a store say where it is mounted.
	for _, cmd := range []string{"log", "fsck", "refresh"} {
		want := fmt.Sprintf("computerfs %s: store %s: store is in use by another process (pid %s); it is mounted at %s: use -w %s\n", cmd, store, strings.TrimSpace(pidOut), mnt, mnt)
		if cmd == "fsck" {
			want = strings.TrimSuffix(want, "use -w "+mnt+"\n") + "unmount it first\n"
		}
		if out, errOut, code := cli(t, bin, cmd, "--store", store); code != 1 || out != "" || errOut != want {
			t.Errorf("%s --store of a mounted store: exit %d, stdout %q, stderr %q; want %q", cmd, code, out, errOut, want)
		}
	}

	// The commands that read a store that is not mounted make none where
	// there is none.
	empty := t.TempDir()
	for _, cmd := range [][]string{{"status"}, {"log"}, {"log", "--tools"}, {"fsck"}, {"refresh"}} {
		for _, tc := range []struct{ dir, want string }{
			{filepath.Join(dir, "none"), ": no such file or directory"},
			{dir, ": not a computerfs store (the directory is not empty and has no db/)"},
			{empty, ": not a computerfs store"},
		} {
			want := "computerfs " + cmd[0] + ": store " + tc.dir + tc.want + "\n"
			out, errOut, code := cli(t, bin, append(cmd, "--store", tc.dir)...)
			if code != 1 || out != "" || errOut != want {
				t.Errorf("%s --store %s: exit %d, stdout %q, stderr %q; want exit 1, %q", strings.Join(cmd, " "), tc.dir, code, out, errOut, want)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "none")); err == nil {
			t.Fatalf("%s --store made a store where there was none", strings.Join(cmd, " "))
		}
		if ents, _ := os.ReadDir(empty); len(ents) > 0 {
			t.Fatalf("%s --store made a store in an empty directory", strings.Join(cmd, " "))
		}
	}
}

// TestMountNonEmpty: a mount over a directory that is not empty warns
// once and goes ahead; the files are there again after the unmount. An
// empty one gets no warning.
func TestMountNonEmpty(t *testing.T) {
	bin := testmount.Binary(t)
	for _, full := range []bool{true, false} {
		mnt := testmount.PublicDir(t, "computerfs-mnt-")
		if full {
			if err := os.WriteFile(filepath.Join(mnt, "mine"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		out, errOut, code := cli(t, bin, "mount", "--background", "--no-sandbox", "--store", filepath.Join(t.TempDir(), "ws"), mnt)
		want := ""
		if full {
			want = "computerfs mount: warning: " + mnt + " is not empty: its files are hidden while the workspace is mounted over them (and untouched)\n"
		}
		if code != 0 || errOut != want || !regexp.MustCompile(`^\d+\n$`).MatchString(out) {
			t.Fatalf("mount over a directory (files: %v): exit %d, stdout %q, stderr %q; want the pid and %q", full, code, out, errOut, want)
		}
		if _, err := os.Stat(filepath.Join(mnt, "mine")); err == nil {
			t.Errorf("the mount shows the file under it")
		}
		if _, errOut, code := cli(t, bin, "unmount", mnt); code != 0 {
			t.Fatalf("unmount: %s", errOut)
		}
		if _, err := os.Stat(filepath.Join(mnt, "mine")); full && err != nil {
			t.Errorf("the file under the mount after the unmount: %v", err)
		}
	}
}

// TestDaemonDiesDuringExec: a command whose daemon is killed while it
// runs says that the daemon is gone, not that its answer broke off.
func TestDaemonDiesDuringExec(t *testing.T) {
	bin := testmount.Binary(t)
	store := filepath.Join(t.TempDir(), "ws")
	m := testmount.Start(t, store, "--no-sandbox")
	cmd := exec.Command(bin, "exec", "-w", m.Dir, "--", "echo started; sleep 120")
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
	want := fmt.Sprintf("computerfs exec: the daemon for %s, pid %d, is gone: run computerfs mount --store %s %s\n", m.Dir, m.Pid, store, m.Dir)
	if code := cmd.ProcessState.ExitCode(); code != 1 || errb.String() != want {
		t.Fatalf("exec when its daemon was killed: exit %d, stderr %q; want exit 1, %q", code, errb.String(), want)
	}
}

// lineWaiter reports the first write on lines.
type lineWaiter struct {
	lines chan string
	once  bool
}

func (w *lineWaiter) Write(p []byte) (int, error) {
	if !w.once {
		w.once = true
		w.lines <- string(p)
	}
	return len(p), nil
}
