package shell

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/computerfs/computerfs/internal/deeptree"
	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/wsfs"
)

// deepTreeScripts run on a chain of deeptree.Depth directories d/d/...
// (with a file f at the bottom), each with a short timeout: every walk of
// the fast path must answer, stop at its bound ("File name too long",
// git's core.maxTreeDepth) or at the timeout, never recurse its way to
// Go's fatal stack limit. git's walks list directories by inode (no path
// lookup a level), so they reach any depth within the timeout: before
// their bound, git status took the child's stack and then gigabytes of
// paths.
var deepTreeScripts = []string{
	// read only
	"find . -name f", "find d -depth -name nothing", "du -s d", "ls -R d > /dev/null", "tree d > /dev/null",
	"grep -r deep d", "rg deep d", "diff -r d d", "realpath d/d/d", "cd d/d/d && pwd",
	"git init -q && git status --short", "git clean -nd", "git diff --stat",
	// then changes (mv, then clean, last: the others work on d)
	"mkdir -p $(printf 'a/%.0s' $(seq 5000))x", "rg -l deep $(printf 'd/%.0s' $(seq 5000))",
	"tar cf /tmp/x.tar d", "cp -r d e", "git add -A", "chmod -R 700 d", "rm -rf d", "mv d e2 && ls",
	// git clean removes e2 by inode: to the bottom within the timeout
	"git clean -fdq",
}

// TestDeepTreeFastPath runs deepTreeScripts in a child test process
// (internal/deeptree), one after the other on the same chain, each with
// a 1 s timeout: each call must end soon after the timeout (a second,
// logged; ten, failed: machines under -race are slow), and
// the shell must run a command after it. The child logs each script as
// it starts, so a fatal error names the script.
//
// The walks that look every level up by path from the root (find, du,
// rm -r...) cost the square of the depth, so within the timeout they go
// a few thousand levels down and stop there; the test holds them to the
// timeout and to a bounded stack, not to a depth.
func TestDeepTreeFastPath(t *testing.T) {
	if op, dir, ok := deeptree.Child(); ok {
		for _, script := range deepTreeScripts {
			if op == "all" || op == script {
				deepFastPathChild(t, script, dir)
			}
		}
		return
	}
	store := filepath.Join(t.TempDir(), "store")
	deeptree.Build(t, store, 0, 0, nil)
	deeptree.Run(t, "TestDeepTreeFastPath", store, []string{"all"}, 5*time.Minute)
}

func deepFastPathChild(t *testing.T, script, dir string) {
	t.Logf("deeptree: starting %q", script)
	st, err := kv.Open(dir, deeptree.Options())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := New(wsfs.New(st, wsfs.Owner{}), Options{})
	const timeout = time.Second
	var out bytes.Buffer
	start := time.Now()
	res, err := s.Exec(context.Background(), script, ExecOptions{Stdout: &out, Stderr: &out, Timeout: timeout, MaxOutput: 1 << 20})
	took := time.Since(start)
	if err != nil {
		t.Fatalf("%q: %v", script, err)
	}
	text := out.String()
	t.Logf("deeptree: %q: exit %d %s in %.2fs: %.160q", script, res.ExitCode, res.Stopped, took.Seconds(), text)
	// A call returns within its timeout and a second; the test allows
	// more, for a loaded 2-core machine under -race (rg with a start
	// 5,000 levels down takes 4-4.4 s there for a 1 s timeout, 1.04 s
	// without -race), and fails a walk that runs on.
	if took > timeout+10*time.Second {
		t.Errorf("%q: %.1fs, past its timeout of %v", script, took.Seconds(), timeout)
	} else if took > timeout+time.Second {
		t.Logf("%q: %.1fs, past its timeout of %v and a second", script, took.Seconds(), timeout)
	}
	switch {
	case res.ExitCode == ExitTimeout:
	case res.ExitCode == 0:
	case strings.Contains(text, "File name too long") || strings.Contains(text, "core.maxTreeDepth"):
	default:
		t.Errorf("%q: exit %d without a word of the depth: %.300q", script, res.ExitCode, text)
	}
	if strings.Contains(script, "git status") && res.ExitCode == 0 {
		t.Errorf("%q: git took a tree past its bound: %.300q", script, text)
	}
	out.Reset()
	if res, err := s.Exec(context.Background(), "echo still here", ExecOptions{Stdout: &out, Stderr: &out, Timeout: time.Minute}); err != nil || res.ExitCode != 0 || out.String() != "still here\n" {
		t.Errorf("after %q: %+v %v %q", script, res, err, out.String())
	}
}
