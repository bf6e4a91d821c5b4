package kv

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/cockroachdb/pebble/v2/vfs"
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
}

func isWAL(name string) bool { return strings.HasSuffix(name, ".log") }

func (d *durableFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err == nil && d.noSync {
		return noSyncFile{f}, nil
	}
	if err != nil || !isWAL(name) {
		return f, err
	}
	return &walFile{File: f, fs: d}, nil
}

func (d *durableFS) OpenDir(name string) (vfs.File, error) {
	f, err := d.FS.OpenDir(name)
	if err == nil && d.noSync {
		return noSyncFile{f}, nil
	}
	return f, err
}

// noSyncFile is a file of a NoSync store.
type noSyncFile struct{ vfs.File }

func (noSyncFile) Sync() error                { return nil }
func (noSyncFile) SyncData() error            { return nil }
func (noSyncFile) SyncTo(int64) (bool, error) { return true, nil }

func (d *durableFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := d.FS.Create(name, c)
	return d.wrap(name, f, err)
}

func (d *durableFS) ReuseForWrite(old, name string, c vfs.DiskWriteCategory) (vfs.File, error) {
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

type walFile struct {
	vfs.File
	fs *durableFS
}

func (f *walFile) Sync() error {
	if f.fs.hard.Load() > 0 {
		return f.File.Sync()
	}
	return nil
}

func (f *walFile) SyncData() error { return f.Sync() }

// Preallocate does nothing: a log grows as it is written. Pebble reserves
// 110% of the memtable size (70 MB by default) ahead of each log, which a
// host of many mostly idle workspaces pays in full for every one of them,
// and buys nothing measurable here (BenchmarkAppendSync: the same time per
// synced append without it).
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
