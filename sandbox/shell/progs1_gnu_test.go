package shell

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// gnuCase is one command line compared with bash and the GNU tools: the
// files it starts with (written into the store and a temporary
// directory alike) and its standard input.
type gnuCase struct {
	files map[string]string
	stdin string
	cmd   string
}

// compareGNU runs each command on the fast path and with bash (GNU tools
// from /usr/bin) in a directory with the same files, and fails on any
// difference in stdout, stderr or the status. Each case starts from its
// own files; after the command, the files it leaves are compared too.
func compareGNU(t *testing.T, cases []gnuCase) {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatal("bash is needed for the differential tests")
	}
	for _, tc := range cases {
		if ok, why := CanRun(tc.cmd); !ok {
			t.Errorf("%s: routed to the sandbox (%s)", tc.cmd, why)
			continue
		}
		s, fsys := newShell(t)
		dir := t.TempDir()
		for name, body := range tc.files {
			if d := filepath.Dir(name); d != "." {
				os.MkdirAll(filepath.Join(dir, d), 0o755)
				fsys.MkdirAll(d, 0o755)
			}
			os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644)
			if err := fsys.WriteFile(name, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		var out, errb bytes.Buffer
		res, err := s.Exec(context.Background(), tc.cmd, ExecOptions{Stdin: strings.NewReader(tc.stdin), Stdout: &out, Stderr: &errb, Timeout: 20 * time.Second})
		if err != nil {
			t.Fatalf("%q: %v", tc.cmd, err)
		}
		b := exec.Command("bash", "-c", tc.cmd)
		b.Dir = dir
		b.Env = []string{"HOME=" + dir, "PATH=/usr/bin:/bin", "LANG=C.UTF-8", "TZ=UTC", "TMPDIR=" + dir}
		b.Stdin = strings.NewReader(tc.stdin)
		bout, berr, code := runCmd(t, b)
		if out.String() != bout || errb.String() != berr || res.ExitCode != code {
			t.Errorf("%s:\n--- fast path (status %d):\n%s--- stderr:\n%s--- bash (status %d):\n%s--- stderr:\n%s",
				tc.cmd, res.ExitCode, out.String(), errb.String(), code, bout, berr)
			continue
		}
		// the files left behind
		want := map[string]string{}
		filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.Mode().IsRegular() {
				data, _ := os.ReadFile(p)
				rel, _ := filepath.Rel(dir, p)
				want[rel] = string(data)
			}
			return nil
		})
		names := make([]string, 0, len(want))
		for n := range want {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			got, err := fsys.ReadFile(n)
			if err != nil || string(got) != want[n] {
				t.Errorf("%s: file %s is %q (%v) on the fast path, %q with GNU", tc.cmd, n, got, err, want[n])
			}
		}
	}
}

// sameFiles is gnuCase's files for a list of commands.
func gnuCases(files map[string]string, stdin string, cmds ...string) []gnuCase {
	out := make([]gnuCase, len(cmds))
	for i, c := range cmds {
		out[i] = gnuCase{files, stdin, c}
	}
	return out
}

// boundedRun runs a script on the fast path with a small memory budget
// and a timeout, and returns its stderr and status: a hostile input must
// be stopped (status 125, "memory limit") or end by itself, never take
// the daemon's memory.
func boundedRun(t *testing.T, script string, stdin string, maxMem int64, timeout time.Duration) (string, string, int) {
	t.Helper()
	s, _ := newShell(t)
	var out, errb bytes.Buffer
	res, err := s.Exec(context.Background(), script, ExecOptions{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb,
		Timeout: timeout, MaxMemory: maxMem, MaxOutput: -1})
	if err != nil {
		t.Fatalf("%q: %v", script, err)
	}
	return out.String(), errb.String(), res.ExitCode
}
