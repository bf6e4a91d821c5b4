package syncer

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/computerfs/computerfs/internal/gittest"
	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/sandbox/shell"
	"github.com/computerfs/computerfs/spec"
	"github.com/computerfs/computerfs/wsfs"
)

// The git crash test runs a child process (this test binary, running
// TestGitCrashChild) that makes commits in a workspace's checkout, with
// git on the shell fast path and with push-back passes, and kills itself
// with SIGKILL right after its k-th change to the store (any change: a
// work-tree file, an object, the index, a ref). The parent then opens the
// store and checks the repository with the git CLI on a copy of it, and
// that a pass can still commit and push.
const (
	gitCrashDirEnv  = "COMPUTERFS_GITCRASH_DIR"
	gitCrashBareEnv = "COMPUTERFS_GITCRASH_BARE"
	gitCrashKillEnv = "COMPUTERFS_GITCRASH_KILL"
)

// killAt kills the process at its at-th change, or with meta, at the
// at-th change to one of git's metadata files (where the windows are).
type killAt struct {
	n, at int64
	meta  bool
	fs    *wsfs.FS
}

// gitMeta are the files that git rewrites in place.
var gitMeta = []string{"index", "HEAD", "config", "packed-refs", "refs/heads/main", "refs/remotes/origin/main"}

func (k *killAt) Changed(ino uint64) {
	if k.meta {
		found := false
		for _, m := range gitMeta {
			if a, err := k.fs.Lstat("/r/.git/" + m); err == nil && a.Ino == ino {
				found = true
			}
		}
		if !found {
			return
		}
	}
	if atomic.AddInt64(&k.n, 1) == k.at {
		// Die with this change (and all before it) handed to the system.
		k.fs.Store().Flush()
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
}

func (k *killAt) EntryChanged(dir uint64, name string) {
	if !k.meta {
		k.Changed(dir)
	}
}

// openGitCrashEnv opens the store of a git crash test with a syncer for
// /r that pushes to bare.
func openGitCrashEnv(t *testing.T, dir, bare string, n wsfs.Notifier) *gitEnv {
	sp, err := spec.Parse(fmt.Appendf(nil, "sources:\n  - path: /r\n    git: {url: %q, push: true}\n", bare), "test.yaml", t.TempDir())
	check(t, err)
	e := &gitEnv{t: t, bare: bare, url: bare, spec: sp, dir: dir}
	st, err := kv.Open(dir, kv.Options{Logger: quiet(), FlushInterval: time.Millisecond})
	check(t, err)
	e.st = st
	t.Cleanup(func() { st.Close() })
	e.fs = wsfs.New(st, wsfs.Owner{})
	if n != nil {
		e.fs.SetNotifier(n)
	}
	e.newSyncer(gitOpts{debounce: time.Hour})
	return e
}

// TestGitCrashChild is the child's side. Without the environment variable
// it does nothing (it is not a skip: CI counts those).
func TestGitCrashChild(t *testing.T) {
	dir := os.Getenv(gitCrashDirEnv)
	if dir == "" {
		return
	}
	kind, n, _ := strings.Cut(os.Getenv(gitCrashKillEnv), ":")
	at, err := strconv.ParseInt(n, 10, 64)
	check(t, err)
	k := &killAt{at: at, meta: kind == "meta"}
	e := openGitCrashEnv(t, dir, os.Getenv(gitCrashBareEnv), k)
	k.fs = e.fs
	sh := shell.New(e.fs.As(kv.Actor{Entry: "shell"}), shell.Options{})
	ident := []string{"GIT_AUTHOR_NAME=agent", "GIT_AUTHOR_EMAIL=agent@example.com",
		"GIT_COMMITTER_NAME=agent", "GIT_COMMITTER_EMAIL=agent@example.com"}
	tag := strconv.FormatInt(time.Now().UnixNano(), 36)
	for i := range 100 {
		e.write(fmt.Sprintf("/r/crash/f%d", i%5), fmt.Sprintf("%s %d\n", tag, i))
		if i%2 == 0 {
			var out strings.Builder
			res, err := sh.Exec(context.Background(), fmt.Sprintf("git add -A && git commit -q -m 'agent %s %d'", tag, i),
				shell.ExecOptions{Cwd: "/workspace/r", Env: ident, Stdout: &out, Stderr: &out})
			if err != nil || res.ExitCode != 0 && !strings.Contains(out.String(), "index.lock") {
				t.Fatalf("git commit: %v %d\n%s", err, res.ExitCode, out.String())
			}
		}
		if r := e.sync(); len(r.Errors) > 0 && !strings.Contains(r.Errors[0], "index.lock") || len(r.Conflicts) > 0 {
			t.Fatalf("sync: %+v", r)
		}
	}
	fmt.Printf("finished after %d changes\n", atomic.LoadInt64(&k.n))
}

// TestGitPushCrash: after a SIGKILL at any change to the store while git
// commits and push-back passes run, the repository is sound (git fsck
// --strict, the index parses, HEAD and the branch name commits), and the
// next pass pushes what it has.
func TestGitPushCrash(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	gittest.Generate(t, src, 80, 2, 21)
	e := newGitEnv(t, nil, gitOpts{src: src})
	bare, dir := e.bare, e.dir
	e.sy.Close()
	check(t, e.st.Close())

	rng := rand.New(rand.NewPCG(7, 8))
	rounds := 6
	if testing.Short() {
		rounds = 4
	}
	locks := 0
	for round := range rounds {
		// Half the rounds stop at any change, half at a change of git's
		// metadata.
		at := fmt.Sprint("any:", 1+rng.IntN(120))
		if round%2 == 1 {
			at = fmt.Sprint("meta:", 1+rng.IntN(10))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestGitCrashChild$", "-test.count=1")
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGQUIT) } // with its goroutines' stacks
		cmd.WaitDelay = 10 * time.Second
		// The child is killed, so its own t.TempDir is never removed: it
		// makes it in one of ours.
		cmd.Env = append(os.Environ(), gitCrashDirEnv+"="+dir, gitCrashBareEnv+"="+bare, gitCrashKillEnv+"="+at,
			"TMPDIR="+t.TempDir())
		t0 := time.Now()
		out, err := cmd.CombinedOutput()
		tChild := time.Since(t0)
		if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: the child was not killed at change %s: %v\n%s", round, at, err, out)
		}

		e := openGitCrashEnv(t, dir, bare, nil)
		// git leaves its index.lock when killed holding it (the shell
		// fast path's git too): removing it is the user's part.
		if e.fs.Remove("/r/.git/index.lock") == nil {
			locks++
		}
		co := filepath.Join(t.TempDir(), "r")
		exportDir(t, e.fs, "/r", co)
		for _, args := range [][]string{
			{"fsck", "--strict", "--no-dangling", "--no-progress"},
			{"status", "--porcelain"},
			{"ls-files", "--stage"},
			{"rev-parse", "--verify", "HEAD^{commit}"},
			{"rev-parse", "--verify", "refs/heads/main^{commit}"},
		} {
			c := exec.Command("git", args...)
			c.Dir, c.Env = co, append(os.Environ(), gittest.Env()...)
			if out, err := c.CombinedOutput(); err != nil {
				t.Fatalf("round %d (killed at change %s): git %s: %v\n%s", round, at, strings.Join(args, " "), err, out)
			}
		}
		if got := gittest.Git(t, co, "symbolic-ref", "HEAD"); got != "refs/heads/main" {
			t.Fatalf("round %d: HEAD %q", round, got)
		}
		r := e.mustSync()
		if got, want := gittest.Git(t, bare, "rev-parse", "main"), e.localRef("refs/heads/main"); got != want {
			t.Fatalf("round %d: remote %s, local %s after a sync (%+v)", round, got, want, r)
		}
		e.sy.Close()
		check(t, e.st.Close())
		t.Logf("round %d: killed at change %s, HEAD %s (child %v, checks %v)", round, at, gittest.Git(t, bare, "rev-parse", "--short", "main"), tChild.Round(time.Millisecond), (time.Since(t0) - tChild).Round(time.Millisecond))
	}
	gittest.Git(t, bare, "fsck", "--strict", "--no-dangling", "--no-progress")
	t.Logf("%d index.lock files left by a killed git", locks)
}

// exportDir copies the tree at p of the workspace to dir on disk.
func exportDir(t *testing.T, f *wsfs.FS, p, dir string) {
	t.Helper()
	check(t, os.MkdirAll(dir, 0o755))
	var names []kv.Dirent
	check(t, f.ReadDir(p, "", func(d kv.Dirent) bool { names = append(names, d); return true }))
	for _, d := range names {
		sp, dp := path.Join(p, d.Name), filepath.Join(dir, d.Name)
		switch d.Type {
		case kv.S_IFDIR:
			exportDir(t, f, sp, dp)
		case kv.S_IFLNK:
			target, err := f.Readlink(sp)
			check(t, err)
			check(t, os.Symlink(target, dp))
		case kv.S_IFREG:
			data, err := f.ReadFile(sp)
			check(t, err)
			a, err := f.Lstat(sp)
			check(t, err)
			check(t, os.WriteFile(dp, data, fs.FileMode(a.Mode&0o777)|0o200))
		}
	}
}
