package computerfs

import (
	"crypto/sha1"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/computerfs/computerfs/internal/gittest"
	"github.com/computerfs/computerfs/internal/testmount"
)

// wsBranch is where a workspace whose store is .../ws pushes by default.
const wsBranch = "computerfs/ws"

// TestSyncGitMounted: a git source with push, edited through the FUSE
// mount. `computerfs sync` commits the edit (author and message from the
// spec) and pushes it to the workspace's own branch, computerfs/ws (the
// store's directory is ws), leaving main alone; a commit the agent made
// with the git CLI on the mount is pushed as it is; a push to that branch
// behind the workspace's back makes the next sync a reported conflict
// (exit 1) that leaves the remote alone and keeps the local commit.
func TestSyncGitMounted(t *testing.T) {
	bare := gittest.Bare(t, gittest.NewRepo(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"}))
	spec := writeSpec(t, "sources:\n  - path: /r\n    git: {url: "+bare+", push: true, author: \"Agent <agent@example.com>\", message: \"agent edits\"}\nsync:\n  debounce: 1h\n")
	m := testmount.Start(t, filepath.Join(t.TempDir(), "ws"), "--spec", spec)
	bin := testmount.Binary(t)
	repo := filepath.Join(m.Dir, "r")
	cli := workspaceCLI(t, bin, m)
	remote := func(args ...string) string { t.Helper(); return gittest.Git(t, bare, args...) }
	main := remote("rev-parse", "main")
	defer func() {
		if got := remote("rev-parse", "main"); got != main {
			t.Errorf("the remote's main moved to %s", got)
		}
	}()

	// An edit and a removal through the mount.
	if err := os.WriteFile(filepath.Join(repo, "a.txt"), []byte("edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(repo, "b.txt")); err != nil {
		t.Fatal(err)
	}
	if out := cli(false, "status"); !strings.Contains(out, "2 pending") {
		t.Fatalf("status:\n%s", out)
	}
	out := cli(false, "sync")
	if !strings.Contains(out, "/r (git): pushed") || !strings.Contains(out, "M a.txt") || !strings.Contains(out, "D b.txt") {
		t.Fatalf("sync:\n%s", out)
	}
	if got := remote("log", "-1", "--format=%an <%ae>%n%B", wsBranch); got != "Agent <agent@example.com>\nagent edits\n\nM a.txt\nD b.txt" {
		t.Fatalf("pushed commit:\n%s", got)
	}
	if got := remote("ls-tree", "-r", "--name-only", wsBranch); got != "a.txt" {
		t.Fatalf("tree %q", got)
	}
	// The workspace's git agrees: clean, at the pushed commit.
	if got := gittest.Git(t, repo, "status", "--porcelain"); got != "" {
		t.Fatalf("git status on the mount:\n%s", got)
	}
	if gittest.Head(t, repo) != remote("rev-parse", wsBranch) {
		t.Fatal("HEAD on the mount is not the pushed commit")
	}
	// The pass's own writes (the commit's objects, the index, the refs)
	// are journaled as the syncer's, with the pass's id.
	id := onlyRequest(t, bin, m, "sync", "/r/.git/index")
	if out := run(t, m.Dir, bin, "log", "-w", m.Dir, "--path", "/r/.git/index"); !strings.Contains(out, "/r/.git/index size=") || !strings.Contains(out, " by sync #"+id+"\n") {
		t.Fatalf("computerfs log --path /r/.git/index:\n%s", out)
	}

	// The agent's own commit is pushed as it is.
	gittest.Commit(t, repo, map[string]string{"c.txt": "c\n"}, "the agent's commit")
	mine := gittest.Head(t, repo)
	out = cli(false, "sync")
	if !strings.Contains(out, "pushed "+mine[:12]) || strings.Contains(out, "committed") {
		t.Fatalf("sync of the agent's commit:\n%s", out)
	}
	if got := remote("rev-parse", wsBranch); got != mine {
		t.Fatalf("remote %s %s, want the agent's %s", wsBranch, got, mine)
	}

	// Someone pushes behind the workspace's back; the agent edits.
	other := t.TempDir()
	gittest.Git(t, "", "clone", "-q", bare, other)
	var theirs string
	gittest.Git(t, other, "checkout", "-q", wsBranch)
	theirs = gittest.Commit(t, other, map[string]string{"a.txt": "theirs\n"}, "theirs")
	gittest.Git(t, other, "push", "-q", "origin", wsBranch)
	if err := os.WriteFile(filepath.Join(repo, "a.txt"), []byte("ours\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out = cli(true, "sync")
	if !strings.Contains(out, "conflict /r:") || !strings.Contains(out, "not a fast-forward") || !strings.Contains(out, "committed") {
		t.Fatalf("sync with a conflict:\n%s", out)
	}
	if got := remote("rev-parse", wsBranch); got != theirs {
		t.Fatalf("remote %s %s, want theirs %s", wsBranch, got, theirs)
	}
	if got := gittest.Git(t, repo, "log", "-1", "--format=%P"); got != mine {
		t.Fatalf("local commit's parent %s, want %s", got, mine)
	}
	if out := cli(false, "status"); !strings.Contains(out, "conflict /r:") {
		t.Fatalf("status:\n%s", out)
	}
	// The agent takes theirs in (fetch and rebase on the mount); the next
	// sync pushes and clears the conflict.
	// (From a copy the agent can read: root's temporary directories are
	// private, and git on the mount runs as the agent.)
	pub := filepath.Join(testmount.PublicDir(t, "bare-"), "repo.git")
	if out, err := exec.Command("cp", "-r", bare, pub).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	agent := mountAgent(t, m.Dir)
	if out, err := exec.Command("chown", "-R", agent.String(), pub).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v %s", err, out)
	}
	gittest.Git(t, repo, "fetch", "-q", pub, wsBranch)
	gittest.Git(t, repo, "rebase", "-q", "-X", "theirs", "FETCH_HEAD")
	out = cli(false, "sync")
	if !strings.Contains(out, "pushed") {
		t.Fatalf("sync after the rebase:\n%s", out)
	}
	if got := remote("rev-parse", wsBranch+"~1"); got != theirs {
		t.Fatalf("remote %s~1 %s, want theirs %s", wsBranch, got, theirs)
	}
	if out := cli(false, "status"); strings.Contains(out, "conflict") {
		t.Fatalf("status after resolving:\n%s", out)
	}
	if passes := requestsOf(t, bin, m, "sync"); len(passes) < 3 {
		t.Fatalf("four syncs journaled with ids %v, want an id per pass that wrote", passes)
	}
}

// crashPushBack mounts, on a daemon built without the race detector, a
// workspace whose /r is a push-back checkout of a bare repository generated
// with gittest.Generate(files, commits, seed), synced only when asked. It
// returns the bare repository, the mount, the daemon's binary and the
// checkout's path on the mount.
func crashPushBack(t *testing.T, files, commits int, seed uint64) (bare string, m *testmount.Mount, bin, repo string) {
	t.Helper()
	src := filepath.Join(t.TempDir(), "src")
	gittest.Generate(t, src, files, commits, seed)
	bare = gittest.Bare(t, src)
	spec := writeSpec(t, "sources:\n  - path: /r\n    git: {url: "+bare+", push: true}\nsync:\n  debounce: 1h\n")
	m = testmount.StartPlain(t, filepath.Join(t.TempDir(), "ws"), "--spec", spec)
	return bare, m, testmount.PlainBinary(t), filepath.Join(m.Dir, "r")
}

// TestSyncGitCrash: the daemon is killed (SIGKILL) at a random point of a
// git sync of 150 changed files (new, edited, deleted); after the restart a sync
// finishes the work, and the remote holds exactly one commit per round
// (no duplicate), whose tree is the workspace's.
//
// The daemon is a build without the race detector: under it, every
// Pebble lookup that reaches an SSTable records a stack trace, and a pass
// over the 500-file checkout took 8 to 12 s (the test over a minute).
// Passes run on a race build of the daemon in TestSyncGitMounted, and
// syncer.TestGitPushCrash kills a race-built child during them.
func TestSyncGitCrash(t *testing.T) {
	bare, m, bin, repo := crashPushBack(t, 500, 3, 7)
	base, _ := strconv.Atoi(gittest.Git(t, bare, "rev-list", "--count", "main"))
	rng := rand.New(rand.NewPCG(3, 4))
	start := time.Now()
	rounds, files := 3, 150
	if testing.Short() {
		rounds = 2
	}
	for round := range rounds {
		for i := range files {
			p := filepath.Join(repo, fmt.Sprintf("crash/d%d/f%03d", i%7, i))
			switch {
			case round == 0 || rng.IntN(3) == 0:
				os.MkdirAll(filepath.Dir(p), 0o755)
				if err := os.WriteFile(p, fmt.Appendf(nil, "round %d file %d\n", round, i), 0o644); err != nil {
					t.Fatal(err)
				}
			case rng.IntN(6) == 0:
				os.Remove(p)
			}
		}
		cmd := exec.Command(bin, "sync", "-w", m.Dir)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond)
		m.Kill(t)
		cmd.Wait()
		m.Remount(t)
		out, err := exec.Command(bin, "sync", "-w", m.Dir).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "0 conflicts, 0 errors") {
			t.Fatalf("round %d: sync after a crash: %v\n%s\ndaemon log:\n%s", round, err, out, m.Log())
		}
		if n, _ := strconv.Atoi(gittest.Git(t, bare, "rev-list", "--count", wsBranch)); n != base+round+1 {
			t.Fatalf("round %d: %d commits on the remote, want %d\n%s", round, n, base+round+1,
				gittest.Git(t, bare, "log", "--format=%h %s", "-n", "8", wsBranch))
		}
		if got := gittest.Git(t, repo, "status", "--porcelain"); got != "" {
			t.Fatalf("round %d: work tree not clean after sync:\n%s", round, got)
		}
		if local, remote := gittest.Head(t, repo), gittest.Git(t, bare, "rev-parse", wsBranch); local != remote {
			t.Fatalf("round %d: HEAD %s, remote %s", round, local, remote)
		}
		// The remote's tree below crash/ is the workspace's: blob ids of
		// the files on the mount against git ls-tree of the remote.
		var want []string
		for name, content := range dirFiles(t, filepath.Join(repo, "crash")) {
			want = append(want, fmt.Sprintf("crash/%s %x", name, sha1.Sum(fmt.Appendf(nil, "blob %d\x00%s", len(content), content))))
		}
		sort.Strings(want)
		var got []string
		for _, l := range strings.Split(gittest.Git(t, bare, "ls-tree", "-r", wsBranch, "crash/"), "\n") {
			if f := strings.Fields(l); len(f) == 4 {
				got = append(got, f[3]+" "+f[2])
			}
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("round %d: the remote's crash/ (%d files) is not the workspace's (%d files): %q vs %q", round, len(got), len(want), got[0], want[0])
		}
		t.Logf("round %d: %s (%v)", round, strings.SplitN(string(out), "\n", 2)[0], time.Since(start))
	}
	if got := gittest.Git(t, bare, "fsck", "--no-progress"); got != "" {
		t.Fatalf("fsck: %s", got)
	}
}

// TestGitCrashMetadata: the daemon is killed with SIGKILL at random
// moments while in-process git (`git commit` on the shell fast path) and
// push-back passes (the syncer's commits, index and refs) write the
// repository's metadata. After each restart the repository is sound for
// the git CLI on the mount: fsck --strict passes, the index parses, HEAD
// and the branch point to commits; and the next sync pushes it all.
// (Passes run only for `computerfs sync`: a background pass after the
// restart would race with fsck, which would then see a ref newer than its
// listing of the objects.) The daemon is built without the race detector,
// as in TestSyncGitCrash: with it, a round manages one commit in seconds.
func TestGitCrashMetadata(t *testing.T) {
	bare, m, bin, repo := crashPushBack(t, 60, 2, 11)
	rng := rand.New(rand.NewPCG(5, 6))
	ident := []string{"--env", "GIT_AUTHOR_NAME=agent", "--env", "GIT_AUTHOR_EMAIL=agent@example.com",
		"--env", "GIT_COMMITTER_NAME=agent", "--env", "GIT_COMMITTER_EMAIL=agent@example.com"}
	rounds := 6
	if testing.Short() {
		rounds = 3
	}
	var agentCommits, killedLocks int
	for round := range rounds {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		wg.Add(2)
		go func() { // the agent commits with in-process git
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				script := fmt.Sprintf("mkdir -p agent && echo %d.%d > agent/f%d && git add -A && git commit -q -m 'agent %d.%d'", round, i, i%5, round, i)
				args := append(append([]string{"exec", "-w", m.Dir, "--backend", "shell", "--cwd", "/workspace/r"}, ident...), "--", script)
				cmd := exec.Command(bin, args...)
				if cmd.Run() == nil {
					mu.Lock()
					agentCommits++
					mu.Unlock()

				}
			}
		}()
		go func() { // edits through the mount, committed and pushed by the syncer
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				p := filepath.Join(repo, fmt.Sprintf("edits/e%d", i%7))
				os.MkdirAll(filepath.Dir(p), 0o755)
				os.WriteFile(p, fmt.Appendf(nil, "round %d edit %d\n", round, i), 0o644)
				if i%3 == 0 {
					exec.Command(bin, "sync", "-w", m.Dir).Run()
				} else {
					time.Sleep(30 * time.Millisecond)
				}
			}
		}()
		// Kill once the agent has committed in this round, at a random
		// moment after that.
		mu.Lock()
		before := agentCommits
		mu.Unlock()
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
			mu.Lock()
			n := agentCommits
			mu.Unlock()
			if n > before {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: no agent commit in 2 minutes\n%s", round, m.Log())
			}
		}
		time.Sleep(time.Duration(rng.IntN(800)) * time.Millisecond)
		m.Kill(t)
		close(stop)
		wg.Wait()
		m.Remount(t)

		// A git killed between taking index.lock and renaming it leaves
		// the lock, as the git CLI does; removing it is the user's part.
		if err := os.Remove(filepath.Join(repo, ".git/index.lock")); err == nil {
			killedLocks++
		}
		fsck := exec.Command("git", "-C", repo, "fsck", "--strict", "--no-dangling", "--no-progress")
		gittest.AsOwner(fsck, repo)
		if out, err := fsck.CombinedOutput(); err != nil {
			t.Fatalf("round %d: git fsck: %v\n%s", round, err, out)
		}
		gittest.Git(t, repo, "status", "--porcelain")
		if n := len(strings.Split(gittest.Git(t, repo, "ls-files", "-s"), "\n")); n < 60 {
			t.Fatalf("round %d: the index lists %d files", round, n)
		}
		if ref := gittest.Git(t, repo, "symbolic-ref", "HEAD"); ref != "refs/heads/main" {
			t.Fatalf("round %d: HEAD is %q", round, ref)
		}
		head := gittest.Git(t, repo, "rev-parse", "--verify", "HEAD^{commit}")
		t.Logf("round %d: HEAD %s, %d agent commits so far", round, head[:12], agentCommits)
	}
	out, err := exec.Command(bin, "sync", "-w", m.Dir).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "0 conflicts, 0 errors") {
		t.Fatalf("sync after the crashes: %v\n%s\ndaemon log:\n%s", err, out, m.Log())
	}
	if local, remote := gittest.Head(t, repo), gittest.Git(t, bare, "rev-parse", wsBranch); local != remote {
		t.Fatalf("HEAD %s, remote %s", local, remote)
	}
	gittest.Git(t, bare, "fsck", "--strict", "--no-dangling", "--no-progress")
	if agentCommits == 0 {
		t.Fatal("no agent commit ran: the test tested nothing")
	}
	t.Logf("%d agent commits, %d index.lock files left by a killed git", agentCommits, killedLocks)
}
