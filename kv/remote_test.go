package kv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// remoteSource serves remote files' contents by origin key, counting
// fetches; fail makes the next fetches fail.
type remoteSource struct {
	mu      sync.Mutex
	objects map[string][]byte
	fetches atomic.Int64
	fail    atomic.Int64 // fetches still to fail
	gate    chan struct{}
}

func (r *remoteSource) fetch(ctx context.Context, ino uint64, o Origin, size uint64) (io.ReadCloser, error) {
	r.fetches.Add(1)
	if r.gate != nil {
		<-r.gate
	}
	if r.fail.Add(-1) >= 0 {
		return nil, errors.New("injected failure")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	data, ok := r.objects[o.Key]
	if !ok {
		return nil, fmt.Errorf("no object %q", o.Key)
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

func newRemote(t *testing.T, s *Store, objects map[string][]byte) *remoteSource {
	r := &remoteSource{objects: objects}
	s.SetFetcher(r.fetch)
	return r
}

func mkremote(t testing.TB, s *Store, dir uint64, name, key string, size uint64) Attr {
	t.Helper()
	a, err := s.Create(dir, name, NewInode{Mode: S_IFREG | 0o644, Remote: true, Size: size,
		Mtime: 1e18, Origin: &Origin{Source: 3, Key: key, ID: "etag-" + key}})
	if err != nil {
		t.Fatalf("create remote %s: %v", name, err)
	}
	return a
}

func TestRemoteFileFetchedOnFirstRead(t *testing.T) {
	s := newStore(t)
	data := pattern(7, 3*ChunkSize+123)
	big := pattern(9, fetchBatch*2+5)
	r := newRemote(t, s, map[string][]byte{"a": data, "big": big, "empty": {}})
	a := mkremote(t, s, RootIno, "a", "a", uint64(len(data)))
	b := mkremote(t, s, RootIno, "big", "big", uint64(len(big)))
	e := mkremote(t, s, RootIno, "empty", "empty", 0)

	got := getattr(t, s, a.Ino)
	if got.Size != uint64(len(data)) || got.Mtime != 1e18 || got.Flags&FlagRemote == 0 || got.Blocks != 0 {
		t.Fatalf("remote attr before fetch: %+v", got)
	}
	if n := r.fetches.Load(); n != 0 {
		t.Fatalf("%d fetches before any read", n)
	}
	if buf := readAt(t, s, a.Ino, ChunkSize+1, 10); !bytes.Equal(buf, data[ChunkSize+1:ChunkSize+11]) {
		t.Fatalf("read of remote file: %x", buf)
	}
	if !bytes.Equal(readAll(t, s, a.Ino), data) || !bytes.Equal(readAll(t, s, b.Ino), big) {
		t.Fatal("remote files read back wrong")
	}
	if len(readAll(t, s, e.Ino)) != 0 {
		t.Fatal("empty remote file has data")
	}
	if n := r.fetches.Load(); n != 2 {
		t.Fatalf("%d fetches for two non-empty files read several times, want 2", n)
	}
	got = getattr(t, s, a.Ino)
	if got.Flags&FlagRemote != 0 || got.Blocks != blocksFor(ChunkSize)*3+blocksFor(123) || got.Mtime != 1e18 {
		t.Fatalf("attr after fetch: %+v", got)
	}
	o, err := s.Origin(a.Ino)
	if err != nil || o.Key != "a" || o.Source != 3 || o.ID != "etag-a" || !o.Unchanged(&got) {
		t.Fatalf("origin after fetch: %+v, %v (attr %+v)", o, err, got)
	}
	write(t, s, a.Ino, 0, []byte("x"))
	got = getattr(t, s, a.Ino)
	if o.Unchanged(&got) {
		t.Fatal("origin says unchanged after a write")
	}
	s = reopen(t, s)
	if !bytes.Equal(readAll(t, s, b.Ino), big) {
		t.Fatal("fetched data lost on reopen")
	}
	checkInvariants(t, s, checkOpts{})
}

func TestRemoteFetchSharedAndRetried(t *testing.T) {
	s := newStore(t)
	data := pattern(1, 5*ChunkSize)
	r := newRemote(t, s, map[string][]byte{"k": data})
	r.gate = make(chan struct{})
	a := mkremote(t, s, RootIno, "f", "k", uint64(len(data)))

	// Readers that arrive while a fetch runs wait for it and share it.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, len(data))
			n, _, err := s.Read(a.Ino, 0, buf)
			if err == nil && !bytes.Equal(buf[:n], data) {
				err = errors.New("wrong data")
			}
			errs <- err
		}()
	}
	time.Sleep(50 * time.Millisecond)
	close(r.gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := r.fetches.Load(); n != 1 {
		t.Fatalf("8 concurrent readers caused %d fetches, want 1", n)
	}

	// A failed fetch fails the read with EIO, and the next read tries again.
	b := mkremote(t, s, RootIno, "g", "k", uint64(len(data)))
	r.gate = nil
	r.fail.Store(1)
	_, _, err := s.Read(b.Ino, 0, make([]byte, 10))
	wantErrno(t, "read while the source fails", err, syscall.EIO)
	if !bytes.Equal(readAll(t, s, b.Ino), data) {
		t.Fatal("read after a failed fetch is wrong")
	}
}

func TestRemoteSizeMismatch(t *testing.T) {
	s := newStore(t)
	newRemote(t, s, map[string][]byte{"short": pattern(1, 100), "long": pattern(2, ChunkSize+1)})
	short := mkremote(t, s, RootIno, "short", "short", 200)
	long := mkremote(t, s, RootIno, "long", "long", ChunkSize)
	for _, ino := range []uint64{short.Ino, long.Ino} {
		_, _, err := s.Read(ino, 0, make([]byte, 10))
		wantErrno(t, "read of a file whose source changed size", err, syscall.EIO)
		if a := getattr(t, s, ino); a.Flags&FlagRemote == 0 {
			t.Fatalf("inode %d marked local after a failed fetch", ino)
		}
	}
	checkInvariants(t, s, checkOpts{})
}

func TestRemoteWriteTruncateFallocate(t *testing.T) {
	s := newStore(t)
	data := pattern(3, 2*ChunkSize+10)
	r := newRemote(t, s, map[string][]byte{"k": data})

	// Truncating to zero needs no content.
	a := mkremote(t, s, RootIno, "trunc0", "k", uint64(len(data)))
	must[Attr](t, "truncate")(s.SetAttr(a.Ino, SetAttrRequest{Valid: SetSize, Size: 0}))
	if r.fetches.Load() != 0 || len(readAll(t, s, a.Ino)) != 0 {
		t.Fatal("truncate to zero fetched or kept data")
	}

	// A write in the middle keeps the rest of the content.
	b := mkremote(t, s, RootIno, "write", "k", uint64(len(data)))
	write(t, s, b.Ino, ChunkSize, []byte("hello"))
	want := append([]byte(nil), data...)
	copy(want[ChunkSize:], "hello")
	if !bytes.Equal(readAll(t, s, b.Ino), want) {
		t.Fatal("write into a remote file lost its content")
	}

	// Truncating to a smaller size keeps the head.
	c := mkremote(t, s, RootIno, "shrink", "k", uint64(len(data)))
	must[Attr](t, "truncate")(s.SetAttr(c.Ino, SetAttrRequest{Valid: SetSize, Size: 10}))
	if !bytes.Equal(readAll(t, s, c.Ino), data[:10]) {
		t.Fatal("truncate of a remote file")
	}

	d := mkremote(t, s, RootIno, "falloc", "k", uint64(len(data)))
	must[Attr](t, "punch")(s.Fallocate(d.Ino, FallocPunchHole|FallocKeepSize, 0, ChunkSize))
	want = append(make([]byte, ChunkSize), data[ChunkSize:]...)
	if !bytes.Equal(readAll(t, s, d.Ino), want) {
		t.Fatal("punch hole in a remote file")
	}
	// Unlinking a remote file needs nothing fetched.
	e := mkremote(t, s, RootIno, "gone", "k", uint64(len(data)))
	before := r.fetches.Load()
	if err := s.Unlink(RootIno, "gone"); err != nil {
		t.Fatal(err)
	}
	if r.fetches.Load() != before {
		t.Fatal("unlink fetched")
	}
	if _, err := s.GetAttr(e.Ino); err != ErrNotFound {
		t.Fatalf("unlinked remote inode: %v", err)
	}
	checkInvariants(t, s, checkOpts{})
}

func TestRemoteWithoutFetcher(t *testing.T) {
	s := newStore(t)
	a := mkremote(t, s, RootIno, "f", "k", 10)
	_, _, err := s.Read(a.Ino, 0, make([]byte, 10))
	wantErrno(t, "read without a fetcher", err, syscall.EIO)
	if st, _, err := s.Read(a.Ino, 10, make([]byte, 1)); err != nil || st != 0 {
		t.Fatalf("read at the end of a remote file: %d, %v", st, err)
	}
	_, err = s.Create(RootIno, "bad", NewInode{Mode: S_IFREG, Remote: true, Size: 1})
	wantErrno(t, "remote file without an origin", err, syscall.EINVAL)
}

func TestOriginEncoding(t *testing.T) {
	for _, o := range []Origin{{}, {Source: 1<<32 - 1, Key: "a/b/c", ID: "0123456789abcdef0123", Ctime: -5},
		{Source: 7, Key: string(make([]byte, 1000)), Ctime: 1 << 62}} {
		got, err := decodeOrigin(o.encode())
		if err != nil || got != o {
			t.Fatalf("origin %+v round trip: %+v, %v", o, got, err)
		}
	}
	for _, b := range [][]byte{nil, {2}, {1}, {1, 0, 5, 'a'}, append((&Origin{Key: "k"}).encode(), 0)} {
		if _, err := decodeOrigin(b); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("decodeOrigin(%x) = %v, want corrupt", b, err)
		}
	}
}

func TestAttrVersion1Decodes(t *testing.T) {
	a := Attr{Ino: 5, Mode: S_IFREG | 0o600, Nlink: 1, Size: 9, Mtime: 3, Flags: FlagRemote}
	v1 := a.encode()[:attrLenV1]
	v1[0] = 1
	got, err := decodeAttr(v1)
	a.Flags = 0
	if err != nil || got != a {
		t.Fatalf("version 1 attr: %+v, %v", got, err)
	}
}

func TestMeta(t *testing.T) {
	s := newStore(t)
	if _, err := s.GetMeta("spec"); err != ErrNotFound {
		t.Fatalf("missing meta: %v", err)
	}
	if err := s.SetMeta("spec", []byte("v")); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s)
	if v, err := s.GetMeta("spec"); err != nil || string(v) != "v" {
		t.Fatalf("meta after reopen: %q, %v", v, err)
	}
	checkInvariants(t, s, checkOpts{})
}

func TestReplaceRemoteAndMetaScan(t *testing.T) {
	s := newStore(t)
	r := newRemote(t, s, map[string][]byte{"k": pattern(1, 3*ChunkSize), "k2": []byte("new")})
	a := mkremote(t, s, RootIno, "f", "k", 3*ChunkSize)
	readAll(t, s, a.Ino)
	got, err := s.ReplaceRemote(a.Ino, 3, 5e17, Origin{Source: 3, Key: "k2", ID: "v2"})
	if err != nil || got.Flags&FlagRemote == 0 || got.Size != 3 || got.Mtime != 5e17 || got.Blocks != 0 {
		t.Fatalf("ReplaceRemote: %+v %v", got, err)
	}
	if d := readAll(t, s, a.Ino); string(d) != "new" {
		t.Fatalf("content after ReplaceRemote: %q", d)
	}
	if o, _ := s.Origin(a.Ino); o.ID != "v2" || o.Key != "k2" {
		t.Fatalf("origin after ReplaceRemote: %+v", o)
	}
	if r.fetches.Load() != 2 {
		t.Fatalf("%d fetches", r.fetches.Load())
	}
	checkInvariants(t, s, checkOpts{})

	if err := s.UpdateMeta(map[string][]byte{"src/1/a": []byte("1"), "src/1/b": []byte("2"), "src/2/a": []byte("3")}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateMeta(nil, []string{"src/1/b"}); err != nil {
		t.Fatal(err)
	}
	var seen []string
	if err := s.ScanMeta("src/1/", func(k string, v []byte) bool { seen = append(seen, k+"="+string(v)); return true }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(seen) != "[src/1/a=1]" {
		t.Fatalf("ScanMeta: %v", seen)
	}
}

// TestRemoteReadSetsAtime: the read that fetches a remote file updates its
// access time (relatime) in the batch that makes it local, so the caller
// sees no need for another update; a fetch for a write does not touch it.
func TestRemoteReadSetsAtime(t *testing.T) {
	s := newStore(t)
	small, big := pattern(4, 3000), pattern(5, fetchBatch+10)
	newRemote(t, s, map[string][]byte{"small": small, "big": big})
	for _, c := range []struct {
		name string
		data []byte
	}{{"small", small}, {"big", big}} {
		a := mkremote(t, s, RootIno, c.name, c.name, uint64(len(c.data)))
		if !NeedsAtime(&a) {
			t.Fatalf("%s: a new remote file needs no atime update: %+v", c.name, a)
		}
		buf := make([]byte, 100)
		n, got, err := s.Read(a.Ino, 7, buf)
		if err != nil || n != 100 || !bytes.Equal(buf, c.data[7:107]) {
			t.Fatalf("%s: read at 7: %d, %v, %x", c.name, n, err, buf[:n])
		}
		if NeedsAtime(&got) || got.Flags&FlagRemote != 0 {
			t.Fatalf("%s: attributes after the fetching read: %+v", c.name, got)
		}
		if stored := getattr(t, s, a.Ino); c.name == "small" && stored != got {
			t.Fatalf("%s: read returned %+v, the store holds %+v", c.name, got, stored)
		}
		if stored := getattr(t, s, a.Ino); NeedsAtime(&stored) {
			t.Fatalf("%s: stored atime not updated: %+v", c.name, stored)
		}
	}
	w := mkremote(t, s, RootIno, "w", "small", uint64(len(small)))
	write(t, s, w.Ino, 0, []byte("x"))
	if got := getattr(t, s, w.Ino); got.Atime != w.Atime {
		t.Fatalf("a write's fetch changed atime: %d, was %d", got.Atime, w.Atime)
	}
}
