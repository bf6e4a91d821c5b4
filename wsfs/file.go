package wsfs

import (
	"io"
	"os"
	"syscall"

	"github.com/computerfs/computerfs/kv"
)

// Open flags, as os.OpenFile takes them.
const (
	O_RDONLY = os.O_RDONLY
	O_WRONLY = os.O_WRONLY
	O_RDWR   = os.O_RDWR
	O_APPEND = os.O_APPEND
	O_CREATE = os.O_CREATE
	O_EXCL   = os.O_EXCL
	O_TRUNC  = os.O_TRUNC
)

// File is an open file of the workspace. Its methods are not safe for
// concurrent use (like an *os.File's offset, which they share); different
// Files of one inode may be used concurrently.
type File struct {
	fs   *FS
	name string
	ino  uint64
	flag int
	off  int64
}

// Open opens p with os.OpenFile's flags. With O_CREATE a missing file is
// made with perm (less the umask); a symbolic link at the end of p is
// followed, and a dangling one creates its target, as open(2) does.
func (f *FS) Open(p string, flag int, perm uint32) (*File, error) {
	r, err := f.lookup(p, true, false)
	made := false
	if err == kv.ErrNotFound && flag&O_CREATE != 0 {
		r, made, err = f.openCreate(p, perm, nil)
	} else if err == nil && flag&(O_CREATE|O_EXCL) == O_CREATE|O_EXCL {
		err = syscall.EEXIST
	}
	if err == nil && !made {
		// Before O_TRUNC below. A file this call made was checked as
		// the change of its one path that made it (guardEntry): looking
		// its name up again in the store would add nothing.
		err = f.guardOpen(&r, flag)
	}
	if err != nil {
		return nil, pathErr("open", p, err)
	}
	if r.attr.IsDir() && flag&(O_WRONLY|O_RDWR) != 0 {
		return nil, pathErr("open", p, syscall.EISDIR)
	}
	if flag&(O_WRONLY|O_RDWR) != 0 {
		if err := f.mayWriteAttr(&r.attr); err != nil {
			return nil, pathErr("open", p, err)
		}
	}
	if flag&O_WRONLY == 0 && !made {
		if err := f.mayReadAttr(&r.attr); err != nil {
			return nil, pathErr("open", p, err)
		}
	}
	if flag&O_TRUNC != 0 && flag&(O_WRONLY|O_RDWR) != 0 && r.attr.IsRegular() && r.attr.Size > 0 {
		if _, err := f.kvSetAttr(r.ino, kv.SetAttrRequest{Valid: kv.SetSize}); err != nil {
			return nil, pathErr("open", p, err)
		}
	}
	return &File{fs: f, name: p, ino: r.ino, flag: flag}, nil
}

// openCreate makes the file that Open with O_CREATE names, with content
// data, following a dangling symbolic link to its target. It reports
// whether it made the file: it may find one made meanwhile instead.
func (f *FS) openCreate(p string, perm uint32, data []byte) (resolved, bool, error) {
	cur, above := uint64(kv.RootIno), []uint64(nil)
	for range maxSymlinks {
		r, err := f.lookupFrom(cur, above, p, false, true, "-")
		if err != nil {
			return r, false, err
		}
		if r.ino == 0 {
			a, err := f.kvCreate(r.dir, r.name, f.newInode(kv.NewInode{Mode: kv.S_IFREG | perm&0o7777&^f.umask, Data: data}))
			if err == kv.ErrExist { // lost a race with another creator
				r, err := f.lookupFrom(cur, above, p, true, false, "-")
				return r, false, err
			}
			return resolved{ino: a.Ino, attr: a, dir: r.dir, name: r.name, above: r.above}, err == nil, err
		}
		if r.attr.Mode&kv.S_IFMT != kv.S_IFLNK {
			return r, false, nil
		}
		if p, err = f.s.Readlink(r.ino); err != nil {
			return r, false, err
		}
		if p, err = f.linkTarget(p); err != nil {
			return r, false, err
		}
		cur, above = r.dir, r.above // a relative target starts where the link is
	}
	return resolved{}, false, syscall.ELOOP
}

// writeWhole makes data the whole content of the regular file p (made
// with perm, less the umask, if missing) in one change of the store: a
// reader, or the store after a crash, finds the old content or the new,
// never an empty or half-written file. It returns the file's inode.
func (f *FS) writeWhole(p string, data []byte, perm uint32) (uint64, error) {
	r, err := f.lookup(p, true, false)
	if err == kv.ErrNotFound {
		var made bool
		if r, made, err = f.openCreate(p, perm, data); made {
			return r.ino, nil
		}
	}
	if err != nil {
		return 0, err
	}
	if r.attr.IsDir() {
		return 0, syscall.EISDIR
	}
	_, err = f.kvSetContent(r.ino, data)
	return r.ino, err
}

// Name is the path the file was opened with.
func (fl *File) Name() string { return fl.name }

// Ino is the file's inode number.
func (fl *File) Ino() uint64 { return fl.ino }

// Stat returns the file's attributes.
func (fl *File) Stat() (kv.Attr, error) {
	a, err := fl.fs.s.GetAttr(fl.ino)
	return a, pathErr("stat", fl.name, err)
}

func (fl *File) readable() bool { return fl.flag&(O_WRONLY|O_RDWR) != O_WRONLY }
func (fl *File) writable() bool { return fl.flag&(O_WRONLY|O_RDWR) != 0 }

// Read reads from the file's offset. Like read(2), it returns io.EOF only
// when it reads nothing.
func (fl *File) Read(p []byte) (int, error) {
	n, err := fl.ReadAt(p, fl.off)
	fl.off += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

// ReadAt reads at off without moving the offset; it returns io.EOF at the end.
func (fl *File) ReadAt(p []byte, off int64) (int, error) {
	if !fl.readable() {
		return 0, pathErr("read", fl.name, syscall.EBADF)
	}
	n, _, err := fl.fs.s.Read(fl.ino, off, p)
	if err != nil {
		return n, pathErr("read", fl.name, err)
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Write writes at the file's offset (at the end with O_APPEND). Like a
// write(2), it is visible to every other reader at once.
func (fl *File) Write(p []byte) (int, error) {
	if !fl.writable() {
		return 0, pathErr("write", fl.name, syscall.EBADF)
	}
	if fl.flag&O_APPEND != 0 {
		a, err := fl.fs.s.GetAttr(fl.ino)
		if err != nil {
			return 0, pathErr("write", fl.name, err)
		}
		fl.off = int64(a.Size)
	}
	n, err := fl.WriteAt(p, fl.off)
	fl.off += int64(n)
	return n, err
}

// WriteAt writes at off without moving the offset.
func (fl *File) WriteAt(p []byte, off int64) (int, error) {
	if !fl.writable() {
		return 0, pathErr("write", fl.name, syscall.EBADF)
	}
	if err := fl.fs.kvWrite(fl.ino, off, p); err != nil {
		return 0, pathErr("write", fl.name, err)
	}
	return len(p), nil
}

// Seek sets the offset, as lseek(2) does.
func (fl *File) Seek(offset int64, whence int) (int64, error) {
	var base int64
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		base = fl.off
	case io.SeekEnd:
		a, err := fl.Stat()
		if err != nil {
			return 0, err
		}
		base = int64(a.Size)
	default:
		return 0, pathErr("seek", fl.name, syscall.EINVAL)
	}
	if base+offset < 0 {
		return 0, pathErr("seek", fl.name, syscall.EINVAL)
	}
	fl.off = base + offset
	return fl.off, nil
}

// Truncate sets the file's size.
func (fl *File) Truncate(size int64) error {
	if !fl.writable() || size < 0 {
		return pathErr("truncate", fl.name, syscall.EINVAL)
	}
	_, err := fl.fs.kvSetAttr(fl.ino, kv.SetAttrRequest{Valid: kv.SetSize, Size: uint64(size)})
	return pathErr("truncate", fl.name, err)
}

// Sync syncs the store: everything written survives a power loss.
func (fl *File) Sync() error {
	return pathErr("sync", fl.name, fl.fs.s.Sync())
}

// Close closes the file. What was written is durable once the store
// flushes (see package kv).
func (fl *File) Close() error { return nil }
