package kv

import (
	"fmt"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// Pinned blobs. The FUSE server can hand the kernel a blob's file so that
// reads and writes of the mounted file go straight to it (passthrough):
// one copy instead of three, and the host file system's page cache. The
// store then no longer sees those reads and writes, so while a blob is
// pinned (PinBlob ... UnpinBlob):
//
//   - its size is the larger of the recorded one and the blob file's, and
//     once the blob changed since the store last looked (its size, mtime
//     or ctime differ), its mtime and ctime are the blob's too: GetAttr
//     and read merge them in (mergePin), and a change that commits the
//     attributes commits them;
//   - a read the blob's access time shows becomes the file's access time
//     when relatime asks for one (the blob's atime is set back to the
//     file's at the first pin, so the host records the first read);
//   - what changed is committed, with a write record for the journal, at
//     SyncPinned (fsync, close) and at the last UnpinBlob;
//   - a blob pinned for writing carries FlagWriting, committed and handed
//     to the system before the kernel may write: after a crash its size is
//     taken from the blob file (recoverWriting), not cut back to the
//     recorded one;
//   - the blob stays a blob: SetContent writes it in place, and refresh
//     (ReplaceRemote) refuses it (ErrBusy). Deleting the inode waits for
//     the last close anyway (it is open).
//
// The blob file's size is kept at least the file's size (truncate and
// fallocate extend it), since the kernel reads to the blob's end.

// FlagWriting (an Attr.Flags bit) marks a blob that the kernel may be
// writing directly (pinned for writing): its recorded size and times may
// lag behind the blob file's.
const FlagWriting = 1 << 2

// ErrBusy: the file is open for passthrough I/O and cannot change its kind
// now.
var ErrBusy = &Error{"file busy", syscall.EBUSY}

type blobStat struct {
	size, blocks        uint64
	atime, mtime, ctime int64
}

// statBlob stats f through os.File, which holds the descriptor while it
// does: a GetAttr may stat a pinned blob that its last RELEASE is closing
// at that moment (it retries, see pins.stable), and a raw f.Fd() would
// race with that close (and could stat a descriptor number reused).
func statBlob(f *os.File) (blobStat, error) {
	fi, err := f.Stat()
	if err != nil {
		return blobStat{}, fmt.Errorf("stat blob %s: %w", f.Name(), err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return blobStat{}, fmt.Errorf("stat blob %s: no stat_t", f.Name())
	}
	return blobStat{
		size: uint64(st.Size), blocks: uint64(st.Blocks),
		atime: st.Atim.Nano(), mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(),
	}, nil
}

type pin struct {
	f       *os.File
	release func()
	refs    int
	// writers: changed under the inode's lock, read by a sync without it
	writers atomic.Int32
	// seen is the blob when the store last took its changes: written
	// under the inode's lock, read by GetAttr without it (pins.seq)
	seen atomic.Pointer[blobStat]
}

type pins struct {
	n  atomic.Int32 // len(m): GetAttr looks no further while it is zero
	mu sync.Mutex
	m  map[uint64]*pin
	// seq is odd while what a pin has seen changes with the stored
	// attributes (a commit of the blob's news, a drop): a reader that read
	// the stored attributes before such a commit and the pin after it
	// would take the old attributes as up to date with the blob, or miss
	// the pin, so readers retry when seq moved (a seqlock; see GetAttr
	// and read).
	seq atomic.Uint64
}

// stable tells whether no pin was dropped since seq was g.
func (p *pins) stable(g uint64) bool { return g&1 == 0 && p.seq.Load() == g }

func (p *pins) get(ino uint64) *pin {
	if p.n.Load() == 0 {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.m[ino]
}

// PinBlob readies ino for passthrough I/O and returns its blob file, to be
// handed to the kernel, or ok false if ino is not a blob (then it is
// opened the usual way). Each PinBlob needs an UnpinBlob with the same
// write.
func (s *Store) PinBlob(ino uint64, write bool) (f *os.File, ok bool, err error) {
	s.enter()
	defer s.leave()
	unlock := s.lockInodes(ino)
	defer unlock()
	a, err := s.storedAttr(ino)
	if err != nil {
		return nil, false, err
	}
	if !a.IsRegular() || a.Flags&FlagBlob == 0 || a.Flags&FlagRemote != 0 {
		return nil, false, nil
	}
	p := s.pins.get(ino)
	if p == nil {
		if p, err = s.newPin(&a); err != nil {
			return nil, false, err
		}
	}
	if write && p.writers.Load() == 0 && a.Flags&FlagWriting == 0 {
		// Recorded and with the system before the kernel writes a byte.
		if err := s.commitPinned(&a, p, setWriting, nil); err == nil {
			err = s.flushNow()
		}
		if err != nil {
			if p.refs == 0 {
				s.dropPin(ino, p)
			}
			return nil, false, err
		}
	}
	p.refs++
	if write {
		p.writers.Add(1)
	}
	return p.f, true, nil
}

// newPin opens a's blob for passthrough: its size at least a's (older
// stores left a sparse tail short), nothing past it, and its access time
// a's, so that the host records the next read. The caller holds the lock.
func (s *Store) newPin(a *Attr) (*pin, error) {
	f, release, err := s.blobs.acquireOwn(a.Ino)
	if err == errBlobGone {
		err = fmt.Errorf("inode %d: its blob is missing", a.Ino)
	}
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*pin, error) {
		release()
		return nil, fmt.Errorf("pin blob of inode %d: %w", a.Ino, err)
	}
	// A blob still marked FlagWriting (its last unpin could not commit,
	// on a full disk) holds what the kernel wrote past the recorded size:
	// that is the file's (as after a crash, recoverWriting), not cut.
	if a.Flags&FlagWriting == 0 {
		if _, err := cutBlob(f, a); err != nil {
			return fail(err)
		}
	}
	if err := extendBlob(f, a.Size); err != nil {
		return fail(err)
	}
	if err := setBlobAtime(f, a.Atime); err != nil {
		return fail(err)
	}
	p := &pin{f: f, release: release}
	st, err := statBlob(f)
	if err != nil {
		return fail(err)
	}
	p.seen.Store(&st)
	s.pins.mu.Lock()
	s.pins.m[a.Ino] = p
	s.pins.n.Store(int32(len(s.pins.m)))
	s.pins.mu.Unlock()
	return p, nil
}

func (s *Store) dropPin(ino uint64, p *pin) {
	s.pins.mu.Lock()
	delete(s.pins.m, ino)
	s.pins.n.Store(int32(len(s.pins.m)))
	s.pins.mu.Unlock()
	p.release()
}

// extendBlob grows a blob file to size if it is shorter (a hole).
func extendBlob(f *os.File, size uint64) error {
	st, err := statBlob(f)
	if err != nil || st.size >= size {
		return err
	}
	return f.Truncate(int64(size))
}

// UnpinBlob ends one PinBlob: it commits what the kernel changed, and with
// the last writer clears FlagWriting.
func (s *Store) UnpinBlob(ino uint64, write bool) error {
	s.enter()
	defer s.leave()
	return s.unpinBlob(nil, ino, write)
}

func (s *Store) unpinBlob(actor *Actor, ino uint64, write bool) error {
	unlock := s.lockInodes(ino)
	defer unlock()
	p := s.pins.get(ino)
	if p == nil {
		return nil
	}
	p.refs--
	if write {
		p.writers.Add(-1)
	}
	if p.refs == 0 {
		s.pins.seq.Add(1)
		defer s.pins.seq.Add(1)
	}
	writing := keepWriting
	if p.writers.Load() == 0 {
		writing = clearWriting
	}
	a, err := s.commitPin(ino, p, writing, actor)
	if p.refs == 0 {
		s.dropPin(ino, p)
		if err == nil && a.Flags&FlagBlob != 0 && a.Size < s.blobThreshold {
			err = s.unblob(&a)
		}
	}
	return err
}

// SyncPinned commits what the kernel changed in ino's pinned blob (fsync,
// close) and marks the blob for the next sync.
func (s *Store) SyncPinned(ino uint64) error {
	s.enter()
	defer s.leave()
	return s.syncPinned(nil, ino)
}

func (s *Store) syncPinned(actor *Actor, ino uint64) error {
	unlock := s.lockInodes(ino)
	defer unlock()
	p := s.pins.get(ino)
	if p == nil {
		return nil
	}
	a, err := s.storedAttr(ino)
	if err != nil {
		return err
	}
	if p.writers.Load() > 0 {
		s.blobs.written(ino)
	}
	return s.commitPinned(&a, p, keepWriting, actor)
}

// commitPin is commitPinned on ino's stored attributes, which it returns
// as committed; an inode deleted meanwhile has nothing to commit. The
// caller holds the lock.
func (s *Store) commitPin(ino uint64, p *pin, writing int, actor *Actor) (Attr, error) {
	a, err := s.storedAttr(ino)
	if err == ErrNotFound {
		return Attr{}, nil
	}
	if err == nil {
		err = s.commitPinned(&a, p, writing, actor)
	}
	return a, err
}

// What commitPinned does with FlagWriting.
const (
	keepWriting = iota
	setWriting
	clearWriting
)

// commitPinned merges the blob's changes into the stored attributes a,
// sets or clears FlagWriting as writing says, and commits a if anything
// changed, with a write record when the data did; then the blob's state is
// what the store has seen. Not before: a reader between the two would
// take the old attributes as having seen the blob's news. The caller
// holds the lock.
func (s *Store) commitPinned(a *Attr, p *pin, writing int, actor *Actor) error {
	old := *a
	st, data, err := s.mergeBlob(a, p)
	if err != nil {
		return err
	}
	switch writing {
	case setWriting:
		a.Flags |= FlagWriting
	case clearWriting:
		a.Flags &^= FlagWriting
	}
	// Readers retry across the commit and the new seen (see pins.seq).
	s.pins.seq.Add(1)
	defer s.pins.seq.Add(1)
	if *a != old {
		b := s.db.NewBatch()
		defer b.Close()
		b.Set(attrKey(a.Ino), a.encode(), nil)
		if data {
			s.blobs.written(a.Ino)
			err = s.commitRecord(b, &Record{Op: JWrite, Ino: a.Ino, Size: a.Size, where: s.inoWhere(a.Ino)}, actor)
		} else {
			err = s.commit(b)
		}
		if err != nil {
			return err
		}
	}
	p.seen.Store(&st)
	return nil
}

// mergePin merges what the kernel changed in ino's blob, if pinned, into
// its attributes a. Errors leave a as it was (the blob file is there while
// pinned; a failing fstat has nothing better to offer).
func (s *Store) mergePin(a *Attr, p *pin) {
	if p == nil {
		if a.Flags&FlagBlob == 0 {
			return
		}
		if p = s.pins.get(a.Ino); p == nil {
			return
		}
	}
	s.mergeBlob(a, p)
}

// mergeBlob merges the pinned blob's state st into a and reports whether
// its data changed.
func (s *Store) mergeBlob(a *Attr, p *pin) (st blobStat, data bool, err error) {
	st, err = statBlob(p.f)
	if err != nil {
		return st, false, err
	}
	seen := *p.seen.Load()
	if st.size != seen.size || st.mtime != seen.mtime || st.ctime != seen.ctime || st.size != a.Size {
		data = st.size != a.Size || st.mtime != seen.mtime
		a.Size = max(a.Size, st.size)
		a.Blocks = st.blocks
		if st.mtime != seen.mtime {
			a.Mtime = st.mtime
		}
		a.Ctime = max(a.Ctime, st.ctime)
	}
	if st.atime != seen.atime && NeedsAtime(a) {
		a.Atime = max(a.Atime, st.atime)
	}
	return st, data, nil
}

// pinnedMoved tells the pin of a (if any) that the store itself just
// changed the blob or committed a: the blob's access time is set to a's
// (so that the host's relatime decides as the store would: a read after
// utimens), and the blob's new state is seen, so that the host's times for
// the store's own change do not replace a's. The caller holds the lock.
func (s *Store) pinnedMoved(a *Attr) {
	p := s.pins.get(a.Ino)
	if p == nil {
		return
	}
	s.pins.seq.Add(1)
	defer s.pins.seq.Add(1)
	st, err := statBlob(p.f)
	if err == nil && st.atime != a.Atime && setBlobAtime(p.f, a.Atime) == nil {
		st, err = statBlob(p.f) // the new atime, and the ctime it moved
	}
	if err == nil {
		p.seen.Store(&st)
	}
}

// setBlobAtime sets a blob file's access time (its mtime stays).
func setBlobAtime(f *os.File, atime int64) error {
	ts := []unix.Timespec{unix.NsecToTimespec(atime), {Nsec: unix.UTIME_OMIT}}
	return unix.UtimesNanoAt(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", f.Fd()), ts, 0)
}

// writingPinned lists the blobs pinned for writing, for a sync: the kernel
// wrote them without the store knowing.
func (s *Store) writingPinned() {
	if s.pins.n.Load() == 0 {
		return
	}
	s.pins.mu.Lock()
	defer s.pins.mu.Unlock()
	for ino, p := range s.pins.m {
		if p.writers.Load() > 0 {
			s.blobs.written(ino)
		}
	}
}

// recoverWriting takes the size and times of a blob that was pinned for
// writing when the store was last closed without unpinning it (a crash):
// the kernel may have written past the recorded size, and those bytes are
// the file's. One batch, with a write record.
func (s *Store) recoverWriting(a *Attr) error {
	f, release, err := s.blobs.acquire(a.Ino, false)
	if err != nil {
		return err
	}
	defer release()
	st, err := statBlob(f)
	if err != nil {
		return err
	}
	a.Size, a.Blocks = st.size, st.blocks
	a.Mtime, a.Ctime = max(a.Mtime, st.mtime), max(a.Ctime, st.ctime)
	a.Flags &^= FlagWriting
	s.blobs.written(a.Ino)
	b := s.db.NewBatch()
	defer b.Close()
	b.Set(attrKey(a.Ino), a.encode(), nil)
	return s.commitRecord(b, &Record{Op: JWrite, Ino: a.Ino, Size: a.Size, where: s.inoWhere(a.Ino)}, nil)
}

// unpinAll commits every pin's changes and clears FlagWriting (the store
// is closing; the kernel no longer writes).
func (s *Store) unpinAll() error {
	s.pins.mu.Lock()
	inos := make([]uint64, 0, len(s.pins.m))
	for ino := range s.pins.m {
		inos = append(inos, ino)
	}
	s.pins.mu.Unlock()
	var err error
	s.pins.seq.Add(1)
	defer s.pins.seq.Add(1)
	for _, ino := range inos {
		unlock := s.lockInodes(ino)
		if p := s.pins.get(ino); p != nil {
			if _, perr := s.commitPin(ino, p, clearWriting, nil); err == nil {
				err = perr
			}
			s.dropPin(ino, p)
		}
		unlock()
	}
	return err
}

// cutPinned cuts the blob of a, pinned for writing, to size before the
// batch with the new size commits (see setAttr). The caller holds the lock.
func (s *Store) cutPinned(a *Attr, size uint64) error {
	f, release, err := s.blobs.acquireOwn(a.Ino)
	if err != nil {
		return err
	}
	defer release()
	if err := f.Truncate(int64(size)); err != nil {
		return fmt.Errorf("truncate blob of inode %d: %w", a.Ino, err)
	}
	s.blobs.written(a.Ino)
	return nil
}

// setPinnedContent is SetContent for a pinned blob: the content is written
// into the blob in place (cut, then written as by write), so the kernel's
// open files see it. Unlike SetContent into chunks it is not all or
// nothing after a crash. The caller holds the lock.
func (s *Store) setPinnedContent(actor *Actor, a Attr, data []byte) (Attr, error) {
	if err := s.cutPinned(&a, 0); err != nil {
		return Attr{}, err
	}
	a.Size = 0
	a, _, err := s.writeBlob(actor, a, 0, data, nil)
	return a, err
}

// MakeBlob turns the empty regular file ino into a blob, so that it can
// be pinned (PinBlob) before its first byte: for a file created to be
// written whole, which may well grow big (the FUSE server does it for
// creates with O_TRUNC). It reports false, changing nothing, if ino is not
// an empty local file or the store keeps no blobs. A blob left smaller
// than the threshold returns to chunks at its last unpin.
func (s *Store) MakeBlob(ino uint64) (bool, error) {
	s.enter()
	defer s.leave()
	if s.blobThreshold == math.MaxUint64 {
		return false, nil
	}
	unlock := s.lockInodes(ino)
	defer unlock()
	a, err := s.storedAttr(ino)
	if err != nil || !a.IsRegular() || a.Size != 0 || a.Flags&(FlagBlob|FlagRemote) != 0 {
		return false, err
	}
	b := s.db.NewBatch()
	defer b.Close()
	_, release, err := s.toBlob(b, &a)
	if err != nil {
		return false, err
	}
	release()
	b.Set(attrKey(ino), a.encode(), nil)
	if err := s.commit(b); err != nil {
		s.blobs.remove(ino)
		return false, err
	}
	return true, nil
}

// unblob turns the blob a, no longer pinned and smaller than the
// threshold, back into chunks (MakeBlob made it a blob before it was
// written). The content stays; the journal has nothing to record. The
// caller holds the lock.
func (s *Store) unblob(a *Attr) error {
	data := make([]byte, a.Size)
	if err := s.readBlob(a, 0, data); err != nil {
		return err
	}
	b := s.db.NewBatchWithSize(len(data) + 256)
	defer b.Close()
	c := *a
	c.Flags &^= FlagBlob
	c.Size, c.Blocks = 0, 0
	putContent(b, &c, data)
	b.Set(attrKey(c.Ino), c.encode(), nil)
	if err := s.commit(b); err != nil {
		return err
	}
	s.dropBlob(c.Ino)
	return nil
}
