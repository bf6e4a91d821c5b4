package shell

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/computerfs/computerfs/internal/gittest"
)

// TestGitWordDiff: git diff/show/log --word-diff (plain and porcelain)
// against the git CLI, on stdout, stderr and the status.
func TestGitWordDiff(t *testing.T) {
	origin := buildFormsOrigin(t)
	wd := "git diff --word-diff; git diff --word-diff=porcelain; "
	for _, s := range []string{
		"sed -i 's/gopher/friend/' main.go && " + wd + "git diff --word-diff --stat; git diff --numstat --word-diff",
		"sed -i 's/ /  /g; s/^#/# /' README.md && " + wd + "git diff --word-diff=none",
		"echo 'a new  line, here' >> README.md && sed -i '1i top line' README.md && " + wd,
		"sed -i '2d; 4d' README.md && " + wd + "git diff -U1 --word-diff",
		"printf 'no newline at the end' > go.mod && " + wd + "printf 'x' >> README.md && " + wd,
		"printf 'a b a b c\\r\\n\\td  e\\n\\n' > new.txt && git add new.txt && git diff --cached --word-diff; git diff --cached --word-diff=porcelain; " +
			"printf 'a b c\\r\\n d e\\n\\n\\nf\\n' > new.txt && " + wd,
		"git rm -q docs/api.md && git diff --cached --word-diff && git diff --cached --word-diff=porcelain HEAD~2",
		"sed -i 's/func main() {/func main() { \\/\\/ start/; s/fmt/fmt2/g' main.go && " + wd + "git diff --word-diff=porcelain --word-diff",
		"git show --word-diff; git show --word-diff=porcelain HEAD~2; git show --word-diff HEAD~2 -- main.go; git log -p --word-diff -3 --format=%s",
		"git diff --word-diff HEAD~3 HEAD; git diff --word-diff=plain --word-diff=none --word-diff HEAD~4; git log --word-diff -2 --oneline",
		"git diff --word-diff v0.1 origin/feature -- data; git show --word-diff --stat HEAD~2",
		"printf 'x y z x y z\\nthe quick brown fox\\n' > main.go && " + wd + "printf 'z y x\\nbrown the fox quick jumps\\n\\nx y z x y z\\n' > main.go && " + wd,
		"sed -i 's/[aeiou]/& /g' README.md && " + wd,
		"printf 'a a a a b\\nc a a\\n' > w && git add w && printf 'a a a b a\\nc a a a\\n' > w && " + wd,
		"sed -i 's/e/E/2; s/ /\\t/3' main.go go.mod && " + wd,
	} {
		p := newGitPair(t, origin)
		p.sameAll(t, s)
	}
	// a diff driver's own words, or diff.wordRegex: the sandbox's
	p := newGitPair(t, origin)
	for _, s := range []string{
		"echo '*.go diff=golang' > .gitattributes && echo x >> main.go && git diff --word-diff",
		"rm .gitattributes; printf '[diff]\\n\\twordRegex = .\\n' >> .git/config && git diff --word-diff",
	} {
		if _, errs, code := fastGit(t, p.s, s); code != 129 || !strings.Contains(errs, "run it in the sandbox") {
			t.Errorf("%s: status %d, %q", s, code, errs)
		}
	}
}

func TestGitWordDiffCanRun(t *testing.T) {
	for _, c := range []struct {
		script string
		ok     bool
	}{
		{"git diff --word-diff", true},
		{"git diff --word-diff=plain HEAD~1", true},
		{"git diff --word-diff=porcelain --cached", true},
		{"git diff --word-diff=none", true},
		{"git show --word-diff", true},
		{"git log -p --word-diff -1", true},
		{"git diff --word-diff=color", false},
		{"git diff --word-diff=bogus", false},
		{"git diff --word-diff-regex=.", false},
		{"git diff --color-words", false},
		{"git stash show -p --word-diff", false},
	} {
		if ok, why := CanRun(c.script); ok != c.ok {
			t.Errorf("CanRun(%q) = %v (%s), want %v", c.script, ok, why, c.ok)
		}
	}
}

// TestGitWordDiffBudget: the word lists of a big change are charged to
// the call: a line of 131,072 short words is diffed with the default
// budget and stopped with a small one.
func TestGitWordDiffBudget(t *testing.T) {
	dir := t.TempDir()
	gittest.Git(t, dir, "init", "-q", "-b", "main")
	words := strings.Repeat("a ", 1<<17)
	gittest.Commit(t, dir, map[string]string{"w.txt": words + "\n"}, "words")
	s, _ := gitStore(t, dir)
	run := func(max int64) (string, string, int) {
		var out, errb bytes.Buffer
		res, err := s.Exec(context.Background(), "sed -i 's/^a/b/' w.txt && git diff --word-diff > /tmp/o && grep -c '^\\[-a-\\]{+b+} a a ' /tmp/o", ExecOptions{Cwd: "/workspace/repo",
			Env: gitIdentity(), Stdout: &out, Stderr: &errb, Timeout: 5 * time.Minute, MaxMemory: max})
		if err != nil {
			t.Fatal(err)
		}
		return out.String(), errb.String(), res.ExitCode
	}
	if out, errs, code := run(0); code != 0 || out != "1\n" {
		t.Fatalf("default budget: status %d, out %q, err %q", code, out, errs)
	}
	out, errs, code := run(8 << 20)
	if code == 0 || !strings.Contains(errs, "memory") {
		t.Fatalf("an 8 MiB budget: status %d, out %q, err %q", code, out, errs)
	}
	t.Logf("with an 8 MiB budget: status %d, %q", code, errs)
}
