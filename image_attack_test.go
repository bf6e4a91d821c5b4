package computerfs

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/computerfs/computerfs/hibernate"
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
