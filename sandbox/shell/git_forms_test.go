package shell

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/computerfs/computerfs/internal/gittest"
)

// The git forms agents use (issue 19), each compared with the git CLI on
// stdout, stderr and the exit status, and checked by the CLI afterwards.

// sameAll runs script on both sides of a pair and fails the test if
// stdout, stderr or the status differ.
func (p *gitPair) sameAll(t *testing.T, script string) string {
	t.Helper()
	got, gerr, gcode := fastGit(t, p.s, script)
	want, werr, wcode := realGit(t, p.base, script)
	werr = strings.ReplaceAll(strings.ReplaceAll(werr, p.base+"/w", "/workspace"), p.base+"/t", "/tmp")
	if got != want || gcode != wcode || gerr != werr {
		t.Errorf("%s\n--- fast path status %d, stderr %q; git status %d, stderr %q\n%s", script, gcode, gerr, wcode, werr, firstDiff(got, want))
	}
	return got
}

// buildFormsOrigin is buildGitOrigin with a merge, a tag, a rename and a
// binary file, and a branch that only the remote has.
func buildFormsOrigin(t testing.TB) string {
	dir := buildGitOrigin(t)
	gittest.Git(t, dir, "tag", "v0.1", "HEAD~2")
	gittest.Git(t, dir, "tag", "-a", "-m", "release 0.2", "v0.2", "HEAD~1")
	gittest.Git(t, dir, "checkout", "-q", "feature")
	gittest.Commit(t, dir, map[string]string{"feature.txt": "feature work\n", "data/blob.bin": "\x00\x01\x02binary\x00"}, "Feature: add feature.txt")
	gittest.Git(t, dir, "checkout", "-q", "main")
	gittest.Git(t, dir, "merge", "-q", "--no-ff", "-m", "Merge branch 'feature'", "feature")
	gittest.Git(t, dir, "mv", "docs/guide.md", "docs/manual.md")
	gittest.Commit(t, dir, nil, "docs: rename the guide")
	gittest.Branch(t, dir, "remote-only")
	return dir
}

// TestGitQuiet: -q prints nothing, on stdout or stderr, and the reflog is
// written (so "-" goes back) even without an identity.
func TestGitQuiet(t *testing.T) {
	origin := buildFormsOrigin(t)
	for _, s := range []string{
		"git switch -q main; git checkout -q main; git switch main; git checkout main",
		"git switch -q feature && git switch -q main && git switch -q - && git branch --show-current",
		"git checkout -q feature && git checkout -q - && git branch --show-current && git checkout -q @{-1} 2>/dev/null; git branch --show-current",
		"git checkout -q -b t1 && git switch -q -c t2 && git switch -q --detach HEAD~1 && git switch -q t1 && git status -sb",
		"git branch -q t4 && git branch -q -m t4 t5 && git branch -q -D t5 && git branch -q",
		"git branch -q --delete nosuch; echo $?",
		"git branch t6 origin/feature && git checkout -b t7 origin/feature && git switch -c t8 origin/feature && git status -sb && git config branch.t6.merge",
		"git checkout -q -b t9 origin/remote-only && git status -sb",
		"git switch remote-only && git status -sb && git config branch.remote-only.remote",
		"git checkout -q remote-only && git status -sb",
		"git branch -v; git branch -q -v; git branch -vv; git branch -vv -a; git branch -vv -r",
		"git commit -q --allow-empty -m ahead && git branch -v && git branch -vv && git reset -q --hard HEAD~3 && git branch -vv && git commit -q --allow-empty -m diverged && git branch -vv && git branch -v",
		"git branch -q t1 origin/feature && printf '[branch \"t2\"]\\n\\tremote = origin\\n\\tmerge = refs/heads/gone\\n' >> .git/config && git branch -q t2 && git branch -vv && git branch -v && git checkout -q HEAD~1 && git branch -vv",
	} {
		p := newGitPair(t, origin)
		p.sameAll(t, s)
		exportCheck(t, p.fs, "/repo")
	}
}

// TestGitReflogNoIdentity: with no identity anywhere, checkout still
// writes HEAD's reflog, so "git checkout -" goes back to the branch.
func TestGitReflogNoIdentity(t *testing.T) {
	p := newGitPair(t, buildFormsOrigin(t))
	script := "unset GIT_AUTHOR_NAME GIT_AUTHOR_EMAIL GIT_COMMITTER_NAME GIT_COMMITTER_EMAIL EMAIL; git checkout -q feature && git checkout -q main && git checkout -q - && git branch --show-current && git switch -q - && git branch --show-current"
	got, gerr, code := fastGit(t, p.s, script)
	if code != 0 || got != "feature\nmain\n" {
		t.Fatalf("status %d, out %q, err %q", code, got, gerr)
	}
	// the real git reads the entries (and goes back with them too)
	dir := exportRepo(t, p.fs, "/repo")
	if out := gittest.Git(t, dir, "reflog", "-1", "--format=%gs"); out != "checkout: moving from feature to main" {
		t.Errorf("git reflog: %q", out)
	}
	gittest.Git(t, dir, "checkout", "-q", "-")
	if out := gittest.Git(t, dir, "branch", "--show-current"); out != "feature" {
		t.Errorf("git checkout - after the fast path went to %q", out)
	}
}

// TestGitRevListAndFilters: rev-list and the commit filters of log, on a
// history with a merge, a tag and commits on several days.
func TestGitRevListAndFilters(t *testing.T) {
	origin := buildFormsOrigin(t)
	p := newGitPair(t, origin)
	for _, s := range []string{
		"git rev-list HEAD; git rev-list --count HEAD; git rev-list --all --count; git rev-list -n 2 HEAD; git rev-list -3 --reverse HEAD",
		"git rev-list main..feature; git rev-list feature..main --count; git rev-list ^HEAD~2 HEAD; git rev-list --reverse HEAD~3..HEAD",
		"git rev-list --no-merges --count HEAD; git rev-list --merges HEAD; git rev-list --first-parent HEAD --abbrev-commit",
		"git rev-list HEAD -- docs; git rev-list --count HEAD -- README.md; git rev-list v0.1; git rev-list --count v0.2..HEAD",
		"git rev-list; echo $?; git rev-list nosuch; echo $?; git rev-list ^HEAD; echo $?",
		"git log --oneline --grep=API; git log --oneline --grep=api; git log --oneline -i --grep=api; git log --format=%s --grep='^util'",
		"git log --oneline --grep=README --grep=API; git log --oneline --all-match --grep=gopher --grep=README; git log --oneline --invert-grep --grep=Merge",
		"git log --oneline -E --grep='API|util'; git log --oneline -F --grep='a.d'; git log --oneline --grep='a.d'",
		"git log --oneline --author=Gittest; git log --oneline --author=nobody; git log --oneline -i --author=gittest -1; git log --oneline --committer=Gittest -2",
		"git log --oneline --since='10 years ago'; git log --oneline --until='10 years ago'; git log --oneline --since=2000-01-01 --until=2100-01-01",
		"git log --format='%h %cI' --since='2024-01-02 03:06:05'; git log --oneline --until='2024-01-02T03:06:05+00:00'; git log --oneline --since=2024-01-02; git rev-list --count --since='2 weeks ago' HEAD",
		"git log --oneline --merges; git log --oneline --no-merges -3; git log --grep=nothing; echo $?",
	} {
		p.sameAll(t, s)
	}
}

// TestGitCatFile: each object type, by hash, revision, tag and path.
func TestGitCatFile(t *testing.T) {
	p := newGitPair(t, buildFormsOrigin(t))
	for _, s := range []string{
		"git cat-file -t HEAD; git cat-file -s HEAD; git cat-file -p HEAD; git cat-file commit HEAD~1",
		"git cat-file -t HEAD^{tree}; git cat-file -p HEAD^{tree}; git cat-file -p HEAD:docs; git cat-file -t HEAD:docs",
		"git cat-file -p HEAD:README.md; git cat-file blob HEAD:main.go; git cat-file -s HEAD:data/blob.bin; git cat-file -p HEAD:data/blob.bin | wc -c; git cat-file -p HEAD:main.go | head -2",
		"git cat-file -t v0.2; git cat-file -p v0.2; git cat-file tag v0.2; git cat-file -t v0.1; git cat-file -p $(git rev-parse HEAD)",
		"git cat-file -e HEAD && echo yes; git cat-file -e nosuch; echo $?; git cat-file -e 1234567890123456789012345678901234567890; echo $?",
		"git cat-file -t 1234567890123456789012345678901234567890; echo $?; git cat-file -p HEAD:nosuch; echo $?; git cat-file blob HEAD; echo $?; git cat-file -p nosuch; echo $?",
		"cd docs && git cat-file -p HEAD:docs/api.md; git cat-file -e HEAD:nosuch; echo $?",
	} {
		p.sameAll(t, s)
	}
}

// TestGitDescribe: annotated and lightweight tags, across a merge.
func TestGitDescribe(t *testing.T) {
	origin := buildFormsOrigin(t)
	p := newGitPair(t, origin)
	for _, s := range []string{
		"git describe; git describe --tags; git describe --long; git describe --abbrev=0; git describe --tags --abbrev=4 HEAD~1; git describe v0.2",
		"git describe HEAD~2; echo $?; git describe --tags HEAD~2; git describe --tags --long v0.1; git describe --always HEAD~4; echo $?",
		"git describe feature; git describe --tags feature~1; git describe nosuch; echo $?",
		"git tag -d v0.1 v0.2 >/dev/null; git describe; echo $?; git describe --always; git tag light && git describe; echo $?; git describe --tags",
	} {
		p.sameAll(t, s)
	}
	// no tags at all
	p = newGitPair(t, buildGitOrigin(t))
	p.sameAll(t, "git describe; echo $?; git describe --tags; echo $?; git describe --always --abbrev=10")
}

// TestGitClean: untracked files and directories, ignored ones, empty
// directories, a nested repository, from the root and a subdirectory.
func TestGitClean(t *testing.T) {
	origin := buildFormsOrigin(t)
	setup := "mkdir -p e4 u1 u3/empty mix sub/deep ig.log src/new && git init -q nested && echo n > nested/n && echo x > u1/a && echo y > top.txt && echo '*.log' > .gitignore && git add .gitignore && echo q > k.log && echo 1 > mix/keep.log && echo 2 > mix/go.txt && echo s > sub/deep/f && echo 3 > ig.log/x && echo n > src/new/n && echo m > src/m.txt && "
	for _, s := range []string{
		"git clean; echo $?; git clean -n; git clean -nd; git clean -ndx; git clean -nx",
		"git clean -f && git status -s",
		"git clean -fd && git status -s && ls mix",
		"git clean -fdx -q && git status -s && ls",
		"cd src && git clean -n && git clean -nd && git clean -fd && cd .. && git status -s",
		"git config clean.requireForce false && git clean && git clean -nd; echo $?",
	} {
		p := newGitPair(t, origin)
		p.sameAll(t, setup+s)
		exportCheck(t, p.fs, "/repo")
	}
}

// TestGitShortlog: grouped, counted, with e-mails, over ranges; with no
// revision git reads stdin (empty here) and prints nothing.
func TestGitShortlog(t *testing.T) {
	origin := buildFormsOrigin(t)
	p := newGitPair(t, origin)
	for _, s := range []string{
		"git shortlog HEAD; git shortlog -sn HEAD; git shortlog -sne HEAD; git shortlog -s HEAD~2..HEAD; git shortlog -e main..feature",
		"git shortlog -sn; echo $?; git shortlog -s --all; git shortlog -sn --no-merges HEAD -- docs",
		"unset GIT_AUTHOR_NAME GIT_AUTHOR_EMAIL; git -c user.name=Zed -c user.email=z@x commit -q --allow-empty -m 'z one' && git -c user.name=alice -c user.email=a@x commit -q --allow-empty -m 'a one' && git shortlog -n HEAD && git shortlog -sne HEAD~3..",
	} {
		p.sameAll(t, s)
	}
}

// TestGitStash: push, list, show, apply, pop and drop, compared with git
// (the stash commits have the same ids), and read back by the real git.
func TestGitStash(t *testing.T) {
	origin := buildFormsOrigin(t)
	edit := "echo more >> README.md && rm docs/api.md && echo new > new.txt && git add new.txt && echo staged >> main.go && git add main.go && echo unstaged >> main.go && "
	for _, s := range []string{
		"git stash; echo $?; git stash -q; git stash push -q -u; git stash list; git stash pop; echo $?; git stash drop; echo $?; git stash show; echo $?",
		edit + "git stash && git status -s && git stash list && git rev-parse stash stash^1 stash^2 && git stash show && git stash show -p && git stash pop && git status -s && git stash list",
		edit + "git stash push -q -m 'my work' && git stash list && git stash apply && git stash list && git status -s",
		edit + "echo u > untracked.txt && mkdir -p ud && echo v > ud/f && git stash -u && git status -s && git cat-file -p stash | grep -c parent && git rev-parse stash stash^2 && git stash show --stat && git stash pop -q && git status -s",
		"echo a >> README.md && git stash -q && echo b >> go.mod && git stash -q && git stash list && git stash show stash@{1} && git stash drop 1 && git stash list && git stash pop stash@{0} && git stash list; echo $?",
		"echo a >> README.md && git stash -q && git commit -q --allow-empty -m moved && git stash pop && git log --oneline -1",
		"echo a >> README.md && git stash -q && git stash apply -q && git stash apply; echo $?; git stash clear; git stash list",
		"echo a >> README.md && git stash -q && git stash pop stash@{3}; echo $?; git stash drop nosuch; echo $?",
		"git checkout -q HEAD~1 && echo a >> README.md && git stash && git stash list",
	} {
		p := newGitPair(t, origin)
		p.sameAll(t, s)
		exportCheck(t, p.fs, "/repo")
	}
	// the real git pops what the fast path stashed
	p := newGitPair(t, origin)
	fastGit(t, p.s, edit+"git stash -q")
	dir := exportRepo(t, p.fs, "/repo")
	gittest.Git(t, dir, "stash", "pop", "-q")
	if st := gittest.Git(t, dir, "status", "--porcelain"); st != "M README.md\n D docs/api.md\nMM main.go\nA  new.txt" && st != "M README.md\n D docs/api.md\n M main.go\nA  new.txt" {
		t.Errorf("git stash pop of the fast path's stash: status\n%s", st)
	}
}

// TestGitFormsCanRun: the new forms are kept on the fast path, and each
// option they do not implement routes the command to the sandbox.
func TestGitFormsCanRun(t *testing.T) {
	for _, c := range []struct {
		script string
		ok     bool
	}{
		{"git switch -q main", true},
		{"git branch -q x", true},
		{"git branch -vv", true},
		{"git branch --set-upstream-to=origin/x", false},
		{"git rev-list --count HEAD", true},
		{"git rev-list --all -n 5 --reverse", true},
		{"git rev-list main..feature", true},
		{"git rev-list --objects HEAD", false},
		{"git rev-list --topo-order HEAD", false},
		{"git rev-list --left-right --count a...b", false},
		{"git log --grep=fix -i --oneline", true},
		{"git log --all-match --grep=a --grep=b", true},
		{"git log --since='2 weeks ago' --until=2024-01-01", true},
		{"git log --since=yesterday", false},
		{"git log --since='last monday'", false},
		{`git log --grep='\(a\)\1'`, false},
		{`git log --grep "$PAT" --oneline`, true},
		{`git log --since="$D"`, false},
		{"git log -P --grep=x", false},
		{"git describe", true},
		{"git describe --tags --always --abbrev=10", true},
		{"git describe --dirty", false},
		{"git describe --match 'v*'", false},
		{"git describe a b", false},
		{"git cat-file -t HEAD", true},
		{"git cat-file -p HEAD:README.md", true},
		{"git cat-file blob HEAD:x", true},
		{"git cat-file --batch-check", false},
		{"git cat-file -t -s HEAD", false},
		{"git cat-file tree HEAD", false},
		{"git clean -n", true},
		{"git clean -nd", true},
		{"git clean -fdx", true},
		{"git clean -n -- src", false},
		{"git clean -ffd", false},
		{"git clean -X -n", false},
		{"git clean -i", false},
		{"git shortlog -sn HEAD", true},
		{"git shortlog -sne --all", true},
		{"git shortlog -w HEAD", false},
		{"git shortlog -c HEAD", true},
		{"git stash", true},
		{"git stash push -m 'wip' -u", true},
		{"git stash list", true},
		{"git stash show -p stash@{1}", true},
		{"git stash pop", true},
		{"git stash apply --index", false},
		{"git stash push -- a.go", false},
		{"git stash push --keep-index", false},
		{"git stash -a", false},
		{"git stash branch x", false},
		{"git stash save msg", false},
		{"git stash list --stat", false},
		{"git stash create", false},
		{"git apply x.patch", true},
		{"git apply --check -R --stat --numstat -p0 x.patch", true},
		{"git apply --index x.patch", true},
		{"git apply -3 x.patch", false},
		{"git apply --reject x.patch", false},
		{"git apply -v x.patch", false},
		{"git apply --whitespace=fix x.patch", false},
		{"git apply --cached --index x.patch", false},
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

// TestGitApply: patches made by git diff, applied, checked, reversed,
// counted, to the index, with offsets, failures and whitespace errors.
func TestGitApply(t *testing.T) {
	origin := buildFormsOrigin(t)
	mk := "sed -i 's/gopher/friend/' main.go && echo '// end' >> main.go && sed -i '2d' README.md && echo new > new.txt && rm docs/api.md && git add -A && git diff --cached > /tmp/p && git reset -q --hard && "
	for _, s := range []string{
		mk + "git apply --stat /tmp/p && git apply --numstat /tmp/p && git apply --check /tmp/p && git apply /tmp/p && git status -s && git diff --stat",
		mk + "git apply /tmp/p && git apply -R --check /tmp/p && git apply -R /tmp/p && git status -s",
		mk + "git apply --index /tmp/p && git status -s && git apply -R --cached /tmp/p && git status -s",
		mk + "git apply --cached /tmp/p && git status -s && git diff --cached --stat",
		mk + "git apply /tmp/p; git apply /tmp/p; echo $?; git status -s",
		mk + "git apply --check -R /tmp/p; echo $?; git apply -R /tmp/p; echo $?; git status -s",
		mk + "(printf '// header\\n// two\\n'; cat main.go) > m && mv m main.go && git apply /tmp/p && git status -s && git diff main.go",
		mk + "sed -i 's/func main/func Main/' main.go && git apply /tmp/p; echo $?; git status -s",
		mk + "git apply < /tmp/p && git status -s; git apply --stat --numstat - < /tmp/p",
		mk + "sed 's,a/,,; s,b/,,' /tmp/p > /tmp/p0 && git apply -p0 /tmp/p0 && git status -s",
		mk + "git apply -p2 /tmp/p; echo $?",
		"printf 'x \\n\\ty\\n \\tz\\n' >> go.mod && git diff > /tmp/w && git checkout -q go.mod && git apply /tmp/w && git diff --stat && git apply --check -R /tmp/w",
		"printf 'no newline' > go.mod && git diff > /tmp/n && git checkout -q go.mod && git apply /tmp/n && git diff && git apply -R /tmp/n && git status -s",
		"seq 1 100 > s.txt && git add s.txt && git commit -qm s && seq 1 100 | sed 's/^50$/fifty/; s/^10$/ten/; s/^90$/ninety/' > s.txt && git diff > /tmp/s && git checkout -q s.txt && sed -i '1i 0' s.txt && git apply /tmp/s && git diff",
		"git apply /dev/null; echo $?; echo garbage > /tmp/g && git apply /tmp/g; echo $?; git apply /tmp/nosuch; echo $?",
		"echo x >> README.md && git diff > /tmp/r && git apply --index /tmp/r; echo $?; git status -s",
	} {
		p := newGitPair(t, origin)
		p.sameAll(t, s)
		exportCheck(t, p.fs, "/repo")
	}
}

// TestGitShowFormats: --format/--pretty placeholders and --date modes of
// show and log.
func TestGitShowFormats(t *testing.T) {
	p := newGitPair(t, buildFormsOrigin(t))
	for _, s := range []string{
		"git show -s --format='%h %an %ar %s'; git show --format='%H%n%P%n%ae %cr' -s HEAD~1; git show --pretty=format:'%h %ad' --date=short -s",
		"git log --format='%h %ad %s' --date=short -3; git log --date=iso -1; git log --date=iso-strict --format=%cd -2; git log --date=rfc --format=%ad -1",
		"git log --date=raw --format='%ad|%cd' -2; git log --date=unix --format=%ad -1; git log --date=relative -1; git log --format='%ar %cr' -2",
		"git show --stat --format='%h %s%n%b' HEAD~2; git show --pretty=oneline -s; git show --pretty=short -s; git show --pretty=full -s HEAD~2",
	} {
		p.sameAll(t, s)
	}
}

// TestGitLongHistoryBudget: walking a long history is charged to the
// call's memory budget: a small budget stops rev-list, the default one
// counts every commit.
func TestGitLongHistoryBudget(t *testing.T) {
	dir := t.TempDir()
	gittest.Git(t, dir, "init", "-q", "-b", "main")
	const n = 40000
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "commit refs/heads/main\nmark :%d\ncommitter A <a@x> %d +0000\ndata 2\nc\n", i, 1700000000+i)
		if i > 1 {
			fmt.Fprintf(&b, "from :%d\n", i-1)
		}
	}
	cmd := exec.Command("git", "fast-import", "--quiet")
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(b.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("fast-import: %v\n%s", err, out)
	}
	s, _ := gitStore(t, dir)
	run := func(max int64) (string, string, int) {
		var out, errb bytes.Buffer
		res, err := s.Exec(context.Background(), "git rev-list --count HEAD", ExecOptions{Cwd: "/workspace/repo", Env: gitIdentity(),
			Stdout: &out, Stderr: &errb, Timeout: 5 * time.Minute, MaxMemory: max})
		if err != nil {
			t.Fatal(err)
		}
		return out.String(), errb.String(), res.ExitCode
	}
	start := time.Now()
	if out, errs, code := run(0); code != 0 || out != fmt.Sprintf("%d\n", n) {
		t.Fatalf("default budget: status %d, out %q, err %q", code, out, errs)
	}
	t.Logf("git rev-list --count HEAD of %d commits: %v", n, time.Since(start))
	out, errs, code := run(4 << 20)
	if code == 0 || out != "" {
		t.Fatalf("a 4 MiB budget: status %d, out %q, err %q", code, out, errs)
	}
	t.Logf("with a 4 MiB budget: status %d, %q", code, errs)
}
