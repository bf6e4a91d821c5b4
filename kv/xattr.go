package kv

import (
	"fmt"
	"strings"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
	"golang.org/x/sys/unix"
)

// Extended attribute limits: a name and a value as on Linux
// (XATTR_NAME_MAX, XATTR_SIZE_MAX; a longer name is ERANGE, a bigger value
// E2BIG), and per inode at most MaxXattrs attributes holding at most
// MaxXattrBytes of names and values together (past either, ENOSPC, as
// ext4 answers when an inode's attribute block is full). The names of
// MaxXattrs attributes fit in listxattr's 64 KiB.
const (
	MaxXattrName  = 255
	MaxXattrValue = 64 << 10
	MaxXattrs     = 128
	MaxXattrBytes = 128 << 10
)

// ErrXattrFull is the answer to a setxattr past MaxXattrs or MaxXattrBytes.
var ErrXattrFull = &Error{"no space left on device", syscall.ENOSPC}

// Setxattr flags, with Linux's values.
const (
	XattrCreate  = 1
	XattrReplace = 2
)

// checkXattrName accepts the names Linux file systems store: a known
// namespace and a non-empty name in it. POSIX ACLs (system.posix_acl_*)
// are not supported.
func checkXattrName(name string) error {
	switch {
	case len(name) > MaxXattrName:
		return ErrRange
	case name == "":
		return ErrInvalid
	}
	for _, ns := range []string{"user.", "trusted.", "security."} {
		if strings.HasPrefix(name, ns) {
			if len(name) == len(ns) {
				return ErrInvalid
			}
			return nil
		}
	}
	return ErrNotSupported // system.* and unknown namespaces
}

// GetXattr returns the value of an extended attribute. An inode that never
// had one (FlagNoXattrs) is answered from its attributes, which are
// usually in memory: the kernel asks for security.capability before the
// first write to every file, and after every chown.
func (s *Store) GetXattr(ino uint64, name string) ([]byte, error) {
	s.enter()
	defer s.leave()
	if err := checkXattrName(name); err != nil {
		return nil, err
	}
	a, err := s.GetAttr(ino)
	if err != nil {
		return nil, err
	}
	if a.Flags&FlagNoXattrs != 0 {
		return nil, ErrNoData
	}
	v, err := s.get(xattrKey(ino, name))
	if err == ErrNotFound {
		return nil, ErrNoData
	}
	return v, err
}

// ListXattr returns the names of an inode's extended attributes, without a
// scan for an inode that never had one (FlagNoXattrs).
func (s *Store) ListXattr(ino uint64) ([]string, error) {
	s.enter()
	defer s.leave()
	a, err := s.GetAttr(ino)
	if err != nil {
		return nil, err
	}
	if a.Flags&FlagNoXattrs != 0 {
		return nil, nil
	}
	prefix := kindPrefix(ino, kindXattr)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, err
	}
	var names []string
	for it.First(); it.Valid(); it.Next() {
		names = append(names, string(it.Key()[len(prefix):]))
	}
	return names, it.Close()
}

// SetXattr sets an extended attribute; flags is 0, XattrCreate or XattrReplace.
func (s *Store) SetXattr(ino uint64, name string, value []byte, flags uint32) error {
	s.enter()
	defer s.leave()
	return s.setXattr(nil, ino, name, value, flags)
}

func (s *Store) setXattr(actor *Actor, ino uint64, name string, value []byte, flags uint32) error {
	if err := checkXattrName(name); err != nil {
		return err
	}
	if err := s.space.check(len(value)); err != nil {
		return err
	}
	switch {
	case len(value) > MaxXattrValue:
		return ErrTooBig
	case flags&^(XattrCreate|XattrReplace) != 0:
		return ErrInvalid
	}
	unlock := s.lockInodes(ino)
	defer unlock()
	a, err := s.GetAttr(ino)
	if err != nil {
		return err
	}
	oldLen, err := s.valueLen(xattrKey(ino, name))
	exists := err == nil
	if err != nil && err != ErrNotFound {
		return err
	}
	if flags&XattrCreate != 0 && exists {
		return ErrExist
	}
	if flags&XattrReplace != 0 && !exists {
		return ErrNoData
	}
	delta := xattrBytes(name, len(value))
	if exists {
		delta -= xattrBytes(name, oldLen)
	}
	if a.Flags&FlagNoXattrs == 0 {
		n, others, err := s.inodeXattrs(ino, name)
		if err != nil {
			return err
		}
		if n+1 > MaxXattrs || others+xattrBytes(name, len(value)) > MaxXattrBytes {
			return fmt.Errorf("%w: inode %d has %d extended attributes of %d bytes; at most %d of %d bytes in all",
				ErrXattrFull, ino, n, others, MaxXattrs, MaxXattrBytes)
		}
	}
	if err := s.checkQuota(delta); err != nil {
		return err
	}
	a.Ctime = now()
	a.Flags &^= FlagNoXattrs
	b := s.db.NewBatch()
	defer b.Close()
	b.Set(xattrKey(ino, name), value, nil)
	b.Set(attrKey(ino), a.encode(), nil)
	s.account(b, delta)
	return s.commitRecord(b, xattrRecord(s, JSetxattr, ino, name), actor)
}

// RemoveXattr removes an extended attribute.
func (s *Store) RemoveXattr(ino uint64, name string) error {
	s.enter()
	defer s.leave()
	return s.removeXattr(nil, ino, name)
}

func (s *Store) removeXattr(actor *Actor, ino uint64, name string) error {
	unlock := s.lockInodes(ino)
	defer unlock()
	v, err := s.GetXattr(ino, name)
	if err != nil {
		return err
	}
	a, err := s.GetAttr(ino)
	if err != nil {
		return err
	}
	a.Ctime = now()
	b := s.db.NewBatch()
	defer b.Close()
	b.Delete(xattrKey(ino, name), nil)
	b.Set(attrKey(ino), a.encode(), nil)
	s.account(b, -xattrBytes(name, len(v)))
	return s.commitRecord(b, xattrRecord(s, JRemovexattr, ino, name), actor)
}

// xattrRecord journals a change of an extended attribute: Path2 is its name.
func xattrRecord(s *Store, op JournalOp, ino uint64, name string) *Record {
	return &Record{Op: op, Ino: ino, where: func() (string, string) { return s.inoPath(ino), name }}
}

// StatFs describes the store's capacity: space is that of the file system
// the store lives on, or with a quota the quota and what is left of it;
// inodes are counted by the store.
type StatFs struct {
	Blocks, Bfree, Bavail uint64 // in units of Bsize
	Files, Ffree          uint64
	Bsize                 uint32
	NameLen               uint32
}

// maxInodes is the inode capacity reported by StatFs; inode numbers are
// 64-bit and never run out, but tools expect a finite number.
const maxInodes = 1 << 32

// StatFs reports the store's capacity.
func (s *Store) StatFs() (StatFs, error) {
	s.enter()
	defer s.leave()
	var st unix.Statfs_t
	if err := unix.Statfs(s.dir, &st); err != nil {
		return StatFs{}, err
	}
	used := uint64(s.inodes.Load())
	fs := StatFs{
		Blocks: st.Blocks, Bfree: st.Bfree, Bavail: st.Bavail, Bsize: uint32(st.Bsize),
		Files: maxInodes, Ffree: maxInodes - min(used, maxInodes), NameLen: MaxNameLen,
	}
	if quota := s.quota.Load(); quota > 0 && st.Bsize > 0 {
		// The quota is the size (df shows it), what it leaves is free,
		// within what the file system has.
		bs := uint64(st.Bsize)
		left := uint64(max(quota-s.usageNow().total(), 0)) / bs
		fs.Blocks = uint64(quota) / bs
		fs.Bfree, fs.Bavail = min(left, st.Bfree), min(left, st.Bavail)
	}
	return fs, nil
}
