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
	"sync/atomic"
	"syscall"
	"time"
)

// Checkpoints are the snapshots a store takes on its own, before an
// agent's calls (the root package's `checkpoint: each-call`). One is named
// "@SEQ" after the journal's last record when it was taken: it holds the
// state after record SEQ and nothing later. Every change leaves a journal
// record, so two checkpoints of one SEQ would hold the same state, and a
// store takes a checkpoint only when its journal moved since the last one:
// a run of calls that change nothing costs one checkpoint, and a call that
// reads costs a look at the journal's end.
//
// A checkpoint is a snapshot in every other way (STORE/snapshots/@SEQ:
// links to the tables and blobs, a copy of the log, copy-on-write of a
// blob written afterwards), so rollback and fork take its name as they
// take a snapshot's. Snapshots lists only the names users give (no name
// of theirs starts with '@'); Checkpoints lists the rest.
//
// Taking one is split in two so that a call waits only for the first
// part: Checkpoint only cuts (ckptcut.go: changes are held off while a
// marker goes to Pebble's log, a Pebble snapshot is taken and the blobs'
// write barrier installed, some microseconds whatever the store's size);
// the finish function it returns then writes the checkpoint (Pebble's
// links and log copy cut at the marker, the blobs' links) into a
// temporary directory, makes it durable and renames it into place, while
// calls go on. A crash before the rename leaves a .tmp- directory that
// the next open removes.

// checkpointFlushAt: after a checkpoint has its copy of the log, a
// memtable larger than this is written to a table (in the background), so
// that each checkpoint's copy of the log is about this big at most (a
// snapshot allows 4 MiB: it is taken far less often); checkpointPreFlushAt:
// one larger than this is written to a table before the cut (when the
// flushes after could not keep up).
const checkpointFlushAt = 1 << 20

var checkpointPreFlushAt uint64 = 8 << 20 // a variable for tests

var checkpointRe = regexp.MustCompile(`^@[0-9]{1,20}$`)

// CheckpointName is the name of the checkpoint of the state after journal
// record seq.
func CheckpointName(seq uint64) string { return "@" + strconv.FormatUint(seq, 10) }

// IsCheckpoint says whether name is a checkpoint's name (@SEQ).
func IsCheckpoint(name string) bool { return checkpointRe.MatchString(name) }

// checkpointSeq is the SEQ of the checkpoint name.
func checkpointSeq(name string) uint64 {
	n, _ := strconv.ParseUint(name[1:], 10, 64)
	return n
}

// checkRef accepts a snapshot's name or a checkpoint's.
func checkRef(name string) error {
	if IsCheckpoint(name) {
		return nil
	}
	return CheckSnapshotName(name)
}

// CheckpointInfo describes a checkpoint.
type CheckpointInfo struct {
	Name    string    `json:"name"` // @SEQ
	Seq     uint64    `json:"seq"`  // the journal's last record when it was taken
	Created time.Time `json:"created"`
	// Label says what it was taken for (the call it came before), as the
	// caller of Checkpoint gave it.
	Label string `json:"label,omitempty"`
	// Held is how long changes were held off while it was taken; New
	// says it was taken by this call (else the journal had not moved
	// since the checkpoint of Seq). Set by Checkpoint only.
	Held time.Duration `json:"held_ns,omitempty"`
	New  bool          `json:"new,omitempty"`
}

var checkpointTmp atomic.Uint64

// Checkpoint takes a checkpoint of the store's current state, unless the
// journal has not moved since the one of its last record, which is then
// the answer. It returns once changes may go on; finish, when not nil,
// must then be called (once, from any goroutine, before the store closes)
// to make the checkpoint durable and put it under its name: until then
// it is not listed and cannot be rolled back to, and a Checkpoint of the
// same state answers with it (New false).
// label (at most maxCheckpointLabel bytes kept) goes with a new one.
func (s *Store) Checkpoint(label string) (info CheckpointInfo, finish func() error, err error) {
	s.enter()
	defer s.leave()
	root := filepath.Join(s.dir, snapshotsDir)
	s.jmu.Lock()
	seq := s.jnext - 1
	s.jmu.Unlock()
	if p := filepath.Join(root, CheckpointName(seq)); exists(p) {
		return readCheckpoint(p), nil, nil
	}
	s.pendingCkpt.Lock()
	pc, ok := s.pendingCkpt.m[seq]
	s.pendingCkpt.Unlock()
	if ok { // taken, being made durable: the same state
		pc.New, pc.Held = false, 0
		return pc, nil, nil
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return CheckpointInfo{}, nil, err
	}
	tmp := filepath.Join(root, fmt.Sprintf(".tmp-@%d-%d", os.Getpid(), checkpointTmp.Add(1)))
	place := &ckptPlace{tmp: tmp}
	c, err := s.takeCut(tmp, checkpointPreFlushAt, checkpointFlushAt, place)
	if err != nil {
		os.RemoveAll(tmp)
		return CheckpointInfo{}, nil, fmt.Errorf("checkpoint: %w", err)
	}
	if len(label) > maxCheckpointLabel {
		label = label[:maxCheckpointLabel]
	}
	place.seq, place.name, place.label = c.seq, CheckpointName(c.seq), label
	info = CheckpointInfo{Name: place.name, Seq: c.seq, Created: time.Now(), Label: label, Held: c.held, New: true}
	s.pendingCkpt.Lock()
	if s.pendingCkpt.m == nil {
		s.pendingCkpt.m = map[uint64]CheckpointInfo{}
	}
	s.pendingCkpt.m[c.seq] = info
	s.pendingCkpt.Unlock()
	s.cuts.mu.Lock()
	s.cuts.ckpts = append(s.cuts.ckpts, c)
	s.cuts.mu.Unlock()
	return info, func() error { return s.finishCheckpoints(c) }, nil
}

// ckptPlace is what a checkpoint's cut needs to be put in place under its
// name. Set before the cut joins cutState.ckpts; placed and err under
// cutState.placeMu.
type ckptPlace struct {
	tmp, name, label string
	seq              uint64
	placed           bool
	err              error
}

// finishCheckpoints is the finish of the checkpoint cut c: it writes every
// checkpoint cut and not yet in place, c and those cut before and after it
// (materializeCuts: one Pebble checkpoint for all), makes them durable
// with one pass of syncs (a file they share, linked, synced once) and
// renames each into place, then syncs snapshots/ once. A later finish of
// one of them answers with what became of it.
func (s *Store) finishCheckpoints(c *cut) error {
	s.enter() // against a rollback's swap (which materializes them first)
	defer s.leave()
	s.cuts.placeMu.Lock()
	defer s.cuts.placeMu.Unlock()
	if c.ckpt.placed {
		return c.ckpt.err
	}
	s.cuts.mu.Lock()
	batch := s.cuts.ckpts
	s.cuts.ckpts = nil
	s.cuts.mu.Unlock()
	s.materializeCuts(batch)
	fail := func(b *cut, err error) {
		os.RemoveAll(b.ckpt.tmp)
		b.ckpt.err = fmt.Errorf("checkpoint %s: %w", b.ckpt.name, err)
	}
	var ok []*cut
	for _, b := range batch {
		err := b.err
		if err == nil {
			err = os.WriteFile(filepath.Join(b.ckpt.tmp, checkpointLabel), []byte(b.ckpt.label), 0o600)
		}
		if err != nil {
			fail(b, err)
			continue
		}
		ok = append(ok, b)
	}
	if !s.fs.noSync && len(ok) > 0 {
		dirs := make([]string, len(ok))
		for i, b := range ok {
			dirs[i] = b.ckpt.tmp
		}
		if err := syncTrees(dirs...); err != nil {
			for _, b := range ok {
				fail(b, err)
			}
			ok = nil
		}
	}
	root := filepath.Join(s.dir, snapshotsDir)
	var placed []*cut
	for _, b := range ok {
		if err := os.Rename(b.ckpt.tmp, filepath.Join(root, b.ckpt.name)); err != nil {
			if errors.Is(err, os.ErrExist) || errors.Is(err, syscall.ENOTEMPTY) {
				os.RemoveAll(b.ckpt.tmp) // taken meanwhile by another call: the same state
			} else {
				fail(b, err)
			}
			continue
		}
		placed = append(placed, b)
	}
	if len(placed) > 0 {
		if err := syncDir(root); err != nil {
			for _, b := range placed {
				b.ckpt.err = fmt.Errorf("checkpoint %s: %w", b.ckpt.name, err)
			}
		}
	}
	s.pendingCkpt.Lock()
	for _, b := range batch {
		b.ckpt.placed = true
		delete(s.pendingCkpt.m, b.ckpt.seq)
	}
	s.pendingCkpt.Unlock()
	return c.ckpt.err
}

// Checkpoints lists the store's checkpoints, oldest first.
func (s *Store) Checkpoints() ([]CheckpointInfo, error) { return ListCheckpoints(s.dir) }

// ListCheckpoints lists the checkpoints of the store in dir, open or not,
// oldest first.
func ListCheckpoints(dir string) ([]CheckpointInfo, error) {
	paths, err := snapshotDirs(dir, IsCheckpoint)
	if err != nil {
		return nil, err
	}
	var out []CheckpointInfo
	for _, p := range paths {
		c := readCheckpoint(p)
		if c.Created.IsZero() {
			continue // pruned meanwhile
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out, nil
}

// PruneCheckpoints deletes the checkpoints past the keep newest (keep <= 0:
// no bound) and those older than maxAge (0: no bound), never the newest,
// and returns the names it deleted. (It reads no labels, and deletes them
// all with one sync of snapshots/.)
func (s *Store) PruneCheckpoints(keep int, maxAge time.Duration) ([]string, error) {
	paths, err := snapshotDirs(s.dir, IsCheckpoint)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = filepath.Base(p)
	}
	sort.Slice(names, func(i, j int) bool { return checkpointSeq(names[i]) < checkpointSeq(names[j]) })
	var gone []string
	now := time.Now()
	for i, name := range names {
		if i == len(names)-1 {
			break
		}
		over := keep > 0 && len(names)-i > keep
		if !over && maxAge > 0 {
			st, err := os.Stat(s.snapshotPath(name))
			over = err == nil && now.Sub(st.ModTime()) > maxAge
		}
		if over {
			gone = append(gone, name)
		}
	}
	return gone, s.deleteSnapshots(gone, false)
}

// checkpointLabel is the file of a checkpoint's label, beside db/ and
// blobs/; maxCheckpointLabel bounds it.
const (
	checkpointLabel    = "label"
	maxCheckpointLabel = 512
)

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// readCheckpoint describes the checkpoint in dir (Created zero if it is
// gone).
func readCheckpoint(dir string) CheckpointInfo {
	name := filepath.Base(dir)
	c := CheckpointInfo{Name: name, Seq: checkpointSeq(name)}
	st, err := os.Stat(dir)
	if err != nil {
		return c
	}
	c.Created = st.ModTime()
	if f, err := os.Open(filepath.Join(dir, checkpointLabel)); err == nil {
		buf := make([]byte, maxCheckpointLabel)
		n, _ := io.ReadFull(f, buf)
		f.Close()
		c.Label = string(buf[:n])
	}
	return c
}
