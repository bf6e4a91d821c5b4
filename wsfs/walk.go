package wsfs

import (
	"syscall"

	"github.com/computerfs/computerfs/kv"
)

// Dir is a directory resolved for a walk of the tree below it by inode
// (git's status reads each directory once): what the path lookup of
// every directory of the walk would check, carried down from its parent
// instead. Reaching it by name needed the search bit of every directory
// above it, and looking names up in it needs its own too.
type Dir struct {
	Ino   uint64
	Attr  kv.Attr
	gpath string // with a policy: its store path, resolved
	reach error  // the agent may not reach it by name (EACCES), or nil
	look  error  // the agent may not look names up in it, or nil
}

// OpenDir resolves the directory p (following links) as ReadDir does.
func (f *FS) OpenDir(p string) (Dir, error) {
	r, err := f.lookup(p, true, false)
	if err == nil && !r.attr.IsDir() {
		err = syscall.ENOTDIR
	}
	if err != nil {
		return Dir{}, pathErr("opendir", p, err)
	}
	return Dir{Ino: r.ino, Attr: r.attr, gpath: r.gpath, look: f.mayAccess(&r.attr, 0o1)}, nil
}

// Child returns the directory e of d's listing (List).
func (f *FS) Child(d Dir, e kv.Dirent) (Dir, error) {
	a, err := f.s.GetAttr(e.Ino)
	if err == nil && !a.IsDir() {
		err = syscall.ENOTDIR
	}
	if err != nil {
		return Dir{}, err
	}
	c := Dir{Ino: e.Ino, Attr: a, reach: d.reach}
	if c.reach == nil {
		c.reach = d.look
	}
	if c.look = c.reach; c.look == nil {
		c.look = f.mayAccess(&a, 0o1)
	}
	if f.guard != nil {
		c.gpath = guardPath(split(d.gpath), e.Name)
	}
	return c, nil
}

// List calls fn for each entry of d as ReadDir of its path would: EACCES
// if the agent may not reach it or read it, the names the path rules
// deny left out.
func (f *FS) List(d Dir, fn func(kv.Dirent) bool) error {
	if d.reach != nil {
		return d.reach
	}
	if err := f.mayReadAttr(&d.Attr); err != nil {
		return err
	}
	return f.s.ReadDir(d.Ino, "", f.guardList(d.gpath, fn))
}

// Search says whether the agent may look names up in d (stat an entry
// of its listing): EACCES if not.
func (d Dir) Search() error { return d.look }
