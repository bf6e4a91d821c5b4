package sources

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/computerfs/computerfs/internal/s3test"
	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/spec"
)

// TestS3FetchGetter: lazy fetches take the light GET (signed here, not by
// GetObject) for a plain endpoint, and it gets keys that need escaping,
// refuses an object deleted since the import and reports refused
// credentials as the SDK's path does.
func TestS3FetchGetter(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	bucket := srv.NewBucket(t)
	keys := []string{"sp ace", "plus+sign", "pct%20x", "q?x", "hash#y", "ümlaut/é", "a=b&c;d", "star*(1)", "tilde~'!", "dollar$@,:"}
	for _, k := range keys {
		srv.Put(t, bucket, "e/"+k, []byte("content of "+k))
	}
	sp := parse(t, fmt.Sprintf("sources:\n  - path: /d\n    s3: {bucket: %s, prefix: e/, endpoint: %q, path_style: true}\n", bucket, srv.Endpoint))
	s, fs := mustImport(t, sp, nil)
	f := NewFetcher(sp, nil)
	s.SetFetcher(f.Fetch)
	for _, k := range keys {
		if d, err := fs.ReadFile("/d/" + k); err != nil || string(d) != "content of "+k {
			t.Errorf("%q: %q, %v", k, d, err)
		}
	}
	if src := f.sources[0]; src == nil || src.getter == nil {
		t.Fatal("the fetches did not take the light GET")
	}

	s2, fs2 := mustImport(t, sp, nil)
	s2.SetFetcher(NewFetcher(sp, nil).Fetch)
	if _, err := srv.Client(t).DeleteObject(context.Background(), deleteInput(bucket, "e/"+keys[1])); err != nil {
		t.Fatal(err)
	}
	if _, err := fs2.ReadFile("/d/" + keys[1]); err == nil || !strings.Contains(err.Error(), "changed at the source") {
		t.Fatalf("read of an object deleted since the import: %v", err)
	}

	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong")
	s2.SetFetcher(NewFetcher(sp, nil).Fetch)
	if _, err := fs2.ReadFile("/d/" + keys[2]); err == nil || !strings.Contains(err.Error(), "refused the credentials") || kv.Errno(unwrap(err)) != 5 {
		t.Fatalf("read with a wrong secret: %v", err)
	}
}

// TestObjectGetterEndpoint: the bucket's endpoint is resolved once, as the
// SDK would for each request: virtual-hosted on AWS, in the path when
// path_style asks.
func TestObjectGetterEndpoint(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKID")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	for _, c := range []struct {
		s3   spec.S3
		want string
	}{
		{spec.S3{Bucket: "bkt", Region: "eu-west-3"}, "https://bkt.s3.eu-west-3.amazonaws.com"},
		{spec.S3{Bucket: "bkt", Region: "eu-west-3", PathStyle: true}, "https://s3.eu-west-3.amazonaws.com/bkt"},
		{spec.S3{Bucket: "bkt", Endpoint: "http://127.0.0.1:9/x", PathStyle: true}, "http://127.0.0.1:9/x/bkt"},
	} {
		cl, err := NewS3Client(context.Background(), &c.s3, nil)
		if err != nil {
			t.Fatal(err)
		}
		g := newObjectGetter(context.Background(), cl, c.s3.Bucket)
		if g == nil {
			t.Fatalf("%+v: no light GET", c.s3)
		}
		if got := g.base.String(); got != c.want {
			t.Errorf("%+v: endpoint %s, want %s", c.s3, got, c.want)
		}
	}
}
