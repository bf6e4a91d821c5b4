package wsfs

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
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
//
// A regular file opened for writing with O_TRUNC (and not O_EXCL), or
// truncated to nothing through its billy.File, changes at once at Close:
// what is written is kept in memory (up to BufferMax bytes) and becomes
// the file's whole content in one change of the store, as if written
// elsewhere and renamed over it. Until then readers see the old content;
// a file that did not exist appears only then; a crash or a file never
// closed leaves the old content, never an empty or half-written file.
// go-git writes its index, config, refs, HEAD, packed-refs and pack
// indexes so, in place; its packs and loose objects go through TempFile
// and Rename, streaming.
func (b *Billy) OpenFile(name string, flag int, perm os.FileMode) (billy.File, error) {
	p := b.abs(name)
	if flag&O_CREATE != 0 {
		if err := b.fs.MkdirAll(path.Dir(p), 0o777); err != nil {
			return nil, err
		}
	}
	mode := uint32(perm.Perm()) | modeBits(perm)
	if flag&O_TRUNC != 0 && flag&(O_WRONLY|O_RDWR) != 0 && flag&O_EXCL == 0 {
		r, err := b.fs.lookup(p, true, false)
		switch {
		case err == kv.ErrNotFound && flag&O_CREATE != 0:
			// Made at Close, with its content.
			f := &File{fs: b.fs, name: p, flag: flag &^ O_TRUNC}
			return &billyFile{File: f, shown: name, locks: b.fs.locks, buffered: true, create: true, perm: mode}, nil
		case err == nil && r.attr.IsRegular():
			if err := b.fs.guardOpen(&r, flag); err != nil {
				return nil, pathErr("open", p, err)
			}
			f := &File{fs: b.fs, name: p, ino: r.ino, flag: flag &^ O_TRUNC}
			return &billyFile{File: f, shown: name, locks: b.fs.locks, buffered: true}, nil
		}
	}
	f, err := b.fs.Open(p, flag, mode)
	if err != nil {
		return nil, err
	}
	return &billyFile{File: f, shown: name, locks: b.fs.locks}, nil
}

// BufferMax is how much a billy file that changes at Close (see
// Billy.OpenFile) keeps in memory: past it, what was written goes to the
// store and the rest is written as it comes, as to any file (a large
// work-tree file checked out, not git's metadata).
var BufferMax = 64 << 20

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
	lockAt lockKey

	// With buffered, buf is the file's new content, which Close writes
	// (File.off is the offset in it); with create, the file does not
	// exist yet and Close makes it, with permission bits perm.
	buffered, create bool
	buf              []byte
	perm             uint32
}

func (f *billyFile) Name() string { return f.shown }

func (f *billyFile) Lock() error {
	if !f.locked {
		f.lockAt = lockKey{ino: f.ino}
		if f.create {
			f.lockAt = lockKey{path: f.File.name}
		}
		f.locks.lock(f.lockAt)
		f.locked = true
	}
	return nil
}

func (f *billyFile) Unlock() error {
	if f.locked {
		f.locks.unlock(f.lockAt)
		f.locked = false
	}
	return nil
}

// Close writes a buffered file's content, then closes.
func (f *billyFile) Close() error {
	err := f.flush()
	f.Unlock()
	if cerr := f.File.Close(); err == nil {
		err = cerr
	}
	return err
}

// flush makes the buffered content the file's and ends buffering.
func (f *billyFile) flush() error {
	if !f.buffered {
		return nil
	}
	buf := f.buf
	f.buffered, f.buf = false, nil
	if f.create {
		ino, err := f.fs.writeWhole(f.File.name, buf, f.perm)
		if err != nil {
			return pathErr("write", f.File.name, err)
		}
		f.ino, f.create = ino, false
		return nil
	}
	_, err := f.fs.kvSetContent(f.ino, buf)
	return pathErr("write", f.File.name, err)
}

func (f *billyFile) Read(p []byte) (int, error) {
	if !f.buffered {
		return f.File.Read(p)
	}
	n, err := f.ReadAt(p, f.off)
	f.off += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (f *billyFile) ReadAt(p []byte, off int64) (int, error) {
	if !f.buffered {
		return f.File.ReadAt(p, off)
	}
	if !f.readable() {
		return 0, pathErr("read", f.File.name, syscall.EBADF)
	}
	if off < 0 {
		return 0, pathErr("read", f.File.name, syscall.EINVAL)
	}
	if off >= int64(len(f.buf)) {
		return 0, io.EOF
	}
	n := copy(p, f.buf[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *billyFile) Write(p []byte) (int, error) {
	if !f.buffered {
		return f.File.Write(p)
	}
	if f.flag&O_APPEND != 0 {
		f.off = int64(len(f.buf))
	}
	n, err := f.WriteAt(p, f.off)
	f.off += int64(n)
	return n, err
}

func (f *billyFile) WriteAt(p []byte, off int64) (int, error) {
	if !f.buffered {
		return f.File.WriteAt(p, off)
	}
	if !f.writable() {
		return 0, pathErr("write", f.File.name, syscall.EBADF)
	}
	if off < 0 {
		return 0, pathErr("write", f.File.name, syscall.EINVAL)
	}
	end := off + int64(len(p))
	if end > int64(len(f.buf)) {
		f.buf = append(f.buf, make([]byte, end-int64(len(f.buf)))...)
	}
	copy(f.buf[off:], p)
	if len(f.buf) > BufferMax {
		if err := f.flush(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

func (f *billyFile) Seek(offset int64, whence int) (int64, error) {
	if !f.buffered || whence != io.SeekEnd {
		return f.File.Seek(offset, whence)
	}
	if int64(len(f.buf))+offset < 0 {
		return 0, pathErr("seek", f.File.name, syscall.EINVAL)
	}
	f.off = int64(len(f.buf)) + offset
	return f.off, nil
}

// Truncate to nothing starts buffering (go-git rewrites a ref so: read it,
// truncate, write); a buffered file's buffer is cut or extended.
func (f *billyFile) Truncate(size int64) error {
	if !f.writable() || size < 0 {
		return pathErr("truncate", f.File.name, syscall.EINVAL)
	}
	if !f.buffered && size == 0 {
		a, err := f.File.Stat()
		if err != nil {
			return err
		}
		if a.IsRegular() {
			f.buffered, f.buf = true, nil
			return nil
		}
	}
	if !f.buffered {
		return f.File.Truncate(size)
	}
	if size <= int64(len(f.buf)) {
		f.buf = f.buf[:size]
	} else {
		f.buf = append(f.buf, make([]byte, size-int64(len(f.buf)))...)
	}
	return nil
}

// Stat returns the file's attributes; a buffered file's size is its
// buffer's.
func (f *billyFile) Stat() (kv.Attr, error) {
	if !f.buffered {
		return f.File.Stat()
	}
	if f.create {
		return kv.Attr{Mode: kv.S_IFREG | f.perm&0o7777&^f.fs.umask, Nlink: 1, Size: uint64(len(f.buf))}, nil
	}
	a, err := f.File.Stat()
	a.Size = uint64(len(f.buf))
	return a, err
}

// Sync syncs the store; a buffered file's content is not in it before
// Close.
func (f *billyFile) Sync() error { return f.File.Sync() }

// inodeLocks are the advisory locks of billy files: one mutex per locked inode.
type inodeLocks struct {
	mu    sync.Mutex
	locks map[lockKey]*inodeLock
}

// lockKey is an inode, or the path of a file to be made at Close.
type lockKey struct {
	ino  uint64
	path string
}

type inodeLock struct {
	mu   sync.Mutex
	refs int
}

func (l *inodeLocks) lock(k lockKey) {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = make(map[lockKey]*inodeLock)
	}
	il := l.locks[k]
	if il == nil {
		il = &inodeLock{}
		l.locks[k] = il
	}
	il.refs++
	l.mu.Unlock()
	il.mu.Lock()
}

func (l *inodeLocks) unlock(k lockKey) {
	l.mu.Lock()
	il := l.locks[k]
	il.refs--
	if il.refs == 0 {
		delete(l.locks, k)
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

// LockRepo makes the daemon's own writers of one git repository (the
// syncer's commits, git on the shell fast path) take turns: it waits for
// the lock of the repository whose .git directory is gitDir and returns
// its unlock. It is held in memory only, so a crash leaves nothing behind
// (git processes, which the daemon cannot see, have .git/index.lock).
func (f *FS) LockRepo(gitDir string) (unlock func()) {
	k := lockKey{path: "repo " + path.Clean("/"+gitDir)}
	f.locks.lock(k)
	return func() { f.locks.unlock(k) }
}
