package kv

import (
	"sync"
	"syscall"
	"testing"
)

// Forget deletes an orphan while other operations on the same inode (a
// write, a truncate, an xattr) may still be running; such an operation read
// the attributes before the deletion and must not write them back after it,
// which would resurrect the inode as a nameless, non-orphan inode that is
// never deleted and is not counted.
func TestForgetRacesInodeOperations(t *testing.T) {
	s := newStore(t)
	s.SetInUse(func(uint64, bool) bool { return true })
	rounds := 300
	if testing.Short() {
		rounds = 50
	}
	var resurrected int
	for i := 0; i < rounds; i++ {
		f := mkfile(t, s, RootIno, "f")
		must0(t, s.Unlink(RootIno, "f"))
		var wg sync.WaitGroup
		start := make(chan struct{})
		for w := 0; w < 3; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for j := 0; j < 20; j++ {
					var err error
					switch (w + j) % 3 {
					case 0:
						_, err = s.Write(f.Ino, int64(j), []byte("x"))
					case 1:
						_, err = s.SetAttr(f.Ino, SetAttrRequest{Valid: SetSize, Size: uint64(j)})
					case 2:
						err = s.SetXattr(f.Ino, "user.x", []byte("v"), 0)
					}
					if err != nil && Errno(err) != syscall.ENOENT {
						t.Errorf("operation on a forgotten orphan: %v", err)
					}
				}
			}()
		}
		close(start)
		must0(t, s.Forget(f.Ino))
		wg.Wait()
		if _, err := s.GetAttr(f.Ino); err == nil {
			resurrected++
		}
	}
	if resurrected > 0 {
		t.Errorf("%d of %d forgotten orphans came back after a racing write, truncate or setxattr", resurrected, rounds)
	}
	checkInvariants(t, s, checkOpts{})
}

// CreateTmpfile (O_TMPFILE) makes a nameless regular file: an orphan that
// Link may give a name, deleted by Forget or at the next Open otherwise.
func TestCreateTmpfile(t *testing.T) {
	s := newStore(t)
	used := func() uint64 { st := must[StatFs](t, "statfs")(s.StatFs()); return st.Files - st.Ffree }
	root := getattr(t, s, RootIno)
	tmp, err := s.CreateTmpfile(RootIno, NewInode{Mode: S_IFDIR | 0o600, Uid: 1, Gid: 2})
	if err != nil {
		t.Fatal(err)
	}
	if tmp.Mode != S_IFREG|0o600 || tmp.Nlink != 0 || tmp.Uid != 1 || tmp.Gid != 2 || tmp.Size != 0 {
		t.Fatalf("tmpfile attributes %+v", tmp)
	}
	if getattr(t, s, RootIno) != root {
		t.Fatal("CreateTmpfile changed the directory")
	}
	if names(t, s, RootIno) != nil {
		t.Fatal("the tmpfile has a name")
	}
	if n := used(); n != 2 {
		t.Fatalf("%d inodes used, want 2", n)
	}
	write(t, s, tmp.Ino, 0, []byte("tmp data"))
	checkInvariants(t, s, checkOpts{})

	// Link gives it a name, and another.
	a := must[Attr](t, "link")(s.Link(tmp.Ino, RootIno, "named"))
	if a.Nlink != 1 {
		t.Fatalf("nlink %d after linking the tmpfile", a.Nlink)
	}
	must[Attr](t, "link")(s.Link(tmp.Ino, RootIno, "named2"))
	if got := readAll(t, s, must[Attr](t, "lookup")(s.Lookup(RootIno, "named")).Ino); string(got) != "tmp data" {
		t.Fatalf("contents through the name: %q", got)
	}
	st := checkInvariants(t, s, checkOpts{})
	if st.orphans[tmp.Ino] {
		t.Fatal("a linked tmpfile is still an orphan")
	}
	// Once named and unlinked again (while open), it cannot be linked back.
	s.SetInUse(func(ino uint64, _ bool) bool { return ino == tmp.Ino })
	must0(t, s.Unlink(RootIno, "named"))
	must0(t, s.Unlink(RootIno, "named2"))
	_, err = s.Link(tmp.Ino, RootIno, "again")
	wantErrno(t, "Link of an unlinked former tmpfile", err, syscall.ENOENT)
	must0(t, s.Forget(tmp.Ino))

	// Setgid directories give their group; a tmpfile needs a directory.
	g := must[Attr](t, "mkdir")(s.Create(RootIno, "g", NewInode{Mode: S_IFDIR | S_ISGID | 0o775, Gid: 50}))
	if a := must[Attr](t, "tmpfile")(s.CreateTmpfile(g.Ino, NewInode{Mode: 0o644, Gid: 3})); a.Gid != 50 {
		t.Fatalf("tmpfile in a setgid directory has gid %d", a.Gid)
	}
	f := mkfile(t, s, RootIno, "file")
	_, err = s.CreateTmpfile(f.Ino, NewInode{Mode: 0o644})
	wantErrno(t, "CreateTmpfile in a file", err, syscall.ENOTDIR)
	_, err = s.CreateTmpfile(9999, NewInode{Mode: 0o644})
	wantErrno(t, "CreateTmpfile in a missing directory", err, syscall.ENOENT)

	// An unnamed tmpfile goes away on Forget, or when the store is opened.
	t1 := must[Attr](t, "tmpfile")(s.CreateTmpfile(RootIno, NewInode{Mode: 0o644}))
	t2 := must[Attr](t, "tmpfile")(s.CreateTmpfile(RootIno, NewInode{Mode: 0o644}))
	write(t, s, t2.Ino, C, []byte("x"))
	must0(t, s.Forget(t1.Ino))
	wantErrno(t, "GetAttr of a forgotten tmpfile", must2err(s.GetAttr(t1.Ino)), syscall.ENOENT)
	checkInvariants(t, s, checkOpts{})
	before := used()
	s = reopen(t, s)
	wantErrno(t, "GetAttr of a tmpfile after reopen", must2err(s.GetAttr(t2.Ino)), syscall.ENOENT)
	if n := used(); n != before-2 { // t2 and the one in g
		t.Fatalf("%d inodes used after reopen, want %d", n, before-2)
	}
	checkInvariants(t, s, checkOpts{})
}
