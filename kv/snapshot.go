package kv

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
)

// Snapshots and forks. A snapshot is a store's state at one point of its
// sequence of batches, kept under STORE/snapshots/NAME/ as a database
// directory (db/) and a blobs directory (blobs/) that no process opens:
//
//   - Snapshot holds off every change for a moment (the cut, ckptcut.go):
//     nsMu (the namespace), every inode stripe (data, attributes and the
//     blob writes made under them) and usageMu for writing (every commit
//     holds it for reading), so no batch is under way and no blob is half
//     written by the daemon; a marker goes to Pebble's log and the blobs'
//     barrier is installed. Once changes go on, Pebble's Checkpoint
//     hard-links the immutable tables and copies the manifest and the
//     write-ahead log (small: a memtable past snapshotFlushAt is written
//     to a table first), cut at the marker, and each blob is hard-linked
//     (snaplink.go);
//   - a blob file with more than one link is copied before the store
//     writes it (acquireOwn), so the snapshot never sees a later write:
//     copy-on-write at the granularity of a blob;
//   - the kernel writes pinned blobs (passthrough) without asking, so
//     those are copied into the snapshot rather than linked, and a blob
//     that is pinned is always the store's own (newPin unshares it): the
//     kernel's writes never reach a linked file. A pinned blob's copy has
//     what the kernel had written when the copy was made; it carries
//     FlagWriting if it was open for writing, so a store made from the
//     snapshot takes its size from the copy (recoverWriting).
//
// A fork is a new store directory made from a snapshot, or from the live
// state (a snapshot taken straight into it), with the same links: tables
// and blobs are shared, the manifest and logs copied. Its database is
// opened by a new Store with its own lock; nothing it does reaches the
// parent (Pebble never writes a table in place, and blobs are copied
// before they are written).
//
// The cost of a snapshot or a fork is a link per table and per blob, a
// copy of the logs and of the pinned blobs, and the disk of what changes
// afterwards: a blob's first write after a snapshot copies the blob, and
// tables the store compacts away stay on disk while a snapshot holds them.

// ErrSnapshotExists and ErrNoSnapshot answer Snapshot and the calls that
// name one.
var (
	ErrSnapshotExists = errors.New("a snapshot of that name exists")
	ErrNoSnapshot     = errors.New("no such snapshot")
)

// snapshotsDir is the directory of a store's snapshots.
const snapshotsDir = "snapshots"

var snapshotName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// CheckSnapshotName refuses names that are not 1 to 64 letters, digits,
// dots, dashes and underscores, starting with a letter or digit.
func CheckSnapshotName(name string) error {
	if !snapshotName.MatchString(name) {
		return fmt.Errorf("snapshot name %q: want 1 to 64 letters, digits, '.', '-' or '_', starting with a letter or digit", name)
	}
	return nil
}

// SnapshotInfo describes one snapshot.
type SnapshotInfo struct {
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
	// Own is the disk the snapshot alone holds (bytes of its files that
	// the store no longer shares with it): what deleting it frees.
	Own int64 `json:"own_bytes"`
	// Held is how long changes were held off while it was taken (set by
	// Snapshot only).
	Held time.Duration `json:"held_ns,omitempty"`
}

// snapshotFlushAt: a memtable larger than this is written to a table
// before a snapshot, outside the moment changes are held off, so that the
// snapshot links it instead of copying its log.
const snapshotFlushAt = 4 << 20

func (s *Store) snapshotPath(name string) string {
	return filepath.Join(s.dir, snapshotsDir, name)
}

// Snapshot takes the snapshot name of the store's current state. It fails
// with ErrSnapshotExists if the name is taken.
func (s *Store) Snapshot(name string) (SnapshotInfo, error) {
	s.enter()
	defer s.leave()
	if err := CheckSnapshotName(name); err != nil {
		return SnapshotInfo{}, err
	}
	root := filepath.Join(s.dir, snapshotsDir)
	if err := os.MkdirAll(root, 0o700); err != nil {
		return SnapshotInfo{}, err
	}
	final := filepath.Join(root, name)
	if _, err := os.Lstat(final); err == nil {
		return SnapshotInfo{}, fmt.Errorf("snapshot %s: %w", name, ErrSnapshotExists)
	}
	// Built under a name that lists skip, then renamed: a snapshot is
	// there whole or not at all (a crash leaves a .tmp- directory, which
	// the next snapshot of that name removes).
	tmp := filepath.Join(root, ".tmp-"+name)
	if err := os.RemoveAll(tmp); err != nil {
		return SnapshotInfo{}, err
	}
	held, _, err := s.checkpoint(tmp, snapshotFlushAt)
	if err == nil && !s.fs.noSync {
		err = syncSnapshot(tmp)
	}
	if err != nil {
		os.RemoveAll(tmp)
		return SnapshotInfo{}, fmt.Errorf("snapshot %s: %w", name, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		os.RemoveAll(tmp)
		if errors.Is(err, os.ErrExist) || errors.Is(err, syscall.ENOTEMPTY) {
			err = ErrSnapshotExists
		}
		return SnapshotInfo{}, fmt.Errorf("snapshot %s: %w", name, err)
	}
	if err := syncDir(root); err != nil {
		return SnapshotInfo{}, err
	}
	info, err := snapshotInfo(final)
	info.Held = held
	return info, err
}

// checkpoint writes the store's current state into the new directory dst
// (db/ and blobs/): a cut, holding off every change for a moment, then
// its materialization (ckptcut.go). It returns for how long changes were
// held and the journal's last record then. A memtable past flushAt is
// written to a table first. The copies are not synced:
// syncSnapshot does that, once changes go on (the tables and blobs the
// snapshot links are never written again, a shared blob being copied
// first, so syncing them later makes durable what they held now).
func (s *Store) checkpoint(dst string, flushAt uint64) (time.Duration, uint64, error) {
	c, err := s.takeCut(dst, flushAt, 0, nil)
	if err != nil {
		return 0, 0, err
	}
	if err := s.materializeCut(c); err != nil {
		return 0, 0, err
	}
	return c.held, c.seq, nil
}

// snapshotTrace, when set (by tests and benchmarks), is told how long each
// part of a checkpoint took: "db" (the database's part of the held moment:
// the marker and the Pebble snapshot, or Pebble's checkpoint with
// snapshotPebbleHeld), "blobs" (the blobs' part of the held moment),
// "db-after" (Pebble's checkpoint and the cut of its log, once changes go
// on) and "after" (the blobs' links made once changes go on).
var snapshotTrace func(part string, d time.Duration)

func snapshotTraced(part string, d time.Duration) {
	if snapshotTrace != nil {
		snapshotTrace(part, d)
	}
}

// holdChanges holds off every change to the store: nsMu (namespace
// operations), every inode stripe (data and attribute changes, and the
// blob writes made under them) and usageMu for writing (every commit
// holds it for reading). It returns the function that lets them go, which
// may be called more than once.
func (s *Store) holdChanges() (release func()) {
	s.nsMu.Lock()
	for i := range s.stripes {
		s.stripes[i].Lock()
	}
	s.usageMu.Lock()
	return sync.OnceFunc(func() {
		s.usageMu.Unlock()
		for i := len(s.stripes) - 1; i >= 0; i-- {
			s.stripes[i].Unlock()
		}
		s.nsMu.Unlock()
	})
}

// syncSnapshot makes the snapshot in dir durable: every file but Pebble's
// tables (synced when Pebble wrote them, and never written again) and
// every directory.
func syncSnapshot(dir string) error { return syncTrees(dir) }

// syncTrees is syncSnapshot for the snapshots in dirs at once: a file
// linked in several of them (a blob, or what checkpoints written together
// share) is synced once.
func syncTrees(dirs ...string) error {
	type fileID struct{ dev, ino uint64 }
	seen := map[fileID]bool{}
	var paths []string
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil || !(d.IsDir() || !strings.HasSuffix(p, ".sst")) {
				return err
			}
			if !d.IsDir() {
				fi, err := d.Info()
				if err != nil {
					return err
				}
				if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
					id := fileID{uint64(st.Dev), st.Ino}
					if seen[id] {
						return nil
					}
					seen[id] = true
				}
			}
			paths = append(paths, p)
			return nil
		})
		if err != nil {
			return err
		}
	}
	var g errgroup.Group
	g.SetLimit(16)
	for _, p := range paths {
		g.Go(func() error { return syncPath(p) })
	}
	return g.Wait()
}

func syncPath(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// acquireOwn is acquire for a write: a blob that shares its file with a
// snapshot or fork (more than one link) is first copied, and the copy
// takes its place, so the write reaches this store only. Readers that
// hold the old file keep reading the old content, which is the same. The
// caller holds the inode's lock (or runs alone, at open).
func (bs *blobStore) acquireOwn(ino uint64) (*os.File, func(), error) {
	f, release, err := bs.acquire(ino, false)
	if err != nil {
		return nil, nil, err
	}
	bs.mu.Lock()
	ob := bs.open[ino]
	own := ob != nil && ob.f == f && ob.own
	bs.mu.Unlock()
	if own {
		return f, release, nil
	}
	bs.barrier(ino) // a snapshot linking its blobs takes this one first
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		release()
		return nil, nil, fmt.Errorf("blob of inode %d: %w", ino, err)
	}
	if st.Nlink <= 1 {
		bs.mu.Lock()
		if ob != nil && bs.open[ino] == ob {
			ob.own = true
		}
		bs.mu.Unlock()
		return f, release, nil
	}
	err = bs.unshare(ino, f)
	release()
	if err != nil {
		return nil, nil, err
	}
	return bs.acquire(ino, false)
}

// unshare replaces ino's blob, whose file f is shared, by a copy of it.
func (bs *blobStore) unshare(ino uint64, f *os.File) error {
	tmp := filepath.Join(bs.dir, ".cow-"+strconv.FormatUint(ino, 16))
	if err := copyBlobFile(f, tmp, !bs.noSync); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("copy the shared blob of inode %d: %w", ino, err)
	}
	if err := os.Rename(tmp, bs.path(ino)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("copy the shared blob of inode %d: %w", ino, err)
	}
	bs.mu.Lock()
	bs.forgetLocked(ino)
	bs.mu.Unlock()
	if bs.noSync {
		return nil
	}
	return syncDir(bs.dir)
}

// copyBlobFile copies the blob file f to the new file dst: a clone where
// the file system has them (btrfs, XFS), else its data ranges (holes stay
// holes), with f's size and times. With sync the copy is durable.
func copyBlobFile(f *os.File, dst string, sync bool) error {
	out, err := os.OpenFile(dst, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = copyInto(out, f)
	if err == nil && sync {
		err = unix.Fdatasync(int(out.Fd()))
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(dst)
	}
	return err
}

func copyInto(out, f *os.File) error {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return err
	}
	if unix.IoctlFileClone(int(out.Fd()), int(f.Fd())) != nil {
		for off := int64(0); off < st.Size; {
			data, err := unix.Seek(int(f.Fd()), off, unix.SEEK_DATA)
			if err == unix.ENXIO {
				break // a hole to the end
			}
			if err != nil {
				return err
			}
			hole, err := unix.Seek(int(f.Fd()), data, unix.SEEK_HOLE)
			if err != nil {
				return err
			}
			so, do := data, data
			for so < hole {
				n, err := unix.CopyFileRange(int(f.Fd()), &so, int(out.Fd()), &do, int(hole-so), 0)
				if err != nil {
					return err
				}
				if n == 0 {
					break // the file shrank under us (the kernel's writes)
				}
			}
			off = hole
		}
		if err := out.Truncate(st.Size); err != nil {
			return err
		}
	}
	ts := []unix.Timespec{unix.NsecToTimespec(st.Atim.Nano()), unix.NsecToTimespec(st.Mtim.Nano())}
	return unix.UtimesNanoAt(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", out.Fd()), ts, 0)
}

// cleanSnapshots removes what a crash left of snapshots being taken or
// deleted (.tmp- and .del- directories) when the store opens.
func (s *Store) cleanSnapshots() error {
	root := filepath.Join(s.dir, snapshotsDir)
	entries, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if n := e.Name(); strings.HasPrefix(n, ".tmp-") || strings.HasPrefix(n, ".del-") {
			if err := os.RemoveAll(filepath.Join(root, n)); err != nil {
				return err
			}
		}
	}
	return nil
}

// snapshotDirs are the paths of the directories under the store dir's
// snapshots/ whose names are kept by keep (none if there is no snapshots/).
func snapshotDirs(dir string, keep func(name string) bool) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(dir, snapshotsDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && keep(e.Name()) {
			out = append(out, filepath.Join(dir, snapshotsDir, e.Name()))
		}
	}
	return out, nil
}

// Snapshots lists the store's snapshots, oldest first.
func (s *Store) Snapshots() ([]SnapshotInfo, error) { return ListSnapshots(s.dir) }

// ListSnapshots lists the snapshots of the store in dir, open or not,
// oldest first.
func ListSnapshots(dir string) ([]SnapshotInfo, error) {
	paths, err := snapshotDirs(dir, func(name string) bool { return CheckSnapshotName(name) == nil })
	if err != nil {
		return nil, err
	}
	var out []SnapshotInfo
	for _, p := range paths {
		info, err := snapshotInfo(p)
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Created.Equal(out[j].Created) {
			return out[i].Created.Before(out[j].Created)
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// snapshotInfo describes the snapshot in dir: its time is its directory's
// modification time (renamed into place when complete), its own bytes
// those of its files with a single link.
func snapshotInfo(dir string) (SnapshotInfo, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return SnapshotInfo{}, err
	}
	info := SnapshotInfo{Name: filepath.Base(dir), Created: st.ModTime()}
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if sys, ok := fi.Sys().(*syscall.Stat_t); ok && sys.Nlink == 1 {
			info.Own += sys.Blocks * 512
		}
		return nil
	})
	return info, err
}

// DeleteSnapshot removes the snapshot name.
func (s *Store) DeleteSnapshot(name string) error {
	if err := checkRef(name); err != nil {
		return err
	}
	return s.deleteSnapshots([]string{name}, true)
}

// deleteSnapshots removes the snapshots names (checked), with one sync of
// snapshots/; one that is not there is an error if strict says so, else
// passed over.
func (s *Store) deleteSnapshots(names []string, strict bool) error {
	if len(names) == 0 {
		return nil
	}
	// Not while a rollback links a snapshot; rollMu before the gate, which
	// a rollback closes while it holds rollMu.
	s.rollMu.Lock()
	defer s.rollMu.Unlock()
	s.enter()
	defer s.leave()
	root := filepath.Join(s.dir, snapshotsDir)
	var gone []string
	var err error
	for _, name := range names {
		p := s.snapshotPath(name)
		if _, e := os.Lstat(p); errors.Is(e, os.ErrNotExist) {
			if strict {
				err = fmt.Errorf("snapshot %s: %w", name, ErrNoSnapshot)
				break
			}
			continue
		}
		// Renamed away first, so that a crash never leaves half a
		// snapshot under its name.
		del := filepath.Join(root, ".del-"+name)
		if err = os.RemoveAll(del); err != nil {
			break
		}
		if err = os.Rename(p, del); err != nil {
			break
		}
		gone = append(gone, del)
	}
	if len(gone) > 0 {
		if serr := syncDir(root); serr != nil {
			return serr
		}
	}
	for _, del := range gone {
		if rerr := os.RemoveAll(del); err == nil {
			err = rerr
		}
	}
	return err
}

// Fork makes a new store in dst, which must not exist or be empty, from
// the snapshot from, or from the current state if from is "". The new
// store is closed; Open opens it. It shares the unchanged tables and blobs
// with this store (links: dst must be on the same file system).
func (s *Store) Fork(dst, from string) error {
	s.enter()
	defer s.leave()
	dst, err := filepath.Abs(dst)
	if err != nil {
		return err
	}
	if err := checkForkDst(dst); err != nil {
		return err
	}
	if from != "" {
		if err := checkRef(from); err != nil {
			return err
		}
		src := s.snapshotPath(from)
		if _, err := os.Stat(src); errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("snapshot %s: %w", from, ErrNoSnapshot)
		}
		return ForkSnapshot(src, dst)
	}
	tmp := forkTmp(dst)
	_, _, err = s.checkpoint(tmp, snapshotFlushAt)
	if err == nil && !s.fs.noSync {
		err = syncSnapshot(tmp)
	}
	if err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("fork into %s: %w", dst, err)
	}
	return placeFork(tmp, dst)
}

// ForkSnapshot makes a new store in dst (not existing, or empty) from the
// snapshot directory src (STORE/snapshots/NAME), which may belong to a
// store that is not open. Tables and blobs are linked, the rest copied.
func ForkSnapshot(src, dst string) error {
	dst, err := filepath.Abs(dst)
	if err != nil {
		return err
	}
	if err := checkForkDst(dst); err != nil {
		return err
	}
	tmp := forkTmp(dst)
	if err := linkTree(src, tmp); err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("fork into %s: %w", dst, err)
	}
	return placeFork(tmp, dst)
}

// SnapshotDir is the directory of the snapshot name of the store in dir
// (open or not); ErrNoSnapshot if it has none of that name.
func SnapshotDir(dir, name string) (string, error) {
	if err := checkRef(name); err != nil {
		return "", err
	}
	p := filepath.Join(dir, snapshotsDir, name)
	if _, err := os.Stat(filepath.Join(p, "db")); err != nil {
		return "", fmt.Errorf("snapshot %s of %s: %w", name, dir, ErrNoSnapshot)
	}
	return p, nil
}

func checkForkDst(dst string) error {
	entries, err := os.ReadDir(dst)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("fork into %s: %w", dst, err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("fork into %s: the directory is not empty", dst)
	}
	return nil
}

// forkTmp is where a fork into dst is built: beside it, on its file system.
func forkTmp(dst string) string {
	return filepath.Join(filepath.Dir(dst), "."+filepath.Base(dst)+".fork-"+strconv.Itoa(os.Getpid()))
}

// placeFork renames the complete fork tmp to dst (an empty directory
// there is replaced).
func placeFork(tmp, dst string) error {
	if err := os.Rename(tmp, dst); err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("fork into %s: %w", dst, err)
	}
	return syncDir(filepath.Dir(dst))
}

// linkTree recreates the snapshot src in dst: Pebble's tables and the
// blobs are linked (never written in place: Pebble writes new tables, the
// store copies a shared blob before writing it), every other file (the
// manifest, logs, options, markers: Pebble appends to or reuses some) is
// copied.
func linkTree(src, dst string) error {
	for _, sub := range []string{"db", "blobs"} {
		if err := os.MkdirAll(filepath.Join(dst, sub), 0o700); err != nil {
			return err
		}
		entries, err := os.ReadDir(filepath.Join(src, sub))
		if err != nil {
			return err
		}
		for _, e := range entries {
			if !e.Type().IsRegular() {
				continue
			}
			from, to := filepath.Join(src, sub, e.Name()), filepath.Join(dst, sub, e.Name())
			if sub == "blobs" || strings.HasSuffix(e.Name(), ".sst") || strings.HasSuffix(e.Name(), ".blob") {
				err = linkOrCopy(from, to)
			} else {
				err = copyFile(from, to, -1, true)
			}
			if err != nil {
				return err
			}
		}
		if err := syncDir(filepath.Join(dst, sub)); err != nil {
			return err
		}
	}
	return syncDir(dst)
}

// linkOrCopy links from to to, or copies it where links cannot go (to
// another file system).
func linkOrCopy(from, to string) error {
	err := os.Link(from, to)
	if !errors.Is(err, syscall.EXDEV) {
		return err
	}
	f, err := os.Open(from)
	if err != nil {
		return err
	}
	defer f.Close()
	return copyBlobFile(f, to, true)
}

// copyFile copies the first n bytes of the file from (all of it when n
// is negative) to the new file to, and syncs it if sync is set (a
// checkpoint's log prefixes are synced later, in one pass).
func copyFile(from, to string, n int64, sync bool) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if n < 0 {
		_, err = io.Copy(out, in)
	} else {
		_, err = io.CopyN(out, in, n)
	}
	if err == nil && sync {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

func syncDir(dir string) error { return syncPath(dir) }

// Owner is a host uid and gid.
type Owner struct{ UID, GID uint32 }
