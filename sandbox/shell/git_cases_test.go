package shell

import "testing"

// TestGitEdgeCases: each script on a fresh pair (harder diffs, binary files,
// links, modes, renames, errors, amend, detached HEAD, subdirectories).
func TestGitEdgeCases(t *testing.T) {
	origin := buildGitOrigin(t)
	for _, s := range []string{
		`printf 'package main\n\nfunc a() {\n}\n\nfunc b() {\n}\n\nfunc c() {\n}\n' > x.go && git add x.go && git commit -qm x && printf 'package main\n\nfunc a() {\n}\n\nfunc n() {\n}\n\nfunc b() {\n}\n\nfunc c() {\n}\n' > x.go && git diff`,
		`sed -i '3d;10d' main.go && sed -i 's/greet/Greet/g' main.go && echo '// end' >> main.go && git diff && git diff --stat`,
		`sed -i '1,3d' docs/guide.md && printf 'a\nb\n' >> docs/guide.md && git diff -U1`,
		`printf 'no newline' > go.mod && git diff`,
		`printf '\x00\x01bin' > data/bin.dat && git add . && git commit -qm bin && printf '\x00\x02bin2' > data/bin.dat && git diff && git diff --stat && git log --stat -1`,
		`for i in $(seq 1 200); do echo line $i; done > big.txt && git add big.txt && git diff --cached --stat`,
		`ln -s main.go link2 && git add link2 && git status -s && git diff --cached`,
		`chmod +x go.mod && git status && git diff`,
		`cp main.go main2.go && sed -i 's/gopher/x/' main2.go && git rm -q main.go && git add main2.go && git status && git diff --cached --stat`,
		`git log --oneline -- web/app.js; git log --stat --oneline -2`,
		`git log --format=%s -n2 --name-status`,
		`git show HEAD~2 --name-status`,
		`git diff HEAD~3 --stat`,
		`git log -3 --format='%h%n%b---'`,
		`git log --author=Gittest --oneline -2`,
		`git branch -m renamed && git branch && git status -sb`,
		`git checkout HEAD~1 && git status && git branch`,
		`git checkout -q HEAD~1 && git checkout main && git status -sb`,
		`echo x > a && git add a && git commit -q -m a && git status && git status -sb`,
		`git reset -q --hard HEAD~2 && git status && git status -sb`,
		`mkdir -p sub/deep && cd sub/deep && echo x > f && git status && git status -s && git add f && git status -s && git commit -qm f && git log --stat -1`,
		`echo hi > 'space dir/new file.txt' && git add -A && git status && git status -s && git diff --cached`,
		`git rm -r docs && git status`,
		`git rm docs; echo $?`,
		`git rm nosuch; echo $?`,
		`git add nosuch; echo $?`,
		`echo x >> main.go && git rm main.go; echo $?`,
		`echo x > bin/x 2>/dev/null; mkdir bin && echo x > bin/x && echo y > e.log && git status --short && git add bin/x; echo $?`,
		`git commit -m empty; echo $?`,
		`echo x >> main.go && git commit -m nope; echo $?`,
		`git commit --allow-empty -m 'Empty' && git log --oneline -1`,
		`git commit --amend -m 'Amended message' && git log --oneline -2`,
		`git mv nosuch x; echo $?`,
		`git mv src lib && git status && git commit -qm mv && git show --stat`,
		`git restore nosuch; echo $?`,
		`git switch nosuch; echo $?`,
		`git checkout nosuch; echo $?`,
		`git branch main; echo $?`,
		`git diff HEAD~1 -- README.md main.go`,
		`git diff --stat HEAD~3 -- docs`,
		`git ls-files --stage | head -3`,
		`git rev-parse --verify HEAD; git rev-parse --verify nosuch; echo $?`,
		`git rev-parse --git-dir; cd docs && git rev-parse --git-dir --show-cdup`,
		`git show --format=%H -s`,
		`git log -1 --format=%B`,
		`git status -uno`,
		`echo x >> README.md; git diff --color=never`,
	} {
		p := newGitPair(t, origin)
		p.same(t, s)
	}
}
