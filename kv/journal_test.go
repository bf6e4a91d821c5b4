package kv

import (
	"fmt"
	"strings"
	"testing"
)

func journal(t *testing.T, s *Store, after uint64) []string {
	t.Helper()
	var out []string
	if err := s.ReadJournal(after, func(r Record) bool {
		out = append(out, r.String())
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func wantJournal(t *testing.T, s *Store, after uint64, want ...string) {
	t.Helper()
	got := journal(t, s, after)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("journal after %d:\n%s\nwant\n%s", after, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestJournalRecordsEveryChange(t *testing.T) {
	s := newStore(t)
	vim := &Actor{Pid: 42, Uid: 1000, Gid: 1000, Comm: "vim"}
	x := s.As(vim)
	d := must[Attr](t, "mkdir")(x.Create(RootIno, "src", NewInode{Mode: S_IFDIR | 0o755}))
	f := must[Attr](t, "create")(x.Create(d.Ino, "a.go", NewInode{Mode: S_IFREG | 0o644}))
	for i := range 100 { // many writes, one record
		must[Attr](t, "write")(x.Write(f.Ino, int64(i*10), []byte("0123456789")))
	}
	must[Attr](t, "symlink")(x.Create(RootIno, "l", NewInode{Mode: S_IFLNK | 0o777, Target: "src/a.go"}))
	must[Attr](t, "link")(x.Link(f.Ino, d.Ino, "z-hard")) // the first name stays a.go
	must[Attr](t, "chmod")(x.SetAttr(f.Ino, SetAttrRequest{Valid: SetMode, Mode: 0o600}))
	must[Attr](t, "truncate")(x.SetAttr(f.Ino, SetAttrRequest{Valid: SetSize, Size: 5}))
	if err := x.SetXattr(f.Ino, "user.k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	if err := x.RemoveXattr(f.Ino, "user.k"); err != nil {
		t.Fatal(err)
	}
	must[Attr](t, "fallocate")(x.Fallocate(f.Ino, 0, 0, 100))
	sh := s.As(&Actor{Entry: "shell", Request: "r1"})
	if err := sh.Rename(RootIno, "src", RootIno, "lib", 0); err != nil {
		t.Fatal(err)
	}
	must[Attr](t, "write")(sh.Write(f.Ino, 0, []byte("x"))) // path after the directory moved
	if err := sh.Unlink(d.Ino, "z-hard"); err != nil {
		t.Fatal(err)
	}
	must[Attr](t, "mkdir")(sh.Create(RootIno, "empty", NewInode{Mode: S_IFDIR | 0o755}))
	if err := sh.Rmdir(RootIno, "empty"); err != nil {
		t.Fatal(err)
	}
	must[Attr](t, "plain write")(s.Write(f.Ino, 0, []byte("y")))
	by := " by pid 42 (vim) uid 1000"
	wantJournal(t, s, 0,
		"1 mkdir /src"+by,
		"2 create /src/a.go"+by,
		"3 write /src/a.go size=1000"+by,
		"4 symlink /l"+by,
		"5 link /src/z-hard"+by,
		"6 setattr /src/a.go"+by,
		"7 truncate /src/a.go size=5"+by,
		"8 setxattr /src/a.go -> user.k"+by,
		"9 removexattr /src/a.go -> user.k"+by,
		"10 fallocate /src/a.go size=100"+by,
		"11 rename /src -> /lib by shell #r1",
		"12 write /lib/a.go size=100 by shell #r1",
		"13 unlink /lib/z-hard by shell #r1",
		"14 mkdir /empty by shell #r1",
		"15 rmdir /empty by shell #r1",
		"16 write /lib/a.go size=100 by store",
	)
	if s.LastSeq() != 16 {
		t.Fatalf("LastSeq %d", s.LastSeq())
	}
	s = reopen(t, s)
	must[Attr](t, "create")(s.Create(RootIno, "after", NewInode{Mode: S_IFREG}))
	wantJournal(t, s, 16, "17 create /after by store")
	checkInvariants(t, s, checkOpts{})
}

func TestJournalWritesJoinOnlyWhenConsecutive(t *testing.T) {
	s := newStore(t)
	a := mkfile(t, s, RootIno, "a")
	b := mkfile(t, s, RootIno, "b")
	me, other := s.As(&Actor{Pid: 1}), s.As(&Actor{Pid: 2})
	for _, w := range []struct {
		x   Session
		ino uint64
	}{{me, a.Ino}, {me, a.Ino}, {me, b.Ino}, {me, a.Ino}, {other, a.Ino}, {other, a.Ino}} {
		must[Attr](t, "write")(w.x.Write(w.ino, 0, []byte("data")))
	}
	got := journal(t, s, 2)
	if len(got) != 4 {
		t.Fatalf("journal:\n%s\nwant 4 write records: a, b, a, a by another", strings.Join(got, "\n"))
	}
}

func TestJournalOff(t *testing.T) {
	o := quietOptions()
	o.NoJournal = true
	s, err := Open(t.TempDir()+"/s", o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mkfile(t, s, RootIno, "f")
	if n := len(journal(t, s, 0)); n != 0 {
		t.Fatalf("%d records with the journal off", n)
	}
}

func TestRecordEncoding(t *testing.T) {
	r := Record{Seq: 9, Time: -1, Op: JRename, Ino: 1 << 60, Path: "/a b", Path2: "/ü",
		Size: 12345, Actor: Actor{Pid: 1, Uid: 2, Gid: 3, Comm: "c", Sandbox: "sb", Entry: "tool:write", Request: "q"}}
	got, err := decodeRecord(9, r.encode())
	if err != nil || fmt.Sprint(got) != fmt.Sprint(r) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for _, b := range [][]byte{nil, {2, 1}, {1}, r.encode()[:10], append(r.encode(), 0)} {
		if _, err := decodeRecord(1, b); err == nil {
			t.Fatalf("decodeRecord(%x) accepted", b)
		}
	}
}

func TestCheckFindsJournalDamage(t *testing.T) {
	s := newStore(t)
	mkfile(t, s, RootIno, "a")
	mkfile(t, s, RootIno, "b")
	if p, err := s.Check(0); err != nil || len(p) != 0 {
		t.Fatalf("clean store: %q %v", p, err)
	}
	plantKey(t, s, journalKey(5), (&Record{Op: JCreate}).encode()) // a gap
	plantKey(t, s, journalKey(6), []byte{9, 9})                    // undecodable
	p, err := s.Check(0)
	// The planted records were not counted either.
	if err != nil || len(p) != 3 || !strings.Contains(p[0], "record 5 where 3 was due") || !strings.Contains(p[1], "journal record 6") ||
		!strings.Contains(p[2], "journal usage count") {
		t.Fatalf("damaged journal: %q %v", p, err)
	}
}

// TestJournalPathsFollowDirectoryMoves: records name the path a file has at
// the time of the change, whatever the cache of directory paths holds.
func TestJournalPathsFollowDirectoryMoves(t *testing.T) {
	s := newStore(t)
	a := mkdir(t, s, RootIno, "a")
	b := mkdir(t, s, a.Ino, "b")
	f := mkfile(t, s, b.Ino, "f")
	mkfile(t, s, RootIno, "g")
	lastPath := func() string {
		t.Helper()
		got := journal(t, s, s.LastSeq()-1)
		return strings.Fields(got[len(got)-1])[2]
	}
	step := func(what, want string, change func() error) {
		t.Helper()
		if err := change(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		write(t, s, f.Ino, 0, []byte(what))
		if got := lastPath(); got != want {
			t.Fatalf("after %s: the write is recorded at %s, want %s", what, got, want)
		}
	}
	step("nothing", "/a/b/f", func() error { return nil })
	step("a file moved", "/a/b/f", func() error { return s.Rename(RootIno, "g", a.Ino, "g2", 0) })
	step("a directory exchanged with a file", "/a/g2/f", func() error {
		return s.Rename(a.Ino, "b", a.Ino, "g2", RenameExchange)
	})
	c := mkdir(t, s, RootIno, "c")
	step("a directory moved", "/c/a/g2/f", func() error { return s.Rename(RootIno, "a", c.Ino, "a", 0) })
	mkdir(t, s, b.Ino, "e")
	step("a directory removed", "/c/a/g2/f", func() error { return s.Rmdir(b.Ino, "e") })
	mkdir(t, s, RootIno, "d")
	step("a directory replaced", "/d/g2/f", func() error { return s.Rename(c.Ino, "a", RootIno, "d", 0) })
	step("the file renamed", "/d/g2/f2", func() error { return s.Rename(b.Ino, "f", b.Ino, "f2", 0) })
	step("a second name", "/d/g2/f2", func() error { _, err := s.Link(f.Ino, RootIno, "z"); return err })
	step("the first name removed", "/z", func() error { return s.Unlink(b.Ino, "f2") })
	h := mkfile(t, s, RootIno, "h")
	step("a file exchanged with it", "/h", func() error { return s.Rename(RootIno, "h", RootIno, "z", RenameExchange) })
	write(t, s, h.Ino, 0, []byte("h"))
	if got := lastPath(); got != "/z" {
		t.Fatalf("the exchanged file's write is recorded at %s, want /z", got)
	}
	s.SetInUse(func(uint64, bool) bool { return true }) // f stays, as if open
	mkfile(t, s, RootIno, "i")
	step("replaced by a rename", "(inode", func() error { return s.Rename(RootIno, "i", RootIno, "h", 0) })
}
