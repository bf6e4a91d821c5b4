package hibernate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/computerfs/computerfs/internal/faultnet"
	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/wsfs"
)

func upload(t testing.TB, e *env, dir, id, base string) (Stats, string) {
	t.Helper()
	st, etag, err := Upload(context.Background(), e.c, e.loc, dir, UploadOptions{StoreID: id, BaseETag: base, Host: "test"})
	if err != nil {
		t.Fatalf("upload: %v", err)
	}
	return st, etag
}

// TestRoundTrip: an image downloaded is the store it was made of, file
// by file, and opens as a store with the same files.
func TestRoundTrip(t *testing.T) {
	e := newEnv(t)
	src := makeStore(t, 10)
	if blobs, _ := os.ReadDir(filepath.Join(src, "blobs")); len(blobs) == 0 {
		t.Fatal("the store has no blobs: the test would not cover them")
	}
	want := digest(t, src)
	st, etag := upload(t, e, src, "store-1", "")
	if st.Moved < 10<<20 || st.MovedObjects != st.Objects || etag == "" {
		t.Fatalf("first upload: %+v, etag %q", st, etag)
	}
	dst := filepath.Join(t.TempDir(), "resumed")
	m, etag2, dst2, err := Download(context.Background(), e.c, e.loc, dst, DownloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if etag2 != etag || m.StoreID != "store-1" || dst2.Moved != st.Bytes-holes(m) {
		t.Fatalf("download: etag %q (want %q), store %q, %+v (upload %+v)", etag2, etag, m.StoreID, dst2, st)
	}
	sameDigest(t, want, digest(t, dst))
	// The sparse blob's hole is a hole again.
	sparse := false
	blobs, _ := os.ReadDir(filepath.Join(dst, "blobs"))
	for _, b := range blobs {
		var sys syscall.Stat_t
		if syscall.Stat(filepath.Join(dst, "blobs", b.Name()), &sys) == nil && sys.Size == 13<<20 {
			sparse = sys.Blocks*512 < 4<<20
			t.Logf("sparse blob: %d bytes, %d allocated", sys.Size, sys.Blocks*512)
		}
	}
	if !sparse {
		t.Fatal("the sparse blob was not downloaded as a sparse file")
	}
	s, err := kv.Open(dst, kv.Options{Ballast: -1, MinFree: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w := wsfs.New(s, wsfs.Owner{})
	if b, err := w.ReadFile("small/7.txt"); err != nil || string(b) != "file 7\n" {
		t.Fatalf("small/7.txt: %q, %v", b, err)
	}
	if b, err := w.ReadFile("big/6.bin"); err != nil || len(b) != 4<<20 {
		t.Fatalf("big/8.bin: %d bytes, %v", len(b), err)
	}
}

// holes returns the bytes of the zero chunks of m, which a download does
// not fetch.
func holes(m *Manifest) int64 {
	var n int64
	for _, f := range m.Files {
		for _, c := range f.Chunks {
			if c == zeroChunk {
				n += ChunkSize
			}
		}
	}
	return n
}

// TestIncremental: a second upload after a change of 1 MiB sends about
// that, not the store.
func TestIncremental(t *testing.T) {
	e := newEnv(t)
	src := makeStore(t, 40)
	first, etag := upload(t, e, src, "s", "")
	s, err := kv.Open(src, kv.Options{Ballast: -1, MinFree: -1})
	if err != nil {
		t.Fatal(err)
	}
	w := wsfs.New(s, wsfs.Owner{})
	writeBig(t, w, "new.bin", 1<<20, rand.New(rand.NewPCG(9, 9)))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	second, etag2 := upload(t, e, src, "s", etag)
	t.Logf("first: %d of %d bytes in %d objects; second: %d bytes in %d objects, manifest %d", first.Moved, first.Bytes, first.MovedObjects, second.Moved, second.MovedObjects, second.Manifest)
	if second.Moved < 1<<20 || second.Moved > 1<<20+3*ChunkSize {
		t.Fatalf("second upload moved %d bytes for a change of 1 MiB", second.Moved)
	}
	// The chunks the new image no longer names are gone; the others are there.
	m, _, err := ReadManifest(context.Background(), e.c, e.loc)
	if err != nil {
		t.Fatal(err)
	}
	named := make(map[string]bool)
	for _, f := range m.Files {
		for _, h := range f.Chunks {
			named[h] = true
		}
	}
	have, err := listObjects(context.Background(), e.c, e.loc)
	if err != nil {
		t.Fatal(err)
	}
	if second.Deleted == 0 || second.DeleteErr != nil || len(have) != len(named) {
		t.Fatalf("after the second upload: %d deleted (%v), %d objects, %d named", second.Deleted, second.DeleteErr, len(have), len(named))
	}
	for h := range named {
		if _, ok := have[h]; !ok {
			t.Fatalf("chunk %s of the manifest is missing", h)
		}
	}
	// Nothing changed: nothing to send but the manifest, nothing to read.
	third, _ := upload(t, e, src, "s", etag2)
	t.Logf("read: first %d, second %d, third %d bytes", first.Read, second.Read, third.Read)
	if third.Moved != 0 || third.Read != 0 || second.Read >= first.Read/2 {
		t.Fatalf("third upload moved %d and read %d bytes; the second read %d", third.Moved, third.Read, second.Read)
	}
	// What was not read again is right.
	dst := filepath.Join(t.TempDir(), "resumed")
	if _, _, _, err := Download(context.Background(), e.c, e.loc, dst, DownloadOptions{}); err != nil {
		t.Fatal(err)
	}
	sameDigest(t, digest(t, src), digest(t, dst))
	// A download remembers its files: uploading the copy reads nothing.
	again, _, err := Upload(context.Background(), e.c, e.loc, dst, UploadOptions{StoreID: "s", BaseETag: mustETag(t, e)})
	if err != nil || again.Read != 0 || again.Moved != 0 {
		t.Fatalf("upload of the downloaded copy: %+v, %v", again, err)
	}
}

// TestUploadRefuses: another store's image, an image written since, and an
// image of another format are not overwritten.
func TestUploadRefuses(t *testing.T) {
	e := newEnv(t)
	src := makeStore(t, 1)
	_, etag := upload(t, e, src, "a", "")
	ctx := context.Background()
	if _, _, err := Upload(ctx, e.c, e.loc, src, UploadOptions{StoreID: "b"}); !errors.Is(err, ErrOtherStore) {
		t.Fatalf("other store: %v", err)
	}
	if _, _, err := Upload(ctx, e.c, e.loc, src, UploadOptions{StoreID: "a", BaseETag: "\"stale\""}); !errors.Is(err, ErrImageChanged) {
		t.Fatalf("stale base: %v", err)
	}
	if _, _, err := Upload(ctx, e.c, e.loc, src, UploadOptions{StoreID: "a"}); !errors.Is(err, ErrImageChanged) {
		t.Fatalf("no base, an image there: %v", err)
	}
	// An image this store wrote under its holder id, whose ETag a killed
	// run never recorded, is its own; another holder's is not.
	_, mine, err := Upload(ctx, e.c, e.loc, src, UploadOptions{StoreID: "a", BaseETag: etag, Holder: "h1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Upload(ctx, e.c, e.loc, src, UploadOptions{StoreID: "a", BaseETag: etag, Holder: "h2"}); !errors.Is(err, ErrImageChanged) {
		t.Fatalf("another holder's image: %v", err)
	}
	if _, etag, err = Upload(ctx, e.c, e.loc, src, UploadOptions{StoreID: "a", BaseETag: etag, Holder: "h1"}); err != nil || etag == mine {
		t.Fatalf("this holder's own image, its ETag unrecorded: %v (etag %s, was %s)", err, etag, mine)
	}
	other := []byte(`{"format":"something-else","version":3}`)
	e.srv.Put(t, e.loc.Bucket, e.loc.key(manifestName), other)
	if _, _, err := Upload(ctx, e.c, e.loc, src, UploadOptions{StoreID: "a", BaseETag: etag}); !errors.Is(err, ErrFormat) {
		t.Fatalf("other format: %v", err)
	}
	if got := e.srv.Get(t, e.loc.Bucket, e.loc.key(manifestName)); !bytes.Equal(got, other) {
		t.Fatalf("the other format's manifest was overwritten: %s", got)
	}
	// A store that is open is refused.
	s, err := kv.Open(src, kv.Options{Ballast: -1, MinFree: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, _, err := Upload(ctx, e.c, e.loc, src, UploadOptions{StoreID: "a", BaseETag: etag}); err == nil {
		t.Fatal("an open store was uploaded")
	}
}

// TestDownloadRefuses: a damaged image is refused and leaves nothing
// behind; uploading the store again repairs it.
func TestDownloadRefuses(t *testing.T) {
	e := newEnv(t)
	src := makeStore(t, 9)
	want := digest(t, src)
	_, etag := upload(t, e, src, "s", "")
	m, _, err := ReadManifest(context.Background(), e.c, e.loc)
	if err != nil {
		t.Fatal(err)
	}
	var big string // a chunk of a blob
	for _, f := range m.Files {
		if filepath.Dir(f.Path) == "blobs" && f.Size > ChunkSize && f.Chunks[1] != zeroChunk {
			big = f.Chunks[1]
		}
	}
	if big == "" {
		t.Fatal("no blob of two chunks")
	}
	obj := e.objectPath("objects/" + big)
	orig, err := os.ReadFile(obj)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		damage func()
		want   error
	}{
		{"flipped byte", func() {
			b := bytes.Clone(orig)
			b[len(b)/2] ^= 1
			os.WriteFile(obj, b, 0o644)
		}, ErrCorrupt},
		{"truncated", func() { os.WriteFile(obj, orig[:len(orig)-1000], 0o644) }, ErrCorrupt},
		{"longer", func() { os.WriteFile(obj, append(bytes.Clone(orig), 'x'), 0o644) }, ErrCorrupt},
		{"missing", func() { os.Remove(obj) }, ErrIncomplete},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.damage()
			dst := filepath.Join(t.TempDir(), "resumed")
			_, _, _, err := Download(context.Background(), e.c, e.loc, dst, DownloadOptions{})
			if !errors.Is(err, tc.want) {
				t.Fatalf("download: %v, want %v", err, tc.want)
			}
			noEntries(t, dst)
			sameDigest(t, want, digest(t, src)) // the source is intact
			if tc.name != "flipped byte" {
				// Upload finds the object's size wrong and sends it again.
				st, _ := upload(t, e, src, "s", etag)
				if st.MovedObjects != 1 {
					t.Fatalf("repair moved %d objects", st.MovedObjects)
				}
				etag = mustETag(t, e)
			} else {
				os.WriteFile(obj, orig, 0o644)
			}
			if _, _, _, err := Download(context.Background(), e.c, e.loc, dst, DownloadOptions{}); err != nil {
				t.Fatalf("after repair: %v", err)
			}
			sameDigest(t, want, digest(t, dst))
		})
	}
	t.Run("other format", func(t *testing.T) {
		e.srv.Put(t, e.loc.Bucket, e.loc.key(manifestName), []byte(`{"format":"computerfs-hibernate","version":99}`))
		dst := filepath.Join(t.TempDir(), "resumed")
		if _, _, _, err := Download(context.Background(), e.c, e.loc, dst, DownloadOptions{}); !errors.Is(err, ErrFormat) {
			t.Fatalf("download: %v", err)
		}
		noEntries(t, dst)
	})
	t.Run("hostile manifest", func(t *testing.T) {
		e.srv.Put(t, e.loc.Bucket, e.loc.key(manifestName), []byte(`{"format":"computerfs-hibernate","version":1,"store_id":"s","chunk_size":4194304,"files":[{"path":"../evil","size":0,"mode":420,"chunks":[]}]}`))
		dst := filepath.Join(t.TempDir(), "resumed")
		if _, _, _, err := Download(context.Background(), e.c, e.loc, dst, DownloadOptions{}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("download: %v", err)
		}
		noEntries(t, dst)
		if _, err := os.Stat(filepath.Join(filepath.Dir(dst), "evil")); err == nil {
			t.Fatal("the manifest wrote outside the store")
		}
	})
	t.Run("no image", func(t *testing.T) {
		os.Remove(e.objectPath(manifestName))
		dst := filepath.Join(t.TempDir(), "resumed")
		if _, _, _, err := Download(context.Background(), e.c, e.loc, dst, DownloadOptions{}); !errors.Is(err, ErrNoImage) {
			t.Fatalf("download: %v", err)
		}
		noEntries(t, dst)
	})
}

func mustETag(t testing.TB, e *env) string {
	t.Helper()
	_, etag, err := ReadManifest(context.Background(), e.c, e.loc)
	if err != nil {
		t.Fatal(err)
	}
	return etag
}

// killer is an HTTP transport that kills the S3 server once, when the
// n-th request that match has been sent.
type killer struct {
	base  http.RoundTripper
	match func(*http.Request) bool
	n     int64
	seen  atomic.Int64
	once  sync.Once
	kill  func()
}

func (k *killer) RoundTrip(r *http.Request) (*http.Response, error) {
	if k.match(r) && k.seen.Add(1) == k.n {
		k.once.Do(k.kill)
	}
	return k.base.RoundTrip(r)
}

// TestServerKilledMidUpload: an upload that the server's death stops
// writes no manifest and leaves the source intact; once the server is
// back, uploading again finishes the job, sending only what is missing.
func TestServerKilledMidUpload(t *testing.T) {
	e := newEnv(t)
	src := makeStore(t, 24)
	want := digest(t, src)
	k := &killer{base: http.DefaultTransport.(*http.Transport).Clone(), n: 3, kill: e.srv.Stop,
		match: func(r *http.Request) bool { return r.Method == http.MethodPut }}
	c := e.client(t, &http.Client{Transport: k})
	if _, _, err := Upload(context.Background(), c, e.loc, src, UploadOptions{StoreID: "s", Parallel: 2}); err == nil {
		t.Fatal("upload succeeded with the server killed")
	}
	e.srv.Restart(t)
	if _, _, err := ReadManifest(context.Background(), e.c, e.loc); !errors.Is(err, ErrNoImage) {
		t.Fatalf("manifest after an interrupted upload: %v", err)
	}
	sameDigest(t, want, digest(t, src))
	st, _ := upload(t, e, src, "s", "")
	if st.MovedObjects >= st.Objects || st.MovedObjects == 0 {
		t.Fatalf("the second upload sent %d of %d objects", st.MovedObjects, st.Objects)
	}
	dst := filepath.Join(t.TempDir(), "resumed")
	if _, _, _, err := Download(context.Background(), e.c, e.loc, dst, DownloadOptions{}); err != nil {
		t.Fatal(err)
	}
	sameDigest(t, want, digest(t, dst))
}

// TestServerKilledMidDownload: a download that the server's death stops
// leaves nothing behind; once the server is back, it succeeds.
func TestServerKilledMidDownload(t *testing.T) {
	e := newEnv(t)
	src := makeStore(t, 24)
	want := digest(t, src)
	upload(t, e, src, "s", "")
	k := &killer{base: http.DefaultTransport.(*http.Transport).Clone(), n: 3, kill: e.srv.Stop,
		match: func(r *http.Request) bool { return r.Method == http.MethodGet }}
	c := e.client(t, &http.Client{Transport: k})
	dst := filepath.Join(t.TempDir(), "resumed")
	if _, _, _, err := Download(context.Background(), c, e.loc, dst, DownloadOptions{Parallel: 2}); err == nil {
		t.Fatal("download succeeded with the server killed")
	}
	noEntries(t, dst)
	e.srv.Restart(t)
	if _, _, _, err := Download(context.Background(), e.c, e.loc, dst, DownloadOptions{}); err != nil {
		t.Fatal(err)
	}
	sameDigest(t, want, digest(t, dst))
}

// TestUploadChecksum: the server checks each object against the sha256
// Upload signs it with (a chunk damaged on the way is refused).
func TestUploadChecksum(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sum := func(b string) string { s := sha256.Sum256([]byte(b)); return hex.EncodeToString(s[:]) }
	if _, err := e.c.PutObject(ctx, &s3.PutObjectInput{Bucket: &e.loc.Bucket, Key: aws.String("x"),
		Body: bytes.NewReader([]byte("hello"))}, withPayloadHash(sum("hellO"))); err == nil {
		t.Fatal("the server took an object whose signed hash is wrong")
	}
	if _, err := e.c.PutObject(ctx, &s3.PutObjectInput{Bucket: &e.loc.Bucket, Key: aws.String("x"),
		Body: bytes.NewReader([]byte("hello"))}, withPayloadHash(sum("hello"))); err != nil {
		t.Fatal(err)
	}
}

// TestTransientFaults: 500s, cut bodies and responses lost after the
// server applied a write are survived; a fault that persists, or a
// server that does not answer, fails the download and leaves nothing.
func TestTransientFaults(t *testing.T) {
	e := newEnv(t)
	src := makeStore(t, 13)
	want := digest(t, src)
	ft := faultnet.New(http.DefaultTransport.(*http.Transport).Clone())
	c := e.client(t, ft.Client())
	ctx := context.Background()
	ft.Add(faultnet.Match(http.MethodPut, "/objects/").Status(500).Times(3))
	ft.Add(faultnet.Match(http.MethodPut, "/"+manifestName).Status(500).AfterSend().Times(1))
	ft.Add(faultnet.Match(http.MethodPut, "/"+leaseName).Status(503).AfterSend().Times(2))
	l, err := Acquire(ctx, c, e.loc, "A", "host-a", time.Minute)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	if err := l.Renew(ctx, c, e.loc, 2*time.Minute); err != nil {
		t.Fatalf("renew after a lost response: %v", err)
	}
	if _, _, err := Upload(ctx, c, e.loc, src, UploadOptions{StoreID: "s"}); err != nil {
		t.Fatalf("upload with transient faults: %v", err)
	}
	ft.Reset()
	ft.Add(faultnet.Match(http.MethodGet, "/objects/").TruncateAfter(1000).Times(2))
	ft.Add(faultnet.Match(http.MethodGet, "/objects/").Status(500).Times(2))
	dst := filepath.Join(t.TempDir(), "resumed")
	if _, _, _, err := Download(ctx, c, e.loc, dst, DownloadOptions{}); err != nil {
		t.Fatalf("download with transient faults: %v", err)
	}
	sameDigest(t, want, digest(t, dst))

	ft.Reset()
	ft.Add(faultnet.Match(http.MethodGet, "/objects/").TruncateAfter(1000))
	dst2 := filepath.Join(t.TempDir(), "resumed")
	if _, _, _, err := Download(ctx, c, e.loc, dst2, DownloadOptions{}); err == nil {
		t.Fatal("download succeeded with every body cut")
	}
	noEntries(t, dst2)
	ft.Reset()
	ft.Add(faultnet.Match(http.MethodGet, "/objects/").Delay(time.Hour))
	tctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, _, _, err := Download(tctx, c, e.loc, dst2, DownloadOptions{}); err == nil {
		t.Fatal("download succeeded with a server that does not answer")
	}
	noEntries(t, dst2)
	sameDigest(t, want, digest(t, src))
}
