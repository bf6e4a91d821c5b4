package kv

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/batchrepr"
	"github.com/cockroachdb/pebble/v2/record"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// A checkpoint (a snapshot, a live fork, an automatic checkpoint) is taken
// in two parts: the cut, which holds every change off for a moment of
// constant length, and the materialization, which writes the cut's state
// to disk while changes go on.
//
// The cut (takeCut), while changes are held (holdChanges: no batch is
// under way, no blob half written by the daemon):
//
//   - writes a marker of its own to Pebble's write-ahead log (a LogData
//     record, which only the log holds): every batch committed before the
//     cut is before the marker in the log, every later one after it;
//   - notes how many flushes Pebble has begun, and takes a Pebble
//     snapshot (a sequence number; for the fallback below);
//   - installs the blobs' write barrier and copies the pinned blobs
//     (snaplink.go), as before.
//
// The materialization (materializeCut), changes going on:
//
//   - Pebble's Checkpoint links the tables of its current version and
//     copies the manifest and the logs. While no flush has begun since the
//     cut, the tables hold only batches from before the cut (a flush is
//     what moves batches from the logs to tables, and Pebble announces it
//     before its tables join the version), so the checkpoint's tables are
//     the cut's and its logs hold every batch of the cut and maybe later
//     ones: the log holding the marker is cut just after it, and later
//     logs removed (cutLog). Opened, the database replays its logs up to
//     the marker: the state at the cut, exactly.
//   - If a flush began since the cut (Pebble's memtable filled up meanwhile,
//     rare: the store flushes a memtable past 1 MiB before it cuts, and
//     Pebble's is 64 MiB), or the marker is not found, the checkpoint's
//     database is instead written from the Pebble snapshot, key by key
//     (copySnapshot): the same state, at a cost that grows with the store.
//   - The blobs not changed since the cut are linked (linkRest).
//
// Several cuts may wait for their materialization at once: each has its
// own barrier (blobStore.linking is a list). A rollback (inside its closed
// gate) and Close materialize the pending cuts first. Nothing of a cut is
// on disk but its .tmp- directory until the caller renames it into place,
// so a crash before that leaves nothing the next open does not remove.

// cutState is the store's part of the cuts.
type cutState struct {
	flushes atomic.Uint64 // flushes Pebble began (FlushBegin)
	markers atomic.Uint64
	// capture: read-held from a cut until Pebble's checkpoint of it
	// returned; the store's own flush before a cut takes it for writing,
	// so that it never sends a pending cut to copySnapshot.
	capture sync.RWMutex

	mu      sync.Mutex
	pending map[*cut]struct{}
}

// cut is one checkpoint's point, until it is materialized.
type cut struct {
	dst     string // the checkpoint's directory (db/ and blobs/ in it)
	seq     uint64 // the journal's last record at the cut
	held    time.Duration
	marker  []byte
	flushes uint64 // cutState.flushes at the cut
	snap    *pebble.Snapshot
	links   *blobLinks
	dbDone  bool // db/ was written while changes were held (snapshotPebbleHeld)
	flushAt uint64

	mu       sync.Mutex
	captured bool // capture released
	done     bool
	err      error
}

// snapshotPebbleHeld makes a cut write Pebble's checkpoint while changes
// are held, as checkpoints did before the cut: for the benchmark's before
// and after in one run. Set only by tests.
var snapshotPebbleHeld bool

// cutForceCopy makes every materialization take copySnapshot's way
// (tests); cutCopies counts the materializations that took it.
var (
	cutForceCopy bool
	cutCopies    atomic.Int64
)

// takeCut cuts a checkpoint of the store's current state into the new
// directory dst; materializeCut must then be called (from any goroutine).
// A memtable past preFlushAt is written to a table first (before changes
// are held), so that the checkpoint's copy of the log stays small; one
// past flushAt is written to a table once the checkpoint has its copy
// (by materializeCut, in the background), so that the next checkpoint's
// copy is small without the cut waiting for a flush.
func (s *Store) takeCut(dst string, preFlushAt, flushAt uint64) (*cut, error) {
	if s.closed.Load() {
		return nil, errors.New("store is closed")
	}
	if err := s.space.check(0); err != nil {
		return nil, err
	}
	if preFlushAt > 0 && s.db.Metrics().MemTable.Size > preFlushAt {
		// Cuts waiting for their materialization hold the flush off (it
		// would send them to copySnapshot): they are written first.
		s.materializeAll()
		if err := s.flushFor(preFlushAt, true); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(filepath.Join(dst, "blobs"), 0o700); err != nil {
		return nil, err
	}
	if s.blobs.source != nil {
		// Every blob file must be there to be linked.
		if err := s.blobs.source.FetchAll(); err != nil {
			return nil, fmt.Errorf("the blobs still being fetched: %w", err)
		}
	}
	c := &cut{dst: dst, flushAt: flushAt}
	c.marker = fmt.Appendf(nil, "computerfs cut %d.%d.%d", os.Getpid(), time.Now().UnixNano(), s.cuts.markers.Add(1))
	s.cuts.capture.RLock()
	release := s.holdChanges()
	defer release()
	start := time.Now()
	s.jmu.Lock()
	c.seq = s.jnext - 1
	s.jlast = Record{} // the next write is a record of its own, after seq
	s.jmu.Unlock()
	c.flushes = s.cuts.flushes.Load()
	var err error
	if snapshotPebbleHeld {
		s.fs.checkpointing.Add(1)
		err = s.db.Checkpoint(filepath.Join(dst, "db"), pebble.WithFlushedWAL())
		s.fs.checkpointing.Add(-1)
		c.dbDone = true
	} else if err = s.db.LogData(c.marker, pebble.NoSync); err == nil {
		c.snap = s.db.NewSnapshot()
	}
	if err != nil {
		c.release(s)
		return nil, err
	}
	tDB := time.Since(start)
	c.links, err = s.startLinking(filepath.Join(dst, "blobs"))
	if err != nil {
		c.release(s)
		return nil, err
	}
	c.held = time.Since(start)
	release()
	snapshotTraced("db", tDB)
	snapshotTraced("blobs", c.held-tDB)
	s.cuts.mu.Lock()
	if s.cuts.pending == nil {
		s.cuts.pending = map[*cut]struct{}{}
	}
	s.cuts.pending[c] = struct{}{}
	s.cuts.mu.Unlock()
	return c, nil
}

// release lets go of what the cut holds: the capture lock, the Pebble
// snapshot, the blobs' barrier.
func (c *cut) release(s *Store) {
	if !c.captured {
		c.captured = true
		s.cuts.capture.RUnlock()
	}
	if c.snap != nil {
		c.snap.Close()
		c.snap = nil
	}
	if c.links != nil {
		s.blobs.stopLinking(c.links)
		c.links = nil
	}
}

// materializeCut writes the cut's state into its directory (once: later calls
// return the first one's error). It does not pass the gate: a rollback
// calls it with the gate closed.
func (s *Store) materializeCut(c *cut) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return c.err
	}
	c.err = s.materializeLocked(c)
	c.done = true
	c.release(s)
	s.cuts.mu.Lock()
	delete(s.cuts.pending, c)
	s.cuts.mu.Unlock()
	if c.err != nil {
		os.RemoveAll(c.dst)
	}
	return c.err
}

func (s *Store) materializeLocked(c *cut) error {
	if !c.dbDone {
		t := time.Now()
		db := filepath.Join(c.dst, "db")
		s.fs.checkpointing.Add(1)
		err := s.db.Checkpoint(db, pebble.WithFlushedWAL())
		s.fs.checkpointing.Add(-1)
		clean := s.cuts.flushes.Load() == c.flushes
		c.captured = true
		s.cuts.capture.RUnlock()
		if err != nil {
			return err
		}
		if err := s.flushFor(c.flushAt, false); err != nil {
			return err
		}
		found := false
		if clean && !cutForceCopy {
			if found, err = cutLog(db, c.marker); err != nil {
				return err
			}
		}
		if !found {
			cutCopies.Add(1)
			s.log.Debug("store: checkpoint written key by key", "flushed", !clean)
			if err := os.RemoveAll(db); err != nil {
				return err
			}
			if err := s.copySnapshot(c.snap, db); err != nil {
				return fmt.Errorf("write the checkpoint's database: %w", err)
			}
		}
		snapshotTraced("db-after", time.Since(t))
	}
	t := time.Now()
	err := c.links.linkRest(s.blobs.dir)
	snapshotTraced("after", time.Since(t))
	return err
}

// flushFor writes Pebble's memtable to a table if it holds more than at
// bytes (at 0: never), unless a cut waits for Pebble's checkpoint (its
// tables must hold nothing from after it: the flush waits for a later
// call, rather than for that checkpoint). Cuts are held off only until
// Pebble has begun the flush (a cut counts the flushes begun before it:
// this one holds only memtables from before it), not for the flush's
// writes; wait says to wait for those too.
func (s *Store) flushFor(at uint64, wait bool) error {
	if at == 0 || s.db.Metrics().MemTable.Size <= at {
		return nil
	}
	if !s.cuts.capture.TryLock() {
		return nil
	}
	begun := s.cuts.flushes.Load()
	done, err := s.db.AsyncFlush()
	if err == nil {
		for s.cuts.flushes.Load() == begun {
			select {
			case <-done:
			case <-time.After(50 * time.Microsecond):
				continue
			}
			break
		}
	}
	s.cuts.capture.Unlock()
	if err == nil && wait {
		<-done
	}
	return err
}

// materializeAll materializes every pending cut (a rollback, with the
// gate closed, before it swaps the database; Close). Errors stay with
// their cuts, for their callers.
func (s *Store) materializeAll() {
	s.cuts.mu.Lock()
	var list []*cut
	for c := range s.cuts.pending {
		list = append(list, c)
	}
	s.cuts.mu.Unlock()
	for _, c := range list {
		if err := s.materializeCut(c); err != nil {
			s.log.Warn("store: a pending checkpoint could not be written", "err", err)
		}
	}
}

// cutLog cuts the logs of the checkpoint database in dir at the marker:
// the log holding it ends just after it, later logs are removed. It
// returns false if no log holds the marker.
func cutLog(dir string, marker []byte) (bool, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return false, err
	}
	type wal struct {
		num  uint64
		path string
	}
	var logs []wal
	for _, p := range paths {
		n, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(p), ".log"), 10, 64)
		if err != nil {
			return false, nil // a name Pebble gives a log in parts (failover): not ours to cut
		}
		logs = append(logs, wal{n, p})
	}
	sort.Slice(logs, func(i, j int) bool { return logs[i].num > logs[j].num }) // newest first
	for i, l := range logs {
		off, ok, err := findMarker(l.path, l.num, marker)
		if err != nil {
			return false, err
		}
		if !ok {
			continue
		}
		if err := os.Truncate(l.path, off); err != nil {
			return false, err
		}
		for _, later := range logs[:i] {
			if err := os.Remove(later.path); err != nil {
				return false, err
			}
		}
		return true, nil
	}
	return false, nil
}

// findMarker returns the offset just past the record of the log at path
// (number num) that holds marker, if one does.
func findMarker(path string, num uint64, marker []byte) (int64, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	r := newRecordReader(record.NewReader, f, num)
	for {
		rec, err := r.Next()
		if err != nil {
			return 0, false, nil // the log's end (or a torn or reused tail)
		}
		data, err := io.ReadAll(rec)
		if err != nil {
			return 0, false, nil
		}
		if h, ok := batchrepr.ReadHeader(data); !ok || h.Count != 0 {
			continue // a LogData-only batch counts no keys
		}
		br := batchrepr.Read(data)
		for {
			kind, data, _, ok, err := br.Next()
			if !ok || err != nil {
				break
			}
			if kind == pebble.InternalKeyKindLogData && bytes.Equal(data, marker) {
				return r.Offset(), true, nil
			}
		}
	}
}

// newRecordReader calls record.NewReader, whose log number has a type of
// Pebble's internal package.
func newRecordReader[N ~uint64](newReader func(io.Reader, N) *record.Reader, r io.Reader, num uint64) *record.Reader {
	return newReader(r, N(num))
}

// copySnapshot writes a new database in dir holding every key of snap.
func (s *Store) copySnapshot(snap *pebble.Snapshot, dir string) error {
	db, err := pebble.Open(dir, &pebble.Options{
		FS:                 vfs.Default,
		FormatMajorVersion: pebble.FormatNewest,
		DisableWAL:         true,
		Logger:             pebbleLogger{s.log},
	})
	if err != nil {
		return err
	}
	err = func() error {
		it, err := snap.NewIter(nil)
		if err != nil {
			return err
		}
		b := db.NewBatch()
		for it.First(); it.Valid(); it.Next() {
			v, err := it.ValueAndErr()
			if err != nil {
				it.Close()
				return err
			}
			if err := b.Set(it.Key(), v, nil); err != nil {
				it.Close()
				return err
			}
			if b.Len() > 4<<20 {
				if err := b.Commit(pebble.NoSync); err != nil {
					it.Close()
					return err
				}
				b = db.NewBatch()
			}
		}
		if err := it.Close(); err != nil {
			return err
		}
		if err := b.Commit(pebble.NoSync); err != nil {
			return err
		}
		return db.Flush()
	}()
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return err
}
