package kv

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

// durableFS wraps the disk file system Pebble writes to. For write-ahead
// log files it turns Sync into a no-op unless a caller has asked for stable
// storage (hard > 0). Pebble's log writer writes its buffered block to the
// file before it calls Sync, so a "sync" commit through this wrapper always
// hands the log to the operating system (surviving a daemon crash) and
// reaches the disk only when asked to (surviving a power loss).
//
// Why this is safe: a hard sync raises hard before it queues its commit, and
// Pebble answers a queued commit only with a Sync call made after it was
// queued, so that call sees hard > 0. Closing a log file (log rotation)
// always syncs it, so every log but the newest is complete on disk; only
// the newest can have a torn tail, which recovery tolerates.
type durableFS struct {
	vfs.FS
	hard   atomic.Int32
	noSync bool // Options.NoSync: no file or directory is ever synced

	// Files Pebble cannot fail to write (it panics): a new log and a new
	// manifest are spares made in advance (see spare).
	logSpare, manifestSpare spare
	// dbDir is the store's database directory. Files Pebble writes
	// elsewhere (a checkpoint's, snapshot.go) are not the store's: they
	// take no spare, keep nothing allocated ahead and are not synced
	// (the checkpoint is made durable with SyncTree once changes are no
	// longer held off).
	dbDir string
	// checkpointing: checkpoints are being written (Pebble's part of
	// materialize, ckptcut.go), whose files and directories are not
	// synced here (syncSnapshot does, after).
	checkpointing atomic.Int32
}

// ours tells whether name is a file of the store's own database.
func (d *durableFS) ours(name string) bool { return d.dbDir == "" || filepath.Dir(name) == d.dbDir }

// unsynced tells whether name is a file of the checkpoint being written.
func (d *durableFS) unsynced(name string) bool { return d.checkpointing.Load() > 0 && !d.ours(name) }

func isWAL(name string) bool { return strings.HasSuffix(name, ".log") }

func isManifest(name string) bool { return strings.HasPrefix(filepath.Base(name), "MANIFEST-") }

func (d *durableFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err == nil && d.noSync {
		return noSyncFile{f}, nil
	}
	if err == nil && d.unsynced(name) {
		return noSyncFile{f}, nil
	}
	if err != nil {
		return f, err
	}
	switch {
	case isWAL(name):
		w := &walFile{aheadFile: aheadFile{File: f, reserve: walReserve}, fs: d}
		w.allocate()
		return w, nil
	case isManifest(name):
		m := &aheadFile{File: f, reserve: manifestReserve}
		m.allocate()
		return m, nil
	}
	return f, nil
}

func (d *durableFS) OpenDir(name string) (vfs.File, error) {
	f, err := d.FS.OpenDir(name)
	if err == nil && (d.noSync || d.unsynced(filepath.Join(name, "x"))) {
		return noSyncFile{f}, nil
	}
	return f, err
}

// noSyncFile is a file of a NoSync store.
type noSyncFile struct{ vfs.File }

func (noSyncFile) Sync() error                { return nil }
func (noSyncFile) SyncData() error            { return nil }
func (noSyncFile) SyncTo(int64) (bool, error) { return true, nil }

// Preallocate does nothing: a NoSync store (an import's staging store)
// has no full disk to write through (space.go), and Pebble's 110% of the
// memtable size ahead of each log (141 MB for a 128 MiB memtable) stayed
// allocated, in each of the four logs it keeps, in the imported store.
func (noSyncFile) Preallocate(offset, length int64) error { return nil }

// spareFor is the spare for a new file of Pebble's named name, or nil.
func (d *durableFS) spareFor(name string) *spare {
	switch {
	case d.noSync || !d.ours(name):
		return nil
	case isWAL(name):
		return &d.logSpare
	case isManifest(name):
		return &d.manifestSpare
	}
	return nil
}

func (d *durableFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if sp := d.spareFor(name); sp != nil {
		if f := sp.take(d.FS, name, c); f != nil {
			return d.wrap(name, f, nil)
		}
	}
	f, err := d.FS.Create(name, c)
	return d.wrap(name, f, err)
}

// A new log or manifest is a file that Pebble must be able to write, or
// it panics: memtables (which start small) make a new log often, and
// every open and every 128 MB of manifest make a new manifest. So the
// store keeps a spare of each: a file of size 0 with its reserve
// allocated past its end, made while there is space (at open, and after
// each use); the new file is the spare renamed, and needs no new space
// even on a full file system.
type spare struct {
	path string // "" for none
	size int64  // allocated past its end
	mu   sync.Mutex
	have bool
}

// take renames the spare to name and opens it, or returns nil.
func (sp *spare) take(fs vfs.FS, name string, c vfs.DiskWriteCategory) vfs.File {
	if sp.path == "" {
		return nil
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if !sp.have {
		return nil
	}
	sp.have = false
	if err := os.Rename(sp.path, name); err != nil {
		return nil
	}
	f, err := fs.OpenReadWrite(name, c) // no O_TRUNC: that would free the space
	if err != nil {
		os.Remove(name)
		return nil
	}
	sp.makeLocked() // for the next one: a create and a fallocate
	return f
}

func (sp *spare) ready() bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.path == "" || sp.have
}

// make makes the spare if there is none; on a full file system it fails,
// and the store's space guard calls it again later.
func (sp *spare) make() {
	if sp.path == "" {
		return
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.makeLocked()
}

func (sp *spare) makeLocked() {
	if sp.have {
		return
	}
	f, err := os.OpenFile(sp.path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	err = unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, sp.size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(sp.path)
		return
	}
	sp.have = true
}

// setSpares names the spares' files in the store's directory dir and
// makes them (a NoSync store has none).
func (d *durableFS) setSpares(dir string) {
	if d.noSync {
		return
	}
	d.logSpare = spare{path: filepath.Join(dir, spareLogName), size: walReserve}
	d.manifestSpare = spare{path: filepath.Join(dir, spareManifestName), size: manifestReserve}
	d.makeSpares()
}

// makeSpares makes the spares that are missing.
func (d *durableFS) makeSpares() {
	d.logSpare.make()
	d.manifestSpare.make()
}

// sparesReady reports whether every spare is there.
func (d *durableFS) sparesReady() bool { return d.logSpare.ready() && d.manifestSpare.ready() }

// ReuseForWrite takes the spare for a new log rather than the old log
// Pebble recycles: that one is allocated only as far as it was written.
func (d *durableFS) ReuseForWrite(old, name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if sp := d.spareFor(name); sp != nil {
		if f := sp.take(d.FS, name, c); f != nil {
			d.FS.Remove(old)
			return d.wrap(name, f, nil)
		}
	}
	f, err := d.FS.ReuseForWrite(old, name, c)
	return d.wrap(name, f, err)
}

func (d *durableFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := d.FS.OpenReadWrite(name, c, opts...)
	return d.wrap(name, f, err)
}

// Open drops Pebble's advice that table files are read at random: a file's
// chunks are stored in order and read in order far more often than not,
// and each read of ours is a new short iterator, so Pebble's own
// read-ahead (which needs a long-lived iterator) never starts. The
// kernel's read-ahead then does the job.
func (d *durableFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	kept := opts[:0:0]
	for _, o := range opts {
		if o != vfs.RandomReadsOption {
			kept = append(kept, o)
		}
	}
	return d.FS.Open(name, kept...)
}

func (d *durableFS) Unwrap() vfs.FS { return d.FS }

// aheadFile keeps reserve bytes allocated past the end it has written
// (fallocate, keeping the size), so that while the file system is full
// (space.go) the small writes that still go in need no new space. One
// fallocate per half of it written.
type aheadFile struct {
	vfs.File
	off, alloc int64 // the end written, and allocated
	reserve    int64
}

// walReserve is what a log keeps allocated ahead: the commits that go in
// on a full file system (removals, metadata) are small.
const walReserve = 4 << 20

// manifestReserve is what a manifest keeps allocated ahead: an edit
// (a flush, a compaction) is a few hundred bytes, and a new manifest
// starts with one edit that lists every table (about 100 bytes each).
const manifestReserve = 1 << 20

func (f *aheadFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	f.off += int64(n)
	if f.off+f.reserve/2 > f.alloc {
		f.allocate()
	}
	return n, err
}

func (f *aheadFile) allocate() {
	if f.File.Preallocate(f.off, f.reserve) == nil {
		f.alloc = f.off + f.reserve
	}
}

// walFile is a write-ahead log: synced only when a caller asked for
// stable storage (see durableFS).
type walFile struct {
	aheadFile
	fs *durableFS
}

func (f *walFile) Sync() error {
	if f.fs.hard.Load() > 0 {
		return f.File.Sync()
	}
	return nil
}

func (f *walFile) SyncData() error { return f.Sync() }

// Preallocate does nothing: Pebble reserves 110% of the memtable size (70
// MB by default) ahead of each log, which a host of many mostly idle
// workspaces pays in full for every one of them, and buys nothing
// measurable here (BenchmarkAppendSync: the same time per synced append
// without it). aheadFile keeps walReserve instead.
func (f *walFile) Preallocate(offset, length int64) error { return nil }

func (f *walFile) SyncTo(length int64) (bool, error) {
	if f.fs.hard.Load() > 0 {
		return f.File.SyncTo(length)
	}
	return false, nil
}

func (f *walFile) Close() error {
	err := f.File.Sync()
	if cerr := f.File.Close(); err == nil {
		err = cerr
	}
	return err
}

// SyncTree makes everything under dir durable: each file's data and each
// directory's entries, with the syncs running in parallel (the file system
// can commit them together). A NoSync store is durable after Close and
// SyncTree of its directory.
func SyncTree(dir string) error {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || d.Type().IsRegular() {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	var g errgroup.Group
	g.SetLimit(16)
	for _, p := range paths {
		g.Go(func() error {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			err = f.Sync()
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			return err
		})
	}
	return g.Wait()
}
