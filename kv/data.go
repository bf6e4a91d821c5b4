package kv

import (
	"errors"
	"github.com/cockroachdb/pebble/v2"
)

// SetAttr valid bits: which fields of a SetAttrRequest to apply.
const (
	SetMode = 1 << iota
	SetUid
	SetGid
	SetSize
	SetAtime // to Atime, or to now with SetAtimeNow
	SetMtime // to Mtime, or to now with SetMtimeNow
	SetAtimeNow
	SetMtimeNow
	SetCtime
	// SetKillPriv clears setuid, setgid (if group-executable) and file
	// capabilities, as a write or truncate by an unprivileged user must.
	SetKillPriv
)

// SetAttrRequest changes some of an inode's attributes (chmod, chown,
// truncate, utimens). The caller has checked permissions; ctime is always
// updated, and mtime too when the size changes. Changing the owner or group
// of a non-directory clears its setuid and setgid bits and capabilities, as
// on Linux (for root too).
type SetAttrRequest struct {
	Valid        uint32
	Mode         uint32 // permission bits only; the type is kept
	Uid, Gid     uint32
	Size         uint64
	Atime, Mtime int64
	Ctime        int64
	// InGroup tells, for SetKillPriv, whether the caller belongs to a group.
	InGroup func(gid uint32) bool
}

// blocksFor is the number of 512-byte blocks that n stored bytes occupy,
// counted in 4 KiB pages as local file systems do.
func blocksFor(n uint64) uint64 { return (n + 4095) / 4096 * 8 }

// Write writes data at off, extending the file as needed, and returns the
// new attributes.
func (s *Store) Write(ino uint64, off int64, data []byte) (Attr, error) {
	s.enter()
	defer s.leave()
	a, _, err := s.write(nil, ino, off, data, nil)
	return a, err
}

// WriteKillPriv is Write by an unprivileged user: it also clears setuid,
// setgid and file capabilities (see killPriv), and reports whether the mode
// changed. inGroup tells whether the writer belongs to a group.
func (s *Store) WriteKillPriv(ino uint64, off int64, data []byte, inGroup func(gid uint32) bool) (Attr, bool, error) {
	s.enter()
	defer s.leave()
	return s.write(nil, ino, off, data, inGroup)
}

// killPriv clears what a write or truncate by an unprivileged user, or a
// change of owner, must clear, by Linux's rules: the setuid bit; the setgid
// bit if the group may execute, or else (then it marks mandatory locking) if
// the caller is not in the file's group (inGroup nil: a chown, which keeps
// it); and the security.capability attribute.
func killPriv(b *pebble.Batch, a *Attr, inGroup func(gid uint32) bool) {
	a.Mode &^= S_ISUID
	if a.Mode&0o010 != 0 || inGroup != nil && !inGroup(a.Gid) {
		a.Mode &^= S_ISGID
	}
	b.Delete(xattrKey(a.Ino, "security.capability"), nil)
}

func (s *Store) write(actor *Actor, ino uint64, off int64, data []byte, kill func(gid uint32) bool) (a Attr, modeChanged bool, err error) {
	if off < 0 {
		return Attr{}, false, ErrInvalid
	}
	end := uint64(off) + uint64(len(data))
	if end > MaxFileSize {
		return Attr{}, false, ErrFileTooLarge
	}
	if err := s.space.check(len(data)); err != nil {
		return Attr{}, false, err
	}
	a, unlock, err := s.lockLocalAttr(ino, true)
	if err != nil {
		return Attr{}, false, err
	}
	defer unlock()
	if len(data) == 0 {
		return a, false, nil // write(2) of nothing changes nothing
	}
	if a.IsDir() {
		return Attr{}, false, ErrIsDir
	}
	if !a.IsRegular() {
		return Attr{}, false, ErrInvalid // only regular files hold data
	}
	if err := s.checkQuota(max(int64(end)-int64(a.Size), 0)); err != nil {
		return Attr{}, false, err
	}
	if a.Flags&FlagBlob != 0 || end > s.blobThreshold {
		return s.writeBlob(actor, a, off, data, kill)
	}
	// An append that starts in the file's last chunk, when the store knows
	// that chunk's length, goes in as a merge operand: Pebble concatenates
	// it to the chunk, which is then neither read back nor written again
	// whole (4 KiB appends to a 1 MiB file: 7x faster). Every
	// maxTailMerges appends the chunk is rewritten whole, which folds them.
	tail, appending := s.attrs.tail(ino)
	appending = appending && uint64(off) == a.Size && tail.ci == a.Size/ChunkSize &&
		tail.len == a.Size%ChunkSize && tail.len != 0 && tail.merges < maxTailMerges
	if appending && s.checkTails {
		if n, err := s.valueLen(chunkKey(ino, tail.ci)); err != nil || uint64(n) != tail.len {
			return Attr{}, false, corrupt("inode %d: chunk %d holds %d bytes (%v), its tail says %d", ino, tail.ci, n, err, tail.len)
		}
	}
	// Size the batch up front: growing it copies the data again. Partial
	// chunks that already hold data are rewritten whole.
	size := len(data) + 256 + len(data)/ChunkSize*32
	if (uint64(off)%ChunkSize != 0 || end%ChunkSize != 0) && uint64(off) < a.Size && !appending {
		size += 2 * ChunkSize
	}
	b := s.db.NewBatchWithSize(size)
	defer b.Close()
	merges := 0 // on the last chunk written
	for pos := uint64(off); pos < end; {
		ci := pos / ChunkSize
		start := ci * ChunkSize
		within := pos - start
		n := min(ChunkSize-within, end-pos)
		src := data[pos-uint64(off) : pos-uint64(off)+n]
		if appending && ci == tail.ci {
			a.Blocks += blocksFor(within+n) - blocksFor(within)
			b.Merge(chunkKey(ino, ci), src, nil)
			merges = tail.merges + 1
			pos += n
			continue
		}
		merges = 0
		chunk, oldLen := src, 0
		if start < a.Size { // chunks wholly past the end of the file do not exist
			if n == ChunkSize { // a whole chunk: only the old length matters
				oldLen, err = s.valueLen(chunkKey(ino, ci))
			} else {
				var old []byte
				old, err = s.get(chunkKey(ino, ci))
				oldLen = len(old)
				if within != 0 || uint64(len(old)) > n {
					chunk = make([]byte, max(uint64(len(old)), within+n))
					copy(chunk, old)
					copy(chunk[within:], src)
				}
			}
			if err != nil && err != ErrNotFound {
				return Attr{}, false, err
			}
		} else if within != 0 {
			chunk = make([]byte, within+n) // zeros before the data
			copy(chunk[within:], src)
		}
		a.Blocks += blocksFor(uint64(len(chunk))) - blocksFor(uint64(oldLen))
		b.Set(chunkKey(ino, ci), chunk, nil)
		pos += n
	}
	if modeChanged, err = s.commitWrite(actor, b, &a, end, kill); err != nil {
		return a, modeChanged, err
	}
	if end == a.Size && end%ChunkSize != 0 {
		ci := end / ChunkSize
		s.attrs.setTail(ino, tailChunk{ci: ci, len: end - ci*ChunkSize, merges: merges})
	}
	return a, modeChanged, nil
}

// maxTailMerges bounds the appends that lie on a chunk as merge operands,
// and so the work of reading it before a compaction folds them.
const maxTailMerges = 15

// commitWrite finishes in b a write (or a copy) into a that ended at end:
// the new size and times, and with kill setuid, setgid and capabilities
// cleared; then commits b with the write's journal record. It reports
// whether the mode changed.
func (s *Store) commitWrite(actor *Actor, b *pebble.Batch, a *Attr, end uint64, kill func(gid uint32) bool) (modeChanged bool, err error) {
	if kill != nil {
		mode := a.Mode
		killPriv(b, a, kill)
		modeChanged = a.Mode != mode
	}
	ts := now()
	a.Size = max(a.Size, end)
	a.Mtime, a.Ctime = ts, ts
	b.Set(attrKey(a.Ino), a.encode(), nil)
	if err := s.commitRecord(b, &Record{Op: JWrite, Ino: a.Ino, Size: a.Size, where: s.inoWhere(a.Ino)}, actor); err != nil {
		return modeChanged, err
	}
	s.pinnedMoved(a)
	return modeChanged, nil
}

// lockFile is lockLocalAttr for an operation on a regular file's data: a
// directory is ErrIsDir, any other kind of inode notRegular. On an error
// nothing stays locked.
func (s *Store) lockFile(ino uint64, local bool, notRegular error) (Attr, func(), error) {
	a, unlock, err := s.lockLocalAttr(ino, local)
	if err != nil {
		return Attr{}, nil, err
	}
	switch {
	case a.IsDir():
		unlock()
		return Attr{}, nil, ErrIsDir
	case !a.IsRegular():
		unlock()
		return Attr{}, nil, notRegular
	}
	return a, unlock, nil
}

// Read reads from off into dst and returns the number of bytes read (short
// only at the end of the file) and the attributes it read with. The size
// and the data come from one iterator, so one consistent view of the store:
// a read that races with a truncate and a write sees one state or the other.
func (s *Store) Read(ino uint64, off int64, dst []byte) (int, Attr, error) {
	s.enter()
	defer s.leave()
	var o originRead
	n, a, err := s.read(ino, off, dst, &o)
	if err == errRemote {
		// Fetch the content. The fetch takes the attributes and origin just
		// read, updates the access time in the batch that makes the file
		// local and, for a file it fills in one batch, copies the data read
		// straight into dst; otherwise (a waiter, a big file) the data is
		// read from the store.
		req := &fetchReq{attr: a, origin: o.Origin, known: o.ok, atime: true, off: off, dst: dst}
		if err := s.materialize(ino, req); err != nil {
			return 0, a, err
		}
		if req.served {
			return req.n, req.done, nil
		}
		n, a, err = s.read(ino, off, dst, nil)
	}
	for i := 0; err == errBlobGone && i < 100; i++ {
		// Turned back into chunks, deleted, or unpinned since read saw
		// the attributes: read again.
		n, a, err = s.read(ino, off, dst, nil)
	}
	if err == errBlobGone {
		err = ErrNotFound
	}
	return n, a, err
}

// originRead is the origin that read found for a remote file, if ok.
type originRead struct {
	Origin
	ok bool
}

// errRemote tells Read that the file's content is still at its source.
var errRemote = errors.New("remote file")

// read reads from the store. For a remote file it returns errRemote and,
// if o is not nil, reads the file's origin into o with the same iterator.
func (s *Store) read(ino uint64, off int64, dst []byte, o *originRead) (int, Attr, error) {
	if off < 0 {
		return 0, Attr{}, ErrInvalid
	}
	g := s.pins.seq.Load()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: attrKey(ino), UpperBound: prefixEnd(kindPrefix(ino, kindChunk))})
	if err != nil {
		return 0, Attr{}, err
	}
	defer it.Close()
	if !it.First() || it.Key()[len(it.Key())-1] != kindAttr || len(it.Key()) != len(attrKey(ino)) {
		if err := it.Error(); err != nil {
			return 0, Attr{}, err
		}
		return 0, Attr{}, ErrNotFound
	}
	a, err := decodeAttr(it.Value())
	if err != nil {
		return 0, a, err
	}
	s.mapOwner(&a)
	if a.IsDir() {
		return 0, a, ErrIsDir
	}
	if a.Flags&FlagRemote != 0 && uint64(off) < a.Size && len(dst) > 0 {
		if o == nil {
			return 0, a, errRemote
		}
		// A missing or bad origin leaves o alone: the fetch reads it again
		// and reports the error.
		k := originKey(ino)
		it.SetBounds(k, prefixEnd(k))
		if it.First() {
			if v, err := decodeOrigin(it.Value()); err == nil {
				o.Origin, o.ok = v, true
			}
		}
		return 0, a, errRemote
	}
	s.mergePin(&a, nil)
	if uint64(off) >= a.Size || len(dst) == 0 {
		if a.Flags&FlagBlob != 0 && !s.pins.stable(g) {
			return 0, a, errBlobGone // a pin went meanwhile: read again
		}
		return 0, a, nil
	}
	end := min(a.Size, uint64(off)+uint64(len(dst)))
	n := int(end - uint64(off))
	if a.Flags&FlagBlob != 0 {
		if err := s.readBlob(&a, off, dst[:n]); err != nil {
			return 0, a, err
		}
		if !s.pins.stable(g) {
			return 0, a, errBlobGone // a pin went meanwhile: read again
		}
		return n, a, nil
	}
	clear(dst[:n])
	first, last := uint64(off)/ChunkSize, (end-1)/ChunkSize
	for valid := it.SeekGE(chunkKey(ino, first)); valid; valid = it.Next() {
		ci := chunkIndex(it.Key())
		if ci > last {
			break
		}
		v := it.Value()
		start := ci * ChunkSize
		// Copy the overlap of [start, start+len(v)) and [off, end).
		lo, hi := max(start, uint64(off)), min(start+uint64(len(v)), end)
		if lo < hi {
			copy(dst[lo-uint64(off):hi-uint64(off)], v[lo-start:hi-start])
		}
	}
	return n, a, it.Error()
}

func chunkIndex(key []byte) uint64 {
	var ci uint64
	for _, c := range key[len(key)-8:] {
		ci = ci<<8 | uint64(c)
	}
	return ci
}

// NeedsAtime tells whether reading an inode with attributes a should update
// its access time, by the relatime rule: the access time is older than the
// modification or change time, or more than a day old.
func NeedsAtime(a *Attr) bool {
	return a.Atime <= a.Mtime || a.Atime <= a.Ctime || now()-a.Atime > 24*3600*1e9
}

// TouchAtime sets the access time to now if NeedsAtime says so.
func (s *Store) TouchAtime(ino uint64) error {
	s.enter()
	defer s.leave()
	unlock := s.lockInodes(ino)
	defer unlock()
	a, err := s.GetAttr(ino)
	if err != nil || !NeedsAtime(&a) {
		return err
	}
	a.Atime = now()
	b := s.db.NewBatch()
	defer b.Close()
	b.Set(attrKey(ino), a.encode(), nil)
	return s.commit(b)
}

// SetAttr applies req to ino and returns the new attributes.
func (s *Store) SetAttr(ino uint64, req SetAttrRequest) (Attr, error) {
	s.enter()
	defer s.leave()
	return s.setAttr(nil, ino, req)
}

func (s *Store) setAttr(actor *Actor, ino uint64, req SetAttrRequest) (Attr, error) {
	// Truncating to zero needs no content; any other size does.
	a, unlock, err := s.lockLocalAttr(ino, req.Valid&SetSize != 0 && req.Size != 0)
	if err != nil {
		return Attr{}, err
	}
	defer unlock()
	b := s.db.NewBatch()
	defer b.Close()
	ts := now()
	shrunk := false
	if req.Valid&SetMode != 0 {
		a.Mode = a.Mode&S_IFMT | req.Mode&^S_IFMT
	}
	if req.Valid&SetUid != 0 {
		a.Uid = req.Uid
	}
	if req.Valid&SetGid != 0 {
		a.Gid = req.Gid
	}
	switch {
	case req.Valid&SetKillPriv != 0:
		inGroup := req.InGroup
		if inGroup == nil {
			inGroup = func(uint32) bool { return false }
		}
		killPriv(b, &a, inGroup)
	case req.Valid&(SetUid|SetGid) != 0 && !a.IsDir():
		killPriv(b, &a, nil)
	}
	if req.Valid&SetSize != 0 {
		if a.IsDir() {
			return Attr{}, ErrIsDir
		}
		if !a.IsRegular() {
			return Attr{}, ErrInvalid
		}
		if req.Size > MaxFileSize {
			return Attr{}, ErrFileTooLarge
		}
		if err := s.checkQuota(int64(req.Size) - int64(a.Size)); err != nil {
			return Attr{}, err
		}
		if a.Flags&FlagRemote != 0 { // truncated to zero: nothing to fetch
			a.Flags &^= FlagRemote
		}
		shrunk = req.Size < a.Size
		if shrunk && a.Flags&FlagWriting != 0 {
			// The kernel writes this blob, and after a crash its size is
			// the blob's: cut it first, so that a crash keeps the
			// truncate or nothing of it.
			if err := s.cutPinned(&a, req.Size); err != nil {
				return Attr{}, err
			}
			shrunk = false
		}
		if err := s.truncate(b, &a, req.Size); err != nil {
			return Attr{}, err
		}
		a.Mtime = ts
	}
	switch {
	case req.Valid&SetAtimeNow != 0:
		a.Atime = ts
	case req.Valid&SetAtime != 0:
		a.Atime = req.Atime
	}
	switch {
	case req.Valid&SetMtimeNow != 0:
		a.Mtime = ts
	case req.Valid&SetMtime != 0:
		a.Mtime = req.Mtime
	}
	a.Ctime = ts
	if req.Valid&SetCtime != 0 {
		a.Ctime = req.Ctime
	}
	b.Set(attrKey(ino), a.encode(), nil)
	op := JSetattr
	if req.Valid&SetSize != 0 {
		op = JTruncate
	}
	if err := s.commitRecord(b, &Record{Op: op, Ino: ino, Size: a.Size, where: s.inoWhere(ino)}, actor); err != nil {
		return Attr{}, err
	}
	if shrunk && a.Flags&FlagBlob != 0 {
		if err := s.cutAfterCommit(&a); err != nil {
			return Attr{}, err
		}
	}
	s.pinnedMoved(&a)
	return a, nil
}

// inoWhere is a Record's where for a change made by inode number.
func (s *Store) inoWhere(ino uint64) func() (string, string) {
	return func() (string, string) { return s.inoPath(ino), "" }
}

// truncate changes a's size to size, dropping the data past it so that a
// later extension reads zeros.
func (s *Store) truncate(b *pebble.Batch, a *Attr, size uint64) error {
	if a.Flags&FlagBlob != 0 {
		return s.truncateBlob(a, size)
	}
	if size >= a.Size {
		a.Size = size
		return nil
	}
	keep := (size + ChunkSize - 1) / ChunkSize // chunks [0, keep) stay
	freed, exact, err := s.zeroRange(b, a.Ino, keep, (a.Size+ChunkSize-1)/ChunkSize)
	if err != nil {
		return err
	}
	a.Blocks -= min(a.Blocks, freed)
	if !exact {
		a.Blocks = s.countBlocks(a.Ino, a.Blocks, [2]uint64{0, keep})
	}
	if tail := size % ChunkSize; tail != 0 {
		ci := size / ChunkSize
		old, err := s.get(chunkKey(a.Ino, ci))
		if err != nil && err != ErrNotFound {
			return err
		}
		if uint64(len(old)) > tail {
			b.Set(chunkKey(a.Ino, ci), old[:tail], nil)
			a.Blocks -= min(a.Blocks, blocksFor(uint64(len(old)))-blocksFor(tail))
		}
	}
	if size == 0 {
		a.Blocks = 0
	}
	a.Size = size
	return nil
}

// exactBlocksLimit is how many stored chunks zeroRange and countBlocks
// count one by one to keep st_blocks exact: counting a huge dense range
// would read all of it.
const exactBlocksLimit = 256

// zeroRange deletes chunks [from, to) of ino and returns the number of
// blocks they held, exactly if it could count them (a sparse range costs
// what it stores, not its length). Past exactBlocksLimit chunks it deletes
// the rest with one range and reports exact == false: the caller then
// counts what stays instead (countBlocks).
func (s *Store) zeroRange(b *pebble.Batch, ino, from, to uint64) (freed uint64, exact bool, err error) {
	if from >= to {
		return 0, true, nil
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: chunkKey(ino, from), UpperBound: chunkKey(ino, to)})
	if err != nil {
		return 0, false, err
	}
	exact = true
	var keys [][]byte
	for it.First(); it.Valid(); it.Next() {
		if len(keys) == exactBlocksLimit {
			b.DeleteRange(chunkKey(ino, chunkIndex(it.Key())), chunkKey(ino, to), nil)
			exact = false
			break
		}
		lv := it.LazyValue()
		freed += blocksFor(uint64(lv.Len()))
		keys = append(keys, append([]byte(nil), it.Key()...))
	}
	if err := it.Close(); err != nil {
		return 0, false, err
	}
	for _, k := range keys { // point deletions: see deleteInode
		b.Delete(k, nil)
	}
	return freed, exact, nil
}

// countBlocks returns the blocks stored in the given chunk ranges of ino
// (the part of a file that an operation keeps), or, if they hold more than
// exactBlocksLimit chunks, estimate: too many to count, and more than
// estimate can be wrong by.
func (s *Store) countBlocks(ino, estimate uint64, ranges ...[2]uint64) uint64 {
	var blocks uint64
	n := 0
	for _, r := range ranges {
		if r[0] >= r[1] {
			continue
		}
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: chunkKey(ino, r[0]), UpperBound: chunkKey(ino, r[1])})
		if err != nil {
			return estimate
		}
		for it.First(); it.Valid(); it.Next() {
			if n++; n > exactBlocksLimit {
				it.Close()
				return max(estimate, blocks)
			}
			lv := it.LazyValue()
			blocks += blocksFor(uint64(lv.Len()))
		}
		if it.Close() != nil {
			return estimate
		}
	}
	return blocks
}

// Fallocate modes, with Linux's values.
const (
	FallocKeepSize  = 0x01
	FallocPunchHole = 0x02
	FallocZeroRange = 0x10
)

// Fallocate implements fallocate(2) for mode 0 (extend the size; space is
// not reserved ahead), FallocKeepSize, FallocPunchHole|FallocKeepSize and
// FallocZeroRange (optionally with FallocKeepSize).
func (s *Store) Fallocate(ino uint64, mode uint32, off, length int64) (Attr, error) {
	s.enter()
	defer s.leave()
	return s.fallocate(nil, ino, mode, off, length)
}

func (s *Store) fallocate(actor *Actor, ino uint64, mode uint32, off, length int64) (Attr, error) {
	if off < 0 || length <= 0 {
		return Attr{}, ErrInvalid
	}
	end := uint64(off) + uint64(length)
	if end > MaxFileSize {
		return Attr{}, ErrFileTooLarge
	}
	switch mode {
	case 0, FallocKeepSize, FallocPunchHole | FallocKeepSize, FallocZeroRange, FallocZeroRange | FallocKeepSize:
	case FallocPunchHole:
		return Attr{}, ErrNotSupported // punching requires KEEP_SIZE
	default:
		return Attr{}, ErrNotSupported
	}
	a, unlock, err := s.lockFile(ino, true, ErrNotSupported)
	if err != nil {
		return Attr{}, err
	}
	defer unlock()
	grow := int64(0)
	if mode&FallocKeepSize == 0 {
		grow = max(int64(end)-int64(a.Size), 0)
	}
	if err := s.checkQuota(grow); err != nil {
		return Attr{}, err
	}
	b := s.db.NewBatch()
	defer b.Close()
	if a.Flags&FlagBlob != 0 {
		if err := s.fallocateBlob(&a, mode, uint64(off), end); err != nil {
			return Attr{}, err
		}
	} else if mode&(FallocPunchHole|FallocZeroRange) != 0 {
		if err := s.zeroBytes(b, &a, uint64(off), min(end, a.Size)); err != nil {
			return Attr{}, err
		}
	}
	if mode&(FallocPunchHole|FallocZeroRange) != 0 {
		a.Mtime = now()
	}
	if mode&FallocKeepSize == 0 && end > a.Size {
		a.Size = end
		a.Mtime = now()
	}
	a.Ctime = now()
	b.Set(attrKey(ino), a.encode(), nil)
	if err := s.commitRecord(b, &Record{Op: JFallocate, Ino: ino, Size: a.Size, where: s.inoWhere(ino)}, actor); err != nil {
		return Attr{}, err
	}
	s.pinnedMoved(&a)
	return a, nil
}

// zeroBytes makes [from, to) read as zeros: whole chunks are deleted, the
// partial chunks at either end are zeroed in place.
func (s *Store) zeroBytes(b *pebble.Batch, a *Attr, from, to uint64) error {
	if from >= to {
		return nil
	}
	firstWhole := (from + ChunkSize - 1) / ChunkSize
	endWhole := to / ChunkSize
	if firstWhole < endWhole {
		freed, exact, err := s.zeroRange(b, a.Ino, firstWhole, endWhole)
		if err != nil {
			return err
		}
		a.Blocks -= min(a.Blocks, freed)
		if !exact {
			a.Blocks = s.countBlocks(a.Ino, a.Blocks, [2]uint64{0, firstWhole}, [2]uint64{endWhole, a.Size/ChunkSize + 1})
		}
	}
	zeroPart := func(ci, lo, hi uint64) error { // zero [lo, hi) of chunk ci
		old, err := s.get(chunkKey(a.Ino, ci))
		if err == ErrNotFound {
			return nil
		}
		if err != nil {
			return err
		}
		hi = min(hi, uint64(len(old)))
		if lo < hi {
			clear(old[lo:hi])
			b.Set(chunkKey(a.Ino, ci), old, nil)
		}
		return nil
	}
	headChunk, tailChunk := from/ChunkSize, to/ChunkSize
	if from%ChunkSize != 0 { // the partial chunk at the start
		hi := min(to, (headChunk+1)*ChunkSize) - headChunk*ChunkSize
		if err := zeroPart(headChunk, from%ChunkSize, hi); err != nil {
			return err
		}
	}
	if to%ChunkSize != 0 && (from%ChunkSize == 0 || tailChunk != headChunk) { // at the end
		if err := zeroPart(tailChunk, 0, to%ChunkSize); err != nil {
			return err
		}
	}
	return nil
}

// Seek whence values for SeekData.
const (
	SeekData = 3
	SeekHole = 4
)

// SeekData implements lseek's SEEK_DATA and SEEK_HOLE at chunk granularity:
// a chunk that is stored counts as data, a missing one as a hole.
func (s *Store) SeekData(ino uint64, off int64, whence int) (int64, error) {
	s.enter()
	defer s.leave()
	if err := s.ensureLocal(ino); err != nil {
		return 0, err
	}
	a, err := s.GetAttr(ino)
	if err != nil {
		return 0, err
	}
	if off < 0 || uint64(off) >= a.Size {
		return 0, ErrNXIO
	}
	if a.Flags&FlagBlob != 0 {
		return s.seekBlob(&a, off, whence)
	}
	ci := uint64(off) / ChunkSize
	lastChunk := (a.Size - 1) / ChunkSize
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: chunkKey(ino, ci), UpperBound: chunkKey(ino, lastChunk+1)})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	if whence == SeekData {
		if !it.First() {
			return 0, ErrNXIO
		}
		return max(off, int64(chunkIndex(it.Key())*ChunkSize)), nil
	}
	// SeekHole: the first chunk index >= ci that is missing, or the end.
	want := ci
	for it.First(); it.Valid(); it.Next() {
		if chunkIndex(it.Key()) != want {
			break
		}
		want++
	}
	if want > lastChunk {
		return int64(a.Size), nil
	}
	return max(off, int64(want*ChunkSize)), nil
}

// SetContent makes data the whole content of the regular file ino, in one
// batch with its journal record: a reader, or the store after a crash,
// sees the old content or the new, never a mix or an empty file between
// them (a truncate followed by writes would show both).
func (s *Store) SetContent(ino uint64, data []byte) (Attr, error) {
	s.enter()
	defer s.leave()
	return s.setContent(nil, ino, data)
}

func (s *Store) setContent(actor *Actor, ino uint64, data []byte) (Attr, error) {
	if uint64(len(data)) > MaxFileSize {
		return Attr{}, ErrFileTooLarge
	}
	if err := s.space.check(len(data)); err != nil {
		return Attr{}, err
	}
	a, unlock, err := s.lockFile(ino, false, ErrInvalid) // the old content is not needed
	if err != nil {
		return Attr{}, err
	}
	defer unlock()
	if err := s.checkQuota(int64(len(data)) - int64(a.Size)); err != nil {
		return Attr{}, err
	}
	b := s.db.NewBatchWithSize(len(data) + 256 + len(data)/ChunkSize*32)
	defer b.Close()
	a.Flags &^= FlagRemote
	wasBlob := a.Flags&FlagBlob != 0
	if wasBlob && s.pins.get(ino) != nil {
		// The kernel reads and writes this blob directly: it stays one.
		return s.setPinnedContent(actor, a, data)
	}
	if wasBlob {
		// Back to chunks: the blob keeps the old content until the
		// batch with the new one commits.
		a.Flags &^= FlagBlob
		a.Size, a.Blocks = 0, 0
	} else if err := s.truncate(b, &a, 0); err != nil {
		return Attr{}, err
	}
	putContent(b, &a, data)
	ts := now()
	a.Mtime, a.Ctime = ts, ts
	b.Set(attrKey(ino), a.encode(), nil)
	if err := s.commitRecord(b, &Record{Op: JWrite, Ino: ino, Size: a.Size, where: s.inoWhere(ino)}, actor); err != nil {
		return Attr{}, err
	}
	if wasBlob {
		s.dropBlob(ino)
	}
	return a, nil
}

// putContent adds data as the chunks of the empty file a to b (later
// entries of a batch win over its earlier deletions) and sets a's size
// and blocks.
func putContent(b *pebble.Batch, a *Attr, data []byte) {
	for off := 0; off < len(data); off += ChunkSize {
		chunk := data[off:min(off+ChunkSize, len(data))]
		b.Set(chunkKey(a.Ino, uint64(off/ChunkSize)), chunk, nil)
		a.Blocks += blocksFor(uint64(len(chunk)))
	}
	a.Size = uint64(len(data))
}
