// Package deeptree is for the tests of walks over trees of any depth: it
// builds a chain of directories straight in a store (a hundred thousand
// levels in seconds, where the mount would take a FUSE call a level), and
// runs each operation under test in a child test process whose Go stack
// is limited to MaxStack.
//
// The agent controls the depth of its tree: through the mount (mkdirat
// in a loop, which no PATH_MAX limits), the fast path or the tools it
// builds chains of millions of directories. Go code that recurses once a
// level grows its goroutine's stack with the depth, and past Go's limit
// (1 GiB) that is a fatal error, not a panic: the daemon and every
// workspace it serves end. A child whose stack limit is MaxStack finds
// such a recursion at Depth levels (any frame over MaxStack/Depth bytes,
// 105 bytes) as surely as the gigabyte would at a few million, and the
// fatal error ends the child only: the parent reports the operation by
// name.
package deeptree

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/computerfs/computerfs/kv"
)

const (
	// Depth is how deep the chains of the tests are.
	Depth = 10_000
	// MaxStack is the child's Go stack limit.
	MaxStack = 1 << 20
)

const (
	envOp    = "COMPUTERFS_DEEPTREE_OP"
	envStore = "COMPUTERFS_DEEPTREE_STORE"
)

// Options are the store options the tests use: no syncing (a test's
// store is thrown away), no journal (a test that needs one turns it on)
// and a memtable that holds the whole chain.
func Options() kv.Options {
	return kv.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), NoSync: true, NoJournal: true, MemTableSize: 64 << 20}
}

// Chain makes n directories named name under dir, each in the one
// before, owned by uid:gid, and returns the first and the last.
func Chain(st *kv.Store, dir uint64, name string, n int, uid, gid uint32) (top, bottom uint64, err error) {
	bottom = dir
	for i := 0; i < n; i++ {
		a, err := st.Create(bottom, name, kv.NewInode{Mode: syscall.S_IFDIR | 0o755, Uid: uid, Gid: gid})
		if err != nil {
			return 0, 0, err
		}
		bottom = a.Ino
		if top == 0 {
			top = bottom
		}
	}
	return top, bottom, nil
}

// Child reports, in a child that Run started, the operation to run and
// the store directory (its own copy) to run it on, after setting its Go
// stack limit to MaxStack; in the parent, ok is false.
func Child() (op, store string, ok bool) {
	op = os.Getenv(envOp)
	if op == "" {
		return "", "", false
	}
	debug.SetMaxStack(MaxStack)
	return op, os.Getenv(envStore), true
}

// Run runs the test named test (the one calling Run) again in a child
// process for each operation of ops, each as a subtest of its own name,
// on a copy of the closed store at store. A child that dies (a fatal
// stack overflow) or fails fails its subtest, with the end of its output.
// Each child must be done within limit.
func Run(t *testing.T, test, store string, ops []string, limit time.Duration) {
	t.Helper()
	for _, op := range ops {
		t.Run(op, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			if out, err := exec.Command("cp", "-a", store, dir).CombinedOutput(); err != nil {
				t.Fatalf("copy the store: %v: %s", err, out)
			}
			ctx, cancel := context.WithTimeout(context.Background(), limit)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+test+"$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), envOp+"="+op, envStore+"="+dir)
			start := time.Now()
			out, err := cmd.CombinedOutput()
			took := time.Since(start)
			if err != nil {
				text := string(out)
				if i := strings.Index(text, "fatal error"); i >= 0 {
					text = text[i:] // the cause, then the start of the trace
				} else if len(text) > 4000 {
					text = text[len(text)-4000:]
				}
				if len(text) > 4000 {
					text = text[:4000]
				}
				t.Fatalf("%s: the child died or failed after %.1fs (%v):\n%s", op, took.Seconds(), err, text)
			}
			for _, l := range strings.Split(string(out), "\n") {
				if strings.Contains(l, "deeptree:") {
					t.Log(strings.TrimSpace(l))
				}
			}
			t.Logf("%s: %.1fs", op, took.Seconds())
		})
	}
}

// Build makes the store at dir (closed when Build returns) with the
// chain of Depth directories "d" under its root, owned by uid:gid, a file
// "f" holding "deep\n" at its bottom, and calls more (if not nil) on it
// before closing it.
func Build(t *testing.T, dir string, uid, gid uint32, more func(st *kv.Store, bottom uint64)) {
	t.Helper()
	st, err := kv.Open(dir, Options())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, bottom, err := Chain(st, kv.RootIno, "d", Depth, uid, gid)
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	if _, err := st.Create(bottom, "f", kv.NewInode{Mode: syscall.S_IFREG | 0o644, Uid: uid, Gid: gid, Data: []byte("deep\n")}); err != nil {
		st.Close()
		t.Fatal(err)
	}
	if more != nil {
		more(st, bottom)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("a chain of %d directories built in %.1fs", Depth, time.Since(start).Seconds())
}

// Bottom returns the chain's last directory in st: the directory that
// holds "f" at the end of Depth "d" directories.
func Bottom(st *kv.Store) (uint64, error) {
	dir := uint64(kv.RootIno)
	for range Depth {
		ino, _, err := st.LookupIno(dir, "d")
		if err != nil {
			return 0, err
		}
		dir = ino
	}
	return dir, nil
}
