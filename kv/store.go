package kv

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// FormatVersion is the version of the key layout this package writes. A
// store of a newer version is refused; older versions are upgraded on open.
//
//	1: the first layout
//	2: attributes gain flags (FlagRemote) and inodes an origin record; a
//	   version 1 store needs no rewrite (its attributes decode as flags 0)
//	3: big files keep their data in blobs/ (FlagBlob); older stores have
//	   none and need no rewrite
//	4: blobs pinned for passthrough writes carry FlagWriting (their size
//	   is taken from the blob after a crash); older stores have none
//	5: inodes made without extended attributes carry FlagNoXattrs, and are
//	   deleted without a scan of their keys; older inodes have none and are
//	   scanned as before
const FormatVersion = 5

// RootIno is the inode number of the root directory.
const RootIno = 1

// ChunkSize is the size of the data chunks that file contents are split into.
const ChunkSize = 64 << 10

// MaxNameLen is the longest file name, in bytes.
const MaxNameLen = 255

// MaxFileSize is the largest file size (8 EiB less a chunk; Linux's own
// limit for 64-bit offsets).
const MaxFileSize = 1<<63 - ChunkSize

// ErrLocked is returned by Open when another process has the store open.
var ErrLocked = errors.New("store is in use by another process")

// ErrNotStore is returned by Open for a directory that holds something else.
var ErrNotStore = errors.New("not a computerfs store")

// ErrNewerFormat is returned by Open for a store written by a newer version.
var ErrNewerFormat = errors.New("store has a newer format version")

// Options configure Open. The zero value is usable.
type Options struct {
	// CacheSize is the size of Pebble's block cache in bytes (default 16 MiB).
	CacheSize int64
	// MemTableSize is the largest size of one Pebble memtable (default 64
	// MiB; memtables start small and grow only while writes keep coming).
	MemTableSize uint64
	// FlushInterval bounds how long a completed operation can stay in the
	// daemon's memory only (default 100 ms).
	FlushInterval time.Duration
	// SyncInterval bounds how long a completed operation can stay off stable
	// storage (default 5 s).
	SyncInterval time.Duration
	// Logger receives Pebble's messages and the store's own (default slog.Default()).
	Logger *slog.Logger
	// NoJournal keeps no journal of changes: for an import into a new
	// store (what a source holds is not a change) and for measuring the
	// journal's cost.
	NoJournal bool
	// NoSync syncs nothing to stable storage, not even what Pebble syncs
	// to keep its files consistent: for a store that is being built and
	// is thrown away if the build stops (an import's staging directory).
	// Whoever keeps it must make every file under its directory durable
	// after Close (SyncTree).
	NoSync bool
	// BlobThreshold is the size past which a write moves a file's data
	// out of Pebble into a file of its own (default DefaultBlobThreshold;
	// negative: never).
	BlobThreshold int64
	// MinFree is the free space the store keeps on its file system: below
	// it, changes that add data or names fail with ENOSPC (see space.go;
	// default twice the memtable size plus 64 MiB; negative: none).
	MinFree int64
	// Ballast is the size of the file the store keeps allocated under its
	// directory and removes when its file system is full, so that Pebble
	// can still write (see space.go; default twice MemTableSize plus 32 MiB:
	// room to write the memtables out when the store opens again;
	// negative: none).
	Ballast int64
	// Quota bounds the workspace's logical size: file data, names, inodes,
	// extended attributes, and the journal's and the audit's records
	// (see usage.go; 0: none).
	Quota int64
	// Blobs, if set, supplies the blob files the store directory lacks
	// (a lazy resume: see BlobSource).
	Blobs BlobSource
}

// Store is an open computerfs store. Its methods are safe for concurrent use.
type Store struct {
	dir    string
	db     *pebble.DB
	fs     *durableFS
	lock   *os.File
	log    *slog.Logger
	closed atomic.Bool
	owners ownersPtr // see owners.go
	// pendingCkpt are the checkpoints taken whose finish has not put
	// them under their names yet, by SEQ.
	pendingCkpt struct {
		sync.Mutex
		m map[uint64]CheckpointInfo
	}

	nsMu     sync.Mutex    // serialises namespace operations
	dirMoves atomic.Uint64 // see DirMoves
	nextIno  uint64        // guarded by nsMu
	inodes   atomic.Int64
	stripes  [64]sync.Mutex
	attrs    *attrCache
	space    *spaceGuard
	// checkTails (tests) compares every tail the cache knows with the
	// store before an append relies on it.
	checkTails bool

	blobs         blobStore
	blobThreshold uint64
	pins          pins // blobs open for passthrough I/O

	// inUse reports whether something outside the store (the kernel) still
	// references an inode, so that an unlinked inode must be kept as an orphan.
	inUse atomic.Pointer[func(ino uint64, isDir bool) bool]
	// orphans are the inodes without names kept for their users; guarded
	// by nsMu. Forget of any other inode has nothing to do.
	orphans map[uint64]struct{}

	fetcher atomic.Pointer[Fetcher]
	fetchState
	journalState
	auditState

	cacheKeeper
	usageState
	lastNoSpaceLog atomic.Int64 // unix ns: background errors for want of space are logged once in 10 s
	dirty          atomic.Bool  // operations committed since the last flush
	unsynced       atomic.Bool  // operations committed since the last sync
	stop           chan struct{}
	flusherWG      sync.WaitGroup

	opts   Options    // as Open completed them, for the reopen after a rollback
	gate   gate       // every exported method passes it (gate.go)
	rollMu sync.Mutex // one rollback at a time
	cuts   cutState   // checkpoints cut and not yet materialized (ckptcut.go)
}

// Open opens the store in dir, creating a new empty one if dir does not
// exist or is empty. It fails with ErrLocked if another process has it
// open, ErrNotStore if dir holds something else and ErrNewerFormat if the
// store was written by a newer computerfs.
func Open(dir string, opts Options) (*Store, error) {
	if opts.CacheSize <= 0 {
		opts.CacheSize = 16 << 20
	}
	if opts.MemTableSize == 0 {
		opts.MemTableSize = 64 << 20
	}
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = 100 * time.Millisecond
	}
	if opts.SyncInterval <= 0 {
		opts.SyncInterval = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	// Absolute, so that the name the mount carries (and the daemon finds
	// its own dead mounts by) does not depend on the working directory.
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	if err := finishRollback(dir); err != nil {
		return nil, err
	}
	fresh, err := checkStoreDir(dir)
	if err != nil {
		return nil, err
	}
	if !fresh {
		if err := checkOpenSpace(dir); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create store: %w", err)
	}
	if err := privateDir(dir); err != nil {
		return nil, err
	}
	lock, err := lockStore(dir)
	if err != nil {
		return nil, err
	}
	s := &Store{dir: dir, lock: lock, log: opts.Logger, stop: make(chan struct{}), orphans: make(map[uint64]struct{}), attrs: newAttrCache(attrCacheSize), opts: opts}
	s.quotaHits = make(chan struct{}, 1)
	s.blobs = blobStore{dir: filepath.Join(dir, "blobs"), noSync: opts.NoSync, source: opts.Blobs, open: make(map[uint64]*openBlob), dirty: make(map[uint64]struct{})}
	s.pins.m = make(map[uint64]*pin)
	s.space = newSpaceGuard(dir, opts, s.log)
	switch {
	case opts.BlobThreshold == 0:
		s.blobThreshold = DefaultBlobThreshold
	case opts.BlobThreshold < 0:
		s.blobThreshold = math.MaxUint64
	default:
		s.blobThreshold = uint64(opts.BlobThreshold)
	}
	if err := os.MkdirAll(s.blobs.dir, 0o700); err != nil {
		lock.Close()
		return nil, fmt.Errorf("create store: %w", err)
	}
	s.SetQuota(opts.Quota)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.journalOff = opts.NoJournal
	s.fetches = make(map[uint64]*fetchCall)
	if err := s.openDB(opts, fresh); err != nil {
		lock.Close()
		return nil, err
	}
	if err := s.cleanSnapshots(); err != nil {
		s.db.Close()
		lock.Close()
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	s.flusherWG.Add(1)
	go s.flusher(opts.FlushInterval, opts.SyncInterval)
	return s, nil
}

// CheckDir fails with ErrNotStore if dir exists and holds something other
// than a store. It does not open the store.
func CheckDir(dir string) error {
	_, err := checkStoreDir(dir)
	return err
}

// IsStore tells whether dir holds a store (Open would open it rather
// than make a new one); an error if it holds something else.
func IsStore(dir string) (bool, error) {
	fresh, err := checkStoreDir(dir)
	return err == nil && !fresh, err
}

// checkStoreDir tells whether dir is to become a new store, and refuses a
// directory that holds something other than a store.
func checkStoreDir(dir string) (fresh bool, err error) {
	st, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("store %s: %w", dir, err)
	}
	if !st.IsDir() {
		return false, fmt.Errorf("store %s: %w (not a directory)", dir, ErrNotStore)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, fmt.Errorf("store %s: %w", dir, err)
	}
	empty := true
	for _, e := range entries {
		// The lock file, the daemon's log and the (empty) blobs directory
		// may come before the database.
		if n := e.Name(); n != "lock" && n != "daemon.log" && n != "blobs" && n != ballastName && n != spareLogName && n != spareManifestName {
			empty = false
		}
	}
	if empty {
		return true, nil
	}
	if _, err := os.Lstat(filepath.Join(dir, rollbackNew)); err == nil {
		return false, nil // a rollback that Open finishes (finishRollback)
	}
	if dbEntries, err := os.ReadDir(filepath.Join(dir, "db")); err == nil {
		for _, e := range dbEntries {
			n := e.Name()
			if n == "CURRENT" || strings.HasPrefix(n, "MANIFEST-") || strings.HasPrefix(n, "marker.manifest.") {
				return false, nil // a Pebble database: loadMeta checks it is ours
			}
		}
		// A db directory without a manifest: a creation that was
		// interrupted before Pebble wrote anything lasting. Start again.
		return true, nil
	}
	return false, fmt.Errorf("store %s: %w (the directory is not empty and has no db/)", dir, ErrNotStore)
}

// lockStore takes an exclusive flock on dir/lock and writes our pid into it.
func lockStore(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock store: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := io.ReadAll(f)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := strings.TrimSpace(string(b))
			if holder == "" {
				holder = "unknown"
			}
			return nil, fmt.Errorf("store %s: %w (pid %s)", dir, ErrLocked, holder)
		}
		return nil, fmt.Errorf("lock store: %w", err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

func (s *Store) openDB(opts Options, fresh bool) error {
	// A write of Pebble's that finds the file system full removes the
	// ballast and is tried again (space.go).
	s.fs = &durableFS{FS: vfs.OnDiskFull(pebbleFS(vfs.Default), func() { s.space.diskFull() }), noSync: opts.NoSync}
	s.fs.dbDir = filepath.Join(s.dir, "db")
	s.fs.setSpares(s.dir)
	if s.space != nil {
		s.space.spare = s.fs
	}
	// Pebble charges its memtables to the block cache; the keeper gives
	// the cache room for them (see cacheKeeper).
	cache := pebble.NewCache(opts.CacheSize + memtableHeadroom(opts.MemTableSize))
	defer cache.Unref()
	s.keepCache(cache, memtableHeadroom(opts.MemTableSize))
	po := &pebble.Options{
		FS:                 s.fs,
		Cache:              cache,
		MemTableSize:       opts.MemTableSize,
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             pebbleLogger{s.log},
		ErrorIfNotExists:   !fresh,
		// Two background jobs: a flush and a compaction can run together.
		CompactionConcurrencyRange: func() (int, int) { return 1, 2 },
		MaxManifestFileSize:        32 << 10, // see manifestRotateAt
		// Memtables are made and freed around flushes.
		EventListener: &pebble.EventListener{
			FlushBegin: func(pebble.FlushInfo) {
				s.cuts.flushes.Add(1) // before the flush's tables join the version (ckptcut.go)
				s.memtablesChanged()
			},
			FlushEnd: func(pebble.FlushInfo) { s.memtablesChanged() },
			// A flush or compaction that failed is tried again at once;
			// one that failed for want of space would spin.
			BackgroundError: s.backgroundError,
		},
	}
	// No block compression: file data is often compressed already, and on
	// a small machine the CPU is worth more than the disk space.
	po.ApplyCompressionSettings(func() pebble.DBCompressionSettings { return pebble.DBCompressionNone })
	// Bloom filters: most point reads (LOOKUP of a name that does not
	// exist yet, the kernel's security.capability question before every
	// write, a chunk past the end) miss, and without a filter each miss
	// searches every table that might hold the key.
	for i := range po.Levels {
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		po.Levels[i].FilterType = pebble.TableFilter
	}
	db, err := pebble.Open(filepath.Join(s.dir, "db"), po)
	if err != nil {
		if errors.Is(err, pebble.ErrDBDoesNotExist) {
			return fmt.Errorf("store %s: %w (db/ has no database)", s.dir, ErrNotStore)
		}
		return fmt.Errorf("open store %s: %w", s.dir, err)
	}
	s.db = db
	s.space.openBallast()
	s.adjustCache()
	if err := s.loadMeta(); err != nil {
		db.Close()
		return err
	}
	return nil
}

// loadMeta checks the format version, creates the root directory of a new
// store and removes orphans left by a crash.
func (s *Store) loadMeta() error {
	v, err := s.getUint64(keyFormat)
	switch {
	case errors.Is(err, ErrNotFound):
		// A database with no keys at all is a new store, or one whose
		// creation stopped before its first batch (which writes the format
		// with the root). Anything else is not ours: leave it alone.
		if empty, err := s.isEmpty(); err != nil {
			return err
		} else if empty {
			if err := s.initialize(); err != nil {
				return err
			}
			return s.loadJournal()
		}
		return fmt.Errorf("store %s: %w (a database without a format version)", s.dir, ErrNotStore)
	case err != nil:
		return err
	case v > FormatVersion:
		return fmt.Errorf("store %s: %w (%d; this computerfs reads up to %d)", s.dir, ErrNewerFormat, v, FormatVersion)
	case v < FormatVersion:
		if err := s.db.Set(keyFormat, u64(FormatVersion), pebble.Sync); err != nil {
			return fmt.Errorf("store %s: upgrade from format %d: %w", s.dir, v, err)
		}
		s.log.Info("store upgraded", "from", v, "to", FormatVersion)
	}
	if s.nextIno, err = s.getUint64(keyNextIno); err != nil {
		return fmt.Errorf("store %s: next inode: %w", s.dir, err)
	}
	n, err := s.getUint64(keyInodes)
	if err != nil {
		return fmt.Errorf("store %s: inode count: %w", s.dir, err)
	}
	if err := s.loadOwners(); err != nil {
		return fmt.Errorf("store %s: %w", s.dir, err)
	}
	s.inodes.Store(int64(n))
	if err := s.loadJournal(); err != nil {
		return err
	}
	if err := s.loadUsage(); err != nil {
		return err
	}
	if err := s.purgeOrphans(); err != nil {
		return err
	}
	return s.gcBlobs()
}

func (s *Store) isEmpty() (bool, error) {
	it, err := s.db.NewIter(nil)
	if err != nil {
		return false, err
	}
	empty := !it.First()
	return empty, it.Close()
}

func (s *Store) initialize() error {
	t := now()
	root := Attr{Ino: RootIno, Mode: S_IFDIR | 0o755, Nlink: 2, Atime: t, Mtime: t, Ctime: t, Btime: t}
	b := s.db.NewBatch()
	defer b.Close()
	b.Set(attrKey(RootIno), root.encode(), nil)
	b.Set(keyNextIno, u64(RootIno+1), nil)
	b.Set(keyInodes, u64(1), nil)
	b.Set(keyUsage, u64(inodeCost), nil)
	b.Set(keyJournalUsage, u64(0), nil)
	b.Set(keyAuditUsage, u64(0), nil)
	// The format version goes last in the batch only for readability: the
	// batch is atomic, so a store either has all of these or none.
	b.Set(keyFormat, u64(FormatVersion), nil)
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("initialize store: %w", err)
	}
	s.nextIno = RootIno + 1
	s.inodes.Store(1)
	s.used.Store(inodeCost)
	return nil
}

// purgeOrphans deletes inodes that were unlinked while open when the
// previous process stopped: nothing can reference them any more.
func (s *Store) purgeOrphans() error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{pfxOrphan}, UpperBound: []byte{pfxOrphan + 1}})
	if err != nil {
		return err
	}
	var orphans []uint64
	for it.First(); it.Valid(); it.Next() {
		orphans = append(orphans, binary.BigEndian.Uint64(it.Key()[1:]))
	}
	if err := it.Close(); err != nil {
		return err
	}
	for _, ino := range orphans {
		b := s.db.NewBatch()
		a, err := s.storedAttr(ino) // no pins yet; storedAttr passes no gate (a rollback's reopen)
		if err == nil || err == ErrNotFound {
			err = s.deleteInode(b, ino, &a)
		}
		b.Delete(orphanKey(ino), nil)
		if err == nil {
			err = s.commit(b)
		}
		b.Close()
		if err == nil && a.Flags&FlagBlob != 0 {
			s.dropBlob(ino)
		}
		if err != nil {
			return fmt.Errorf("purge orphan %d: %w", ino, err)
		}
	}
	if len(orphans) > 0 {
		s.log.Info("removed orphaned inodes", "count", len(orphans))
	}
	return nil
}

// SetInUse installs the function that tells whether an inode (a directory
// or not) is still referenced from outside (by the kernel). An inode whose
// last name is removed while in use stays as an orphan until Forget.
func (s *Store) SetInUse(f func(ino uint64, isDir bool) bool) { s.inUse.Store(&f) }

func (s *Store) isInUse(ino uint64, isDir bool) bool {
	if f := s.inUse.Load(); f != nil && *f != nil {
		return (*f)(ino, isDir)
	}
	return false
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// Close syncs and closes the store. It is safe to call more than once.
func (s *Store) Close() error {
	s.enter()
	defer s.leave()
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	close(s.stop)
	s.cancel()
	s.flusherWG.Wait()
	s.materializeAll() // the checkpoints cut and not yet written (ckptcut.go)
	s.releaseCache()
	err := s.unpinAll()
	if ferr := s.foldUsage(false); err == nil { // the next open has nothing to fold
		err = ferr
	}
	if serr := s.Sync(); err == nil {
		err = serr
	}
	flushed := false
	if s.fs.noSync && err == nil {
		// An import's staging store: everything into tables, so that
		// the logs Pebble keeps to recycle can go (dropOldLogs).
		err = s.db.Flush()
		flushed = err == nil
	}
	s.blobs.closeAll()
	if cerr := s.db.Close(); err == nil {
		err = cerr
	}
	if flushed && err == nil {
		err = dropOldLogs(filepath.Join(s.dir, "db"))
	}
	s.lock.Close()
	return err
}

// dropOldLogs removes, from the directory of a Pebble that was flushed
// and then closed, every write-ahead log but the newest: their content is
// in tables and Pebble keeps them only to reuse them as new logs (up to
// three, each as large as a memtable: 70 MB of a 161 MB import was in
// them until the first open removed them). The newest is the log of the
// memtable that was empty at the flush (Pebble numbers its logs upwards,
// and a reused one takes the new number): it holds no change, but a
// reused one still has an old log's bytes (up to a memtable's worth), so
// it is cut to nothing, as a log just made is.
func dropOldLogs(dir string) error {
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(logs) < 2 {
		return err
	}
	newest, num := "", uint64(0)
	for _, l := range logs {
		n, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(l), ".log"), 10, 64)
		if err != nil {
			return nil // not a name Pebble gives: leave them all
		}
		if newest == "" || n > num {
			newest, num = l, n
		}
	}
	for _, l := range logs {
		if l != newest {
			if err := os.Remove(l); err != nil {
				return err
			}
		}
	}
	return os.Truncate(newest, 0)
}

// WriteTables writes what the memtables hold into table files, so that the
// next Open has no log to replay. An import calls it last: Pebble leaves
// small memtables unflushed until they add up to a full one, and the
// daemon that mounts the new store would replay the whole import's log
// (and write the tables) before it answers.
//
// It fails with ErrNoSpace while the store is low on space: the flush
// starts a new log, and Pebble cannot survive a log it cannot write.
func (s *Store) WriteTables() error {
	s.enter()
	defer s.leave()
	if err := s.space.check(0); err != nil {
		return err
	}
	if err := s.foldUsage(false); err != nil { // the next open has nothing to fold
		return err
	}
	return s.db.Flush()
}

// Flush hands every committed operation to the operating system, so that it
// survives a crash of this process.
func (s *Store) Flush() error {
	s.enter()
	defer s.leave()
	if !s.dirty.Load() {
		return nil
	}
	return s.flushNow()
}

// flushNow is Flush without the shortcut: when it returns, every batch
// committed before it was called is with the operating system, even if
// another Flush is under way.
func (s *Store) flushNow() error {
	s.dirty.Store(false)
	return s.db.LogData(nil, pebble.Sync)
}

// Sync writes every committed operation to stable storage.
func (s *Store) Sync() error {
	s.enter()
	defer s.leave()
	s.fs.hard.Add(1)
	defer s.fs.hard.Add(-1)
	s.dirty.Store(false)
	s.unsynced.Store(false)
	// Blobs first: a size that Pebble makes durable must not point past
	// data that is not.
	s.writingPinned()
	if err := s.blobs.sync(); err != nil {
		s.unsynced.Store(true)
		return err
	}
	return s.db.LogData(nil, pebble.Sync)
}

func (s *Store) flusher(flushEvery, syncEvery time.Duration) {
	defer s.flusherWG.Done()
	tick := time.NewTicker(flushEvery)
	defer tick.Stop()
	lastSync := time.Now()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
		s.enter() // against a rollback's swap of the database (gate.go)
		if s.cacheChecks.Load() > 0 {
			s.cacheChecks.Add(-1)
			s.adjustCache()
		}
		var err error
		if s.unsynced.Load() && time.Since(lastSync) >= syncEvery {
			err = s.Sync()
			lastSync = time.Now()
		} else {
			err = s.Flush()
		}
		s.leave()
		if err != nil {
			s.log.Error("store: background flush failed", "err", err)
		}
	}
}

// commit applies one operation's batch. It does not wait for the disk.
func (s *Store) commit(b *pebble.Batch) error {
	usage, err := s.accountAttrs(b)
	if err != nil {
		return err
	}
	return s.commitAccounted(b, usage)
}

// commitAccounted is commit for a batch whose change of the count
// accountAttrs has found already.
func (s *Store) commitAccounted(b *pebble.Batch, usage usage) error {
	if s.space != nil && s.space.low.Load() {
		if err := s.space.full(); err != nil {
			return err
		}
	}
	s.attrs.begin(b)
	s.usageMu.RLock() // against foldUsage (usage.go)
	err := b.Commit(pebble.NoSync)
	if err == nil {
		s.addUsage(usage)
	}
	s.usageMu.RUnlock()
	if err != nil {
		s.attrs.aborted()
		return fmt.Errorf("commit: %w", err)
	}
	s.attrs.committed(b)
	s.dirty.Store(true)
	s.unsynced.Store(true)
	if n := s.ops.Load(); n >= foldEvery && s.ops.CompareAndSwap(n, 0) {
		// Here, after a change, rather than in the background: an idle
		// store writes nothing.
		if err := s.foldUsage(true); err != nil {
			s.log.Error("store: folding the usage count failed", "err", err)
		}
	}
	return nil
}

func (s *Store) stripe(ino uint64) *sync.Mutex { return &s.stripes[ino%uint64(len(s.stripes))] }

// lockInodes locks the stripes of the given inodes in a fixed order and
// returns the function that unlocks them.
func (s *Store) lockInodes(inos ...uint64) func() {
	var idx []int
	for _, ino := range inos {
		if ino == 0 {
			continue
		}
		i := int(ino % uint64(len(s.stripes)))
		dup := false
		for _, j := range idx {
			dup = dup || j == i
		}
		if !dup {
			idx = append(idx, i)
		}
	}
	for i := 1; i < len(idx); i++ { // insertion sort: at most four entries
		for j := i; j > 0 && idx[j] < idx[j-1]; j-- {
			idx[j], idx[j-1] = idx[j-1], idx[j]
		}
	}
	for _, i := range idx {
		s.stripes[i].Lock()
	}
	return func() {
		for _, i := range idx {
			s.stripes[i].Unlock()
		}
	}
}

// view calls fn with key's value, which is valid only during the call, or
// returns ErrNotFound.
func (s *Store) view(key []byte, fn func(v []byte) error) error {
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return ErrNotFound
	}
	if err != nil {
		return err
	}
	defer closer.Close()
	return fn(v)
}

// get returns a copy of key's value.
func (s *Store) get(key []byte) (out []byte, err error) {
	err = s.view(key, func(v []byte) error {
		out = append([]byte(nil), v...)
		return nil
	})
	return out, err
}

// valueLen returns the length of key's value, without copying it.
func (s *Store) valueLen(key []byte) (n int, err error) {
	err = s.view(key, func(v []byte) error {
		n = len(v)
		return nil
	})
	return n, err
}

func (s *Store) getUint64(key []byte) (uint64, error) {
	v, err := s.get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, corrupt("%q holds %d bytes", key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// pebbleFS is the file system under the store's database: the disk's.
// Tests put a fault injector there.
var pebbleFS = func(fs vfs.FS) vfs.FS { return fs }

type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug("pebble: " + fmt.Sprintf(format, args...))
}
func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error("pebble: " + fmt.Sprintf(format, args...))
}
func (p pebbleLogger) Fatalf(format string, args ...any) {
	p.l.Error("pebble: fatal: " + fmt.Sprintf(format, args...))
	panic(fmt.Sprintf(format, args...))
}

// Metrics returns Pebble's metrics report (levels, flushes, compactions,
// write amplification), for diagnostics.
func (s *Store) Metrics() string {
	s.enter()
	defer s.leave()
	return s.db.Metrics().String()
}

// privateDir makes the store directory its owner's alone (mode 0700): it
// holds every file of the workspace, denied ones included, raw (Pebble's
// tables, blobs) and the control socket. A directory made beforehand
// with a wider mode (0755 under /opt or /etc, which every sandbox binds
// from the host, or anywhere other users reach) would show them to
// every agent and user of the host.
func privateDir(dir string) error {
	info, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if info.Mode().Perm()&0o077 == 0 {
		return nil
	}
	if err := os.Chmod(dir, info.Mode().Perm()&0o700); err != nil {
		return fmt.Errorf("store %s is open to other users (%v), and making it private failed: %w", dir, info.Mode().Perm(), err)
	}
	return nil
}
