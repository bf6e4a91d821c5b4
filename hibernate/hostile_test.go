package hibernate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Whoever can write a bucket (another tenant, or an agent whose
// workspace writes back to it) controls an image's manifest and chunks.
// These attacks put hostile manifests where a resume reads them.

// hostileFile is a manifest entry as an attacker writes it.
type hostileFile struct {
	Path   string   `json:"path"`
	Size   int64    `json:"size"`
	Mode   uint32   `json:"mode"`
	Chunks []string `json:"chunks"`
}

func hostileManifest(chunkSize int64, files ...hostileFile) []byte {
	b, _ := json.Marshal(map[string]any{"format": Format, "version": Version, "store_id": "s",
		"chunk_size": chunkSize, "files": files})
	return b
}

func sum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// deepPaths is a manifest of n files, each under its own chain of depth
// directories: the check put every ancestor of every path in a map,
// depth² work a file for depth bytes of manifest (200 files of depth
// 3,000, 1.2 MB, took 8.3 s; a 256 MiB manifest, hours).
func deepPaths(n, depth int) []byte {
	var files []hostileFile
	for i := range n {
		files = append(files, hostileFile{Path: fmt.Sprintf("d%d/", i) + strings.Repeat("a/", depth) + "f", Chunks: []string{}})
	}
	return hostileManifest(ChunkSize, files...)
}

// TestHostileManifest: each manifest is refused (ErrCorrupt or
// ErrFormat) by Download, before anything is written: nothing is left
// beside the store, and no file appears outside it.
func TestHostileManifest(t *testing.T) {
	e := newEnv(t)
	data := []byte("hello")
	e.srv.Put(t, e.loc.Bucket, e.loc.key("objects/"+sum(data)), data)
	small := []string{sum(data)}
	ok := hostileFile{Path: "db/x", Size: 5, Mode: 0o600, Chunks: small}
	cases := []struct {
		name     string
		manifest []byte
	}{
		{"dotdot", hostileManifest(ChunkSize, hostileFile{Path: "../evil", Size: 5, Mode: 0o644, Chunks: small})},
		{"dotdot inside", hostileManifest(ChunkSize, hostileFile{Path: "db/../../evil", Size: 5, Mode: 0o644, Chunks: small})},
		{"absolute", hostileManifest(ChunkSize, hostileFile{Path: "/tmp/evil", Size: 5, Mode: 0o644, Chunks: small})},
		{"dot", hostileManifest(ChunkSize, hostileFile{Path: "./db/x", Size: 5, Mode: 0o644, Chunks: small})},
		{"empty component", hostileFile{}.with(t, "db//x", small)},
		{"empty path", hostileFile{}.with(t, "", small)},
		{"backslash", hostileFile{}.with(t, `..\evil`, small)},
		{"nul", hostileFile{}.with(t, "db/x\x00y", small)},
		{"sandbox cache volume", hostileFile{}.with(t, "sandbox-cache.img", small)},
		{"pending list", hostileFile{}.with(t, PendingFile, small)},
		{"fetch dir", hostileFile{}.with(t, FetchDir+"/1.x", small)},
		{"state file", hostileFile{}.with(t, StateFile, small)},
		{"control socket", hostileFile{}.with(t, "control.sock", small)},
		{"lock", hostileFile{}.with(t, "lock", small)},
		{"twice", hostileManifest(ChunkSize, ok, ok)},
		{"file and dir", hostileManifest(ChunkSize, hostileFile{Path: "db", Size: 5, Mode: 0o600, Chunks: small}, ok)},
		{"dir and file", hostileManifest(ChunkSize, ok, hostileFile{Path: "db/x/y", Size: 5, Mode: 0o600, Chunks: small})},
		{"negative size", hostileManifest(ChunkSize, hostileFile{Path: "db/x", Size: -5, Mode: 0o600, Chunks: []string{}})},
		{"size of 1 EiB, chunks that do not add up", hostileManifest(ChunkSize, hostileFile{Path: "db/x", Size: 1 << 60, Mode: 0o600, Chunks: small})},
		{"size near 2^63", hostileManifest(ChunkSize, hostileFile{Path: "db/x", Size: 1<<63 - 1, Mode: 0o600, Chunks: []string{}})},
		{"chunks that do not add up", hostileManifest(ChunkSize, hostileFile{Path: "db/x", Size: 5, Mode: 0o600, Chunks: []string{small[0], small[0]}})},
		{"no chunks", hostileManifest(ChunkSize, hostileFile{Path: "db/x", Size: 5, Mode: 0o600, Chunks: nil})},
		{"chunk not a hash", hostileManifest(ChunkSize, hostileFile{Path: "db/x", Size: 5, Mode: 0o600, Chunks: []string{"../../etc/passwd"}})},
		{"chunk in capitals", hostileManifest(ChunkSize, hostileFile{Path: "db/x", Size: 5, Mode: 0o600, Chunks: []string{strings.ToUpper(small[0])}})},
		{"setuid", hostileManifest(ChunkSize, hostileFile{Path: "db/x", Size: 5, Mode: 0o4755, Chunks: small})},
		{"device bits", hostileManifest(ChunkSize, hostileFile{Path: "db/x", Size: 5, Mode: uint32(os.ModeDevice) | 0o666, Chunks: small})},
		// A chunk size of 1 GiB whose chunks are named as 4 MiB of zeros:
		// the room check took each for a 4 MiB hole.
		{"chunk size 1 GiB", hostileManifest(1<<30, hostileFile{Path: "db/x", Size: 64 << 30, Mode: 0o600, Chunks: repeat(zeroChunk, 64)})},
		{"chunk size 0", hostileManifest(0, ok)},
		{"chunk size 1", hostileManifest(1, hostileFile{Path: "db/x", Size: 1, Mode: 0o600, Chunks: small})},
		{"deep path", hostileManifest(ChunkSize, hostileFile{Path: strings.Repeat("a/", 100) + "f", Chunks: []string{}})},
		{"long path", hostileManifest(ChunkSize, hostileFile{Path: strings.Repeat("a", 100<<10), Chunks: []string{}})},
		{"deep paths bomb", deepPaths(50, 3000)},
		{"nesting bomb", []byte(`{"format":"computerfs-hibernate","version":1,"store_id":"s","chunk_size":4194304,"files":` + strings.Repeat("[", 100000))},
		{"unknown field", []byte(`{"format":"computerfs-hibernate","version":1,"store_id":"s","chunk_size":4194304,"files":[],"spec":{}}`)},
		{"no store id", []byte(`{"format":"computerfs-hibernate","version":1,"chunk_size":4194304,"files":[]}`)},
		{"not json", []byte("\x00\xff")},
		{"format only", []byte(`{"format":"computerfs-hibernate"}`)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e.srv.Put(t, e.loc.Bucket, e.loc.key(manifestName), c.manifest)
			dst := filepath.Join(t.TempDir(), "resumed")
			var before runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			for _, lazy := range []bool{false, true} {
				_, _, _, err := Download(context.Background(), e.c, e.loc, dst, DownloadOptions{Lazy: lazy})
				if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrFormat) {
					t.Fatalf("download (lazy %v): %v, want refused as corrupt", lazy, err)
				}
				noEntries(t, dst)
			}
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			// The manifest is read and decoded (a few times its size), never
			// more.
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20+8*uint64(len(c.manifest)) {
				t.Errorf("refusing a manifest of %d bytes allocated %d MiB", len(c.manifest), alloc>>20)
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("refusing took %v", d)
			}
			for _, p := range []string{"/tmp/evil", filepath.Join(filepath.Dir(dst), "evil"), filepath.Join(filepath.Dir(filepath.Dir(dst)), "evil")} {
				if _, err := os.Lstat(p); err == nil {
					t.Fatalf("the manifest wrote %s", p)
				}
			}
		})
	}
}

func (hostileFile) with(t *testing.T, path string, chunks []string) []byte {
	return hostileManifest(ChunkSize, hostileFile{Path: path, Size: 5, Mode: 0o600, Chunks: chunks})
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// TestHostileChunks: manifests whose names are fine but whose chunks lie.
// A chunk named twice (at two sizes), one whose content is another's, a
// chunk longer than the manifest says: refused, eager and lazy; a chunk
// named twice at the same size is fine (an image shares repeated content).
func TestHostileChunks(t *testing.T) {
	e := newEnv(t)
	a, b := []byte("aaaaaaaa"), []byte("bbbbbbbb")
	e.srv.Put(t, e.loc.Bucket, e.loc.key("objects/"+sum(a)), a)
	e.srv.Put(t, e.loc.Bucket, e.loc.key("objects/"+sum(b)), a) // b's name, a's content
	big := bytes.Repeat([]byte{1}, ChunkSize)
	e.srv.Put(t, e.loc.Bucket, e.loc.key("objects/"+sum(big)), big)
	shared := hostileManifest(ChunkSize,
		hostileFile{Path: "db/x", Size: 8, Mode: 0o600, Chunks: []string{sum(a)}},
		hostileFile{Path: "db/y", Size: 8, Mode: 0o600, Chunks: []string{sum(a)}})
	for _, c := range []struct {
		name     string
		manifest []byte
		want     error
	}{
		{"one chunk at two sizes", hostileManifest(ChunkSize,
			hostileFile{Path: "db/x", Size: ChunkSize + 8, Mode: 0o600, Chunks: []string{sum(big), sum(a)}},
			hostileFile{Path: "blobs/10", Size: ChunkSize, Mode: 0o600, Chunks: []string{sum(a)}}), ErrCorrupt},
		{"content of another chunk", hostileManifest(ChunkSize, hostileFile{Path: "db/x", Size: 8, Mode: 0o600, Chunks: []string{sum(b)}}), ErrCorrupt},
		{"shorter than the chunk", hostileManifest(ChunkSize, hostileFile{Path: "db/x", Size: 4, Mode: 0o600, Chunks: []string{sum(a)}}), ErrCorrupt},
		{"missing", hostileManifest(ChunkSize, hostileFile{Path: "db/x", Size: 8, Mode: 0o600, Chunks: []string{sum([]byte("c"))}}), ErrIncomplete},
		{"shared", shared, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			e.srv.Put(t, e.loc.Bucket, e.loc.key(manifestName), c.manifest)
			for _, lazy := range []bool{false, true} {
				dst := filepath.Join(t.TempDir(), "resumed")
				_, _, _, err := Download(context.Background(), e.c, e.loc, dst, DownloadOptions{Lazy: lazy})
				if c.want == nil {
					if err != nil {
						t.Fatalf("lazy %v: %v", lazy, err)
					}
					continue
				}
				if !errors.Is(err, c.want) {
					t.Fatalf("lazy %v: %v, want %v", lazy, err, c.want)
				}
				noEntries(t, dst)
			}
		})
	}
}

// TestHugeManifest: a manifest object of 4 GiB (sparse at the server) is
// refused from its length, without reading it.
func TestHugeManifest(t *testing.T) {
	e := newEnv(t)
	e.srv.Put(t, e.loc.Bucket, e.loc.key(manifestName), []byte(`{"format":"computerfs-hibernate","version":1}`))
	if err := os.Truncate(e.objectPath(manifestName), 4<<30); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	dst := filepath.Join(t.TempDir(), "resumed")
	_, _, _, err := Download(context.Background(), e.c, e.loc, dst, DownloadOptions{})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("download of a 4 GiB manifest: %v", err)
	}
	noEntries(t, dst)
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("refusing a 4 GiB manifest took %v", d)
	}
}

// putSigned writes manifest b at loc's manifest key with metadata mac.
func putSigned(t *testing.T, c *s3.Client, loc Location, b []byte, mac string) {
	t.Helper()
	in := &s3.PutObjectInput{Bucket: &loc.Bucket, Key: aws.String(loc.key(manifestName)), Body: bytes.NewReader(b)}
	if mac != "" {
		in.Metadata = map[string]string{MACMeta: mac}
	}
	if _, err := c.PutObject(context.Background(), in); err != nil {
		t.Fatal(err)
	}
}

// TestImageSignature: with a key, only a manifest that key signed for
// this location is resumed. An attacker who can write the bucket but has
// not the key cannot forge one, alter one, move one from another prefix
// (another workspace's image) or sign with a key of its own; an upload
// over such a manifest is refused and leaves it; the real image resumes.
func TestImageSignature(t *testing.T) {
	e := newEnv(t)
	key := bytes.Repeat([]byte{7}, keyBytes)
	other := bytes.Repeat([]byte{8}, keyBytes)
	store := makeStore(t, 1)
	want := digest(t, store)
	_, etag, err := Upload(context.Background(), e.c, e.loc, store, UploadOptions{StoreID: "s1", Key: key})
	if err != nil {
		t.Fatal(err)
	}
	good := e.srv.Get(t, e.loc.Bucket, e.loc.key(manifestName))
	goodMAC := sign(key, e.loc, good)
	// The same store's image at another prefix (another workspace's, in
	// the attack), signed there.
	loc2 := e.loc
	loc2.Prefix = "images/ws2"
	if _, _, err := Upload(context.Background(), e.c, loc2, store, UploadOptions{StoreID: "s1", Key: key}); err != nil {
		t.Fatal(err)
	}
	ws2 := e.srv.Get(t, loc2.Bucket, loc2.key(manifestName))
	altered := bytes.Replace(good, []byte(`"store_id":"s1"`), []byte(`"store_id":"s2"`), 1)
	if bytes.Equal(altered, good) {
		t.Fatal("no store id in the manifest")
	}
	root := e.loc
	root.Prefix = ""
	for _, c := range []struct {
		name string
		b    []byte
		mac  string
	}{
		{"unsigned", good, ""},
		{"signed with another key", good, sign(other, e.loc, good)},
		{"altered", altered, goodMAC},
		{"moved from another prefix", ws2, sign(key, loc2, ws2)},
		{"moved, signature of this prefix's image", ws2, goodMAC},
		{"signature not hex", good, "zz" + goodMAC[2:]},
		{"signature short", good, goodMAC[:32]},
		{"signed for the bucket's root", good, sign(key, root, good)},
	} {
		t.Run(c.name, func(t *testing.T) {
			putSigned(t, e.c, e.loc, c.b, c.mac)
			dst := filepath.Join(t.TempDir(), "resumed")
			for _, lazy := range []bool{false, true} {
				if _, _, _, err := Download(context.Background(), e.c, e.loc, dst, DownloadOptions{Lazy: lazy, Key: key}); !errors.Is(err, ErrUnsigned) {
					t.Fatalf("download (lazy %v): %v, want ErrUnsigned", lazy, err)
				}
				noEntries(t, dst)
			}
			// The store's own upload does not overwrite what it cannot
			// trust (unless it is the manifest it last wrote).
			before := e.srv.Get(t, e.loc.Bucket, e.loc.key(manifestName))
			if _, _, err := Upload(context.Background(), e.c, e.loc, store, UploadOptions{StoreID: "s1", Key: key, BaseETag: "other"}); !errors.Is(err, ErrUnsigned) {
				t.Fatalf("upload over it: %v", err)
			}
			if !bytes.Equal(before, e.srv.Get(t, e.loc.Bucket, e.loc.key(manifestName))) {
				t.Fatal("a refused upload changed the manifest")
			}
		})
	}
	putSigned(t, e.c, e.loc, good, goodMAC)
	dst := filepath.Join(t.TempDir(), "resumed")
	if _, _, _, err := Download(context.Background(), e.c, e.loc, dst, DownloadOptions{Key: key}); err != nil {
		t.Fatalf("the signed image: %v", err)
	}
	sameDigest(t, want, digest(t, dst))
	// The store that wrote it goes on from it.
	if _, _, err := Upload(context.Background(), e.c, e.loc, store, UploadOptions{StoreID: "s1", Key: key, BaseETag: etag}); err != nil {
		t.Fatalf("upload again: %v", err)
	}
}

// TestImageKeyFile: the key is made once (mode 0600), read back the same
// by every caller; a key file others can read, a link or garbage is
// refused; resume without one says where to put it.
func TestImageKeyFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "sub", "image-key")
	if _, err := LoadKey(p); err == nil || !strings.Contains(err.Error(), "no image key") {
		t.Fatalf("no key: %v", err)
	}
	done := make(chan []byte, 8)
	for range 8 {
		go func() {
			k, err := LoadOrCreateKey(p)
			if err != nil {
				t.Error(err)
			}
			done <- k
		}()
	}
	first := <-done
	for range 7 {
		if k := <-done; !bytes.Equal(k, first) || len(k) != keyBytes {
			t.Fatal("two keys made at once")
		}
	}
	if info, _ := os.Stat(p); info.Mode().Perm() != 0o600 {
		t.Fatalf("key mode %v", info.Mode())
	}
	os.Chmod(p, 0o644)
	if _, err := LoadKey(p); err == nil {
		t.Fatal("a key others can read was taken")
	}
	os.Chmod(p, 0o600)
	l := filepath.Join(dir, "link")
	os.Symlink(p, l)
	if _, err := LoadKey(l); err == nil {
		t.Fatal("a key through a link was taken")
	}
	bad := filepath.Join(dir, "bad")
	os.WriteFile(bad, []byte("not hex\n"), 0o600)
	if _, err := LoadKey(bad); err == nil {
		t.Fatal("a key of garbage was taken")
	}
}
