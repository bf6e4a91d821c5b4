package shell

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/wsfs"
)

// agentCorpusKnown are the agent corpus's commands that the fast path
// answers differently from bash on tmpfs, each with why. They are run
// and counted as wrong on the fast path, but do not fail the test.
var agentCorpusKnown = map[string]string{
	"ls -la /workspace":              "directory sizes: the store reports 0 for directories (as the mount does to the sandbox), tmpfs their entry bytes; /workspace's parent is the namespace's",
	"ls -la cmd/app":                 "directory sizes (see ls -la /workspace)",
	"ls -al internal":                "directory sizes (see ls -la /workspace)",
	"ls -la | head -20":              "directory sizes (see ls -la /workspace)",
	"ls -la 2>&1 | grep -v '^total'": "directory sizes (see ls -la /workspace)",
	"ls -la internal/util && wc -l internal/util/*.go":                                              "directory sizes (see ls -la /workspace)",
	"sed -i 's|example.com/demo|example.com/app|' go.mod cmd/app/main.go && grep -rn example.com .": "grep -r walks in name order (the store's, so the mount's too); on tmpfs GNU grep walks in directory order, which sed -i's new go.mod changed",
	`cd /workspace && ls -la pkg/api/ 2>&1 | tail -30`:                                              "directory sizes (see ls -la /workspace)",
	`ls -la src/`:                          "directory sizes (see ls -la /workspace)",
	`ls -lt | head`:                        "directory sizes (see ls -la /workspace)",
	`ls -la --color=never`:                 "directory sizes (see ls -la /workspace)",
	`cd /workspace && ls -la`:              "directory sizes (see ls -la /workspace)",
	`cd internal/util && ls -la && cd -`:   "directory sizes (see ls -la /workspace)",
	`bash -lc 'ls -la'`:                    "directory sizes (see ls -la /workspace)",
	`rg -n "Handler|WriteHeader" pkg/api`:  "rg walks in name order (the store's, so the mount's too); rg on tmpfs in directory order",
	`rg -n "import" -g '*.go'`:             "walk order (see rg -n \"Handler|WriteHeader\" pkg/api)",
	`bash -lc 'rg --files | head -50'`:     "walk order (see rg -n \"Handler|WriteHeader\" pkg/api)",
	`bash -lc "rg -n 'func ' -S internal"`: "walk order (see rg -n \"Handler|WriteHeader\" pkg/api)",
	`rg --files`:                           "walk order (see rg -n \"Handler|WriteHeader\" pkg/api)",
	`rg --files -g '*.go'`:                 "walk order (see rg -n \"Handler|WriteHeader\" pkg/api)",
	`rg -l "package" --type go`:            "walk order (see rg -n \"Handler|WriteHeader\" pkg/api)",
	`rg -c "func" -t go`:                   "walk order (see rg -n \"Handler|WriteHeader\" pkg/api)",
	`rg -i "hello" -n`:                     "walk order (see rg -n \"Handler|WriteHeader\" pkg/api)",
	`rg -n "^func " --glob '!*_test.go'`:   "walk order (see rg -n \"Handler|WriteHeader\" pkg/api)",
	`rg "TODO|FIXME" -n --no-heading`:      "walk order (see rg -n \"Handler|WriteHeader\" pkg/api)",
	`diff -u docs/notes.txt <(sed 's/apple/APPLE/' docs/notes.txt)`: "the time diff -u prints for a pipe (/dev/fd/63) is the moment it is read in bash; the fast path prints the zero time",
	`hostname`:                   "the sandbox's name is \"sandbox\" (sandbox.go's default), as the fast path says; the test's bash runs on the host",
	`printf '%s\n' "${PWD##*/}"`: "the test's bash runs in a temporary directory, not /workspace, and its path is written back only whole",
	`wc -l **/*.go`:              "GNU wc quotes a missing name with shell characters ('**/*.go'); the fast path's messages print names as they are",
}

// TestAgentCorpus runs testdata/corpus-agents.txt, commands in the shapes
// coding agents type (Codex CLI, Claude Code, mini-SWE-agent and SWE-agent
// trajectories), as auto routes them: what Shell.CanRunIn accepts runs on
// the fast path and must match bash and GNU tools on a tmpfs copy of the
// fixture byte for byte, stdout, stderr and exit status (agents read both
// streams, often merged with 2>&1); what it refuses runs in the sandbox's
// bash, right by construction. It reports the shares: on the fast path,
// right under auto, wrong on the fast path (which fails the test).
func TestAgentCorpus(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatal("bash is needed for the differential tests")
	}
	c := runAutoCorpus(t, "corpus-agents.txt", 150, agentCorpusKnown, "bash")
	t.Logf("agent corpus: %d commands; on the fast path and identical to bash %d (%.1f%%), sent to the sandbox %d (%.1f%%), wrong on the fast path %d (%.1f%%, %d of them known); right under auto %.1f%%; routed by kind: %v",
		c.n, c.fast, c.pct(c.fast), c.n-c.fast-c.wrong, c.pct(c.n-c.fast-c.wrong), c.wrong, c.pct(c.wrong), c.known, c.pct(c.n-c.wrong), c.routed)
}

// corpusShares is what runAutoCorpus counts: commands, those on the fast
// path and identical to the reference, those on the fast path and
// different (known: listed with their reason), and the routed by kind.
type corpusShares struct {
	n, fast, wrong, known int
	routed                map[string]int
}

func (c corpusShares) pct(k int) float64 { return 100 * float64(k) / float64(c.n) }

// runAutoCorpus runs testdata/FILE (at least minEntries commands) as auto
// routes them: what CanRunIn accepts runs on the fast path and must match
// the reference (bash, GNU tools, jq 1.6: named ref in the messages) on
// a tmpfs copy of the fixture, stdout, stderr and status byte for byte,
// unless known lists it with its reason; a listed command that matches
// fails too, so that the list shrinks as the fast path gets better.
func runAutoCorpus(t *testing.T, file string, minEntries int, known map[string]string, ref string) corpusShares {
	entries := readCorpusFile(t, "testdata/"+file)
	if len(entries) < minEntries {
		t.Fatalf("%s has %d entries", file, len(entries))
	}
	c := corpusShares{n: len(entries), routed: map[string]int{}}
	for _, e := range entries {
		ok, why, got, gotErr, code := autoRun(t, e.cmd)
		if !ok {
			c.routed[routeKind(why)]++
			if testing.Verbose() {
				t.Logf("%s:%d: routed: %s: %s", file, e.line, why, e.cmd)
			}
			continue
		}
		want, wantErr, wantCode := bashRunBoth(t, e.cmd)
		reason, listed := known[e.cmd]
		if got != want || gotErr != wantErr || code != wantCode {
			c.wrong++
			if listed {
				c.known++
				if testing.Verbose() {
					t.Logf("%s:%d: known to differ: %s: %s", file, e.line, reason, e.cmd)
				}
				continue
			}
			t.Errorf("%s:%d: %s\n--- fast path (status %d):\n%s--- stderr:\n%s--- %s (status %d):\n%s--- stderr:\n%s",
				file, e.line, e.cmd, code, got, gotErr, ref, wantCode, want, wantErr)
			continue
		}
		if listed {
			t.Errorf("%s:%d: %s: listed as known to differ, but matches %s", file, e.line, e.cmd, ref)
		}
		c.fast++
	}
	return c
}

// routeKind shortens a routing reason to its kind for the summary.
func routeKind(why string) string {
	for _, k := range []string{"not built in", "not supported", "syntax error", "script", "writes", "stdin"} {
		if strings.Contains(why, k) {
			return k
		}
	}
	if i := strings.IndexAny(why, ":("); i > 0 {
		return why[:i]
	}
	return why
}

// autoRun asks Shell.CanRunIn about a command on a fresh store holding the
// fixture, as the daemon's auto routing does, and runs it there on the
// fast path when it accepts.
func autoRun(t testing.TB, command string) (ok bool, why, stdout, stderr string, code int) {
	dir, err := os.MkdirTemp("", "agentcorpus-store-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	st, err := kv.Open(dir, kv.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MemTableSize: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fs := wsfs.New(st, wsfs.Owner{})
	// which, command -v and type answer for the sandbox's programs as
	// the daemon has them answer (exec.go); here the sandbox is the host
	// the test's bash runs on
	s := New(fs, Options{SandboxProgram: func(p string) bool {
		fi, err := os.Stat(p)
		return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
	}})
	writeFixtureStore(t, fs)
	if ok, why = s.CanRunIn("", command); !ok {
		return false, why, "", "", 0
	}
	var out, errb bytes.Buffer
	res, err := s.Exec(context.Background(), command, ExecOptions{Stdout: &out, Stderr: &errb, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("%q: %v", command, err)
	}
	return true, "", out.String(), errb.String(), res.ExitCode
}

// bashRunBoth is bashRun with stderr too, the fixture's paths written
// back as /workspace and /tmp in both.
func bashRunBoth(t testing.TB, command string) (stdout, stderr string, code int) {
	ws, tmp, remove := tmpfsFixture(t, "agentcorpus-")
	defer remove()
	cmd := bashCommand(ws, tmp, command)
	for i, e := range cmd.Env {
		if strings.HasPrefix(e, "PATH=") {
			cmd.Env[i] = "PATH=" + DefaultPath // the fast path's and the sandbox's
		}
	}
	cmd.Stdin = nil // /dev/null, as the sandbox has it when a call gives no stdin (exec.go)
	out, errs, code := runCmd(t, cmd)
	back := func(s string) string {
		return strings.ReplaceAll(strings.ReplaceAll(s, ws, "/workspace"), tmp, "/tmp")
	}
	return back(out), back(errs), code
}
