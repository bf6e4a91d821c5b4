package kv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"golang.org/x/sys/unix"
)

// Rollback puts a store back to one of its snapshots. The store's content
// becomes the snapshot's; what describes the store's history and its
// place in the world stays the store's own:
//
//   - the snapshot's: every inode (attributes, names, data, extended
//     attributes, origins: what the source held for each file when it was
//     last synced before the snapshot), the blobs, the inode count and the
//     files' part of the usage;
//   - the store's: the journal (its sequence goes on, never back), the
//     audit, the meta values of the layers above (spec, sync cursors and
//     manifests: what the remotes hold did not go back), the journal's
//     and the audit's parts of the usage, the snapshots themselves, the
//     lock and the directory (so the agent identity, which the registry
//     keys by it), the owner map (owners.go), and the next inode number (the larger of the two, so a
//     number once given is never given again);
//   - a JRollback record ends the journal: path "/", cut (something at or
//     under / changed), actor entry "rollback", request the snapshot's
//     name. Sync back takes it as a change anywhere and compares every
//     file and every object of its manifest, so what differs from the
//     remote is written back (a file as in the snapshot, one made since
//     deleted) and nothing else.
//
// The new database is built from a fork of the snapshot (links, as
// ForkSnapshot) under snapshots/.tmp-.rollback, with the store's journal,
// audit and meta copied into it, and made durable; it is then renamed to
// .rollback-new, the commit point, and db/ and blobs/ are swapped for
// its own (the old ones through .rollback-old). A crash before the commit
// point leaves the store as it was (the .tmp- directory goes at the next
// open); after it, the next Open finishes the swap (finishRollback).

// rollbackNew and rollbackOld are where a rollback puts the new database
// and the old one while it swaps them.
const (
	rollbackNew = ".rollback-new"
	rollbackOld = ".rollback-old"
	rollbackTmp = ".tmp-.rollback" // under snapshots/; no snapshot name starts with '.'
)

// rollbackBatch is the size of the batches that copy the store's history
// into the new database (a variable for the tests).
var rollbackBatch = 4 << 20

// RollbackInfo describes a rollback.
type RollbackInfo struct {
	Name string `json:"name"` // the snapshot
	Seq  uint64 `json:"seq"`  // the journal record of the rollback
	// Held is how long an open store's rollback held every call off.
	Held time.Duration `json:"held_ns,omitempty"`
}

// Rollback puts the store in dir, which must not be open, back to its
// snapshot name (see above). opts are those Open takes; the store is
// closed when it returns.
func Rollback(dir, name string, opts Options) (RollbackInfo, error) {
	snap, err := SnapshotDir(dir, name)
	if err != nil {
		return RollbackInfo{}, err
	}
	live, err := Open(dir, opts)
	if err != nil {
		return RollbackInfo{}, err
	}
	// The lock is kept, through a second descriptor of its open file,
	// from the close of the live store to the end of the swap.
	fd, err := unix.Dup(int(live.lock.Fd()))
	if err != nil {
		live.Close()
		return RollbackInfo{}, fmt.Errorf("rollback: %w", err)
	}
	lock := os.NewFile(uintptr(fd), "lock")
	defer lock.Close()
	info, err := live.buildRollback(snap, name)
	if cerr := live.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.RemoveAll(filepath.Join(live.dir, snapshotsDir, rollbackTmp))
		return RollbackInfo{}, fmt.Errorf("rollback to %s: %w", name, err)
	}
	tmp := filepath.Join(live.dir, snapshotsDir, rollbackTmp)
	if err := os.Rename(tmp, filepath.Join(live.dir, rollbackNew)); err != nil {
		os.RemoveAll(tmp)
		return RollbackInfo{}, fmt.Errorf("rollback to %s: %w", name, err)
	}
	if err := syncDir(live.dir); err != nil {
		return RollbackInfo{}, fmt.Errorf("rollback to %s: %w", name, err)
	}
	if err := swapRollback(live.dir, true); err != nil {
		return RollbackInfo{}, fmt.Errorf("rollback to %s (the next open finishes it): %w", name, err)
	}
	return info, nil
}

// buildRollback makes the new database of a rollback to the snapshot in
// snap under snapshots/.tmp-.rollback, durable. Nothing else uses s.
func (s *Store) buildRollback(snap, name string) (RollbackInfo, error) {
	tmp := filepath.Join(s.dir, snapshotsDir, rollbackTmp)
	if err := os.RemoveAll(tmp); err != nil {
		return RollbackInfo{}, err
	}
	if err := linkTree(snap, tmp); err != nil {
		return RollbackInfo{}, err
	}
	ns, err := Open(tmp, Options{Logger: s.log, MinFree: -1, Ballast: -1, NoJournal: true})
	if err != nil {
		return RollbackInfo{}, err
	}
	info, err := ns.takeHistory(s, name)
	if cerr := ns.Close(); err == nil {
		err = cerr
	}
	return info, err
}

// takeHistory replaces ns's journal, audit and meta values by those of
// the store s, keeps the larger next inode number, and appends the
// rollback record.
func (ns *Store) takeHistory(s *Store, name string) (RollbackInfo, error) {
	b := ns.db.NewBatch()
	defer func() { b.Close() }()
	userMeta := userMetaKey("")
	ranges := [][2][]byte{
		{{pfxJournal}, {pfxJournal + 1}},
		{{pfxAudit}, {pfxAudit + 1}},
		{userMeta, prefixEnd(userMeta)},
		{keyOwners, prefixEnd(keyOwners)},
	}
	for _, r := range ranges {
		if err := b.DeleteRange(r[0], r[1], nil); err != nil {
			return RollbackInfo{}, err
		}
	}
	for _, r := range ranges {
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: r[0], UpperBound: r[1]})
		if err != nil {
			return RollbackInfo{}, err
		}
		for it.First(); it.Valid(); it.Next() {
			if err := b.Set(it.Key(), it.Value(), nil); err != nil {
				it.Close()
				return RollbackInfo{}, err
			}
			if b.Len() >= rollbackBatch {
				if err := b.Commit(pebble.NoSync); err != nil {
					it.Close()
					return RollbackInfo{}, err
				}
				b.Close()
				b = ns.db.NewBatch()
			}
		}
		if err := it.Close(); err != nil {
			return RollbackInfo{}, err
		}
	}
	ns.nextIno = max(ns.nextIno, s.nextIno)
	b.Set(keyNextIno, u64(ns.nextIno), nil)
	rec := Record{Seq: s.jnext, Time: time.Now().UnixNano(), Op: JRollback, Path: "/", PathCut: true,
		Actor: Actor{Entry: "rollback", Request: name}}
	val := rec.encode()
	b.Set(journalKey(rec.Seq), val, nil)
	u := s.usageNow()
	journal := u.journal + recordBytes(9, len(val))
	b.Set(keyJournalUsage, u64(uint64(journal)), nil)
	b.Set(keyAuditUsage, u64(uint64(u.audit)), nil)
	if err := b.Commit(pebble.Sync); err != nil {
		return RollbackInfo{}, err
	}
	ns.usedJ.Store(journal)
	ns.usedA.Store(u.audit)
	return RollbackInfo{Name: name, Seq: rec.Seq}, nil
}

// swapRollback puts the new database and blobs of a committed rollback
// (dir/.rollback-new) in place of the store's, and removes the old ones
// (dir/.rollback-old) if removeOld: an open store's rollback removes them
// once calls go on, and the next open if it could not.
// Each step can be done again after a crash: a part is moved to
// .rollback-old only while the new one waits, and then the new one in.
func swapRollback(dir string, removeOld bool) error {
	newDir, oldDir := filepath.Join(dir, rollbackNew), filepath.Join(dir, rollbackOld)
	if err := os.MkdirAll(oldDir, 0o700); err != nil {
		return err
	}
	for _, sub := range []string{"db", "blobs"} {
		from := filepath.Join(newDir, sub)
		if _, err := os.Lstat(from); errors.Is(err, os.ErrNotExist) {
			continue // moved in already
		}
		cur := filepath.Join(dir, sub)
		if _, err := os.Lstat(cur); err == nil {
			if err := os.Rename(cur, filepath.Join(oldDir, sub)); err != nil {
				return err
			}
		}
		if err := os.Rename(from, cur); err != nil {
			return err
		}
	}
	if err := syncDir(dir); err != nil {
		return err
	}
	if err := os.RemoveAll(newDir); err != nil || !removeOld {
		return err
	}
	return os.RemoveAll(oldDir)
}

// finishRollback finishes, at open, a rollback that a crash stopped after
// its commit point, and removes what one left behind.
func finishRollback(dir string) error {
	_, errNew := os.Lstat(filepath.Join(dir, rollbackNew))
	_, errOld := os.Lstat(filepath.Join(dir, rollbackOld))
	if errNew != nil && errOld != nil {
		return nil
	}
	lock, err := lockStore(dir)
	if err != nil {
		return err
	}
	defer lock.Close()
	if _, err := os.Lstat(filepath.Join(dir, rollbackNew)); err == nil {
		if err := swapRollback(dir, true); err != nil {
			return fmt.Errorf("store %s: finish a rollback: %w", dir, err)
		}
		return nil
	}
	return os.RemoveAll(filepath.Join(dir, rollbackOld))
}

// ErrRollbackFailed wraps the error of a rollback of an open store that
// failed after its commit point and could not open the new database: the
// store keeps every caller waiting, and the next Open (a restart of the
// daemon) finishes the rollback.
var ErrRollbackFailed = errors.New("the store could not be opened again after its rollback; restart it (the next open finishes the rollback)")

// Rollback puts the open store back to its snapshot name while it is in
// use, as the function Rollback does for a closed one (the same split of
// what becomes the snapshot's and what stays the store's, the same
// JRollback record, the same crash-safe swap). The snapshot's fork is
// made and opened first (its log replayed) while the store goes on; then
// every call is held off at the gate (gate.go), reads included, the
// store's history is copied into the fork, the fork is committed, the
// live database and blob files are closed, db/ and blobs/ swapped, the
// new database opened in their place, every in-memory cache of the old
// one (attributes, tails, paths, pins, orphans) dropped, and Generation
// incremented before calls go on.
//
// What callers hold from before is theirs to drop: file handles (the FUSE
// server fails them with EIO), the kernel's caches, and blob files open
// for passthrough, whose files were moved aside with the old blobs/ and
// removed, so a writer of one writes to a file nothing reads again.
func (s *Store) Rollback(name string) (RollbackInfo, error) {
	return s.RollbackWith(name, RollbackHooks{})
}

// RollbackHooks let the layer above a store (the FUSE server) take part
// in a rollback of the open store.
type RollbackHooks struct {
	// Ready is called once the snapshot's fork is made and opened, before
	// calls are held off: the layer above holds off its own state's
	// changes that call the store (opens, releases) from here until
	// RollbackWith returns. Calls that passed it before must be able to
	// finish.
	Ready func()
	// Held is called while every call is held off, after the commit
	// point and before the swap, with the old state to read (Listing; the
	// store's methods would wait).
	Held func(old Listing)
}

// Listing reads the store's state while a rollback holds every call off.
type Listing interface {
	// Entries calls fn for each entry of directory dir, in name order,
	// until fn returns false (nothing for an inode that is not one).
	Entries(dir uint64, fn func(Dirent) bool) error
}

type heldListing struct{ s *Store }

func (l heldListing) Entries(dir uint64, fn func(Dirent) bool) error {
	return l.s.readDir(dir, "", fn)
}

// RollbackWith is Rollback with the layer above's hooks.
func (s *Store) RollbackWith(name string, hooks RollbackHooks) (RollbackInfo, error) {
	snap, err := SnapshotDir(s.dir, name)
	if err != nil {
		return RollbackInfo{}, err
	}
	s.rollMu.Lock()
	defer s.rollMu.Unlock()
	if s.closed.Load() {
		return RollbackInfo{}, errors.New("store is closed")
	}
	if err := s.space.check(0); err != nil {
		return RollbackInfo{}, err
	}
	if s.blobs.source != nil {
		// A lazily resumed store's fetch finishes first: what it would
		// bring afterwards is the old state's, into the new blobs.
		if err := s.blobs.source.FetchAll(); err != nil {
			return RollbackInfo{}, fmt.Errorf("rollback to %s: %w", name, err)
		}
	}
	tmp := filepath.Join(s.dir, snapshotsDir, rollbackTmp)
	fail := func(err error) (RollbackInfo, error) {
		os.RemoveAll(tmp)
		return RollbackInfo{}, fmt.Errorf("rollback to %s: %w", name, err)
	}
	if err := os.RemoveAll(tmp); err != nil {
		return fail(err)
	}
	if err := linkTree(snap, tmp); err != nil {
		return fail(err)
	}
	ns, err := Open(tmp, Options{Logger: s.log, MinFree: -1, Ballast: -1, NoJournal: true})
	if err != nil {
		return fail(err)
	}
	// The snapshot's copied log, replayed by this open, goes to a table
	// now: else the reopen below replays it again while calls are held.
	if err := ns.WriteTables(); err != nil {
		ns.Close()
		return fail(err)
	}
	if hooks.Ready != nil {
		hooks.Ready()
	}
	s.closeGate()
	keepClosed := false
	defer func() {
		if !keepClosed {
			s.openGate()
		}
	}()
	start := time.Now()
	if s.closed.Load() {
		ns.Close()
		return fail(errors.New("store is closed"))
	}
	// Checkpoints cut and not yet written are written from this database
	// and these blobs, before they go (ckptcut.go).
	s.materializeAll()
	info, err := ns.takeHistory(s, name)
	if cerr := ns.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(s.dir, rollbackNew))
	}
	if err != nil {
		return fail(err)
	}
	if err := syncDir(s.dir); err != nil {
		return fail(err) // the next open finishes it, or this is tried again
	}
	// The commit point is passed: from here the store is the snapshot's,
	// now or at the next open.
	if hooks.Held != nil {
		hooks.Held(heldListing{s})
	}
	if err := s.swapOpen(); err != nil {
		s.log.Error("store: rollback: the new database cannot be opened; calls wait", "err", err)
		keepClosed = true
		return RollbackInfo{}, fmt.Errorf("rollback to %s: %w: %w", name, ErrRollbackFailed, err)
	}
	s.gate.gen.Add(1)
	info.Held = time.Since(start)
	s.openGate()
	s.log.Info("store: rolled back", "snapshot", name, "seq", info.Seq, "held", info.Held)
	if err := os.RemoveAll(filepath.Join(s.dir, rollbackOld)); err != nil {
		s.log.Warn("store: rollback: removing the old database (the next open does)", "err", err)
	}
	return info, nil
}

// swapOpen closes the live database and blob files, swaps the committed
// rollback's in (swapRollback) and opens them as the store. Every call is
// out of the gate.
func (s *Store) swapOpen() error {
	// Pins go without a record: their blobs are the old state's.
	s.pins.seq.Add(1)
	s.pins.mu.Lock()
	for ino, p := range s.pins.m {
		delete(s.pins.m, ino)
		p.release()
	}
	s.pins.n.Store(0)
	s.pins.mu.Unlock()
	s.pins.seq.Add(1)
	s.releaseCache()
	s.blobs.closeAll()
	if err := s.db.Close(); err != nil {
		s.log.Warn("store: rollback: closing the old database", "err", err)
	}
	if err := swapRollback(s.dir, false); err != nil {
		return err
	}
	s.attrs = newAttrCache(attrCacheSize) // tails with it
	s.orphans = make(map[uint64]struct{})
	s.dirMoves.Add(2) // paths cached by the layers above are stale (even: no move under way)
	s.cacheKeeper.mu.Lock()
	s.cacheKeeper.closed, s.cacheKeeper.release = false, nil
	s.cacheKeeper.mu.Unlock()
	s.blobs.mu.Lock()
	s.blobs.dirty = make(map[uint64]struct{})
	s.blobs.mu.Unlock()
	return s.openDB(s.opts, false)
}
