package sources

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/computerfs/computerfs/internal/gittest"
	"github.com/computerfs/computerfs/internal/s3test"
	"github.com/computerfs/computerfs/wsfs"
)

func refresh(t *testing.T, fs *wsfs.FS, yaml string) SourceReport {
	t.Helper()
	r := &Refresher{FS: fs, Spec: parse(t, yaml), Log: quiet()}
	rep, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Sources) != 1 || rep.Sources[0].Error != "" {
		t.Fatalf("refresh: %+v", rep)
	}
	return rep.Sources[0]
}

func TestRefreshS3(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	bucket := srv.NewBucket(t)
	for _, k := range []string{"a", "b", "c", "d", "same"} {
		srv.Put(t, bucket, "p/"+k, []byte("v1 "+k))
	}
	yaml := fmt.Sprintf("sources:\n  - path: /s\n    s3: {bucket: %s, prefix: p/, endpoint: %q, path_style: true}\n", bucket, srv.Endpoint)
	sp := parse(t, yaml)
	s, fs := mustImport(t, sp, nil)
	s.SetFetcher(NewFetcher(sp, nil).Fetch)
	if d, _ := fs.ReadFile("/s/a"); string(d) != "v1 a" { // fetched before the refresh
		t.Fatalf("a = %q", d)
	}
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	check(fs.WriteFile("/s/b", []byte("local b"), 0o644))
	check(fs.Remove("/s/c"))
	check(fs.WriteFile("/s/made", []byte("local made"), 0o644))
	for _, k := range []string{"a", "b", "c"} {
		srv.Put(t, bucket, "p/"+k, []byte("v2 "+k))
	}
	srv.Client(t).DeleteObject(context.Background(), deleteInput(bucket, "p/d"))
	srv.Put(t, bucket, "p/new/e", []byte("v2 e"))
	srv.Put(t, bucket, "p/made", []byte("upstream made"))

	rep := refresh(t, fs, yaml)
	got := fmt.Sprintf("updated %v added %v removed %v conflicts %v", rep.Updated, rep.Added, rep.Removed, rep.Conflicts)
	want := "updated [/s/a] added [/s/new/e] removed [/s/d] conflicts [{/s/b edited here and changed upstream} {/s/c deleted here and changed upstream} {/s/made made here and added upstream}]"
	if got != want {
		t.Fatalf("refresh:\n%s\nwant\n%s", got, want)
	}
	for p, want := range map[string]string{"/s/a": "v2 a", "/s/b": "local b", "/s/new/e": "v2 e", "/s/made": "local made", "/s/same": "v1 same"} {
		if d, err := fs.ReadFile(p); string(d) != want {
			t.Errorf("%s = %q (%v), want %q", p, d, err, want)
		}
	}
	if _, err := fs.Stat("/s/c"); err == nil {
		t.Error("refresh brought back a file deleted here")
	}
	rep = refresh(t, fs, yaml)
	if len(rep.Updated)+len(rep.Added)+len(rep.Removed) != 0 || len(rep.Conflicts) != 3 {
		t.Fatalf("second refresh: %+v", rep)
	}
}

func TestRefreshGit(t *testing.T) {
	for _, mode := range []string{"cli", "gogit"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "gogit" {
				t.Setenv("COMPUTERFS_NO_GIT_CLI", "1")
			}
			repo := gittest.NewRepo(t, map[string]string{"f1": "1", "dir/f3": "3", "keep": "k"})
			yaml := fmt.Sprintf("sources:\n  - path: /r\n    git: {url: %q}\n", repo)
			_, fs := mustImport(t, parse(t, yaml), nil)
			if rep := refresh(t, fs, yaml); !strings.HasPrefix(rep.Note, "up to date") {
				t.Fatalf("refresh with nothing new: %+v", rep)
			}
			gittest.Commit(t, repo, map[string]string{"f1": "1 upstream", "new/f2": "2"}, "upstream")
			gittest.Git(t, repo, "rm", "-q", "dir/f3")
			head := gittest.Commit(t, repo, nil, "remove f3")
			if err := fs.WriteFile("/r/untracked", []byte("u"), 0o644); err != nil {
				t.Fatal(err)
			}
			rep := refresh(t, fs, yaml)
			if got := fmt.Sprintf("%v %v %v %v", rep.Updated, rep.Added, rep.Removed, rep.Conflicts); got != "[/r/f1] [/r/new/f2] [/r/dir/f3] []" {
				t.Fatalf("fast-forward: %s (%s)", got, rep.Note)
			}
			for p, want := range map[string]string{"/r/f1": "1 upstream", "/r/new/f2": "2", "/r/keep": "k", "/r/untracked": "u"} {
				if d, _ := fs.ReadFile(p); string(d) != want {
					t.Errorf("%s = %q, want %q", p, d, want)
				}
			}
			if _, err := fs.Stat("/r/dir"); err == nil {
				t.Error("the emptied directory is still there")
			}
			if h, _ := fs.ReadFile("/r/.git/refs/heads/main"); strings.TrimSpace(string(h)) != head {
				// go-git may pack refs; then look it up through go-git below.
				t.Logf("refs/heads/main file: %q", h)
			}
			st := filesystem.NewStorage(fs.Billy("/r/.git"), cache.NewObjectLRUDefault())
			r, err := git.Open(st, fs.Billy("/r"))
			if err != nil {
				t.Fatal(err)
			}
			ref, _ := r.Head()
			if ref.Hash().String() != head {
				t.Fatalf("HEAD %s after refresh, want %s", ref.Hash(), head)
			}
			w, _ := r.Worktree()
			status, err := w.Status()
			if err != nil {
				t.Fatal(err)
			}
			for p, s := range status {
				if p != "untracked" && (s.Worktree != git.Unmodified || s.Staging != git.Unmodified) {
					t.Errorf("status after refresh: %s %c%c", p, s.Staging, s.Worktree)
				}
			}

			// A local edit to a path that upstream changes again stops the
			// fast-forward.
			if err := fs.WriteFile("/r/f1", []byte("agent's"), 0o644); err != nil {
				t.Fatal(err)
			}
			gittest.Commit(t, repo, map[string]string{"f1": "1 again", "keep": "k2"}, "again")
			rep = refresh(t, fs, yaml)
			if len(rep.Conflicts) != 1 || rep.Conflicts[0].Path != "/r/f1" || len(rep.Updated) != 0 {
				t.Fatalf("refresh over a local edit: %+v", rep)
			}
			if d, _ := fs.ReadFile("/r/keep"); string(d) != "k" {
				t.Fatalf("a refresh with conflicts changed other files: keep = %q", d)
			}
		})
	}
}
