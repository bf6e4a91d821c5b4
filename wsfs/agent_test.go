package wsfs

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/computerfs/computerfs/kv"
)

// The agent's FS changes what is not the owner's only as the kernel would
// let an unprivileged owner: no writes, no entries in another's directory
// without write permission, no mode, times or owner of another's files,
// and no ownership given away.
func TestForAgent(t *testing.T) {
	daemon := newFS(t) // owner 1000:1000
	agent := daemon.ForAgent()
	check(t, daemon.Lchown("/", 1000, 1000)) // the workspace's root is the agent's
	// What root (the operator) has in the workspace.
	check(t, daemon.Mkdir("ops", 0o755))
	check(t, daemon.WriteFile("ops/config", []byte("operator\n"), 0o644))
	check(t, daemon.WriteFile("shared", []byte("operator\n"), 0o666))
	check(t, daemon.Mkdir("groupdir", 0o775))
	for _, p := range []string{"ops", "ops/config", "shared"} {
		check(t, daemon.Lchown(p, 0, 0))
	}
	check(t, daemon.Lchown("groupdir", 0, 1000))
	check(t, daemon.Chmod("shared", 0o666))
	check(t, daemon.Chmod("groupdir", 0o775))
	check(t, agent.WriteFile("mine", []byte("agent\n"), 0o644))

	for _, c := range []struct {
		what  string
		err   error
		errno syscall.Errno
	}{
		{"write root's file", agent.WriteFile("ops/config", []byte("x"), 0o644), syscall.EACCES},
		{"create in root's dir", agent.WriteFile("ops/new", []byte("x"), 0o644), syscall.EACCES},
		{"mkdir in root's dir", agent.Mkdir("ops/d", 0o755), syscall.EACCES},
		{"symlink in root's dir", agent.Symlink("x", "ops/l"), syscall.EACCES},
		{"link into root's dir", agent.Link("mine", "ops/mine"), syscall.EACCES},
		{"remove from root's dir", agent.Remove("ops/config"), syscall.EACCES},
		{"rename out of root's dir", agent.Rename("ops/config", "stolen"), syscall.EACCES},
		{"rename into root's dir", agent.Rename("mine", "ops/config"), syscall.EACCES},
		{"truncate root's file", agent.Truncate("ops/config", 0), syscall.EACCES},
		{"chmod root's file", agent.Chmod("ops/config", 0o666), syscall.EPERM},
		{"chtimes root's file", agent.Chtimes("ops/config", time.Unix(1, 0), time.Unix(1, 0)), syscall.EPERM},
		{"chown root's file to the agent", agent.Lchown("ops/config", 1000, 1000), syscall.EPERM},
		{"chown own file to root", agent.Lchown("mine", 0, 0), syscall.EPERM},
		{"chgrp own file to root's group", agent.Lchown("mine", 1000, 0), syscall.EPERM},
		{"chown own file to another", agent.Lchown("mine", 1001, 1000), syscall.EPERM},
	} {
		wantErr(t, c.what, c.err, c.errno)
	}
	if _, err := agent.Open("ops/config", O_WRONLY|O_APPEND, 0); err == nil {
		t.Fatal("opened root's file for writing")
	}
	for _, name := range []string{"ops/billy", "ops/config"} {
		// A billy file is made, or replaced, at Close.
		f, err := agent.Billy("/").Create(name)
		if err == nil {
			f.Write([]byte("agent"))
			err = f.Close()
		}
		if err == nil {
			t.Fatalf("billy wrote %s in root's directory", name)
		}
	}
	wantErr(t, "billy chown", agent.Billy("/").Chown("mine", 0, 0), syscall.EPERM)
	if b, err := agent.ReadFile("ops/config"); err != nil || string(b) != "operator\n" {
		t.Fatalf("root's file: %q %v", b, err)
	}
	// What the mode lets the agent do, it does; its own files are its.
	check(t, agent.WriteFile("shared", []byte("agent\n"), 0o644))
	check(t, agent.WriteFile("groupdir/f", []byte("x"), 0o644))
	check(t, agent.Lchown("mine", 1000, 1000))
	check(t, agent.Chmod("mine", 0o600))
	check(t, agent.Rename("mine", "moved"))
	a, err := agent.Lstat("groupdir/f")
	if err != nil || a.Uid != 1000 || a.Gid != 1000 {
		t.Fatalf("new file %+v %v", a, err)
	}
	// The daemon's own FS is not limited.
	check(t, daemon.WriteFile("ops/config", []byte("daemon\n"), 0o644))
	// ForAgent survives As.
	wantErr(t, "As of ForAgent", agent.As(kv.Actor{Entry: "x"}).WriteFile("ops/config", nil, 0o644), syscall.EACCES)
}

// BenchmarkAgentFS measures what the agent's checks cost: file creation,
// a write and removal, in the owner's directory, on the daemon's FS and
// on the agent's, in the same run.
func BenchmarkAgentFS(b *testing.B) {
	for _, agent := range []bool{false, true} {
		b.Run(fmt.Sprintf("agent=%v", agent), func(b *testing.B) {
			f := newFS(b)
			check(b, f.Lchown("/", 1000, 1000))
			if agent {
				f = f.ForAgent()
			}
			check(b, f.Mkdir("d", 0o755))
			data := []byte("hello\n")
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p := fmt.Sprintf("d/f%d", i)
				check(b, f.WriteFile(p, data, 0o644))
				check(b, f.Chmod(p, 0o600))
				check(b, f.Remove(p))
			}
		})
	}
}

// BenchmarkAgentCheck is the agent's check alone, per change: one
// attribute read of the inode (cached by the store) and a comparison.
func BenchmarkAgentCheck(b *testing.B) {
	f := newFS(b)
	check(b, f.Lchown("/", 1000, 1000))
	check(b, f.Mkdir("d", 0o755))
	a, err := f.Lstat("d")
	check(b, err)
	g := f.ForAgent()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := g.mayWrite(a.Ino); err != nil {
			b.Fatal(err)
		}
	}
}
