package kv

import (
	"path"
	"strings"
	"sync/atomic"
	"testing"
)

// fakeClock makes now() return 1000, 2000, 3000... for the rest of the test,
// so that every timestamp the store sets is distinct and predictable.
func fakeClock(t testing.TB) *atomic.Int64 {
	var c atomic.Int64
	old := now
	now = func() int64 { return c.Add(1000) }
	t.Cleanup(func() { now = old })
	return &c
}

// buildTree creates the tree that spec describes in s. Each line is one of
//
//	dir/           a directory
//	file:content   a regular file holding content
//	name=other     a hard link to the existing path other
//	name->target   a symbolic link
//
// Parents must come before their children.
func buildTree(t testing.TB, s *Store, spec string) {
	t.Helper()
	for _, line := range strings.Fields(spec) {
		switch {
		case strings.HasSuffix(line, "/"):
			p := strings.TrimSuffix(line, "/")
			mkdir(t, s, resolve(t, s, path.Dir(p)), path.Base(p))
		case strings.Contains(line, "->"):
			p, target, _ := strings.Cut(line, "->")
			if _, err := s.Create(resolve(t, s, path.Dir(p)), path.Base(p), NewInode{Mode: S_IFLNK | 0o777, Target: target}); err != nil {
				t.Fatalf("symlink %s: %v", p, err)
			}
		case strings.Contains(line, "="):
			p, other, _ := strings.Cut(line, "=")
			if _, err := s.Link(resolve(t, s, other), resolve(t, s, path.Dir(p)), path.Base(p)); err != nil {
				t.Fatalf("link %s: %v", p, err)
			}
		default:
			p, content, _ := strings.Cut(line, ":")
			a := mkfile(t, s, resolve(t, s, path.Dir(p)), path.Base(p))
			if content != "" {
				write(t, s, a.Ino, 0, []byte(content))
			}
		}
	}
}

// resolve returns the inode of a slash-separated path ("." is the root).
func resolve(t testing.TB, s *Store, p string) uint64 {
	t.Helper()
	ino, err := lookupPath(s, p)
	if err != nil {
		t.Fatalf("resolve %q: %v", p, err)
	}
	return ino
}

func lookupPath(s *Store, p string) (uint64, error) { return lookupFrom(s, RootIno, p) }

// lookupFrom resolves a relative path from the directory base.
func lookupFrom(s *Store, base uint64, p string) (uint64, error) {
	ino := base
	if p == "." || p == "" || p == "/" {
		return ino, nil
	}
	for _, name := range strings.Split(strings.Trim(p, "/"), "/") {
		next, _, err := s.LookupIno(ino, name)
		if err != nil {
			return 0, err
		}
		ino = next
	}
	return ino, nil
}

// treeView builds spec in a fresh store and returns its view.
func treeView(t testing.TB, spec string) view {
	t.Helper()
	s := newStore(t)
	buildTree(t, s, spec)
	return storeView(t, s, RootIno, true)
}

// rootNlink returns the root's link count.
func rootNlink(t testing.TB, s *Store) uint32 { return getattr(t, s, RootIno).Nlink }

// removeAll removes everything below dir.
func removeAll(t testing.TB, s *Store, dir uint64) {
	t.Helper()
	var ents []Dirent
	must0(t, s.ReadDir(dir, "", func(d Dirent) bool { ents = append(ents, d); return true }))
	for _, e := range ents {
		if e.Type == S_IFDIR {
			removeAll(t, s, e.Ino)
			must0(t, s.Rmdir(dir, e.Name))
		} else {
			must0(t, s.Unlink(dir, e.Name))
		}
	}
}
