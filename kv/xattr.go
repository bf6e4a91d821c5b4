package kv

import (
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"golang.org/x/sys/unix"
)

// Extended attribute limits, as on Linux (XATTR_NAME_MAX, XATTR_SIZE_MAX).
const (
	MaxXattrName  = 255
	MaxXattrValue = 64 << 10
)

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
	_, err = s.get(xattrKey(ino, name))
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
	a.Ctime = now()
	a.Flags &^= FlagNoXattrs
	b := s.db.NewBatch()
	defer b.Close()
	b.Set(xattrKey(ino, name), value, nil)
	b.Set(attrKey(ino), a.encode(), nil)
	return s.commitRecord(b, xattrRecord(s, JSetxattr, ino, name), actor)
}

// RemoveXattr removes an extended attribute.
func (s *Store) RemoveXattr(ino uint64, name string) error { return s.removeXattr(nil, ino, name) }

func (s *Store) removeXattr(actor *Actor, ino uint64, name string) error {
	unlock := s.lockInodes(ino)
	defer unlock()
	if _, err := s.GetXattr(ino, name); err != nil {
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
	return s.commitRecord(b, xattrRecord(s, JRemovexattr, ino, name), actor)
}

// xattrRecord journals a change of an extended attribute: Path2 is its name.
func xattrRecord(s *Store, op JournalOp, ino uint64, name string) *Record {
	return &Record{Op: op, Ino: ino, where: func() (string, string) { return s.inoPath(ino), name }}
}

// StatFs describes the store's capacity: space is that of the file system
// the store lives on; inodes are counted by the store.
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
	var st unix.Statfs_t
	if err := unix.Statfs(s.dir, &st); err != nil {
		return StatFs{}, err
	}
	used := uint64(s.inodes.Load())
	return StatFs{
		Blocks: st.Blocks, Bfree: st.Bfree, Bavail: st.Bavail, Bsize: uint32(st.Bsize),
		Files: maxInodes, Ffree: maxInodes - min(used, maxInodes), NameLen: MaxNameLen,
	}, nil
}
