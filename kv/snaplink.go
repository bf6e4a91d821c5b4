package kv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// The blobs of a snapshot are linked after changes go on, behind a write
// barrier, so that the moment changes are held off does not grow with the
// number of blobs:
//
//   - while changes are held off, the snapshot copies the pinned blobs
//     (the kernel writes those without asking, so no barrier can stop it),
//     marks every open blob not own (acquireOwn looks again) and installs
//     a blobLinks as blobStore.linking: from then on, every blob file that
//     is in blobs/ and not in done is as it was at the snapshot's point;
//   - every change to a blob file (a write, truncate, punch or pin, which
//     go through acquireOwn; a removal; a creation) first calls barrier,
//     which links the file into the snapshot if it is not done yet (a
//     removal or a creation of a file that is not there links nothing),
//     and marks it done: the snapshot gets the file before the change;
//   - once changes go on, the snapshot walks blobs/ and links each blob
//     that is not done, under the same mutex.
//
// A writer therefore waits, at most, for one link (or, across file
// systems, one copy) of the blob it is about to change.
type blobLinks struct {
	dir string // the snapshot's blobs/

	mu   sync.Mutex
	done map[uint64]bool // linked, copied while held, or changed since the point
	err  error           // the first link that failed: the snapshot fails
	made bool            // dir was made (mkdirLocked)
}

// mkdirLocked makes the snapshot's blobs/ (and its directory) when the
// first blob goes in, not at the cut: two directories made cost the cut
// (and the call it follows) some 200 us of a loaded ext4's time, most of
// a cut's. l.mu held.
func (l *blobLinks) mkdirLocked() error {
	if l.made {
		return nil
	}
	if err := os.MkdirAll(l.dir, 0o700); err != nil {
		return err
	}
	l.made = true
	return nil
}

// startLinking is the blobs' part of a checkpoint while changes are held
// off: the pinned blobs are copied into dir, and the links of the others
// left to linkRest, behind the barrier it installs.
func (s *Store) startLinking(dir string) (*blobLinks, error) {
	l := &blobLinks{dir: dir, done: make(map[uint64]bool)}
	pinned := s.shareBlobs()
	s.blobs.startLinking(l)
	if len(pinned) > 0 {
		l.mu.Lock()
		err := l.mkdirLocked()
		l.mu.Unlock()
		if err != nil {
			s.blobs.stopLinking(l)
			return nil, err
		}
	}
	for ino, p := range pinned {
		l.done[ino] = true
		name := strconv.FormatUint(ino, 16)
		if err := copyBlobFile(p.f, filepath.Join(dir, name), false); err != nil {
			s.blobs.stopLinking(l)
			return nil, fmt.Errorf("blob of inode %d: %w", ino, err)
		}
	}
	return l, nil
}

// barrier is called before ino's blob file is changed, replaced, created
// or removed: a snapshot still linking its blobs links it first.
func (bs *blobStore) barrier(ino uint64) {
	if ls := bs.linking.Load(); ls != nil {
		for _, l := range *ls {
			l.link(bs.dir, ino)
		}
	}
}

// startLinking adds l to the snapshots linking their blobs (several cuts
// may wait for their materialization at once).
func (bs *blobStore) startLinking(l *blobLinks) {
	bs.linkMu.Lock()
	defer bs.linkMu.Unlock()
	var ls []*blobLinks
	if old := bs.linking.Load(); old != nil {
		ls = append(ls, *old...)
	}
	ls = append(ls, l)
	bs.linking.Store(&ls)
}

// stopLinking removes l from the snapshots linking their blobs.
func (bs *blobStore) stopLinking(l *blobLinks) {
	bs.linkMu.Lock()
	defer bs.linkMu.Unlock()
	old := bs.linking.Load()
	if old == nil {
		return
	}
	var ls []*blobLinks
	for _, o := range *old {
		if o != l {
			ls = append(ls, o)
		}
	}
	if len(ls) == 0 {
		bs.linking.Store(nil)
		return
	}
	bs.linking.Store(&ls)
}

// link links ino's blob from blobs into the snapshot unless it is done,
// and marks it done.
func (l *blobLinks) link(blobs string, ino uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done[ino] {
		return
	}
	l.done[ino] = true
	name := strconv.FormatUint(ino, 16)
	err := l.mkdirLocked()
	if err == nil {
		err = linkOrCopy(filepath.Join(blobs, name), filepath.Join(l.dir, name))
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) && l.err == nil {
		l.err = fmt.Errorf("blob of inode %d: %w", ino, err)
	}
}

// linkRest links every blob of blobs that no writer has touched since the
// snapshot's point, and returns the first error of any link.
func (l *blobLinks) linkRest(blobs string) error {
	entries, err := os.ReadDir(blobs)
	if err != nil {
		return err
	}
	for _, e := range entries {
		ino, err := strconv.ParseUint(e.Name(), 16, 64)
		if err != nil {
			continue // not a blob (a copy under way is .cow-)
		}
		l.link(blobs, ino)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.mkdirLocked(); err != nil && l.err == nil { // an empty blobs/ too
		l.err = err
	}
	return l.err
}

// shareBlobs readies the blobs for a snapshot that is to share them: it
// returns the pinned ones (the kernel may write them, so they are copied,
// not linked) and marks every open blob as no longer its store's own, so
// that acquireOwn looks again before the next write. Every change is held
// off.
func (s *Store) shareBlobs() map[uint64]*pin {
	s.pins.mu.Lock()
	pinned := make(map[uint64]*pin, len(s.pins.m))
	for ino, p := range s.pins.m {
		pinned[ino] = p
	}
	s.pins.mu.Unlock()
	s.blobs.mu.Lock()
	for _, ob := range s.blobs.open {
		ob.own = false
	}
	s.blobs.mu.Unlock()
	return pinned
}
