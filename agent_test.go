package computerfs_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/computerfs/computerfs"
	"github.com/computerfs/computerfs/internal/agentid"
	"github.com/computerfs/computerfs/internal/testmount"
	"github.com/computerfs/computerfs/kv"
)

func statusOf(t *testing.T, mount string) computerfs.Status {
	t.Helper()
	c, err := computerfs.Dial(mount)
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// owner is the host owner of p (not following a last symbolic link).
func owner(t *testing.T, p string) (uid, gid uint32) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Uid, st.Gid
}

// wantAgentOwns fails unless the agent owns every path, relative to the
// mount.
func wantAgentOwns(t *testing.T, m *testmount.Mount, a computerfs.Agent, how string, paths ...string) {
	t.Helper()
	for _, p := range paths {
		uid, gid := owner(t, filepath.Join(m.Dir, p))
		if uid != a.UID || gid != a.GID {
			t.Errorf("%s: %s belongs to %d:%d, want the agent %s", how, p, uid, gid, a)
		}
	}
}

func mustExec(t *testing.T, m *testmount.Mount, backend, command string) string {
	t.Helper()
	res, out, errOut, err := execOn(t, m.Dir, computerfs.ExecRequest{Backend: backend, Command: command, Timeout: "5m"})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%s: %q: %v exit %d\nstdout: %s\nstderr: %s", backend, command, err, res.ExitCode, out, errOut)
	}
	return out
}

// Each workspace has an agent identity of its own, from the documented
// range, recorded in its store: the same after a remount. The mount's
// root is the agent's, mode 0700.
func TestAgentIdentityPerWorkspace(t *testing.T) {
	dir := t.TempDir()
	a := testmount.Start(t, filepath.Join(dir, "a"), "--no-sandbox")
	b := testmount.Start(t, filepath.Join(dir, "b"), "--no-sandbox")
	ida, idb := statusOf(t, a.Dir).Agent, statusOf(t, b.Dir).Agent
	if ida == idb {
		t.Fatalf("two workspaces share the agent %s", ida)
	}
	for _, id := range []computerfs.Agent{ida, idb} {
		if id.UID < computerfs.AgentBase || id.UID >= computerfs.AgentBase+computerfs.AgentCount || id.GID != id.UID {
			t.Fatalf("agent %s is not from the range %d+%d", id, computerfs.AgentBase, computerfs.AgentCount)
		}
	}
	for _, m := range []*testmount.Mount{a, b} {
		fi, err := os.Stat(m.Dir)
		if err != nil {
			t.Fatal(err)
		}
		uid, gid := owner(t, m.Dir)
		if id := statusOf(t, m.Dir).Agent; uid != id.UID || gid != id.GID || fi.Mode().Perm() != 0o700 {
			t.Fatalf("the mount's root is %d:%d %v, want %s 0700", uid, gid, fi.Mode().Perm(), id)
		}
	}
	a.Unmount(t)
	a.Remount(t, "--no-sandbox")
	if got := statusOf(t, a.Dir).Agent; got != ida {
		t.Fatalf("after a remount the agent is %s, was %s", got, ida)
	}
	// The registry names both stores.
	reg := os.Getenv("COMPUTERFS_AGENTS_DIR")
	for _, id := range []computerfs.Agent{ida, idb} {
		b, err := os.ReadFile(filepath.Join(reg, strconv.FormatUint(uint64(id.UID), 10)))
		if err != nil || !strings.Contains(string(b), dir) {
			t.Fatalf("registry entry of %s: %v %q", id, err, b)
		}
	}
}

// Everything the agent writes, through the fast path, the tools and the
// sandbox, belongs to its agent identity: not root, not the sandbox's
// shared ids. The sandbox writes the workspace out of the box: touch,
// mkdir -p, a Go and a C build, git init/add/commit (no "dubious
// ownership"), npm writing node_modules.
func TestAgentOwnsWhatTheAgentWrites(t *testing.T) {
	m := testmount.Start(t, filepath.Join(t.TempDir(), "ws"))
	a := statusOf(t, m.Dir).Agent

	mustExec(t, m, "shell", `echo hi > fast.txt; mkdir -p fast/d/e; cp fast.txt fast/d/copy; ln -s fast.txt fast-link; mv fast/d/copy fast/d/moved; tar -cf fast.tar fast.txt; mkdir untar; tar -xf fast.tar -C untar`)
	wantAgentOwns(t, m, a, "fast path", "fast.txt", "fast", "fast/d", "fast/d/e", "fast/d/moved", "fast-link", "fast.tar", "untar", "untar/fast.txt")

	c, err := computerfs.Dial(m.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string]string{
		"write": `{"path":"tool/new.txt","content":"x"}`,
		"mkdir": `{"path":"tool/dir"}`,
	} {
		if _, err := c.Call(context.Background(), name, json.RawMessage(args)); err != nil {
			t.Fatalf("tool %s: %v", name, err)
		}
	}
	wantAgentOwns(t, m, a, "tools", "tool", "tool/new.txt", "tool/dir")

	out := mustExec(t, m, "sandbox", `set -e
id -u; id -g
touch touched
mkdir -p deep/er/est
printf 'package main\nfunc main() { println("go") }\n' > /tmp/main.go
HOME=/tmp GOCACHE=/tmp/gocache GOPATH=/tmp/gopath GOFLAGS=-mod=mod GOTOOLCHAIN=local go build -o bin/goprog /tmp/main.go
bin/goprog
printf 'int main(void) { return 0; }\n' > c.c
cc -o bin/cprog c.c
bin/cprog
git init -q repo
cd repo
echo a > a
git add a
git -c user.name=agent -c user.email=agent@example.com commit -qm first
git status --porcelain
git log --oneline | wc -l
cd ..
mkdir -p pkg/lib app
printf '{"name":"lib","version":"1.0.0"}\n' > pkg/lib/package.json
cd app
printf '{"name":"app","version":"1.0.0","dependencies":{"lib":"file:../pkg/lib"}}\n' > package.json
HOME=/tmp npm install --offline --no-audit --no-fund --install-links --cache /tmp/npm-cache >/dev/null
ls node_modules/lib/package.json
`)
	lines := strings.Fields(out)
	if len(lines) < 2 || lines[0] != "1000" || lines[1] != "1000" {
		t.Fatalf("the sandbox runs as %v inside, want 1000 1000", lines)
	}
	if !strings.Contains(out, "\n1\n") {
		t.Fatalf("git in the sandbox: %q", out)
	}
	wantAgentOwns(t, m, a, "sandbox", "touched", "deep", "deep/er/est", "bin", "bin/goprog", "bin/cprog", "c.c",
		"repo", "repo/.git", "repo/.git/config", "repo/.git/objects", "repo/a",
		"app/package-lock.json", "app/node_modules", "app/node_modules/lib", "app/node_modules/lib/package.json")

	// Nothing in the workspace belongs to root or to the sandbox's ids.
	filepath.Walk(m.Dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			t.Errorf("walk %s: %v", p, err)
			return nil
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != a.UID || st.Gid != a.GID {
			t.Errorf("%s belongs to %d:%d, not the agent %s", p, st.Uid, st.Gid, a)
		}
		return nil
	})
}

// setpriv runs a command as another host user, with no other group.
func setpriv(uid uint32, args ...string) *exec.Cmd {
	id := strconv.FormatUint(uint64(uid), 10)
	return exec.Command("setpriv", append([]string{"--reuid=" + id, "--regid=" + id, "--clear-groups", "--"}, args...)...)
}

// No host user but the agent and root can list or read a workspace, even
// after the agent opens the mode of its root.
func TestAgentMountIsPrivate(t *testing.T) {
	m := testmount.Start(t, filepath.Join(t.TempDir(), "ws"))
	a := statusOf(t, m.Dir).Agent
	mustExec(t, m, "shell", `echo secret > f; mkdir d; echo s > d/g; chmod 777 d; chmod 666 d/g`)
	const other = 4242 // a third user
	check := func(when string) {
		t.Helper()
		for _, args := range [][]string{{"ls", m.Dir}, {"cat", m.Dir + "/f"}, {"cat", m.Dir + "/d/g"}, {"stat", m.Dir + "/d"}, {"touch", m.Dir + "/new"}} {
			if out, err := setpriv(other, args...).CombinedOutput(); err == nil || !strings.Contains(string(out), "Permission denied") {
				t.Errorf("%s: uid %d ran %v: %v %s", when, other, args, err, out)
			}
		}
		if out, err := setpriv(a.UID, "cat", m.Dir+"/f", m.Dir+"/d/g").CombinedOutput(); err != nil || string(out) != "secret\ns\n" {
			t.Errorf("%s: the agent cannot read its files: %v %s", when, err, out)
		}
		if b, err := os.ReadFile(m.Dir + "/f"); err != nil || string(b) != "secret\n" {
			t.Errorf("%s: root cannot read: %v %q", when, err, b)
		}
	}
	check("as mounted")
	// The agent widens its root's mode, through the fast path, the
	// sandbox and the mount: the kernel still lets nobody else in.
	mustExec(t, m, "shell", `chmod 755 .`)
	check("after the fast path's chmod 755")
	mustExec(t, m, "sandbox", `chmod 777 /workspace`)
	check("after the sandbox's chmod 777")
	if out, err := setpriv(a.UID, "chmod", "755", m.Dir).CombinedOutput(); err != nil {
		t.Fatalf("the agent's chmod on the mount: %v %s", err, out)
	}
	check("after the agent's chmod on the mount")
	// The kernel checks permissions (default_permissions) and lets the
	// sandbox's users in (allow_other).
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == m.Dir {
			if !strings.Contains(line, "default_permissions") || !strings.Contains(line, "allow_other") {
				t.Fatalf("mount options: %s", line)
			}
			return
		}
	}
	t.Fatalf("%s not in mountinfo", m.Dir)
}

// Git's ownership check protects the operator: what the agent plants in
// a repository's .git (core.fsmonitor, hooks, a pager, an external diff,
// a .git file pointing at a planted directory) does not run when root
// runs git on the mount.
func TestAgentGitDoesNotRunAsRoot(t *testing.T) {
	m := testmount.Start(t, filepath.Join(t.TempDir(), "ws"))
	marker := filepath.Join(t.TempDir(), "ran-as-root")
	// The sandbox cannot reach the host's file, so the planted command
	// names it: it would exist only if the operator's git ran it.
	mustExec(t, m, "sandbox", `set -e
git init -q repo && cd repo && echo a > a && git add a && git -c user.name=a -c user.email=a@b commit -qm one
git config core.fsmonitor "touch `+marker+`.fsmonitor; false"
git config core.pager "touch `+marker+`.pager; cat"
git config diff.external "sh -c 'touch `+marker+`.diff'"
git config core.hooksPath hooks
mkdir -p hooks && printf '#!/bin/sh\ntouch `+marker+`.hook\n' > hooks/pre-commit && chmod +x hooks/pre-commit
echo b > a
cd .. && git init -q planted && cp -r repo/.git/config planted/.git/config
mkdir linked && echo "gitdir: ../planted/.git" > linked/.git
`)
	// The same through the fast path: an agent-written config.
	mustExec(t, m, "shell", `mkdir -p fast/.git/objects fast/.git/refs && echo 'ref: refs/heads/main' > fast/.git/HEAD && printf '[core]\n\trepositoryformatversion = 0\n\tfsmonitor = "touch `+marker+`.fastpath; false"\n' > fast/.git/config`)
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1", "GIT_PAGER=", "PAGER="}
	for _, args := range [][]string{
		{"-C", m.Dir + "/repo", "status"},
		{"-C", m.Dir + "/repo", "diff"},
		{"-C", m.Dir + "/repo", "-p", "log"},
		{"-C", m.Dir + "/repo", "commit", "-am", "x"},
		{"-C", m.Dir + "/linked", "status"},
		{"-C", m.Dir + "/fast", "status"},
		{"-C", m.Dir + "/repo/hooks", "status"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		// git diff outside a repository it trusts says it is none.
		if low := strings.ToLower(string(out)); err == nil || !strings.Contains(low, "dubious ownership") && !strings.Contains(low, "not a git repository") {
			t.Errorf("root's git %v: %v %s", args, err, out)
		}
	}
	ms, _ := filepath.Glob(marker + "*")
	if len(ms) > 0 {
		t.Fatalf("an agent's command ran as root: %v", ms)
	}
	// The agent itself (computerfs exec, or setpriv as the agent) uses the
	// repository normally.
	a := statusOf(t, m.Dir).Agent
	cmd := setpriv(a.UID, "git", "-C", m.Dir+"/repo", "-c", "core.fsmonitor=false", "log", "--oneline")
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "one") {
		t.Fatalf("git as the agent: %v %s", err, out)
	}
}

// An identity named by flag or spec is used and recorded; root, and an
// identity another store has, are refused; a store keeps its identity.
func TestAgentNamed(t *testing.T) {
	dir := t.TempDir()
	m := testmount.Start(t, filepath.Join(dir, "flag"), "--no-sandbox", "--agent", "5555:6666")
	if got := statusOf(t, m.Dir).Agent; got.UID != 5555 || got.GID != 6666 {
		t.Fatalf("agent %s, want 5555:6666", got)
	}
	mustExec(t, m, "shell", "echo x > f")
	wantAgentOwns(t, m, computerfs.Agent{UID: 5555, GID: 6666}, "fast path", "f", ".")
	m.Unmount(t)
	bin := testmount.Binary(t)
	mnt := testmount.PublicDir(t, "mnt-")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--store", filepath.Join(dir, "flag"), "--agent", "5556:6666"}, "the store's agent is 5555:6666"},
		{[]string{"--store", filepath.Join(dir, "other"), "--agent", "5555:7777"}, "already the agent of the store"},
		{[]string{"--store", filepath.Join(dir, "root"), "--agent", "0:0"}, "never root"},
		{[]string{"--store", filepath.Join(dir, "root"), "--agent", "1000:0"}, "never root"},
		{[]string{"--store", filepath.Join(dir, "bad"), "--agent", "x"}, "want UID:GID"},
	} {
		out, err := exec.Command(bin, append(append([]string{"mount", "--background", "--no-sandbox"}, c.args...), mnt)...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("mount %v: %v %s, want %q", c.args, err, out, c.want)
			exec.Command(bin, "unmount", mnt).Run()
		}
	}
	m.Remount(t, "--no-sandbox")
	if got := statusOf(t, m.Dir).Agent; got.UID != 5555 || got.GID != 6666 {
		t.Fatalf("after remount: agent %s", got)
	}

	// The spec's agent: it owns the imported files too, unless owner:
	// says another.
	specFile := filepath.Join(dir, "spec.yaml")
	os.WriteFile(specFile, []byte("agent: {uid: 7001, gid: 7002}\nsources:\n  - path: /a.txt\n    content: hi\n"), 0o644)
	s := testmount.Start(t, filepath.Join(dir, "spec"), "--no-sandbox", "--spec", specFile)
	want := computerfs.Agent{UID: 7001, GID: 7002}
	if got := statusOf(t, s.Dir).Agent; got.UID != want.UID || got.GID != want.GID || got.Block == 0 {
		t.Fatalf("spec agent: %+v", got)
	}
	wantAgentOwns(t, s, want, "import", ".", "a.txt")
}

// A store from before agent identities (root's files, no identity
// recorded) gets one on its first mount, and what belonged to root is the
// agent's; a store whose root another user owned keeps that user.
func TestAgentOldStore(t *testing.T) {
	dir := t.TempDir()
	old := func(name string, rootUID uint32) string {
		p := filepath.Join(dir, name)
		st, err := kv.Open(p, kv.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if rootUID != 0 {
			if _, err := st.SetAttr(kv.RootIno, kv.SetAttrRequest{Valid: kv.SetUid | kv.SetGid, Uid: rootUID, Gid: rootUID}); err != nil {
				t.Fatal(err)
			}
		}
		d, err := st.Create(kv.RootIno, "repo", kv.NewInode{Mode: kv.S_IFDIR | 0o755, Uid: rootUID, Gid: rootUID})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Create(d.Ino, "config", kv.NewInode{Mode: kv.S_IFREG | 0o4755, Uid: rootUID, Gid: rootUID}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Create(kv.RootIno, "operators", kv.NewInode{Mode: kv.S_IFREG | 0o644, Uid: 1234, Gid: 1234}); err != nil {
			t.Fatal(err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		return p
	}
	m := testmount.Start(t, old("rootowned", 0), "--no-sandbox")
	a := statusOf(t, m.Dir).Agent
	if a.UID < computerfs.AgentBase {
		t.Fatalf("agent %s", a)
	}
	wantAgentOwns(t, m, a, "migration", ".", "repo", "repo/config")
	if uid, _ := owner(t, m.Dir+"/operators"); uid != 1234 {
		t.Errorf("another user's file went to the agent: %d", uid)
	}
	if fi, err := os.Stat(m.Dir + "/repo/config"); err != nil || fi.Mode()&os.ModeSetuid != 0 {
		t.Errorf("a root setuid file given to the agent keeps setuid: %v %v", fi.Mode(), err)
	}
	if !strings.Contains(m.Log(), "now belong to its new agent") {
		t.Errorf("no word of the migration in the log:\n%s", m.Log())
	}
	m.Unmount(t)
	m.Remount(t, "--no-sandbox")
	if got := statusOf(t, m.Dir).Agent; got != a {
		t.Fatalf("after remount %s, was %s", got, a)
	}

	// mount --owner 101000:101000 made the sandbox's user own the root:
	// that user stays the agent, and the sandbox runs as it.
	k := testmount.Start(t, old("sandboxowned", 101000))
	if got := statusOf(t, k.Dir).Agent; got.UID != 101000 || got.GID != 101000 {
		t.Fatalf("agent %s, want 101000:101000", got)
	}
	mustExec(t, k, "sandbox", "touch new; echo x > repo/config")
	wantAgentOwns(t, k, computerfs.Agent{UID: 101000, GID: 101000}, "sandbox", "new", ".")
}

// The fast path and the tools change what is not the agent's only as the
// kernel would let the agent: a file the operator (root) put on the mount
// is not written in place, its directory not changed, no ownership goes
// to another user; a tool's rewrite of it makes a file of the agent's.
func TestAgentCannotWriteAsRoot(t *testing.T) {
	m := testmount.Start(t, filepath.Join(t.TempDir(), "ws"))
	a := statusOf(t, m.Dir).Agent
	// The operator's files, as root on the mount.
	if err := os.Mkdir(m.Dir+"/ops", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"/ops/config", "/rootfile"} {
		if err := os.WriteFile(m.Dir+f, []byte("operator\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, cmd := range []string{
		"echo agent >> rootfile", "echo agent > rootfile", "truncate -s 0 rootfile", "chmod 666 rootfile", "touch -d 2001-01-01 rootfile",
		"echo x > ops/new", "rm ops/config", "mv ops/config moved", "mkdir ops/d", "ln -s x ops/l", "mv fast.txt ops/config",
		"sed -i s/operator/agent/ ops/config",
	} {
		mustExec(t, m, "shell", "echo mine > fast.txt")
		res, _, _, err := execOn(t, m.Dir, computerfs.ExecRequest{Backend: "shell", Command: cmd})
		if err != nil || res.ExitCode == 0 {
			t.Errorf("fast path %q on root's files: %v exit %d", cmd, err, res.ExitCode)
		}
	}
	for _, f := range []string{"/ops/config", "/rootfile"} {
		b, err := os.ReadFile(m.Dir + f)
		uid, _ := owner(t, m.Dir+f)
		if err != nil || string(b) != "operator\n" || uid != 0 {
			t.Errorf("%s: %v %q owner %d", f, err, b, uid)
		}
	}
	if _, err := os.Lstat(m.Dir + "/ops/new"); err == nil {
		t.Error("the fast path made a file in root's directory")
	}
	// A tool's write of a root file at the workspace's top (the agent's
	// directory) replaces it with the agent's file.
	c, err := computerfs.Dial(m.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(context.Background(), "write", json.RawMessage(`{"path":"rootfile","content":"agent\n"}`)); err != nil {
		t.Fatal(err)
	}
	wantAgentOwns(t, m, a, "tool rewrite", "rootfile")
	if _, err := c.Call(context.Background(), "write", json.RawMessage(`{"path":"ops/config","content":"agent\n"}`)); err == nil {
		t.Error("a tool wrote in root's directory")
	}
}

// A mount point that is, or is under, a directory every sandbox binds
// from the host is refused with a clear message.
func TestMountpointUnderSandboxHostDirRefused(t *testing.T) {
	bin := testmount.Binary(t)
	for _, mp := range []string{"/opt", "/usr/computerfs-test-nonexistent", "/opt/computerfs-test-nonexistent/ws", "/etc/computerfs-test"} {
		start := time.Now()
		out, err := exec.Command(bin, "mount", "--background", "--no-sandbox", "--store", filepath.Join(t.TempDir(), "ws"), mp).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "every sandbox on this host binds from the host") {
			t.Errorf("mount at %s: %v %s", mp, err, out)
			exec.Command(bin, "unmount", mp).Run()
		}
		if time.Since(start) > time.Minute {
			t.Errorf("mount at %s took %v", mp, time.Since(start))
		}
	}
}

// The sandbox stops a fork bomb and a memory hog at its limits; the daemon
// and the next commands are fine. The daemon's defaults apply limits.
func TestSandboxLimitsStopBombs(t *testing.T) {
	m := testmount.Start(t, filepath.Join(t.TempDir(), "ws"), "--sandbox-pids", "64", "--sandbox-memory", "96M", "--sandbox-warm", "0")
	// Processes started until the limit: each one counted in the
	// workspace (the shell may die when a fork fails).
	if n := startedProcesses(t, m, 200); n < 40 || n > 64 {
		t.Fatalf("%d processes started under a limit of 64", n)
	}
	// The classic bomb ends at the timeout, in time.
	start := time.Now()
	res, _, _, err := execOn(t, m.Dir, computerfs.ExecRequest{Backend: "sandbox", Timeout: "10s", Command: `bomb() { bomb | bomb & }; bomb; wait`})
	if err != nil || time.Since(start) > 70*time.Second {
		t.Fatalf("fork bomb: %v %+v after %v", err, res, time.Since(start))
	}
	res, _, _, err = execOn(t, m.Dir, computerfs.ExecRequest{Backend: "sandbox", Timeout: "60s",
		Command: `head -c 400M /dev/zero > /tmp/fill; echo survived`})
	if err != nil || res.Stopped != "memory limit" || res.ExitCode == 0 {
		t.Fatalf("memory hog: %v %+v", err, res)
	}
	if res.PeakMemory > 100<<20 {
		t.Fatalf("peak memory %d over the 96 MiB limit", res.PeakMemory)
	}
	// The daemon answers, on both backends.
	if out := mustExec(t, m, "shell", "echo ok"); out != "ok\n" {
		t.Fatalf("fast path after the bombs: %q", out)
	}
	if out := mustExec(t, m, "sandbox", "echo ok"); out != "ok\n" {
		t.Fatalf("sandbox after the bombs: %q", out)
	}
}

// The daemon's default pids limit holds: a command cannot start more
// than sandbox.DefaultLimits.Pids processes.
func TestSandboxDefaultPidsLimit(t *testing.T) {
	m := testmount.Start(t, filepath.Join(t.TempDir(), "ws"), "--sandbox-memory", "512M", "--sandbox-warm", "0")
	if n := startedProcesses(t, m, 1300); n < 900 || n > 1024 {
		t.Fatalf("%d processes started, want about the default limit of 1024", n)
	}
}

// startedProcesses starts up to max sleeping processes in a sandbox and
// returns how many started.
func startedProcesses(t *testing.T, m *testmount.Mount, max int) int {
	t.Helper()
	os.Remove(m.Dir + "/count")
	res, _, _, err := execOn(t, m.Dir, computerfs.ExecRequest{Backend: "sandbox", Timeout: "3m",
		Command: `n=0; while [ $n -lt ` + strconv.Itoa(max) + ` ]; do sleep 120 2>/dev/null & n=$((n+1)); echo $n > count; done; kill $(jobs -p) 2>/dev/null; true`})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(m.Dir + "/count")
	if err != nil {
		t.Fatalf("%+v: %v", res, err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	t.Logf("%+v: %d processes started", res, n)
	return n
}

// Each workspace's sandboxes have an id block of their own: their uid and
// gid maps hold the workspace's agent and its block alone, two
// workspaces' maps share no host id, and none holds host root or the
// shared 100000-165535.
func TestSandboxIDBlockPerWorkspace(t *testing.T) {
	dir := t.TempDir()
	type span struct{ lo, hi uint64 }
	var all [][]span
	for _, name := range []string{"a", "b", "named"} {
		var flags []string
		if name == "named" { // an agent named by a flag has a block of its own too
			flags = []string{"--agent", "4242:4242"}
		}
		m := testmount.Start(t, filepath.Join(dir, name), flags...)
		a := statusOf(t, m.Dir).Agent
		out := mustExec(t, m, "sandbox", "cat /proc/self/uid_map /proc/self/gid_map; id -u; touch f; stat -c %u:%g f")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if n := len(lines); n < 4 || lines[n-2] != "1000" || lines[n-1] != "1000:1000" {
			t.Fatalf("%s: %q", name, out)
		}
		wantAgentOwns(t, m, a, "sandbox", "f")
		base, count, ok := agentid.SandboxBlock(a.UID)
		if name == "named" {
			if a.UID != 4242 {
				t.Fatalf("named: agent %s", a)
			}
			base, count, ok = agentid.BlockBase(a.Block)
		}
		if !ok {
			t.Fatalf("%s: agent %+v has no block", name, a)
		}
		var spans []span
		agentSeen := 0
		for _, l := range lines[:len(lines)-2] {
			f := strings.Fields(l)
			host, err1 := strconv.ParseUint(f[1], 10, 32)
			size, err2 := strconv.ParseUint(f[2], 10, 32)
			if len(f) != 3 || err1 != nil || err2 != nil {
				t.Fatalf("%s: map line %q", name, l)
			}
			switch {
			case host == uint64(a.UID) && size == 1 && f[0] == "1000":
				agentSeen++
			case host >= uint64(base) && host+size <= uint64(base+count):
			default:
				t.Fatalf("%s: map line %q is neither the agent %s nor the block %d+%d:\n%s", name, l, a, base, count, out)
			}
			spans = append(spans, span{host, host + size})
		}
		if agentSeen != 2 {
			t.Fatalf("%s: the agent is mapped %d times:\n%s", name, agentSeen, out)
		}
		all = append(all, spans)
	}
	for i := range all {
		for j := range i {
			for _, x := range all[i] {
				for _, y := range all[j] {
					if x.lo < y.hi && y.lo < x.hi {
						t.Fatalf("workspaces %d and %d's sandboxes share host ids: %v and %v", j, i, x, y)
					}
				}
			}
		}
	}
}
