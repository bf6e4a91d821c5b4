package shell

import (
	"os"
	"os/exec"
	"path"
	"sort"
	"strings"
	"testing"
)

// diffTools runs each command line of cmds on the fast path and with
// bash and the real tools, over the same files (name to content; a name
// ending in "/" is a directory) in the workspace and in a host
// directory: stdout, stderr and the status must be the same. Each command must stay on the fast path (CanRun).
func diffTools(t *testing.T, tools []string, files map[string]string, cmds []string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed for the differential tests (scripts/packages.txt)", tool)
		}
	}
	s, fs := newShell(t)
	dir := t.TempDir()
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if strings.HasSuffix(n, "/") {
			os.MkdirAll(dir+"/"+n, 0o755)
			if err := fs.MkdirAll(strings.TrimSuffix(n, "/"), 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if d := path.Dir(n); d != "." {
			os.MkdirAll(dir+"/"+d, 0o755)
			fs.MkdirAll(d, 0o755)
		}
		if err := os.WriteFile(dir+"/"+n, []byte(files[n]), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := fs.WriteFile(n, []byte(files[n]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, line := range cmds {
		if ok, why := CanRun(line); !ok {
			t.Errorf("%s: routed to the sandbox: %s", line, why)
			continue
		}
		cmd := exec.Command("bash", "-c", line)
		cmd.Dir = dir
		cmd.Env = []string{"HOME=" + dir, "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "TZ=UTC"}
		wout, werr, wcode := runCmd(t, cmd)
		want := strings.ReplaceAll(wout, dir, "/workspace")
		wantErr := strings.ReplaceAll(werr, dir, "/workspace")
		got, gotErr, code := sh(t, s, line)
		if got != want || gotErr != wantErr || code != wcode {
			t.Errorf("%s\n--- fast path (status %d):\n%s--- stderr:\n%s--- bash (status %d):\n%s--- stderr:\n%s",
				line, code, got, gotErr, wcode, want, wantErr)
		}
	}
}
