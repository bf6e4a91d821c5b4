package kv

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
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
	// The guard looks again every spaceCheckEvery; a loaded machine may
	// take longer to get there.
	for deadline := time.Now().Add(30 * time.Second); ; {
		time.Sleep(2 * spaceCheckEvery)
		_, err := s.Create(RootIno, "d", NewInode{Mode: S_IFDIR | 0o755})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("mkdir after space was freed: %v", err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// A full file system: Open takes the space of its ballast for the
	// flush of its log and opens low on space, taking no new data.
	fill(t, ballast, 0)
	if _, err := os.Stat(filepath.Join(dir, ballastName)); err != nil {
		t.Fatalf("no ballast: %v", err)
	}
	s, err = Open(dir, opts)
	if err != nil {
		t.Fatalf("open on a full file system, with a ballast: %v", err)
	}
	if _, err := s.Create(RootIno, "e", NewInode{Mode: S_IFREG | 0o644}); !errors.Is(err, ErrNoSpace) {
		t.Errorf("create in a store opened on a full file system: %v, want ENOSPC", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Without the ballast, Open fails at once.
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

// TestFullDiskKillsNoStore: two stores share a small file system, which a
// writer of one store's blob (as the kernel writes it for passthrough) and
// a program outside both fill to the last byte. Neither store dies: both
// answer reads and stats, refuse new data with ENOSPC, remove files, sync,
// and write their memtables out (or fail to, without a panic); once the
// filler is gone they take data again, and everything they accepted is
// there after reopening.
func TestFullDiskKillsNoStore(t *testing.T) {
	fsDir := smallFS(t, 320<<20)
	opts := Options{MemTableSize: 4 << 20, BlobThreshold: 256 << 10} // reserve 72 MiB, ballast 40 MiB
	type store struct {
		dir  string
		s    *Store
		kept map[string][]byte
	}
	stores := make([]*store, 2)
	for i := range stores {
		st := &store{dir: filepath.Join(fsDir, "store"+strconv.Itoa(i)), kept: map[string][]byte{}}
		var err error
		if st.s, err = Open(st.dir, opts); err != nil {
			t.Fatal(err)
		}
		for j := 0; j < 20; j++ {
			name := "f" + strconv.Itoa(j)
			data := bytes.Repeat([]byte{byte('a' + j)}, 1000*(j+1))
			a, err := st.s.Create(RootIno, name, NewInode{Mode: S_IFREG | 0o644})
			if err == nil {
				_, err = st.s.Write(a.Ino, 0, data)
			}
			if err != nil {
				t.Fatal(err)
			}
			st.kept[name] = data
		}
		stores[i] = st
		defer func() { st.s.Close() }()
	}

	// The kernel's passthrough writer: store 0's blob, written directly
	// until the file system is full.
	s0 := stores[0].s
	a, err := s0.Create(RootIno, "big", NewInode{Mode: S_IFREG | 0o644})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s0.Write(a.Ino, 0, make([]byte, 512<<10)); err != nil { // a blob
		t.Fatal(err)
	}
	blob, ok, err := s0.PinBlob(a.Ino, true)
	if err != nil || !ok {
		t.Fatalf("pin: %v %v", ok, err)
	}
	buf := bytes.Repeat([]byte("z"), 1<<20)
	off := int64(512 << 10)
	for {
		n, err := blob.WriteAt(buf, off)
		off += int64(n)
		if err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	// And a program outside: to the last byte, once (dd stops at ENOSPC).
	filler := filepath.Join(fsDir, "filler")
	fill(t, filler, 0)
	if free, _ := freeSpace(fsDir); free != 0 {
		t.Fatalf("free after filling: %d bytes", free)
	}
	// Both stores answer: reads and stats work, new data gets ENOSPC, and
	// removals and metadata changes work (in the space of the ballast).
	kept := 19
	for round := 0; round < 5; round++ {
		for i, st := range stores {
			full(t, i, st.s, st.kept, round, true)
			victim := "f" + strconv.Itoa(kept)
			if err := st.s.Unlink(RootIno, victim); err != nil {
				t.Fatalf("store %d: unlink on a full disk: %v", i, err)
			}
			delete(st.kept, victim)
			if err := st.s.Sync(); err != nil {
				t.Fatalf("store %d: sync on a full disk: %v", i, err)
			}
		}
		kept--
	}
	// Someone fills what the ballasts gave, again and again: the stores
	// refuse every change while the file system is that full, and live.
	stop := make(chan struct{})
	fillerDone := make(chan struct{})
	go func() {
		defer close(fillerDone)
		f, err := os.OpenFile(filler, os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		small := make([]byte, 4096)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := f.Write(small); err != nil && !errors.Is(err, syscall.ENOSPC) {
				t.Error(err)
				return
			}
		}
	}()
	deadline := time.Now().Add(3 * time.Second)
	for round := 0; time.Now().Before(deadline); round++ {
		for i, st := range stores {
			full(t, i, st.s, st.kept, round, false)
			victim := "f" + strconv.Itoa(kept)
			if _, ok := st.kept[victim]; !ok {
				// gone
			} else if err := st.s.Unlink(RootIno, victim); err == nil {
				delete(st.kept, victim)
			} else if !errors.Is(err, ErrNoSpace) {
				t.Fatalf("store %d: unlink on a full disk: %v", i, err)
			}
			if err := st.s.WriteTables(); !errors.Is(err, ErrNoSpace) {
				t.Fatalf("store %d: writing the memtable out on a full disk: %v, want ENOSPC", i, err)
			}
			st.s.Sync()
		}
		kept = max(kept-1, 3)
	}
	close(stop)
	<-fillerDone
	if err := s0.UnpinBlob(a.Ino, true); err != nil {
		t.Logf("unpin on a full disk: %v", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := s0.Unlink(RootIno, "big"); err != nil {
		t.Fatal(err)
	}
	// Space is back: both take data again once their ballast is made.
	for i, st := range stores {
		var err error
		for start := time.Now(); time.Since(start) < 10*time.Second; time.Sleep(50 * time.Millisecond) {
			var a Attr
			if a, err = st.s.Create(RootIno, "after", NewInode{Mode: S_IFREG | 0o644}); err == nil {
				if _, err = st.s.Write(a.Ino, 0, []byte("after")); err != nil {
					t.Fatal(err)
				}
				st.kept["after"] = []byte("after")
				break
			}
		}
		if err != nil {
			t.Fatalf("store %d: create once space is back: %v", i, err)
		}
		if fi, err := os.Stat(filepath.Join(st.dir, ballastName)); err != nil || fi.Size() != 2*4<<20+32<<20 {
			t.Errorf("store %d: ballast once space is back: %v", i, err)
		}
		if err := st.s.Close(); err != nil {
			t.Fatalf("store %d: close: %v", i, err)
		}
		if st.s, err = Open(st.dir, opts); err != nil {
			t.Fatalf("store %d: reopen: %v", i, err)
		}
		for name, want := range st.kept {
			a, err := st.s.Lookup(RootIno, name)
			if err != nil {
				t.Fatalf("store %d: %s after reopening: %v", i, name, err)
			}
			got := make([]byte, a.Size)
			if n, _, err := st.s.Read(a.Ino, 0, got); err != nil || !bytes.Equal(got[:n], want) {
				t.Fatalf("store %d: %s after reopening: %v, %d bytes", i, name, err, n)
			}
		}
		checkInvariants(t, st.s, checkOpts{})
	}
}

// full checks that store i, on a full file system, answers stats and
// reads, refuses new data with ENOSPC, and (if metaWorks) takes a chmod.
func full(t *testing.T, i int, s *Store, kept map[string][]byte, round int, metaWorks bool) {
	t.Helper()
	if _, err := s.Create(RootIno, "new"+strconv.Itoa(round), NewInode{Mode: S_IFREG | 0o644}); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("store %d: create on a full disk: %v, want ENOSPC", i, err)
	}
	a, err := s.Lookup(RootIno, "f1")
	if err != nil {
		t.Fatalf("store %d: lookup: %v", i, err)
	}
	if _, err := s.Write(a.Ino, int64(a.Size), []byte("more")); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("store %d: write on a full disk: %v, want ENOSPC", i, err)
	}
	got := make([]byte, a.Size)
	if n, _, err := s.Read(a.Ino, 0, got); err != nil || !bytes.Equal(got[:n], kept["f1"]) {
		t.Fatalf("store %d: read on a full disk: %v", i, err)
	}
	_, err = s.SetAttr(a.Ino, SetAttrRequest{Valid: SetMode, Mode: 0o600 | uint32(round%2)*0o44})
	if metaWorks && err != nil || err != nil && !errors.Is(err, ErrNoSpace) {
		t.Fatalf("store %d: chmod on a full disk: %v", i, err)
	}
}

// TestFullDiskAfterFlush: the file system is filled to its last byte
// right after each flush has written its table and before the manifest
// records it (someone's writer racing the store, or the agent's through a
// passthrough file), with no ballast left to give. Pebble panics on a
// manifest it cannot write; the store's manifest is allocated ahead, so
// every flush goes through and the store keeps everything.
func TestFullDiskAfterFlush(t *testing.T) {
	fsDir := smallFS(t, 96<<20)
	dir := filepath.Join(fsDir, "store")
	filler := filepath.Join(fsDir, "filler")
	var armed atomic.Bool
	var fills atomic.Int64
	old := pebbleFS
	pebbleFS = func(fs vfs.FS) vfs.FS {
		return &tableHookFS{FS: fs, closed: func() {
			if armed.Load() {
				fill(t, filler, 0)
				fills.Add(1)
			}
		}}
	}
	defer func() { pebbleFS = old }()
	opts := Options{MemTableSize: 4 << 20, MinFree: 16 << 20, Ballast: -1}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	const rounds = 300
	for i := range rounds {
		// A compaction that wrote while the disk was full made the
		// store low on space: it takes data again once it has looked.
		var a Attr
		err := retryNoSpace(func() (err error) {
			a, err = s.Create(RootIno, "f"+strconv.Itoa(i), NewInode{Mode: S_IFREG | 0o644})
			return err
		})
		if err == nil {
			err = retryNoSpace(func() error {
				_, err := s.Write(a.Ino, 0, []byte(strconv.Itoa(i)))
				return err
			})
		}
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		armed.Store(true)
		if err := s.db.Flush(); err != nil {
			t.Fatalf("round %d: flush: %v", i, err)
		}
		armed.Store(false)
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
	}
	if n := fills.Load(); n < rounds {
		t.Fatalf("the disk was filled after %d tables, not %d", n, rounds)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	pebbleFS = old
	if s, err = Open(dir, opts); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range rounds {
		a, err := s.Lookup(RootIno, "f"+strconv.Itoa(i))
		if err != nil {
			t.Fatalf("f%d after a reopen: %v", i, err)
		}
		buf := make([]byte, 16)
		n, _, err := s.Read(a.Ino, 0, buf)
		if err != nil || string(buf[:n]) != strconv.Itoa(i) {
			t.Fatalf("f%d after a reopen: %q %v", i, buf[:n], err)
		}
	}
}

// retryNoSpace calls f until it does not fail with ErrNoSpace (for
// 10 s at most).
func retryNoSpace(f func() error) error {
	err := f()
	for try := 0; errors.Is(err, ErrNoSpace) && try < 1000; try++ {
		time.Sleep(10 * time.Millisecond)
		err = f()
	}
	return err
}

// tableHookFS calls closed each time a table file Pebble wrote is closed.
type tableHookFS struct {
	vfs.FS
	closed func()
}

func (fs *tableHookFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	if err != nil || !strings.HasSuffix(name, ".sst") {
		return f, err
	}
	return &tableHookFile{File: f, closed: fs.closed}, nil
}

type tableHookFile struct {
	vfs.File
	closed func()
}

func (f *tableHookFile) Close() error {
	err := f.File.Close()
	if err == nil {
		f.closed()
	}
	return err
}
