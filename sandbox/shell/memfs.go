package shell

import (
	"io"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/computerfs/computerfs/kv"
)

// memFS is the private /tmp: a small file system in memory, bounded in
// bytes. Symbolic links in it stay in it: a relative target resolves
// inside /tmp, an absolute one only if it names a path under /tmp.
type memFS struct {
	mu      sync.Mutex
	root    *memNode
	nextIno uint64
	used    int64
	limit   int64
}

type memNode struct {
	ino    uint64
	mode   uint32 // st_mode
	data   []byte
	kids   map[string]*memNode
	target string
	nlink  uint32
	atime  time.Time
	mtime  time.Time
	ctime  time.Time
}

func newMemFS(limit int64) *memFS {
	m := &memFS{nextIno: 2, limit: limit}
	now := time.Now()
	m.root = &memNode{ino: 1, mode: kv.S_IFDIR | 0o1777, kids: map[string]*memNode{}, nlink: 2, atime: now, mtime: now, ctime: now}
	return m
}

func (m *memFS) newNode(mode uint32) *memNode {
	now := time.Now()
	n := &memNode{ino: m.nextIno, mode: mode, nlink: 1, atime: now, mtime: now, ctime: now}
	m.nextIno++
	if mode&kv.S_IFMT == kv.S_IFDIR {
		n.kids = map[string]*memNode{}
		n.nlink = 2
	}
	return n
}

func (n *memNode) isDir() bool { return n.mode&kv.S_IFMT == kv.S_IFDIR }

func (n *memNode) info(name string) *fileInfo {
	size := int64(len(n.data))
	if n.mode&kv.S_IFMT == kv.S_IFLNK {
		size = int64(len(n.target))
	}
	// blocks as tmpfs (the sandbox's /tmp) counts them: whole 4 KiB
	// pages of data, none for directories and links
	blocks := int64(0)
	if n.mode&kv.S_IFMT == kv.S_IFREG {
		blocks = (size + 4095) / 4096 * 8
	}
	return &fileInfo{name: name, mode: goMode(n.mode), size: size, mtime: n.mtime, atime: n.atime,
		ctime: n.ctime, ino: n.ino, nlink: n.nlink, blocks: blocks}
}

type memLoc struct {
	dir  *memNode
	name string
	node *memNode // nil if missing
}

// walk resolves p. With follow, a link at the end is followed; with
// parent, a missing last name is fine (node nil).
func (m *memFS) walk(p string, follow, parent bool) (memLoc, error) {
	mustDir := strings.HasSuffix(p, "/")
	if mustDir {
		follow = true
	}
	names := split(p)
	cur := m.root
	var stack []*memNode
	links := 0
	for i := 0; i < len(names); i++ {
		name := names[i]
		last := i == len(names)-1
		if name == ".." {
			if len(stack) > 0 {
				cur, stack = stack[len(stack)-1], stack[:len(stack)-1]
			}
			if last && parent {
				return memLoc{}, syscall.EINVAL
			}
			continue
		}
		if !cur.isDir() {
			return memLoc{}, syscall.ENOTDIR
		}
		kid := cur.kids[name]
		if kid == nil {
			if last && parent {
				return memLoc{dir: cur, name: name}, nil
			}
			return memLoc{}, syscall.ENOENT
		}
		if kid.mode&kv.S_IFMT == kv.S_IFLNK && (!last || follow) {
			if links++; links > 40 {
				return memLoc{}, syscall.ELOOP
			}
			t := kid.target
			if strings.HasPrefix(t, "/") {
				rest, ok := strings.CutPrefix(t, tmpRoot)
				if !ok || (rest != "" && !strings.HasPrefix(rest, "/")) {
					return memLoc{}, syscall.ENOENT // a link out of /tmp leads nowhere here
				}
				cur, stack, t = m.root, nil, rest
			}
			names = append(split(t), names[i+1:]...)
			i = -1
			if len(names) == 0 && parent {
				return memLoc{}, syscall.EINVAL
			}
			continue
		}
		if last {
			if mustDir && !kid.isDir() {
				return memLoc{}, syscall.ENOTDIR
			}
			return memLoc{dir: cur, name: name, node: kid}, nil
		}
		stack = append(stack, cur)
		cur = kid
	}
	if parent {
		return memLoc{}, syscall.EINVAL
	}
	return memLoc{dir: cur, name: "", node: cur}, nil
}

func split(p string) []string {
	var out []string
	for s := range strings.SplitSeq(p, "/") {
		if s != "" && s != "." {
			out = append(out, s)
		}
	}
	return out
}

func (m *memFS) open(p string, flag int, perm uint32) (vfile, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, err := m.walk(p, true, false)
	if err == syscall.ENOENT && flag&O_CREATE != 0 {
		// create, following a dangling link's target is not supported: plain names only
		l, err = m.walk(p, false, true)
		if err == nil && l.node == nil {
			l.node = m.newNode(kv.S_IFREG | perm&0o7777&^0o022)
			l.dir.kids[l.name] = l.node
			l.dir.mtime = time.Now()
		} else if err == nil {
			err = syscall.ENOENT
		}
	} else if err == nil && flag&(O_CREATE|O_EXCL) == O_CREATE|O_EXCL {
		err = syscall.EEXIST
	}
	if err != nil {
		return nil, err
	}
	n := l.node
	if n.isDir() && flag&(O_WRONLY|O_RDWR) != 0 {
		return nil, syscall.EISDIR
	}
	if flag&O_TRUNC != 0 && flag&(O_WRONLY|O_RDWR) != 0 && len(n.data) > 0 {
		m.used -= int64(len(n.data))
		n.data = nil
		n.mtime = time.Now()
	}
	return &memFile{m: m, n: n, flag: flag}, nil
}

func (m *memFS) stat(p string) (*fileInfo, error)  { return m.statx(p, true) }
func (m *memFS) lstat(p string) (*fileInfo, error) { return m.statx(p, false) }

func (m *memFS) statx(p string, follow bool) (*fileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, err := m.walk(p, follow, false)
	if err != nil {
		return nil, err
	}
	name := l.name
	if name == "" {
		name = "tmp"
	}
	return l.node.info(name), nil
}

func (m *memFS) readDir(p string) ([]dirEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, err := m.walk(p, true, false)
	if err != nil {
		return nil, err
	}
	if !l.node.isDir() {
		return nil, syscall.ENOTDIR
	}
	out := make([]dirEntry, 0, len(l.node.kids))
	for name, k := range l.node.kids {
		out = append(out, dirEntry{name: name, typ: goMode(k.mode).Type(), ino: k.ino})
	}
	sortEntries(out)
	return out, nil
}

func (m *memFS) create(p string, n *memNode) error {
	l, err := m.walk(p, false, true)
	if err != nil {
		return err
	}
	if l.node != nil {
		return syscall.EEXIST
	}
	l.dir.kids[l.name] = n
	l.dir.mtime = time.Now()
	if n.isDir() {
		l.dir.nlink++
	}
	return nil
}

func (m *memFS) mkdir(p string, perm uint32) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.create(p, m.newNode(kv.S_IFDIR|perm&0o7777&^0o022))
}

func (m *memFS) symlink(target, link string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.newNode(kv.S_IFLNK | 0o777)
	n.target = target
	return m.create(link, n)
}

func (m *memFS) readlink(p string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, err := m.walk(p, false, false)
	if err != nil {
		return "", err
	}
	if l.node.mode&kv.S_IFMT != kv.S_IFLNK {
		return "", syscall.EINVAL
	}
	return l.node.target, nil
}

func (m *memFS) link(o, n string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	src, err := m.walk(o, false, false)
	if err != nil {
		return err
	}
	if src.node.isDir() {
		return syscall.EPERM
	}
	if err := m.create(n, src.node); err != nil {
		return err
	}
	src.node.nlink++
	src.node.ctime = time.Now()
	return nil
}

func (m *memFS) remove(p string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, err := m.walk(p, false, true)
	if err != nil {
		return err
	}
	if l.node == nil {
		return syscall.ENOENT
	}
	if l.node.isDir() {
		if len(l.node.kids) > 0 {
			return syscall.ENOTEMPTY
		}
		l.dir.nlink--
	}
	m.drop(l.node)
	delete(l.dir.kids, l.name)
	l.dir.mtime = time.Now()
	return nil
}

// drop forgets one name of n; its bytes are freed with its last name.
func (m *memFS) drop(n *memNode) {
	n.nlink--
	if n.isDir() || n.nlink == 0 {
		m.used -= int64(len(n.data))
		n.nlink = 0
	}
}

func (m *memFS) rename(o, n string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	src, err := m.walk(o, false, true)
	if err != nil {
		return err
	}
	if src.node == nil {
		return syscall.ENOENT
	}
	dst, err := m.walk(n, false, true)
	if err != nil {
		return err
	}
	if dst.node == src.node {
		return nil
	}
	if src.node.isDir() {
		for d := dst.dir; ; {
			if d == src.node {
				return syscall.EINVAL // into itself
			}
			p := m.parentOf(d)
			if p == nil {
				break
			}
			d = p
		}
	}
	if dst.node != nil {
		switch {
		case dst.node.isDir() && !src.node.isDir():
			return syscall.EISDIR
		case !dst.node.isDir() && src.node.isDir():
			return syscall.ENOTDIR
		case dst.node.isDir() && len(dst.node.kids) > 0:
			return syscall.ENOTEMPTY
		}
		if dst.node.isDir() {
			dst.dir.nlink--
		}
		m.drop(dst.node)
	}
	delete(src.dir.kids, src.name)
	dst.dir.kids[dst.name] = src.node
	if src.node.isDir() {
		src.dir.nlink--
		dst.dir.nlink++
	}
	now := time.Now()
	src.dir.mtime, dst.dir.mtime, src.node.ctime = now, now, now
	return nil
}

// parentOf finds the directory holding d (nil for the root). It keeps
// the directories still to look into on a list, not Go's stack: a tree
// of any depth is the agent's to make.
func (m *memFS) parentOf(d *memNode) *memNode {
	if d == m.root {
		return nil
	}
	todo := []*memNode{m.root}
	for len(todo) > 0 {
		n := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		for _, k := range n.kids {
			if k == d {
				return n
			}
			if k.isDir() {
				todo = append(todo, k)
			}
		}
	}
	return nil
}

func (m *memFS) chmod(p string, mode uint32) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, err := m.walk(p, true, false)
	if err != nil {
		return err
	}
	l.node.mode = l.node.mode&kv.S_IFMT | mode&0o7777
	l.node.ctime = time.Now()
	return nil
}

func (m *memFS) chtimes(p string, a, mt time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, err := m.walk(p, true, false)
	if err != nil {
		return err
	}
	l.node.atime, l.node.mtime, l.node.ctime = a, mt, time.Now()
	return nil
}

// memFile is an open file of /tmp.
type memFile struct {
	m    *memFS
	n    *memNode
	flag int
	off  int64
}

func (f *memFile) Read(p []byte) (int, error) {
	n, err := f.ReadAt(p, f.off)
	f.off += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	if f.flag&(O_WRONLY|O_RDWR) == O_WRONLY {
		return 0, syscall.EBADF
	}
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if f.n.isDir() {
		return 0, syscall.EISDIR
	}
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Write(p []byte) (int, error) {
	if f.flag&(O_WRONLY|O_RDWR) == 0 {
		return 0, syscall.EBADF
	}
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if f.flag&O_APPEND != 0 {
		f.off = int64(len(f.n.data))
	}
	end := f.off + int64(len(p))
	if grow := end - int64(len(f.n.data)); grow > 0 {
		if f.m.used+grow > f.m.limit {
			return 0, syscall.ENOSPC
		}
		f.m.used += grow
		f.n.data = append(f.n.data, make([]byte, grow)...)
	}
	copy(f.n.data[f.off:], p)
	f.off = end
	f.n.mtime = time.Now()
	f.n.ctime = f.n.mtime
	return len(p), nil
}

func (f *memFile) Seek(off int64, whence int) (int64, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	switch whence {
	case io.SeekCurrent:
		off += f.off
	case io.SeekEnd:
		off += int64(len(f.n.data))
	}
	if off < 0 {
		return 0, syscall.EINVAL
	}
	f.off = off
	return off, nil
}

func (f *memFile) Truncate(size int64) error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	d := size - int64(len(f.n.data))
	if d > 0 && f.m.used+d > f.m.limit {
		return syscall.ENOSPC
	}
	f.m.used += d
	if d > 0 {
		f.n.data = append(f.n.data, make([]byte, d)...)
	} else {
		f.n.data = f.n.data[:size]
	}
	f.n.mtime = time.Now()
	return nil
}

func (f *memFile) Close() error { return nil }
