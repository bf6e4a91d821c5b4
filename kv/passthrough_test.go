package kv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// kernelFile opens a pinned blob the way the kernel's passthrough does: a
// file of its own on the blob's path, not the store's descriptor.
func kernelFile(t *testing.T, s *Store, ino uint64) *os.File {
	t.Helper()
	f, err := os.OpenFile(s.blobs.path(ino), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// bigFile makes a blob of n bytes named name.
func bigFile(t *testing.T, s *Store, name string, n int) (Attr, []byte) {
	t.Helper()
	f := mkfile(t, s, RootIno, name)
	data := pattern(3, n)
	write(t, s, f.Ino, 0, data)
	a := getattr(t, s, f.Ino)
	if a.Flags&FlagBlob == 0 {
		t.Fatalf("a %d-byte file is not a blob", n)
	}
	return a, data
}

func lastRecord(t *testing.T, s *Store) (last Record) {
	t.Helper()
	if err := s.ReadJournal(0, func(r Record) bool { last = r; return true }); err != nil {
		t.Fatal(err)
	}
	return last
}

// What the kernel writes into a pinned blob shows in the attributes and in
// reads at once, and is recorded (size, times, a write record) when the
// last pin goes, which also clears FlagWriting.
func TestPinMergesKernelWrites(t *testing.T) {
	s := newBlobStore(t, t.TempDir()+"/store")
	a, data := bigFile(t, s, "f", 200<<10)
	if _, ok, err := s.PinBlob(a.Ino, false); err != nil || !ok {
		t.Fatalf("PinBlob(read): ok %v, err %v", ok, err)
	}
	if _, ok, err := s.PinBlob(a.Ino, true); err != nil || !ok {
		t.Fatalf("PinBlob(write): ok %v, err %v", ok, err)
	}
	if st, _ := s.storedAttr(a.Ino); st.Flags&FlagWriting == 0 {
		t.Fatal("a blob pinned for writing does not carry FlagWriting")
	}
	time.Sleep(10 * time.Millisecond)
	extra := pattern(4, 30<<10)
	if _, err := kernelFile(t, s, a.Ino).WriteAt(extra, 190<<10); err != nil {
		t.Fatal(err)
	}
	want := append(append([]byte(nil), data[:190<<10]...), extra...)
	got := getattr(t, s, a.Ino)
	if got.Size != uint64(len(want)) || got.Mtime <= a.Mtime || got.Ctime < got.Mtime {
		t.Fatalf("attributes while pinned: size %d (want %d), mtime %d (was %d), ctime %d", got.Size, len(want), got.Mtime, a.Mtime, got.Ctime)
	}
	if b := readAll(t, s, a.Ino); !bytes.Equal(b, want) {
		t.Fatalf("read while pinned: first difference at %d", firstDiff(b, want))
	}
	if st, _ := s.storedAttr(a.Ino); st.Size != a.Size {
		t.Fatalf("the store recorded size %d before the pins went", st.Size)
	}

	if err := s.UnpinBlob(a.Ino, false); err != nil {
		t.Fatal(err)
	}
	if err := s.UnpinBlob(a.Ino, true); err != nil {
		t.Fatal(err)
	}
	st, err := s.storedAttr(a.Ino)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size != uint64(len(want)) || st.Mtime != got.Mtime || st.Flags&FlagWriting != 0 {
		t.Fatalf("recorded after unpinning: %+v, want size %d, mtime %d, no FlagWriting", st, len(want), got.Mtime)
	}
	// (A write record joins the previous one of the same file and actor.)
	if r := lastRecord(t, s); r.Op != JWrite || r.Ino != a.Ino || r.Size != st.Size {
		t.Fatalf("journal after unpinning: last record %+v, want a write of inode %d, size %d", r, a.Ino, st.Size)
	}
	if s.pins.get(a.Ino) != nil {
		t.Fatal("the pin is still there")
	}
	checkInvariants(t, s, checkOpts{})
}

// A store that stopped (a crash) while a blob was pinned for writing takes
// the blob's size when it opens, instead of cutting what the kernel wrote
// past the recorded size; a blob not pinned for writing is cut as before.
func TestPinnedBlobAfterCrash(t *testing.T) {
	dir := t.TempDir()
	s := newBlobStore(t, dir+"/store")
	w, data := bigFile(t, s, "written", 200<<10)
	r, _ := bigFile(t, s, "read", 200<<10)
	for _, p := range []struct {
		ino   uint64
		write bool
	}{{w.Ino, true}, {r.Ino, false}} {
		if _, ok, err := s.PinBlob(p.ino, p.write); err != nil || !ok {
			t.Fatalf("PinBlob: ok %v, err %v", ok, err)
		}
	}
	extra := pattern(5, 50<<10)
	if _, err := kernelFile(t, s, w.Ino).WriteAt(extra, 200<<10); err != nil {
		t.Fatal(err)
	}
	// Bytes past the size of a blob nobody writes directly: a write whose
	// batch was lost.
	if _, err := kernelFile(t, s, r.Ino).WriteAt([]byte("lost"), 200<<10); err != nil {
		t.Fatal(err)
	}
	// The store's directory as a SIGKILL would leave it: everything is with
	// the system (PinBlob handed FlagWriting to it).
	if out, err := exec.Command("cp", "-a", dir+"/store", dir+"/crashed").CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	os.Remove(dir + "/crashed/LOCK")
	c := newBlobStore(t, dir+"/crashed")
	want := append(append([]byte(nil), data...), extra...)
	if got := readAll(t, c, w.Ino); !bytes.Equal(got, want) {
		t.Fatalf("the blob written directly, after the crash: %d bytes, first difference at %d", len(got), firstDiff(got, want))
	}
	a := getattr(t, c, w.Ino)
	if a.Flags&FlagWriting != 0 {
		t.Fatal("FlagWriting survived the recovery")
	}
	if got := getattr(t, c, r.Ino).Size; got != 200<<10 {
		t.Fatalf("the blob pinned only for reading has size %d after the crash, want %d", got, 200<<10)
	}
	if fi, err := os.Stat(c.blobs.path(r.Ino)); err != nil || fi.Size() != 200<<10 {
		t.Fatalf("its blob was not cut back: %v, %v", fi.Size(), err)
	}
	if rec := lastRecord(t, c); rec.Op != JWrite || rec.Ino != w.Ino || rec.Size != a.Size {
		t.Fatalf("the recovery's journal record: %+v", rec)
	}
	checkInvariants(t, c, checkOpts{})
}

// While pinned, a blob stays a blob: SetContent writes it in place (the
// kernel's open files see the new content), refresh refuses it. Truncating
// a blob pinned for writing cuts it at once.
func TestPinnedBlobStays(t *testing.T) {
	s := newBlobStore(t, t.TempDir()+"/store")
	a, _ := bigFile(t, s, "f", 200<<10)
	if _, ok, err := s.PinBlob(a.Ino, true); err != nil || !ok {
		t.Fatalf("PinBlob: ok %v, err %v", ok, err)
	}
	k := kernelFile(t, s, a.Ino)
	content := []byte("small now\n")
	if _, err := s.SetContent(a.Ino, content); err != nil {
		t.Fatal(err)
	}
	if got := getattr(t, s, a.Ino); got.Flags&FlagBlob == 0 || got.Size != uint64(len(content)) {
		t.Fatalf("after SetContent: %+v", got)
	}
	buf := make([]byte, 100)
	n, _ := k.ReadAt(buf, 0)
	if !bytes.Equal(buf[:n], content) {
		t.Fatalf("the kernel's file reads %q, want %q", buf[:n], content)
	}
	if _, err := s.ReplaceRemote(a.Ino, 10, 0, Origin{Key: "f"}); err != ErrBusy {
		t.Fatalf("ReplaceRemote of a pinned blob: %v, want ErrBusy", err)
	}
	if _, err := k.WriteAt(pattern(6, 300<<10), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetAttr(a.Ino, SetAttrRequest{Valid: SetSize, Size: 1000}); err != nil {
		t.Fatal(err)
	}
	if fi, err := k.Stat(); err != nil || fi.Size() != 1000 {
		t.Fatalf("the blob after a truncate to 1000: size %d, %v", fi.Size(), err)
	}
	if got := getattr(t, s, a.Ino).Size; got != 1000 {
		t.Fatalf("size after the truncate: %d", got)
	}
	// Growing extends the blob too: the kernel reads to the blob's end.
	if _, err := s.SetAttr(a.Ino, SetAttrRequest{Valid: SetSize, Size: 5000}); err != nil {
		t.Fatal(err)
	}
	if fi, err := k.Stat(); err != nil || fi.Size() != 5000 {
		t.Fatalf("the blob after a truncate to 5000: size %d, %v", fi.Size(), err)
	}
	if err := s.UnpinBlob(a.Ino, true); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, s, checkOpts{})
	// Unpinned, SetContent turns it back into chunks.
	if _, err := s.SetContent(a.Ino, content); err != nil {
		t.Fatal(err)
	}
	if got := getattr(t, s, a.Ino); got.Flags&FlagBlob != 0 {
		t.Fatalf("unpinned, SetContent kept the blob: %+v", got)
	}
}

// A read the host records in the blob's access time becomes the file's,
// under the relatime rule; the store's own changes of the times are not
// replaced by the blob's.
func TestPinnedAtime(t *testing.T) {
	s := newBlobStore(t, t.TempDir()+"/store")
	a, _ := bigFile(t, s, "f", 200<<10)
	old := time.Now().Add(-48 * time.Hour).UnixNano()
	if _, err := s.SetAttr(a.Ino, SetAttrRequest{Valid: SetAtime | SetMtime, Atime: old, Mtime: old - 1e9}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.PinBlob(a.Ino, false); err != nil || !ok {
		t.Fatalf("PinBlob: ok %v, err %v", ok, err)
	}
	if got := getattr(t, s, a.Ino); got.Atime != old || got.Mtime != old-1e9 {
		t.Fatalf("pinning changed the times: atime %d mtime %d, want %d %d", got.Atime, got.Mtime, old, old-1e9)
	}
	k, err := os.Open(s.blobs.path(a.Ino))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if _, err := k.Read(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(s.blobs.path(a.Ino), &st); err != nil {
		t.Fatal(err)
	}
	if st.Atim.Nano() == old {
		t.Skip("the host file system does not record access times (noatime)")
	}
	got := getattr(t, s, a.Ino)
	if got.Atime <= old || got.Mtime != old-1e9 {
		t.Fatalf("after a read: atime %d (was %d), mtime %d (want %d)", got.Atime, old, got.Mtime, old-1e9)
	}
	if err := s.UnpinBlob(a.Ino, false); err != nil {
		t.Fatal(err)
	}
	if st, _ := s.storedAttr(a.Ino); st.Atime != got.Atime {
		t.Fatalf("recorded atime %d, want %d", st.Atime, got.Atime)
	}
}

// MakeBlob makes an empty file a blob before its first byte; pinned and
// written directly, it stays a blob if it grew past the threshold and is
// back in chunks, content and all, after its last unpin if not.
func TestMakeBlob(t *testing.T) {
	s := newBlobStore(t, t.TempDir()+"/store")
	for _, n := range []int{10, 300 << 10} {
		f := mkfile(t, s, RootIno, fmt.Sprintf("f%d", n))
		if ok, err := s.MakeBlob(f.Ino); err != nil || !ok {
			t.Fatalf("MakeBlob: %v, %v", ok, err)
		}
		if ok, err := s.MakeBlob(f.Ino); err != nil || ok {
			t.Fatalf("MakeBlob of a blob: %v, %v; want false", ok, err)
		}
		if _, ok, err := s.PinBlob(f.Ino, true); err != nil || !ok {
			t.Fatalf("PinBlob: %v, %v", ok, err)
		}
		data := pattern(7, n)
		if _, err := kernelFile(t, s, f.Ino).WriteAt(data, 0); err != nil {
			t.Fatal(err)
		}
		if err := s.UnpinBlob(f.Ino, true); err != nil {
			t.Fatal(err)
		}
		a := getattr(t, s, f.Ino)
		if big := n > 100<<10; (a.Flags&FlagBlob != 0) != big || blobExists(t, s, f.Ino) != big {
			t.Fatalf("%d bytes: blob flag %v, blob file %v; want %v", n, a.Flags&FlagBlob != 0, blobExists(t, s, f.Ino), big)
		}
		if got := readAll(t, s, f.Ino); !bytes.Equal(got, data) {
			t.Fatalf("%d bytes: content differs at %d", n, firstDiff(got, data))
		}
	}
	f := mkfile(t, s, RootIno, "written")
	write(t, s, f.Ino, 0, []byte("x"))
	if ok, err := s.MakeBlob(f.Ino); err != nil || ok {
		t.Fatalf("MakeBlob of a file with data: %v, %v; want false", ok, err)
	}
	checkInvariants(t, s, checkOpts{})
}
