package shell

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/computerfs/computerfs/internal/gittest"
	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/sources"
	"github.com/computerfs/computerfs/spec"
	"github.com/computerfs/computerfs/wsfs"
)

// The git differential tests: a repository made with the git CLI is
// imported into a store (as the daemon imports it) and cloned onto tmpfs;
// the same script runs on the fast path (git in-process) and with bash and
// the real git on the copy, and stdout and the status must be identical.

// gitIdentity is the environment of both sides: a fixed identity and
// date, so that commits made on either side have the same ids.
func gitIdentity() []string {
	var out []string
	for _, e := range gittest.Env() {
		if strings.HasPrefix(e, "GIT_AUTHOR_") || strings.HasPrefix(e, "GIT_COMMITTER_") {
			out = append(out, e)
		}
	}
	return out
}

// buildGitOrigin makes the fixture repository with some history: the
// fixture tree, then edits, a deletion and a branch.
func buildGitOrigin(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	gittest.Git(t, dir, "init", "-q", "-b", "main")
	writeFixtureDir(t, dir)
	gittest.Commit(t, dir, nil, "Initial import")
	gittest.Commit(t, dir, map[string]string{
		"main.go":   strings.Replace(fixture["main.go"].content, "name := \"world\"", "name := \"gopher\"", 1),
		"README.md": fixture["README.md"].content + "\n## License\n\nMIT\n",
	}, "Greet gophers by default\n\nThe default name is now gopher, and the README\nsays how the code is licensed.")
	gittest.Branch(t, dir, "feature")
	if err := os.Remove(filepath.Join(dir, "web/app.js")); err != nil {
		t.Fatal(err)
	}
	gittest.Commit(t, dir, map[string]string{"docs/api.md": "# API\n\nGET /health returns ok.\n"}, "Document the API and drop app.js")
	gittest.Commit(t, dir, map[string]string{"internal/util/strings.go": strings.Replace(fixture["internal/util/strings.go"].content, "return s }", "return strings.ToUpper(s) }", 1)}, "util: Upper upper-cases")
	return dir
}

// gitStore imports origin at /workspace/repo of a new store.
func gitStore(t testing.TB, origin string) (*Shell, *wsfs.FS) {
	t.Helper()
	st, err := kv.Open(t.TempDir()+"/store", kv.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	im := &sources.Importer{Store: st, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Spec: &spec.Spec{Sources: []spec.Source{{Path: "/repo", Git: &spec.Git{URL: origin}}}}}
	if err := im.Run(context.Background()); err != nil {
		t.Fatalf("import: %v", err)
	}
	fs := wsfs.New(st, wsfs.Owner{})
	return New(fs, Options{}), fs
}

// gitCopy clones origin onto tmpfs: base/w/repo, with base/t as /tmp.
func gitCopy(t testing.TB, origin string) string {
	t.Helper()
	base, err := os.MkdirTemp("/dev/shm", "gitcorpus-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Mkdir(base+"/w", 0o755)
	os.Mkdir(base+"/t", 0o1777)
	gittest.Git(t, base+"/w", "clone", "-q", "--", origin, "repo")
	return base
}

// fastGit runs a script on the fast path in /workspace/repo.
func fastGit(t testing.TB, s *Shell, script string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	res, err := s.Exec(context.Background(), script, ExecOptions{Cwd: "/workspace/repo", Env: gitIdentity(),
		Stdout: &out, Stderr: &errb, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("%q: %v", script, err)
	}
	return out.String(), errb.String(), res.ExitCode
}

// realGit runs a script with bash and the git CLI in the copy.
func realGit(t testing.TB, base, script string) (string, string, int) {
	t.Helper()
	ws, tmp := base+"/w", base+"/t"
	sc := strings.ReplaceAll(script, "/workspace", ws)
	sc = strings.ReplaceAll(sc, "/tmp", tmp)
	cmd := exec.Command("bash", "-c", sc)
	cmd.Dir = ws + "/repo"
	cmd.Env = append([]string{"HOME=" + ws, "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "TZ=UTC", "TMPDIR=" + tmp}, gittest.Env()...)
	cmd.Stdin = strings.NewReader("")
	out, errs, code := runCmd(t, cmd)
	o := strings.ReplaceAll(out, ws, "/workspace")
	return strings.ReplaceAll(o, tmp, "/tmp"), errs, code
}

// gitPair is a store and a tmpfs copy of the same repository.
type gitPair struct {
	s    *Shell
	fs   *wsfs.FS
	base string
}

func newGitPair(t testing.TB, origin string) *gitPair {
	s, fs := gitStore(t, origin)
	return &gitPair{s: s, fs: fs, base: gitCopy(t, origin)}
}

// same runs script on both sides and fails the test if stdout or the
// status differ.
func (p *gitPair) same(t *testing.T, script string) string {
	t.Helper()
	got, gerr, gcode := fastGit(t, p.s, script)
	want, werr, wcode := realGit(t, p.base, script)
	if got != want || gcode != wcode {
		t.Errorf("%s\n--- fast path status %d, stderr %q; git status %d, stderr %q\n%s", script, gcode, gerr, wcode, werr, firstDiff(got, want))
	}
	return got
}

func TestGitStatusCleanAfterImport(t *testing.T) {
	p := newGitPair(t, buildGitOrigin(t))
	out := p.same(t, "git status")
	if !strings.Contains(out, "nothing to commit, working tree clean") {
		t.Fatalf("status after import:\n%s", out)
	}
	p.same(t, "git status --short; git status --porcelain; git status -sb")
	p.same(t, "git diff; git diff --stat; git diff --cached")
}

// TestGitDifferential runs scripts that edit, stage, commit and look, in
// sequence on one pair (each builds on the last).
func TestGitDifferential(t *testing.T) {
	p := newGitPair(t, buildGitOrigin(t))
	steps := []string{
		"git log",
		"git log --oneline",
		"git log -n 2 --stat",
		"git log -p -2",
		"git log --oneline -- docs",
		"git log --format='%H %an <%ae> %s' -3",
		"git log --pretty=format:'%h %s'",
		"git log --reverse --oneline",
		"git show",
		"git show HEAD~1 --stat",
		"git show HEAD~2:README.md",
		"git show --name-only HEAD~1",
		"git rev-parse HEAD; git rev-parse --short HEAD; git rev-parse --abbrev-ref HEAD; git rev-parse --show-toplevel; git rev-parse --is-inside-work-tree",
		"cd docs && git rev-parse --show-prefix && git status",
		"git branch; git branch -a; git branch -v",
		"git ls-files | head -20; git ls-files docs",
		// edits
		"echo 'one more line' >> README.md; printf 'x\\n' > new.txt; rm docs/notes.txt; git status",
		"git status --short; git status --porcelain; git status -s -b",
		"git diff",
		"git diff --stat; git diff --name-only; git diff --name-status; git diff --numstat",
		"git diff README.md; git diff -- docs",
		"mkdir -p newdir/sub && echo a > newdir/sub/a.txt && echo b > newdir/b.txt && git status -s && git status -s -uall",
		"cd src && git status && git status -s && git diff --stat",
		"git add README.md && git status && git diff --cached && git diff --cached --stat",
		"git add -A && git status",
		"git diff --cached --name-status",
		"git commit -q -m 'Edit the README' -m 'and more' && git log --oneline -3 && git status",
		"git show --stat",
		"git mv go.mod go2.mod && git status && git diff --cached --stat",
		"git commit -m 'Rename go.mod'",
		"git rm -q data/numbers.txt && git status -s",
		"git rm --cached data/log.txt && git status -s",
		"git reset -q && git status -s",
		"git reset --hard && git status",
		"echo change >> main.go && git commit -am 'Change main.go'",
		"git log --oneline -n 3; git status -sb",
		"git reset --soft HEAD~1 && git status -s",
		"git reset HEAD~1 && git status -s",
		"git reset --hard HEAD && git status -s",
		"echo junk >> go2.mod && git restore go2.mod && git status -s",
		"echo junk >> src/app.py && git add src/app.py && git restore --staged src/app.py && git status -s && git restore src/app.py && git status -s",
		"git checkout -b topic && git branch && git status",
		"echo topic >> docs/guide.md && git commit -qam 'Topic work' && git log --oneline -2",
		"git switch main && git log --oneline -1 && git status",
		"git checkout feature && git log --oneline -2 && ls web && git status",
		"git checkout main && git branch -d topic; git branch -D topic && git branch",
		"git switch -c other && git switch main; git branch --show-current",
		"echo x >> docs/guide.md && git checkout -- docs/guide.md && git status -s",
		"git diff HEAD~2 --stat",
		"git diff HEAD~3 HEAD --name-status",
		"git log --oneline main..feature; git log --oneline feature..main",
		"git ls-files -s README.md; git ls-files -o --exclude-standard; touch out.log; git status -s",
		"git nosuchcommand; echo $?",
		"git log nosuchfile; echo $?",
		"git show nosuchrev; echo $?",
		"cd /tmp && git status; echo $?",
	}
	for _, s := range steps {
		p.same(t, s)
	}
	// The real git CLI accepts what the fast path wrote.
	exportCheck(t, p.fs, "/repo")
}

// exportCheck copies the store's repository out and runs git fsck and git
// status on it: the fast path's objects, refs and index must be sound,
// and the work tree must be clean against them.
func exportCheck(t *testing.T, fs *wsfs.FS, repo string) {
	t.Helper()
	dir := exportRepo(t, fs, repo)
	gittest.Git(t, dir, "fsck", "--strict", "--no-dangling")
	s := New(fs, Options{})
	fast, _, _ := fastGit(t, s, "git status --porcelain")
	if st := gittest.Git(t, dir, "status", "--porcelain"); st != strings.TrimSpace(fast) {
		t.Errorf("the real git sees the exported repository as\n%s\nthe fast path as\n%s", st, fast)
	}
}

// exportRepo copies the store's repository out to a directory.
func exportRepo(t *testing.T, fs *wsfs.FS, repo string) string {
	t.Helper()
	dir := t.TempDir()
	var walk func(src, dst string)
	walk = func(src, dst string) {
		fs.ReadDir(src, "", func(d kv.Dirent) bool {
			s, o := src+"/"+d.Name, filepath.Join(dst, d.Name)
			switch d.Type {
			case kv.S_IFDIR:
				os.Mkdir(o, 0o755)
				walk(s, o)
			case kv.S_IFLNK:
				l, _ := fs.Readlink(s)
				os.Symlink(l, o)
			default:
				data, err := fs.ReadFile(s)
				if err != nil {
					t.Fatal(err)
				}
				a, _ := fs.Lstat(s)
				os.WriteFile(o, data, os.FileMode(a.Mode&0o777))
				os.Chmod(o, os.FileMode(a.Mode&0o777))
			}
			return true
		})
	}
	walk(repo, dir)
	return dir
}

// TestGitCommitIdentical: a commit made on the fast path has the id the
// git CLI gives the same commit, and the CLI reads the store's repository.
func TestGitCommitIdentical(t *testing.T) {
	p := newGitPair(t, buildGitOrigin(t))
	script := "printf 'hello\\n' > hello.txt && chmod +x scripts/build.sh && echo more >> docs/guide.md && git add . && git commit -m 'Add hello' && git rev-parse HEAD HEAD^{tree}"
	out := p.same(t, script)
	if !strings.Contains(out, "create mode 100644 hello.txt") {
		t.Fatalf("commit output:\n%s", out)
	}
	p.same(t, "git log --stat -1; git status")
	exportCheck(t, p.fs, "/repo")
}

// TestGitImportedDirRepo: a repository the git CLI committed to, copied in
// as a plain directory (its index stat data then describes other files),
// reads the same on the fast path: status hashes and finds it clean.
func TestGitImportedDirRepo(t *testing.T) {
	origin := buildGitOrigin(t)
	gittest.Git(t, origin, "checkout", "-q", "feature")
	gittest.Commit(t, origin, map[string]string{"NEW.md": "new\n"}, "Made by the CLI")
	gittest.WriteFiles(t, origin, map[string]string{"NEW.md": "stashed\n"})
	gittest.Git(t, origin, "stash", "-q")
	gittest.WriteFiles(t, origin, map[string]string{"go.mod": "stashed again\n"})
	gittest.Git(t, origin, "stash", "-q")
	st, err := kv.Open(t.TempDir()+"/store", kv.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	im := &sources.Importer{Store: st, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Spec: &spec.Spec{Sources: []spec.Source{{Path: "/repo", Dir: origin}}}}
	if err := im.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := New(wsfs.New(st, wsfs.Owner{}), Options{})
	for _, script := range []string{"git status", "git log --oneline", "git show --stat", "git branch", "git stash list"} {
		got, gerr, code := fastGit(t, s, script)
		cmd := exec.Command("bash", "-c", script)
		cmd.Dir = origin
		cmd.Env = append(os.Environ(), gittest.Env()...)
		want, _ := cmd.Output()
		if got != string(want) || code != 0 {
			t.Errorf("%s: fast path (status %d, %q):\n%s--- git:\n%s", script, code, gerr, got, want)
		}
	}
	if out, _, _ := fastGit(t, s, "git stash list"); !strings.HasPrefix(out, "stash@{0}: WIP on feature: ") || !strings.Contains(out, "\nstash@{1}: ") {
		t.Errorf("git stash list:\n%s", out)
	}
}

func TestGitNotARepo(t *testing.T) {
	s, _ := newShell(t)
	out, errs, code := sh(t, s, "git status")
	if code != 128 || out != "" || errs != "fatal: not a git repository (or any of the parent directories): .git\n" {
		t.Fatalf("status %d, out %q, err %q", code, out, errs)
	}
}

func TestGitIdentityUnknown(t *testing.T) {
	s, _ := newShell(t)
	_, errs, code := sh(t, s, "git init -q -b main && echo a > a && git add a && git commit -m first")
	if code != 128 || !strings.Contains(errs, "Author identity unknown") {
		t.Fatalf("status %d, err %q", code, errs)
	}
	out, errs, code := sh(t, s, "git -c user.name=Ann -c user.email=ann@example.com commit -q -m first && git log --format='%an <%ae> %s'")
	if code != 0 || out != "Ann <ann@example.com> first\n" {
		t.Fatalf("status %d, out %q, err %q", code, out, errs)
	}
}

// TestGitUnsupportedAtRunTime: a form the fast path does not run is a
// usage error (129) with a message, never wrong output.
func TestGitUnsupportedAtRunTime(t *testing.T) {
	p := newGitPair(t, buildGitOrigin(t))
	for _, script := range []string{"git push", "git rebase -i HEAD~2", "git log --graph", "git status --porcelain=v2", "git commit", "git diff --word-diff=color"} {
		out, errs, code := fastGit(t, p.s, script)
		if code != 129 || out != "" || !strings.Contains(errs, "sandbox") {
			t.Errorf("%s: status %d, out %q, err %q", script, code, out, errs)
		}
	}
	// a commit hook runs only in the sandbox
	if out, errs, code := fastGit(t, p.s, "mkdir -p .git/hooks && printf '#!/bin/sh\\nexit 1\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && git commit --allow-empty -m x"); code != 129 || out != "" || !strings.Contains(errs, "pre-commit hook") {
		t.Errorf("commit with a hook: status %d, out %q, err %q", code, out, errs)
	}
	fastGit(t, p.s, "rm .git/hooks/pre-commit")
	// during a merge, status and writes are the sandbox's; log is not
	if out, errs, code := fastGit(t, p.s, "touch .git/MERGE_HEAD; git status"); code != 129 || out != "" {
		t.Errorf("status during a merge: status %d, out %q, err %q", code, out, errs)
	}
	if _, errs, code := fastGit(t, p.s, "git log -1 --format=%s"); code != 0 {
		t.Errorf("log during a merge: status %d, err %q", code, errs)
	}
}

func TestGitCanRun(t *testing.T) {
	for _, c := range []struct {
		script string
		ok     bool
	}{
		{"git status", true},
		{"git status --short", true},
		{"git -C sub status -sb", true},
		{"git --no-pager log --oneline -n 5", true},
		{"git log -5 -p -- a.go", true},
		{"git diff --cached --stat", true},
		{"git commit -am 'fix: things'", true},
		{"git add . && git commit -m x", true},
		{"git checkout -b feature", true},
		{"git reset --hard HEAD~1", true},
		{"git show HEAD:README.md", true},
		{"git rev-parse --abbrev-ref HEAD", true},
		{"git diff -- $FILE", true},
		{"git push", false},
		{"git push origin main", false},
		{"git fetch", false},
		{"git pull --rebase", false},
		{"git rebase -i HEAD~3", false},
		{"git stash", true},
		{"git stash pop", true},
		{"git stash push -p", false},
		{"git stash list", true},
		{"git remote add x y", false},
		{"git config --global user.name x", false},
		{"git config user.name x", true},
		{"git tag -a v1 -m x", false},
		{"git log --graph", false},
		{"git status --porcelain=v2", false},
		{"git diff --word-diff=color", false},
		{"git commit", false},
		{"git commit -m x file.go", false},
		{"git log --format='%ar'", true},
		{"git log --format='%d'", false},
		{"git $SUB", false},
		{"git log $OPTS", false},
		{`git commit -m "fix: $WHAT"`, true},
		{`git commit -am "$(cat msg)"`, true},
		{`git checkout -b "$BRANCH"`, true},
		{`git log -n "$N" --oneline`, false}, // checked as a number, so it must be literal
		{`git commit "$F" -m x`, false},
		{`git -C "$DIR" status`, false},
		{"git -c core.editor=vim commit -m x", false},
		{"git -c color.ui=always diff", false},
		{"git -c color.ui=never diff", true},
		{"git log --graph --oneline", true},
		{"git log --graph -p", false},
		{"git", false},
		{"ls | xargs git rm", true},
	} {
		ok, why := CanRun(c.script)
		if ok != c.ok {
			t.Errorf("CanRun(%q) = %v (%s), want %v", c.script, ok, why, c.ok)
		}
		if !ok && why == "" {
			t.Errorf("CanRun(%q): no reason", c.script)
		}
	}
}

// TestGitCorpus runs testdata/corpus-git.txt: each command on a fresh
// pair, compared with the real git.
func TestGitCorpus(t *testing.T) {
	entries := readCorpusFile(t, "testdata/corpus-git.txt")
	if len(entries) < 40 {
		t.Fatalf("git corpus has %d entries", len(entries))
	}
	origin := buildGitOrigin(t)
	pass, fail := 0, 0
	for _, e := range entries {
		p := newGitPair(t, origin)
		got, gerr, gcode := fastGit(t, p.s, e.cmd)
		want, werr, wcode := realGit(t, p.base, e.cmd)
		if got != want || gcode != wcode {
			fail++
			t.Errorf("corpus-git.txt:%d: %s\n--- fast path status %d, stderr %q; git status %d, stderr %q\n%s", e.line, e.cmd, gcode, gerr, wcode, werr, firstDiff(got, want))
			continue
		}
		if ok, why := CanRun(e.cmd); !ok {
			t.Errorf("corpus-git.txt:%d: %s: CanRun refuses it: %s", e.line, e.cmd, why)
		}
		pass++
	}
	t.Logf("git corpus: %d entries, %d identical to git, %d failed", len(entries), pass, fail)
}

// firstDiff shows where two outputs part: a few lines of each around the
// first differing line.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	i := 0
	for i < len(g) && i < len(w) && g[i] == w[i] {
		i++
	}
	from := max(0, i-3)
	cut := func(l []string) string {
		end := min(len(l), i+6)
		if from >= end {
			return "(end)\n"
		}
		return strings.Join(l[from:end], "\n") + "\n"
	}
	return fmt.Sprintf("first difference at line %d\n--- fast path:\n%s--- git:\n%s", i+1, cut(g), cut(w))
}

// TestGitShallow: a checkout imported with depth 2 reads as a shallow
// clone does with the git CLI (the boundary commit is a root).
func TestGitShallow(t *testing.T) {
	origin := buildGitOrigin(t)
	st, err := kv.Open(t.TempDir()+"/store", kv.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	im := &sources.Importer{Store: st, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Spec: &spec.Spec{Sources: []spec.Source{{Path: "/repo", Git: &spec.Git{URL: origin, Depth: 2}}}}}
	if err := im.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	base, err := os.MkdirTemp("/dev/shm", "gitshallow-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Mkdir(base+"/w", 0o755)
	os.Mkdir(base+"/t", 0o1777)
	gittest.Git(t, base+"/w", "clone", "-q", "--depth", "2", "--no-local", "--", origin, "repo")
	p := &gitPair{s: New(wsfs.New(st, wsfs.Owner{}), Options{}), base: base}
	if out := p.same(t, "git log --oneline"); strings.Count(out, "\n") != 2 {
		t.Fatalf("a clone of depth 2 shows\n%s", out)
	}
	for _, script := range []string{"git log --oneline", "git log --stat", "git log -p -1 HEAD~1 | head -20", "git status -sb",
		"echo x >> README.md && git commit -qam more && git log --oneline && git status -sb"} {
		p.same(t, script)
	}
}
