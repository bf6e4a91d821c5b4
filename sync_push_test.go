package computerfs

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/computerfs/computerfs/internal/gittest"
	"github.com/computerfs/computerfs/internal/testmount"
)

// pushEnv is a mounted workspace (store .../ws) whose /r is a checkout of
// a bare repository with the push options given, and the agent's view of
// it: git on the mount as the agent.
type pushEnv struct {
	t    *testing.T
	bare string
	main string // the remote's main when the test began
	repo string // /r on the mount
	cli  func(wantErr bool, args ...string) string
}

// agentAuthor signs the agent's own commits.
const agentAuthor = "Agent Smith <smith@example.com>"

func newPushEnv(t *testing.T, url func(bare string) string, git, top string) *pushEnv {
	t.Helper()
	e := &pushEnv{t: t}
	e.bare = gittest.Bare(t, gittest.NewRepo(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"}))
	e.main = e.remoteRef("main")
	spec := writeSpec(t, top+"sources:\n  - path: /r\n    git: {url: "+url(e.bare)+", author: \"Spec Author <spec@example.com>\""+git+"}\n")
	m := testmount.Start(t, filepath.Join(t.TempDir(), "ws"), "--spec", spec)
	e.repo = filepath.Join(m.Dir, "r")
	e.cli = workspaceCLI(t, testmount.Binary(t), m)
	t.Cleanup(func() {
		if got := e.remoteRef("main"); got != e.main {
			t.Errorf("the remote's main moved from %s to %s", e.main, got)
		}
	})
	return e
}

// remoteRef is the remote's branch, "" when it has none of that name.
func (e *pushEnv) remoteRef(branch string) string {
	e.t.Helper()
	out, err := exec.Command("git", "--git-dir", e.bare, "for-each-ref", "--format=%(objectname)", "refs/heads/"+branch).Output()
	if err != nil {
		e.t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// waitRef waits until the remote's branch is neither "" nor not.
func (e *pushEnv) waitRef(branch, not string) string {
	e.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		if h := e.remoteRef(branch); h != "" && h != not {
			return h
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the remote's %s did not move from %q in 90 s; status:\n%s", branch, not, e.cli(false, "status"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (e *pushEnv) write(rel, data string) {
	e.t.Helper()
	if err := os.WriteFile(filepath.Join(e.repo, rel), []byte(data), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// agentCommit commits the files given as the agent would, with its own
// message and author, and returns the commit.
func (e *pushEnv) agentCommit(msg string, paths ...string) string {
	e.t.Helper()
	gittest.Git(e.t, e.repo, append([]string{"add", "--"}, paths...)...)
	gittest.Git(e.t, e.repo, "commit", "-q", "--author", agentAuthor, "-m", msg)
	return gittest.Head(e.t, e.repo)
}

func (e *pushEnv) remoteLog(format, rev string) string {
	e.t.Helper()
	return gittest.Git(e.t, e.bare, "log", "-1", "--format="+format, rev)
}

// TestPushOwnBranch: with `push: true` (every option at its default) the
// workspace pushes in the background to its own branch, computerfs/ws,
// never to main (the branch checked out), and only what the agent
// committed, as it is (its hash, message and author): an edit left alone
// for ten debounces is not committed for it, so its own commit takes it.
// What it leaves uncommitted is committed by `computerfs sync`, on top, by
// the spec's author. Over a path, a file:// URL and git http-backend.
func TestPushOwnBranch(t *testing.T) {
	for name, url := range map[string]func(string) string{
		"path": func(b string) string { return b },
		"file": func(b string) string { return "file://" + b },
		"http": func(b string) string { return gittest.ServeHTTP(t, b) },
	} {
		t.Run(name, func(t *testing.T) {
			e := newPushEnv(t, url, ", push: true", "sync:\n  debounce: 100ms\n")
			start := gittest.Head(t, e.repo)
			e.write("a.txt", "fixed\n")
			time.Sleep(time.Second)
			if head := gittest.Head(t, e.repo); head != start {
				t.Fatalf("the agent's edit was committed for it: HEAD %s", head)
			}
			mine := e.agentCommit("fix: a.txt says fixed", "a.txt")
			if got := e.waitRef(wsBranch, ""); got != mine {
				t.Fatalf("%s is %s, want the agent's commit %s", wsBranch, got, mine)
			}
			if got := e.remoteLog("%an <%ae>|%B", wsBranch); got != agentAuthor+"|fix: a.txt says fixed" {
				t.Fatalf("pushed commit: %q", got)
			}
			if got := gittest.Git(t, e.bare, "show", wsBranch+":a.txt"); got != "fixed" {
				t.Fatalf("a.txt in the agent's commit: %q", got)
			}
			// An edit the agent leaves uncommitted: committed on sync.
			e.write("b.txt", "left\n")
			time.Sleep(time.Second)
			if got := e.remoteRef(wsBranch); got != mine || gittest.Head(t, e.repo) != mine {
				t.Fatalf("the uncommitted edit was committed in the background: %s %s", got, gittest.Head(t, e.repo))
			}
			if out := e.cli(false, "status"); !regexp.MustCompile(`, [1-9]\d* pending`).MatchString(out) {
				t.Fatalf("status does not count the uncommitted edit as pending:\n%s", out)
			}
			if out := e.cli(false, "sync"); !strings.Contains(out, "pushed") || !strings.Contains(out, "M b.txt") {
				t.Fatalf("sync:\n%s", out)
			}
			top := e.remoteRef(wsBranch)
			if got := e.remoteLog("%an <%ae>|%P|%s", top); got != "Spec Author <spec@example.com>|"+mine+"|computerfs: update 1 file" {
				t.Fatalf("the commit of the uncommitted edit: %q", got)
			}
			if out := e.cli(false, "status"); !strings.Contains(out, "push the agent's commits to "+wsBranch+", commit the rest on sync") {
				t.Errorf("status does not say what is pushed where:\n%s", out)
			}
		})
	}
}

// TestPushCommitAuto: with `push: {commit: auto}` an edit is committed
// and pushed in the background, after the debounce (the behaviour of
// `push: true` before there were options, on the workspace's branch).
func TestPushCommitAuto(t *testing.T) {
	e := newPushEnv(t, func(b string) string { return b }, ", push: {commit: auto}", "sync:\n  debounce: 100ms\n")
	start := gittest.Head(t, e.repo)
	e.write("b.txt", "edited\n")
	top := e.waitRef(wsBranch, "")
	if got := e.remoteLog("%an <%ae>|%P|%s", top); got != "Spec Author <spec@example.com>|"+start+"|computerfs: update 1 file" {
		t.Fatalf("the background commit: %q", got)
	}
	if out := e.cli(false, "status"); !strings.Contains(out, "commit and push to "+wsBranch) {
		t.Errorf("status:\n%s", out)
	}
}

// TestPushOnSyncOnly: with `push: {when: sync}` nothing leaves in the
// background, however long the agent leaves its work; `computerfs sync`
// pushes it, to the branch the spec names.
func TestPushOnSyncOnly(t *testing.T) {
	e := newPushEnv(t, func(b string) string { return "file://" + b }, ", push: {when: sync, branch: agent/fix-1}", "sync:\n  debounce: 100ms\n")
	e.write("a.txt", "fixed\n")
	mine := e.agentCommit("fix: a.txt says fixed", "a.txt")
	e.write("b.txt", "left\n")
	time.Sleep(4 * time.Second) // 40 debounces
	if got := e.remoteRef("agent/fix-1"); got != "" {
		t.Fatalf("pushed in the background: agent/fix-1 is %s", got)
	}
	if head := gittest.Head(t, e.repo); head != mine {
		t.Fatalf("committed in the background: HEAD %s, the agent's commit %s", head, mine)
	}
	if out := e.cli(false, "status"); !strings.Contains(out, "pending") || !strings.Contains(out, "only on sync") {
		t.Fatalf("status:\n%s", out)
	} else {
		t.Logf("computerfs status:\n%s", out)
	}
	out := e.cli(false, "sync")
	t.Logf("computerfs sync:\n%s", out)
	if !strings.Contains(out, "pushed") || !strings.Contains(out, "M b.txt") {
		t.Fatalf("sync:\n%s", out)
	}
	top := e.remoteRef("agent/fix-1")
	if got := e.remoteLog("%P", top); got != mine {
		t.Fatalf("the pushed commit's parent %s, want the agent's %s", got, mine)
	}
	if top != gittest.Head(t, e.repo) {
		t.Fatal("the remote branch is not the workspace's HEAD")
	}
}

// TestPushAgentCommitsOnly: with `push: {commit: agent}` the work tree's
// edits are the agent's: nothing is committed for it, in the background
// or on sync; its own commits are pushed as they are, to computerfs/NAME
// (the spec's name).
func TestPushAgentCommitsOnly(t *testing.T) {
	e := newPushEnv(t, func(b string) string { return b }, ", push: {commit: agent}", "name: triage 17\nsync:\n  debounce: 100ms\n")
	const branch = "computerfs/triage-17"
	start := gittest.Head(t, e.repo)
	e.write("a.txt", "not yet\n")
	time.Sleep(4 * time.Second)
	if head := gittest.Head(t, e.repo); head != start {
		t.Fatalf("the edit was committed: HEAD %s", head)
	}
	if got := e.remoteRef(branch); got != "" {
		t.Fatalf("pushed with no commit of the agent's: %s", got)
	}
	e.write("b.txt", "fixed\n")
	mine := e.agentCommit("fix: b.txt", "b.txt")
	if got := e.waitRef(branch, ""); got != mine {
		t.Fatalf("%s is %s, want the agent's commit %s", branch, got, mine)
	}
	if got := gittest.Git(t, e.bare, "show", branch+":a.txt"); got != "a" {
		t.Fatalf("the uncommitted edit went out: a.txt %q", got)
	}
	if out := e.cli(false, "sync"); strings.Contains(out, "committed") {
		t.Fatalf("sync committed:\n%s", out)
	}
	if out := e.cli(false, "status"); !strings.Contains(out, "push the agent's commits to "+branch) {
		t.Errorf("status does not say what is pushed:\n%s", out)
	}
	if head, got := gittest.Head(t, e.repo), e.remoteRef(branch); head != mine || got != mine {
		t.Fatalf("after sync: HEAD %s, %s %s, want the agent's %s", head, branch, got, mine)
	}
	if got := gittest.Git(t, e.repo, "status", "--porcelain"); got != "M a.txt" {
		t.Fatalf("git status %q: the edit must stay uncommitted", got)
	}
}
