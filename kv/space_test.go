package kv

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// smallFS mounts a tmpfs of size bytes for one test.
func smallFS(t *testing.T, size int64) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.FormatInt(size, 10)); err != nil {
		t.Fatalf("mount a tmpfs (the test needs root): %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// fill writes a file at path until the file system has at most leave
// bytes free (0: until it is full).
func fill(t *testing.T, path string, leave uint64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		free, err := freeSpace(filepath.Dir(path))
		if err != nil {
			t.Fatal(err)
		}
		if free <= leave {
			return
		}
		n := min(uint64(len(buf)), free-leave)
		if _, err := f.Write(buf[:n]); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			t.Fatal(err)
		}
	}
}

// TestNoSpace: near a full disk the store refuses new data and names with
// ENOSPC while it still has room for its own flushes, lets files be
// removed, takes writes again once space is freed, and keeps everything
// it accepted. A store on a full file system fails to open with ENOSPC
// instead of waiting for ever.
func TestNoSpace(t *testing.T) {
	fsDir := smallFS(t, 160<<20)
	dir := filepath.Join(fsDir, "store")
	opts := Options{MemTableSize: 4 << 20} // a reserve of 72 MiB
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	ballast := filepath.Join(fsDir, "ballast")
	fill(t, ballast, 100<<20)

	data := bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB
	var kept []uint64
	var werr error
	for i := 0; i < 2000 && werr == nil; i++ {
		var a Attr
		a, werr = s.Create(RootIno, "f"+strconv.Itoa(i), NewInode{Mode: S_IFREG | 0o644})
		if werr == nil {
			if _, werr = s.Write(a.Ino, 0, data); werr == nil {
				kept = append(kept, a.Ino)
			}
		}
	}
	if !errors.Is(werr, ErrNoSpace) || Errno(werr) != syscall.ENOSPC {
		t.Fatalf("after %d files: %v, want ENOSPC", len(kept), werr)
	}
	if free, _ := freeSpace(fsDir); free < 32<<20 {
		t.Errorf("the store stopped with only %d MiB free", free>>20)
	}
	t.Logf("ENOSPC after %d files of 64 KiB: %v", len(kept), werr)
	if _, err := s.Create(RootIno, "d", NewInode{Mode: S_IFDIR | 0o755}); !errors.Is(err, ErrNoSpace) {
		t.Errorf("mkdir below the reserve: %v", err)
	}
	// Removing works below the reserve.
	if err := s.Unlink(RootIno, "f0"); err != nil {
		t.Fatalf("unlink below the reserve: %v", err)
	}
	kept = kept[1:]
	// Space freed: writes work again (the guard looks again within 100 ms).
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * spaceCheckEvery)
	if _, err := s.Create(RootIno, "d", NewInode{Mode: S_IFDIR | 0o755}); err != nil {
		t.Fatalf("mkdir after space was freed: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// A full file system: Open fails at once, and works when space is back.
	fill(t, ballast, 0)
	done := make(chan error, 1)
	go func() {
		s, err := Open(dir, opts)
		if err == nil {
			s.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNoSpace) {
			t.Fatalf("open on a full file system: %v, want ENOSPC", err)
		}
		t.Logf("open on a full file system: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("open on a full file system still waits after 30 s")
	}
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	buf := make([]byte, len(data))
	for _, ino := range kept {
		if n, _, err := s.Read(ino, 0, buf); err != nil || !bytes.Equal(buf[:n], data) {
			t.Fatalf("inode %d after reopening: %v, %d bytes", ino, err, n)
		}
	}
	if _, err := s.Lookup(RootIno, "d"); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, s, checkOpts{})
}
