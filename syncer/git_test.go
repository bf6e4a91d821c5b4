package syncer

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/computerfs/computerfs/internal/gittest"
	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/sources"
	"github.com/computerfs/computerfs/spec"
	"github.com/computerfs/computerfs/wsfs"
	"golang.org/x/crypto/ssh/agent"
)

// gitEnv is a workspace with a git source (/r) checked out from a bare
// repository, with a syncer that pushes back to it.
type gitEnv struct {
	t      testing.TB
	bare   string // the remote, checked with the git CLI
	url    string // as the spec gives it
	spec   *spec.Spec
	dir    string
	st     *kv.Store
	fs     *wsfs.FS
	target *GitTarget
	sy     *Syncer
}

type gitOpts struct {
	url      string // default: the bare repository's path
	extra    string // more fields of git: (", author: ...")
	history  int    // commits made before the checkout, after the first
	fileURL  bool   // give the remote as a file:// URL
	src      string // the repository to make the remote of (default: one of files)
	debounce time.Duration
	// commitOnSync, agentCommits: the Source's options (push.commit:
	// sync, agent).
	commitOnSync, agentCommits bool
}

func newGitEnv(t testing.TB, files map[string]string, o gitOpts) *gitEnv {
	t.Helper()
	e := &gitEnv{t: t}
	src := o.src
	if src == "" {
		src = gittest.NewRepo(t, files)
	}
	for i := range o.history {
		gittest.Commit(t, src, map[string]string{"h": fmt.Sprint(i)}, fmt.Sprint("history ", i))
	}
	e.bare = gittest.Bare(t, src)
	e.url = o.url
	if e.url == "" {
		e.url = e.bare
	}
	if o.fileURL {
		e.url = "file://" + e.bare
	}
	yaml := fmt.Sprintf("sources:\n  - path: /r\n    git: {url: %q, push: true%s}\n", e.url, o.extra)
	sp, err := spec.Parse([]byte(yaml), "test.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e.spec = sp
	e.dir = t.TempDir() + "/store"
	e.open()
	im := &sources.Importer{Store: e.st, Spec: sp, Log: quiet(), Owner: wsfs.Owner{UID: 1000, GID: 1000}}
	if err := im.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.newSyncer(o)
	return e
}

func (e *gitEnv) open() {
	st, err := kv.Open(e.dir, kv.Options{Logger: quiet()})
	if err != nil {
		e.t.Fatal(err)
	}
	e.st = st
	e.t.Cleanup(func() { st.Close() })
	e.fs = wsfs.New(st, wsfs.Owner{})
}

// newSyncer builds the target as the daemon does (sync.go, gitTarget).
func (e *gitEnv) newSyncer(o gitOpts) {
	g := e.spec.Sources[0].Git
	url := sources.GitURL(g.URL)
	auth, err := sources.GitAuth(g, url)
	check(e.t, err)
	author := g.Author
	if author == "" {
		author = spec.DefaultGitAuthor
	}
	name, email, err := spec.ParseAuthor(author)
	check(e.t, err)
	e.target = &GitTarget{URL: url, Auth: auth, Branch: g.Branch, Name: name, Email: email, Message: g.Message}
	sy, err := New(Options{FS: e.fs, Log: quiet(), Debounce: o.debounce, MinBackoff: 10 * time.Millisecond,
		Sources: []Source{{Index: 0, Path: "/r", Kind: "git", Repo: e.target, CommitOnSync: o.commitOnSync, AgentCommits: o.agentCommits}}})
	check(e.t, err)
	e.sy = sy
	e.t.Cleanup(sy.Close)
}

func (e *gitEnv) restart(o gitOpts) {
	e.sy.Close()
	check(e.t, e.st.Close())
	e.open()
	e.newSyncer(o)
}

func (e *gitEnv) sync() SourceReport     { e.t.Helper(); return syncOne(e.t, e.sy) }
func (e *gitEnv) mustSync() SourceReport { e.t.Helper(); return mustSyncOne(e.t, e.sy) }

func (e *gitEnv) write(p, data string) {
	e.t.Helper()
	check(e.t, e.fs.MkdirAll(filepath.Dir(p), 0o755))
	check(e.t, e.fs.WriteFile(p, []byte(data), 0o644))
}

// remote runs git in the bare repository.
func (e *gitEnv) remote(args ...string) string {
	e.t.Helper()
	return gittest.Git(e.t, e.bare, args...)
}

// localHead is the commit the workspace's main branch holds, read with
// the git CLI from a copy of its .git.
func (e *gitEnv) localRef(ref string) string {
	e.t.Helper()
	b, err := e.fs.ReadFile("/r/.git/" + ref)
	if err != nil {
		// packed?
		p, perr := e.fs.ReadFile("/r/.git/packed-refs")
		check(e.t, perr)
		for _, l := range strings.Split(string(p), "\n") {
			if h, r, ok := strings.Cut(l, " "); ok && r == ref {
				return h
			}
		}
		e.t.Fatalf("no %s in the workspace: %v", ref, err)
	}
	return strings.TrimSpace(string(b))
}

func TestGitPushCommitsAndPushes(t *testing.T) {
	e := newGitEnv(t, map[string]string{"a.go": "package a\n", "c.txt": "c\n", "d/e.txt": "e\n"},
		gitOpts{extra: `, author: "Agent Smith <agent@example.com>"`})
	before := e.remote("rev-parse", "main")
	e.write("/r/a.go", "package a\n\nvar X = 1\n")
	e.write("/r/b/new.txt", "new\n")
	check(t, e.fs.Remove("/r/c.txt"))

	r := e.mustSync()
	want := []string{"M a.go", "A b/new.txt", "D c.txt"}
	if strings.Join(r.Committed, ",") != strings.Join(want, ",") || r.Commit == "" || r.Pushed != r.Commit || r.Branch != "main" {
		t.Fatalf("report %+v, want commit of %v pushed to main", r, want)
	}
	if got := e.remote("rev-parse", "main"); got != r.Commit {
		t.Fatalf("remote main %s, want %s", got, r.Commit)
	}
	if got := e.remote("rev-parse", "main~1"); got != before {
		t.Fatalf("parent %s, want the checked-out %s", got, before)
	}
	if got := e.remote("log", "-1", "--format=%an <%ae>|%cn <%ce>", "main"); got != "Agent Smith <agent@example.com>|Agent Smith <agent@example.com>" {
		t.Fatalf("author|committer %q", got)
	}
	msg := e.remote("log", "-1", "--format=%B", "main")
	if msg != "computerfs: update 3 files\n\nM a.go\nA b/new.txt\nD c.txt" {
		t.Fatalf("message %q", msg)
	}
	if got := e.remote("show", "main:a.go"); got != "package a\n\nvar X = 1" {
		t.Fatalf("a.go %q", got)
	}
	if got := e.remote("ls-tree", "-r", "--name-only", "main"); got != "a.go\nb/new.txt\nd/e.txt" {
		t.Fatalf("tree %q", got)
	}
	if got := e.remote("fsck", "--no-progress"); got != "" {
		t.Fatalf("fsck: %s", got)
	}
	if got := e.localRef("refs/heads/main"); got != r.Commit {
		t.Fatalf("workspace main %s, want %s", got, r.Commit)
	}

	// Nothing new: nothing committed, nothing pushed.
	r = e.mustSync()
	if r.Commit != "" || r.Pushed != "" {
		t.Fatalf("second sync %+v", r)
	}
	if n := e.remote("rev-list", "--count", "main"); n != "2" {
		t.Fatalf("%s commits, want 2", n)
	}
	st := e.sy.Status()
	if st[0].Pending != 0 || !st[0].Last.OK {
		t.Fatalf("status %+v", st[0])
	}
}

func TestGitPushMessageAndBranch(t *testing.T) {
	e := newGitEnv(t, map[string]string{"a": "a\n"},
		gitOpts{extra: `, branch: agent/work, message: "agent: task 7"`})
	e.write("/r/a", "b\n")
	r := e.mustSync()
	if r.Branch != "agent/work" {
		t.Fatalf("report %+v", r)
	}
	if msg := e.remote("log", "-1", "--format=%B", "agent/work"); msg != "agent: task 7\n\nM a" {
		t.Fatalf("message %q", msg)
	}
	if e.remote("rev-parse", "main") == r.Commit {
		t.Fatal("main moved")
	}
	if got := e.remote("log", "-1", "--format=%an <%ae>", "agent/work"); got != spec.DefaultGitAuthor {
		t.Fatalf("default author %q", got)
	}
}

func TestGitPushConflict(t *testing.T) {
	e := newGitEnv(t, map[string]string{"a": "a\n"}, gitOpts{})
	// Someone pushes behind the workspace's back.
	other := t.TempDir()
	gittest.Git(t, "", "clone", "-q", e.bare, other)
	theirs := gittest.Commit(t, other, map[string]string{"a": "theirs\n"}, "theirs")
	gittest.Git(t, other, "push", "-q", "origin", "main")

	e.write("/r/a", "ours\n")
	r := e.sync()
	if len(r.Conflicts) != 1 || r.Commit == "" || r.Pushed != "" || len(r.Errors) != 0 {
		t.Fatalf("report %+v, want a commit and a conflict", r)
	}
	if !strings.Contains(r.Conflicts[0].Reason, "not a fast-forward") || r.Conflicts[0].Remote != theirs {
		t.Fatalf("conflict %+v", r.Conflicts[0])
	}
	if got := e.remote("rev-parse", "main"); got != theirs {
		t.Fatalf("remote main %s, want theirs %s: overwritten", got, theirs)
	}
	if got := e.localRef("refs/heads/main"); got != r.Commit {
		t.Fatalf("local main %s, want the local commit %s", got, r.Commit)
	}
	st := e.sy.Status()
	if len(st[0].Conflicts) != 1 || st[0].Last.OK {
		t.Fatalf("status %+v", st[0])
	}
	// Still in conflict at the next explicit sync; no second commit.
	r = e.sync()
	if len(r.Conflicts) != 1 || r.Commit != "" {
		t.Fatalf("again: %+v", r)
	}

	// Resolved once the push is a fast-forward again (here: the other
	// side takes its commit back).
	gittest.Git(t, other, "push", "-q", "-f", "origin", "HEAD~1:main")
	r = e.mustSync()
	if r.Pushed == "" || e.remote("rev-parse", "main") != r.Pushed {
		t.Fatalf("after resolution: %+v", r)
	}
	if st := e.sy.Status(); len(st[0].Conflicts) != 0 || !st[0].Last.OK {
		t.Fatalf("status %+v", st[0])
	}
}

// TestGitPushDetachedHead: with HEAD detached (the agent checked out a
// commit) and no branch in the spec, a pass commits and reports that
// there is no branch to push to, once: not an error retried with backoff
// but a standing report, cleared by the pass after a branch is checked
// out again.
func TestGitPushDetachedHead(t *testing.T) {
	e := newGitEnv(t, map[string]string{"a": "a\n"}, gitOpts{debounce: time.Millisecond})
	before := e.remote("rev-parse", "main")
	e.write("/r/.git/HEAD", before+"\n")
	e.write("/r/a", "detached\n")
	time.Sleep(5 * time.Millisecond)
	r := e.sy.pass(context.Background(), e.sy.srcs[0], false)
	if len(r.Errors) != 0 || len(r.Conflicts) != 1 || !strings.Contains(r.Conflicts[0].Reason, "HEAD is detached") || r.Commit == "" {
		t.Fatalf("background pass %+v", r)
	}
	st := e.sy.Status()[0]
	if st.NextRetry != nil || len(st.Conflicts) != 1 || st.Last.OK {
		t.Fatalf("status %+v: want the report, no retry", st)
	}
	// Nothing new: the next background pass does nothing.
	if r := e.sy.pass(context.Background(), e.sy.srcs[0], false); r.Commit != "" || len(r.Errors)+len(r.Conflicts) != 0 {
		t.Fatalf("second background pass %+v", r)
	}
	if e.remote("rev-parse", "main") != before {
		t.Fatal("pushed from a detached HEAD")
	}
	// A branch checked out (here main, moved to the detached commit):
	// the next sync pushes and clears the report.
	e.write("/r/.git/refs/heads/main", r.Commit+"\n")
	e.write("/r/.git/HEAD", "ref: refs/heads/main\n")
	if r := e.mustSync(); r.Pushed == "" || e.remote("show", "main:a") != "detached" {
		t.Fatalf("after checking out a branch: %+v", r)
	}
	if st := e.sy.Status()[0]; len(st.Conflicts) != 0 || !st.Last.OK {
		t.Fatalf("status %+v", st)
	}
}

// A crash after the commit, before the push: the next pass pushes the
// commit and makes no second one. A crash after the push, before the
// cursor moved: the next pass finds the remote up to date.
func TestGitPushReplay(t *testing.T) {
	e := newGitEnv(t, map[string]string{"a": "a\n"}, gitOpts{})
	good := e.target.URL
	e.target.URL = filepath.Join(t.TempDir(), "nowhere.git") // the push fails
	e.write("/r/a", "changed\n")
	r := e.sync()
	if r.Commit == "" || len(r.Errors) != 1 || r.Pushed != "" {
		t.Fatalf("report %+v, want a commit and a failed push", r)
	}
	commit := r.Commit
	cursor := e.sy.Status()[0].Cursor

	e.restart(gitOpts{}) // as after SIGKILL
	if c := e.sy.Status()[0].Cursor; c != cursor {
		t.Fatalf("cursor %d after restart, was %d", c, cursor)
	}
	if e.target.URL != good {
		t.Fatal("target url")
	}
	r = e.mustSync()
	if r.Commit != "" || r.Pushed != commit {
		t.Fatalf("replay %+v, want a push of %s and no new commit", r, commit)
	}
	if n := e.remote("rev-list", "--count", "main"); n != "2" {
		t.Fatalf("%s commits on the remote, want 2", n)
	}

	// Push without moving the cursor (the crash after the push).
	e.write("/r/a", "again\n")
	res := e.target.SyncRepo(context.Background(), e.fs.As(syncActor), "/r", true)
	if res.Err != nil || res.Pushed == "" {
		t.Fatalf("%+v", res)
	}
	e.restart(gitOpts{})
	r = e.mustSync()
	if r.Commit != "" || r.Pushed != "" {
		t.Fatalf("replay after the push %+v, want nothing", r)
	}
	if n := e.remote("rev-list", "--count", "main"); n != "3" {
		t.Fatalf("%s commits on the remote, want 3", n)
	}
}

// The background loop pushes after the debounce, and its own .git writes
// do not start another commit or push.
func TestGitPushBackground(t *testing.T) {
	e := newGitEnv(t, map[string]string{"a": "a\n"}, gitOpts{debounce: 50 * time.Millisecond})
	e.sy.Start()
	e.write("/r/a", "bg\n")
	deadline := time.Now().Add(20 * time.Second)
	for e.remote("show", "main:a") != "bg" {
		if time.Now().After(deadline) {
			t.Fatal("not pushed in 20 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // several ticks
	if n := e.remote("rev-list", "--count", "main"); n != "2" {
		t.Fatalf("%s commits, want 2", n)
	}
	var seqs []uint64
	passes := map[string]bool{}
	e.st.ReadJournal(0, func(r kv.Record) bool {
		if r.Actor.Entry == "sync" {
			seqs = append(seqs, r.Seq)
			passes[r.Actor.Request] = true
		}
		return true
	})
	if len(seqs) == 0 {
		t.Fatal("the commit was not journaled as the syncer's")
	}
	if passes[""] || passes["0"] {
		t.Fatalf("the background passes' records carry ids %v, want each a pass's positive id", passes)
	}
	time.Sleep(300 * time.Millisecond)
	var after int
	e.st.ReadJournal(seqs[len(seqs)-1], func(r kv.Record) bool { after++; return true })
	if after != 0 {
		t.Fatalf("%d journal records after the syncer's last: it went on writing", after)
	}
}

func TestGitPushHTTPToken(t *testing.T) {
	t.Setenv("GITPUSH_TOKEN", "s3cret")
	files := map[string]string{"a": "a\n"}
	bare := gittest.Bare(t, gittest.NewRepo(t, files))
	url := gittest.ServeHTTPAuth(t, bare, "agent", "s3cret")
	e := newGitEnv(t, files, gitOpts{url: url, extra: ", token_env: GITPUSH_TOKEN, username: agent"})
	e.bare = bare
	e.write("/r/a", "over http\n")
	r := e.mustSync()
	if r.Pushed == "" || e.remote("show", "main:a") != "over http" {
		t.Fatalf("report %+v; remote a %q", r, e.remote("show", "main:a"))
	}

	// A wrong token is an error (retried), not a conflict.
	t.Setenv("GITPUSH_TOKEN", "wrong")
	e.restart(gitOpts{})
	e.write("/r/a", "again\n")
	r = e.sync()
	if len(r.Errors) != 1 || len(r.Conflicts) != 0 {
		t.Fatalf("report %+v, want an error", r)
	}
}

// TestGitPushSSH: push-back over ssh:// to a real SSH server (gittest's,
// running the real git-receive-pack), with the key file of the spec's
// ssh_key, then with the SSH agent; a key the server does not accept is
// an error (retried), not a conflict. The server's host key is checked
// against SSH_KNOWN_HOSTS.
func TestGitPushSSH(t *testing.T) {
	t.Setenv("COMPUTERFS_NO_GIT_CLI", "1") // the import over ssh with go-git too: OpenSSH reads only the user's known_hosts
	files := map[string]string{"a": "a\n"}
	bare := gittest.Bare(t, gittest.NewRepo(t, files))
	keyFile, _, pub := gittest.NewSSHKey(t)
	_, agentKey, agentPub := gittest.NewSSHKey(t)
	otherFile, _, _ := gittest.NewSSHKey(t)
	srv := gittest.ServeSSH(t, filepath.Dir(bare), pub, agentPub)
	t.Setenv("SSH_KNOWN_HOSTS", srv.KnownHosts)
	t.Setenv("SSH_AUTH_SOCK", "")
	url := srv.URL(filepath.Base(bare))

	e := newGitEnv(t, files, gitOpts{url: url, extra: fmt.Sprintf(", ssh_key: %q", keyFile)})
	e.bare = bare
	e.write("/r/a", "over ssh\n")
	r := e.mustSync()
	if r.Pushed == "" || e.remote("show", "main:a") != "over ssh" || e.remote("rev-parse", "main") != r.Pushed {
		t.Fatalf("key file: report %+v; remote a %q", r, e.remote("show", "main:a"))
	}

	// The agent's key, with no ssh_key in the spec.
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	check(t, err)
	t.Cleanup(func() { ln.Close() })
	keyring := agent.NewKeyring()
	check(t, keyring.Add(agent.AddedKey{PrivateKey: agentKey}))
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { agent.ServeAgent(keyring, c); c.Close() }()
		}
	}()
	t.Setenv("SSH_AUTH_SOCK", sock)
	ea := newGitEnv(t, files, gitOpts{url: url})
	ea.bare = bare
	if got, _ := ea.fs.ReadFile("/r/a"); string(got) != "over ssh\n" {
		t.Fatalf("imported over ssh with the agent: a = %q", got)
	}
	ea.write("/r/b", "with the agent\n")
	r = ea.mustSync()
	if r.Pushed == "" || e.remote("show", "main:b") != "with the agent" || e.remote("log", "-1", "--format=%P", "main") != e.localRef("refs/heads/main") {
		t.Fatalf("agent: report %+v", r)
	}
	gittest.Git(t, bare, "fsck", "--strict", "--no-progress")

	// A key the server does not know: an error, retried; the remote untouched.
	before := e.remote("rev-parse", "main")
	sp, err := spec.Parse(fmt.Appendf(nil, "sources:\n  - path: /r\n    git: {url: %q, push: true, ssh_key: %q}\n", url, otherFile), "test.yaml", t.TempDir())
	check(t, err)
	e.spec = sp
	e.restart(gitOpts{})
	e.write("/r/a", "refused\n")
	r = e.sync()
	if len(r.Errors) != 1 || len(r.Conflicts) != 0 || !strings.Contains(r.Errors[0], "unable to authenticate") {
		t.Fatalf("unknown key: report %+v, want an error", r)
	}
	if e.remote("rev-parse", "main") != before {
		t.Fatal("pushed with an unknown key")
	}
}

func TestCommitMessage(t *testing.T) {
	if got := CommitMessage("", []string{"M a"}); got != "computerfs: update 1 file\n\nM a\n" {
		t.Fatalf("%q", got)
	}
	lines := make([]string, 150)
	for i := range lines {
		lines[i] = fmt.Sprintf("A f%03d", i)
	}
	got := CommitMessage("subject\n", lines)
	if !strings.HasPrefix(got, "subject\n\nA f000\n") || !strings.HasSuffix(got, "A f099\n... and 50 more\n") {
		t.Fatalf("%q", got)
	}
}

// A shallow checkout (depth 1) pushes on top of what it has.
func TestGitPushShallow(t *testing.T) {
	e := newGitEnv(t, map[string]string{"a": "a\n"}, gitOpts{extra: ", depth: 1", history: 3})
	if _, err := e.fs.Lstat("/r/.git/shallow"); err != nil {
		t.Fatalf("not a shallow checkout: %v", err)
	}
	before := e.remote("rev-parse", "main")
	e.write("/r/a", "shallow\n")
	r := e.mustSync()
	if r.Pushed == "" || e.remote("rev-parse", "main~1") != before {
		t.Fatalf("report %+v", r)
	}
	if got := e.remote("fsck", "--no-progress"); got != "" {
		t.Fatalf("fsck: %s", got)
	}
}

// Modes, symbolic links and .gitignore come through as git add -A takes
// them.
func TestGitPushModesLinksIgnore(t *testing.T) {
	e := newGitEnv(t, map[string]string{"run.sh": "#!/bin/sh\n", ".gitignore": "*.log\n", "keep": "k\n"}, gitOpts{})
	check(t, e.fs.Chmod("/r/run.sh", 0o755))
	check(t, e.fs.Symlink("keep", "/r/link"))
	e.write("/r/debug.log", "ignored\n")
	e.write("/r/new/dir/f", "f\n")
	r := e.mustSync()
	if strings.Join(r.Committed, ",") != "A link,A new/dir/f,M run.sh" {
		t.Fatalf("committed %v", r.Committed)
	}
	tree := e.remote("ls-tree", "-r", "main")
	for _, want := range []string{"100755 blob", "120000 blob"} {
		if !strings.Contains(tree, want) {
			t.Fatalf("tree has no %s:\n%s", want, tree)
		}
	}
	if strings.Contains(tree, "debug.log") {
		t.Fatalf("ignored file committed:\n%s", tree)
	}
	if got := e.remote("cat-file", "-p", "main:link"); got != "keep" {
		t.Fatalf("link target %q", got)
	}
	if got := e.remote("fsck", "--no-progress"); got != "" {
		t.Fatalf("fsck: %s", got)
	}
}

func TestGitPushFileURL(t *testing.T) {
	e := newGitEnv(t, map[string]string{"a": "a\n"}, gitOpts{fileURL: true})
	if !strings.HasPrefix(e.target.URL, "file://") {
		t.Fatalf("url %s", e.target.URL)
	}
	e.write("/r/a", "file url\n")
	if r := e.mustSync(); r.Pushed == "" || e.remote("show", "main:a") != "file url" {
		t.Fatalf("report %+v", r)
	}
}

// While git runs in the workspace (.git/index.lock), nothing is committed:
// the background waits, an explicit sync says why it did nothing.
func TestGitPushWaitsForIndexLock(t *testing.T) {
	e := newGitEnv(t, map[string]string{"a": "a\n"}, gitOpts{debounce: time.Millisecond})
	before := e.remote("rev-parse", "main")
	e.write("/r/.git/index.lock", "")
	e.write("/r/a", "locked\n")
	time.Sleep(5 * time.Millisecond)
	r := e.sy.pass(context.Background(), e.sy.srcs[0], false)
	if r.Waiting != 1 || r.Commit != "" || len(r.Errors) != 0 {
		t.Fatalf("background pass %+v", r)
	}
	r = e.sync()
	if len(r.Errors) != 1 || !strings.Contains(r.Errors[0], "index.lock") || r.Commit != "" {
		t.Fatalf("sync %+v", r)
	}
	if e.remote("rev-parse", "main") != before {
		t.Fatal("pushed while locked")
	}
	check(t, e.fs.Remove("/r/.git/index.lock"))
	if r := e.mustSync(); r.Pushed == "" || e.remote("show", "main:a") != "locked" {
		t.Fatalf("after the lock: %+v", r)
	}
}

// TestGitPushCommitOnSync: with CommitOnSync a background pass neither
// commits an edit of the work tree nor pushes for it, and keeps it
// pending; an explicit Sync commits and pushes it. With AgentCommits
// neither does.
func TestGitPushCommitOnSync(t *testing.T) {
	for _, o := range []gitOpts{{debounce: time.Millisecond, commitOnSync: true}, {debounce: time.Millisecond, agentCommits: true}} {
		e := newGitEnv(t, map[string]string{"a": "a\n"}, o)
		before, head := e.remote("rev-parse", "main"), e.localRef("refs/heads/main")
		e.write("/r/a", "edited\n")
		time.Sleep(5 * time.Millisecond)
		for range 3 {
			if r := e.sy.pass(context.Background(), e.sy.srcs[0], false); r.Commit != "" || r.Pushed != "" || len(r.Errors)+len(r.Conflicts) != 0 {
				t.Fatalf("%+v: background pass %+v", o, r)
			}
		}
		if e.localRef("refs/heads/main") != head || e.remote("rev-parse", "main") != before {
			t.Fatalf("%+v: committed or pushed in the background", o)
		}
		st := e.sy.Status()[0]
		if o.commitOnSync && st.Pending == 0 || o.agentCommits && st.Pending != 0 {
			t.Fatalf("%+v: %d pending", o, st.Pending)
		}
		r := e.mustSync()
		if o.commitOnSync && (r.Commit == "" || r.Pushed != r.Commit || e.remote("show", "main:a") != "edited") {
			t.Fatalf("%+v: sync %+v", o, r)
		}
		if o.agentCommits && (r.Commit != "" || e.remote("show", "main:a") != "a") {
			t.Fatalf("%+v: sync %+v", o, r)
		}
		if st := e.sy.Status()[0]; st.Pending != 0 {
			t.Fatalf("%+v: %d pending after the sync", o, st.Pending)
		}
	}
}
