package shell

import "testing"

// TestGitStatForms: --stat, --numstat, --name-status and --shortstat of
// diff, show and log, against the git CLI: long and quoted names,
// renames, binary files, wide changes, a subdirectory.
func TestGitStatForms(t *testing.T) {
	origin := buildFormsOrigin(t)
	st := "git diff --stat; git diff --numstat; git diff --name-status; git diff --shortstat; git diff --stat --numstat --name-only; "
	for _, s := range []string{
		"git show --stat HEAD; git show --numstat HEAD; git show --name-status HEAD; git show --shortstat HEAD~2; git log --stat -3 --format=%h",
		"git log --numstat --format=%s -4; git log --name-status --oneline -4; git diff --stat HEAD~4 HEAD; git diff --numstat v0.1 HEAD",
		"mkdir -p a/very/long/directory/name/that/goes/on/and/on && seq 1 300 > a/very/long/directory/name/that/goes/on/and/on/file-with-a-long-name.txt && git add -A && " +
			"seq 1 5 > small.txt && git add small.txt && git diff --cached --stat; git diff --cached --numstat; git diff --cached --shortstat",
		"seq 1 200 | sed 's/$/ line/' >> main.go && sed -i '1,3d' README.md && printf 'q\\x00\\x01' > data/blob.bin && " + st,
		"printf 'x\\n' > 'sp ace.txt' && printf 'y\\n' > 'tab\\there.txt' && printf 'z\\n' > 'ü.txt' && git add -A && git diff --cached --stat; git diff --cached --numstat; git diff --cached --name-status; git diff --cached --name-only",
		"git mv main.go cmd.go && echo '// x' >> cmd.go && git add -A && git diff --cached --stat; git diff --cached --numstat; git diff --cached --name-status; git diff --cached -M --stat",
		"echo x >> internal/util/strings.go && cd internal && git diff --stat; git diff --numstat; git diff --name-status; git diff --stat -- ../main.go util",
		"git diff --stat HEAD~2; git diff --stat HEAD~2 HEAD -- docs; git show --stat --name-status HEAD; git log --numstat --name-only -2 --format=%h; git show --stat --oneline HEAD~2",
	} {
		p := newGitPair(t, origin)
		p.sameAll(t, s)
	}
}
