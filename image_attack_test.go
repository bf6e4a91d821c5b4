package computerfs

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/computerfs/computerfs/hibernate"
	"github.com/computerfs/computerfs/internal/faultnet"
	"github.com/computerfs/computerfs/internal/s3test"
	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/wsfs"
)

// hostileStore makes the store an attacker who can write the bucket
// would hibernate: its meta says the agent is nobody (a host user), the
// spec names a host path and the daemon's environment as a token, the
// git history check is "clean", the owner map gives the agent's files to
// root, and a .git/config with an fsmonitor belongs to root, setuid.
func hostileStore(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "hostile")
	st, err := kv.Open(dir, kv.Options{Ballast: -1, MinFree: -1})
	if err != nil {
		t.Fatal(err)
	}
	w := wsfs.New(st, wsfs.Owner{})
	if err := w.MkdirAll("repo/.git", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile("repo/.git/config", []byte("[core]\n\tfsmonitor = /workspace/evil.sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile("evil.sh", []byte("#!/bin/sh\nid > /tmp/pwned\n"), 0o4755); err != nil {
		t.Fatal(err)
	}
	sp := `{"sources":[{"path":"repo","git":{"url":"file:///etc","token_env":"HOME","push":{"branch":"x"}}},` +
		`{"path":"data","s3":{"bucket":"another-tenant","profile":"default","write_back":true}}],"policy":{}}`
	for k, v := range map[string]string{"agent": `{"uid":65534,"gid":65534}`, "spec": sp, "git-history/0": `{"clean":true}`} {
		if err := st.SetMeta(k, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.ChangeOwners(kv.Owner{UID: 65534, GID: 65534}, kv.Owner{}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestHostileImageAttack: whoever can write the bucket (another tenant,
// an agent whose workspace writes back there) puts an image of a store of
// its making where a workspace hibernated, or moves another workspace's
// image there. A resume takes none of them: the image is not signed with
// the host's key (hibernate.ErrUnsigned), nothing is left at the store,
// the lease is given back; the real image still resumes.
func TestHostileImageAttack(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	srv.SetEnv(t)
	ctx := context.Background()
	where := func(prefix string) Where { return Where{URL: "s3://" + bucket + "/" + prefix, Endpoint: srv.Endpoint} }
	loc := func(prefix string) hibernate.Location {
		return hibernate.Location{Bucket: bucket, Prefix: prefix, Endpoint: srv.Endpoint, Region: srv.Region}
	}
	c, err := hibernate.NewClient(ctx, loc("ws1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Two real workspaces, hibernated.
	for _, p := range []string{"ws1", "ws2"} {
		store := filepath.Join(t.TempDir(), p)
		st, err := kv.Open(store, kv.Options{Ballast: -1, MinFree: -1})
		if err != nil {
			t.Fatal(err)
		}
		if err := wsfs.New(st, wsfs.Owner{}).WriteFile("secret-of-"+p, []byte(p), 0o600); err != nil {
			t.Fatal(err)
		}
		st.Close()
		if _, err := Hibernate(ctx, HibernateOptions{Store: store, To: where(p)}); err != nil {
			t.Fatal(err)
		}
	}
	real1 := srv.Get(t, bucket, "ws1/manifest.json")
	hostile := hostileStore(t)
	resume := func(t *testing.T, name string) {
		t.Helper()
		dst := filepath.Join(t.TempDir(), "resumed")
		for _, eager := range []bool{false, true} {
			_, err := ResumeStore(ctx, ResumeOptions{From: where("ws1"), Store: dst, Eager: eager})
			if !errors.Is(err, hibernate.ErrUnsigned) {
				t.Fatalf("%s (eager %v): resume: %v, want refused as unsigned", name, eager, err)
			}
			if m, _ := filepath.Glob(dst + "*"); len(m) > 0 {
				t.Fatalf("%s: a refused resume left %v", name, m)
			}
		}
	}
	t.Run("forged image", func(t *testing.T) {
		// The attacker's own upload: right format, chunks and all.
		if _, _, err := hibernate.Upload(ctx, c, loc("ws1"), hostile, hibernate.UploadOptions{StoreID: "forged", Holder: "x"}); err == nil {
			t.Fatal("an upload over another store's image went through")
		}
		if _, _, err := hibernate.Upload(ctx, c, loc("evil"), hostile, hibernate.UploadOptions{StoreID: "forged"}); err != nil {
			t.Fatal(err)
		}
		srv.Put(t, bucket, "ws1/manifest.json", srv.Get(t, bucket, "evil/manifest.json"))
		copyObjects(t, c, bucket, "evil", "ws1")
		resume(t, "forged")
	})
	t.Run("signed with the attacker's key", func(t *testing.T) {
		if _, _, err := hibernate.Upload(ctx, c, loc("evil2"), hostile, hibernate.UploadOptions{StoreID: "forged", Key: []byte("0123456789abcdef0123456789abcdef")}); err != nil {
			t.Fatal(err)
		}
		copyObject(t, c, bucket, "evil2/manifest.json", "ws1/manifest.json")
		resume(t, "attacker's key")
	})
	t.Run("another workspace's image moved here", func(t *testing.T) {
		copyObject(t, c, bucket, "ws2/manifest.json", "ws1/manifest.json")
		copyObjects(t, c, bucket, "ws2", "ws1")
		resume(t, "moved")
	})
	t.Run("the real image, altered", func(t *testing.T) {
		copyObject(t, c, bucket, "ws2/manifest.json", "ws1/manifest.json")
		// The real one's signature on other bytes: metadata kept, body
		// replaced through a copy with the old metadata.
		putWithMeta(t, c, bucket, "ws1/manifest.json", []byte(strings.Replace(string(real1), `"host":"`, `"host":"x`, 1)), metaOf(t, c, bucket, "ws2/manifest.json"))
		resume(t, "altered")
	})
	t.Run("the real image", func(t *testing.T) {
		srv.Put(t, bucket, "ws1/manifest.json", real1) // no metadata: unsigned
		resume(t, "the real bytes without their signature")
		dst := filepath.Join(t.TempDir(), "resumed")
		if _, err := ResumeStore(ctx, ResumeOptions{From: where("ws2"), Store: dst}); err != nil {
			t.Fatalf("the real image of ws2: %v", err)
		}
		if _, err := os.Stat(filepath.Join(dst, "db")); err != nil {
			t.Fatal(err)
		}
	})
}

func copyObject(t *testing.T, c *s3.Client, bucket, from, to string) {
	t.Helper()
	if _, err := c.CopyObject(context.Background(), &s3.CopyObjectInput{Bucket: &bucket, Key: &to, CopySource: aws.String(bucket + "/" + from)}); err != nil {
		t.Fatalf("copy %s to %s: %v", from, to, err)
	}
}

func copyObjects(t *testing.T, c *s3.Client, bucket, from, to string) {
	t.Helper()
	out, err := c.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: aws.String(from + "/objects/")})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range out.Contents {
		copyObject(t, c, bucket, *o.Key, to+strings.TrimPrefix(*o.Key, from))
	}
}

func metaOf(t *testing.T, c *s3.Client, bucket, key string) map[string]string {
	t.Helper()
	out, err := c.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: &bucket, Key: &key})
	if err != nil {
		t.Fatal(err)
	}
	if out.Metadata[hibernate.MACMeta] == "" {
		t.Fatalf("%s has no signature: %v", key, out.Metadata)
	}
	return out.Metadata
}

func putWithMeta(t *testing.T, c *s3.Client, bucket, key string, b []byte, meta map[string]string) {
	t.Helper()
	if _, err := c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: strings.NewReader(string(b)), Metadata: meta}); err != nil {
		t.Fatal(err)
	}
}

// TestHibernateInsideSourceAttack: an image in the key space of one of
// the workspace's own S3 sources would be the agent's to read (the raw
// store: denied files too) and to overwrite (write-back). Hibernate
// refuses every such location and takes the others.
func TestHibernateInsideSourceAttack(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	srv.SetEnv(t)
	for _, c := range []struct {
		prefix, to string
		refused    bool
	}{
		{"shared", "shared/img", true},
		{"shared/", "shared", true},
		{"shared/ws", "shared", true},
		{"", "img", true},
		{"/shared", "shared/img", true},
		{"shared", "", true},
		// An import lists keys by the raw prefix: "shared" reads
		// sharedx/... too.
		{"shared", "sharedx/img", true},
		{"shared/", "sharedx/img", false},
		{"shared/a", "shared/b", false},
	} {
		store := filepath.Join(t.TempDir(), "s")
		st, err := kv.Open(store, kv.Options{Ballast: -1, MinFree: -1})
		if err != nil {
			t.Fatal(err)
		}
		sp, _ := json.Marshal(map[string]any{"sources": []any{map[string]any{"path": "data", "s3": map[string]any{"bucket": bucket, "prefix": c.prefix, "write_back": true}}}})
		st.SetMeta("spec", sp)
		st.Close()
		url := "s3://" + bucket
		if c.to != "" {
			url += "/" + c.to
		}
		_, err = Hibernate(context.Background(), HibernateOptions{Store: store, To: Where{URL: url, Endpoint: srv.Endpoint}, KeepLocal: true})
		if refused := err != nil && strings.Contains(err.Error(), "shares keys with the workspace's S3 source"); refused != c.refused {
			t.Errorf("source prefix %q, image at %q: %v", c.prefix, url, err)
		}
	}
}

// bucketObject is an object as whoever can read the bucket saves it.
type bucketObject struct {
	body []byte
	meta map[string]string
}

// saveImage saves every object under prefix (manifest, lease, chunks),
// with their metadata (the signatures).
func saveImage(t *testing.T, c *s3.Client, bucket, prefix string) map[string]bucketObject {
	t.Helper()
	ctx := context.Background()
	out, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: aws.String(prefix + "/")})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]bucketObject{}
	for _, o := range out.Contents {
		g, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: o.Key})
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(g.Body)
		g.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		m[*o.Key] = bucketObject{b, g.Metadata}
	}
	return m
}

// putBack writes saved objects back, each with its metadata, those whose
// key ends with one of names (all if none).
func putBack(t *testing.T, c *s3.Client, bucket string, saved map[string]bucketObject, names ...string) {
	t.Helper()
	for k, o := range saved {
		ok := len(names) == 0
		for _, n := range names {
			ok = ok || strings.HasSuffix(k, n)
		}
		if ok {
			putWithMeta(t, c, bucket, k, o.body, o.meta)
		}
	}
}

// storeFile reads (or, with data, writes) the workspace file p of a
// closed store.
func storeFile(t *testing.T, store, p string, data []byte) string {
	t.Helper()
	st, err := kv.Open(store, kv.Options{Ballast: -1, MinFree: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	w := wsfs.New(st, wsfs.Owner{})
	if data != nil {
		if err := w.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := w.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestImageReplayAttack: whoever can read and write the bucket saves a
// workspace's image (manifest with its signature, chunks, lease) and,
// after the workspace hibernated again, puts the older one back. A
// resume refuses it (hibernate.ErrRolledBack), on a host that never saw
// the location too, as long as the lease it finds is the one the newer
// hibernate released (it names the newer generation, signed); on a host
// that wrote or resumed the newer image also when the attacker puts back
// or deletes the lease; and the kept copy of the older image, whose
// manifest ETag the replay brings back, is refused too. --allow-rollback
// takes the older image, and its next hibernate is numbered above every
// generation seen.
func TestImageReplayAttack(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	srv.SetEnv(t)
	ctx := context.Background()
	url := "s3://" + bucket + "/ws"
	host := func() Where {
		return Where{URL: url, Endpoint: srv.Endpoint, Generations: filepath.Join(t.TempDir(), "generations")}
	}
	hostA, hostB := host(), host()
	loc := hibernate.Location{Bucket: bucket, Prefix: "ws", Endpoint: srv.Endpoint, Region: srv.Region}
	c, err := hibernate.NewClient(ctx, loc, nil)
	if err != nil {
		t.Fatal(err)
	}
	generation := func() uint64 {
		m, _, err := hibernate.ReadManifest(ctx, c, loc)
		if err != nil {
			t.Fatal(err)
		}
		return m.Generation
	}

	// Host A: the workspace at v1, hibernated, its store kept.
	storeA := filepath.Join(t.TempDir(), "a")
	st, err := kv.Open(storeA, kv.Options{Ballast: -1, MinFree: -1})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	storeFile(t, storeA, "state", []byte("v1: before the secret was rotated\n"))
	if _, err := Hibernate(ctx, HibernateOptions{Store: storeA, To: hostA, KeepLocal: true}); err != nil {
		t.Fatal(err)
	}
	v1 := saveImage(t, c, bucket, "ws")
	// Host B resumes it, goes on to v2, hibernates.
	storeB := filepath.Join(t.TempDir(), "b")
	if _, err := ResumeStore(ctx, ResumeOptions{From: hostB, Store: storeB, Eager: true}); err != nil {
		t.Fatal(err)
	}
	storeFile(t, storeB, "state", []byte("v2: rotated\n"))
	if _, err := Hibernate(ctx, HibernateOptions{Store: storeB, To: hostB}); err != nil {
		t.Fatal(err)
	}
	if g := generation(); g != 2 {
		t.Fatalf("generation after two hibernates: %d", g)
	}
	v2 := saveImage(t, c, bucket, "ws")

	refused := func(t *testing.T, name string, o ResumeOptions) {
		t.Helper()
		if o.Store == "" {
			o.Store = filepath.Join(t.TempDir(), "resumed")
		}
		_, err := ResumeStore(ctx, o)
		if !errors.Is(err, hibernate.ErrRolledBack) {
			t.Fatalf("%s: resume of the older image: %v, want refused as rolled back", name, err)
		}
		if l, err := hibernate.ReadLease(ctx, c, loc); err != nil || l == nil || !l.Released {
			t.Fatalf("%s: the lease was not given back: %+v, %v", name, l, err)
		}
	}
	t.Run("manifest and chunks put back", func(t *testing.T) {
		putBack(t, c, bucket, v1)
		putBack(t, c, bucket, v2, "/lease") // the lease the v2 hibernate released
		refused(t, "a host that never saw ws", ResumeOptions{From: host()})
		refused(t, "host B", ResumeOptions{From: hostB})
		refused(t, "host A's kept copy", ResumeOptions{From: hostA, Store: storeA})
		if got := storeFile(t, storeA, "state", nil); !strings.HasPrefix(got, "v1") {
			t.Fatalf("the kept copy changed: %q", got)
		}
	})
	t.Run("lease put back too", func(t *testing.T) {
		putBack(t, c, bucket, v1)
		refused(t, "host B", ResumeOptions{From: hostB, Eager: true})
	})
	t.Run("lease deleted", func(t *testing.T) {
		putBack(t, c, bucket, v1)
		if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: aws.String("ws/lease")}); err != nil {
			t.Fatal(err)
		}
		refused(t, "host B", ResumeOptions{From: hostB})
	})
	t.Run("the newest image", func(t *testing.T) {
		putBack(t, c, bucket, v2)
		for _, o := range []ResumeOptions{{From: hostA}, {From: hostB}, {From: host()}} {
			dst := filepath.Join(t.TempDir(), "resumed")
			o.Store = dst
			if _, err := ResumeStore(ctx, o); err != nil {
				t.Fatalf("resume of the newest image: %v", err)
			}
			if got := storeFile(t, dst, "state", nil); !strings.HasPrefix(got, "v2") {
				t.Fatalf("resumed %q", got)
			}
			if _, err := Hibernate(ctx, HibernateOptions{Store: dst, To: o.From}); err != nil {
				t.Fatal(err)
			}
		}
		if g := generation(); g != 5 {
			t.Fatalf("generation %d, want 5", g)
		}
	})
	t.Run("allow rollback", func(t *testing.T) {
		putBack(t, c, bucket, v1)
		dst := filepath.Join(t.TempDir(), "resumed")
		if _, err := ResumeStore(ctx, ResumeOptions{From: hostB, Store: dst, AllowRollback: true}); err != nil {
			t.Fatalf("resume with AllowRollback: %v", err)
		}
		if got := storeFile(t, dst, "state", nil); !strings.HasPrefix(got, "v1") {
			t.Fatalf("resumed %q", got)
		}
		if _, err := Hibernate(ctx, HibernateOptions{Store: dst, To: hostB}); err != nil {
			t.Fatal(err)
		}
		if g := generation(); g != 5 {
			t.Fatalf("the rolled-back image's next hibernate: generation %d, want 5 (above every one host B saw, 4)", g)
		}
	})
}

// TestForgedLeaseAttack: whoever can write the bucket writes a lease of
// its own (far expiry) where a workspace hibernated, or copies another
// workspace's live signed lease there, to keep the workspace from
// resuming. The lease is not signed with the image key for this
// location: the resume takes it over with a warning; so does the
// hibernate of the resumed store when one is written under it. A signed
// live lease still fences a second resume.
func TestForgedLeaseAttack(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	srv.SetEnv(t)
	ctx := context.Background()
	where := func(p string) Where { return Where{URL: "s3://" + bucket + "/" + p, Endpoint: srv.Endpoint} }
	for _, p := range []string{"ws1", "ws2"} {
		store := filepath.Join(t.TempDir(), p)
		st, err := kv.Open(store, kv.Options{Ballast: -1, MinFree: -1})
		if err != nil {
			t.Fatal(err)
		}
		st.Close()
		if _, err := Hibernate(ctx, HibernateOptions{Store: store, To: where(p)}); err != nil {
			t.Fatal(err)
		}
	}
	var logs strings.Builder
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))
	warned := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(logs.String(), "not signed with this host's image key")
	}
	evil, _ := json.Marshal(map[string]any{"holder": "evil", "host": "attacker", "expires": time.Now().Add(time.Hour).UTC()})
	// ws2 resumed and held: its lease is live and signed, for ws2.
	held2 := filepath.Join(t.TempDir(), "held2")
	if _, err := ResumeStore(ctx, ResumeOptions{From: where("ws2"), Store: held2}); err != nil {
		t.Fatal(err)
	}
	for name, forge := range map[string]func(t *testing.T){
		"written by the attacker": func(t *testing.T) { srv.Put(t, bucket, "ws1/lease", evil) },
		"another workspace's live lease": func(t *testing.T) {
			putWithMeta(t, srv.Client(t), bucket, "ws1/lease", srv.Get(t, bucket, "ws2/lease"), metaOf(t, srv.Client(t), bucket, "ws2/lease"))
		},
	} {
		t.Run(name, func(t *testing.T) {
			forge(t)
			dst := filepath.Join(t.TempDir(), "resumed")
			mu.Lock()
			logs.Reset()
			mu.Unlock()
			if _, err := ResumeStore(ctx, ResumeOptions{From: where("ws1"), Store: dst, Logger: logger}); err != nil {
				t.Fatalf("resume over a forged lease: %v", err)
			}
			if !warned() {
				t.Errorf("no warning of the forged lease: %s", logs.String())
			}
			// A second resume is fenced by the real lease.
			var held *hibernate.HeldError
			if _, err := ResumeStore(ctx, ResumeOptions{From: where("ws1"), Store: filepath.Join(t.TempDir(), "second")}); !errors.As(err, &held) {
				t.Fatalf("a second resume while the first holds the lease: %v", err)
			}
			forge(t)
			if _, err := Hibernate(ctx, HibernateOptions{Store: dst, Logger: logger}); err != nil {
				t.Fatalf("hibernate with a forged lease in place of its own: %v", err)
			}
		})
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestHibernateFailedAtManifest: a hibernate whose manifest write fails
// (the server refuses it every time) leaves its lease naming the image
// that is still there, so once the lease expires the workspace resumes
// elsewhere (a lease that named the generation never written would
// refuse it as rolled back).
func TestHibernateFailedAtManifest(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	srv.SetEnv(t)
	ctx := context.Background()
	url := "s3://" + bucket + "/ws"
	host := func() Where {
		return Where{URL: url, Endpoint: srv.Endpoint, Generations: filepath.Join(t.TempDir(), "generations")}
	}
	a := filepath.Join(t.TempDir(), "a")
	st, err := kv.Open(a, kv.Options{Ballast: -1, MinFree: -1})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	storeFile(t, a, "state", []byte("v1\n"))
	if _, err := Hibernate(ctx, HibernateOptions{Store: a, To: host()}); err != nil {
		t.Fatal(err)
	}
	b := filepath.Join(t.TempDir(), "b")
	hostB := host()
	if _, err := ResumeStore(ctx, ResumeOptions{From: hostB, Store: b, LeaseTTL: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	storeFile(t, b, "state", []byte("v2\n"))
	ft := faultnet.New(http.DefaultTransport.(*http.Transport).Clone())
	ft.Add(faultnet.Match(http.MethodPut, "/manifest.json").Status(500))
	failing := hostB
	failing.HTTPClient = ft.Client()
	if _, err := Hibernate(ctx, HibernateOptions{Store: b, To: failing, LeaseTTL: 2 * time.Second}); err == nil {
		t.Fatal("the hibernate went through with every manifest write refused")
	}
	time.Sleep(3 * time.Second) // the lease B left expires
	c := filepath.Join(t.TempDir(), "c")
	if _, err := ResumeStore(ctx, ResumeOptions{From: host(), Store: c}); err != nil {
		t.Fatalf("resume after a hibernate that failed at its manifest: %v", err)
	}
	if got := storeFile(t, c, "state", nil); got != "v1\n" {
		t.Fatalf("resumed %q", got)
	}
}
