package shell

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/wsfs"
)

func newShell(t testing.TB) (*Shell, *wsfs.FS) {
	t.Helper()
	// A small memtable: Pebble preallocates its log at 1.1 times that size, and the corpus opens a store per command.
	s, err := kv.Open(t.TempDir()+"/store", kv.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MemTableSize: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	fs := wsfs.New(s, wsfs.Owner{})
	return New(fs, Options{}), fs
}

// sh runs a script and returns stdout, stderr and the status.
func sh(t testing.TB, s *Shell, script string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	res, err := s.Exec(context.Background(), script, ExecOptions{Stdout: &out, Stderr: &errb, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatalf("%q: %v", script, err)
	}
	return out.String(), errb.String(), res.ExitCode
}

func TestBasics(t *testing.T) {
	s, fs := newShell(t)
	if err := fs.WriteFile("a.txt", []byte("one\ntwo\nthree\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		script, out string
		code        int
	}{
		{"pwd", "/workspace\n", 0},
		{"cat a.txt", "one\ntwo\nthree\n", 0},
		{"cat /workspace/a.txt | head -n 2", "one\ntwo\n", 0},
		{"echo hi > b.txt; cat b.txt", "hi\n", 0},
		{"nosuchcmd", "", 127},
		{"/bin/sh -c true", "", 0},
		{"/usr/bin/python3 -c 1", "", 127},
		{"exec /bin/perl", "", 127},
		{"cat a.txt | wc -l", "3\n", 0},
		{"echo $HOME", "/workspace\n", 0},
		{"cd /tmp && echo x > f && cat /tmp/f && pwd", "x\n/tmp\n", 0},
		{"echo *.txt", "a.txt b.txt\n", 0},
		{"[ -f a.txt ] && echo yes", "yes\n", 0},
		{"tail -n 1 a.txt", "three\n", 0},
		{"false; echo $?", "1\n", 0},
		{"exit 3", "", 3},
		{"type ls", "ls is /usr/bin/ls\n", 0},
		{"command -v grep", "/usr/bin/grep\n", 0},
		{"command -v nosuch; echo $?", "1\n", 0},
		{"echo a | /usr/bin/cat", "a\n", 0},
	}
	for _, c := range cases {
		out, errs, code := sh(t, s, c.script)
		if out != c.out || code != c.code {
			t.Errorf("%q: got %q (status %d, stderr %q), want %q (status %d)", c.script, out, code, errs, c.out, c.code)
		}
	}
}

func TestLimits(t *testing.T) {
	s, _ := newShell(t)
	var out bytes.Buffer
	res, err := s.Exec(context.Background(), "while true; do echo hello; done", ExecOptions{Stdout: &out, MaxOutput: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Truncated || out.Len() != 1000 || res.ExitCode != ExitLimit || res.Stopped != "output limit" {
		t.Fatalf("output limit: %+v, %d bytes", res, out.Len())
	}
	res, _ = s.Exec(context.Background(), "while true; do :; done", ExecOptions{MaxCommands: 500})
	if res.ExitCode != ExitLimit || res.Stopped != "command limit" {
		t.Fatalf("command limit: %+v", res)
	}
	start := time.Now()
	res, _ = s.Exec(context.Background(), "sleep 10", ExecOptions{Timeout: 100 * time.Millisecond})
	if res.ExitCode != ExitTimeout || res.Stopped != "timeout" || time.Since(start) > 5*time.Second {
		t.Fatalf("timeout: %+v after %v", res, time.Since(start))
	}
	res, _ = s.Exec(context.Background(), "yes | head -c 10", ExecOptions{Stdout: &out})
	if res.ExitCode != 0 {
		t.Fatalf("yes | head: %+v", res)
	}
	var in bytes.Buffer
	in.WriteString("from stdin\n")
	out.Reset()
	res, _ = s.Exec(context.Background(), "cat; echo $X", ExecOptions{Stdin: &in, Stdout: &out, Env: []string{"X=1"}})
	if out.String() != "from stdin\n1\n" || res.ExitCode != 0 {
		t.Fatalf("stdin and env: %q %+v", out.String(), res)
	}
	if !strings.Contains(out.String(), "stdin") {
		t.Fatal()
	}
}
