package computerfs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/computerfs/computerfs"
	"github.com/computerfs/computerfs/internal/gittest"
	"github.com/computerfs/computerfs/internal/testmount"
)

// TestAgentCommitIdentity: the spec's author: is who the agent's commits
// and reflog entries are by on both backends, so the first `git commit`
// works (git itself would stop with "Author identity unknown"), and
// `git checkout -` finds its way back through the reflog; an identity the
// agent set in the repository still wins, as in git.
func TestAgentCommitIdentity(t *testing.T) {
	bare := gittest.Bare(t, gittest.NewRepo(t, map[string]string{"a.txt": "a\n"}))
	spec := filepath.Join(t.TempDir(), "ws.yaml")
	lib := gittest.Bare(t, gittest.NewRepo(t, map[string]string{"lib.go": "package lib\n"}))
	yaml := "sources:\n  - path: /r\n    git: {url: " + bare + `, author: 'Spec "Jr" O''Au\thor; #1 <spec@example.com>'}` + "\n" +
		"  - path: /sub dir/lib\n    git: {url: " + lib + ", author: 'Lib Author <lib@example.com>'}\n"
	if err := os.WriteFile(spec, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	m := testmount.Start(t, filepath.Join(t.TempDir(), "ws"), "--spec", spec)
	run := func(backend, command string) string {
		t.Helper()
		res, out, errOut, err := execOn(t, m.Dir, computerfs.ExecRequest{Backend: backend, Cwd: "r", Command: command})
		if err != nil || res.ExitCode != 0 || res.Backend != backend {
			t.Fatalf("%s: %s: %v %+v\nstdout %s\nstderr %s", backend, command, err, res, out, errOut)
		}
		return out
	}
	const want = `Spec "Jr" O'Au\thor; #1 <spec@example.com>`
	const show = `git log -1 --format='%an <%ae>|%cn <%ce>'; tail -n 1 .git/logs/HEAD | cut -f1 | cut -d' ' -f3- | sed 's/ [0-9]* [-+][0-9]*$//'`
	for i, backend := range []string{"shell", "sandbox"} {
		f := []string{"one", "two"}[i]
		got := run(backend, "echo "+f+" > "+f+" && git add "+f+" && git commit -q -m "+f+" && "+show)
		if got != want+"|"+want+"\n"+want+"\n" {
			t.Errorf("%s: the commit and its reflog entry are by\n%s want %s", backend, got, want)
		}
		got = run(backend, "git checkout -q -b side-"+f+" && git checkout -q - && git branch --show-current && "+show)
		if got != "main\n"+want+"|"+want+"\n"+want+"\n" {
			t.Errorf("%s: after checkout -b and checkout -:\n%s", backend, got)
		}
	}
	// Another source's repository is by its own author:; a repository
	// the agent made is by the first source's.
	if res, _, errOut, err := execOn(t, m.Dir, computerfs.ExecRequest{Backend: "sandbox", Command: "git init -q -b main scratch"}); err != nil || res.ExitCode != 0 {
		t.Fatalf("git init: %v %+v %s", err, res, errOut)
	}
	for _, c := range []struct{ dir, want string }{{"sub dir/lib", "Lib Author <lib@example.com>"}, {"scratch", want}} {
		for i, backend := range []string{"shell", "sandbox"} {
			f := fmt.Sprintf("f%d", i)
			res, got, errOut, err := execOn(t, m.Dir, computerfs.ExecRequest{Backend: backend, Cwd: c.dir,
				Command: "echo " + f + " > " + f + " && git add " + f + " && git commit -q -m " + f + " && " + show})
			if err != nil || res.ExitCode != 0 || got != c.want+"|"+c.want+"\n"+c.want+"\n" {
				t.Errorf("%s in %s: %v %+v: the commit and its reflog entry are by\n%s%s want %s", backend, c.dir, err, res, got, errOut, c.want)
			}
		}
	}
	// What the agent configures in the repository wins, on both backends.
	run("shell", "git config user.name 'The Agent' && git config user.email agent@example.com")
	for i, backend := range []string{"shell", "sandbox"} {
		f := []string{"three", "four"}[i]
		got := run(backend, "echo "+f+" > "+f+" && git add "+f+" && git commit -q -m "+f+" && "+show)
		if w := "The Agent <agent@example.com>"; got != w+"|"+w+"\n"+w+"\n" {
			t.Errorf("%s: with the agent's own user.name, the commit is by\n%s", backend, got)
		}
	}
	// The workspace's .git/config holds only what the agent wrote.
	if cfg := run("shell", "cat .git/config"); strings.Contains(cfg, "spec@example.com") {
		t.Errorf(".git/config has the spec's identity:\n%s", cfg)
	}
}
