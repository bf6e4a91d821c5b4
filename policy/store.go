package policy

import (
	"strings"
	"sync"
	"syscall"

	"github.com/computerfs/computerfs/kv"
)

// maxDepth bounds a walk up the tree (a store has no cycles; a damaged
// one must not loop).
const maxDepth = 4096

// DirPath returns the store path of the directory dir ("/" for the root)
// by its names in the store.
func DirPath(st *kv.Store, dir uint64) (string, error) {
	if dir == kv.RootIno {
		return "/", nil
	}
	var rev []string
	for range maxDepth {
		parent, name, err := firstName(st, dir)
		if err != nil {
			return "", err
		}
		rev = append(rev, name)
		if parent == kv.RootIno {
			n := 0
			for _, s := range rev {
				n += 1 + len(s)
			}
			b := make([]byte, 0, n)
			for i := len(rev) - 1; i >= 0; i-- {
				b = append(append(b, '/'), rev[i]...)
			}
			return string(b), nil
		}
		dir = parent
	}
	return "", syscall.ELOOP
}

// Join is the store path of name in the directory dir.
func Join(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

// Paths calls fn with each store path of ino (every hard link's; "/" for
// the root) until fn returns false. An inode without a name (unlinked
// while open) has no path.
func Paths(st *kv.Store, ino uint64, fn func(p string) bool) error {
	if ino == kv.RootIno {
		fn("/")
		return nil
	}
	var err error
	if e := st.Names(ino, func(dir uint64, name string) bool {
		var dp string
		if dp, err = DirPath(st, dir); err != nil {
			return false
		}
		return fn(Join(dp, name))
	}); e != nil {
		return e
	}
	return err
}

// paths_ is Paths through the cache of directory paths.
func (c *Checker) inoPaths(st *kv.Store, ino uint64, fn func(p string) bool) error {
	if ino == kv.RootIno {
		fn("/")
		return nil
	}
	var err error
	if e := st.Names(ino, func(dir uint64, name string) bool {
		var dp string
		if dp, err = c.DirPath(st, dir); err != nil {
			return false
		}
		return fn(Join(dp, name))
	}); e != nil {
		return e
	}
	return err
}

// InoAttr is Ino for the inode whose attributes are a: a file with one
// name is checked by its remembered name, a directory by its remembered
// path, without a walk of the store.
func (c *Checker) InoAttr(st *kv.Store, a *kv.Attr, write bool) error {
	if c == nil {
		return nil
	}
	if write && c.readOnly {
		return c.Write("/")
	}
	if a.IsDir() {
		p, err := c.DirPath(st, a.Ino)
		if err == syscall.ENOENT {
			return nil // gone meanwhile: the operation itself will say so
		}
		if err != nil {
			return err
		}
		return c.check(p, write)
	}
	if a.Nlink != 1 || a.Ino == kv.RootIno {
		return c.inoAll(st, a.Ino, write)
	}
	pc := &c.paths
	pc.mu.Lock()
	fn, ok := pc.files[a.Ino]
	pc.mu.Unlock()
	if !ok || fn.ctime != a.Ctime {
		found := false
		if err := st.Names(a.Ino, func(d uint64, n string) bool {
			fn, found = fileName{a.Ctime, d, n}, true
			return false
		}); err != nil {
			return err
		}
		if !found {
			return nil // unlinked: it has no path
		}
		pc.mu.Lock()
		if pc.files == nil || len(pc.files) >= maxCachedDirs {
			pc.files = make(map[uint64]fileName)
		}
		pc.files[a.Ino] = fn
		pc.mu.Unlock()
	}
	dp, err := c.DirPath(st, fn.dir)
	if err == syscall.ENOENT {
		return nil
	}
	if err != nil {
		return err
	}
	return c.check(Join(dp, fn.name), write)
}

// Ino refuses reading (or, with write, changing) the inode ino when a rule
// covers any of its names: a hard link is no way around a rule. Directories
// and files with one name have one path to check.
func (c *Checker) Ino(st *kv.Store, ino uint64, write bool) error {
	if c == nil {
		return nil
	}
	if write && c.readOnly {
		return c.Write("/")
	}
	a, err := st.GetAttr(ino)
	if err != nil {
		return nil // gone: the operation itself will say so
	}
	return c.InoAttr(st, &a, write)
}

// inoAll checks every name of ino.
func (c *Checker) inoAll(st *kv.Store, ino uint64, write bool) error {
	var refused error
	err := c.inoPaths(st, ino, func(p string) bool {
		refused = c.check(p, write)
		return refused == nil
	})
	if refused != nil {
		return refused
	}
	if err == syscall.ENOENT {
		return nil // gone meanwhile: the operation itself will say so
	}
	return err
}

// Rename refuses moving the entry at the store path src (the inode ino, a
// directory if isDir) to dst, or exchanging the two when exchange is set
// and dstIno names what is at dst: both names are changes, and moving a
// directory moves everything under it, so it is refused when that holds a
// read-only path, or a denied one that would not be denied where it lands.
func (c *Checker) Rename(st *kv.Store, src string, ino uint64, isDir bool, dst string, exchange bool, dstIno uint64, dstIsDir bool) error {
	if c == nil {
		return nil
	}
	if err := c.Write(src); err != nil {
		return err
	}
	if err := c.Write(dst); err != nil {
		return err
	}
	if err := c.Ino(st, ino, true); err != nil { // another name of a hard-linked file
		return err
	}
	if isDir {
		if err := c.moveTree(st, ino, src, dst); err != nil {
			return err
		}
	}
	if exchange && dstIsDir {
		return c.moveTree(st, dstIno, dst, src)
	}
	return nil
}

// moveTree checks moving the directory dir from the path from to the
// path to: nothing under it may be read-only, and everything denied under
// it must stay denied. Only the subtrees some rule may reach are walked.
func (c *Checker) moveTree(st *kv.Store, dir uint64, from, to string) error {
	type todo struct {
		ino      uint64
		from, to string
	}
	queue := []todo{{dir, from, to}}
	for len(queue) > 0 {
		t := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		ro, deny := c.ReadOnlyBelow(t.from), c.DeniedBelow(t.from)
		if !ro && !deny {
			continue
		}
		var refused error
		err := st.ReadDir(t.ino, "", func(d kv.Dirent) bool {
			f, n := Join(t.from, d.Name), Join(t.to, d.Name)
			if ro {
				if r := c.roCovers(f); r != nil {
					refused = r
					return false
				}
			}
			if deny && c.Denied(f) != nil {
				if c.Denied(n) == nil {
					refused = &Refusal{Rule: c.Denied(f).Rule, Errno: syscall.EACCES,
						Msg: "moving " + Show(from) + " would make the denied " + Show(f) + " readable as " + Show(n)}
					return false
				}
				if !ro {
					return true // denied where it lands too, and all under it
				}
			}
			if d.Type == kv.S_IFDIR {
				queue = append(queue, todo{d.Ino, f, n})
			}
			return true
		})
		if refused != nil {
			return refused
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// roCovers is the read-only rule (not deny) that covers p, as a refusal.
func (c *Checker) roCovers(p string) *Refusal {
	if c.readOnly {
		return &Refusal{Rule: "policy read_only", Msg: "the workspace is read-only", Errno: syscall.EROFS}
	}
	if g := firstCovering(c.ro, p); g != nil {
		return &Refusal{Rule: g.rule, Msg: "moving it would move the read-only " + Show(p), Errno: syscall.EROFS}
	}
	return nil
}

// pathCache remembers directories' paths until a directory moves
// (kv.Store.DirMoves), so that checking a file costs no walk up the tree.
type pathCache struct {
	mu  sync.Mutex
	st  *kv.Store
	gen uint64
	m   map[uint64]string
	// bytes: the length of m's paths
	bytes int
	// files: the name of files with one, valid while their ctime stays
	// (a rename sets it; a new link makes two names)
	files map[uint64]fileName
}

type fileName struct {
	ctime int64
	dir   uint64
	name  string
}

// maxCachedDirs bounds the cache; past it, it starts again. So does
// maxCachedBytes, the paths' length in all: a directory thousands of
// levels deep has a path of megabytes.
const (
	maxCachedDirs  = 1 << 16
	maxCachedBytes = 32 << 20
)

// DirPath is the package's DirPath, through the checker's cache of
// directory paths. A nil checker does not cache. It walks up from dir to
// the first directory whose path is cached (or the root) in a loop, at
// most maxDepth levels (past them ENAMETOOLONG, as for a path longer than
// PATH_MAX), never by recursion: the agent makes trees of any depth, and
// a recursion a level deep on each would end the daemon with a fatal
// stack overflow.
func (c *Checker) DirPath(st *kv.Store, dir uint64) (string, error) {
	if dir == kv.RootIno {
		return "/", nil
	}
	if c == nil {
		return DirPath(st, dir)
	}
	pc := &c.paths
	g := st.DirMoves()
	cached := func(d uint64) (string, bool) {
		if g&1 != 0 {
			return "", false
		}
		pc.mu.Lock()
		defer pc.mu.Unlock()
		if pc.st != st || pc.gen != g {
			pc.st, pc.gen, pc.m, pc.bytes = st, g, make(map[uint64]string), 0
		}
		p, ok := pc.m[d]
		return p, ok
	}
	if p, ok := cached(dir); ok {
		return p, nil
	}
	// Up to the root or a cached directory: the directories on the way
	// and their names, innermost first.
	type step struct {
		dir  uint64
		name string
	}
	var up []step
	base, cur := "/", dir
	for {
		if len(up) >= maxDepth {
			return "", syscall.ENAMETOOLONG
		}
		parent, name, err := firstName(st, cur)
		if err != nil {
			return "", err
		}
		if parent == cur {
			return "", syscall.ELOOP
		}
		up = append(up, step{cur, name})
		if parent == kv.RootIno {
			break
		}
		if p, ok := cached(parent); ok {
			base = p
			break
		}
		cur = parent
	}
	if base != "/" && strings.Count(base, "/")+len(up) > maxDepth {
		return "", syscall.ENAMETOOLONG
	}
	// The path, made once (the directories on the way are not cached:
	// a walk down the tree asks for each directory before its children).
	n := len(base)
	for _, u := range up {
		n += 1 + len(u.name)
	}
	b := make([]byte, 0, n)
	if base != "/" {
		b = append(b, base...)
	}
	for i := len(up) - 1; i >= 0; i-- {
		b = append(append(b, '/'), up[i].name...)
	}
	p := string(b)
	if g&1 == 0 && st.DirMoves() == g {
		pc.mu.Lock()
		if pc.st == st && pc.gen == g {
			if len(pc.m) >= maxCachedDirs || pc.bytes+len(p) > maxCachedBytes {
				clear(pc.m)
				pc.bytes = 0
			}
			pc.m[dir] = p
			pc.bytes += len(p)
		}
		pc.mu.Unlock()
	}
	return p, nil
}

// firstName returns the directory that holds dir and dir's name in it
// (a directory has one name), or ENOENT if dir was removed meanwhile.
func firstName(st *kv.Store, dir uint64) (parent uint64, name string, err error) {
	found := false
	if err := st.Names(dir, func(d uint64, n string) bool {
		parent, name, found = d, n, true
		return false
	}); err != nil {
		return 0, "", err
	}
	if !found {
		return 0, "", syscall.ENOENT
	}
	return parent, name, nil
}
