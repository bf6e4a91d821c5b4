package kv

import (
	"bytes"
	"strings"
	"syscall"
	"testing"
)

func TestXattr(t *testing.T) {
	clock := fakeClock(t)
	s := newStore(t)
	f := mkfile(t, s, RootIno, "f")
	long := "user." + strings.Repeat("n", MaxXattrName-len("user."))
	type op struct {
		name   string
		do     string // set, get, remove
		attr   string
		value  []byte
		flags  uint32
		errno  syscall.Errno
		result string // the value get returns
	}
	ops := []op{
		{"get missing", "get", "user.a", nil, 0, syscall.ENODATA, ""},
		{"replace missing", "set", "user.a", []byte("1"), XattrReplace, syscall.ENODATA, ""},
		{"remove missing", "remove", "user.a", nil, 0, syscall.ENODATA, ""},
		{"create", "set", "user.a", []byte("1"), XattrCreate, 0, ""},
		{"get", "get", "user.a", nil, 0, 0, "1"},
		{"create existing", "set", "user.a", []byte("2"), XattrCreate, syscall.EEXIST, ""},
		{"unchanged", "get", "user.a", nil, 0, 0, "1"},
		{"replace", "set", "user.a", []byte("22"), XattrReplace, 0, ""},
		{"replaced", "get", "user.a", nil, 0, 0, "22"},
		{"set", "set", "user.a", []byte("333"), 0, 0, ""},
		{"set new", "set", "trusted.b", []byte{0, 1, 2, 0}, 0, 0, ""},
		{"binary value", "get", "trusted.b", nil, 0, 0, "\x00\x01\x02\x00"},
		{"empty value", "set", "user.empty", []byte{}, 0, 0, ""},
		{"get empty value", "get", "user.empty", nil, 0, 0, ""},
		{"longest name", "set", long, []byte("long"), 0, 0, ""},
		{"get longest name", "get", long, nil, 0, 0, "long"},
		{"name too long", "set", long + "x", []byte("x"), 0, syscall.ERANGE, ""},
		{"get name too long", "get", long + "x", nil, 0, syscall.ERANGE, ""},
		{"remove name too long", "remove", long + "x", nil, 0, syscall.ERANGE, ""},
		{"largest value", "set", "user.big", bytes.Repeat([]byte{7}, MaxXattrValue), 0, 0, ""},
		{"value too big", "set", "user.big2", make([]byte, MaxXattrValue+1), 0, syscall.E2BIG, ""},
		{"empty name", "set", "", []byte("x"), 0, syscall.EINVAL, ""},
		{"security namespace", "set", "security.x", []byte("s"), 0, 0, ""},
		{"namespace only", "set", "user.", []byte("x"), 0, syscall.EINVAL, ""},
		{"get namespace only", "get", "trusted.", nil, 0, syscall.EINVAL, ""},
		{"no namespace", "set", "foo", []byte("x"), 0, syscall.EOPNOTSUPP, ""},
		{"POSIX ACL", "set", "system.posix_acl_access", []byte("x"), 0, syscall.EOPNOTSUPP, ""},
		{"get POSIX ACL", "get", "system.posix_acl_default", nil, 0, syscall.EOPNOTSUPP, ""},
		{"remove unknown namespace", "remove", "os2.x", nil, 0, syscall.EOPNOTSUPP, ""},
		{"prefix without dot", "set", "userx", []byte("x"), 0, syscall.EOPNOTSUPP, ""},
		{"bad flags", "set", "user.c", []byte("x"), 4, syscall.EINVAL, ""},
		{"remove", "remove", "user.a", nil, 0, 0, ""},
		{"get removed", "get", "user.a", nil, 0, syscall.ENODATA, ""},
		{"remove again", "remove", "user.a", nil, 0, syscall.ENODATA, ""},
	}
	for _, o := range ops {
		before := getattr(t, s, f.Ino)
		var err error
		switch o.do {
		case "set":
			err = s.SetXattr(f.Ino, o.attr, o.value, o.flags)
		case "remove":
			err = s.RemoveXattr(f.Ino, o.attr)
		case "get":
			var v []byte
			v, err = s.GetXattr(f.Ino, o.attr)
			if err == nil && string(v) != o.result {
				t.Fatalf("%s: got %q, want %q", o.name, v, o.result)
			}
		}
		wantErrno(t, o.name, err, o.errno)
		after := getattr(t, s, f.Ino)
		changes := o.do != "get" && o.errno == 0
		if changes && (after.Ctime != clock.Load() || after.Mtime != before.Mtime) {
			t.Fatalf("%s: ctime %d mtime %d, want ctime %d and mtime unchanged", o.name, after.Ctime, after.Mtime, clock.Load())
		}
		if !changes && after != before {
			t.Fatalf("%s: attributes changed", o.name)
		}
	}
	list, err := s.ListXattr(f.Ino)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"security.x", "trusted.b", "user.big", "user.empty", long}
	if strings.Join(list, ",") != strings.Join(want, ",") {
		t.Fatalf("ListXattr = %q, want %q", list, want)
	}
	if v, err := s.GetXattr(f.Ino, "user.big"); err != nil || len(v) != MaxXattrValue {
		t.Fatalf("largest value: %d bytes, %v", len(v), err)
	}

	// Other inode types carry xattrs too, and they do not leak between inodes.
	d := mkdir(t, s, RootIno, "d")
	l := must[Attr](t, "symlink")(s.Create(RootIno, "l", NewInode{Mode: S_IFLNK | 0o777, Target: "f"}))
	must0(t, s.SetXattr(d.Ino, "user.dir", []byte("d"), 0))
	must0(t, s.SetXattr(l.Ino, "trusted.link", []byte("l"), 0))
	if list, _ := s.ListXattr(d.Ino); len(list) != 1 || list[0] != "user.dir" {
		t.Fatalf("dir xattrs %q", list)
	}
	if list, _ := s.ListXattr(l.Ino); len(list) != 1 || list[0] != "trusted.link" {
		t.Fatalf("symlink xattrs %q", list)
	}
	if list, _ := s.ListXattr(mkfile(t, s, RootIno, "plain").Ino); len(list) != 0 {
		t.Fatalf("new file xattrs %q", list)
	}

	// On a missing inode.
	_, err = s.GetXattr(999, "user.a")
	wantErrno(t, "get on a missing inode", err, syscall.ENOENT)
	wantErrno(t, "set on a missing inode", s.SetXattr(999, "user.a", nil, 0), syscall.ENOENT)
	wantErrno(t, "remove on a missing inode", s.RemoveXattr(999, "user.a"), syscall.ENOENT)

	// Deleting the inode deletes its xattrs (checkInvariants finds keys
	// of deleted inodes).
	must0(t, s.Unlink(RootIno, "f"))
	must0(t, s.Rmdir(RootIno, "d"))
	st := checkInvariants(t, s, checkOpts{})
	if st.inodes[f.Ino] != nil || st.inodes[d.Ino] != nil {
		t.Fatal("keys of deleted inodes remain")
	}
}

func TestStatFs(t *testing.T) {
	s := newStore(t)
	st := must[StatFs](t, "statfs")(s.StatFs())
	if st.NameLen != MaxNameLen || st.Bsize == 0 || st.Blocks == 0 || st.Bfree > st.Blocks || st.Bavail > st.Bfree {
		t.Fatalf("StatFs = %+v", st)
	}
	if st.Files != 1<<32 || st.Ffree != st.Files-1 {
		t.Fatalf("a new store: Files %d Ffree %d, want one inode used", st.Files, st.Ffree)
	}
	used := func() uint64 { st := must[StatFs](t, "statfs")(s.StatFs()); return st.Files - st.Ffree }
	d := mkdir(t, s, RootIno, "d")
	for i := 0; i < 10; i++ {
		mkfile(t, s, d.Ino, string(rune('a'+i)))
	}
	must[Attr](t, "link")(s.Link(must[Attr](t, "lookup")(s.Lookup(d.Ino, "a")).Ino, RootIno, "a2"))
	if n := used(); n != 12 {
		t.Fatalf("%d inodes used, want 12", n)
	}
	must0(t, s.Unlink(d.Ino, "a")) // still linked as a2
	must0(t, s.Unlink(d.Ino, "b"))
	must0(t, s.Rename(d.Ino, "c", d.Ino, "d", 0))
	if n := used(); n != 10 {
		t.Fatalf("%d inodes used, want 10", n)
	}
	s = reopen(t, s)
	if n := used(); n != 10 {
		t.Fatalf("after reopen %d inodes used, want 10", n)
	}
	checkInvariants(t, s, checkOpts{})
}

// An inode whose last name goes while it is in use lives on as an orphan
// until Forget, or until the store is opened again.
func TestOrphans(t *testing.T) {
	s := newStore(t)
	inUse := map[uint64]bool{}
	s.SetInUse(func(ino uint64, _ bool) bool { return inUse[ino] })
	used := func() uint64 { st := must[StatFs](t, "statfs")(s.StatFs()); return st.Files - st.Ffree }

	f := mkfile(t, s, RootIno, "f")
	write(t, s, f.Ino, 0, pattern(1, 2*C))
	must0(t, s.SetXattr(f.Ino, "user.x", []byte("v"), 0))
	inUse[f.Ino] = true
	must0(t, s.Unlink(RootIno, "f"))
	a := getattr(t, s, f.Ino)
	if a.Nlink != 0 || a.Size != 2*C {
		t.Fatalf("orphan attributes %+v", a)
	}
	if !bytes.Equal(readAll(t, s, f.Ino), pattern(1, 2*C)) {
		t.Fatal("orphan contents")
	}
	// An open file can still be written, truncated and have xattrs.
	write(t, s, f.Ino, 2*C, []byte("more"))
	must[Attr](t, "truncate")(s.SetAttr(f.Ino, SetAttrRequest{Valid: SetSize, Size: C}))
	if v, err := s.GetXattr(f.Ino, "user.x"); err != nil || string(v) != "v" {
		t.Fatalf("orphan xattr %q, %v", v, err)
	}
	wantErrno(t, "Lookup of the removed name", must2err(s.Lookup(RootIno, "f")), syscall.ENOENT)
	if n := used(); n != 2 {
		t.Fatalf("%d inodes used with one orphan, want 2", n)
	}
	st := checkInvariants(t, s, checkOpts{})
	if !st.orphans[f.Ino] {
		t.Fatal("no orphan key")
	}

	// A file replaced by a rename becomes an orphan too; so does a removed
	// directory, and nothing can be created in it.
	g := mkfile(t, s, RootIno, "g")
	mkfile(t, s, RootIno, "h")
	inUse[g.Ino] = true
	must0(t, s.Rename(RootIno, "h", RootIno, "g", 0))
	if a := getattr(t, s, g.Ino); a.Nlink != 0 {
		t.Fatalf("replaced file nlink %d", a.Nlink)
	}
	d := mkdir(t, s, RootIno, "d")
	inUse[d.Ino] = true
	must0(t, s.Rmdir(RootIno, "d"))
	if a := getattr(t, s, d.Ino); a.Nlink != 0 {
		t.Fatalf("removed directory nlink %d", a.Nlink)
	}
	_, err := s.Create(d.Ino, "x", NewInode{Mode: S_IFREG | 0o644})
	wantErrno(t, "Create in a removed directory", err, syscall.ENOENT)
	_, err = s.Create(d.Ino, "x", NewInode{Mode: S_IFDIR | 0o755})
	wantErrno(t, "Mkdir in a removed directory", err, syscall.ENOENT)
	mkfile(t, s, RootIno, "k")
	wantErrno(t, "Rename into a removed directory", s.Rename(RootIno, "k", d.Ino, "k", 0), syscall.ENOENT)
	_, err = s.Link(must[Attr](t, "lookup")(s.Lookup(RootIno, "k")).Ino, d.Ino, "k")
	wantErrno(t, "Link into a removed directory", err, syscall.ENOENT)
	if n := rootNlink(t, s); n != 2 {
		t.Fatalf("root nlink %d after removing its only subdirectory", n)
	}
	if n := used(); n != 6 {
		t.Fatalf("%d inodes used, want 6 (root, 3 orphans, g, k)", n)
	}
	checkInvariants(t, s, checkOpts{})

	// Forget deletes an orphan, and leaves linked inodes alone.
	must0(t, s.Forget(f.Ino))
	wantErrno(t, "GetAttr after Forget", must2err(s.GetAttr(f.Ino)), syscall.ENOENT)
	must0(t, s.Forget(f.Ino)) // twice is harmless
	k := must[Attr](t, "lookup")(s.Lookup(RootIno, "k"))
	must0(t, s.Forget(k.Ino))
	must0(t, s.Forget(RootIno))
	must0(t, s.Forget(12345))
	if _, err := s.GetAttr(k.Ino); err != nil {
		t.Fatalf("Forget deleted a linked inode: %v", err)
	}
	if n := used(); n != 5 {
		t.Fatalf("%d inodes used after Forget, want 5", n)
	}
	st = checkInvariants(t, s, checkOpts{})
	if st.inodes[f.Ino] != nil || st.orphans[f.Ino] {
		t.Fatal("keys of the forgotten orphan remain")
	}

	// Reopening removes the orphans that were never forgotten.
	s = reopen(t, s)
	for _, ino := range []uint64{g.Ino, d.Ino} {
		wantErrno(t, "orphan after reopen", must2err(s.GetAttr(ino)), syscall.ENOENT)
	}
	if n := used(); n != 3 {
		t.Fatalf("%d inodes used after reopen, want 3", n)
	}
	st = checkInvariants(t, s, checkOpts{})
	if len(st.orphans) != 0 {
		t.Fatalf("orphans after reopen: %v", st.orphans)
	}
	// The purge is durable: a second reopen finds the same.
	s = reopen(t, s)
	if n := used(); n != 3 {
		t.Fatalf("%d inodes used after the second reopen, want 3", n)
	}
	checkInvariants(t, s, checkOpts{})
}

// An inode unlinked while not in use is deleted at once.
func TestUnlinkNotInUse(t *testing.T) {
	s := newStore(t)
	s.SetInUse(func(uint64, bool) bool { return false })
	f := mkfile(t, s, RootIno, "f")
	write(t, s, f.Ino, 0, []byte("x"))
	must0(t, s.Unlink(RootIno, "f"))
	wantErrno(t, "GetAttr", must2err(s.GetAttr(f.Ino)), syscall.ENOENT)
	_, _, err := s.Read(f.Ino, 0, make([]byte, 1))
	wantErrno(t, "Read", err, syscall.ENOENT)
	_, err = s.Write(f.Ino, 0, []byte("y"))
	wantErrno(t, "Write", err, syscall.ENOENT)
	st := checkInvariants(t, s, checkOpts{})
	if len(st.inodes) != 1 {
		t.Fatalf("%d inodes, want only the root", len(st.inodes))
	}
}
