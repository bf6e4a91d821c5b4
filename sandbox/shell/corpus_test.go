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

// corpusAllowed lists the corpus commands whose output differs from bash
// and GNU coreutils for a known reason. Each is still run on the fast path
// (it must not fail to run), but its output is not compared.
var corpusAllowed = map[string]string{
	"ls -la":               "directory sizes: the store reports 0 for directories, tmpfs their entry bytes (README: POSIX behaviour)",
	"ls -ld docs":          "directory sizes: the store reports 0 for directories, tmpfs their entry bytes (README: POSIX behaviour)",
	"ls -l data":           "the total line counts 512-byte blocks, which the store and tmpfs allocate differently",
	"ls -lh data":          "the total line counts blocks, which the store and tmpfs allocate differently",
	"du -sh data":          "disk usage counts blocks, which the store and tmpfs allocate differently",
	"du -a src":            "disk usage counts blocks, which the store and tmpfs allocate differently",
	"tree docs":            "tree is not installed on this machine",
	"tree -L 1 pkg":        "tree is not installed on this machine",
	"jq . data/users.json": "gojq sorts object keys; jq 1.6 keeps their order (the fixture's keys are sorted, but jq 1.6 prints floats differently)",
}

type corpusEntry struct {
	line int
	cmd  string
}

// readCorpus reads testdata/corpus.txt: one command per line; a command
// over several lines (heredocs) sits between lines "<<<" and ">>>";
// lines starting with "##" are comments. testdata/corpus-git.txt, in the
// same format, is read by TestGitCorpus.
func readCorpus(t testing.TB) []corpusEntry { return readCorpusFile(t, "testdata/corpus.txt") }

func readCorpusFile(t testing.TB, name string) []corpusEntry {
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var out []corpusEntry
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.TrimSpace(l) == "" || strings.HasPrefix(l, "##"):
		case l == "<<<":
			start := i + 1
			var b []string
			for i++; i < len(lines) && lines[i] != ">>>"; i++ {
				b = append(b, lines[i])
			}
			out = append(out, corpusEntry{start, strings.Join(b, "\n")})
		default:
			out = append(out, corpusEntry{i + 1, l})
		}
	}
	return out
}

// tmpfsFixture writes the fixture into a new directory on tmpfs, with a
// private temporary directory beside it; remove deletes both.
func tmpfsFixture(t testing.TB, pattern string) (ws, tmp string, remove func()) {
	t.Helper()
	base, err := os.MkdirTemp("/dev/shm", pattern)
	if err != nil {
		t.Fatal(err)
	}
	ws, tmp = base+"/w", base+"/t"
	os.Mkdir(ws, 0o755)
	os.Mkdir(tmp, 0o1777)
	writeFixtureDir(t, ws)
	return ws, tmp, func() { os.RemoveAll(base) }
}

// bashCommand is command for bash on a tmpfsFixture: /workspace and /tmp
// rewritten to ws and tmp, and an environment like the fast path's.
func bashCommand(ws, tmp, command string) *exec.Cmd {
	script := strings.ReplaceAll(strings.ReplaceAll(command, "/workspace", ws), "/tmp", tmp)
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = ws
	cmd.Env = []string{"HOME=" + ws, "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "TZ=UTC", "TMPDIR=" + tmp}
	return cmd
}

// bashRun runs a command with bash and GNU coreutils in a copy of the
// fixture on tmpfs. /workspace and /tmp in the command are rewritten to
// the copy and a private temporary directory, and back in the output.
func bashRun(t testing.TB, command string) (string, int) {
	ws, tmp, remove := tmpfsFixture(t, "shellcorpus-")
	defer remove()
	cmd := bashCommand(ws, tmp, command)
	cmd.Stdin = strings.NewReader("")
	out, _, code := runCmd(t, cmd)
	s := strings.ReplaceAll(out, ws, "/workspace")
	s = strings.ReplaceAll(s, tmp, "/tmp")
	return s, code
}

// fastRun runs a command on the fast path on a fresh store with the fixture.
// Each run has its own store, closed and removed at once: a Pebble store
// takes tens of megabytes on disk, and the corpus has hundreds of entries.
func fastRun(t testing.TB, command string) (string, string, int) {
	dir, err := os.MkdirTemp("", "shellcorpus-store-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	st, err := kv.Open(dir, kv.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fs := wsfs.New(st, wsfs.Owner{})
	s := New(fs, Options{})
	writeFixtureStore(t, fs)
	var out, errb bytes.Buffer
	res, err := s.Exec(context.Background(), command, ExecOptions{Stdout: &out, Stderr: &errb, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("%q: %v", command, err)
	}
	return out.String(), errb.String(), res.ExitCode
}

func TestCorpus(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatal("bash is needed for the differential tests")
	}
	entries := readCorpus(t)
	if len(entries) < 150 {
		t.Fatalf("corpus has %d entries", len(entries))
	}
	pass, allowed, fail, routed, bounded := 0, 0, 0, 0, 0
	for _, e := range entries {
		if ok, why := CanRun(e.cmd); !ok {
			// refused by the fast path for what it would answer
			// differently from bash (divergent), or for what its stack
			// cannot bound (jq's updates): auto runs it in the sandbox's
			// bash. Other refusals still run here: the fast path
			// answers them when called on it directly.
			switch {
			case strings.Contains(why, "is not supported"):
				routed++
				continue
			case strings.Contains(why, "deeper than the fast path's stack"):
				bounded++
				continue
			}
		}
		got, stderr, code := fastRun(t, e.cmd)
		if reason, ok := corpusAllowed[e.cmd]; ok && reason != "" {
			allowed++
			continue
		}
		want, wantCode := bashRun(t, e.cmd)
		if got != want || code != wantCode {
			fail++
			t.Errorf("corpus.txt:%d: %s\n--- fast path (status %d, stderr %q):\n%s--- bash (status %d):\n%s", e.line, e.cmd, code, stderr, got, wantCode, want)
			continue
		}
		pass++
	}
	t.Logf("corpus: %d entries, %d identical to bash, %d allowed to differ, %d routed to the sandbox for a divergence, %d for a bound, %d failed", len(entries), pass, allowed, routed, bounded, fail)
	if routed > len(entries)/20 {
		t.Errorf("%d of %d entries are refused for a divergence from bash", routed, len(entries))
	}
}
