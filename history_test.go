package computerfs_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/computerfs/computerfs"
	"github.com/computerfs/computerfs/internal/gittest"
	"github.com/computerfs/computerfs/internal/testmount"
)

// historyAttacks read a file of the repository's history, through every
// door the agent has: git on the fast path and in the sandbox, and the
// raw objects (zlib-compressed loose objects and packs: grep -a finds no
// text in them, so each is inflated).
var historyAttacks = []struct{ backend, cmd string }{
	{"shell", "cd r && git show HEAD~1:secrets/token"},
	{"shell", "cd r && git log -p --all"},
	{"shell", "cd r && git grep s3cr3t HEAD~1"},
	{"shell", "cat r/.git/HEAD; find r/.git -type f | head"},
	{"sandbox", "cd r && git show HEAD~1:secrets/token"},
	{"sandbox", "cd r && git log -p --all"},
	{"sandbox", "cd r && git cat-file --batch-all-objects --batch"},
	{"sandbox", `for f in $(find r/.git/objects -type f); do python3 -c 'import sys,zlib; print(zlib.decompress(open(sys.argv[1],"rb").read()))' "$f" 2>/dev/null; done; cat r/.git/objects/pack/* | strings`},
	{"sandbox", "cp -r r/.git /tmp/g && cd /tmp/g && git --git-dir=/tmp/g log -p --all"},
	{"sandbox", "mv r/.git r/dotgit && cd r && git --git-dir=dotgit log -p --all"},
	{"sandbox", "tar cf - r/.git | tar tvf -"},
}

// A file denied by the policy but committed upstream: the source's .git
// is denied too, so its history cannot be read by any backend or tool,
// while the work tree stays the agent's. A repository whose history holds
// nothing denied keeps a working git. A refresh that brings denied history
// denies the .git from then on. The record survives a remount.
func TestDeniedGitHistory(t *testing.T) {
	up := gittest.NewRepo(t, map[string]string{"README": "hello\n", "secrets/token": "s3cr3t-history\n"})
	gittest.Git(t, up, "rm", "-q", "-r", "secrets")
	gittest.Commit(t, up, map[string]string{"main.go": "package main\n"}, "drop the token")
	clean := gittest.NewRepo(t, map[string]string{"README": "clean\n"})
	// A dir source that holds checkouts: one whose history holds a
	// denied file, one clean.
	local := t.TempDir()
	if out, err := exec.Command("git", "clone", "-q", up, filepath.Join(local, "deep", "exposed")).CombinedOutput(); err != nil {
		t.Fatalf("clone: %v %s", err, out)
	}
	if out, err := exec.Command("git", "clone", "-q", clean, filepath.Join(local, "fine")).CombinedOutput(); err != nil {
		t.Fatalf("clone: %v %s", err, out)
	}
	spec := filepath.Join(t.TempDir(), "ws.yaml")
	writeSpecFile(t, spec, "sources:\n  - path: /r\n    git: {url: "+up+"}\n  - path: /c\n    git: {url: "+clean+"}\n  - path: /d\n    dir: "+local+"\n"+
		"policy:\n  deny: [\"**/secrets\", \"**/token\"]\n")

	store := filepath.Join(t.TempDir(), "store")
	m := testmount.Start(t, store, "--spec", spec)
	check := func(what string) {
		t.Helper()
		for _, a := range historyAttacks {
			_, out, errOut, err := execOn(t, m.Dir, computerfs.ExecRequest{Backend: a.backend, Command: a.cmd, Network: "none"})
			if err != nil {
				t.Fatalf("%s: %s %q: %v", what, a.backend, a.cmd, err)
			}
			if strings.Contains(out+errOut, "s3cr3t") {
				t.Errorf("%s: %s %q read the denied history:\n%s%s", what, a.backend, a.cmd, out, errOut)
			}
		}
		for _, a := range []struct{ backend, cmd string }{
			{"shell", "cd d/deep/exposed && git log -p --all"},
			{"sandbox", "cd d/deep/exposed && git log -p --all"},
			{"sandbox", "cat d/deep/exposed/.git/objects/pack/* d/deep/exposed/.git/objects/*/* | python3 -c 'import sys,zlib; d=sys.stdin.buffer.read(); print(d)' | head -c 100000"},
		} {
			_, out, errOut, err := execOn(t, m.Dir, computerfs.ExecRequest{Backend: a.backend, Command: a.cmd})
			refused := strings.Contains(out+errOut, "ermission denied") || strings.Contains(errOut, "not a git repository")
			if err != nil || strings.Contains(out+errOut, "s3cr3t") || !refused {
				t.Errorf("%s: the dir source's exposed checkout, %s %q: %v %q %q", what, a.backend, a.cmd, err, out, errOut)
			}
		}
		if res, out, errOut, err := execOn(t, m.Dir, computerfs.ExecRequest{Backend: "shell", Command: "cd d/fine && git log --format=%s && cat ../deep/exposed/README"}); err != nil || res.ExitCode != 0 || out != "initial\nhello\n" {
			t.Errorf("%s: the dir source's clean checkout: %v %+v %q %q", what, err, res, out, errOut)
		}
		c, err := computerfs.Dial(m.Dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, args := range []string{`{"path":"r/.git/HEAD"}`, `{"path":"r/.git/packed-refs"}`} {
			if res, err := c.Call(context.Background(), "read", json.RawMessage(args)); err == nil {
				t.Errorf("%s: the read tool read %s: %s", what, args, res)
			}
		}
		if res, err := c.Call(context.Background(), "grep", json.RawMessage(`{"pattern":"s3cr3t","path":"r"}`)); err == nil && strings.Contains(string(res), "s3cr3t") {
			t.Errorf("%s: the grep tool: %s", what, res)
		}
		// The work tree is the agent's; the clean repository keeps git.
		res, out, errOut, err := execOn(t, m.Dir, computerfs.ExecRequest{Backend: "shell", Command: "cat r/README && cd /workspace/c && git log --format=%s && git status --short && git show HEAD:README"})
		if err != nil || res.ExitCode != 0 || out != "hello\ninitial\nclean\n" {
			t.Errorf("%s: the work tree and the clean repository: %v %+v %q %q", what, err, res, out, errOut)
		}
		// The refusal says why.
		_, out, errOut, _ = execOn(t, m.Dir, computerfs.ExecRequest{Backend: "shell", Command: "cat r/.git/HEAD"})
		if !strings.Contains(out+errOut, "Permission denied") {
			t.Errorf("%s: cat r/.git/HEAD: %q %q", what, out, errOut)
		}
	}
	check("after the import")
	if !strings.Contains(m.Log(), "the git history holds what the policy denies") {
		t.Errorf("no word in the log:\n%s", m.Log())
	}
	// Root (the operator) still has the repository.
	if b, err := os.ReadFile(filepath.Join(m.Dir, "r/.git/HEAD")); err != nil || !strings.HasPrefix(string(b), "ref: ") {
		t.Errorf("root's read of r/.git/HEAD: %q %v", b, err)
	}
	m.Unmount(t)
	m.Remount(t)
	check("after a remount")

	// The clean repository's upstream gains a denied file: the refresh
	// brings it and the .git goes with it.
	gittest.Commit(t, clean, map[string]string{"deep/secrets/key": "s3cr3t-later\n"}, "oops")
	gittest.Git(t, clean, "rm", "-q", "-r", "deep")
	gittest.Commit(t, clean, nil, "undo oops")
	if out, err := exec.Command(testmount.Binary(t), "refresh", "-w", m.Dir).CombinedOutput(); err != nil {
		t.Fatalf("refresh: %v %s", err, out)
	}
	for _, cmd := range []string{"cd c && git log -p --all", "cd c && git show HEAD~1:deep/secrets/key", "cat c/.git/HEAD"} {
		for _, backend := range []string{"shell", "sandbox"} {
			res, out, errOut, err := execOn(t, m.Dir, computerfs.ExecRequest{Backend: backend, Command: cmd})
			if err != nil || strings.Contains(out+errOut, "s3cr3t") || res.ExitCode == 0 {
				t.Errorf("after the refresh, %s %q: %v %+v %q %q", backend, cmd, err, res, out, errOut)
			}
		}
	}
	if b, err := os.ReadFile(filepath.Join(m.Dir, "c/README")); err != nil || !strings.HasPrefix(string(b), "clean\n") {
		t.Errorf("c/README after the refresh: %q %v", b, err)
	}
}

func writeSpecFile(t *testing.T, name, yaml string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
}
