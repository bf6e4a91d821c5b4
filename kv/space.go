package kv

import (
	"errors"
	"fmt"
	"log/slog"
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
// retried for ever, writes stall once the memtables are full, opening the
// store again replays its log into a flush that never ends, and a log or
// manifest write that fails panics the process. So the store keeps a
// reserve free on its file system: below it, writes, new names, links and
// extended attributes fail with ENOSPC, while everything that removes
// (unlink, rmdir, truncate, removexattr) and every metadata change still
// works, and the reserve leaves room for the flushes and compactions those
// need.
//
// Files written by the kernel directly (FUSE passthrough into blobs, of
// this store or another one on the same file system) and other programs
// are not held back, and can take the file system to its last byte. For
// that the store keeps a ballast: a file of Options.Ballast bytes under
// its directory, allocated when the store opens. Every write of Pebble's
// goes through vfs.OnDiskFull: the first that fails with ENOSPC removes
// the ballast and is tried again, into the space it freed. From then on
// (until the file system has the reserve and ballastMargin free again; the
// ballast is made again once it fits too) the store is low on space
// whatever the file system says: everything that adds data fails with ENOSPC, so that
// the space the ballast freed goes to what Pebble must write (the log of
// removals and metadata changes, a flush). While low, every commit looks
// at the file system first (full): below fullFree (the store's ballast is
// removed first if it is still there) nothing commits, not even a
// removal, so that someone else filling the file system again cannot make
// Pebble write a log it has no room for. The log keeps walReserve
// allocated ahead of its end and the manifest manifestReserve, and a new
// log or manifest is a spare file allocated ahead (durableFS.spareFor), so
// the commits that do go in, and the flushes and compactions that follow
// them, need no new space in the files Pebble cannot fail to write.

// spaceGuard watches the free space of the store's file system. It looks
// again (statfs, about a microsecond) after spaceCheckBytes of changes or
// spaceCheckEvery, whichever comes first.
type spaceGuard struct {
	dir     string
	reserve uint64 // 0: none
	log     *slog.Logger

	ballast     string // path; "" for none
	ballastSize int64
	noBallast   atomic.Bool // removed, or no room to make it
	wasFull     atomic.Bool // full since space was last back: the store stays low
	spare       *durableFS  // made again once there is space

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

// newSpaceGuard makes the guard for a store in dir, or nil if it keeps
// neither a reserve nor a ballast.
func newSpaceGuard(dir string, opts Options, log *slog.Logger) *spaceGuard {
	g := &spaceGuard{dir: dir, log: log}
	switch {
	case opts.MinFree == 0:
		g.reserve = 2*opts.MemTableSize + 64<<20
	case opts.MinFree > 0:
		g.reserve = uint64(opts.MinFree)
	}
	switch {
	case opts.NoSync: // a staging store, thrown away if it fails
	case opts.Ballast == 0:
		g.ballast, g.ballastSize = filepath.Join(dir, ballastName), 2*int64(opts.MemTableSize)+32<<20
	case opts.Ballast > 0:
		g.ballast, g.ballastSize = filepath.Join(dir, ballastName), opts.Ballast
	}
	if g.reserve == 0 && g.ballast == "" {
		return nil
	}
	return g
}

// backgroundError is Pebble's report of a flush or compaction that
// failed; Pebble tries again at once. For want of space that would spin
// (and log) without end, so it is slowed down here.
func (s *Store) backgroundError(err error) {
	if !errors.Is(err, syscall.ENOSPC) {
		s.log.Error("pebble: background error", "err", err)
		return
	}
	if now := time.Now().UnixNano(); now-s.lastNoSpaceLog.Load() > int64(10*time.Second) {
		s.lastNoSpaceLog.Store(now)
		s.log.Error("pebble: a flush or compaction failed for want of space; it is tried again", "err", err)
	}
	time.Sleep(20 * time.Millisecond)
}

// SpaceLow tells whether the store refuses new data for want of space on
// its file system (below its reserve, or after it was full).
func (s *Store) SpaceLow() bool { return s.space.check(0) != nil }

// check returns ErrNoSpace (wrapped, with the figures) if a change of n
// bytes must not be made.
func (g *spaceGuard) check(n int) error {
	if g == nil { // Options.MinFree < 0 and Options.Ballast < 0
		return nil
	}
	if g.bytes.Add(int64(n)) >= spaceCheckBytes || time.Now().UnixNano() >= g.next.Load() {
		g.look()
	}
	if g.low.Load() {
		if g.wasFull.Load() {
			return fmt.Errorf("%w: %d MiB free on the store's file system, which was full; the store takes new data again once %d MiB are free",
				ErrNoSpace, g.free.Load()>>20, (g.reserve+ballastMargin)>>20)
		}
		return fmt.Errorf("%w: %d MiB free on the store's file system, below its reserve of %d MiB",
			ErrNoSpace, g.free.Load()>>20, g.reserve>>20)
	}
	return nil
}

// ballastMargin is how much more than the reserve (and the ballast) must
// be free before the store takes new data again after the file system was
// full (and makes its ballast again).
const ballastMargin = 8 << 20

func (g *spaceGuard) look() {
	if !g.mu.TryLock() {
		return // another goroutine is looking
	}
	defer g.mu.Unlock()
	free, err := freeSpace(g.dir)
	if err != nil {
		return // keep what is known
	}
	if g.ballast != "" && g.noBallast.Load() && free >= g.reserve+uint64(g.ballastSize)+ballastMargin {
		if err := makeBallast(g.ballast, g.ballastSize); err != nil {
			g.log.Warn("store: making the ballast failed", "err", err)
		} else {
			g.noBallast.Store(false)
			g.log.Info("store: there is room for the ballast again; it is made", "free_mib", free>>20)
			if free, err = freeSpace(g.dir); err != nil {
				return
			}
		}
	}
	if g.wasFull.Load() && free >= g.reserve+ballastMargin {
		g.wasFull.Store(false)
		g.log.Info("store: space is back; the store takes new data again", "free_mib", free>>20)
	}
	if g.spare != nil && free > walReserve+manifestReserve && !g.spare.sparesReady() {
		g.spare.makeSpares()
	}
	g.free.Store(free)
	g.low.Store(free < g.reserve || g.wasFull.Load())
	g.bytes.Store(0)
	g.next.Store(time.Now().Add(spaceCheckEvery).UnixNano())
}

// fullFree is the free space below which a store that is low on space
// commits nothing at all, removals included: what Pebble would have to
// write next (a log past its reserve, a second new log) might not fit, and
// Pebble panics on a log it cannot write. Twice what the log keeps ahead.
const fullFree = 2 * walReserve

// full is asked before every commit while the store is low on space: it
// looks at the file system again (statfs, a microsecond or two) and
// returns ErrNoSpace if it is too full for any commit.
func (g *spaceGuard) full() error {
	free, err := freeSpace(g.dir)
	if err != nil || free >= fullFree {
		return nil
	}
	if g.ballast != "" && !g.noBallast.Load() {
		// The ballast is there for this moment.
		g.diskFull()
		if free, err = freeSpace(g.dir); err != nil || free >= fullFree {
			return nil
		}
	}
	return fmt.Errorf("%w: %d KiB free on the store's file system: too little for any change, even a removal, until space is freed",
		ErrNoSpace, free>>10)
}

// diskFull is called (by vfs.OnDiskFull) when a write of Pebble's failed
// with ENOSPC, before the write is tried again: the ballast goes, and the
// store is low from now on.
func (g *spaceGuard) diskFull() {
	if g == nil {
		return
	}
	g.wasFull.Store(true)
	g.low.Store(true)
	if g.ballast == "" || g.noBallast.Load() {
		g.log.Error("store: the file system is full and the store has no ballast left; Pebble's write is tried again")
		return
	}
	err := os.Remove(g.ballast)
	g.noBallast.Store(true)
	g.log.Warn("store: the file system is full: the ballast is removed for Pebble, and new data is refused until space is back", "ballast_mib", g.ballastSize>>20, "err", err)
}

// openBallast makes the ballast when the store opens, or finds it there.
// If there is not room for it, the store goes without until there is
// (look).
func (g *spaceGuard) openBallast() {
	if g == nil || g.ballast == "" {
		return
	}
	if fi, err := os.Stat(g.ballast); err == nil && fi.Size() == g.ballastSize {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Blocks*512 >= g.ballastSize {
			return
		}
	}
	free, err := freeSpace(g.dir)
	if err == nil && free >= g.reserve+uint64(g.ballastSize)+ballastMargin {
		err = makeBallast(g.ballast, g.ballastSize)
	} else if err == nil {
		err = fmt.Errorf("%d MiB free", free>>20)
	}
	if err != nil {
		os.Remove(g.ballast)
		g.noBallast.Store(true)
		g.log.Warn("store: no room for the ballast; the store goes without it until there is", "ballast_mib", g.ballastSize>>20, "err", err)
	}
}

// makeBallast allocates a ballast file of size bytes at path (its blocks,
// not a hole: fallocate).
func makeBallast(path string, size int64) error {
	tmp := path + ".new"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	err = unix.Fallocate(int(f.Fd()), 0, 0, size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("ballast %s: %w", path, err)
	}
	return nil
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

// spareLogName and spareManifestName are the spare log's and the spare
// manifest's files (durableFS.spareFor).
const (
	spareLogName      = "spare.log"
	spareManifestName = "spare.manifest"
)

// ballastName is the ballast's file in the store's directory.
const ballastName = "ballast"

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
	// The ballast is there for this: its space goes to the flush (the
	// store then opens low on space, see openBallast).
	if os.Remove(filepath.Join(dir, ballastName)) == nil {
		if free, err = freeSpace(dir); err != nil || free >= need {
			return nil
		}
	}
	return fmt.Errorf("store %s: %w: opening it writes its %d MiB of log out as tables, which needs about %d MiB free on its file system; it has %d MiB",
		dir, ErrNoSpace, logBytes>>20, need>>20, free>>20)
}
