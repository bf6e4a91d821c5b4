package gittest_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/computerfs/computerfs/internal/gittest"
)

// gitOut runs git with the package's environment and returns combined
// output and error, for commands that are expected to fail.
func gitOut(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), gittest.Env()...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// hostileConfig points HOME at a git configuration that would change
// branch names, identities and hooks if the package did not ignore it.
func hostileConfig(t *testing.T) {
	home := t.TempDir()
	cfg := "[user]\n\tname = Wrong Name\n\temail = wrong@example.com\n" +
		"[init]\n\tdefaultBranch = trunk\n[commit]\n\tgpgsign = true\n"
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	t.Setenv("GIT_AUTHOR_NAME", "Env Wrong")
	t.Setenv("GIT_COMMITTER_DATE", "2001-01-01T00:00:00Z")
}

func TestNewRepoIsDeterministic(t *testing.T) {
	hostileConfig(t)
	files := map[string]string{"README.md": "hello\n", "a/b/c.txt": "deep\n", "empty": ""}
	d1 := gittest.NewRepo(t, files)
	d2 := gittest.NewRepo(t, files)
	h1, h2 := gittest.Head(t, d1), gittest.Head(t, d2)
	if h1 != h2 {
		t.Errorf("same files gave commits %s and %s", h1, h2)
	}
	if len(h1) != 40 {
		t.Errorf("Head = %q", h1)
	}
	if b := gittest.Git(t, d1, "symbolic-ref", "--short", "HEAD"); b != "main" {
		t.Errorf("branch %q, want main", b)
	}
	who := gittest.Git(t, d1, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%at|%ct|%s")
	want := gittest.AuthorName + " <" + gittest.AuthorEmail + ">|" + gittest.CommitterName + " <" + gittest.CommitterEmail + ">|" +
		strconv.FormatInt(gittest.Epoch.Unix(), 10) + "|" + strconv.FormatInt(gittest.Epoch.Unix(), 10) + "|initial"
	if who != want {
		t.Errorf("commit says %q, want %q", who, want)
	}
	if got := gittest.Git(t, d1, "show", "main:a/b/c.txt"); got != "deep" {
		t.Errorf("a/b/c.txt in the commit: %q", got)
	}
	if got := gittest.Git(t, d1, "ls-tree", "-r", "--name-only", "HEAD"); got != "README.md\na/b/c.txt\nempty" {
		t.Errorf("tree:\n%s", got)
	}
}

func TestCommitAndTags(t *testing.T) {
	dir := gittest.NewRepo(t, map[string]string{"f": "1"})
	first := gittest.Head(t, dir)
	gittest.Tag(t, dir, "v1")

	// Changes made with the os package are committed too.
	if err := os.Symlink("f", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	second := gittest.Commit(t, dir, map[string]string{"f": "2", "new/g": "g"}, "second")
	if second == first || second != gittest.Head(t, dir) {
		t.Fatalf("Commit returned %s; HEAD %s, first %s", second, gittest.Head(t, dir), first)
	}
	if got := gittest.Git(t, dir, "rev-parse", "HEAD^"); got != first {
		t.Errorf("parent %s, want %s", got, first)
	}
	if got := gittest.Git(t, dir, "ls-tree", "HEAD", "link", "run.sh"); !strings.Contains(got, "120000 blob") || !strings.Contains(got, "100755 blob") {
		t.Errorf("modes:\n%s", got)
	}
	// The second commit is dated a minute after the first.
	if ct := gittest.Git(t, dir, "log", "-1", "--format=%ct"); ct != strconv.FormatInt(gittest.Epoch.Add(time.Minute).Unix(), 10) {
		t.Errorf("second commit date %s", ct)
	}

	if err := os.Remove(filepath.Join(dir, "f")); err != nil {
		t.Fatal(err)
	}
	third := gittest.Commit(t, dir, nil, "remove f")
	if _, err := gitOut(dir, "cat-file", "-e", third+":f"); err == nil {
		t.Error("removed file still in the commit")
	}
	empty := gittest.Commit(t, dir, nil, "nothing")
	if empty == third {
		t.Error("a commit without changes was not made")
	}

	tagID := gittest.AnnotatedTag(t, dir, "v2", "release 2")
	if typ := gittest.Git(t, dir, "cat-file", "-t", tagID); typ != "tag" {
		t.Errorf("annotated tag object is a %s", typ)
	}
	if got := gittest.Git(t, dir, "rev-parse", "v1^{commit}"); got != first {
		t.Errorf("v1 → %s, want %s", got, first)
	}
	if got := gittest.Git(t, dir, "rev-parse", "v2^{commit}"); got != empty {
		t.Errorf("v2 → %s, want %s", got, empty)
	}
	gittest.Branch(t, dir, "side")
	if got := gittest.Git(t, dir, "rev-parse", "side"); got != empty {
		t.Errorf("side → %s", got)
	}
	if b := gittest.Git(t, dir, "symbolic-ref", "--short", "HEAD"); b != "main" {
		t.Errorf("Branch checked out %s", b)
	}
}

// fatalRecorder is a testing.TB whose Fatal records the message and ends
// the goroutine, as the real one does.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Fatal(args ...any) {
	f.msg = fmt.Sprint(args...)
	runtime.Goexit()
}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestGitFailsWithStderr(t *testing.T) {
	f := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		gittest.Git(f, t.TempDir(), "rev-parse", "HEAD")
		f.msg = "returned"
	}()
	<-done
	if !strings.Contains(f.msg, "not a git repository") || !strings.Contains(f.msg, "git rev-parse HEAD") {
		t.Errorf("Git outside a repository: %q, want a failure quoting the command and git's stderr", f.msg)
	}
}

func TestBareAndServeHTTPClone(t *testing.T) {
	src := gittest.NewRepo(t, map[string]string{"README": "served\n", "dir/x": "x\n"})
	gittest.AnnotatedTag(t, src, "v1", "v1")
	bare := gittest.Bare(t, src)
	if got := gittest.Git(t, bare, "rev-parse", "--is-bare-repository"); got != "true" {
		t.Fatalf("Bare made a non-bare repository")
	}
	url := gittest.ServeHTTP(t, bare)
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/repo.git") {
		t.Errorf("URL %s", url)
	}

	clone := filepath.Join(t.TempDir(), "clone")
	gittest.Git(t, "", "clone", "-q", url, clone)
	if got := readFile(t, filepath.Join(clone, "dir", "x")); got != "x\n" {
		t.Errorf("cloned dir/x = %q", got)
	}
	if gittest.Head(t, clone) != gittest.Head(t, src) {
		t.Errorf("clone HEAD differs from source")
	}
	if got := gittest.Git(t, clone, "tag"); got != "v1" {
		t.Errorf("clone tags %q", got)
	}
	// ls-remote speaks the protocol without a work tree.
	if got := gittest.Git(t, "", "ls-remote", url, "refs/heads/main"); !strings.HasPrefix(got, gittest.Head(t, src)) {
		t.Errorf("ls-remote: %q", got)
	}
	// A repository that does not exist is an error.
	if out, err := gitOut("", "ls-remote", strings.TrimSuffix(url, "repo.git")+"nope.git"); err == nil {
		t.Errorf("ls-remote of a missing repository succeeded: %s", out)
	}
}

func TestServeHTTPDirectoryOfRepos(t *testing.T) {
	root := t.TempDir()
	for _, name := range []string{"one", "group/two"} {
		src := gittest.NewRepo(t, map[string]string{"name": name})
		gittest.Git(t, "", "clone", "-q", "--bare", src, filepath.Join(root, name+".git"))
	}
	base := gittest.ServeHTTP(t, root)
	for _, name := range []string{"one", "group/two"} {
		clone := filepath.Join(t.TempDir(), "c")
		gittest.Git(t, "", "clone", "-q", base+"/"+name+".git", clone)
		if got := readFile(t, filepath.Join(clone, "name")); got != name {
			t.Errorf("%s: name = %q", name, got)
		}
	}
}

func TestPushOverHTTP(t *testing.T) {
	src := gittest.NewRepo(t, map[string]string{"f": "1"})
	bare := gittest.Bare(t, src)
	url := gittest.ServeHTTP(t, bare)

	clone := filepath.Join(t.TempDir(), "clone")
	gittest.Git(t, "", "clone", "-q", url, clone)
	sha := gittest.Commit(t, clone, map[string]string{"f": "2", "pushed": "yes"}, "pushed over http")
	gittest.Git(t, clone, "push", "-q", "origin", "main")
	if got := gittest.Git(t, bare, "rev-parse", "main"); got != sha {
		t.Fatalf("bare main = %s after push, want %s", got, sha)
	}
	gittest.Git(t, clone, "push", "-q", "origin", "HEAD:refs/heads/feature", "HEAD:refs/tags/t1")
	if got := gittest.Git(t, bare, "rev-parse", "feature", "t1"); got != sha+"\n"+sha {
		t.Errorf("feature and t1: %q", got)
	}
	// Deleting a branch works too.
	gittest.Git(t, clone, "push", "-q", "origin", ":feature")
	if _, err := gitOut(bare, "rev-parse", "--verify", "-q", "refs/heads/feature"); err == nil {
		t.Error("feature still exists after a delete push")
	}
}

func TestPushLargeOverHTTP(t *testing.T) {
	// Over http.postBuffer (1 MiB) git sends a chunked body, which
	// net/http/cgi alone refuses.
	src := gittest.NewRepo(t, map[string]string{"f": "1"})
	bare := gittest.Bare(t, src)
	url := gittest.ServeHTTP(t, bare)
	clone := filepath.Join(t.TempDir(), "clone")
	gittest.Git(t, "", "clone", "-q", url, clone)
	// Incompressible content, so the pack stays over 1 MiB.
	big := make([]byte, 3<<20)
	x := uint32(1)
	for i := range big {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		big[i] = byte(x)
	}
	sha := gittest.Commit(t, clone, map[string]string{"big.bin": string(big)}, "big")
	gittest.Git(t, clone, "push", "-q", "origin", "main")
	if got := gittest.Git(t, bare, "rev-parse", "main"); got != sha {
		t.Fatalf("bare main = %s, want %s", got, sha)
	}
}

func TestServeHTTPAuth(t *testing.T) {
	src := gittest.NewRepo(t, map[string]string{"secret": "s\n"})
	bare := gittest.Bare(t, src)
	url := gittest.ServeHTTPAuth(t, bare, "agent", "good-token")
	withCreds := func(user, token string) string {
		return strings.Replace(url, "http://", "http://"+user+":"+token+"@", 1)
	}

	for _, tc := range []struct{ name, url string }{
		{"no credentials", url},
		{"wrong token", withCreds("agent", "bad-token")},
		{"wrong user", withCreds("someone", "good-token")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := gitOut("", "clone", "-q", tc.url, filepath.Join(t.TempDir(), "c"))
			if err == nil {
				t.Fatalf("clone succeeded")
			}
			if !strings.Contains(out, "Authentication failed") && !strings.Contains(out, "401") &&
				!strings.Contains(out, "could not read Username") {
				t.Errorf("clone failed for another reason:\n%s", out)
			}
		})
	}

	clone := filepath.Join(t.TempDir(), "c")
	gittest.Git(t, "", "clone", "-q", withCreds("agent", "good-token"), clone)
	if got := readFile(t, filepath.Join(clone, "secret")); got != "s\n" {
		t.Errorf("secret = %q", got)
	}
	sha := gittest.Commit(t, clone, map[string]string{"more": "m"}, "more")
	gittest.Git(t, clone, "push", "-q", "origin", "main")
	if got := gittest.Git(t, bare, "rev-parse", "main"); got != sha {
		t.Errorf("push with the right token: bare main %s, want %s", got, sha)
	}
	// Pushing with a wrong token is refused and changes nothing.
	gittest.Commit(t, clone, map[string]string{"more": "n"}, "refused")
	if out, err := gitOut(clone, "push", "-q", withCreds("agent", "bad"), "main"); err == nil {
		t.Errorf("push with a wrong token succeeded: %s", out)
	}
	if got := gittest.Git(t, bare, "rev-parse", "main"); got != sha {
		t.Errorf("refused push moved main to %s", got)
	}
}

func TestGenerateCounts(t *testing.T) {
	for _, tc := range []struct{ files, commits int }{{1, 1}, {50, 3}, {1200, 40}} {
		t.Run(strconv.Itoa(tc.files)+"x"+strconv.Itoa(tc.commits), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "gen")
			head := gittest.Generate(t, dir, tc.files, tc.commits, 42)
			checkGenerated(t, dir, head, tc.files, tc.commits)
		})
	}
}

func checkGenerated(t *testing.T, dir, head string, nFiles, nCommits int) {
	t.Helper()
	if got := gittest.Head(t, dir); got != head {
		t.Errorf("Generate returned %s, HEAD is %s", head, got)
	}
	if got := gittest.Git(t, dir, "rev-list", "--count", "main"); got != strconv.Itoa(nCommits) {
		t.Errorf("%s commits, want %d", got, nCommits)
	}
	tree := strings.Split(gittest.Git(t, dir, "ls-tree", "-r", "--name-only", "main"), "\n")
	if len(tree) != nFiles {
		t.Errorf("%d files in main, want %d", len(tree), nFiles)
	}
	// The work tree is checked out and clean.
	if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
		t.Errorf("work tree not clean:\n%s", st)
	}
	if _, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(tree[len(tree)-1]))); err != nil {
		t.Errorf("work tree lacks %s: %v", tree[len(tree)-1], err)
	}
	gittest.Git(t, dir, "fsck", "--no-progress", "--no-dangling")
}

func TestGenerateIsDeterministic(t *testing.T) {
	a := gittest.Generate(t, filepath.Join(t.TempDir(), "a"), 300, 20, 7)
	b := gittest.Generate(t, filepath.Join(t.TempDir(), "b"), 300, 20, 7)
	c := gittest.Generate(t, filepath.Join(t.TempDir(), "c"), 300, 20, 8)
	if a != b {
		t.Errorf("same seed gave %s and %s", a, b)
	}
	if a == c {
		t.Errorf("different seeds gave the same commit %s", a)
	}
}

func TestGenerateModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "g")
	gittest.Generate(t, dir, 2000, 2, 1)
	tree := gittest.Git(t, dir, "ls-tree", "-r", "main")
	modes := map[string]int{}
	for line := range strings.Lines(tree) {
		modes[strings.Fields(line)[0]]++
	}
	if modes["100644"] == 0 || modes["100755"] == 0 || modes["120000"] == 0 {
		t.Errorf("modes in the tree: %v; want regular, executable and symlink", modes)
	}
	dirs := gittest.Git(t, dir, "ls-tree", "-r", "-d", "--name-only", "main")
	if n := len(strings.Split(dirs, "\n")); n < 20 {
		t.Errorf("only %d directories", n)
	}
}

func TestGenerateLargeAndCloneOverHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("generates 10,000 files and 500 commits")
	}
	dir := filepath.Join(t.TempDir(), "big")
	start := time.Now()
	head := gittest.Generate(t, dir, 10_000, 500, 2024)
	el := time.Since(start)
	t.Logf("Generate(10000 files, 500 commits) took %v", el)
	if el > 45*time.Second {
		t.Errorf("Generate took %v, want well under a minute", el)
	}
	checkGenerated(t, dir, head, 10_000, 500)

	url := gittest.ServeHTTP(t, gittest.Bare(t, dir))
	clone := filepath.Join(t.TempDir(), "clone")
	start = time.Now()
	gittest.Git(t, "", "clone", "-q", "--no-checkout", url, clone)
	t.Logf("clone over HTTP took %v", time.Since(start))
	if got := gittest.Git(t, clone, "rev-parse", "main"); got != head {
		t.Errorf("cloned main %s, want %s", got, head)
	}
}
