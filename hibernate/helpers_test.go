package hibernate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/computerfs/computerfs/internal/s3test"
	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/wsfs"
)

// env is a real versitygw with a bucket, and a location in it.
type env struct {
	srv *s3test.Server
	loc Location
	c   *s3.Client
}

func newEnv(t testing.TB) *env {
	t.Helper()
	srv := s3test.Start(t)
	e := &env{srv: srv, loc: Location{Bucket: srv.NewBucket(t), Prefix: "images/ws1", Endpoint: srv.Endpoint, Region: srv.Region}}
	e.c = e.client(t, nil)
	return e
}

// client returns a client of the env's server through hc (nil: the SDK's).
func (e *env) client(t testing.TB, hc *http.Client) *s3.Client {
	t.Helper()
	t.Setenv("AWS_ACCESS_KEY_ID", e.srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", e.srv.SecretKey)
	t.Setenv("AWS_SESSION_TOKEN", "")
	c, err := NewClient(context.Background(), e.loc, hc)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// objectPath returns where the posix backend keeps an object of the image.
func (e *env) objectPath(name string) string {
	return filepath.Join(e.srv.Root, e.loc.Bucket, filepath.FromSlash(e.loc.key(name)))
}

// makeStore makes a closed store in a new directory with small files and
// blobs of random content, total about mib MiB, and returns its directory.
func makeStore(t testing.TB, mib int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	st, err := kv.Open(dir, kv.Options{Ballast: -1, MinFree: -1})
	if err != nil {
		t.Fatal(err)
	}
	w := wsfs.New(st, wsfs.Owner{})
	r := rand.New(rand.NewPCG(uint64(mib), 1))
	if err := w.MkdirAll("small", 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if err := w.WriteFile(fmt.Sprintf("small/%d.txt", i), []byte(fmt.Sprintf("file %d\n", i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < mib; i += 6 {
		writeBig(t, w, fmt.Sprintf("big/%d.bin", i), min(6, mib-i)<<20, r)
	}
	// A sparse blob: 1 MiB after a hole of 12 MiB.
	f, err := w.Open("sparse.bin", wsfs.O_CREATE|wsfs.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte{7}, 1<<20), 12<<20); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// writeBig writes n random bytes to p in pieces, as a program would: past
// the blob threshold the file becomes a blob.
func writeBig(t testing.TB, w *wsfs.FS, p string, n int, r *rand.Rand) {
	t.Helper()
	if err := w.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := w.Open(p, wsfs.O_CREATE|wsfs.O_WRONLY|wsfs.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 256<<10)
	for n > 0 {
		k := min(n, len(buf))
		for i := range buf[:k] {
			buf[i] = byte(r.Uint32())
		}
		if _, err := f.Write(buf[:k]); err != nil {
			t.Fatal(err)
		}
		n -= k
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// digest returns the sha256 and mode of every file of a store directory
// that an image holds.
func digest(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := make(map[string]string)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if ExcludedNames[rel] || !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, _ := d.Info()
		out[rel] = fmt.Sprintf("%x %o", sha256.Sum256(b), info.Mode().Perm())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameDigest(t testing.TB, want, got map[string]string) {
	t.Helper()
	var diffs []string
	for k, v := range want {
		if got[k] != v {
			diffs = append(diffs, fmt.Sprintf("%s: %q, want %q", k, got[k], v))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, k+": extra")
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 0 {
		t.Fatalf("%d files differ:\n%s", len(diffs), bytes.Join(toBytes(diffs), []byte("\n")))
	}
}

func toBytes(ss []string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

// noEntries fails unless dir's parent holds nothing that starts with
// dir's name (no store, no temporary directory of a download).
func noEntries(t testing.TB, dir string) {
	t.Helper()
	m, _ := filepath.Glob(dir + "*")
	if len(m) > 0 {
		t.Fatalf("left behind: %v", m)
	}
}
