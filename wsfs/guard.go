package wsfs

import (
	"strings"

	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/policy"
)

// WithPolicy returns the workspace seen through c's path rules (see
// package policy): every path is checked where it is resolved, on the
// names it really has (after links and ".."), and every change on the
// inode or directory it makes. Reads of a denied path, and changes of a
// denied or read-only one, fail with a *policy.Refusal (EACCES or EROFS);
// listings leave denied names out. Everything made from the result (As,
// Billy, open files) keeps the rules. A nil c gives f itself.
func (f *FS) WithPolicy(c *policy.Checker) *FS {
	if c == nil {
		return f
	}
	g := f.As(*f.actor)
	g.guard = c
	return g
}

// Policy returns the rules WithPolicy set, or nil.
func (f *FS) Policy() *policy.Checker { return f.guard }

// guardStart returns the names of the directory dir, where a guarded
// lookup starts.
func (f *FS) guardStart(dir uint64) ([]string, error) {
	if dir == kv.RootIno {
		return nil, nil
	}
	p, err := f.guard.DirPath(f.s, dir)
	if err != nil {
		return nil, err
	}
	return split(p), nil
}

// guardPath is the store path of the names, and of name in them.
func guardPath(names []string, name string) string {
	n := 1 + len(name)
	for _, s := range names {
		n += 1 + len(s)
	}
	var b strings.Builder
	b.Grow(n)
	for _, s := range names {
		b.WriteByte('/')
		b.WriteString(s)
	}
	if name != "" || len(names) == 0 {
		b.WriteByte('/')
		b.WriteString(name)
	}
	return b.String()
}

// guardEntry refuses a change of name in the directory dir.
func (f *FS) guardEntry(dir uint64, name string) error {
	if f.guard == nil {
		return nil
	}
	if f.guard.ReadOnly() {
		return f.guard.Write("/")
	}
	dp, err := f.guard.DirPath(f.s, dir)
	if err != nil {
		return err
	}
	return f.guard.Write(policy.Join(dp, name))
}

// guardUnlink refuses removing name from dir: a change of that path, and
// of the file's other names if it has some.
func (f *FS) guardUnlink(dir uint64, name string) error {
	if err := f.guardEntry(dir, name); err != nil || f.guard == nil {
		return err
	}
	if a, err := f.s.Lookup(dir, name); err == nil && a.Nlink > 1 && !a.IsDir() {
		return f.guardIno(a.Ino, true)
	}
	return nil
}

// guardIno refuses reading (or changing, with write) the inode ino when a
// rule covers one of its names.
func (f *FS) guardIno(ino uint64, write bool) error {
	if f.guard == nil {
		return nil
	}
	return f.guard.Ino(f.s, ino, write)
}

// guardOpen checks opening the file r with flag: changes for a write
// open, and the other names of a file with several.
func (f *FS) guardOpen(r *resolved, flag int) error {
	if f.guard == nil {
		return nil
	}
	write := flag&(O_WRONLY|O_RDWR) != 0
	if write || r.attr.Nlink > 1 && !r.attr.IsDir() {
		return f.guard.InoAttr(f.s, &r.attr, write)
	}
	return nil
}

// guardRename refuses renaming oldName in oldDir to newName in newDir.
func (f *FS) guardRename(oldDir uint64, oldName string, newDir uint64, newName string) error {
	if f.guard == nil {
		return nil
	}
	src, err := f.s.Lookup(oldDir, oldName)
	if err != nil {
		return err
	}
	op, err := f.guard.DirPath(f.s, oldDir)
	if err != nil {
		return err
	}
	np, err := f.guard.DirPath(f.s, newDir)
	if err != nil {
		return err
	}
	return f.guard.Rename(f.s, policy.Join(op, oldName), src.Ino, src.IsDir(), policy.Join(np, newName), false, 0, false)
}

// guardList filters a listing of the directory at the store path dir:
// denied names are left out.
func (f *FS) guardList(dir string, fn func(kv.Dirent) bool) func(kv.Dirent) bool {
	if f.guard == nil {
		return fn
	}
	// A rule covers dir/name if it covers dir or one of its ancestors, or
	// matches dir/name itself: the first is asked once, the second of
	// each name (Denied of each would match every rule against every
	// ancestor again).
	if f.guard.Denied(dir) != nil {
		return func(kv.Dirent) bool { return true }
	}
	ns := policy.Names(dir)
	n := len(ns)
	return func(d kv.Dirent) bool {
		ns = append(ns[:n], d.Name)
		if f.guard.DeniedLeaf(ns) != nil {
			return true
		}
		return fn(d)
	}
}
