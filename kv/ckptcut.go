package kv

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
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
	ckpts   []*cut // checkpoints' cuts not yet in place (finishCheckpoints)

	placeMu sync.Mutex // one finishCheckpoints at a time
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
	order   uint64 // cuts are numbered in the order they were taken
	// ckpt: the cut is a checkpoint's (checkpoint.go), in the store's
	// snapshots/ as every other, so that it may share a Pebble
	// checkpoint with them (materializeShared).
	ckpt *ckptPlace

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
// cutShared counts the cuts whose database was made from another's
// Pebble checkpoint (placeCutDB).
var (
	cutForceCopy bool
	cutCopies    atomic.Int64
	cutShared    atomic.Int64
)

// takeCut cuts a checkpoint of the store's current state into the new
// directory dst; materializeCut must then be called (from any goroutine).
// A memtable past preFlushAt is written to a table first (before changes
// are held), so that the checkpoint's copy of the log stays small; one
// past flushAt is written to a table once the checkpoint has its copy
// (by materializeCut, in the background), so that the next checkpoint's
// copy is small without the cut waiting for a flush.
func (s *Store) takeCut(dst string, preFlushAt, flushAt uint64, ckpt *ckptPlace) (*cut, error) {
	if s.closed.Load() {
		return nil, errors.New("store is closed")
	}
	if err := s.space.check(0); err != nil {
		return nil, err
	}
	if preFlushAt > 0 && s.logSize() > preFlushAt {
		// Cuts waiting for their materialization hold the flush off (it
		// would send them to copySnapshot): they are written first.
		s.materializeAll()
		if err := s.flushFor(preFlushAt, true); err != nil {
			return nil, err
		}
	}
	// dst and its blobs/ are made by the first blob linked into it or the
	// materialization (blobLinks.mkdirLocked), not here.
	if s.blobs.source != nil {
		// Every blob file must be there to be linked.
		if err := s.blobs.source.FetchAll(); err != nil {
			return nil, fmt.Errorf("the blobs still being fetched: %w", err)
		}
	}
	c := &cut{dst: dst, flushAt: flushAt, ckpt: ckpt}
	c.order = s.cuts.markers.Add(1)
	c.marker = fmt.Appendf(nil, "computerfs cut %d.%d.%d", os.Getpid(), time.Now().UnixNano(), c.order)
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
	c.releaseCapture(s)
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
	s.materializeCuts([]*cut{c})
	return c.err
}

// materializeCuts materializes the cuts cs, each once (see materializeCut;
// each one's error stays with it). The cuts of checkpoints (shared: their
// directories are all in the store's snapshots/) share one Pebble
// checkpoint: it is written into the newest one's directory, and every
// older one links its tables, manifest and options and copies its logs up
// to its own marker (materializeShared). Other cuts are materialized
// alone.
func (s *Store) materializeCuts(cs []*cut) {
	cs = slices.Clone(cs)
	slices.SortFunc(cs, func(a, b *cut) int { return cmp.Compare(a.order, b.order) })
	for _, c := range cs { // in one order: two callers never wait for each other
		c.mu.Lock()
	}
	defer func() {
		for _, c := range cs {
			c.mu.Unlock()
		}
	}()
	var shared []*cut
	for _, c := range cs {
		switch {
		case c.done:
		case c.ckpt != nil && !c.dbDone:
			shared = append(shared, c)
		default:
			c.err = s.materializeOne(c)
			s.cutDone(c)
		}
	}
	if len(shared) > 0 {
		s.materializeShared(shared)
		for _, c := range shared {
			s.cutDone(c)
		}
	}
}

// cutDone ends the cut c's materialization (c.err set; c.mu held).
func (s *Store) cutDone(c *cut) {
	c.done = true
	c.release(s)
	s.cuts.mu.Lock()
	delete(s.cuts.pending, c)
	s.cuts.mu.Unlock()
	if c.err != nil {
		os.RemoveAll(c.dst)
	}
}

// materializeOne materializes the cut c alone (c.mu held).
func (s *Store) materializeOne(c *cut) error {
	if !c.dbDone {
		t := time.Now()
		db := filepath.Join(c.dst, "db")
		s.fs.checkpointing.Add(1)
		err := s.db.Checkpoint(db, pebble.WithFlushedWAL())
		s.fs.checkpointing.Add(-1)
		clean := s.cuts.flushes.Load() == c.flushes
		c.releaseCapture(s)
		if err != nil {
			return err
		}
		if err := s.flushFor(c.flushAt, false); err != nil {
			return err
		}
		found := false
		if clean && !cutForceCopy {
			pos, err := findMarkers(db, [][]byte{c.marker})
			if err != nil {
				return err
			}
			var p markerPos
			if p, found = pos[string(c.marker)]; found {
				if err := cutLogAt(db, p); err != nil {
					return err
				}
			}
		}
		if !found {
			if err := s.copyCut(c, db, !clean); err != nil {
				return err
			}
		}
		snapshotTraced("db-after", time.Since(t))
	}
	return s.linkCutBlobs(c)
}

// materializeShared materializes the checkpoint cuts cs (oldest first,
// each c.mu held; c.err set for each) with one Pebble checkpoint, written
// into the newest one's db/. While no flush has begun since a cut, that
// checkpoint's tables hold nothing from after it (as for one cut, above):
// the older cut's db/ links them, the manifest and the options (files
// that no one writes again: a fork or rollback copies them), links the
// logs before the one holding its marker and copies that one up to the
// marker. The newest one's logs are then cut at its own marker. A cut
// whose marker is not found, or with a flush since it, is written from
// its Pebble snapshot. The blobs are linked for each as for one.
func (s *Store) materializeShared(cs []*cut) {
	t := time.Now()
	host := cs[len(cs)-1]
	hostDB := filepath.Join(host.dst, "db")
	s.fs.checkpointing.Add(1)
	err := s.db.Checkpoint(hostDB, pebble.WithFlushedWAL())
	s.fs.checkpointing.Add(-1)
	flushes := s.cuts.flushes.Load()
	flushAt := uint64(0)
	for _, c := range cs {
		c.releaseCapture(s)
		flushAt = max(flushAt, c.flushAt)
	}
	if err == nil {
		err = s.flushFor(flushAt, false)
	}
	var pos map[string]markerPos
	if err == nil && !cutForceCopy {
		var markers [][]byte
		for _, c := range cs {
			if c.flushes == flushes {
				markers = append(markers, c.marker)
			}
		}
		pos, err = findMarkers(hostDB, markers)
	}
	if err != nil {
		for _, c := range cs {
			c.err = err
		}
		return
	}
	for _, c := range cs {
		db := filepath.Join(c.dst, "db")
		p, found := pos[string(c.marker)]
		switch {
		case c == host && found:
			c.err = cutLogAt(db, p)
		case c == host:
			c.err = s.copyCut(c, db, c.flushes != flushes)
		case found:
			cutShared.Add(1)
			c.err = placeCutDB(hostDB, db, p)
		default:
			c.err = s.copyCut(c, db, c.flushes != flushes)
		}
	}
	snapshotTraced("db-after", time.Since(t))
	for _, c := range cs {
		if c.err == nil {
			c.err = s.linkCutBlobs(c)
		}
	}
}

// copyCut writes the database of the cut c into db from its Pebble
// snapshot, key by key (whatever db holds is removed first).
func (s *Store) copyCut(c *cut, db string, flushed bool) error {
	cutCopies.Add(1)
	s.log.Debug("store: checkpoint written key by key", "flushed", flushed)
	if err := os.RemoveAll(db); err != nil {
		return err
	}
	if err := s.copySnapshot(c.snap, db); err != nil {
		return fmt.Errorf("write the checkpoint's database: %w", err)
	}
	return nil
}

// linkCutBlobs links the blobs not yet in the cut's directory.
func (s *Store) linkCutBlobs(c *cut) error {
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
	if at == 0 || s.logSize() <= at {
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

// logSize is the size of what Pebble's live logs hold: the batches not yet
// written to tables, which a checkpoint copies. (Not the memtables' size:
// that is their arenas, which Pebble doubles at each flush up to
// MemTableSize whatever they hold, so that past the bound once, a memtable
// was flushed at every checkpoint, a few kilobytes each, and each small
// table compacted into the last level: the store rewritten at every call
// that changed something.)
func (s *Store) logSize() uint64 { return s.db.Metrics().WAL.Size }

// releaseCapture lets go of the capture lock, once.
func (c *cut) releaseCapture(s *Store) {
	if !c.captured {
		c.captured = true
		s.cuts.capture.RUnlock()
	}
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
	s.materializeCuts(list)
	for _, c := range list {
		if c.err != nil {
			s.log.Warn("store: a pending checkpoint could not be written", "err", c.err)
		}
	}
}

// markerPos is where a marker is in a checkpoint's logs: the log's number
// and the offset just past the record that holds it.
type markerPos struct {
	num uint64
	off int64
}

// ckptLogs are the logs of the checkpoint database in dir, newest first;
// ok false if one has a name Pebble gives a log in parts (failover): not
// ours to cut.
func ckptLogs(dir string) (logs []markerPos, ok bool, err error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return nil, false, err
	}
	for _, p := range paths {
		n, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(p), ".log"), 10, 64)
		if err != nil {
			return nil, false, nil
		}
		logs = append(logs, markerPos{num: n})
	}
	sort.Slice(logs, func(i, j int) bool { return logs[i].num > logs[j].num })
	return logs, true, nil
}

func logPath(dir string, num uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%06d.log", num))
}

// findMarkers finds the markers in the logs of the checkpoint database in
// dir, reading each log once; a marker not found is not in the answer.
func findMarkers(dir string, markers [][]byte) (map[string]markerPos, error) {
	pos := map[string]markerPos{}
	if len(markers) == 0 {
		return pos, nil
	}
	want := map[string]bool{}
	for _, m := range markers {
		want[string(m)] = true
	}
	logs, ok, err := ckptLogs(dir)
	if err != nil || !ok {
		return pos, err
	}
	for _, l := range logs {
		if err := scanMarkers(logPath(dir, l.num), l.num, want, pos); err != nil {
			return nil, err
		}
		if len(pos) == len(want) {
			break
		}
	}
	return pos, nil
}

// scanMarkers notes in pos where each marker of want is in the log at
// path (number num).
func scanMarkers(path string, num uint64, want map[string]bool, pos map[string]markerPos) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := newRecordReader(record.NewReader, f, num)
	var data []byte
	for {
		rec, err := r.Next()
		if err != nil {
			return nil // the log's end (or a torn or reused tail)
		}
		buf := bytes.NewBuffer(data[:0])
		if _, err := buf.ReadFrom(rec); err != nil {
			return nil
		}
		data = buf.Bytes()
		if h, ok := batchrepr.ReadHeader(data); !ok || h.Count != 0 {
			continue // a LogData-only batch counts no keys
		}
		br := batchrepr.Read(data)
		for {
			kind, d, _, ok, err := br.Next()
			if !ok || err != nil {
				break
			}
			if kind == pebble.InternalKeyKindLogData && want[string(d)] {
				if _, dup := pos[string(d)]; !dup {
					pos[string(d)] = markerPos{num, r.Offset()}
				}
			}
		}
	}
}

// cutLogAt cuts the logs of the checkpoint database in dir at p: the log
// holding the marker ends just after it, later logs are removed.
func cutLogAt(dir string, p markerPos) error {
	logs, _, err := ckptLogs(dir)
	if err != nil {
		return err
	}
	for _, l := range logs {
		switch {
		case l.num > p.num:
			err = os.Remove(logPath(dir, l.num))
		case l.num == p.num:
			err = os.Truncate(logPath(dir, l.num), p.off)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// placeCutDB makes the checkpoint database dst (new) of a cut older than
// the one whose database is src, with its marker at p: every file of
// src's is linked (tables, the manifest, the options and markers: files
// that no one writes again, a fork or a rollback copying all but the
// tables) but the logs, which are linked up to the one holding the marker,
// that one copied up to it, and none after it.
func placeCutDB(src, dst string, p markerPos) error {
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return err
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		from, to := filepath.Join(src, name), filepath.Join(dst, name)
		if !e.Type().IsRegular() {
			return fmt.Errorf("checkpoint database: %s is not a file", from)
		}
		if !strings.HasSuffix(name, ".log") {
			err = os.Link(from, to)
		} else if n, perr := strconv.ParseUint(strings.TrimSuffix(name, ".log"), 10, 64); perr != nil {
			return fmt.Errorf("checkpoint database: log %s", from)
		} else if n < p.num {
			err = os.Link(from, to)
		} else if n == p.num {
			err = copyFile(from, to, p.off, false)
		}
		if err != nil {
			return err
		}
	}
	return nil
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
