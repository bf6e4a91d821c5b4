package syncer

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/computerfs/computerfs/internal/faultnet"
	"github.com/computerfs/computerfs/internal/s3test"
	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/sources"
	"github.com/computerfs/computerfs/spec"
	"github.com/computerfs/computerfs/wsfs"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// env is a workspace imported from an S3 prefix, with a syncer for it.
type env struct {
	t      testing.TB
	srv    *s3test.Server
	bucket string
	prefix string
	spec   *spec.Spec
	st     *kv.Store
	fs     *wsfs.FS
	ft     *faultnet.Transport // carries the syncer's and fetcher's requests
	target *S3Target
	sy     *Syncer
	dir    string
}

type envOpts struct {
	objects  map[string]string // key below the prefix -> content
	mode     Conditional
	partSize int64
	debounce time.Duration
	lazy     bool
	// retention and trimEvery: as Options' Retention and TrimEvery.
	retention, trimEvery time.Duration
}

func newEnv(t testing.TB, o envOpts) *env {
	t.Helper()
	e := &env{t: t, srv: s3test.Start(t), prefix: "p/"}
	e.srv.SetEnv(t)
	e.bucket = e.srv.NewBucket(t)
	for k, v := range o.objects {
		e.srv.Put(t, e.bucket, e.prefix+k, []byte(v))
	}
	yaml := fmt.Sprintf("sources:\n  - path: /s\n    s3: {bucket: %s, prefix: %s, endpoint: %q, path_style: true, lazy: %v, write_back: true}\n",
		e.bucket, e.prefix, e.srv.Endpoint, o.lazy)
	sp, err := spec.Parse([]byte(yaml), "test.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e.spec = sp
	e.dir = t.TempDir() + "/store"
	e.ft = faultnet.New(nil)
	e.open(o)
	im := &sources.Importer{Store: e.st, Spec: sp, Log: quiet(), Owner: wsfs.Owner{UID: 1000, GID: 1000}}
	if err := im.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.newSyncer(o)
	return e
}

func (e *env) open(o envOpts) {
	st, err := kv.Open(e.dir, kv.Options{Logger: quiet()})
	if err != nil {
		e.t.Fatal(err)
	}
	e.st = st
	e.t.Cleanup(func() { st.Close() })
	e.fs = wsfs.New(st, wsfs.Owner{})
	st.SetFetcher(sources.NewFetcher(e.spec, e.ft.Client()).Fetch)
}

func (e *env) newSyncer(o envOpts) {
	client, err := sources.NewS3Client(context.Background(), e.spec.Sources[0].S3, e.ft.Client())
	if err != nil {
		e.t.Fatal(err)
	}
	e.target = &S3Target{Client: client, Bucket: e.bucket, Mode: o.mode, PartSize: o.partSize}
	sy, err := New(Options{FS: e.fs, Log: quiet(), Debounce: o.debounce, MinBackoff: 10 * time.Millisecond,
		Retention: o.retention, TrimEvery: o.trimEvery,
		Sources: []Source{{Index: 0, Path: "/s", Kind: "s3", Prefix: e.prefix, Target: e.target}}})
	if err != nil {
		e.t.Fatal(err)
	}
	e.sy = sy
	e.t.Cleanup(sy.Close)
}

// restart closes the store and opens it again with a new syncer, as a
// daemon restarted after a crash would.
func (e *env) restart(o envOpts) {
	e.sy.Close()
	if err := e.st.Close(); err != nil {
		e.t.Fatal(err)
	}
	e.open(o)
	e.newSyncer(o)
}

func (e *env) sync() SourceReport     { e.t.Helper(); return syncOne(e.t, e.sy) }
func (e *env) mustSync() SourceReport { e.t.Helper(); return mustSyncOne(e.t, e.sy) }

// syncOne runs a pass of a syncer of one source and returns its report.
func syncOne(t testing.TB, sy *Syncer) SourceReport {
	t.Helper()
	rep := sy.Sync(context.Background())
	if len(rep.Sources) != 1 {
		t.Fatalf("sync: %+v", rep)
	}
	return rep.Sources[0]
}

// mustSyncOne is syncOne for a pass that must end without errors or
// conflicts.
func mustSyncOne(t testing.TB, sy *Syncer) SourceReport {
	t.Helper()
	r := syncOne(t, sy)
	if len(r.Errors) > 0 || len(r.Conflicts) > 0 {
		t.Fatalf("sync: %+v", r)
	}
	return r
}

// bucket returns every object below the prefix, read with the SDK directly.
func (e *env) bucketFiles() map[string]string {
	e.t.Helper()
	c := e.srv.Client(e.t)
	out := map[string]string{}
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: &e.bucket, Prefix: &e.prefix})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			e.t.Fatal(err)
		}
		for _, o := range page.Contents {
			k := aws.ToString(o.Key)
			out[strings.TrimPrefix(k, e.prefix)] = string(e.srv.Get(e.t, e.bucket, k))
		}
	}
	return out
}

// wsFiles returns every regular file below /s in the workspace.
func (e *env) wsFiles() map[string]string {
	e.t.Helper()
	out := map[string]string{}
	var walk func(dir, rel string)
	walk = func(dir, rel string) {
		var ents []kv.Dirent
		if err := e.fs.ReadDir(dir, "", func(d kv.Dirent) bool { ents = append(ents, d); return true }); err != nil {
			e.t.Fatal(err)
		}
		for _, d := range ents {
			p, r := path.Join(dir, d.Name), path.Join(rel, d.Name)
			switch d.Type {
			case kv.S_IFDIR:
				walk(p, r)
			case kv.S_IFREG:
				b, err := e.fs.ReadFile(p)
				if err != nil {
					e.t.Fatal(err)
				}
				out[r] = string(b)
			}
		}
	}
	walk("/s", "")
	return out
}

// same fails the test unless the bucket holds exactly the workspace's files.
func (e *env) same() {
	e.t.Helper()
	b, w := e.bucketFiles(), e.wsFiles()
	if d := diff(b, w); d != "" {
		e.t.Fatalf("bucket and workspace differ:\n%s", d)
	}
}

func diff(b, w map[string]string) string {
	var out []string
	for k, v := range w {
		bv, ok := b[k]
		switch {
		case !ok:
			out = append(out, "missing in the bucket: "+k)
		case bv != v:
			out = append(out, fmt.Sprintf("%s: bucket %q, workspace %q", k, short(bv), short(v)))
		}
	}
	for k := range b {
		if _, ok := w[k]; !ok {
			out = append(out, "only in the bucket: "+k)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

func short(s string) string {
	if len(s) > 40 {
		return fmt.Sprintf("%s...(%d bytes)", s[:40], len(s))
	}
	return s
}

func (e *env) write(p, data string) {
	e.t.Helper()
	if err := e.fs.MkdirAll(path.Dir(p), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := e.fs.WriteFile(p, []byte(data), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

func check(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// puts counts the PUT requests (object puts and parts) that reach the server.
func (e *env) countPuts() *faultnet.Rule {
	return e.ft.Add(faultnet.MatchFunc(func(r *http.Request) bool { return r.Method == http.MethodPut }))
}

// syncTimeout syncs with a deadline per pass.
func (e *env) syncTimeout(d time.Duration) SourceReport {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	rep := e.sy.Sync(ctx)
	return rep.Sources[0]
}
