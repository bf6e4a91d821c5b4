package hibernate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/computerfs/computerfs/internal/faultnet"
	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/wsfs"
)

// workspaceFiles opens the store in dir (with blobs as its source, if
// not nil) and returns the sha256 of every file of the workspace, and the
// error of each that could not be read.
func workspaceFiles(t testing.TB, dir string, blobs kv.BlobSource) (map[string]string, map[string]error) {
	t.Helper()
	o := kv.Options{Ballast: -1, MinFree: -1}
	if blobs != nil {
		o.Blobs = blobs
	}
	st, err := kv.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	w := wsfs.New(st, wsfs.Owner{})
	sums, errs := map[string]string{}, map[string]error{}
	var walk func(p string)
	walk = func(p string) {
		var ents []kv.Dirent
		if err := w.ReadDir(p, "", func(d kv.Dirent) bool { ents = append(ents, d); return true }); err != nil {
			t.Fatal(err)
		}
		for _, d := range ents {
			q := path.Join(p, d.Name)
			if d.Type == syscall.S_IFDIR {
				walk(q)
				continue
			}
			b, err := w.ReadFile(q)
			if err != nil {
				errs[q] = err
				continue
			}
			sums[q] = fmt.Sprintf("%x", sha256.Sum256(b))
		}
	}
	walk("/")
	return sums, errs
}

func sameFiles(t testing.TB, want, got map[string]string) {
	t.Helper()
	if len(want) == 0 {
		t.Fatal("no files to compare")
	}
	for p, s := range want {
		if got[p] != s {
			t.Errorf("%s: sha256 %q, want %q", p, got[p], s)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%s: not in the source", p)
		}
	}
}

// lazyDownload uploads src and downloads it lazily into a new directory.
func lazyDownload(t testing.TB, e *env, src string) (string, *Manifest, string) {
	t.Helper()
	upload(t, e, src, "store-1", "")
	dst := filepath.Join(t.TempDir(), "resumed")
	m, etag, st, err := Download(context.Background(), e.c, e.loc, dst, DownloadOptions{Lazy: true})
	if err != nil {
		t.Fatal(err)
	}
	if st.Moved >= st.Bytes/2 {
		t.Fatalf("a lazy download received %d of %d bytes", st.Moved, st.Bytes)
	}
	return dst, m, etag
}

// blobFiles returns the blob files of a store directory, with content.
func blobFiles(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, "blobs", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

// TestLazyResume: a lazy download fetches the database and lists the
// blobs; the store opens, and each file read before the background
// fetch gets there waits for its blob (fetched on demand) and reads the
// source's bytes; the background fetch then brings the rest and removes
// the list; the blobs are the source's, byte for byte.
func TestLazyResume(t *testing.T) {
	e := newEnv(t)
	src := makeStore(t, 30)
	want, errs := workspaceFiles(t, src, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	dst, _, _ := lazyDownload(t, e, src)
	if got := blobFiles(t, dst); len(got) != 0 {
		t.Fatalf("a lazy download made blobs: %d", len(got))
	}
	fe, err := OpenFetcher(dst, e.c, e.loc, nil)
	if err != nil || fe == nil {
		t.Fatalf("fetcher %v, %v", fe, err)
	}
	if st := fe.Stats(); st.Owed < 6 {
		t.Fatalf("owed %+v", st)
	}
	// Every read before Start: each blob is fetched on demand.
	got, errs := workspaceFiles(t, dst, fe)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	sameFiles(t, want, got)
	if st := fe.Stats(); st.Owed != 0 || st.Failed != 0 {
		t.Fatalf("after reading every file: %+v", st)
	}
	fe.Start(2)
	fe.Wait()
	fe.Close()
	if HasPending(dst) {
		t.Fatal("the list of blobs to fetch is still there")
	}
	if _, err := os.Stat(filepath.Join(dst, FetchDir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s: %v", FetchDir, err)
	}
	srcBlobs, dstBlobs := blobFiles(t, src), blobFiles(t, dst)
	for name, b := range srcBlobs {
		if !bytes.Equal(b, dstBlobs[name]) {
			t.Errorf("blob %s differs", name)
		}
	}
	if len(srcBlobs) != len(dstBlobs) {
		t.Errorf("%d blobs, want %d", len(dstBlobs), len(srcBlobs))
	}

	// In the background alone, from a second lazy download.
	dst2 := filepath.Join(t.TempDir(), "resumed")
	if _, _, _, err := Download(context.Background(), e.c, e.loc, dst2, DownloadOptions{Lazy: true}); err != nil {
		t.Fatal(err)
	}
	fe2, err := OpenFetcher(dst2, e.c, e.loc, nil)
	if err != nil {
		t.Fatal(err)
	}
	fe2.Start(2)
	fe2.Wait()
	fe2.Close()
	if st := fe2.Stats(); st.Owed != 0 || st.Failed != 0 || HasPending(dst2) {
		t.Fatalf("background fetch: %+v, pending %v", st, HasPending(dst2))
	}
	got, errs = workspaceFiles(t, dst2, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	sameFiles(t, want, got)
}

// TestLazyResumeInterrupted: a fetch stopped halfway (the fetcher closed
// mid-blob, a partial file left as a kill would leave it) never shows a
// partial blob: every blob file present is whole; the next fetcher
// removes the leftovers and fetches the rest.
func TestLazyResumeInterrupted(t *testing.T) {
	e := newEnv(t)
	src := makeStore(t, 60)
	want, _ := workspaceFiles(t, src, nil)
	dst, _, _ := lazyDownload(t, e, src)
	fe, err := OpenFetcher(dst, e.c, e.loc, nil)
	if err != nil {
		t.Fatal(err)
	}
	fe.Start(1)
	// Stop it once some bytes came (or it is done on a fast machine).
wait:
	for fe.Stats().Bytes == 0 {
		select {
		case <-fe.bgDone:
			break wait
		case <-time.After(time.Millisecond):
		}
	}
	fe.Close()
	// What a SIGKILL leaves: a piece of a blob under the fetch directory.
	if err := os.WriteFile(filepath.Join(dst, FetchDir, "2.partial"), []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	srcBlobs := blobFiles(t, src)
	for name, b := range blobFiles(t, dst) {
		if !bytes.Equal(b, srcBlobs[name]) {
			t.Fatalf("blob %s is there but not whole (%d bytes of %d)", name, len(b), len(srcBlobs[name]))
		}
	}
	if !HasPending(dst) && len(blobFiles(t, dst)) != len(srcBlobs) {
		t.Fatal("the list is gone, the blobs are not all there")
	}
	fe2, err := OpenFetcher(dst, e.c, e.loc, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fe2 != nil {
		if _, err := os.Stat(filepath.Join(dst, FetchDir, "2.partial")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("a leftover of the fetch stays: %v", err)
		}
		got, errs := workspaceFiles(t, dst, fe2)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		sameFiles(t, want, got)
		fe2.Start(2)
		fe2.Wait()
		fe2.Close()
	}
	if HasPending(dst) {
		t.Fatal("the list stays after the fetch")
	}
	got, _ := workspaceFiles(t, dst, nil)
	sameFiles(t, want, got)
}

// blobChunk returns the first chunk of a blob of the image, and the
// workspace file whose data it is (found by its content in the source).
func blobChunk(t testing.TB, m *Manifest) (File, string) {
	t.Helper()
	for _, f := range m.Files {
		if lazyFile(&f) && f.Size >= 6<<20 {
			return f, f.Chunks[0]
		}
	}
	t.Fatal("no blob in the image")
	return File{}, ""
}

// TestLazyResumeCorrupt: a flipped byte in a blob's chunk (the listing
// cannot see it: same size) is found when that blob is fetched: reads of
// that file fail with EIO, every other file reads right, and the
// fetcher says which blob and why.
func TestLazyResumeCorrupt(t *testing.T) {
	e := newEnv(t)
	src := makeStore(t, 20)
	want, _ := workspaceFiles(t, src, nil)
	upload(t, e, src, "store-1", "")
	m, _, err := ReadManifest(context.Background(), e.c, e.loc)
	if err != nil {
		t.Fatal(err)
	}
	bad, chunk := blobChunk(t, m)
	p := e.objectPath("objects/" + chunk)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 1
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "resumed")
	if _, _, _, err := Download(context.Background(), e.c, e.loc, dst, DownloadOptions{Lazy: true}); err != nil {
		t.Fatal(err)
	}
	fe, err := OpenFetcher(dst, e.c, e.loc, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fe.Close()
	got, errs := workspaceFiles(t, dst, fe)
	if len(errs) != 1 {
		t.Fatalf("want one file failing, got %v", errs)
	}
	for p, err := range errs {
		if kv.Errno(err) != syscall.EIO || !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: %v (errno %v), want EIO for a corrupt blob", p, err, kv.Errno(err))
		}
		delete(want, p)
	}
	sameFiles(t, want, got)
	st := fe.Stats()
	if st.Failed != 1 || st.Err == nil || !strings.Contains(st.Err.Error(), bad.Path) || !strings.Contains(st.Err.Error(), chunk) {
		t.Fatalf("stats %+v: want the blob %s and chunk %s named", st, bad.Path, chunk)
	}
	// The background fetch ends, the list stays (the blob is still owed).
	fe.Start(2)
	fe.Wait()
	if !HasPending(dst) {
		t.Fatal("the list of blobs went with a blob missing")
	}
	if _, err := os.Stat(filepath.Join(dst, filepath.FromSlash(bad.Path))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the corrupt blob is in place: %v", err)
	}
}

// TestLazyResumeRefuses: an image that lacks an object of a blob, or
// holds one of the wrong size, is refused by the lazy download before
// anything is left (the store never opens).
func TestLazyResumeRefuses(t *testing.T) {
	e := newEnv(t)
	src := makeStore(t, 12)
	upload(t, e, src, "store-1", "")
	m, _, err := ReadManifest(context.Background(), e.c, e.loc)
	if err != nil {
		t.Fatal(err)
	}
	_, chunk := blobChunk(t, m)
	p := e.objectPath("objects/" + chunk)
	orig, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		bad  func() error
		want error
	}{
		{"missing", func() error { return os.Remove(p) }, ErrIncomplete},
		{"truncated", func() error { return os.WriteFile(p, orig[:len(orig)-1], 0o644) }, ErrCorrupt},
	} {
		if err := c.bad(); err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(t.TempDir(), "resumed")
		_, _, _, err := Download(context.Background(), e.c, e.loc, dst, DownloadOptions{Lazy: true})
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), chunk) {
			t.Fatalf("%s: %v, want %v naming %s", c.name, err, c.want, chunk)
		}
		noEntries(t, dst)
		if err := os.WriteFile(p, orig, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLazyHibernateAgain: a store whose blobs are not fetched yet
// hibernates to its image (the blobs it lacks are named as they are, the
// image resumes whole), and is refused where the image's chunks are not.
func TestLazyHibernateAgain(t *testing.T) {
	e := newEnv(t)
	src := makeStore(t, 20)
	want, _ := workspaceFiles(t, src, nil)
	dst, _, etag := lazyDownload(t, e, src)
	// One blob fetched, the rest still owed.
	fe, err := OpenFetcher(dst, e.c, e.loc, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fe.Fetch(fe.order[0], nil); err != nil {
		t.Fatal(err)
	}
	fe.Close()
	other := e.loc
	other.Prefix = "images/other"
	if _, _, err := Upload(context.Background(), e.c, other, dst, UploadOptions{StoreID: "store-1", Host: "test"}); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("upload elsewhere with blobs owed: %v, want %v", err, ErrIncomplete)
	}
	st, _, err := Upload(context.Background(), e.c, e.loc, dst, UploadOptions{StoreID: "store-1", BaseETag: etag, Host: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if st.Moved > 4<<20 {
		t.Fatalf("hibernate after a lazy resume sent %d bytes", st.Moved)
	}
	again := filepath.Join(t.TempDir(), "again")
	if _, _, _, err := Download(context.Background(), e.c, e.loc, again, DownloadOptions{}); err != nil {
		t.Fatal(err)
	}
	got, errs := workspaceFiles(t, again, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	sameFiles(t, want, got)
}

// TestLazySnapshotAndDrop: a snapshot taken while blobs are owed waits
// for them (every blob is in it); a file removed before its blob came is
// never fetched into the store, and the fetch ends without it.
func TestLazySnapshotAndDrop(t *testing.T) {
	e := newEnv(t)
	src := makeStore(t, 20)
	dst, _, _ := lazyDownload(t, e, src)
	fe, err := OpenFetcher(dst, e.c, e.loc, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fe.Close()
	st, err := kv.Open(dst, kv.Options{Ballast: -1, MinFree: -1, Blobs: fe})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	w := wsfs.New(st, wsfs.Owner{})
	a, err := w.Stat("big/0.bin")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Remove("big/0.bin"); err != nil {
		t.Fatal(err)
	}
	dropped := filepath.Join(dst, "blobs", fmt.Sprintf("%x", a.Ino))
	if _, err := st.Snapshot("s1"); err != nil {
		t.Fatal(err)
	}
	if s := fe.Stats(); s.Owed != 0 || s.Failed != 0 {
		t.Fatalf("after a snapshot: %+v", s)
	}
	if _, err := os.Stat(dropped); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the blob of a removed file was fetched: %v", err)
	}
	snap, err := kv.SnapshotDir(dst, "s1")
	if err != nil {
		t.Fatal(err)
	}
	srcBlobs := blobFiles(t, src)
	got := blobFiles(t, snap)
	for name, b := range got {
		if !bytes.Equal(b, srcBlobs[name]) {
			t.Errorf("snapshot blob %s differs", name)
		}
	}
	if len(got) != len(srcBlobs)-1 {
		t.Errorf("the snapshot has %d blobs, want %d", len(got), len(srcBlobs)-1)
	}
	fe.Start(1)
	fe.Wait()
	if HasPending(dst) {
		t.Fatal("the list stays")
	}
}

// TestLazyFetchInterrupted: a call waiting for a blob (kv.FetchBlob, as
// a FUSE open or read waits) whose wait is interrupted gets EINTR, no
// part of the blob; the fetch goes on, and once the server answers the
// blob is there whole for the next call.
func TestLazyFetchInterrupted(t *testing.T) {
	e := newEnv(t)
	src := makeStore(t, 12)
	want, _ := workspaceFiles(t, src, nil)
	dst, _, _ := lazyDownload(t, e, src)
	ft := faultnet.New(http.DefaultTransport.(*http.Transport).Clone())
	hold := ft.Add(faultnet.Match(http.MethodGet, "/objects/").Delay(2 * time.Second).Times(1))
	fe, err := OpenFetcher(dst, e.client(t, ft.Client()), e.loc, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fe.Close()
	st, err := kv.Open(dst, kv.Options{Ballast: -1, MinFree: -1, Blobs: fe})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ino := fe.order[0]
	cancel := make(chan struct{})
	close(cancel)
	for hold.Requests() == 0 {
		// Started by the first call, held at the server by the rule.
		if err := st.FetchBlob(ino, cancel); !errors.Is(err, kv.ErrInterrupted) || kv.Errno(err) != syscall.EINTR {
			t.Fatalf("an interrupted wait: %v, want EINTR", err)
		}
		time.Sleep(time.Millisecond)
	}
	if err := st.FetchBlob(ino, cancel); !errors.Is(err, kv.ErrInterrupted) {
		t.Fatalf("an interrupted wait while the chunk is held: %v", err)
	}
	if err := st.FetchBlob(ino, nil); err != nil {
		t.Fatal(err)
	}
	srcBlobs := blobFiles(t, src)
	name := fmt.Sprintf("%x", ino)
	if b, err := os.ReadFile(filepath.Join(dst, "blobs", name)); err != nil || !bytes.Equal(b, srcBlobs[name]) {
		t.Fatalf("blob %s after the wait: %d bytes, %v", name, len(b), err)
	}
	got := map[string]string{}
	w := wsfs.New(st, wsfs.Owner{})
	for p := range want {
		b, err := w.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		got[p] = fmt.Sprintf("%x", sha256.Sum256(b))
	}
	sameFiles(t, want, got)
}
