package kv

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrNoSpace is the answer to a change that would add data or names while
// the store's file system is below its reserve (Options.MinFree).
var ErrNoSpace = &Error{"no space left on device", syscall.ENOSPC}

// Pebble cannot get out of a full disk by itself: a flush that fails is
// retried for ever, writes stall once the memtables are full, and opening
// the store again replays its log into a flush that never ends. So the
// store keeps a reserve free on its file system: below it, writes, new
// names, links and extended attributes fail with ENOSPC, while everything
// that removes (unlink, rmdir, truncate, removexattr) and every metadata
// change still works, and the reserve leaves room for the flushes and
// compactions those need. Files written by the kernel directly (FUSE
// passthrough into blobs) and other programs on the same file system are
// not held back: they can still use up the reserve.

// spaceGuard watches the free space of the store's file system. It looks
// again (statfs, about a microsecond) after spaceCheckBytes of changes or
// spaceCheckEvery, whichever comes first.
type spaceGuard struct {
	dir     string
	reserve uint64

	mu    sync.Mutex // one statfs at a time
	next  atomic.Int64
	bytes atomic.Int64
	low   atomic.Bool
	free  atomic.Uint64 // bytes available at the last look
}

const (
	spaceCheckBytes = 4 << 20
	spaceCheckEvery = 100 * time.Millisecond
)

// check returns ErrNoSpace (wrapped, with the figures) if a change of n
// bytes must not be made.
func (g *spaceGuard) check(n int) error {
	if g == nil { // Options.MinFree < 0
		return nil
	}
	if g.bytes.Add(int64(n)) >= spaceCheckBytes || time.Now().UnixNano() >= g.next.Load() {
		g.look()
	}
	if g.low.Load() {
		return fmt.Errorf("%w: %d MiB free on the store's file system, below its reserve of %d MiB",
			ErrNoSpace, g.free.Load()>>20, g.reserve>>20)
	}
	return nil
}

func (g *spaceGuard) look() {
	if !g.mu.TryLock() {
		return // another goroutine is looking
	}
	defer g.mu.Unlock()
	free, err := freeSpace(g.dir)
	if err != nil {
		return // keep what is known
	}
	g.free.Store(free)
	g.low.Store(free < g.reserve)
	g.bytes.Store(0)
	g.next.Store(time.Now().Add(spaceCheckEvery).UnixNano())
}

// freeSpace is what an unprivileged writer may still use on dir's file
// system (root may use the blocks reserved for it too, but a store should
// not take those).
func freeSpace(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// checkOpenSpace fails with ErrNoSpace if the store's file system has too
// little free space to open it: opening writes the log out as tables, and
// Pebble would wait for ever for that flush to succeed.
func checkOpenSpace(dir string) error {
	logs, _ := filepath.Glob(filepath.Join(dir, "db", "*.log"))
	var logBytes int64
	for _, l := range logs {
		if fi, err := os.Stat(l); err == nil {
			logBytes += fi.Size()
		}
	}
	need := uint64(logBytes+logBytes/4) + 8<<20 // the tables, a manifest, a new log
	free, err := freeSpace(dir)
	if err != nil || free >= need {
		return nil
	}
	return fmt.Errorf("store %s: %w: opening it writes its %d MiB of log out as tables, which needs about %d MiB free on its file system; it has %d MiB",
		dir, ErrNoSpace, logBytes>>20, need>>20, free>>20)
}
