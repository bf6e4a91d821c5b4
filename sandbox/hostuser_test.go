package sandbox_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/computerfs/computerfs/internal/testmount"
	"github.com/computerfs/computerfs/sandbox"
)

// agentWorkspace mounts a fresh store and returns its mount point and its
// agent (the owner of the mount's root).
func agentWorkspace(t *testing.T) (string, sandbox.User) {
	t.Helper()
	m := testmount.Start(t, t.TempDir(), "--no-sandbox")
	var st syscall.Stat_t
	if err := syscall.Stat(m.Dir, &st); err != nil {
		t.Fatal(err)
	}
	if _, shared := sandbox.InsideID(st.Uid); st.Uid == 0 || shared {
		t.Fatalf("the workspace's root belongs to %d, not an agent of its own", st.Uid)
	}
	return m.Dir, sandbox.User{UID: st.Uid, GID: st.Gid}
}

// With HostUser, the sandbox's user is that host user: what it writes is
// the host user's, and no inside id is host root.
func TestHostUser(t *testing.T) {
	ws, agent := agentWorkspace(t)
	for _, pool := range []bool{false, true} {
		opts := sandbox.Options{Workspace: ws, HostUser: &agent,
			Args: []string{"/bin/sh", "-c", "id -u; id -g; cat /proc/self/uid_map /proc/self/gid_map; touch f-" + strconv.FormatBool(pool) + "; mkdir -p d/e"}}
		var o output
		if pool {
			p, base := newPool(t, sandbox.Options{Workspace: ws, HostUser: &agent}, 1)
			opts.StateDir, opts.NoSeccomp = base.StateDir, base.NoSeccomp
			if o = poolRun(t, p, opts); !o.res.Warm {
				t.Fatalf("the pool's sandbox did not run it:\n%v", o)
			}
		} else {
			o = run(t, opts)
		}
		if o.err != nil || o.res.ExitCode != 0 {
			t.Fatalf("pool %v:\n%v", pool, o)
		}
		lines := strings.Split(strings.TrimSpace(o.stdout), "\n")
		if lines[0] != "1000" || lines[1] != "1000" {
			t.Fatalf("inside ids %v, want 1000 1000", lines[:2])
		}
		a := strconv.FormatUint(uint64(agent.UID), 10)
		for _, l := range lines[2:] {
			f := strings.Fields(l)
			if len(f) != 3 {
				t.Fatalf("map line %q", l)
			}
			if f[1] == "0" {
				t.Fatalf("host root is mapped: %q", l)
			}
			if (f[1] == a) != (f[0] == "1000" && f[2] == "1") {
				t.Fatalf("the agent is mapped as %q", l)
			}
		}
		for _, p := range []string{"f-" + strconv.FormatBool(pool), "d", "d/e"} {
			var st syscall.Stat_t
			if err := syscall.Lstat(filepath.Join(ws, p), &st); err != nil || st.Uid != agent.UID || st.Gid != agent.GID {
				t.Fatalf("%s: %v owner %d:%d, want %d:%d", p, err, st.Uid, st.Gid, agent.UID, agent.GID)
			}
		}
	}
	// Without HostUser the sandbox's users are the shared ids, which
	// cannot enter the agent's workspace (mode 0700), root inside included.
	for _, u := range []*sandbox.User{nil, {UID: 0, GID: 0}} {
		o := run(t, sandbox.Options{Workspace: ws, User: u, Args: []string{"/bin/sh", "-c", "ls /workspace"}})
		if o.err == nil && o.res.ExitCode == 0 {
			t.Fatalf("user %v listed the agent's workspace:\n%v", u, o)
		}
	}
}

func TestHostUserRefused(t *testing.T) {
	for _, c := range []struct {
		user, host sandbox.User
		want       string
	}{
		{sandbox.DefaultUser, sandbox.User{UID: 0, GID: 5000}, "never runs as host root"},
		{sandbox.DefaultUser, sandbox.User{UID: 5000, GID: 0}, "never runs as host root"},
		{sandbox.DefaultUser, sandbox.User{UID: 100005, GID: 5000}, "cannot be inside id 1000 too"},
		{sandbox.User{UID: 70000, GID: 1}, sandbox.User{UID: 5000, GID: 5000}, "inside ids go up to"},
	} {
		u, h := c.user, c.host
		_, err := sandbox.Spec(sandbox.Options{Args: []string{"true"}, User: &u, HostUser: &h}, "/")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v as %v: %v, want %q", u, h, err, c.want)
		}
	}
	// The shared id that the user has anyway is no remapping at all.
	u, h := sandbox.DefaultUser, sandbox.User{UID: 101000, GID: 101000}
	s, err := sandbox.Spec(sandbox.Options{Args: []string{"true"}, User: &u, HostUser: &h}, "/")
	if err != nil || len(s.Linux.UIDMappings) != 1 {
		t.Fatalf("%v %+v", err, s)
	}
}

// A mount under a root file system given by the user would appear in the
// sandbox (it is bound with what is under it), and one under the
// workspace would be refused by the kernel: both are refused clearly.
func TestMountsUnderBindsRefused(t *testing.T) {
	root := testmount.PublicDir(t, "rootfs-")
	for _, d := range []string{"proc", "dev", "tmp", "workspace", "mnt"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ws := testmount.PublicDir(t, "ws-")
	os.Mkdir(filepath.Join(ws, "sub"), 0o755)
	for _, mp := range []string{filepath.Join(root, "mnt"), filepath.Join(ws, "sub")} {
		if err := syscall.Mount("tmpfs", mp, "tmpfs", 0, "size=1m"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Unmount(mp, syscall.MNT_DETACH) })
	}
	o := run(t, sandbox.Options{Rootfs: root, Args: []string{"/bin/true"}})
	if o.err == nil || !strings.Contains(o.err.Error(), "would appear inside the sandbox") {
		t.Fatalf("rootfs with a mount under it:\n%v", o)
	}
	o = run(t, sandbox.Options{Workspace: ws, Args: []string{"/bin/true"}})
	if o.err == nil || !strings.Contains(o.err.Error(), "has a mount under it") {
		t.Fatalf("workspace with a mount under it:\n%v", o)
	}
}

// A sandbox with an id block of its own maps its root, system users and
// nobody there and the user to the host user: both kinds of sandbox work
// (root inside writes /tmp, the user the workspace) and their maps say
// exactly that.
func TestIDBlock(t *testing.T) {
	ws, agent := agentWorkspace(t)
	block := sandbox.IDs{Base: 0x71000000 + 7*2048, Count: 2048}
	b := strconv.FormatUint(uint64(block.Base), 10)
	a := strconv.FormatUint(uint64(agent.UID), 10)
	for _, c := range []struct {
		user *sandbox.User
		host *sandbox.User
		cmd  string
		want []string // the uid map, then the output
	}{
		{nil, &agent, "touch /workspace/block-agent && touch /tmp/t && stat -c %u /tmp/t /workspace/block-agent",
			[]string{"0 " + b + " 1000", "1000 " + a + " 1", "1001 " + strconv.FormatUint(uint64(block.Base+1001), 10) + " 1046",
				"65534 " + strconv.FormatUint(uint64(block.Base+2047), 10) + " 1", "1000", "1000"}},
		{&sandbox.User{}, nil, "touch /tmp/r && stat -c %u /tmp/r /tmp && ! touch /workspace/block-root 2>/dev/null",
			[]string{"0 " + b + " 2047", "65534 " + strconv.FormatUint(uint64(block.Base+2047), 10) + " 1", "0", "0"}},
	} {
		o := run(t, sandbox.Options{Workspace: ws, User: c.user, HostUser: c.host, IDs: block, Cwd: "/tmp",
			Args: []string{"/bin/sh", "-c", "cat /proc/self/uid_map && " + c.cmd}})
		if o.err != nil || o.res.ExitCode != 0 {
			t.Fatalf("%v:\n%v", c.user, o)
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(o.stdout), "\n") {
			got = append(got, strings.Join(strings.Fields(l), " "))
		}
		if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Fatalf("%v: got\n%s\nwant\n%s", c.user, strings.Join(got, "\n"), strings.Join(c.want, "\n"))
		}
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(ws, "block-agent"), &st); err != nil || st.Uid != agent.UID {
		t.Fatalf("the agent's file: %v, owner %d", err, st.Uid)
	}
	if _, err := os.Lstat(filepath.Join(ws, "block-root")); err == nil {
		t.Fatal("the block's root wrote the agent's workspace")
	}
}
