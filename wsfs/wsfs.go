// Package wsfs works on a workspace store by path, the way a program works
// on a directory: open, read, write, mkdir, rename, readdir. It is how code
// inside the daemon (source import, the shell fast path, the agent tools)
// reaches the workspace without going through the FUSE mount, which the
// daemon must never use itself.
//
// Paths are slash-separated and taken relative to the workspace root
// whether or not they start with "/". Symbolic links are followed inside
// the workspace only: an absolute target starts again at the workspace
// root, and ".." never climbs above it, so no path, however spelled,
// reaches anything outside the store.
//
// Errors are *fs.PathError values wrapping a syscall.Errno, so errors.Is
// with fs.ErrNotExist, fs.ErrExist and the errno values works.
package wsfs

import (
	"errors"
	"io/fs"
	"strings"
	"sync"
	"syscall"

	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/policy"
)

// maxSymlinks is how many symbolic links one lookup may follow (Linux's
// limit), after which it fails with ELOOP.
const maxSymlinks = 40

// FS is a workspace store seen by path. It is safe for concurrent use; it
// adds no locking of its own beyond what the store does, so concurrent
// changes to one path behave as they would on a local file system.
type FS struct {
	s      *kv.Store
	owner  Owner
	umask  uint32
	locks  *inodeLocks // of billy files
	prefix string      // see SetRootPrefix
	notify Notifier
	actor  *kv.Actor       // journaled as the author of changes
	agent  bool            // see ForAgent
	guard  *policy.Checker // see WithPolicy

	// With exclusive use (SetExclusive), directories resolved without
	// following links are remembered by path.
	exclusive bool
	dirMu     sync.Mutex
	dirs      map[string]cachedDir
}

type cachedDir struct {
	ino   uint64
	above []uint64
}

// SetExclusive declares that nothing but this FS changes the store (an
// import into a new store): it may then remember where directories are
// instead of looking each path up again. Changes through the FS keep the
// memory right; changes by anything else would make it wrong.
func (f *FS) SetExclusive() {
	f.dirMu.Lock()
	f.exclusive = true
	f.dirs = make(map[string]cachedDir)
	f.dirMu.Unlock()
}

// SetRootPrefix says where the workspace appears to the programs that
// make its symbolic links: with "/workspace", a link to "/workspace/src/x"
// leads to src/x, as it does in the sandbox, and a link to any other
// absolute path (outside the workspace) leads nowhere (ENOENT). Without a
// prefix, an absolute target starts at the workspace root, as under
// chroot.
func (f *FS) SetRootPrefix(prefix string) { f.prefix = strings.TrimSuffix(prefix, "/") }

// linkTarget maps an absolute symbolic link target by the root prefix.
func (f *FS) linkTarget(t string) (string, error) {
	if f.prefix == "" || !strings.HasPrefix(t, "/") {
		return t, nil
	}
	if rest, ok := strings.CutPrefix(t, f.prefix); ok && (rest == "" || rest[0] == '/') {
		return "/" + rest, nil
	}
	return "", syscall.ENOENT // outside the workspace
}

// forgetDirs drops remembered directories after a change that may have
// removed or moved one.
func (f *FS) forgetDirs() {
	if !f.exclusive {
		return
	}
	f.dirMu.Lock()
	clear(f.dirs)
	f.dirMu.Unlock()
}

// Owner is the user and group that new files get.
type Owner struct{ UID, GID uint32 }

// New returns the workspace in s; new files belong to owner.
// Changes are journaled as made by the entry point "daemon" until As
// names another actor.
func New(s *kv.Store, owner Owner) *FS {
	return &FS{s: s, owner: owner, umask: 0o022, locks: new(inodeLocks), actor: &kv.Actor{Entry: "daemon"}}
}

// Store returns the store.
func (f *FS) Store() *kv.Store { return f.s }

func pathErr(op, path string, err error) error {
	if err == nil {
		return nil
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return err
	}
	var rf *policy.Refusal
	if errors.As(err, &rf) {
		return &fs.PathError{Op: op, Path: path, Err: rf}
	}
	errno := kv.Errno(err)
	var plain syscall.Errno
	if errno == syscall.EIO && !errors.As(err, &plain) {
		return &fs.PathError{Op: op, Path: path, Err: err} // keep the cause of an I/O error
	}
	return &fs.PathError{Op: op, Path: path, Err: errno}
}

// split returns the names in p, dropping empty and "." parts.
func split(p string) []string {
	parts := strings.Split(p, "/")
	out := parts[:0]
	for _, s := range parts {
		if s != "" && s != "." {
			out = append(out, s)
		}
	}
	return out
}

// resolved is where a lookup ended: the inode and the directory that
// holds it under name (for the root, dir is the root and name "").
type resolved struct {
	ino   uint64
	attr  kv.Attr
	dir   uint64
	name  string
	above []uint64 // the directories walked through to dir, for ".."
	gpath string   // with a policy: the store path resolved (see WithPolicy)
}

// lookup resolves p from the workspace root. With follow, a symbolic link
// as the last component is followed too. With parentOnly, it resolves
// everything but the last component and returns the directory and the
// last name even if that name does not exist (ino is then 0). A trailing
// slash requires a directory, as it does for the kernel.
func (f *FS) lookup(p string, follow, parentOnly bool) (resolved, error) {
	if f.exclusive && f.guard == nil && !strings.Contains(p, "..") {
		// Start at the deepest remembered directory on the way.
		names := split(p)
		for i := len(names) - 1; i > 0; i-- {
			key := strings.Join(names[:i], "/")
			f.dirMu.Lock()
			d, ok := f.dirs[key]
			f.dirMu.Unlock()
			if ok {
				rest := strings.Join(names[i:], "/")
				if strings.HasSuffix(p, "/") || strings.HasSuffix(p, "/.") {
					rest += "/"
				}
				return f.lookupFrom(d.ino, d.above, rest, follow, parentOnly, key)
			}
		}
		return f.lookupFrom(kv.RootIno, nil, p, follow, parentOnly, "")
	}
	return f.lookupFrom(kv.RootIno, nil, p, follow, parentOnly, "")
}

// lookupFrom resolves p from the directory cur, reached through the
// directories above (innermost last). With an exclusive FS, base is cur's
// path, or "-" when cur's path is unknown: directories found on the way
// are remembered until a link is followed.
func (f *FS) lookupFrom(cur uint64, above []uint64, p string, follow, parentOnly bool, base string) (resolved, error) {
	remember := f.exclusive && base != "-" && !strings.Contains(p, "..")
	mustDir := strings.HasSuffix(p, "/") || strings.HasSuffix(p, "/.") || p == "."
	if mustDir {
		follow = true
	}
	if strings.HasPrefix(p, "/") {
		cur, above = kv.RootIno, nil
	}
	stack := append([]uint64(nil), above...)
	// With a policy, gp are the names of cur's path, and each path is
	// checked before it is looked up.
	var gp []string
	// checked: every prefix of gp+name has been found not denied, so
	// only a rule that matches gp+name itself can refuse the next name.
	checked := false
	if f.guard != nil && cur != kv.RootIno {
		var err error
		if gp, err = f.guardStart(cur); err != nil {
			return resolved{}, err
		}
	}
	names := split(p)
	links := 0
	for i := 0; i < len(names); i++ {
		name := names[i]
		last := i == len(names)-1
		if name == ".." {
			if n := len(stack); n > 0 {
				cur, stack = stack[n-1], stack[:n-1]
			}
			if n := len(gp); n > 0 {
				gp = gp[:n-1]
			}
			if last && parentOnly {
				return resolved{}, syscall.EINVAL // "dir/.." names no entry to create
			}
			continue
		}
		if err := f.maySearch(cur); err != nil {
			return resolved{}, err
		}
		if last && parentOnly {
			if len(name) > kv.MaxNameLen {
				return resolved{}, syscall.ENAMETOOLONG
			}
			r := resolved{dir: cur, name: name, above: stack}
			if f.guard != nil {
				r.gpath = guardPath(gp, name) // changes are checked where they are made
			}
			a, err := f.s.Lookup(cur, name)
			if err == kv.ErrNotFound {
				return r, nil
			}
			if err != nil {
				return resolved{}, err
			}
			if mustDir && !a.IsDir() && a.Mode&kv.S_IFMT != kv.S_IFLNK {
				return resolved{}, syscall.ENOTDIR
			}
			r.ino, r.attr = a.Ino, a
			return r, nil
		}
		var gpath string
		if f.guard != nil {
			if checked {
				if r := f.guard.DeniedLeaf(append(gp, name)); r != nil {
					return resolved{}, r
				}
			} else if err := f.guard.Read(guardPath(gp, name)); err != nil {
				return resolved{}, err
			}
			checked = true
			if last {
				gpath = guardPath(gp, name)
			}
		}
		a, err := f.s.Lookup(cur, name)
		if err != nil {
			return resolved{}, err
		}
		if a.Mode&kv.S_IFMT == kv.S_IFLNK && (!last || follow) {
			links++
			if links > maxSymlinks {
				return resolved{}, syscall.ELOOP
			}
			target, err := f.s.Readlink(a.Ino)
			if err != nil {
				return resolved{}, err
			}
			if target, err = f.linkTarget(target); err != nil {
				return resolved{}, err
			}
			rest := append(split(target), names[i+1:]...)
			if strings.HasPrefix(target, "/") {
				cur, stack, gp = kv.RootIno, stack[:0], gp[:0]
			}
			names, i = rest, -1 // a link to "/" or "." leaves nothing to walk
			remember = false
			continue
		}
		if last && !(mustDir && a.IsDir()) {
			if mustDir {
				return resolved{}, syscall.ENOTDIR
			}
			return resolved{ino: a.Ino, attr: a, dir: cur, name: name, above: stack, gpath: gpath}, nil
		}
		if !a.IsDir() {
			return resolved{}, syscall.ENOTDIR
		}
		stack = append(stack, cur)
		cur = a.Ino
		if f.guard != nil {
			gp = append(gp, name)
		}
		if remember {
			if base != "" {
				base += "/"
			}
			base += name
			f.dirMu.Lock()
			f.dirs[base] = cachedDir{ino: cur, above: append([]uint64(nil), stack...)}
			f.dirMu.Unlock()
		}
	}
	// The path named a directory reached by "", ".", "..", a link or a
	// trailing slash.
	if parentOnly {
		return resolved{}, syscall.EINVAL
	}
	a, err := f.s.GetAttr(cur)
	if err != nil {
		return resolved{}, err
	}
	r := resolved{ino: cur, attr: a, dir: cur}
	if f.guard != nil {
		r.gpath = guardPath(gp, "")
		if err := f.guard.Read(r.gpath); err != nil {
			return resolved{}, err
		}
	}
	if n := len(stack); n > 0 {
		r.dir, r.above = stack[n-1], stack[:n-1]
	}
	return r, nil
}

// Stat returns the attributes of the file p names, following symbolic links.
func (f *FS) Stat(p string) (kv.Attr, error) {
	r, err := f.lookup(p, true, false)
	return r.attr, pathErr("stat", p, err)
}

// Lstat is Stat without following a symbolic link at the end of p.
func (f *FS) Lstat(p string) (kv.Attr, error) {
	r, err := f.lookup(p, false, false)
	return r.attr, pathErr("lstat", p, err)
}

// Resolve returns the inode that p names (following symbolic links) and its
// attributes.
func (f *FS) Resolve(p string) (uint64, kv.Attr, error) {
	r, err := f.lookup(p, true, false)
	return r.ino, r.attr, pathErr("resolve", p, err)
}
