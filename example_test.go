package computerfs_test

import (
	"context"
	"fmt"
	"log"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/computerfs/computerfs"
	"github.com/computerfs/computerfs/spec"
	"github.com/computerfs/computerfs/tools"
)

// A harness prepares a bug-triage workspace with the Go API: it opens a
// workspace from a spec (here a policy and a note), makes a directory,
// writes the bug report, clones the repository, greps it, runs a command,
// and reads the audit.
func ExampleOpen() {
	ctx := context.Background()
	tmp, _ := os.MkdirTemp("", "computerfs-example-")
	defer os.RemoveAll(tmp)

	// A repository to triage (made here with the git command line).
	repo := filepath.Join(tmp, "app")
	os.MkdirAll(repo, 0o755)
	os.WriteFile(filepath.Join(repo, "main.go"), []byte("package main\n\nfunc main() { parse(\"\") }\n"), 0o644)
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "."}, {"-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "first"}} {
		if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			log.Fatalf("git %v: %v %s", args, err, out)
		}
	}

	// Served over HTTP (git http-backend): git-clone takes urls of the
	// hosts the policy lists, never a path of the host.
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(&cgi.Handler{Path: filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"),
		Env: []string{"GIT_PROJECT_ROOT=" + tmp, "GIT_HTTP_EXPORT_ALL=1"}})
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")

	sp, err := spec.Parse([]byte(`
sources:
  - path: /notes/HOWTO.md
    content: "Reproduce, then fix.\n"
policy:
  read_only_paths: ["/repo/.git"]
  git_clone_hosts: ["`+host+`"]
  exec: {backends: [shell]}
`), "triage.yaml", tmp)
	if err != nil {
		log.Fatal(err)
	}
	ws, err := computerfs.Open(ctx, computerfs.OpenOptions{Spec: sp, Store: filepath.Join(tmp, "store")})
	if err != nil {
		log.Fatal(err)
	}
	defer ws.Close()
	t := ws.Tools()

	if _, err := t.Mkdir(ctx, tools.MkdirArgs{Path: "triage"}); err != nil {
		log.Fatal(err)
	}
	w, err := t.Write(ctx, tools.WriteArgs{Path: "/workspace/triage/BUG_REPORT.md", Content: "# Crash on empty input\n"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(w.Text())
	if _, err := t.GitClone(ctx, tools.GitCloneArgs{URL: srv.URL + "/app", Path: "repo"}); err != nil {
		log.Fatal(err)
	}
	g, err := t.Grep(ctx, tools.GrepArgs{Path: "repo", Query: `parse("")`})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(g.Text())
	x, err := t.Exec(ctx, tools.ExecArgs{Command: "wc -l < repo/main.go"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(x.Stdout)
	_, err = t.Write(ctx, tools.WriteArgs{Path: "repo/.git/config", Content: ""})
	fmt.Println(err)

	recs, err := computerfs.ReadAudit(ws.Store, 0, 0)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range recs {
		if r.Tool == "git-clone" { // the temporary directory, a commit hash, a count: not the same twice
			r.Args, r.Result, r.Journal = `{"path":"repo","url":"REPO"}`, "checked out HEAD", -1
			fmt.Printf("#%d %s %s %s (journal records: N)\n", r.ID, r.Tool, r.Args, r.Result)
			continue
		}
		fmt.Printf("#%d %s %s %s%s (journal records: %d)\n", r.ID, r.Tool, r.Args, r.Result, r.Error, r.Journal)
	}
	// Output:
	// Created /workspace/triage/BUG_REPORT.md (23 bytes).
	// /workspace/repo/main.go:3:func main() { parse("") }
	// 3
	// refused by policy read_only_paths[0] "/repo/.git": /workspace/repo/.git/config is read-only for tools
	// #1 mkdir {"path":"triage"} made (journal records: 1)
	// #2 write {"content":"# Crash on empty input\n","path":"/workspace/triage/BUG_REPORT.md"} created, 23 bytes (journal records: 1)
	// #3 git-clone {"path":"repo","url":"REPO"} checked out HEAD (journal records: N)
	// #4 grep {"path":"repo","query":"parse(\"\")"} 1 matches (journal records: 0)
	// #5 exec {"command":"wc -l < repo/main.go"} exit 0, 2+0 bytes of output (journal records: 0)
	// #6 write {"content":"","path":"repo/.git/config"} refused by policy read_only_paths[0] "/repo/.git": /workspace/repo/.git/config is read-only for tools (journal records: 0)
}
