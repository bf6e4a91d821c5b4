package kv

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// encodeOps is the inverse of decodeOps for seeds written by hand:
// kind, dir1, name1, dir2, name2, param.
func encodeOps(ops ...[6]byte) []byte {
	var b []byte
	for _, o := range ops {
		b = append(b, o[0], o[1]+o[2]*16, o[3]+o[4]*16, o[5])
	}
	return b
}

// Indexes into opDirs and opNames, for readable seeds.
const (
	dRoot, dA, dB, dAC, dBD, dACE, dC, dD = 0, 3, 5, 7, 9, 10, 11, 12
	nA, nB, nC, nD, nE, nF                = 0, 1, 2, 3, 4, 5
)

func fuzzSeeds() [][]byte {
	seeds := [][]byte{
		// mkdir a, a/c, a/c/e; files; rename a into its own subtree.
		encodeOps(
			[6]byte{opMkdir, dRoot, nA}, [6]byte{opMkdir, dA, nC}, [6]byte{opMkdir, dAC, nE},
			[6]byte{opCreate, dAC, nF}, [6]byte{opWrite, dAC, nF, 0, 0, 3 + 8*7},
			[6]byte{opRename, dRoot, nA, dACE, nA, 0},
			[6]byte{opRename, dRoot, nA, dAC, nE, 3},
			[6]byte{opRmdir, dRoot, nA}, [6]byte{opUnlink, dRoot, nA},
		),
		// hard links, renames over them, exchange.
		encodeOps(
			[6]byte{opCreate, dRoot, nF}, [6]byte{opLink, dRoot, nF, dRoot, nE},
			[6]byte{opMkdir, dRoot, nB}, [6]byte{opLink, dRoot, nE, dB, nD},
			[6]byte{opRename, dRoot, nF, dRoot, nE, 0}, [6]byte{opRename, dRoot, nF, dB, nD, 2},
			[6]byte{opRename, dB, nD, dRoot, nB, 3}, [6]byte{opUnlink, dRoot, nB},
			[6]byte{opLink, dRoot, nB, dRoot, nA},
		),
		// data: writes across chunks, truncate, punch, zero, extend.
		encodeOps(
			[6]byte{opCreate, dRoot, nA}, [6]byte{opWrite, dRoot, nA, 0, 0, 3 + 8*7},
			[6]byte{opTruncate, dRoot, nA, 0, 0, 4 + 8*2}, [6]byte{opWrite, dRoot, nA, 0, 0, 6 + 8*5},
			[6]byte{opPunch, dRoot, nA, 0, 0, 2 + 8*6}, [6]byte{opZero, dRoot, nA, 0, 0, 7 + 8*7},
			[6]byte{opExtend, dRoot, nA, 0, 0, 7 + 8*7}, [6]byte{opTruncate, dRoot, nA, 0, 0, 1},
			[6]byte{opWrite, dRoot, nA, 0, 0, 5 + 8*4},
		),
		// appends of every length, between changes that leave the file's
		// last chunk shorter, longer or gone; into a link and a renamed file.
		encodeOps(
			[6]byte{opCreate, dRoot, nA}, [6]byte{opAppend, dRoot, nA, 0, 0, 8 * 3},
			[6]byte{opAppend, dRoot, nA, 0, 0, 8 * 0}, [6]byte{opAppend, dRoot, nA, 0, 0, 8 * 2},
			[6]byte{opAppend, dRoot, nA, 0, 0, 8 * 3}, [6]byte{opTruncate, dRoot, nA, 0, 0, 2 + 8*3},
			[6]byte{opAppend, dRoot, nA, 0, 0, 8 * 1}, [6]byte{opTruncate, dRoot, nA, 0, 0, 5 + 8*3},
			[6]byte{opAppend, dRoot, nA, 0, 0, 8 * 3}, [6]byte{opPunch, dRoot, nA, 0, 0, 2 + 8*3},
			[6]byte{opAppend, dRoot, nA, 0, 0, 8 * 4}, [6]byte{opZero, dRoot, nA, 0, 0, 6 + 8*1},
			[6]byte{opAppend, dRoot, nA, 0, 0, 8 * 6}, [6]byte{opExtend, dRoot, nA, 0, 0, 7 + 8*7},
			[6]byte{opAppend, dRoot, nA, 0, 0, 8 * 2}, [6]byte{opLink, dRoot, nA, dRoot, nB},
			[6]byte{opAppend, dRoot, nB, 0, 0, 8 * 3}, [6]byte{opWrite, dRoot, nA, 0, 0, 2 + 8*2},
			[6]byte{opAppend, dRoot, nA, 0, 0, 8 * 3}, [6]byte{opRename, dRoot, nB, dRoot, nC, 0},
			[6]byte{opAppend, dRoot, nC, 0, 0, 8 * 7}, [6]byte{opUnlink, dRoot, nA},
			[6]byte{opAppend, dRoot, nC, 0, 0, 8 * 0}, [6]byte{opAppend, dRoot, nC, 0, 0, 8 * 5},
		),
		// directories: rmdir non-empty, rename dir over file and file over dir.
		encodeOps(
			[6]byte{opMkdir, dRoot, nA}, [6]byte{opMkdir, dRoot, nB}, [6]byte{opCreate, dA, nC},
			[6]byte{opRmdir, dRoot, nA}, [6]byte{opCreate, dRoot, nC}, [6]byte{opRename, dRoot, nA, dRoot, nC, 0},
			[6]byte{opRename, dRoot, nC, dRoot, nB, 0}, [6]byte{opRename, dRoot, nA, dRoot, nB, 0},
			[6]byte{opRename, dRoot, nB, dRoot, nC, 3}, [6]byte{opSymlink, dRoot, nD, 0, 0, 9},
			[6]byte{opRename, dRoot, nD, dB, nD, 0}, [6]byte{opWrite, dRoot, nB, 0, 0, 1},
		),
	}
	// A few random ones.
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 4; i++ {
		b := make([]byte, 4*40)
		r.Read(b)
		seeds = append(seeds, b)
	}
	return seeds
}

// FuzzOps applies a sequence of namespace and data operations to the store
// and to an in-memory model, and checks that they give the same errors and
// show the same tree after every operation.
func FuzzOps(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	// One store for all the inputs a fuzzing process runs (opening one
	// costs more than a short input): each input works in a directory of
	// its own, removed afterwards.
	// No background flushes either: their code would show up as new
	// coverage at random and make the fuzzer chase noise.
	opts := quietOptions()
	opts.FlushInterval, opts.SyncInterval = time.Hour, time.Hour
	opts.BlobThreshold = 2 * ChunkSize // files move to blobs halfway
	s, err := Open(f.TempDir()+"/store", opts)
	if err != nil {
		f.Fatal(err)
	}
	s.checkTails = true
	f.Cleanup(func() { s.Close() })
	runs := 0
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 4*64 {
			data = data[:4*64]
		}
		runs++
		name := fmt.Sprint("run", runs)
		base := mkdir(t, s, RootIno, name).Ino
		runOps(t, s, base, decodeOps(data))
		removeAll(t, s, base)
		must0(t, s.Rmdir(RootIno, name))
	})
}

// TestStressModelOps runs longer random sequences than the fuzz seeds, so
// that a plain go test covers deep trees and many collisions. With
// FSTEST_LONG=1 (make stress) it runs many more, from a random seed.
func TestStressModelOps(t *testing.T) {
	rounds, n, seed := 9, 400, int64(42)
	if testing.Short() {
		rounds = 3
	}
	if longTests() {
		rounds, seed = 1000, time.Now().UnixNano()
	}
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewSource(seed))
	tmp := t.TempDir()
	for i := 0; i < rounds; i++ {
		b := make([]byte, 4*n)
		r.Read(b)
		// Each store takes tens of MB of preallocated log: remove it at once.
		dir := filepath.Join(tmp, fmt.Sprint(i))
		// A third of the rounds keep every file's data in chunks (no file
		// here reaches the default threshold), a third make every file
		// written a blob, a third move files to blobs halfway.
		opts := quietOptions()
		opts.BlobThreshold = []int64{-1, 1, 2 * ChunkSize}[i%3]
		s, err := Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		s.checkTails = true
		ran, ok := runOps(t, s, RootIno, decodeOps(b))
		if i < 6 {
			t.Logf("%d operations: %d ran, %d succeeded", n, ran, ok)
		}
		s.Close()
		os.RemoveAll(dir)
	}
}

// longTests tells whether the long versions of the randomized tests run.
func longTests() bool { return os.Getenv("FSTEST_LONG") != "" }

// FuzzName checks name validation through Create and Lookup: a name with a
// slash or a NUL, ".", "..", "" or one longer than 255 bytes is refused
// with the right error and never stored; any other name is stored exactly
// and found again.
func FuzzName(f *testing.F) {
	for _, s := range []string{"a", ".", "..", "", "a/b", "/", "a\x00", "...", ".a", " ", "\xff\xfe",
		strings.Repeat("x", 255), strings.Repeat("x", 256), strings.Repeat("é", 128), "\n"} {
		f.Add(s)
	}
	s := newStore(f)
	f.Fuzz(func(t *testing.T, name string) {
		var want syscall.Errno
		switch {
		case name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00"):
			want = syscall.EINVAL
		case len(name) > 255:
			want = syscall.ENAMETOOLONG
		}
		d, err := s.Create(RootIno, "d", NewInode{Mode: S_IFDIR | 0o755})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := s.Rmdir(RootIno, "d"); err != nil {
				t.Fatal(err)
			}
		}()
		a, err := s.Create(d.Ino, name, NewInode{Mode: S_IFREG | 0o644})
		wantErrno(t, "Create", err, want)
		_, err = s.Create(d.Ino, name, NewInode{Mode: S_IFDIR | 0o755})
		if want == 0 {
			want2 := syscall.EEXIST
			wantErrno(t, "Create again", err, want2)
		} else {
			wantErrno(t, "Mkdir", err, want)
		}
		_, err = s.Create(d.Ino, name, NewInode{Mode: S_IFLNK | 0o777, Target: name})
		if want == 0 {
			wantErrno(t, "Symlink", err, syscall.EEXIST)
		} else {
			wantErrno(t, "Symlink", err, want)
		}
		got := names(t, s, d.Ino)
		l, lerr := s.Lookup(d.Ino, name)
		if want != 0 {
			if len(got) != 0 {
				t.Fatalf("invalid name %q stored as %q", name, got)
			}
			if lerr == nil {
				t.Fatalf("Lookup of the invalid name %q found %+v", name, l)
			}
			return
		}
		if len(got) != 1 || got[0] != name {
			t.Fatalf("stored names %q, want %q", got, name)
		}
		if lerr != nil || l.Ino != a.Ino {
			t.Fatalf("Lookup(%q) = %+v, %v", name, l, lerr)
		}
		// Rename and Link validate the new name the same way.
		other := name + "x"
		if len(other) > 255 {
			other = name[:len(name)-1]
		}
		if other != "." && other != ".." && other != "" && other != name {
			if err := s.Rename(d.Ino, name, d.Ino, other, 0); err != nil {
				t.Fatalf("Rename(%q, %q): %v", name, other, err)
			}
			if _, err := s.Link(a.Ino, d.Ino, name); err != nil {
				t.Fatalf("Link(%q): %v", name, err)
			}
			if err := s.Unlink(d.Ino, other); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Unlink(d.Ino, name); err != nil {
			t.Fatalf("Unlink(%q): %v", name, err)
		}
	})
}
