package kv

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
)

// newBlobStore opens a store whose files become blobs past 100 KiB.
func newBlobStore(t *testing.T, dir string) *Store {
	t.Helper()
	opts := quietOptions()
	opts.BlobThreshold = 100 << 10
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func blobExists(t *testing.T, s *Store, ino uint64) bool {
	t.Helper()
	_, err := os.Stat(s.blobs.path(ino))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return err == nil
}

// A file that grows past the threshold moves to a blob, keeps its content
// (the part written to chunks before too), survives a reopen, and its blob
// goes when the file does.
func TestBlobLifecycle(t *testing.T) {
	dir := t.TempDir() + "/store"
	s := newBlobStore(t, dir)
	f := mkfile(t, s, RootIno, "f")
	small := pattern(1, 60<<10)
	write(t, s, f.Ino, 0, small)
	if a := getattr(t, s, f.Ino); a.Flags&FlagBlob != 0 || blobExists(t, s, f.Ino) {
		t.Fatalf("a 60 KiB file is a blob: %+v", a)
	}
	big := pattern(2, 200<<10)
	write(t, s, f.Ino, 50<<10, big) // crosses the threshold
	want := append(append([]byte(nil), small[:50<<10]...), big...)
	a := getattr(t, s, f.Ino)
	if a.Flags&FlagBlob == 0 || !blobExists(t, s, f.Ino) {
		t.Fatalf("a 250 KiB file is not a blob: %+v", a)
	}
	if got := readAll(t, s, f.Ino); !bytes.Equal(got, want) {
		t.Fatalf("content after the move: first difference at %d", firstDiff(got, want))
	}
	checkInvariants(t, s, checkOpts{})

	s.Close()
	s = newBlobStore(t, dir)
	if got := readAll(t, s, f.Ino); !bytes.Equal(got, want) {
		t.Fatalf("content after reopening: first difference at %d", firstDiff(got, want))
	}

	// A whole-file write turns it back into chunks, in one batch.
	if _, err := s.SetContent(f.Ino, []byte("short")); err != nil {
		t.Fatal(err)
	}
	if a := getattr(t, s, f.Ino); a.Flags&FlagBlob != 0 || blobExists(t, s, f.Ino) {
		t.Fatalf("after SetContent: %+v, blob there: %v", a, blobExists(t, s, f.Ino))
	}
	if got := readAll(t, s, f.Ino); string(got) != "short" {
		t.Fatalf("after SetContent: %q", got)
	}

	write(t, s, f.Ino, 0, big)
	if !blobExists(t, s, f.Ino) {
		t.Fatal("no blob after writing 200 KiB again")
	}
	must0(t, s.Unlink(RootIno, "f"))
	if blobExists(t, s, f.Ino) {
		t.Fatal("the blob of an unlinked file is still there")
	}
	checkInvariants(t, s, checkOpts{})
}

// An unlinked blob file that is still open keeps its blob until Forget.
func TestBlobOrphan(t *testing.T) {
	s := newBlobStore(t, t.TempDir()+"/store")
	open := map[uint64]bool{}
	s.SetInUse(func(ino uint64, isDir bool) bool { return open[ino] })
	f := mkfile(t, s, RootIno, "f")
	data := pattern(3, 300<<10)
	write(t, s, f.Ino, 0, data)
	open[f.Ino] = true
	must0(t, s.Unlink(RootIno, "f"))
	if got := readAll(t, s, f.Ino); !bytes.Equal(got, data) {
		t.Fatal("an open unlinked blob file reads other data")
	}
	open[f.Ino] = false
	must0(t, s.Forget(f.Ino))
	if blobExists(t, s, f.Ino) {
		t.Fatal("the blob is still there after Forget")
	}
	checkInvariants(t, s, checkOpts{})
}

// Blobs that no inode claims (a crash between writing a blob and the batch
// that records it) are removed when the store opens; fsck reports a blob
// inode whose blob is missing.
func TestBlobLeftovers(t *testing.T) {
	dir := t.TempDir() + "/store"
	s := newBlobStore(t, dir)
	f := mkfile(t, s, RootIno, "f")
	g := mkfile(t, s, RootIno, "g")
	write(t, s, g.Ino, 0, pattern(4, 200<<10))
	s.Close()
	stray := []string{"ffff", "1" + strings.Repeat("0", 3), "not-an-inode"}
	for _, name := range append(stray, "2") { // "2": the chunked file f
		if err := os.WriteFile(dir+"/blobs/"+name, []byte("junk"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s = newBlobStore(t, dir)
	entries, err := os.ReadDir(dir + "/blobs")
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "3" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("blobs after reopening: %v, want only g's (3)", names)
	}
	if got := readAll(t, s, f.Ino); len(got) != 0 {
		t.Fatalf("the chunked file reads %q", got)
	}
	if err := os.Remove(dir + "/blobs/3"); err != nil {
		t.Fatal(err)
	}
	problems, err := s.Check(10)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 1 || !strings.Contains(problems[0], "blob file is missing") {
		t.Fatalf("fsck with g's blob gone: %q", problems)
	}
}

// A blob file's holes are the blob file's: SEEK_DATA and SEEK_HOLE find
// them, and a size grown past the blob's end reads zeros and is a hole.
func TestBlobHoles(t *testing.T) {
	s := newBlobStore(t, t.TempDir()+"/store")
	f := mkfile(t, s, RootIno, "f")
	data := pattern(5, 8<<10)
	write(t, s, f.Ino, 1<<20, data)
	if n, err := s.SeekData(f.Ino, 0, SeekData); err != nil || n != 1<<20 {
		t.Fatalf("SeekData(0) = %d, %v", n, err)
	}
	if n, err := s.SeekData(f.Ino, 0, SeekHole); err != nil || n != 0 {
		t.Fatalf("SeekHole(0) = %d, %v", n, err)
	}
	if _, err := s.SetAttr(f.Ino, SetAttrRequest{Valid: SetSize, Size: 4 << 20}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.SeekData(f.Ino, 1<<20, SeekHole); err != nil || n != 1<<20+8<<10 {
		t.Fatalf("SeekHole(1 MiB) = %d, %v", n, err)
	}
	if _, err := s.SeekData(f.Ino, 2<<20, SeekData); Errno(err) != 6 {
		t.Fatalf("SeekData past the data: %v, want ENXIO", err)
	}
	if got := readAt(t, s, f.Ino, 3<<20, 100); !bytes.Equal(got, make([]byte, 100)) {
		t.Fatal("the grown size does not read zeros")
	}
	if a := getattr(t, s, f.Ino); a.Blocks > 64 {
		t.Fatalf("a 4 MiB file holding 8 KiB has %d blocks", a.Blocks)
	}
	// Punching the data out leaves zeros and no blocks.
	if _, err := s.Fallocate(f.Ino, FallocPunchHole|FallocKeepSize, 1<<20, 8<<10); err != nil {
		t.Fatal(err)
	}
	if got := readAt(t, s, f.Ino, 1<<20, 8<<10); !bytes.Equal(got, make([]byte, 8<<10)) {
		t.Fatal("a punched range does not read zeros")
	}
	checkInvariants(t, s, checkOpts{})
}

// Bytes a blob holds past the recorded size (a write whose batch never
// committed before a crash) never show: growing the size over them reads
// zeros.
func TestBlobPastSizeIsCut(t *testing.T) {
	s := newBlobStore(t, t.TempDir()+"/store")
	f := mkfile(t, s, RootIno, "f")
	write(t, s, f.Ino, 0, pattern(6, 200<<10))
	// What a crash leaves: data in the blob past the size. Each way of
	// growing the size must cut it off first.
	for _, grow := range []func(size int64){
		func(size int64) { s.SetAttr(f.Ino, SetAttrRequest{Valid: SetSize, Size: uint64(size) + 20<<10}) },
		func(size int64) { s.Fallocate(f.Ino, 0, 0, size+20<<10) },
		func(size int64) { write(t, s, f.Ino, size+20<<10, []byte("x")) },
	} {
		size := int64(getattr(t, s, f.Ino).Size)
		bf, err := os.OpenFile(s.blobs.path(f.Ino), os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := bf.WriteAt(pattern(7, 10<<10), size); err != nil {
			t.Fatal(err)
		}
		bf.Close()
		grow(size)
		if a := getattr(t, s, f.Ino); int64(a.Size) < size+20<<10 {
			t.Fatalf("the size did not grow: %d", a.Size)
		}
		if got := readAt(t, s, f.Ino, size, 10<<10); !bytes.Equal(got, make([]byte, 10<<10)) {
			t.Fatal("bytes past the old size show after the size grew")
		}
	}
	checkInvariants(t, s, checkOpts{})
}

// CopyRange copies like copy_file_range: between blobs on the blob files,
// otherwise in pieces; a source's sparse tail arrives as zeros; a copy
// stops at the source's end; overlapping ranges of one file are refused.
func TestCopyRange(t *testing.T) {
	s := newBlobStore(t, t.TempDir()+"/store")
	src := mkfile(t, s, RootIno, "src")
	data := pattern(8, 300<<10)
	write(t, s, src.Ino, 0, data)
	if _, err := s.SetAttr(src.Ino, SetAttrRequest{Valid: SetSize, Size: 400 << 10}); err != nil {
		t.Fatal(err)
	}
	want := append(append([]byte(nil), data...), make([]byte, 100<<10)...)
	small := mkfile(t, s, RootIno, "small")
	write(t, s, small.Ino, 0, pattern(9, 10))
	for _, tc := range []struct {
		name   string
		dst    uint64
		dstOff int64
		srcOff int64
		n      int64
	}{
		{"into a new blob", mkfile(t, s, RootIno, "a").Ino, 0, 0, 1 << 30},
		{"into a blob, past its end", mkfile(t, s, RootIno, "b").Ino, 50 << 10, 0, 400 << 10},
		{"a small piece into chunks", small.Ino, 5, 1000, 20},
		{"the sparse tail", mkfile(t, s, RootIno, "c").Ino, 7, 350 << 10, 60 << 10},
	} {
		before := readAll(t, s, tc.dst)
		done, err := s.CopyRange(src.Ino, tc.srcOff, tc.dst, tc.dstOff, tc.n)
		wantN := min(tc.n, int64(len(want))-tc.srcOff)
		if err != nil || done != wantN {
			t.Fatalf("%s: copied %d, %v; want %d", tc.name, done, err, wantN)
		}
		expect := append([]byte(nil), before...)
		if end := int(tc.dstOff + done); len(expect) < end {
			expect = append(expect, make([]byte, end-len(expect))...)
		}
		copy(expect[tc.dstOff:], want[tc.srcOff:tc.srcOff+done])
		if got := readAll(t, s, tc.dst); !bytes.Equal(got, expect) {
			t.Fatalf("%s: first difference at %d (len %d, want %d)", tc.name, firstDiff(got, expect), len(got), len(expect))
		}
	}
	if a := getattr(t, s, small.Ino); a.Flags&FlagBlob != 0 {
		t.Fatal("a 25-byte copy target became a blob")
	}
	if n, err := s.CopyRange(src.Ino, 500<<10, small.Ino, 0, 10); n != 0 || err != nil {
		t.Fatalf("a copy from past the end: %d, %v", n, err)
	}
	if _, err := s.CopyRange(src.Ino, 0, src.Ino, 100, 1000); Errno(err) != 22 {
		t.Fatalf("an overlapping copy within one file: %v, want EINVAL", err)
	}
	if n, err := s.CopyRange(src.Ino, 0, src.Ino, 1<<20, 1000); n != 1000 || err != nil {
		t.Fatalf("a copy within one file: %d, %v", n, err)
	}
	checkInvariants(t, s, checkOpts{})
}

// More blobs than the store keeps open: the ones written since the last
// sync stay open for it, the rest are closed and reopened as needed.
func TestBlobsOverTheOpenBound(t *testing.T) {
	s := newBlobStore(t, t.TempDir()+"/store")
	n := maxOpenBlobs + 50
	var inos []uint64
	for i := range n {
		f := mkfile(t, s, RootIno, fmt.Sprint("f", i))
		write(t, s, f.Ino, 0, pattern(byte(i), 150<<10))
		inos = append(inos, f.Ino)
	}
	if got := len(s.blobs.open); got != n {
		t.Fatalf("%d blobs open before a sync, want all %d (written since the last sync)", got, n)
	}
	must0(t, s.Sync())
	for i, ino := range inos {
		if got := readAll(t, s, ino); !bytes.Equal(got, pattern(byte(i), 150<<10)) {
			t.Fatalf("file %d reads other data", i)
		}
	}
	if got := len(s.blobs.open); got > maxOpenBlobs {
		t.Fatalf("%d blobs open after a sync and reads, want at most %d", got, maxOpenBlobs)
	}
	checkInvariants(t, s, checkOpts{})
}
