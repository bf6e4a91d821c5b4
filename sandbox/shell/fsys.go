package shell

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/wsfs"
)

// Where the namespace's parts are, as the sandbox shows them.
const (
	wsRoot  = "/workspace"
	tmpRoot = "/tmp"
)

// fileInfo is what stat returns for any file of the namespace. Its Sys is
// the *fileInfo itself, never a host structure.
type fileInfo struct {
	name   string
	mode   fs.FileMode
	size   int64
	mtime  time.Time
	atime  time.Time
	ctime  time.Time
	ino    uint64
	nlink  uint32
	uid    uint32
	gid    uint32
	blocks int64
	remote bool
}

func (i *fileInfo) Name() string       { return i.name }
func (i *fileInfo) Size() int64        { return i.size }
func (i *fileInfo) Mode() fs.FileMode  { return i.mode }
func (i *fileInfo) ModTime() time.Time { return i.mtime }
func (i *fileInfo) IsDir() bool        { return i.mode.IsDir() }
func (i *fileInfo) Sys() any           { return i }

// goMode converts stat(2) mode bits to an fs.FileMode.
func goMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & kv.S_IFMT {
	case kv.S_IFDIR:
		mode |= fs.ModeDir
	case kv.S_IFLNK:
		mode |= fs.ModeSymlink
	case kv.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case kv.S_IFSOCK:
		mode |= fs.ModeSocket
	case kv.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case kv.S_IFBLK:
		mode |= fs.ModeDevice
	}
	if m&kv.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&kv.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&kv.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}

// unixMode converts back: the st_mode of a FileMode.
func unixMode(m fs.FileMode) uint32 {
	u := uint32(m.Perm())
	switch {
	case m.IsDir():
		u |= kv.S_IFDIR
	case m&fs.ModeSymlink != 0:
		u |= kv.S_IFLNK
	case m&fs.ModeNamedPipe != 0:
		u |= kv.S_IFIFO
	case m&fs.ModeSocket != 0:
		u |= kv.S_IFSOCK
	case m&fs.ModeCharDevice != 0:
		u |= kv.S_IFCHR
	case m&fs.ModeDevice != 0:
		u |= kv.S_IFBLK
	default:
		u |= kv.S_IFREG
	}
	if m&fs.ModeSetuid != 0 {
		u |= kv.S_ISUID
	}
	if m&fs.ModeSetgid != 0 {
		u |= kv.S_ISGID
	}
	if m&fs.ModeSticky != 0 {
		u |= kv.S_ISVTX
	}
	return u
}

func attrInfo(name string, a kv.Attr) *fileInfo {
	return &fileInfo{
		name: name, mode: goMode(a.Mode), size: int64(a.Size),
		mtime: time.Unix(0, a.Mtime), atime: time.Unix(0, a.Atime), ctime: time.Unix(0, a.Ctime),
		ino: a.Ino, nlink: a.Nlink, uid: a.Uid, gid: a.Gid, blocks: int64(a.Blocks),
		remote: a.Flags&kv.FlagRemote != 0,
	}
}

// dirEntry is one name of a directory listing.
type dirEntry struct {
	name string
	typ  fs.FileMode // type bits only
	ino  uint64
}

// vfile is an open file of any part of the namespace.
type vfile interface {
	io.Reader
	io.Writer
	io.Seeker
	io.Closer
	io.ReaderAt
	Truncate(size int64) error
}

// backend is one part of the namespace (the workspace, /tmp). Paths are
// relative to its root; a trailing slash requires a directory.
type backend interface {
	open(p string, flag int, perm uint32) (vfile, error)
	stat(p string) (*fileInfo, error)
	lstat(p string) (*fileInfo, error)
	readDir(p string) ([]dirEntry, error)
	mkdir(p string, perm uint32) error
	remove(p string) error
	rename(oldp, newp string) error
	symlink(target, link string) error
	readlink(p string) (string, error)
	link(oldp, newp string) error
	chmod(p string, mode uint32) error
	chtimes(p string, atime, mtime time.Time) error
}

// wsBackend is the workspace store through wsfs. The spec's path rules
// are the FS's (wsfs.FS.WithPolicy, set by whoever makes the Shell): they
// are enforced where wsfs resolves names and changes inodes, so every
// command, git included, which reaches the workspace through the same FS
// without this backend, is held to them without knowing.
type wsBackend struct{ fs *wsfs.FS }

func (w wsBackend) open(p string, flag int, perm uint32) (vfile, error) {
	f, err := w.fs.Open(p, flag, perm)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (w wsBackend) stat(p string) (*fileInfo, error) {
	a, err := w.fs.Stat(p)
	if err != nil {
		return nil, err
	}
	return attrInfo(path.Base("/"+p), a), nil
}

func (w wsBackend) lstat(p string) (*fileInfo, error) {
	a, err := w.fs.Lstat(p)
	if err != nil {
		return nil, err
	}
	return attrInfo(path.Base("/"+p), a), nil
}

func (w wsBackend) readDir(p string) ([]dirEntry, error) {
	var out []dirEntry
	err := w.fs.ReadDir(p, "", func(d kv.Dirent) bool {
		out = append(out, dirEntry{name: d.Name, typ: goMode(d.Type).Type(), ino: d.Ino})
		return true
	})
	return out, err
}

func (w wsBackend) mkdir(p string, perm uint32) error      { return w.fs.Mkdir(p, perm) }
func (w wsBackend) remove(p string) error                  { return w.fs.Remove(p) }
func (w wsBackend) rename(o, n string) error               { return w.fs.Rename(o, n) }
func (w wsBackend) symlink(target, link string) error      { return w.fs.Symlink(target, link) }
func (w wsBackend) readlink(p string) (string, error)      { return w.fs.Readlink(p) }
func (w wsBackend) link(o, n string) error                 { return w.fs.Link(o, n) }
func (w wsBackend) chmod(p string, mode uint32) error      { return w.fs.Chmod(p, mode) }
func (w wsBackend) chtimes(p string, a, m time.Time) error { return w.fs.Chtimes(p, a, m) }

// namespace is the file tree the interpreter sees: a root with workspace,
// tmp and dev in it, and nothing else.
type namespace struct {
	ws  backend
	tmp backend
}

// Special files that always exist.
var devFiles = []string{"null", "stderr", "stdin", "stdout", "zero"}

// route maps an absolute, cleaned path to its backend and the path there.
// virt is set for the directories and files the namespace makes up
// ("/", "/dev", "/dev/null"...).
func (n *namespace) route(abs string) (b backend, rel string, virt bool, err error) {
	t := strings.TrimSuffix(abs, "/")
	switch {
	case t == "" || t == "/dev":
		return nil, t + "/", true, nil
	case abs == wsRoot || strings.HasPrefix(abs, wsRoot+"/"):
		return n.ws, abs[len(wsRoot):], false, nil
	case abs == tmpRoot || strings.HasPrefix(abs, tmpRoot+"/"):
		return n.tmp, abs[len(tmpRoot):], false, nil
	case strings.HasPrefix(t, "/dev/") && t == abs:
		for _, d := range devFiles {
			if t == "/dev/"+d {
				return nil, t, true, nil
			}
		}
	}
	return nil, "", false, syscall.ENOENT
}

// virtInfo is the stat of a made-up path.
func virtInfo(abs string) *fileInfo {
	if abs == "/" || abs == "/dev/" {
		return &fileInfo{name: path.Base(abs), mode: fs.ModeDir | 0o755, nlink: 2, ino: 1}
	}
	return &fileInfo{name: path.Base(abs), mode: fs.ModeDevice | fs.ModeCharDevice | 0o666, nlink: 1}
}

// virtDir lists a made-up directory.
func virtDir(abs string) []dirEntry {
	if abs == "/" {
		return []dirEntry{{name: "dev", typ: fs.ModeDir}, {name: "tmp", typ: fs.ModeDir}, {name: "workspace", typ: fs.ModeDir}}
	}
	var out []dirEntry
	for _, d := range devFiles {
		out = append(out, dirEntry{name: d, typ: fs.ModeDevice | fs.ModeCharDevice})
	}
	return out
}

// absPath makes p absolute against cwd and cleans it lexically (".." is
// taken by name, as the shell's cd does). A trailing slash is kept.
func absPath(cwd, p string) string {
	if p == "" {
		return ""
	}
	if !strings.HasPrefix(p, "/") {
		p = cwd + "/" + p
	}
	slash := strings.HasSuffix(p, "/") || strings.HasSuffix(p, "/.")
	c := path.Clean(p)
	if slash && c != "/" {
		c += "/"
	}
	return c
}

// errno returns the errno in err, or EIO.
func errno(err error) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return syscall.ENOENT
	case errors.Is(err, fs.ErrExist):
		return syscall.EEXIST
	case errors.Is(err, fs.ErrPermission):
		return syscall.EACCES
	}
	return syscall.EIO
}

// errText is strerror(3) of err's errno, as GNU tools print it.
func errText(err error) string {
	e := errno(err)
	s := e.Error()
	if e == syscall.EIO {
		s = "Input/output error"
	}
	if s != "" {
		s = strings.ToUpper(s[:1]) + s[1:]
	}
	return s
}

// pathError makes the error a command reports about name.
func pathError(op, name string, err error) error {
	return &os.PathError{Op: op, Path: name, Err: errno(err)}
}
