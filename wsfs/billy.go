package wsfs

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path"
	"sync"
	"syscall"
	"time"

	"github.com/go-git/go-billy/v5"

	"github.com/computerfs/computerfs/kv"
)

// Billy is a directory of the workspace as a billy.Filesystem, the file
// system interface of go-git: it lets go-git clone, check out and read
// repositories in the store directly.
type Billy struct {
	fs   *FS
	base string // absolute, clean
}

var (
	_ billy.Filesystem = (*Billy)(nil)
	_ billy.Change     = (*Billy)(nil)
)

// Billy returns the directory dir of the workspace as a billy.Filesystem.
func (f *FS) Billy(dir string) *Billy { return &Billy{fs: f, base: path.Clean("/" + dir)} }

func (b *Billy) abs(name string) string { return path.Join(b.base, name) }

// Create creates or truncates name for writing and reading.
func (b *Billy) Create(name string) (billy.File, error) {
	return b.OpenFile(name, O_RDWR|O_CREATE|O_TRUNC, 0o666)
}

// Open opens name for reading.
func (b *Billy) Open(name string) (billy.File, error) { return b.OpenFile(name, O_RDONLY, 0) }

// OpenFile opens name as os.OpenFile does; O_CREATE makes missing parent
// directories too, as go-git expects of its file systems.
func (b *Billy) OpenFile(name string, flag int, perm os.FileMode) (billy.File, error) {
	p := b.abs(name)
	if flag&O_CREATE != 0 {
		if err := b.fs.MkdirAll(path.Dir(p), 0o777); err != nil {
			return nil, err
		}
	}
	f, err := b.fs.Open(p, flag, uint32(perm.Perm())|modeBits(perm))
	if err != nil {
		return nil, err
	}
	return &billyFile{File: f, shown: name, locks: b.fs.locks}, nil
}

// modeBits maps os.FileMode's setuid, setgid and sticky bits to mode bits.
func modeBits(m os.FileMode) uint32 {
	var v uint32
	if m&os.ModeSetuid != 0 {
		v |= kv.S_ISUID
	}
	if m&os.ModeSetgid != 0 {
		v |= kv.S_ISGID
	}
	if m&os.ModeSticky != 0 {
		v |= kv.S_ISVTX
	}
	return v
}

// Stat returns name's file info, following symbolic links.
func (b *Billy) Stat(name string) (os.FileInfo, error) {
	a, err := b.fs.Stat(b.abs(name))
	if err != nil {
		return nil, err
	}
	return FileInfo(path.Base(name), a), nil
}

// Lstat is Stat without following a link at the end.
func (b *Billy) Lstat(name string) (os.FileInfo, error) {
	a, err := b.fs.Lstat(b.abs(name))
	if err != nil {
		return nil, err
	}
	return FileInfo(path.Base(name), a), nil
}

// Rename renames, making the new name's parent directories as needed.
func (b *Billy) Rename(from, to string) error {
	if err := b.fs.MkdirAll(path.Dir(b.abs(to)), 0o777); err != nil {
		return err
	}
	return b.fs.Rename(b.abs(from), b.abs(to))
}

// Remove removes a file or an empty directory.
func (b *Billy) Remove(name string) error { return b.fs.Remove(b.abs(name)) }

// Join joins path elements.
func (b *Billy) Join(elem ...string) string { return path.Join(elem...) }

// TempFile creates a new file with a random name in dir.
func (b *Billy) TempFile(dir, prefix string) (billy.File, error) {
	for {
		var r [8]byte
		rand.Read(r[:])
		f, err := b.OpenFile(path.Join(dir, prefix+hex.EncodeToString(r[:])), O_RDWR|O_CREATE|O_EXCL, 0o666)
		if err == nil || !errors.Is(err, syscall.EEXIST) {
			return f, err
		}
	}
}

// ReadDir lists a directory in name order.
func (b *Billy) ReadDir(name string) ([]os.FileInfo, error) {
	var out []os.FileInfo
	var err error
	rerr := b.fs.ReadDir(b.abs(name), "", func(d kv.Dirent) bool {
		var a kv.Attr
		if a, err = b.fs.s.GetAttr(d.Ino); err != nil {
			return false
		}
		out = append(out, FileInfo(d.Name, a))
		return true
	})
	if rerr != nil {
		return nil, rerr
	}
	return out, pathErr("readdir", name, err)
}

// MkdirAll makes a directory and its parents.
func (b *Billy) MkdirAll(name string, perm os.FileMode) error {
	return b.fs.MkdirAll(b.abs(name), uint32(perm.Perm())|modeBits(perm))
}

// Symlink makes link point to target, making link's parents as needed.
func (b *Billy) Symlink(target, link string) error {
	if err := b.fs.MkdirAll(path.Dir(b.abs(link)), 0o777); err != nil {
		return err
	}
	return b.fs.Symlink(target, b.abs(link))
}

// Readlink returns a symbolic link's target.
func (b *Billy) Readlink(link string) (string, error) { return b.fs.Readlink(b.abs(link)) }

// Chroot returns the subdirectory p as a file system of its own.
func (b *Billy) Chroot(p string) (billy.Filesystem, error) {
	return &Billy{fs: b.fs, base: b.abs(p)}, nil
}

// Root is the directory's path in the workspace.
func (b *Billy) Root() string { return b.base }

// Chmod sets permission bits.
func (b *Billy) Chmod(name string, mode os.FileMode) error {
	return b.fs.Chmod(b.abs(name), uint32(mode.Perm())|modeBits(mode))
}

// Lchown sets the owner of name itself.
func (b *Billy) Lchown(name string, uid, gid int) error {
	return b.fs.Lchown(b.abs(name), uint32(uid), uint32(gid))
}

// Chown sets the owner of name, following links.
func (b *Billy) Chown(name string, uid, gid int) error {
	r, err := b.fs.lookup(b.abs(name), true, false)
	if err != nil {
		return pathErr("chown", name, err)
	}
	_, err = b.fs.kvSetAttr(r.ino, kv.SetAttrRequest{Valid: kv.SetUid | kv.SetGid, Uid: uint32(uid), Gid: uint32(gid)})
	return pathErr("chown", name, err)
}

// Chtimes sets access and modification times.
func (b *Billy) Chtimes(name string, atime, mtime time.Time) error {
	return b.fs.Chtimes(b.abs(name), atime, mtime)
}

// Capabilities says what the file system supports: everything.
func (b *Billy) Capabilities() billy.Capability { return billy.AllCapabilities }

type billyFile struct {
	*File
	shown  string
	locks  *inodeLocks
	locked bool
}

func (f *billyFile) Name() string { return f.shown }

func (f *billyFile) Lock() error {
	if !f.locked {
		f.locks.lock(f.ino)
		f.locked = true
	}
	return nil
}

func (f *billyFile) Unlock() error {
	if f.locked {
		f.locks.unlock(f.ino)
		f.locked = false
	}
	return nil
}

func (f *billyFile) Close() error {
	f.Unlock()
	return f.File.Close()
}

// inodeLocks are the advisory locks of billy files: one mutex per locked inode.
type inodeLocks struct {
	mu    sync.Mutex
	locks map[uint64]*inodeLock
}

type inodeLock struct {
	mu   sync.Mutex
	refs int
}

func (l *inodeLocks) lock(ino uint64) {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = make(map[uint64]*inodeLock)
	}
	il := l.locks[ino]
	if il == nil {
		il = &inodeLock{}
		l.locks[ino] = il
	}
	il.refs++
	l.mu.Unlock()
	il.mu.Lock()
}

func (l *inodeLocks) unlock(ino uint64) {
	l.mu.Lock()
	il := l.locks[ino]
	il.refs--
	if il.refs == 0 {
		delete(l.locks, ino)
	}
	l.mu.Unlock()
	il.mu.Unlock()
}

// FileInfo presents attributes as an fs.FileInfo whose Sys is a
// *syscall.Stat_t, as os.Stat's is.
func FileInfo(name string, a kv.Attr) fs.FileInfo { return &fileInfo{name: name, a: a} }

type fileInfo struct {
	name string
	a    kv.Attr
}

func (fi *fileInfo) Name() string       { return fi.name }
func (fi *fileInfo) Size() int64        { return int64(fi.a.Size) }
func (fi *fileInfo) ModTime() time.Time { return time.Unix(0, fi.a.Mtime) }
func (fi *fileInfo) IsDir() bool        { return fi.a.IsDir() }

func (fi *fileInfo) Mode() fs.FileMode {
	m := fs.FileMode(fi.a.Mode & 0o777)
	switch fi.a.Mode & kv.S_IFMT {
	case kv.S_IFDIR:
		m |= fs.ModeDir
	case kv.S_IFLNK:
		m |= fs.ModeSymlink
	case kv.S_IFIFO:
		m |= fs.ModeNamedPipe
	case kv.S_IFSOCK:
		m |= fs.ModeSocket
	case kv.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case kv.S_IFBLK:
		m |= fs.ModeDevice
	}
	if fi.a.Mode&kv.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if fi.a.Mode&kv.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if fi.a.Mode&kv.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}

func (fi *fileInfo) Sys() any {
	a := &fi.a
	return &syscall.Stat_t{
		Ino: a.Ino, Nlink: uint64(a.Nlink), Mode: a.Mode, Uid: a.Uid, Gid: a.Gid, Rdev: uint64(a.Rdev),
		Size: int64(a.Size), Blksize: 4096, Blocks: int64(a.Blocks),
		Atim: syscall.NsecToTimespec(a.Atime), Mtim: syscall.NsecToTimespec(a.Mtime), Ctim: syscall.NsecToTimespec(a.Ctime),
	}
}
