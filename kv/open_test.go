package kv

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

func TestOpen(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, dir string) // dir does not exist yet
		want    error                          // nil: opens
	}{
		{"missing dir", func(t *testing.T, dir string) {}, nil},
		{"missing parent dirs", func(t *testing.T, dir string) {}, nil},
		{"empty dir", func(t *testing.T, dir string) { mustMkdir(t, dir) }, nil},
		{"dir with lock and daemon.log only", func(t *testing.T, dir string) {
			mustMkdir(t, dir)
			mustWrite(t, filepath.Join(dir, "lock"), "12345\n")
			mustWrite(t, filepath.Join(dir, "daemon.log"), "old log\n")
		}, nil},
		{"existing store", func(t *testing.T, dir string) {
			s := openStore(t, dir)
			mkfile(t, s, RootIno, "f")
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}, nil},
		{"dir with other files", func(t *testing.T, dir string) {
			mustMkdir(t, dir)
			mustWrite(t, filepath.Join(dir, "notes.txt"), "hello")
		}, ErrNotStore},
		{"dir with a subdirectory", func(t *testing.T, dir string) {
			mustMkdir(t, filepath.Join(dir, "src"))
		}, ErrNotStore},
		{"regular file", func(t *testing.T, dir string) {
			mustWrite(t, dir, "not a directory")
		}, ErrNotStore},
		{"db is a Pebble database of something else", func(t *testing.T, dir string) {
			db, err := pebble.Open(filepath.Join(dir, "db"), &pebble.Options{Logger: quietPebble})
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Set([]byte("hello"), []byte("world"), pebble.Sync); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		}, ErrNotStore},
		{"db holds garbage", func(t *testing.T, dir string) {
			mustMkdir(t, filepath.Join(dir, "db"))
			mustWrite(t, filepath.Join(dir, "db", "CURRENT"), "garbage\n")
		}, errAny},
		{"newer format", func(t *testing.T, dir string) {
			s := openStore(t, dir)
			plantKey(t, s, keyFormat, u64(FormatVersion+1))
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}, ErrNewerFormat},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			if tc.name == "missing parent dirs" {
				dir = filepath.Join(t.TempDir(), "a", "b", "store")
			}
			tc.prepare(t, dir)
			s, err := Open(dir, quietOptions())
			switch {
			case tc.want == nil && err != nil:
				t.Fatalf("Open: %v", err)
			case tc.want == errAny && err == nil, tc.want != nil && tc.want != errAny && !errors.Is(err, tc.want):
				if s != nil {
					s.Close()
				}
				t.Fatalf("Open: got %v, want %v", err, tc.want)
			}
			if err != nil {
				// A refused Open must release the lock: a second try gives
				// the same answer, not ErrLocked.
				if _, err2 := Open(dir, quietOptions()); errors.Is(err2, ErrLocked) || err2 == nil {
					t.Fatalf("second Open after %v: %v", err, err2)
				}
				return
			}
			defer s.Close()
			a := getattr(t, s, RootIno)
			if !a.IsDir() || a.Ino != RootIno || a.Nlink != 2 {
				t.Fatalf("root attributes %+v", a)
			}
			if p, err := s.Parent(RootIno); err != nil || p != RootIno {
				t.Fatalf("Parent(root) = %d, %v", p, err)
			}
			if s.Dir() != dir {
				t.Fatalf("Dir() = %q, want %q", s.Dir(), dir)
			}
			b, err := os.ReadFile(filepath.Join(dir, "lock"))
			if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
				t.Fatalf("lock file holds %q (%v), want our pid %d", b, err, os.Getpid())
			}
			checkInvariants(t, s, checkOpts{})
			if err := CheckDir(dir); err != nil {
				t.Fatalf("CheckDir of an open store: %v", err)
			}
		})
	}
}

var quietPebble = pebbleLogger{quietOptions().Logger}

// errAny stands for "some error" in TestOpen.
var errAny = errors.New("any error")

func mustMkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// flock locks are held per open file description, so a second Open in the
// same process must fail too, and succeed once the first store is closed.
func TestOpenLocked(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	s := openStore(t, dir)
	s2, err := Open(dir, quietOptions())
	if !errors.Is(err, ErrLocked) {
		if s2 != nil {
			s2.Close()
		}
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), strconv.Itoa(os.Getpid())) {
		t.Errorf("ErrLocked message %q does not name the holder's pid %d", err, os.Getpid())
	}
	// The refused Open must not have disturbed the first one.
	mkfile(t, s, RootIno, "after-refused-open")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	s3 := openStore(t, dir)
	if _, err := s3.Lookup(RootIno, "after-refused-open"); err != nil {
		t.Fatalf("Lookup after reopen: %v", err)
	}
}

// Dir is absolute whatever Open was given: the mount is named after it, and
// a daemon finds its own dead mounts by that name.
func TestOpenRelativeDir(t *testing.T) {
	base := t.TempDir()
	t.Chdir(base)
	s := openStore(t, "store")
	if want := filepath.Join(base, "store"); s.Dir() != want {
		t.Fatalf("Dir() = %q, want %q", s.Dir(), want)
	}
}

// A store whose creation was interrupted (the process died while Pebble was
// creating db/, before CURRENT or before the first batch) never received a
// file: Open should create the store rather than refuse it forever.
func TestOpenInterruptedCreation(t *testing.T) {
	t.Run("empty db dir", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "store")
		mustMkdir(t, filepath.Join(dir, "db"))
		mustWrite(t, filepath.Join(dir, "lock"), "")
		s, err := Open(dir, quietOptions())
		if err != nil {
			t.Fatalf("Open of a store whose creation stopped before db/CURRENT: %v", err)
		}
		s.Close()
	})
	t.Run("database without meta keys", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "store")
		db, err := pebble.Open(filepath.Join(dir, "db"), &pebble.Options{FormatMajorVersion: pebble.FormatNewest, Logger: quietPebble})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		s, err := Open(dir, quietOptions())
		if err != nil {
			t.Fatalf("Open of a store whose creation stopped before its first batch: %v", err)
		}
		s.Close()
	})
}

func TestCheckDir(t *testing.T) {
	tmp := t.TempDir()
	if err := CheckDir(filepath.Join(tmp, "missing")); err != nil {
		t.Errorf("CheckDir(missing): %v", err)
	}
	mustWrite(t, filepath.Join(tmp, "full", "x"), "x")
	if err := CheckDir(filepath.Join(tmp, "full")); !errors.Is(err, ErrNotStore) {
		t.Errorf("CheckDir(non-empty): %v, want ErrNotStore", err)
	}
}

// Everything a store holds survives Close and Open.
func TestReopenKeepsEverything(t *testing.T) {
	s := newStore(t)
	d := mkdir(t, s, RootIno, "d")
	sub := mkdir(t, s, d.Ino, "sub")
	f := mkfile(t, s, sub.Ino, "f")
	big := pattern(3, 3*ChunkSize+123)
	write(t, s, f.Ino, 0, big)
	write(t, s, f.Ino, 10*ChunkSize+5, []byte("far"))
	must[Attr](t, "link")(s.Link(f.Ino, RootIno, "f2"))
	must[Attr](t, "symlink")(s.Create(d.Ino, "ln", NewInode{Mode: S_IFLNK | 0o777, Target: "sub/f"}))
	must[Attr](t, "fifo")(s.Create(d.Ino, "fifo", NewInode{Mode: S_IFIFO | 0o600}))
	must[Attr](t, "chr")(s.Create(d.Ino, "null", NewInode{Mode: S_IFCHR | 0o666, Rdev: 1<<8 | 3}))
	if err := s.SetXattr(f.Ino, "user.k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	must[Attr](t, "setattr")(s.SetAttr(f.Ino, SetAttrRequest{Valid: SetMode | SetUid | SetGid | SetMtime | SetAtime,
		Mode: 0o4751, Uid: 1000, Gid: 100, Mtime: 1234567890123456789, Atime: 42}))
	gone := mkfile(t, s, RootIno, "gone")
	if err := s.Unlink(RootIno, "gone"); err != nil {
		t.Fatal(err)
	}
	before := storeView(t, s, RootIno, true)
	attrBefore := getattr(t, s, f.Ino)
	statBefore := must[StatFs](t, "statfs")(s.StatFs())

	s = reopen(t, s)
	after := storeView(t, s, RootIno, true)
	if d := before.diff(after); d != "" {
		t.Fatalf("tree changed across reopen:\n%s", d)
	}
	if a := getattr(t, s, f.Ino); a != attrBefore {
		t.Fatalf("attributes changed across reopen:\n%+v\n%+v", attrBefore, a)
	}
	if v, err := s.GetXattr(f.Ino, "user.k"); err != nil || string(v) != "v" {
		t.Fatalf("xattr after reopen: %q, %v", v, err)
	}
	if a, err := s.Lookup(d.Ino, "null"); err != nil || a.Rdev != 1<<8|3 || a.Mode != S_IFCHR|0o666 {
		t.Fatalf("device after reopen: %+v, %v", a, err)
	}
	statAfter := must[StatFs](t, "statfs")(s.StatFs())
	if statAfter.Ffree != statBefore.Ffree {
		t.Fatalf("free inodes %d before, %d after reopen", statBefore.Ffree, statAfter.Ffree)
	}
	// Inode numbers are never reused, not even across a reopen.
	n := mkfile(t, s, RootIno, "new")
	if n.Ino <= gone.Ino {
		t.Fatalf("new inode %d after reopen reuses a number (last was %d)", n.Ino, gone.Ino)
	}
	checkInvariants(t, s, checkOpts{})
	if got := readAll(t, s, f.Ino); !bytes.Equal(got[:len(big)], big) {
		t.Fatal("file contents changed across reopen")
	}
}

// Check finds each kind of damage (the other tests use it, through
// checkInvariants, on healthy stores).
func TestCheckFindsDamage(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, s *Store, f, d, l uint64)
		want   string // in one of the problems
	}{
		{"entry for a missing inode", func(t *testing.T, s *Store, f, d, l uint64) {
			plantKey(t, s, direntKey(RootIno, "ghost"), encodeDirent(999, S_IFREG))
		}, "-> 999"},
		{"entry of the wrong type", func(t *testing.T, s *Store, f, d, l uint64) {
			plantKey(t, s, direntKey(RootIno, "f"), encodeDirent(f, S_IFDIR))
		}, "type"},
		{"file nlink too high", func(t *testing.T, s *Store, f, d, l uint64) { setNlink(t, s, f, 2) }, "nlink 2 but 1 names"},
		{"directory nlink wrong", func(t *testing.T, s *Store, f, d, l uint64) { setNlink(t, s, d, 5) }, "nlink 5"},
		{"leaked inode", func(t *testing.T, s *Store, f, d, l uint64) {
			a := Attr{Ino: 50, Mode: S_IFREG | 0o644}
			plantKey(t, s, attrKey(50), a.encode())
		}, "leaked"},
		{"data past the size", func(t *testing.T, s *Store, f, d, l uint64) {
			plantKey(t, s, chunkKey(f, 5), []byte("x"))
		}, "past its size"},
		{"back reference without entry", func(t *testing.T, s *Store, f, d, l uint64) {
			plantKey(t, s, backrefKey(f, RootIno, "other"), nil)
		}, "has no entry"},
		{"entry without back reference", func(t *testing.T, s *Store, f, d, l uint64) {
			deleteKey(t, s, backrefKey(f, RootIno, "f"))
		}, "no back reference"},
		{"keys without attributes", func(t *testing.T, s *Store, f, d, l uint64) {
			plantKey(t, s, xattrKey(40, "user.x"), []byte("v"))
		}, "no attributes"},
		{"symlink without target", func(t *testing.T, s *Store, f, d, l uint64) { deleteKey(t, s, linkKey(l)) }, "no target"},
		{"inode count", func(t *testing.T, s *Store, f, d, l uint64) { plantKey(t, s, keyInodes, u64(7)) }, "inode count"},
		{"next inode", func(t *testing.T, s *Store, f, d, l uint64) { plantKey(t, s, keyNextIno, u64(2)) }, "next inode"},
		{"usage count", func(t *testing.T, s *Store, f, d, l uint64) { plantKey(t, s, keyUsage, u64(7)) }, "usage count"},
		{"undecodable attributes", func(t *testing.T, s *Store, f, d, l uint64) { plantKey(t, s, attrKey(f), []byte{1, 2}) }, "corrupt"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			buildTree(t, s, `f:data d/ d/sub/ l->f`)
			if p, err := s.Check(0); err != nil || len(p) != 0 {
				t.Fatalf("Check of a healthy store: %q, %v", p, err)
			}
			tc.damage(t, s, resolve(t, s, "f"), resolve(t, s, "d"), resolve(t, s, "l"))
			problems, err := s.Check(0)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, p := range problems {
				found = found || strings.Contains(p, tc.want)
			}
			if !found {
				t.Fatalf("Check found %q, want a problem mentioning %q", problems, tc.want)
			}
			if p, _ := s.Check(1); len(p) != 1 {
				t.Fatalf("Check(1) returned %d problems", len(p))
			}
		})
	}
}

func deleteKey(t *testing.T, s *Store, key []byte) {
	t.Helper()
	b := s.db.NewBatch()
	defer b.Close()
	b.Delete(key, nil)
	if err := s.commit(b); err != nil {
		t.Fatal(err)
	}
}

func TestMetrics(t *testing.T) {
	s := newStore(t)
	mkfile(t, s, RootIno, "f")
	if m := s.Metrics(); !strings.Contains(m, "WAL") && len(m) < 100 {
		t.Fatalf("Metrics() = %q", m)
	}
}

// TestSmallStoreIsSmall: a store holding a few small files takes a few
// MiB of disk, not the memtable's size ahead in its write-ahead log (hosts
// keep many mostly idle workspaces), besides its ballast and its spare log and
// manifest (space.go), which are of the documented sizes.
func TestSmallStoreIsSmall(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		a, err := s.Create(RootIno, "f"+strconv.Itoa(i), NewInode{Mode: S_IFREG | 0o644})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Write(a.Ino, 0, bytes.Repeat([]byte{'x'}, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	used := func() (n int64) {
		err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			blocks := fi.Sys().(*syscall.Stat_t).Blocks * 512
			switch filepath.Base(p) {
			case ballastName:
				if size := int64(2*64<<20 + 32<<20); blocks < size || blocks > size+1<<20 { // and the file system's own blocks
					t.Errorf("the ballast holds %d bytes", blocks)
				}
			case spareLogName:
				if blocks < walReserve || blocks > walReserve+1<<20 {
					t.Errorf("the spare log holds %d bytes", blocks)
				}
			case spareManifestName:
				if blocks < manifestReserve || blocks > manifestReserve+1<<20 {
					t.Errorf("the spare manifest holds %d bytes", blocks)
				}
			default:
				n += blocks
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := used(); n > 8<<20 {
		t.Errorf("an open store of 10 small files uses %d bytes of disk", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := used(); n > 8<<20 {
		t.Errorf("a closed store of 10 small files uses %d bytes of disk", n)
	}
}

// TestNoSyncStoreDropsItsLogs: a NoSync store (an import's staging store)
// leaves no log behind but an empty one, and no log of it is allocated
// ahead; the store opens again with everything, takes new writes, and
// keeps them across another reopen.
func TestNoSyncStoreDropsItsLogs(t *testing.T) {
	dir := t.TempDir()
	opts := quietOptions()
	opts.NoSync, opts.NoJournal, opts.MemTableSize = true, true, 4<<20
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("0123456789abcdef"), 64<<10/16)
	var inos []uint64
	for i := range 200 { // 12.5 MiB: three memtables
		a, err := s.Create(RootIno, "f"+strconv.Itoa(i), NewInode{Mode: S_IFREG | 0o644, Data: data})
		if err != nil {
			t.Fatal(err)
		}
		inos = append(inos, a.Ino)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "db", "*.log"))
	for _, l := range logs {
		var st syscall.Stat_t
		if err := syscall.Stat(l, &st); err != nil || st.Size != 0 || st.Blocks != 0 {
			t.Errorf("log %s: %v, %d bytes, %d blocks", l, err, st.Size, st.Blocks)
		}
	}
	if len(logs) != 1 {
		t.Errorf("logs after Close: %v", logs)
	}
	for round := range 2 {
		s = openStore(t, dir)
		for _, ino := range inos {
			buf := make([]byte, len(data)+1)
			if n, _, err := s.Read(ino, 0, buf); err != nil || !bytes.Equal(buf[:n], data) {
				t.Fatalf("round %d: file %d: %v, %d bytes", round, ino, err, n)
			}
		}
		a, err := s.Create(RootIno, "after"+strconv.Itoa(round), NewInode{Mode: S_IFREG | 0o644, Data: data})
		if err != nil {
			t.Fatal(err)
		}
		inos = append(inos, a.Ino)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
