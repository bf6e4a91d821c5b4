package kv

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// CopyRange copies up to n bytes of the regular file src, from srcOff, into
// the regular file dst at dstOff, as copy_file_range(2) does, and returns
// how many it copied: fewer than n only at the end of src. Overlapping
// ranges of one file are refused (EINVAL), as Linux refuses them.
//
// From a blob into a blob (or into a file the copy makes one) the host
// kernel copies, with copy_file_range on the blob files, in one batch with
// one journal record; otherwise the data is read and written in pieces.
func (s *Store) CopyRange(src uint64, srcOff int64, dst uint64, dstOff int64, n int64) (int64, error) {
	s.enter()
	defer s.leave()
	done, _, err := s.copyRange(nil, src, srcOff, dst, dstOff, n, nil)
	return done, err
}

// copyPiece is the size of the reads and writes of a copy that the host
// kernel does not do.
const copyPiece = 1 << 20

// errNotDirect: the copy cannot be done on the blob files.
var errNotDirect = errors.New("not a copy between blobs")

func (s *Store) copyRange(actor *Actor, src uint64, srcOff int64, dst uint64, dstOff int64, n int64, kill func(gid uint32) bool) (int64, bool, error) {
	if srcOff < 0 || dstOff < 0 || n < 0 {
		return 0, false, ErrInvalid
	}
	if err := s.space.check(int(min(n, 1<<30))); err != nil {
		return 0, false, err
	}
	if err := s.ensureLocal(src); err != nil {
		return 0, false, err
	}
	sa, err := s.GetAttr(src)
	if err != nil {
		return 0, false, err
	}
	if sa.IsDir() {
		return 0, false, ErrIsDir
	}
	if !sa.IsRegular() {
		return 0, false, ErrInvalid
	}
	if uint64(srcOff) >= sa.Size || n == 0 {
		return 0, false, nil
	}
	n = min(n, int64(sa.Size)-srcOff)
	if src == dst && srcOff < dstOff+n && dstOff < srcOff+n {
		return 0, false, ErrInvalid
	}
	if sa.Flags&FlagBlob != 0 {
		done, changed, err := s.copyBlob(actor, src, srcOff, dst, dstOff, n, kill)
		if err != errNotDirect {
			return done, changed, err
		}
	}
	buf := make([]byte, min(n, copyPiece))
	var done int64
	changed := false
	for done < n {
		got, _, err := s.Read(src, srcOff+done, buf[:min(int64(len(buf)), n-done)])
		if err != nil {
			return done, changed, err
		}
		if got == 0 {
			break // src shrank meanwhile
		}
		_, ch, err := s.write(actor, dst, dstOff+done, buf[:got], kill)
		changed = changed || ch
		if err != nil {
			return done, changed, err
		}
		done += int64(got)
	}
	return done, changed, nil
}

// copyBlob copies n bytes of the blob src (all within its size) to dst
// with copy_file_range on the blob files, or returns errNotDirect if dst
// stays small enough for chunks, or src is no longer a blob.
func (s *Store) copyBlob(actor *Actor, src uint64, srcOff int64, dst uint64, dstOff int64, n int64, kill func(gid uint32) bool) (int64, bool, error) {
	end := uint64(dstOff) + uint64(n)
	if end > MaxFileSize {
		return 0, false, ErrFileTooLarge
	}
	a, unlock, err := s.lockFile(dst, true, ErrInvalid)
	if err != nil {
		return 0, false, err
	}
	defer unlock()
	if a.Flags&FlagBlob == 0 && end <= s.blobThreshold {
		return 0, false, errNotDirect
	}
	if err := s.checkQuota(max(int64(end)-int64(a.Size), 0)); err != nil {
		return 0, false, err
	}
	srcF, srcRelease, err := s.blobs.acquire(src, false)
	if err == errBlobGone {
		return 0, false, errNotDirect
	}
	if err != nil {
		return 0, false, err
	}
	defer srcRelease()
	b := s.db.NewBatch()
	defer b.Close()
	dstF, done, err := s.blobForWrite(b, &a, uint64(dstOff))
	if err != nil {
		return 0, false, err
	}
	committed := false
	defer func() { done(committed) }()
	so, do := srcOff, dstOff
	for so < srcOff+n {
		m, err := unix.CopyFileRange(int(srcF.Fd()), &so, int(dstF.Fd()), &do, int(srcOff+n-so), 0)
		if err != nil {
			return 0, false, fmt.Errorf("copy blob %d to blob %d: %w", src, dst, err)
		}
		if m == 0 {
			break // the rest of src is past its blob's end: zeros
		}
	}
	if so < srcOff+n {
		rest := srcOff + n - so
		if err := unix.Fallocate(int(dstF.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, do, rest); err != nil {
			return 0, false, fmt.Errorf("blob of inode %d: %w", dst, err)
		}
	}
	if err := extendBlob(dstF, end); err != nil { // a sparse tail copied
		return 0, false, fmt.Errorf("blob of inode %d: %w", dst, err)
	}
	s.blobs.written(dst)
	if a.Blocks, err = blocksOf(dstF); err != nil {
		return 0, false, err
	}
	changed, err := s.commitWrite(actor, b, &a, end, kill)
	if err != nil {
		return 0, false, err
	}
	committed = true
	return n, changed, s.flushNow() // as writeBlob
}
