package kv

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
	"golang.org/x/sys/unix"
)

// Big files keep their data outside Pebble, in a file of their own under
// the store's blobs/ directory (a "blob"), marked FlagBlob. Pebble writes
// every byte twice (its log, then a table) and copies it three times on
// the way; a blob is written once, through the page cache, as a local file
// system writes it. Small files stay in Pebble's chunks: there a create
// costs no file of its own and a whole tree of them is one log.
//
// A file becomes a blob when a write takes it past Options.BlobThreshold:
// its chunks are copied into a new blob file, and one batch deletes them
// and sets FlagBlob. Whole-file writes (SetContent) always go to chunks, in
// one batch, turning a blob back into chunks: they promise the old content
// or the new after a crash, which a file written in place cannot.
//
// Ordering (docs/durability.md says what it promises):
//   - data is written to the blob before the batch that records the new
//     size commits, and that batch is handed to the system at once; the
//     periodic sync (and fsync) syncs the blobs written since the last
//     sync before it syncs Pebble;
//   - bytes of the blob past the recorded size (a write whose batch was
//     lost) are cut off when the store opens and before the size grows
//     over them; a shrinking truncate cuts only once its batch is with the
//     system;
//   - a blob is removed only once the batch that deletes its inode, or
//     turns it back into chunks, is with the system; blobs that no inode
//     claims (a crash in between) are removed when the store opens.
//
// Readers do not take the inode's lock: a read that races with a write or
// a truncate sees some of each, as on a local file system.

// DefaultBlobThreshold is the size past which a file's data moves out of
// Pebble into a blob.
const DefaultBlobThreshold = 1 << 20

// maxOpenBlobs bounds the blob files the store keeps open.
const maxOpenBlobs = 128

type blobStore struct {
	dir    string
	noSync bool
	source BlobSource // blobs still to come (Options.Blobs); nil: none

	// linking: the snapshots linking the blobs of their points (see
	// blobLinks; replaced, never changed in place, under linkMu); nil:
	// none.
	linking atomic.Pointer[[]*blobLinks]
	linkMu  sync.Mutex

	mu    sync.Mutex
	open  map[uint64]*openBlob
	dirty map[uint64]struct{} // written since the last sync
	tick  uint64
}

type openBlob struct {
	f    *os.File
	refs int
	used uint64
	gone bool // removed or replaced: close at the last release
	// own: the file was seen with one link (no snapshot or fork shares
	// it) since the last snapshot; see acquireOwn.
	own bool
}

func (bs *blobStore) path(ino uint64) string {
	return filepath.Join(bs.dir, strconv.FormatUint(ino, 16))
}

// errBlobGone: the blob was removed (its inode was deleted, or turned back
// into chunks) between reading the attributes and opening it.
var errBlobGone = errors.New("blob removed")

// BlobSource supplies blob files that the store's blobs/ directory does
// not hold yet (a workspace resumed lazily from a hibernated image). A
// blob file it supplies appears whole, by a rename or a link, never
// written in place; it never replaces a file that is there.
type BlobSource interface {
	// Fetch makes ino's blob file present if it is one the source still
	// owes, waiting for it until cancel closes (nil: no end); it returns
	// false if it owes none. An error (the blob cannot be had, or was
	// found corrupt, or cancel closed first) fails the call that needed
	// the blob; a wait cancelled does not stop the fetch.
	Fetch(ino uint64, cancel <-chan struct{}) (bool, error)
	// Drop tells the source that the store removed ino's blob (the inode
	// is gone, or its blob was turned back into chunks or is being
	// replaced): once Drop returns, the source never makes that file.
	Drop(ino uint64)
	// FetchAll waits until the source owes nothing (a snapshot links
	// every blob file).
	FetchAll() error
}

// acquire returns ino's blob file, opening it (and with create, creating
// it) if needed; release must be called when done with it. A blob file
// that is absent is asked of the source, if there is one.
func (bs *blobStore) acquire(ino uint64, create bool) (*os.File, func(), error) {
	if create {
		bs.barrier(ino)
	}
	f, release, err := bs.acquireLocal(ino, create)
	if err != errBlobGone || bs.source == nil {
		return f, release, err
	}
	ok, err := bs.source.Fetch(ino, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("blob of inode %d: %w", ino, err)
	}
	if !ok {
		return nil, nil, errBlobGone
	}
	return bs.acquireLocal(ino, create)
}

// ErrInterrupted: a call waited for a blob still being fetched, and was
// interrupted first.
var ErrInterrupted = &Error{"interrupted while the file's data is fetched", syscall.EINTR}

// FetchBlob waits until ino's blob file is there, if the store's
// BlobSource still owes it, or until cancel closes (ErrInterrupted): for
// a call that can be interrupted (a FUSE open or read), before it takes
// any lock. It costs nothing for a store without a source.
func (s *Store) FetchBlob(ino uint64, cancel <-chan struct{}) error {
	if s.blobs.source == nil {
		return nil
	}
	_, err := s.blobs.source.Fetch(ino, cancel)
	if err != nil {
		select {
		case <-cancel:
			return ErrInterrupted
		default:
		}
		return fmt.Errorf("blob of inode %d: %w", ino, err)
	}
	return nil
}

func (bs *blobStore) acquireLocal(ino uint64, create bool) (*os.File, func(), error) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	bs.tick++
	ob := bs.open[ino]
	if ob == nil {
		flags := os.O_RDWR | syscall.O_NOATIME // a pinned blob's atime is the reads the kernel made
		if create {
			flags |= os.O_CREATE
		}
		f, err := os.OpenFile(bs.path(ino), flags, 0o600)
		if errors.Is(err, os.ErrNotExist) && !create {
			return nil, nil, errBlobGone
		}
		if err != nil {
			return nil, nil, fmt.Errorf("blob of inode %d: %w", ino, err)
		}
		bs.evictLocked(maxOpenBlobs - 1)
		ob = &openBlob{f: f}
		bs.open[ino] = ob
	}
	ob.refs++
	ob.used = bs.tick
	return ob.f, func() { bs.release(ob) }, nil
}

// release gives back one reference to ob, taken under bs.mu.
func (bs *blobStore) release(ob *openBlob) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if ob.refs--; ob.refs == 0 && ob.gone {
		ob.f.Close()
	}
}

// forgetLocked drops ino's open blob, if any: closed now, or by the last
// release of those still reading it. bs.mu is held.
func (bs *blobStore) forgetLocked(ino uint64) {
	ob := bs.open[ino]
	if ob == nil {
		return
	}
	delete(bs.open, ino)
	if ob.refs == 0 {
		ob.f.Close()
	} else {
		ob.gone = true
	}
}

// evictLocked closes the least recently used blob that is idle and synced
// once too many are open: one written since the last sync stays open for
// that sync (which must know it), so the bound is exceeded for a few
// seconds while many big files are written. bs.mu is held.
func (bs *blobStore) evictLocked(limit int) {
	for len(bs.open) > limit {
		var victim uint64
		var oldest *openBlob
		for ino, ob := range bs.open {
			if _, dirty := bs.dirty[ino]; !dirty && ob.refs == 0 && (oldest == nil || ob.used < oldest.used) {
				victim, oldest = ino, ob
			}
		}
		if oldest == nil {
			return
		}
		delete(bs.open, victim)
		oldest.f.Close()
	}
}

// written notes that ino's blob must be synced with the next sync.
func (bs *blobStore) written(ino uint64) {
	bs.mu.Lock()
	bs.dirty[ino] = struct{}{}
	bs.mu.Unlock()
}

// remove deletes ino's blob. Readers that hold it open keep reading it.
func (bs *blobStore) remove(ino uint64) error {
	bs.barrier(ino)
	if bs.source != nil {
		bs.source.Drop(ino) // before the file goes: nothing brings it back
	}
	bs.mu.Lock()
	bs.forgetLocked(ino)
	delete(bs.dirty, ino)
	bs.mu.Unlock()
	err := os.Remove(bs.path(ino))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// sync makes the data written to blobs since the last sync durable.
func (bs *blobStore) sync() error {
	type toSync struct {
		ino uint64
		ob  *openBlob
	}
	bs.mu.Lock()
	var todo []toSync
	for ino := range bs.dirty {
		if ob := bs.open[ino]; ob != nil {
			ob.refs++
			todo = append(todo, toSync{ino, ob})
		}
	}
	clear(bs.dirty)
	bs.mu.Unlock()
	defer func() { // what was kept open for this sync may go now
		bs.mu.Lock()
		bs.evictLocked(maxOpenBlobs)
		bs.mu.Unlock()
	}()
	var err error
	for _, t := range todo {
		if !bs.noSync {
			if serr := unix.Fdatasync(int(t.ob.f.Fd())); serr != nil {
				if err == nil {
					err = fmt.Errorf("sync blob %s: %w", t.ob.f.Name(), serr)
				}
				bs.written(t.ino) // to be tried again
			}
		}
		bs.release(t.ob)
	}
	return err
}

// closeAll closes every open blob (the store is closing).
func (bs *blobStore) closeAll() {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	for ino := range bs.open {
		bs.forgetLocked(ino)
	}
}

// blocksOf returns the 512-byte blocks a blob occupies.
func blocksOf(f *os.File) (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return 0, err
	}
	return uint64(st.Blocks), nil
}

// cutBlob cuts the blob back to a's size if it holds more (bytes there are
// from a write whose batch never committed, and must not show once the
// size grows over them, or from before a truncate) and reports whether it
// did.
func cutBlob(f *os.File, a *Attr) (bool, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return false, err
	}
	if uint64(st.Size) <= a.Size {
		return false, nil
	}
	return true, f.Truncate(int64(a.Size))
}

// readBlob reads [off, off+len(dst)) of a blob file a, with zeros past the
// blob's own end (a size grown by truncate or fallocate, or a sparse tail).
// dst is within a's size.
func (s *Store) readBlob(a *Attr, off int64, dst []byte) error {
	f, release, err := s.blobs.acquire(a.Ino, false)
	if err != nil {
		return err
	}
	defer release()
	n, err := f.ReadAt(dst, off)
	if err != nil && err != io.EOF {
		return fmt.Errorf("read blob of inode %d: %w", a.Ino, err)
	}
	clear(dst[n:])
	return nil
}

// toBlob moves the data of the chunked file a into a new blob, in b: the
// chunks are deleted and FlagBlob set when b commits. It returns the blob,
// open, and its release. An empty file has no chunks: it gets no range
// deletion either (MakeBlob makes one per created file, and every read of
// the store would step over the tombstones).
func (s *Store) toBlob(b *pebble.Batch, a *Attr) (*os.File, func(), error) {
	if err := s.blobs.remove(a.Ino); err != nil { // a leftover of a crash
		return nil, nil, err
	}
	f, release, err := s.blobs.acquire(a.Ino, true)
	if err != nil {
		return nil, nil, err
	}
	if a.Size > 0 {
		err = s.moveChunks(b, a, f)
	}
	if err != nil {
		release()
		s.blobs.remove(a.Ino)
		return nil, nil, fmt.Errorf("move inode %d to a blob: %w", a.Ino, err)
	}
	s.blobs.written(a.Ino)
	a.Flags |= FlagBlob
	return f, release, nil
}

// moveChunks copies the chunks of a into its new blob f, sized to a, and
// deletes them in b.
func (s *Store) moveChunks(b *pebble.Batch, a *Attr, f *os.File) error {
	lo, hi := kindPrefix(a.Ino, kindChunk), prefixEnd(kindPrefix(a.Ino, kindChunk))
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		off := int64(chunkIndex(it.Key()) * ChunkSize)
		v := it.Value()
		if uint64(off) >= a.Size {
			break
		}
		v = v[:min(uint64(len(v)), a.Size-uint64(off))]
		if _, err := f.WriteAt(v, off); err != nil {
			it.Close()
			return err
		}
	}
	if err := it.Close(); err != nil {
		return err
	}
	if err := extendBlob(f, a.Size); err != nil { // a sparse tail
		return err
	}
	b.DeleteRange(lo, hi, nil)
	return nil
}

// gcBlobs removes blobs that no inode claims: left by a crash between a
// blob's creation or removal and the batch that records it.
func (s *Store) gcBlobs() error {
	entries, err := os.ReadDir(s.blobs.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	removed, recovered := 0, 0
	for _, e := range entries {
		ino, perr := strconv.ParseUint(e.Name(), 16, 64)
		if perr == nil {
			if a, err := s.storedAttr(ino); err == nil && a.Flags&FlagBlob != 0 { // no pins at open
				if a.Flags&FlagWriting != 0 {
					if err := s.recoverWriting(&a); err != nil {
						return err
					}
					recovered++
					continue
				}
				if !blobSettled(e, &a) {
					if err := s.settleBlob(&a); err != nil {
						return err
					}
				}
				continue
			} else if err != nil && err != ErrNotFound {
				return err
			}
		}
		if err := os.Remove(filepath.Join(s.blobs.dir, e.Name())); err != nil {
			return err
		}
		removed++
	}
	if removed > 0 {
		s.log.Info("removed blobs that no inode claims", "count", removed)
	}
	if recovered > 0 {
		s.log.Info("took the sizes of blobs written directly before a crash", "count", recovered)
	}
	return nil
}

// blobSettled tells from a blob's directory entry (a stat, no open)
// whether it agrees with a: nothing past the size, the blocks a counts.
func blobSettled(e os.DirEntry, a *Attr) bool {
	info, err := e.Info()
	if err != nil {
		return false
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	return ok && uint64(st.Size) <= a.Size && uint64(st.Blocks) == a.Blocks
}

// writeBlob is write for a file that is, or is becoming, a blob. The
// caller holds ino's lock and checked the arguments; a is current.
func (s *Store) writeBlob(actor *Actor, a Attr, off int64, data []byte, kill func(gid uint32) bool) (Attr, bool, error) {
	b := s.db.NewBatch()
	defer b.Close()
	f, done, err := s.blobForWrite(b, &a, uint64(off))
	if err != nil {
		return Attr{}, false, err
	}
	committed := false
	defer func() { done(committed) }()
	if _, err := f.WriteAt(data, off); err != nil {
		return Attr{}, false, fmt.Errorf("write blob of inode %d: %w", a.Ino, err)
	}
	s.blobs.written(a.Ino)
	if a.Blocks, err = blocksOf(f); err != nil {
		return Attr{}, false, err
	}
	modeChanged, err := s.commitWrite(actor, b, &a, uint64(off)+uint64(len(data)), kill)
	if err != nil {
		return Attr{}, false, err
	}
	committed = true
	// The data is in the system already: hand it the batch too, so that a
	// crash of the daemon leaves data and size together (but for this
	// moment, see docs/durability.md).
	return a, modeChanged, s.flushNow()
}

// blobForWrite returns the blob that a write into a, recorded in b, goes
// to: a's blob, or a new one made from its chunks (toBlob), cut back to
// a's size if the write starts past it (at off). done must be called with
// whether b committed: it lets go of the blob, and removes one made here
// for a batch that did not commit.
func (s *Store) blobForWrite(b *pebble.Batch, a *Attr, off uint64) (f *os.File, done func(committed bool), err error) {
	ino := a.Ino
	moved := a.Flags&FlagBlob == 0
	var release func()
	if moved {
		f, release, err = s.toBlob(b, a)
	} else {
		f, release, err = s.blobs.acquireOwn(ino)
		if err == errBlobGone {
			err = fmt.Errorf("inode %d: its blob is missing", ino)
		}
	}
	if err != nil {
		return nil, nil, err
	}
	done = func(committed bool) {
		if moved && !committed {
			s.blobs.remove(ino)
		}
		release()
	}
	if off > a.Size {
		if _, err := cutBlob(f, a); err != nil {
			done(false)
			return nil, nil, fmt.Errorf("blob of inode %d: %w", ino, err)
		}
	}
	return f, done, nil
}

// truncateBlob is truncate for a blob. Growing, it first cuts off what
// the blob holds past the old size. Shrinking, it leaves the blob as it is:
// the caller cuts it (cutAfterCommit) once the batch with the new size is
// committed and handed to the system, so that a crash in between leaves the
// old size with all its data, never the old size over a cut blob.
func (s *Store) truncateBlob(a *Attr, size uint64) error {
	if size < a.Size {
		a.Size = size
		a.Blocks = min(a.Blocks, blocksFor(size)) // until the cut counts them
		return nil
	}
	f, release, err := s.blobs.acquireOwn(a.Ino)
	if err != nil {
		return err
	}
	defer release()
	if _, err := cutBlob(f, a); err != nil {
		return fmt.Errorf("truncate blob of inode %d: %w", a.Ino, err)
	}
	if err := extendBlob(f, size); err != nil {
		return fmt.Errorf("truncate blob of inode %d: %w", a.Ino, err)
	}
	s.blobs.written(a.Ino)
	if a.Blocks, err = blocksOf(f); err != nil {
		return err
	}
	a.Size = size
	return nil
}

// cutAfterCommit cuts the blob of a (whose new, smaller size is committed)
// to that size, once the batch is with the system, and records the blocks
// it then holds. The caller holds the inode's lock.
func (s *Store) cutAfterCommit(a *Attr) error {
	if err := s.flushNow(); err != nil { // the size first, then the cut
		return err
	}
	return s.settleBlob(a)
}

// fallocateBlob does fallocate's work on a blob's data: a punched or
// zeroed range becomes a hole, and a size about to grow first cuts off
// what lies past the old one. Space is not reserved ahead, as for chunks.
func (s *Store) fallocateBlob(a *Attr, mode uint32, off, end uint64) error {
	f, release, err := s.blobs.acquireOwn(a.Ino)
	if err != nil {
		return err
	}
	defer release()
	if mode&(FallocPunchHole|FallocZeroRange) != 0 && off < a.Size {
		n := min(end, a.Size) - off
		if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, int64(off), int64(n)); err != nil {
			return fmt.Errorf("punch blob of inode %d: %w", a.Ino, err)
		}
	}
	if mode&FallocKeepSize == 0 && end > a.Size {
		if _, err := cutBlob(f, a); err != nil {
			return err
		}
		if err := extendBlob(f, end); err != nil {
			return fmt.Errorf("blob of inode %d: %w", a.Ino, err)
		}
	}
	s.blobs.written(a.Ino)
	a.Blocks, err = blocksOf(f)
	return err
}

// seekBlob is SeekData for a blob: its holes are the blob file's, and the
// part of the size past the blob's own end is one more.
func (s *Store) seekBlob(a *Attr, off int64, whence int) (int64, error) {
	f, release, err := s.blobs.acquire(a.Ino, false)
	if err == errBlobGone {
		err = ErrNotFound
	}
	if err != nil {
		return 0, err
	}
	defer release()
	pos, err := unix.Seek(int(f.Fd()), off, whence)
	switch {
	case err == unix.ENXIO && whence == SeekData:
		return 0, ErrNXIO
	case err == unix.ENXIO: // off is past the blob's end: a hole
		return off, nil
	case err != nil:
		return 0, fmt.Errorf("seek blob of inode %d: %w", a.Ino, err)
	case whence == SeekData && uint64(pos) >= a.Size:
		return 0, ErrNXIO
	}
	return min(pos, int64(a.Size)), nil
}

// settleBlob makes the blob of a agree with a: what it holds past a's size
// goes, and the blocks it then holds are recorded (in a batch of their own)
// if a counts others. The caller holds the inode's lock, or runs alone.
func (s *Store) settleBlob(a *Attr) error {
	f, release, err := s.blobs.acquireOwn(a.Ino)
	if err != nil {
		return err
	}
	defer release()
	cut, err := cutBlob(f, a)
	if err != nil {
		return fmt.Errorf("cut blob of inode %d: %w", a.Ino, err)
	}
	if cut {
		s.blobs.written(a.Ino)
	}
	blocks, err := blocksOf(f)
	if err != nil || blocks == a.Blocks {
		return err
	}
	a.Blocks = blocks
	b := s.db.NewBatch()
	defer b.Close()
	b.Set(attrKey(a.Ino), a.encode(), nil)
	return s.commit(b)
}

// dropBlob removes the blob of an inode that a committed batch deleted or
// turned back into chunks. The batch is handed to the system first: a
// crash must not find the inode still a blob, its blob gone. A failure is
// logged; the next open removes what no inode claims.
func (s *Store) dropBlob(ino uint64) {
	err := s.flushNow()
	if err == nil {
		err = s.blobs.remove(ino)
	}
	if err != nil {
		s.log.Warn("store: removing a blob failed; the next open removes it", "ino", ino, "err", err)
	}
}
