package kv

import (
	"fmt"
	"path"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

func TestCreateTypes(t *testing.T) {
	tests := []struct {
		name      string
		in        NewInode
		wantMode  uint32
		wantNlink uint32
		wantSize  uint64
		wantRdev  uint32
		dirLinks  uint32 // how much the parent's nlink grows
	}{
		{"file", NewInode{Mode: S_IFREG | 0o640, Uid: 7, Gid: 8}, S_IFREG | 0o640, 1, 0, 0, 0},
		{"file without type bits", NewInode{Mode: 0o600}, S_IFREG | 0o600, 1, 0, 0, 0},
		{"file ignores rdev", NewInode{Mode: S_IFREG | 0o600, Rdev: 99}, S_IFREG | 0o600, 1, 0, 0, 0},
		{"file with setuid", NewInode{Mode: S_IFREG | S_ISUID | 0o755}, S_IFREG | S_ISUID | 0o755, 1, 0, 0, 0},
		{"directory", NewInode{Mode: S_IFDIR | 0o755}, S_IFDIR | 0o755, 2, 0, 0, 1},
		{"sticky directory", NewInode{Mode: S_IFDIR | S_ISVTX | 0o777}, S_IFDIR | S_ISVTX | 0o777, 2, 0, 0, 1},
		{"symlink", NewInode{Mode: S_IFLNK | 0o777, Target: "../some/where"}, S_IFLNK | 0o777, 1, 13, 0, 0},
		{"fifo", NewInode{Mode: S_IFIFO | 0o600}, S_IFIFO | 0o600, 1, 0, 0, 0},
		{"socket", NewInode{Mode: S_IFSOCK | 0o600}, S_IFSOCK | 0o600, 1, 0, 0, 0},
		{"char device", NewInode{Mode: S_IFCHR | 0o666, Rdev: 1<<8 | 5}, S_IFCHR | 0o666, 1, 0, 1<<8 | 5, 0},
		{"block device", NewInode{Mode: S_IFBLK | 0o660, Rdev: 8 << 8}, S_IFBLK | 0o660, 1, 0, 8 << 8, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := fakeClock(t)
			s := newStore(t)
			root := getattr(t, s, RootIno)
			a, err := s.Create(RootIno, "x", tc.in)
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			ts := clock.Load()
			want := Attr{Ino: a.Ino, Mode: tc.wantMode, Nlink: tc.wantNlink, Uid: tc.in.Uid, Gid: tc.in.Gid,
				Rdev: tc.wantRdev, Size: tc.wantSize, Atime: ts, Mtime: ts, Ctime: ts, Btime: ts, Flags: FlagNoXattrs}
			if a != want {
				t.Fatalf("Create returned\n%+v, want\n%+v", a, want)
			}
			if got := getattr(t, s, a.Ino); got != a {
				t.Fatalf("GetAttr = %+v, Create returned %+v", got, a)
			}
			if got := must[Attr](t, "lookup")(s.Lookup(RootIno, "x")); got != a {
				t.Fatalf("Lookup = %+v", got)
			}
			ino, typ, err := s.LookupIno(RootIno, "x")
			if err != nil || ino != a.Ino || typ != tc.wantMode&S_IFMT {
				t.Fatalf("LookupIno = %d, %o, %v", ino, typ, err)
			}
			p := getattr(t, s, RootIno)
			if p.Nlink != root.Nlink+tc.dirLinks || p.Mtime != ts || p.Ctime != ts {
				t.Fatalf("parent after create: %+v", p)
			}
			target, err := s.Readlink(a.Ino)
			if tc.in.Mode&S_IFMT == S_IFLNK {
				if err != nil || target != tc.in.Target {
					t.Fatalf("Readlink = %q, %v", target, err)
				}
			} else {
				wantErrno(t, "Readlink of a non-symlink", err, syscall.EINVAL)
			}
			if par, err := s.Parent(a.Ino); err != nil || par != RootIno {
				t.Fatalf("Parent = %d, %v", par, err)
			}
			if ents := names(t, s, RootIno); len(ents) != 1 || ents[0] != "x" {
				t.Fatalf("ReadDir = %q", ents)
			}
			checkInvariants(t, s, checkOpts{})
			s = reopen(t, s)
			if got := getattr(t, s, a.Ino); got != a {
				t.Fatalf("after reopen GetAttr = %+v, want %+v", got, a)
			}
		})
	}
}

func TestCreateErrors(t *testing.T) {
	s := newStore(t)
	f := mkfile(t, s, RootIno, "file")
	d := mkdir(t, s, RootIno, "dir")
	long := strings.Repeat("x", MaxNameLen+1)
	tests := []struct {
		name  string
		dir   uint64
		file  string
		mode  uint32
		errno syscall.Errno
	}{
		{"existing file", RootIno, "file", S_IFREG | 0o644, syscall.EEXIST},
		{"mkdir over file", RootIno, "file", S_IFDIR | 0o755, syscall.EEXIST},
		{"existing dir", RootIno, "dir", S_IFREG | 0o644, syscall.EEXIST},
		{"symlink over dir", RootIno, "dir", S_IFLNK | 0o777, syscall.EEXIST},
		{"256-byte name", RootIno, long, S_IFREG | 0o644, syscall.ENAMETOOLONG},
		{"256-byte dir name", RootIno, long, S_IFDIR | 0o755, syscall.ENAMETOOLONG},
		{"empty name", RootIno, "", S_IFREG | 0o644, syscall.EINVAL},
		{"dot", RootIno, ".", S_IFREG | 0o644, syscall.EINVAL},
		{"dotdot", RootIno, "..", S_IFDIR | 0o755, syscall.EINVAL},
		{"slash", RootIno, "a/b", S_IFREG | 0o644, syscall.EINVAL},
		{"only slash", RootIno, "/", S_IFREG | 0o644, syscall.EINVAL},
		{"NUL", RootIno, "a\x00b", S_IFREG | 0o644, syscall.EINVAL},
		{"bad type", RootIno, "t", 0o030000 | 0o644, syscall.EINVAL},
		{"S_IFMT type", RootIno, "t", S_IFMT | 0o644, syscall.EINVAL},
		{"parent is a file", f.Ino, "x", S_IFREG | 0o644, syscall.ENOTDIR},
		{"parent does not exist", 999, "x", S_IFREG | 0o644, syscall.ENOENT},
		{"255-byte name", d.Ino, long[:MaxNameLen], S_IFREG | 0o644, 0},
		{"name with spaces and UTF-8", d.Ino, " é ü\t\n", S_IFREG | 0o644, 0},
		{"name with dots", d.Ino, "...", S_IFDIR | 0o755, 0},
		{"name .a", d.Ino, ".a", S_IFREG | 0o644, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inodes := s.inodes.Load()
			_, err := s.Create(tc.dir, tc.file, NewInode{Mode: tc.mode})
			wantErrno(t, "Create", err, tc.errno)
			if tc.errno != 0 && s.inodes.Load() != inodes {
				t.Fatal("a failed Create changed the inode count")
			}
			if tc.errno == 0 {
				if _, err := s.Lookup(tc.dir, tc.file); err != nil {
					t.Fatalf("Lookup after Create: %v", err)
				}
			}
		})
	}
	if got := names(t, s, RootIno); strings.Join(got, ",") != "dir,file" {
		t.Fatalf("root after failed creates: %q", got)
	}
	wantErrno(t, "Lookup 256 bytes", must2err(s.Lookup(RootIno, long)), syscall.ENAMETOOLONG)
	wantErrno(t, "Lookup missing", must2err(s.Lookup(RootIno, "nope")), syscall.ENOENT)
	wantErrno(t, "GetAttr missing", must2err(s.GetAttr(12345)), syscall.ENOENT)
	_, err := s.Readlink(12345)
	wantErrno(t, "Readlink missing", err, syscall.ENOENT)
	checkInvariants(t, s, checkOpts{})
}

func must2err[T any](_ T, err error) error { return err }

func TestCreateSetgidDirectory(t *testing.T) {
	s := newStore(t)
	g := must[Attr](t, "mkdir")(s.Create(RootIno, "g", NewInode{Mode: S_IFDIR | S_ISGID | 0o775, Uid: 1, Gid: 50}))
	plain := must[Attr](t, "mkdir")(s.Create(RootIno, "p", NewInode{Mode: S_IFDIR | 0o775, Uid: 1, Gid: 50}))
	tests := []struct {
		name     string
		dir      uint64
		mode     uint32
		wantGid  uint32
		wantMode uint32
	}{
		{"file in setgid dir", g.Ino, S_IFREG | 0o644, 50, S_IFREG | 0o644},
		{"dir in setgid dir", g.Ino, S_IFDIR | 0o755, 50, S_IFDIR | S_ISGID | 0o755},
		{"symlink in setgid dir", g.Ino, S_IFLNK | 0o777, 50, S_IFLNK | 0o777},
		{"fifo in setgid dir", g.Ino, S_IFIFO | 0o644, 50, S_IFIFO | 0o644},
		{"file in plain dir", plain.Ino, S_IFREG | 0o644, 7, S_IFREG | 0o644},
		{"dir in plain dir", plain.Ino, S_IFDIR | 0o755, 7, S_IFDIR | 0o755},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := s.Create(tc.dir, fmt.Sprint(i), NewInode{Mode: tc.mode, Uid: 3, Gid: 7, Target: "t"})
			if err != nil {
				t.Fatal(err)
			}
			if a.Gid != tc.wantGid || a.Mode != tc.wantMode || a.Uid != 3 {
				t.Fatalf("got uid %d gid %d mode %o, want uid 3 gid %d mode %o", a.Uid, a.Gid, a.Mode, tc.wantGid, tc.wantMode)
			}
		})
	}
	// Inheritance goes on down the tree.
	sub := must[Attr](t, "lookup")(s.Lookup(g.Ino, "1"))
	deeper := must[Attr](t, "mkdir")(s.Create(sub.Ino, "d", NewInode{Mode: S_IFDIR | 0o700, Gid: 9}))
	if deeper.Gid != 50 || deeper.Mode&S_ISGID == 0 {
		t.Fatalf("grandchild: gid %d mode %o", deeper.Gid, deeper.Mode)
	}
}

func TestDirectoryNlink(t *testing.T) {
	s := newStore(t)
	if n := rootNlink(t, s); n != 2 {
		t.Fatalf("root nlink %d", n)
	}
	a := mkdir(t, s, RootIno, "a")
	mkdir(t, s, RootIno, "b")
	mkfile(t, s, RootIno, "f")
	if n := rootNlink(t, s); n != 4 {
		t.Fatalf("root nlink %d with two subdirectories, want 4", n)
	}
	for i := 0; i < 5; i++ {
		mkdir(t, s, a.Ino, fmt.Sprint(i))
		mkfile(t, s, a.Ino, fmt.Sprint("f", i))
	}
	if n := getattr(t, s, a.Ino).Nlink; n != 7 {
		t.Fatalf("a nlink %d with five subdirectories, want 7", n)
	}
	for i := 0; i < 5; i++ {
		if err := s.Rmdir(a.Ino, fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := getattr(t, s, a.Ino).Nlink; n != 2 {
		t.Fatalf("a nlink %d after removing its subdirectories, want 2", n)
	}
	checkInvariants(t, s, checkOpts{})
}

func TestLink(t *testing.T) {
	clock := fakeClock(t)
	s := newStore(t)
	d := mkdir(t, s, RootIno, "d")
	f := mkfile(t, s, RootIno, "f")
	write(t, s, f.Ino, 0, []byte("shared"))
	a, err := s.Link(f.Ino, d.Ino, "g")
	if err != nil {
		t.Fatal(err)
	}
	ts := clock.Load()
	if a.Nlink != 2 || a.Ctime != ts || a.Ino != f.Ino {
		t.Fatalf("Link returned %+v", a)
	}
	if p := getattr(t, s, d.Ino); p.Mtime != ts || p.Ctime != ts || p.Nlink != 2 {
		t.Fatalf("directory after link: %+v", p)
	}
	if g := must[Attr](t, "lookup")(s.Lookup(d.Ino, "g")); g.Ino != f.Ino || g.Nlink != 2 {
		t.Fatalf("Lookup of the new name: %+v", g)
	}
	if string(readAll(t, s, must[Attr](t, "lookup")(s.Lookup(d.Ino, "g")).Ino)) != "shared" {
		t.Fatal("contents through the link")
	}
	must[Attr](t, "link 3")(s.Link(f.Ino, RootIno, "f3"))
	if n := getattr(t, s, f.Ino).Nlink; n != 3 {
		t.Fatalf("nlink %d after two links", n)
	}
	sl := must[Attr](t, "symlink")(s.Create(RootIno, "sl", NewInode{Mode: S_IFLNK | 0o777, Target: "f"}))
	if a := must[Attr](t, "link symlink")(s.Link(sl.Ino, d.Ino, "sl2")); a.Nlink != 2 {
		t.Fatalf("symlink nlink %d", a.Nlink)
	}
	checkInvariants(t, s, checkOpts{})

	orphan := mkfile(t, s, RootIno, "orphan")
	s.SetInUse(func(ino uint64, _ bool) bool { return ino == orphan.Ino })
	if err := s.Unlink(RootIno, "orphan"); err != nil {
		t.Fatal(err)
	}
	s.SetInUse(nil)
	long := strings.Repeat("n", MaxNameLen+1)
	tests := []struct {
		name  string
		ino   uint64
		dir   uint64
		new   string
		errno syscall.Errno
	}{
		{"directory", d.Ino, RootIno, "d2", syscall.EPERM},
		{"root", RootIno, d.Ino, "r", syscall.EPERM},
		{"existing name", f.Ino, d.Ino, "g", syscall.EEXIST},
		{"existing other name", f.Ino, RootIno, "d", syscall.EEXIST},
		{"into a file", f.Ino, f.Ino, "x", syscall.ENOTDIR},
		{"missing inode", 4242, RootIno, "x", syscall.ENOENT},
		{"into a missing dir", f.Ino, 4242, "x", syscall.ENOENT},
		{"unlinked inode", orphan.Ino, RootIno, "back", syscall.ENOENT},
		{"too long", f.Ino, RootIno, long, syscall.ENAMETOOLONG},
		{"empty", f.Ino, RootIno, "", syscall.EINVAL},
		{"dot", f.Ino, RootIno, ".", syscall.EINVAL},
		{"dotdot", f.Ino, RootIno, "..", syscall.EINVAL},
		{"slash", f.Ino, RootIno, "x/y", syscall.EINVAL},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Link(tc.ino, tc.dir, tc.new)
			wantErrno(t, "Link", err, tc.errno)
		})
	}
	if n := getattr(t, s, f.Ino).Nlink; n != 3 {
		t.Fatalf("nlink %d after failed links", n)
	}
	if err := s.Forget(orphan.Ino); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, s, checkOpts{})
}

func TestUnlinkRmdir(t *testing.T) {
	const spec = `d/ d/sub/ d/sub/deep e/ f:x h=f l->f`
	long := strings.Repeat("n", MaxNameLen+1)
	tests := []struct {
		name  string
		rmdir bool
		dir   string
		file  string
		errno syscall.Errno
		after string // spec of the tree afterwards ("" if unchanged)
	}{
		{"unlink file with two names", false, ".", "f", 0, `d/ d/sub/ d/sub/deep e/ h:x l->f`},
		{"unlink symlink", false, ".", "l", 0, `d/ d/sub/ d/sub/deep e/ f:x h=f`},
		{"unlink in subdir", false, "d/sub", "deep", 0, `d/ d/sub/ e/ f:x h=f l->f`},
		{"unlink dir", false, ".", "e", syscall.EISDIR, ""},
		{"unlink missing", false, ".", "nope", syscall.ENOENT, ""},
		{"unlink in a file", false, "f", "x", syscall.ENOTDIR, ""},
		{"unlink dot", false, ".", ".", syscall.EINVAL, ""},
		{"unlink too long", false, ".", long, syscall.ENAMETOOLONG, ""},
		{"rmdir empty", true, ".", "e", 0, `d/ d/sub/ d/sub/deep f:x h=f l->f`},
		{"rmdir file", true, ".", "f", syscall.ENOTDIR, ""},
		{"rmdir symlink", true, ".", "l", syscall.ENOTDIR, ""},
		{"rmdir non-empty", true, ".", "d", syscall.ENOTEMPTY, ""},
		{"rmdir with a file only", true, "d", "sub", syscall.ENOTEMPTY, ""},
		{"rmdir missing", true, ".", "nope", syscall.ENOENT, ""},
		{"rmdir dot", true, "d", ".", syscall.EINVAL, ""},
		{"rmdir dotdot", true, "d", "..", syscall.ENOTEMPTY, ""},
		{"rmdir in a file", true, "f", "x", syscall.ENOTDIR, ""},
		{"rmdir too long", true, ".", long, syscall.ENAMETOOLONG, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := fakeClock(t)
			s := newStore(t)
			buildTree(t, s, spec)
			parent := resolve(t, s, tc.dir)
			victim, _ := lookupPath(s, path.Join(tc.dir, tc.file))
			before := getattr(t, s, parent)
			var err error
			if tc.rmdir {
				err = s.Rmdir(parent, tc.file)
			} else {
				err = s.Unlink(parent, tc.file)
			}
			ts := clock.Load()
			wantErrno(t, "remove", err, tc.errno)
			want := spec
			if tc.after != "" {
				want = tc.after
			}
			if d := treeView(t, want).diff(storeView(t, s, RootIno, true)); d != "" {
				t.Fatalf("tree afterwards differs from %s:\n%s", want, d)
			}
			checkInvariants(t, s, checkOpts{})
			if tc.errno != 0 {
				if a := getattr(t, s, parent); a != before {
					t.Fatalf("failed remove changed the parent:\n%+v\n%+v", before, a)
				}
				return
			}
			a := getattr(t, s, parent)
			if a.Mtime != ts || a.Ctime != ts {
				t.Fatalf("parent times not updated: %+v", a)
			}
			if _, err := s.GetAttr(victim); err == nil && tc.file != "f" {
				t.Fatalf("inode %d survives the removal of its only name", victim)
			}
		})
	}
}

func TestRename(t *testing.T) {
	long := strings.Repeat("n", MaxNameLen+1)
	tests := []struct {
		name     string
		spec     string
		from, to string
		flags    uint32
		errno    syscall.Errno
		after    string // "" if unchanged
	}{
		{"file new name", `f:x`, "f", "g", 0, 0, `g:x`},
		{"file over file", `f:x g:y`, "f", "g", 0, 0, `g:x`},
		{"file over file with two names", `f:x g:y h=g`, "f", "g", 0, 0, `g:x h:y`},
		{"file over its own other name", `f:x g=f`, "f", "g", 0, 0, ""},
		{"file over its own other name, noreplace", `f:x g=f`, "f", "g", RenameNoReplace, syscall.EEXIST, ""},
		{"file over symlink", `f:x l->f`, "f", "l", 0, 0, `l:x`},
		{"file across dirs", `a/ b/ a/f:x`, "a/f", "b/g", 0, 0, `a/ b/ b/g:x`},
		{"file to itself", `f:x`, "f", "f", 0, 0, ""},
		{"dir new name", `a/ a/f:x`, "a", "b", 0, 0, `b/ b/f:x`},
		{"dir over empty dir", `a/ a/f:x b/`, "a", "b", 0, 0, `b/ b/f:x`},
		{"dir over empty dir across", `p/ q/ p/a/ p/a/f:x q/b/ q/c/`, "p/a", "q/b", 0, 0, `p/ q/ q/b/ q/b/f:x q/c/`},
		{"dir over non-empty dir", `a/ b/ b/f:x`, "a", "b", 0, syscall.ENOTEMPTY, ""},
		{"dir over dir with subdir", `a/ b/ b/c/`, "a", "b", 0, syscall.ENOTEMPTY, ""},
		{"dir over file", `a/ f:x`, "a", "f", 0, syscall.ENOTDIR, ""},
		{"dir over symlink", `a/ l->a`, "a", "l", 0, syscall.ENOTDIR, ""},
		{"file over dir", `a/ f:x`, "f", "a", 0, syscall.EISDIR, ""},
		{"file over empty dir", `a/ f:x`, "f", "a", 0, syscall.EISDIR, ""},
		{"dir across dirs", `a/ b/ a/c/ a/c/f:x`, "a/c", "b/c", 0, 0, `a/ b/ b/c/ b/c/f:x`},
		{"dir up", `a/ a/b/ a/b/c/`, "a/b/c", "c", 0, 0, `a/ a/b/ c/`},
		{"dir down", `a/ b/ b/x/`, "a", "b/x/a", 0, 0, `b/ b/x/ b/x/a/`},
		{"dir into itself", `a/`, "a", "a/a", 0, syscall.EINVAL, ""},
		{"dir into own child", `a/ a/b/`, "a", "a/b/a", 0, syscall.EINVAL, ""},
		{"dir into own grandchild", `a/ a/b/ a/b/c/`, "a", "a/b/c/a", 0, syscall.EINVAL, ""},
		{"dir into own subtree over a file", `a/ a/b/ a/b/f:x`, "a", "a/b/f", 0, syscall.EINVAL, ""},
		{"dir to itself", `a/ a/f:x`, "a", "a", 0, 0, ""},
		{"missing source", `a/`, "x", "y", 0, syscall.ENOENT, ""},
		{"missing source, target exists", `a/`, "x", "a", 0, syscall.ENOENT, ""},
		{"source in a file", `f:x`, "f/x", "y", 0, syscall.ENOTDIR, ""},
		{"target in a file", `f:x g:y`, "g", "f/y", 0, syscall.ENOTDIR, ""},
		{"noreplace over file", `f:x g:y`, "f", "g", RenameNoReplace, syscall.EEXIST, ""},
		{"noreplace over dir", `a/ b/`, "a", "b", RenameNoReplace, syscall.EEXIST, ""},
		{"noreplace new name", `f:x`, "f", "g", RenameNoReplace, 0, `g:x`},
		{"exchange files", `f:x g:y`, "f", "g", RenameExchange, 0, `f:y g:x`},
		{"exchange dirs", `a/ a/f:x b/ b/g:y`, "a", "b", RenameExchange, 0, `a/ a/g:y b/ b/f:x`},
		{"exchange file and dir same parent", `f:x a/ a/g:y`, "f", "a", RenameExchange, 0, `f/ f/g:y a:x`},
		{"exchange file and dir across", `p/ q/ p/f:x q/a/ q/a/g:y`, "p/f", "q/a", RenameExchange, 0, `p/ q/ p/f/ p/f/g:y q/a:x`},
		{"exchange dir and file across", `p/ q/ p/a/ q/f:x`, "p/a", "q/f", RenameExchange, 0, `p/ q/ p/a:x q/f/`},
		{"exchange dirs across", `p/ q/ p/a/ p/a/f:x q/b/ q/b/c/`, "p/a", "q/b", RenameExchange, 0, `p/ q/ p/a/ p/a/c/ q/b/ q/b/f:x`},
		{"exchange with hard link", `f:x g=f h:y`, "g", "h", RenameExchange, 0, `f:x g:y h=f`},
		{"exchange missing target", `f:x`, "f", "g", RenameExchange, syscall.ENOENT, ""},
		{"exchange missing source", `f:x`, "g", "f", RenameExchange, syscall.ENOENT, ""},
		{"exchange dir with its parent", `a/ a/b/`, "a/b", "a", RenameExchange, syscall.EINVAL, ""},
		{"exchange dir with its child", `a/ a/b/`, "a", "a/b", RenameExchange, syscall.EINVAL, ""},
		{"exchange dir with a file inside it", `a/ a/f:x`, "a", "a/f", RenameExchange, syscall.EINVAL, ""},
		{"whiteout", `f:x`, "f", "g", RenameWhiteout, syscall.EINVAL, ""},
		{"noreplace and exchange", `f:x g:y`, "f", "g", RenameNoReplace | RenameExchange, syscall.EINVAL, ""},
		{"unknown flag", `f:x`, "f", "g", 1 << 7, syscall.EINVAL, ""},
		{"target name too long", `f:x`, "f", long, 0, syscall.ENAMETOOLONG, ""},
		{"source name too long", `f:x`, long, "g", 0, syscall.ENAMETOOLONG, ""},
		{"target dot", `a/ f:x`, "f", "a/.", 0, syscall.EINVAL, ""},
		{"source dotdot", `a/ a/b/`, "a/b/..", "c", 0, syscall.EINVAL, ""},
		{"target empty", `f:x`, "f", "", 0, syscall.EINVAL, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := fakeClock(t)
			s := newStore(t)
			buildTree(t, s, tc.spec)
			oldDir, oldName := splitPath(tc.from)
			newDir, newName := splitPath(tc.to)
			od, nd := resolve(t, s, oldDir), resolve(t, s, newDir)
			src, _ := lookupPath(s, tc.from)
			stamp := clock.Load()
			err := s.Rename(od, oldName, nd, newName, tc.flags)
			ts := clock.Load()
			wantErrno(t, "Rename", err, tc.errno)
			want := tc.spec
			if tc.after != "" {
				want = tc.after
			}
			if d := treeView(t, want).diff(storeView(t, s, RootIno, true)); d != "" {
				t.Fatalf("tree after rename differs from %q:\n%s", want, d)
			}
			checkInvariants(t, s, checkOpts{})
			if tc.errno != 0 || tc.after == "" {
				if ts != stamp {
					t.Fatalf("a failed or empty rename set timestamps")
				}
				return
			}
			for _, dir := range []uint64{od, nd} {
				if a := getattr(t, s, dir); a.Mtime != ts || a.Ctime != ts {
					t.Errorf("directory %d times not updated: %+v", dir, a)
				}
			}
			if a := getattr(t, s, src); a.Ctime != ts {
				t.Errorf("renamed inode's ctime not updated: %+v", a)
			}
			// A moved directory's parent is its new directory.
			if a := getattr(t, s, src); a.IsDir() {
				if p, err := s.Parent(src); err != nil || p != nd {
					t.Errorf("Parent of the moved directory = %d, %v; want %d", p, err, nd)
				}
			}
			if tc.flags&RenameExchange != 0 {
				dst := resolve(t, s, tc.from)
				if a := getattr(t, s, dst); a.Ctime != ts {
					t.Errorf("exchanged inode's ctime not updated: %+v", a)
				}
				if a := getattr(t, s, dst); a.IsDir() {
					if p, err := s.Parent(dst); err != nil || p != od {
						t.Errorf("Parent of the exchanged directory = %d, %v; want %d", p, err, od)
					}
				}
			}
		})
	}
}

// splitPath splits "a/b/c" into "a/b" and "c" without cleaning, so that
// "a/." keeps its ".".
func splitPath(p string) (dir, name string) {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return ".", p
	}
	return p[:i], p[i+1:]
}

func TestRenameReplacedInodeIsDeleted(t *testing.T) {
	s := newStore(t)
	buildTree(t, s, `f:new g:old a/ b/ b/x:1`)
	g := resolve(t, s, "g")
	a := resolve(t, s, "a")
	if err := s.Rename(RootIno, "f", RootIno, "g", 0); err != nil {
		t.Fatal(err)
	}
	wantErrno(t, "GetAttr of the replaced file", must2err(s.GetAttr(g)), syscall.ENOENT)
	if err := s.Rename(RootIno, "b", RootIno, "a", 0); err != nil {
		t.Fatal(err)
	}
	wantErrno(t, "GetAttr of the replaced dir", must2err(s.GetAttr(a)), syscall.ENOENT)
	if n := rootNlink(t, s); n != 3 {
		t.Fatalf("root nlink %d, want 3", n)
	}
	st := checkInvariants(t, s, checkOpts{})
	if len(st.inodes) != 4 {
		t.Fatalf("%d inodes left, want 4", len(st.inodes))
	}
}

// Directory nlinks through a series of renames across directories.
func TestRenameNlink(t *testing.T) {
	s := newStore(t)
	buildTree(t, s, `p/ q/ p/a/ p/b/ q/c/ p/f:x`)
	p, q := resolve(t, s, "p"), resolve(t, s, "q")
	nl := func() (uint32, uint32) { return getattr(t, s, p).Nlink, getattr(t, s, q).Nlink }
	check := func(what string, wp, wq uint32) {
		t.Helper()
		if gp, gq := nl(); gp != wp || gq != wq {
			t.Fatalf("%s: nlink p=%d q=%d, want %d %d", what, gp, gq, wp, wq)
		}
		checkInvariants(t, s, checkOpts{})
	}
	check("start", 4, 3) // p: a/ b/ f   q: c/
	must0(t, s.Rename(p, "a", q, "a", 0))
	check("move a", 3, 4) // p: b/ f   q: a/ c/
	must0(t, s.Rename(p, "f", q, "c", RenameExchange))
	check("exchange file f with dir c", 4, 3) // p: b/ f/   q: a/ c
	must0(t, s.Rename(q, "a", p, "b", RenameExchange))
	check("exchange dirs", 4, 3) // p: b/ f/   q: a/ c
	must0(t, s.Rename(q, "a", p, "f", 0))
	check("dir over empty dir across", 4, 2) // p: b/ f/   q: c
	must0(t, s.Rename(p, "b", p, "b2", 0))
	check("dir renamed in place", 4, 2) // p: b2/ f/   q: c
	must0(t, s.Rename(q, "c", p, "b2", RenameExchange))
	check("exchange file with dir across", 3, 3) // p: b2 f/   q: c/
	must0(t, s.Rename(p, "f", q, "c", 0))
	check("dir over empty dir across", 2, 3) // p: b2   q: c/
	if n := rootNlink(t, s); n != 4 {
		t.Fatalf("root nlink %d", n)
	}
}

func must0(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestParent(t *testing.T) {
	s := newStore(t)
	buildTree(t, s, `a/ a/b/ a/b/c/ x/`)
	a, b, c, x := resolve(t, s, "a"), resolve(t, s, "a/b"), resolve(t, s, "a/b/c"), resolve(t, s, "x")
	for _, tc := range []struct{ dir, want uint64 }{{a, RootIno}, {b, a}, {c, b}, {x, RootIno}, {RootIno, RootIno}} {
		if p, err := s.Parent(tc.dir); err != nil || p != tc.want {
			t.Fatalf("Parent(%d) = %d, %v; want %d", tc.dir, p, err, tc.want)
		}
	}
	must0(t, s.Rename(b, "c", x, "c2", 0))
	if p, err := s.Parent(c); err != nil || p != x {
		t.Fatalf("Parent after rename = %d, %v", p, err)
	}
	must0(t, s.Rename(RootIno, "a", x, "c2", RenameExchange))
	if p, _ := s.Parent(c); p != RootIno {
		t.Fatalf("Parent of c after exchange = %d", p)
	}
	if p, _ := s.Parent(a); p != x {
		t.Fatalf("Parent of a after exchange = %d", p)
	}
	wantErrno(t, "Parent of a missing inode", must2err(s.Parent(9999)), syscall.ENOENT)
}

func TestReadDir(t *testing.T) {
	s := newStore(t)
	want := []string{"A", "B", "Z", "a", "a b", "a0", "aa", "b", "\xc3\xa9", "\xff"}
	for i := len(want) - 1; i >= 0; i-- { // create out of order
		if i%2 == 0 {
			mkdir(t, s, RootIno, want[i])
		} else {
			mkfile(t, s, RootIno, want[i])
		}
	}
	var got []Dirent
	must0(t, s.ReadDir(RootIno, "", func(d Dirent) bool { got = append(got, d); return true }))
	if len(got) != len(want) {
		t.Fatalf("ReadDir returned %d entries, want %d", len(got), len(want))
	}
	for i, d := range got {
		a := must[Attr](t, "lookup")(s.Lookup(RootIno, want[i]))
		if d.Name != want[i] || d.Ino != a.Ino || d.Type != a.Mode&S_IFMT {
			t.Fatalf("entry %d = %+v, want %q ino %d type %o", i, d, want[i], a.Ino, a.Mode&S_IFMT)
		}
	}
	// Resuming after each name gives the rest.
	for i, name := range want {
		var rest []string
		must0(t, s.ReadDir(RootIno, name, func(d Dirent) bool { rest = append(rest, d.Name); return true }))
		if strings.Join(rest, "/") != strings.Join(want[i+1:], "/") {
			t.Fatalf("after %q: %q", name, rest)
		}
	}
	// Resuming after a name that is not there (it was removed between calls).
	for _, tc := range []struct{ after, first string }{{"a00", "aa"}, {"0", "A"}, {"\xfe", "\xff"}, {"\xff\xff", ""}} {
		first := ""
		must0(t, s.ReadDir(RootIno, tc.after, func(d Dirent) bool { first = d.Name; return false }))
		if first != tc.first {
			t.Fatalf("first after %q = %q, want %q", tc.after, first, tc.first)
		}
	}
	// Stopping early.
	n := 0
	must0(t, s.ReadDir(RootIno, "", func(Dirent) bool { n++; return n < 3 }))
	if n != 3 {
		t.Fatalf("fn called %d times after returning false at 3", n)
	}
	// Entries of neighbouring directories never leak in.
	d := mkdir(t, s, RootIno, "sub")
	e := mkdir(t, s, d.Ino, "inner")
	mkfile(t, s, e.Ino, "deep")
	if got := names(t, s, d.Ino); len(got) != 1 || got[0] != "inner" {
		t.Fatalf("sub lists %q", got)
	}
	empty := mkdir(t, s, RootIno, "empty")
	if got := names(t, s, empty.Ino); len(got) != 0 {
		t.Fatalf("empty dir lists %q", got)
	}
	// A directory whose inode number is followed by one ending in 0xff bytes.
	if got := names(t, s, 255); len(got) != 0 {
		t.Fatalf("missing inode lists %q", got)
	}
}

// A directory of 100,000 entries is listed by streaming: memory does not
// grow with the directory, and resuming in the middle works.
func TestReadDirHuge(t *testing.T) {
	n := 100_000
	if testing.Short() {
		n = 10_000
	}
	opts := quietOptions()
	opts.CacheSize = 1 << 20
	s, err := Open(t.TempDir()+"/store", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d := mkdir(t, s, RootIno, "huge")
	pad := strings.Repeat("p", 100)
	name := func(i int) string { return fmt.Sprintf("%07d-%s", i, pad) }
	t0 := time.Now()
	if raceEnabled {
		// Create is some 200 µs under the race detector: write the
		// records directly.
		all := make([]string, n)
		for i := range all {
			all[i] = name(i)
		}
		bulkCreateFiles(t, s, d.Ino, all)
	} else {
		for i := 0; i < n; i++ {
			mkfile(t, s, d.Ino, name(i))
		}
	}
	t.Logf("created %d entries in %v (race detector: %v)", n, time.Since(t0), raceEnabled)
	t0 = time.Now()
	defer func() { t.Logf("listed in %v", time.Since(t0)) }()
	runtime.GC()
	var before, during runtime.MemStats
	runtime.ReadMemStats(&before)
	count, prev := 0, ""
	must0(t, s.ReadDir(d.Ino, "", func(e Dirent) bool {
		if e.Name <= prev {
			t.Fatalf("%q after %q", e.Name, prev)
		}
		prev = e.Name
		if count == n/2 {
			runtime.GC()
			runtime.ReadMemStats(&during)
		}
		count++
		return true
	}))
	if count != n {
		t.Fatalf("listed %d entries, want %d", count, n)
	}
	// Holding every name would take n*110 bytes (11 MB for 100,000).
	growth := int64(during.HeapAlloc) - int64(before.HeapAlloc)
	if limit := int64(n) * int64(len(name(0))) / 4; growth > limit {
		t.Fatalf("heap grew by %d bytes half way through the listing (limit %d)", growth, limit)
	}
	t.Logf("heap growth half way through %d entries: %d bytes", n, growth)
	// Resume from the middle.
	count = 0
	must0(t, s.ReadDir(d.Ino, name(n-11), func(e Dirent) bool { count++; return true }))
	if count != 10 {
		t.Fatalf("%d entries after the 11th last, want 10", count)
	}
	if fs := must[StatFs](t, "statfs")(s.StatFs()); fs.Files-fs.Ffree != uint64(n+2) {
		t.Fatalf("StatFs counts %d inodes, want %d", fs.Files-fs.Ffree, n+2)
	}
	if !raceEnabled { // (some 12 s under the race detector)
		if problems, err := s.Check(0); err != nil || len(problems) > 0 {
			t.Fatalf("Check: %v %q", err, problems)
		}
	}
}

// setNlink plants a link count (to reach the limits without 65,000 links).
func setNlink(t *testing.T, s *Store, ino uint64, n uint32) {
	t.Helper()
	a := getattr(t, s, ino)
	a.Nlink = n
	plantKey(t, s, attrKey(ino), a.encode())
}

func TestTooManyLinks(t *testing.T) {
	s := newStore(t)
	buildTree(t, s, `f:x full/ other/ other/sub/ other/g:y`)
	f, full, other := resolve(t, s, "f"), resolve(t, s, "full"), resolve(t, s, "other")
	setNlink(t, s, f, maxLinks-1)
	must[Attr](t, "link up to the limit")(s.Link(f, RootIno, "f2"))
	_, err := s.Link(f, RootIno, "f3")
	wantErrno(t, "Link past the limit", err, syscall.EMLINK)

	setNlink(t, s, full, maxLinks)
	_, err = s.Create(full, "d", NewInode{Mode: S_IFDIR | 0o755})
	wantErrno(t, "Mkdir in a full directory", err, syscall.EMLINK)
	if _, err := s.Create(full, "file", NewInode{Mode: S_IFREG | 0o644}); err != nil {
		t.Fatalf("a file in a full directory: %v", err)
	}
	// Moving a directory in adds a link too (the VFS leaves this check to
	// FUSE file systems: s_max_links is 0 for them).
	wantErrno(t, "Rename a directory into a full directory", s.Rename(other, "sub", full, "sub", 0), syscall.EMLINK)
	wantErrno(t, "Exchange a file in a full directory with a directory",
		s.Rename(full, "file", other, "sub", RenameExchange), syscall.EMLINK)
	if err := s.Rename(other, "g", full, "g", 0); err != nil {
		t.Fatalf("moving a file into a full directory: %v", err)
	}
	if n := getattr(t, s, full).Nlink; n != maxLinks {
		t.Fatalf("full directory nlink %d, want %d", n, maxLinks)
	}
}

// TestCreateMany: one batch of entries, each created or refused on its own,
// with a journal record per entry and the inode counter right after it.
func TestCreateMany(t *testing.T) {
	s := newStore(t)
	d := mkdir(t, s, RootIno, "d")
	mkfile(t, s, d.Ino, "taken")
	seq := s.LastSeq()
	reg := NewInode{Mode: S_IFREG | 0o644}
	attrs, errs, err := s.CreateMany(d.Ino, []NewEntry{
		{Name: "a", Inode: reg},
		{Name: "taken", Inode: reg},
		{Name: "sub", Inode: NewInode{Mode: S_IFDIR | 0o755}},
		{Name: "a", Inode: reg}, // an earlier entry's name
		{Name: "x/y", Inode: reg},
		{Name: "l", Inode: NewInode{Mode: S_IFLNK | 0o777, Target: "a"}},
		{Name: "data", Inode: NewInode{Mode: S_IFREG | 0o600, Data: []byte("hello")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	wantErrs := []error{nil, ErrExist, nil, ErrExist, ErrInvalid, nil, nil}
	for i, want := range wantErrs {
		if errs[i] != want {
			t.Errorf("entry %d: error %v, want %v", i, errs[i], want)
		}
		if (want == nil) != (attrs[i].Ino != 0) {
			t.Errorf("entry %d: attributes %+v with error %v", i, attrs[i], errs[i])
		}
	}
	if got := names(t, s, d.Ino); strings.Join(got, " ") != "a data l sub taken" {
		t.Fatalf("d holds %q", got)
	}
	if got := string(readAll(t, s, resolve(t, s, "d/data"))); got != "hello" {
		t.Fatalf("d/data holds %q", got)
	}
	if a := getattr(t, s, d.Ino); a.Nlink != 3 {
		t.Fatalf("d has %d links, want 3 (its subdirectory)", a.Nlink)
	}
	wantJournal(t, s, seq,
		fmt.Sprintf("%d create /d/a by store", seq+1),
		fmt.Sprintf("%d mkdir /d/sub by store", seq+2),
		fmt.Sprintf("%d symlink /d/l by store", seq+3),
		fmt.Sprintf("%d create /d/data by store", seq+4))
	f := mkfile(t, s, RootIno, "after")
	if f.Ino != attrs[6].Ino+1 {
		t.Fatalf("the next inode is %d, want %d", f.Ino, attrs[6].Ino+1)
	}
	if _, _, err := s.CreateMany(RootIno+1000, []NewEntry{{Name: "a", Inode: reg}}); err != ErrNotFound {
		t.Fatalf("CreateMany in a missing directory: %v", err)
	}
	s = reopen(t, s)
	checkInvariants(t, s, checkOpts{})
}

// Deleting an inode leaves none of its keys, whether they are known from
// its attributes (FlagNoXattrs: point deletions) or scanned for: data
// written, cut back, punched and extended; xattrs set and removed;
// symlink targets; origins; hard links; rename over a file; orphans
// deleted at Forget; empty directories.
func TestDeleteLeavesNoKeys(t *testing.T) {
	s := newChunkStore(t)
	var gone []uint64
	unlink := func(dir uint64, name string) {
		t.Helper()
		if err := s.Unlink(dir, name); err != nil {
			t.Fatalf("unlink %s: %v", name, err)
		}
	}
	flagged := func(ino uint64, want bool) {
		t.Helper()
		if got := getattr(t, s, ino).Flags&FlagNoXattrs != 0; got != want {
			t.Fatalf("inode %d: FlagNoXattrs %v, want %v", ino, got, want)
		}
	}

	// Data in several chunks, cut back into a chunk, punched, extended.
	f := mkfile(t, s, RootIno, "data")
	write(t, s, f.Ino, 0, pattern(1, 5*ChunkSize+100))
	must[Attr](t, "truncate")(s.SetAttr(f.Ino, SetAttrRequest{Valid: SetSize, Size: 2*ChunkSize + 7}))
	must[Attr](t, "punch")(s.Fallocate(f.Ino, FallocPunchHole|FallocKeepSize, 10, ChunkSize))
	write(t, s, f.Ino, 9*ChunkSize, []byte("tail"))
	flagged(f.Ino, true)
	unlink(RootIno, "data")
	gone = append(gone, f.Ino)

	// A big sparse file with an xattr, data at both ends: one range.
	big := mkfile(t, s, RootIno, "big")
	write(t, s, big.Ino, 0, pattern(4, ChunkSize+3))
	write(t, s, big.Ino, (exactBlocksLimit+5)*ChunkSize, []byte("end"))
	if err := s.SetXattr(big.Ino, "user.big", []byte("1"), 0); err != nil {
		t.Fatal(err)
	}
	unlink(RootIno, "big")
	gone = append(gone, big.Ino)

	// An xattr set and removed again: the inode is scanned.
	x := mkfile(t, s, RootIno, "xattr")
	write(t, s, x.Ino, 0, []byte("x"))
	if err := s.SetXattr(x.Ino, "user.a", []byte("1"), 0); err != nil {
		t.Fatal(err)
	}
	if err := s.SetXattr(x.Ino, "user.b", []byte("2"), 0); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveXattr(x.Ino, "user.a"); err != nil {
		t.Fatal(err)
	}
	flagged(x.Ino, false)
	unlink(RootIno, "xattr")
	gone = append(gone, x.Ino)

	// A symlink, and a directory with an xattr.
	l := must[Attr](t, "symlink")(s.Create(RootIno, "link", NewInode{Mode: S_IFLNK | 0o777, Target: "data"}))
	unlink(RootIno, "link")
	d := mkdir(t, s, RootIno, "dir")
	if err := s.SetXattr(d.Ino, "user.d", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Rmdir(RootIno, "dir"); err != nil {
		t.Fatal(err)
	}
	gone = append(gone, l.Ino, d.Ino)

	// A local file with an origin (as imports and sync back leave).
	o := must[Attr](t, "create with origin")(s.Create(RootIno, "origin", NewInode{Mode: S_IFREG | 0o644, Data: []byte("imported"), Origin: &Origin{Key: "k", ID: "v1"}}))
	flagged(o.Ino, true)
	unlink(RootIno, "origin")
	gone = append(gone, o.Ino)

	// Two names, removed one by one; a file renamed over another.
	h := mkfile(t, s, RootIno, "h1")
	write(t, s, h.Ino, 0, []byte("linked"))
	must[Attr](t, "link")(s.Link(h.Ino, RootIno, "h2"))
	unlink(RootIno, "h1")
	unlink(RootIno, "h2")
	over := mkfile(t, s, RootIno, "target")
	write(t, s, over.Ino, 0, pattern(2, ChunkSize+1))
	src := mkfile(t, s, RootIno, "src")
	if err := s.Rename(RootIno, "src", RootIno, "target", 0); err != nil {
		t.Fatal(err)
	}
	unlink(RootIno, "target")
	gone = append(gone, h.Ino, over.Ino, src.Ino)

	// An orphan: removed while in use, deleted when forgotten.
	orphan := mkfile(t, s, RootIno, "open")
	write(t, s, orphan.Ino, 0, pattern(3, 3*ChunkSize))
	s.SetInUse(func(ino uint64, _ bool) bool { return ino == orphan.Ino })
	unlink(RootIno, "open")
	s.SetInUse(nil)
	if err := s.Forget(orphan.Ino); err != nil {
		t.Fatal(err)
	}
	gone = append(gone, orphan.Ino)

	for _, ino := range gone {
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: inodePrefix(ino), UpperBound: inodeEnd(ino)})
		if err != nil {
			t.Fatal(err)
		}
		for it.First(); it.Valid(); it.Next() {
			t.Errorf("inode %d deleted, but key %q is left", ino, it.Key())
		}
		it.Close()
	}
	if problems, err := s.Check(0); err != nil || len(problems) > 0 {
		t.Fatalf("Check: %v %q", err, problems)
	}
}
