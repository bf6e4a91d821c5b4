package sources

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/computerfs/computerfs/internal/faultnet"
	"github.com/computerfs/computerfs/internal/gittest"
	"github.com/computerfs/computerfs/internal/s3test"
	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/spec"
	"github.com/computerfs/computerfs/wsfs"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newStore(t testing.TB) *kv.Store {
	t.Helper()
	s, err := kv.Open(t.TempDir()+"/store", kv.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// runImport imports sp into a new store and returns the store, or the error.
func runImport(t testing.TB, sp *spec.Spec, hc *http.Client) (*kv.Store, error) {
	t.Helper()
	s := newStore(t)
	im := &Importer{Store: s, Spec: sp, Log: quiet(), HTTPClient: hc, Owner: wsfs.Owner{UID: 1000, GID: 1000}}
	return s, im.Run(context.Background())
}

func mustImport(t testing.TB, sp *spec.Spec, hc *http.Client) (*kv.Store, *wsfs.FS) {
	t.Helper()
	s, err := runImport(t, sp, hc)
	if err != nil {
		t.Fatalf("import: %v", err)
	}
	return s, wsfs.New(s, wsfs.Owner{})
}

func parse(t testing.TB, yaml string) *spec.Spec {
	t.Helper()
	sp, err := spec.Parse([]byte(yaml), "test.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// upstream is a source of one kind for the shared suite: it makes a
// remote holding files and the spec entry that imports it.
type upstream interface {
	name() string
	make(t *testing.T, files map[string]string) (yaml string, hc *http.Client)
}

// gitUpstream clones over file:// or HTTP, with the git command line or
// (gogit) with go-git.
type gitUpstream struct{ http, gogit bool }

func (g gitUpstream) name() string {
	n := "git-file"
	if g.http {
		n = "git-http"
	}
	if g.gogit {
		n += "-gogit"
	}
	return n
}

func (g gitUpstream) make(t *testing.T, files map[string]string) (string, *http.Client) {
	if g.gogit {
		t.Setenv("COMPUTERFS_NO_GIT_CLI", "1")
	}
	repo := gittest.NewRepo(t, files)
	url := "file://" + repo
	if g.http {
		url = gittest.ServeHTTP(t, gittest.Bare(t, repo))
	}
	return fmt.Sprintf("git: {url: %q}", url), nil
}

type s3Upstream struct{ lazy bool }

func (u s3Upstream) name() string {
	if u.lazy {
		return "s3-lazy"
	}
	return "s3-eager"
}

func (u s3Upstream) make(t *testing.T, files map[string]string) (string, *http.Client) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	bucket := srv.NewBucket(t)
	for k, v := range files {
		srv.Put(t, bucket, "pre/"+k, []byte(v))
	}
	srv.Put(t, bucket, "elsewhere/x", []byte("not under the prefix"))
	return fmt.Sprintf("s3: {bucket: %s, prefix: pre/, endpoint: %q, region: %s, path_style: true, lazy: %v}",
		bucket, srv.Endpoint, srv.Region, u.lazy), nil
}

// TestSourceSuite runs the checks every source kind must pass: the files
// arrive with their content, each remembers its origin, and an untouched
// file counts as unchanged while an edited one does not.
func TestSourceSuite(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	blob := make([]byte, 3*kv.ChunkSize+17)
	for i := range blob {
		blob[i] = byte(rng.IntN(256))
	}
	files := map[string]string{
		"a.txt":             "alpha\n",
		"dir/b.txt":         "beta\n",
		"dir/sub/c.bin":     string(blob),
		"dir/sub/empty":     "",
		"with space/ü.md":   "unicode\n",
		"deep/1/2/3/4/f.go": "package f\n",
	}
	for _, u := range []upstream{gitUpstream{}, gitUpstream{http: true}, gitUpstream{gogit: true}, gitUpstream{http: true, gogit: true},
		s3Upstream{lazy: true}, s3Upstream{}} {
		t.Run(u.name(), func(t *testing.T) {
			entry, hc := u.make(t, files)
			sp := parse(t, "sources:\n  - path: /src/x\n    "+entry+"\n  - path: /note\n    content: hi\n")
			if u, ok := u.(s3Upstream); ok && u.lazy {
				// The eager suite downloads at import; the lazy one must not.
				ft := faultnet.New(nil)
				gets := ft.Add(faultnet.Match("GET", "/pre/"))
				hc = ft.Client()
				defer func() {
					if n := gets.Requests(); n != 0 {
						t.Errorf("a lazy import made %d object GETs", n)
					}
				}()
			}
			s, fs := mustImport(t, sp, hc)
			s.SetFetcher(NewFetcher(sp, nil).Fetch)
			var got []string
			walk(t, fs, "/src/x", func(p string, a kv.Attr) {
				if path.Base(p) == ".git" {
					return
				}
				got = append(got, strings.TrimPrefix(p, "/src/x/"))
			})
			var want []string
			for k := range files {
				want = append(want, k)
			}
			sort.Strings(want)
			if strings.Join(got, "|") != strings.Join(want, "|") {
				t.Fatalf("imported files\n%q\nwant\n%q", got, want)
			}
			for k, v := range files {
				p := "/src/x/" + k
				ino, a, err := fs.Resolve(p)
				if err != nil {
					t.Fatal(err)
				}
				if a.Uid != 1000 || a.Gid != 1000 || a.Mode&0o777 != 0o644 {
					t.Errorf("%s: owner %d:%d mode %o", k, a.Uid, a.Gid, a.Mode)
				}
				o, err := s.Origin(ino)
				if err != nil || o.Source != 0 || !strings.HasSuffix(o.Key, k) || o.ID == "" && v != "" || !o.Unchanged(&a) {
					t.Errorf("%s: origin %+v, %v", k, o, err)
				}
				data, err := fs.ReadFile(p)
				if err != nil || string(data) != v {
					t.Fatalf("%s: read %d bytes (%v), want %d", k, len(data), err, len(v))
				}
				a2, _ := fs.Stat(p)
				if !o.Unchanged(&a2) {
					t.Errorf("%s: reading counted as a change", k)
				}
			}
			if err := fs.WriteFile("/src/x/a.txt", []byte("edited"), 0); err != nil {
				t.Fatal(err)
			}
			ino, a, _ := fs.Resolve("/src/x/a.txt")
			if o, _ := s.Origin(ino); o.Unchanged(&a) {
				t.Error("an edited file counts as unchanged")
			}
			if d, _ := fs.ReadFile("/note"); string(d) != "hi" {
				t.Errorf("inline file: %q", d)
			}
			if p, err := s.Check(10); err != nil || len(p) > 0 {
				t.Fatalf("fsck: %v %q", err, p)
			}
		})
	}
}

// walk calls fn for every regular file under dir, in name order.
func walk(t testing.TB, fs *wsfs.FS, dir string, fn func(p string, a kv.Attr)) {
	t.Helper()
	var ents []kv.Dirent
	if err := fs.ReadDir(dir, "", func(d kv.Dirent) bool { ents = append(ents, d); return true }); err != nil {
		t.Fatal(err)
	}
	for _, d := range ents {
		p := path.Join(dir, d.Name)
		switch d.Type {
		case kv.S_IFDIR:
			if d.Name != ".git" {
				walk(t, fs, p, fn)
			}
		case kv.S_IFREG:
			a, err := fs.Lstat(p)
			if err != nil {
				t.Fatal(err)
			}
			fn(p, a)
		}
	}
}

// TestGitRefs checks out branches, tags and commits, shallow or not, with
// the git command line and with go-git.
func TestGitRefs(t *testing.T) {
	t.Run("cli", testGitRefs)
	t.Run("gogit", func(t *testing.T) {
		t.Setenv("COMPUTERFS_NO_GIT_CLI", "1")
		testGitRefs(t)
	})
}

func testGitRefs(t *testing.T) {
	repo := gittest.NewRepo(t, map[string]string{"v": "1", "run.sh": "#!/bin/sh\n"})
	if err := os.Chmod(repo+"/run.sh", 0o755); err != nil {
		t.Fatal(err)
	}
	first := gittest.Commit(t, repo, map[string]string{"v": "1"}, "exec bit")
	gittest.Tag(t, repo, "v1")
	gittest.Commit(t, repo, map[string]string{"v": "2"}, "two")
	gittest.Branch(t, repo, "feature")
	gittest.Git(t, repo, "checkout", "-q", "feature")
	gittest.Commit(t, repo, map[string]string{"v": "feature"}, "on feature")
	gittest.Git(t, repo, "checkout", "-q", "main")
	last := gittest.Commit(t, repo, map[string]string{"v": "3"}, "three")

	for _, tc := range []struct{ ref, depth, want, head string }{
		{"", "0", "3", "ref: refs/heads/main"},
		{"main", "1", "3", "ref: refs/heads/main"},
		{"feature", "0", "feature", "ref: refs/heads/feature"},
		{"v1", "0", "1", first},
		{"refs/tags/v1", "1", "1", first},
		{first, "0", "1", first},
		{last, "0", "3", last},
	} {
		t.Run(tc.ref+"@"+tc.depth, func(t *testing.T) {
			sp := parse(t, fmt.Sprintf("sources:\n  - path: /r\n    git: {url: %q, ref: %q, depth: %s}\n", repo, tc.ref, tc.depth))
			_, fs := mustImport(t, sp, nil)
			if v, _ := fs.ReadFile("/r/v"); string(v) != tc.want {
				t.Fatalf("v = %q, want %q", v, tc.want)
			}
			if head, _ := fs.ReadFile("/r/.git/HEAD"); strings.TrimSpace(string(head)) != tc.head {
				t.Fatalf("HEAD = %q, want %q", head, tc.head)
			}
			if a, err := fs.Stat("/r/run.sh"); err != nil || a.Mode&0o111 == 0 {
				t.Fatalf("run.sh lost its exec bit: %o %v", a.Mode, err)
			}
			_, err := fs.Stat("/r/.git/shallow")
			if shallow := err == nil; shallow != (tc.depth != "0") {
				t.Fatalf("depth %s: shallow file present = %v", tc.depth, shallow)
			}
		})
	}
	for _, tc := range []struct{ ref, want string }{
		{"nope", `ref "nope" does not exist (branches: feature, main; tags: v1)`},
		{"abc123", "full 40-digit hash"},
	} {
		sp := parse(t, fmt.Sprintf("sources:\n  - path: /r\n    git: {url: %q, ref: %q}\n", repo, tc.ref))
		if _, err := runImport(t, sp, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ref %q: error %v, want %q", tc.ref, err, tc.want)
		}
	}
	sp := parse(t, fmt.Sprintf("sources:\n  - path: /r\n    git: {url: %q, ref: %q, depth: 1}\n", repo, first))
	if _, err := runImport(t, sp, nil); err == nil || !strings.Contains(err.Error(), "shallow clone") {
		t.Errorf("commit with depth: %v", err)
	}
	// A tag checks out a detached HEAD, which push takes as it is: it
	// goes to a branch of its own (computerfs/NAME) or the spec's.
	sp = parse(t, fmt.Sprintf("sources:\n  - path: /r\n    git: {url: %q, ref: v1, push: true}\n", repo))
	if _, err := runImport(t, sp, nil); err != nil {
		t.Errorf("push from a tag: %v", err)
	}
	sp = parse(t, fmt.Sprintf("sources:\n  - path: /r\n    git: {url: %q, ref: v1, push: true, branch: fix}\n", repo))
	if _, err := runImport(t, sp, nil); err != nil {
		t.Errorf("push from a tag to a branch: %v", err)
	}
}

func TestGitErrors(t *testing.T) {
	t.Run("cli", testGitErrors)
	t.Run("gogit", func(t *testing.T) {
		t.Setenv("COMPUTERFS_NO_GIT_CLI", "1")
		testGitErrors(t)
	})
}

func testGitErrors(t *testing.T) {
	repo := gittest.NewRepo(t, map[string]string{"f": "x"})
	bare := gittest.Bare(t, repo)
	url := gittest.ServeHTTPAuth(t, bare, "agent", "s3cret")
	for _, tc := range []struct {
		name, yaml, env, want string
	}{
		{"missing repository", fmt.Sprintf("git: {url: %q}", t.TempDir()+"/none"), "", "repository not found"},
		{"no token", fmt.Sprintf("git: {url: %q}", url), "", "authentication required"},
		{"wrong token", fmt.Sprintf("git: {url: %q, token_env: TOK, username: agent}", url), "wrong", "check token_env"},
		{"unset token", fmt.Sprintf("git: {url: %q, token_env: TOK_UNSET}", url), "", "token_env TOK_UNSET is not set"},
		{"ssh without key or agent", `git: {url: "ssh://git@127.0.0.1:1/r.git"}`, "", "ssh_key or a running SSH agent"},
		{"unreachable", `git: {url: "http://127.0.0.1:1/r.git"}`, "", "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("TOK", tc.env)
			t.Setenv("SSH_AUTH_SOCK", "")
			_, err := runImport(t, parse(t, "sources:\n  - path: /r\n    "+tc.yaml+"\n"), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	t.Run("right token", func(t *testing.T) {
		t.Setenv("TOK", "s3cret")
		_, fs := mustImport(t, parse(t, fmt.Sprintf("sources:\n  - path: /r\n    git: {url: %q, token_env: TOK, username: agent}\n", url)), nil)
		if d, _ := fs.ReadFile("/r/f"); string(d) != "x" {
			t.Fatalf("f = %q", d)
		}
	})
}

func TestS3Errors(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	bucket := srv.NewBucket(t)
	for i := range 30 {
		srv.Put(t, bucket, fmt.Sprintf("p/%02d", i), bytes.Repeat([]byte{'x'}, 100))
	}
	s3 := func(extra string) string {
		return fmt.Sprintf("sources:\n  - path: /d\n    s3: {bucket: %s, prefix: p/, endpoint: %q, path_style: true%s}\n", bucket, srv.Endpoint, extra)
	}
	for _, tc := range []struct {
		name, yaml, want string
		env              map[string]string
	}{
		{"missing bucket", strings.Replace(s3(""), bucket, "no-such-bucket", 1), `bucket "no-such-bucket" does not exist`, nil},
		{"too many objects", s3(", max_objects: 29"), "more than max_objects (29)", nil},
		{"too many bytes", s3(", max_bytes: 2KB"), "more than max_bytes (2000 bytes)", nil},
		{"wrong secret", s3(""), "refused the credentials", map[string]string{"AWS_SECRET_ACCESS_KEY": "wrong"}},
		{"unknown key", s3(""), "refused the credentials", map[string]string{"AWS_ACCESS_KEY_ID": "nobody"}},
		{"unreachable", strings.Replace(s3(""), srv.Endpoint, "http://127.0.0.1:1", 1), "cannot reach the S3 endpoint", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			_, err := runImport(t, parse(t, tc.yaml), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	_, fs := mustImport(t, parse(t, s3(", max_objects: 30, max_bytes: 3000")), nil)
	if a, err := fs.Stat("/d/29"); err != nil || a.Size != 100 || a.Flags&kv.FlagRemote == 0 {
		t.Fatalf("limits at the edge: %+v %v", a, err)
	}
}

func TestS3Keys(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	bucket := srv.NewBucket(t)
	for _, k := range []string{"k/a", "k/dir/", "k/dir/b", "k/x/../y"} {
		data := []byte(k)
		if strings.HasSuffix(k, "/") {
			data = nil // a directory marker
		}
		srv.Put(t, bucket, k, data)
	}
	sp := parse(t, fmt.Sprintf("sources:\n  - path: /d\n    s3: {bucket: %s, prefix: k/, endpoint: %q, path_style: true}\n", bucket, srv.Endpoint))
	s, fs := mustImport(t, sp, nil)
	s.SetFetcher(NewFetcher(sp, nil).Fetch)
	var got []string
	walk(t, fs, "/d", func(p string, _ kv.Attr) { got = append(got, p) })
	// (The server itself turns "x/../y" into "y".)
	if strings.Join(got, " ") != "/d/a /d/dir/b /d/y" {
		t.Fatalf("files %q", got)
	}
	if d, _ := fs.ReadFile("/d/dir/b"); string(d) != "k/dir/b" {
		t.Fatalf("content %q", d)
	}
}

// TestS3FetchFaults injects failures into lazy fetches: errors beyond the
// SDK's retries and truncated bodies fail the read with EIO (logged) and
// the next read tries again; an object replaced at the source is refused
// rather than mixed in.
func TestS3FetchFaults(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	bucket := srv.NewBucket(t)
	data := bytes.Repeat([]byte("0123456789"), 20000)
	for _, k := range []string{"a", "b", "c", "d"} {
		srv.Put(t, bucket, "f/"+k, data)
	}
	sp := parse(t, fmt.Sprintf("sources:\n  - path: /d\n    s3: {bucket: %s, prefix: f/, endpoint: %q, path_style: true}\n", bucket, srv.Endpoint))
	s, fs := mustImport(t, sp, nil)
	ft := faultnet.New(nil)
	fetcher := NewFetcher(sp, ft.Client())
	fetcher.Timeout = 500 * time.Millisecond // each object is under 1 MiB: the whole bound
	s.SetFetcher(fetcher.Fetch)

	read := func(p string) error {
		d, err := fs.ReadFile(p)
		if err == nil && !bytes.Equal(d, data) {
			return fmt.Errorf("%s: wrong content", p)
		}
		return err
	}
	down := ft.Add(faultnet.Match("GET", "/f/a").Status(503).Times(10))
	if err := read("/d/a"); err == nil || kv.Errno(unwrap(err)) != 5 {
		t.Fatalf("read while the server fails: %v, want EIO", err)
	}
	if down.Injected() < 2 {
		t.Fatalf("the SDK did not retry: %d failures injected", down.Injected())
	}
	ft.Remove(down)
	if err := read("/d/a"); err != nil {
		t.Fatalf("read after the server recovered: %v", err)
	}

	ft.Add(faultnet.Match("GET", "/f/b").TruncateAfter(1000).Times(1))
	if err := read("/d/b"); err == nil {
		t.Fatal("a truncated download passed")
	}
	if err := read("/d/b"); err != nil {
		t.Fatalf("read after a truncated download: %v", err)
	}

	// A server that does not answer: the fetch times out (not waiting for
	// the answer), the read fails with EIO, and the next read succeeds.
	slow := ft.Add(faultnet.Match("GET", "/f/d").Delay(time.Minute).Times(1))
	start := time.Now()
	if err := read("/d/d"); err == nil || kv.Errno(unwrap(err)) != 5 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("read from a server that does not answer: %v, want EIO from the deadline", err)
	}
	if d := time.Since(start); d < 500*time.Millisecond || d > 20*time.Second {
		t.Fatalf("the read failed after %v, want the 500 ms timeout", d)
	}
	if slow.Injected() != 1 {
		t.Fatalf("%d requests delayed, want 1 (no retry after the deadline)", slow.Injected())
	}
	if err := read("/d/d"); err != nil {
		t.Fatalf("read after a timed-out fetch: %v", err)
	}

	srv.Put(t, bucket, "f/c", []byte("replaced"))
	if err := read("/d/c"); err == nil || !strings.Contains(err.Error(), "changed at the source") {
		t.Fatalf("read of an object replaced at the source: %v", err)
	}
	if p, err := s.Check(10); err != nil || len(p) > 0 {
		t.Fatalf("fsck: %v %q", err, p)
	}
}

func unwrap(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		if next := u.Unwrap(); next != nil {
			err = next
			continue
		}
		return err
	}
}

func TestDirSource(t *testing.T) {
	dir := t.TempDir()
	gittest.WriteFiles(t, dir, map[string]string{"a": "1", "sub/b": "2"})
	sp := parse(t, fmt.Sprintf("sources:\n  - path: /n\n    dir: %q\n", dir))
	_, fs := mustImport(t, sp, nil)
	if d, _ := fs.ReadFile("/n/sub/b"); string(d) != "2" {
		t.Fatalf("copied file: %q", d)
	}
	sp = parse(t, "sources:\n  - path: /n\n    dir: /nonexistent/dir\n")
	if _, err := runImport(t, sp, nil); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("missing dir: %v", err)
	}
}

// TestS3KeyMapping feeds keys that no test server stores (names over 255
// bytes, a file and a directory of one name) to the key-to-path mapping.
func TestS3KeyMapping(t *testing.T) {
	s := newStore(t)
	im := &Importer{Store: s, Log: quiet(), fs: wsfs.New(s, wsfs.Owner{})}
	c := &spec.S3{Prefix: "p/"}
	dirs := map[string]uint64{"": kv.RootIno}
	b := objectBatch{im: im}
	// "p//b" then "p/b": one path twice in one batch (the second is skipped).
	for _, k := range []string{"p/a", "p/clash", "p/clash/c", "p/" + strings.Repeat("n", 256) + "/x", "p//b", "p/b", "p/./c", "p/x/../y", "p/../z", "p/d/", "p/d/e", "p/"} {
		if err := im.addObject(0, c, dirs, s3Object{key: k, size: 1, etag: "e"}, &b); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
	}
	if err := b.flush(); err != nil {
		t.Fatal(err)
	}
	if len(b.remote) != 4 {
		t.Fatalf("%d remote files created, want 4", len(b.remote))
	}
	var got []string
	walk(t, wsfs.New(s, wsfs.Owner{}), "/", func(p string, _ kv.Attr) { got = append(got, p) })
	// "p//b" is "b": slashes after the prefix are dropped.
	if strings.Join(got, " ") != "/a /b /clash /d/e" {
		t.Fatalf("files %q", got)
	}
}

func deleteInput(bucket, key string) *s3.DeleteObjectInput {
	return &s3.DeleteObjectInput{Bucket: &bucket, Key: &key}
}
