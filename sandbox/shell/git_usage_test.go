package shell

import (
	"testing"
)

// gitUsageForms are command lines the real git rejects with a usage
// error (status 129 and its usage or error text on stderr), one or two of
// each kind: an unknown option, a value where there is none or none where
// one is wanted, a missing or extra argument. Most come from walking the
// fast path's flag tables (each flag given a value, given twice, given
// without one) and keeping what git 2.39 rejects.
var gitUsageForms = []string{
	"git log --frobnicate", "git commit -Z", "git branch --no-such", "git status --bogus", "git diff -Z",
	"git add --no-such", "git checkout --nope", "git switch -Z x", "git reset --what", "git rm --bogus x",
	"git show --nope", "git stash push --bogus", "git tag --nope", "git rev-parse --nope", "git grep --bogus x",
	"git describe --bogus", "git cat-file -Z HEAD", "git clean --bogus", "git apply --bogus", "git shortlog --bogus",
	"git mv", "git mv -- x", "git mv -f", "git mv -n -v", "git mv -k",
	"git init x y z", "git branch x y z",
	"git rev-list", "git rev-list -- x", "git rev-list --count", "git rev-list --all-match", "git rev-list --author x",
	"git rev-list --grep=", "git rev-list --reverse --no-merges", "git rev-list -E -i", "git rev-list --first-parent",
	"git describe --abbrev=", "git describe --abbrev=x", "git shortlog --committer=x", "git shortlog --committer=",
	"git diff --word-diff=", "git log --word-diff=", "git show --word-diff=", "git diff --word-diff=bogus",
	"git grep -h", "git commit -m", "git commit --amend=x", "git log -n", "git log --max-count",
	"git checkout -b", "git switch -c", "git branch -m", "git tag -m", "git stash push -m",
	"git diff --stat=x,y,z", "git status --porcelain=v9", "git add --chmod=x", "git commit --cleanup=bogus -m x",
	"git cat-file", "git cat-file -t", "git cat-file -p", "git cat-file bogus HEAD", "git apply -p", "git apply -px",
	"git -C", "git -c", "git --bogus status", "git status -uq", "git log --date=bogus", "git log --format",
	"git reset --soft --hard", "git rm", "git stash drop x y", "git stash pop x y", "git clean -n -i",
	"git restore", "git switch", "git diff --name-only --name-status", "git show -s --name-only", "git log --name-status -s", "git branch -m a b c", "git log -h", "git status -h", "git rm -h", "git branch -f x y z", "git init -q x y", "git describe --tags --all --exact-match --contains", "git rev-parse --short=x HEAD",
}

// TestGitUsageErrors: each form the real git rejects with a usage error
// is routed to the sandbox, or gives git's bytes on the fast path.
func TestGitUsageErrors(t *testing.T) {
	p := newGitPair(t, buildFormsOrigin(t))
	fast := 0
	for _, s := range gitUsageForms {
		if ok, _ := CanRun(s); !ok {
			continue
		}
		fast++
		p.sameAll(t, s)
	}
	t.Logf("%d of %d forms kept on the fast path, all git's bytes", fast, len(gitUsageForms))
}

// TestGitShortlogCommitter: shortlog's --committer (-c) groups by
// committer; it is not the revision filter --committer=PATTERN.
func TestGitShortlogCommitter(t *testing.T) {
	p := newGitPair(t, buildFormsOrigin(t))
	p.sameAll(t, "git shortlog -s -c HEAD; git shortlog --committer -e HEAD~2; git shortlog -c -n --author=Gittest HEAD")
}
