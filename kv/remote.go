package kv

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// Origin is where an imported file came from: which source of the workspace
// spec, the file's name there and its version. Origins let a lazy file be
// fetched, a refresh tell an untouched file from an edited one, and sync
// back know what the remote held.
type Origin struct {
	Source uint32 // index of the source in the workspace spec
	Key    string // name at the source: object key, path in the repository
	ID     string // version at the source: ETag, blob hash
	// Ctime is the inode's change time when it last matched the source.
	// Any later change to the file (data, mode, owner, name) moves ctime,
	// so Unchanged is a cheap, conservative test for local edits.
	Ctime int64
}

// Unchanged reports whether a file with attributes a still holds what it
// had when it matched its source.
func (o *Origin) Unchanged(a *Attr) bool { return a.Ctime == o.Ctime }

const originVersion = 1

func (o *Origin) encode() []byte {
	b := make([]byte, 0, 1+5+len(o.Key)+len(o.ID)+2*binary.MaxVarintLen64)
	b = append(b, originVersion)
	b = binary.AppendUvarint(b, uint64(o.Source))
	b = binary.AppendUvarint(b, uint64(len(o.Key)))
	b = append(b, o.Key...)
	b = binary.AppendUvarint(b, uint64(len(o.ID)))
	b = append(b, o.ID...)
	return binary.AppendVarint(b, o.Ctime)
}

func decodeOrigin(b []byte) (Origin, error) {
	orig := b
	bad := func() error { return corrupt("origin record %x", orig) } // formatted only when needed
	if len(b) == 0 || b[0] != originVersion {
		return Origin{}, bad()
	}
	b = b[1:]
	var o Origin
	src, n := binary.Uvarint(b)
	if n <= 0 || src > 1<<32-1 {
		return Origin{}, bad()
	}
	o.Source, b = uint32(src), b[n:]
	var ok bool
	if b, ok = decodeStrings(b, &o.Key, &o.ID); !ok {
		return Origin{}, bad()
	}
	ct, n := binary.Varint(b)
	if n <= 0 || n != len(b) {
		return Origin{}, bad()
	}
	o.Ctime = ct
	return o, nil
}

// decodeStrings reads length-prefixed strings (a uvarint length, then the
// bytes) into dsts and returns the rest of b.
func decodeStrings(b []byte, dsts ...*string) ([]byte, bool) {
	for _, dst := range dsts {
		l, n := binary.Uvarint(b)
		if n <= 0 || uint64(len(b)-n) < l {
			return nil, false
		}
		*dst, b = string(b[n:n+int(l)]), b[n+int(l):]
	}
	return b, true
}

// Origin returns where ino came from, or ErrNotFound for a file that was
// made in the workspace.
func (s *Store) Origin(ino uint64) (o Origin, err error) {
	s.enter()
	defer s.leave()
	err = s.view(originKey(ino), func(v []byte) (err error) {
		o, err = decodeOrigin(v)
		return err
	})
	return o, err
}

// SetOrigin records that ino now matches its source as o says; o.Ctime is
// set to the inode's current change time.
func (s *Store) SetOrigin(ino uint64, o Origin) error {
	s.enter()
	defer s.leave()
	unlock := s.lockInodes(ino)
	defer unlock()
	a, err := s.GetAttr(ino)
	if err != nil {
		return err
	}
	o.Ctime = a.Ctime
	b := s.db.NewBatch()
	defer b.Close()
	b.Set(originKey(ino), o.encode(), nil)
	return s.commit(b)
}

// A Fetcher opens the content of a remote file (one with FlagRemote) at its
// source. The store reads exactly size bytes from it; a different length
// means the source changed and fails the fetch.
type Fetcher func(ctx context.Context, ino uint64, o Origin, size uint64) (io.ReadCloser, error)

// SetFetcher installs the function that fetches remote files. Without one,
// reading a remote file fails.
func (s *Store) SetFetcher(f Fetcher) { s.fetcher.Store(&f) }

type fetchCall struct {
	done chan struct{}
	err  error
}

// fetchBatch is how much fetched data goes into one batch.
const fetchBatch = 16 * ChunkSize

// lockLocalAttr locks ino's stripe and reads its attributes. With local, a
// remote file is fetched first: the lock is dropped for the fetch (which
// takes it batch by batch) and taken again. The attributes read under the
// lock decide, so a local file costs no extra read.
func (s *Store) lockLocalAttr(ino uint64, local bool) (Attr, func(), error) {
	for {
		unlock := s.lockInodes(ino)
		a, err := s.GetAttr(ino)
		if err != nil {
			unlock()
			return Attr{}, nil, err
		}
		if !local || a.Flags&FlagRemote == 0 {
			return a, unlock, nil
		}
		unlock()
		if err := s.materialize(ino, nil); err != nil {
			return Attr{}, nil, err
		}
	}
}

// ensureLocal fetches ino's content if it is still remote. A file never
// becomes remote again, so a check without locks is enough.
func (s *Store) ensureLocal(ino uint64) error {
	a, err := s.GetAttr(ino)
	if err != nil || a.Flags&FlagRemote == 0 {
		return err
	}
	return s.materialize(ino, nil)
}

// A fetchReq is what the reader that starts a fetch already knows and
// wants: the attributes and origin it read (so the fetch does not read
// them again), whether the read should update the access time (in the
// batch that makes the file local, instead of a commit of its own) and a
// range to copy out of the fetched data (a file that fits in one batch is
// answered from the buffer, without reading it back from the store).
type fetchReq struct {
	attr   Attr
	origin Origin
	known  bool // attr and origin were read
	atime  bool
	off    int64
	dst    []byte

	// Set by the fetch when it filled the whole file in one batch and
	// copied the range: the bytes copied and the attributes it committed.
	served bool
	n      int
	done   Attr
}

// materialize fetches a remote file's content into the store. Concurrent
// callers for one inode share one fetch and its outcome; a failed fetch is
// forgotten, so the next access tries again. req, if not nil, is used by
// the caller that starts the fetch (waiters only wait).
func (s *Store) materialize(ino uint64, req *fetchReq) error {
	s.fetchMu.Lock()
	if c, ok := s.fetches[ino]; ok {
		s.fetchMu.Unlock()
		<-c.done
		return c.err
	}
	c := &fetchCall{done: make(chan struct{})}
	s.fetches[ino] = c
	s.fetchMu.Unlock()

	c.err = s.fetch(ino, req)
	if c.err != nil {
		s.log.Error("fetch of a remote file failed", "ino", ino, "err", c.err)
	}
	s.fetchMu.Lock()
	delete(s.fetches, ino)
	s.fetchMu.Unlock()
	close(c.done)
	return c.err
}

// errFetchMoot stops a fetch whose file stopped being remote meanwhile (it
// was truncated to zero or deleted): nobody needs the content any more.
var errFetchMoot = errors.New("file is no longer remote")

func (s *Store) fetch(ino uint64, req *fetchReq) error {
	var a Attr
	var o Origin
	if req != nil && req.known {
		// Read by the caller without a lock, as the store would read them
		// here: fill checks under the lock that the file is still remote.
		a, o = req.attr, req.origin
	} else {
		var err error
		a, err = s.GetAttr(ino)
		if err != nil || a.Flags&FlagRemote == 0 {
			return err
		}
		if o, err = s.Origin(ino); err != nil {
			return fmt.Errorf("remote file %d: origin: %w", ino, err)
		}
	}
	f := s.fetcher.Load()
	if f == nil || *f == nil {
		return fmt.Errorf("remote file %d (%q of source %d): no fetcher for its source", ino, o.Key, o.Source)
	}
	size := a.Size
	rc, err := (*f)(s.ctx, ino, o, size)
	if err != nil {
		return fmt.Errorf("fetch %q: %w", o.Key, err)
	}
	defer rc.Close()
	buf := make([]byte, min(fetchBatch, size))
	var off, blocks uint64
	for {
		n, rerr := io.ReadFull(rc, buf[:min(uint64(len(buf)), size-off)])
		switch {
		case rerr == io.EOF || rerr == io.ErrUnexpectedEOF:
			return fmt.Errorf("fetch %q: the source has %d bytes, %d were recorded at import", o.Key, off+uint64(n), size)
		case rerr != nil:
			return fmt.Errorf("fetch %q: %w", o.Key, rerr)
		}
		last := off+uint64(n) == size
		if last {
			// The recorded size is read; a source with more must not pass
			// for complete.
			var probe [1]byte
			if m, _ := rc.Read(probe[:]); m > 0 {
				return fmt.Errorf("fetch %q: the source has more than the %d bytes recorded at import", o.Key, size)
			}
		}
		var fr *fetchReq
		if last {
			fr = req
		}
		err := s.fill(ino, off, buf[:n], &blocks, last, fr)
		if err == errFetchMoot {
			return nil
		}
		if err != nil {
			return err
		}
		if last && off == 0 && req != nil && req.off >= 0 {
			// The whole file is in buf and is what the store now holds.
			if uint64(req.off) < size {
				req.n = copy(req.dst, buf[req.off:n])
			}
			req.served = true
		}
		off += uint64(n)
		if last {
			return nil
		}
	}
}

// fill stores fetched data at off (a multiple of ChunkSize) and, with last,
// makes the file local (and, if req asks, updates its access time, then
// leaves the attributes in req.done). The data's chunks never existed, so
// blocks counts them from zero.
func (s *Store) fill(ino, off uint64, data []byte, blocks *uint64, last bool, req *fetchReq) error {
	unlock := s.lockInodes(ino)
	defer unlock()
	a, err := s.GetAttr(ino)
	if err == ErrNotFound {
		return errFetchMoot
	}
	if err != nil {
		return err
	}
	if a.Flags&FlagRemote == 0 {
		return errFetchMoot
	}
	b := s.db.NewBatchWithSize(len(data) + 256)
	defer b.Close()
	for pos := 0; pos < len(data); pos += ChunkSize {
		chunk := data[pos:min(pos+ChunkSize, len(data))]
		b.Set(chunkKey(ino, (off+uint64(pos))/ChunkSize), chunk, nil)
		*blocks += blocksFor(uint64(len(chunk)))
	}
	if last {
		a.Flags &^= FlagRemote
		a.Blocks = *blocks
		if req != nil && req.atime && NeedsAtime(&a) {
			a.Atime = now()
		}
		b.Set(attrKey(ino), a.encode(), nil)
	}
	if err := s.commit(b); err != nil {
		return err
	}
	if req != nil {
		req.done = a
	}
	return nil
}

// GetMeta returns the value that SetMeta stored under name, or ErrNotFound.
// Meta values belong to the layers above the store (the workspace spec,
// sync cursors).
func (s *Store) GetMeta(name string) ([]byte, error) {
	s.enter()
	defer s.leave()
	return s.get(userMetaKey(name))
}

// SetMeta stores value under name and syncs it to stable storage.
func (s *Store) SetMeta(name string, value []byte) error {
	s.enter()
	defer s.leave()
	return s.UpdateMeta(map[string][]byte{name: value}, nil)
}

// fetchState is the part of Store that lazy fetching uses.
type fetchState struct {
	ctx     context.Context
	cancel  context.CancelFunc
	fetchMu sync.Mutex
	fetches map[uint64]*fetchCall
}

// Fetch makes sure a remote file's content is in the store, fetching it
// now if it is not (eager imports and prefetching use it).
func (s *Store) Fetch(ino uint64) error {
	s.enter()
	defer s.leave()
	return s.ensureLocal(ino)
}

// UpdateMeta sets and deletes meta values in one batch and syncs it.
func (s *Store) UpdateMeta(set map[string][]byte, del []string) error {
	s.enter()
	defer s.leave()
	b := s.db.NewBatch()
	defer b.Close()
	for k, v := range set {
		b.Set(userMetaKey(k), v, nil)
	}
	for _, k := range del {
		b.Delete(userMetaKey(k), nil)
	}
	if err := s.commit(b); err != nil {
		return err
	}
	return s.Sync()
}

// ScanMeta calls fn for the meta values whose names start with prefix, in
// name order, until fn returns false.
func (s *Store) ScanMeta(prefix string, fn func(name string, value []byte) bool) error {
	s.enter()
	defer s.leave()
	lo := userMetaKey(prefix)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return err
	}
	n := len(userMetaKey(""))
	for it.First(); it.Valid(); it.Next() {
		if !fn(string(it.Key()[n:]), it.Value()) {
			break
		}
	}
	return it.Close()
}

// ReplaceRemote makes ino a remote file again, with a new size, mtime and
// version at its origin (a refresh found the source changed and the file
// untouched here): its old content is dropped and the new one is fetched
// on first read. The origin's change time becomes the new ctime.
func (s *Store) ReplaceRemote(ino uint64, size uint64, mtime int64, o Origin) (Attr, error) {
	s.enter()
	defer s.leave()
	return s.replaceRemote(nil, ino, size, mtime, o)
}

func (s *Store) replaceRemote(actor *Actor, ino uint64, size uint64, mtime int64, o Origin) (Attr, error) {
	if size > MaxFileSize {
		return Attr{}, ErrFileTooLarge
	}
	unlock := s.lockInodes(ino)
	defer unlock()
	a, err := s.GetAttr(ino)
	if err != nil {
		return Attr{}, err
	}
	if !a.IsRegular() {
		return Attr{}, ErrInvalid
	}
	b := s.db.NewBatch()
	defer b.Close()
	wasBlob := a.Flags&FlagBlob != 0
	if wasBlob && s.pins.get(ino) != nil {
		return Attr{}, ErrBusy // open for passthrough I/O: it must stay a blob
	}
	if wasBlob { // the blob goes once the batch committed
		a.Flags &^= FlagBlob
	} else if err := s.truncate(b, &a, 0); err != nil {
		return Attr{}, err
	}
	ts := now()
	a.Size, a.Blocks, a.Mtime, a.Ctime = size, 0, mtime, ts
	if size > 0 {
		a.Flags |= FlagRemote
	} else {
		a.Flags &^= FlagRemote
	}
	o.Ctime = ts
	b.Set(attrKey(ino), a.encode(), nil)
	b.Set(originKey(ino), o.encode(), nil)
	if err := s.commitRecord(b, &Record{Op: JRefresh, Ino: ino, Size: size, where: s.inoWhere(ino)}, actor); err != nil {
		return Attr{}, err
	}
	if wasBlob {
		s.dropBlob(ino)
	}
	return a, nil
}
