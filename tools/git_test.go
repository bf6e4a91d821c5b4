package tools

import (
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/computerfs/computerfs/internal/gittest"
	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/spec"
)

func TestGitClone(t *testing.T) {
	repo := filepath.Join(t.TempDir(), "app")
	os.MkdirAll(repo, 0o755)
	gittest.Git(t, repo, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(repo, "main.go"), []byte("package main\n"), 0o644)
	gittest.Git(t, repo, "add", ".")
	gittest.Git(t, repo, "commit", "-qm", "one")
	gittest.Git(t, repo, "tag", "v1")
	os.WriteFile(filepath.Join(repo, "main.go"), []byte("package main // two\n"), 0o644)
	gittest.Git(t, repo, "commit", "-qam", "two")
	gittest.Git(t, repo, "checkout", "-q", "-b", "feature")
	gittest.Git(t, repo, "checkout", "-q", "main")
	head := gittest.Git(t, repo, "rev-parse", "HEAD")
	v1 := gittest.Git(t, repo, "rev-parse", "v1^{commit}")

	base := gittest.ServeHTTP(t, filepath.Dir(repo)) // http://127.0.0.1:PORT
	url := base + "/app"
	u, _ := neturl.Parse(base)
	tl, f := newTools(t, &spec.Policy{ReadOnlyPaths: []string{"/vendor"}, GitCloneHosts: []string{u.Host}})
	r := must[GitCloneResult](t)(tl.GitClone(ctx, GitCloneArgs{URL: url, Path: "src/app"}))
	if r.Head != head || r.Branch != "main" || r.Path != "/workspace/src/app" {
		t.Fatalf("clone: %+v", r)
	}
	if b, _ := f.ReadFile("src/app/main.go"); string(b) != "package main // two\n" {
		t.Fatalf("checkout: %q", b)
	}
	if _, err := f.Stat("src/app/.git/HEAD"); err != nil {
		t.Fatal(err)
	}
	r = must[GitCloneResult](t)(tl.GitClone(ctx, GitCloneArgs{URL: url, Path: "tagged", Ref: "v1", Depth: 1}))
	if r.Head != v1 {
		t.Fatalf("tag: %+v, want %s", r, v1)
	}
	if r := must[GitCloneResult](t)(tl.GitClone(ctx, GitCloneArgs{URL: url, Path: "feat", Ref: "feature"})); r.Branch != "feature" {
		t.Fatalf("branch: %+v", r)
	}
	_, err := tl.GitClone(ctx, GitCloneArgs{URL: url, Path: "bad", Ref: "nope"})
	wantErr(t, err, `ref "nope"`)
	if _, err := f.Stat("bad"); err == nil {
		t.Fatal("a failed clone left its directory")
	}
	_, err = tl.GitClone(ctx, GitCloneArgs{URL: url, Path: "src/app"})
	wantErr(t, err, "exists")
	_, err = tl.GitClone(ctx, GitCloneArgs{URL: url, Path: "vendor/app"})
	wantRefused(t, err, "read_only_paths[0]")
	// The clone's changes are journaled as the call's.
	var rec kv.AuditRecord
	f.Store().ReadAudit(0, func(r kv.AuditRecord) bool { rec = r; return false })
	if rec.Tool != "git-clone" || rec.Journal < 10 || !strings.HasPrefix(rec.Result, "checked out ") {
		t.Fatalf("audit: %+v", rec)
	}
}
