package shell

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestTreeMatchesTree runs the tree forms agents type on the fast path and
// with tree(1) 2.1 on the same files, and compares stdout, stderr and the
// exit status.
func TestTreeMatchesTree(t *testing.T) {
	if _, err := exec.LookPath("tree"); err != nil {
		t.Fatal("tree(1) is needed for this test (scripts/packages.txt)")
	}
	s, fs := newShell(t)
	dir := t.TempDir()
	files := []string{"README.md", "go.mod", "cmd/app/main.go", "internal/a/a.go", "internal/a/a_test.go", "internal/b/b.go",
		"docs/x.md", ".hidden/h", ".env", "node_modules/m/index.js", "Zeta", "alpha", "B.txt", "a b/c d", "dir.with.dots/f"}
	for _, f := range files {
		p := filepath.Join(dir, f)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte("x\n"), 0o644)
		check(t, fs.MkdirAll(filepath.Dir(f), 0o755))
		check(t, fs.WriteFile(f, []byte("x\n"), 0o644))
	}
	for _, d := range []string{"empty", "internal/empty"} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
		check(t, fs.MkdirAll(d, 0o755))
	}
	for _, l := range [][2]string{{"cmd", "link-to-dir"}, {"go.mod", "link-to-file"}, {"nowhere", "dangling"}} {
		os.Symlink(l[0], filepath.Join(dir, l[1]))
		check(t, fs.Symlink(l[0], l[1]))
	}
	forms := []string{
		"tree", "tree .", "tree -a", "tree -d", "tree -L 1", "tree -L 2", "tree -L 2 -d", "tree -f", "tree -f internal",
		"tree internal", "tree internal/", "tree cmd internal", "tree -I node_modules", "tree -I 'node_modules|docs'",
		"tree -I '*.go'", "tree -a -I .hidden", "tree --noreport", "tree --noreport -L 1", "tree -L 1 internal",
		"tree empty", "tree missing", "tree go.mod", "tree -a -L 1", "tree -d internal", "tree -I '*_test.go' internal",
		"tree -L 3 -I node_modules --noreport", "tree link-to-dir", "tree -da", "tree ./internal", "tree -fL 1",
		"tree -aL 2", "tree -I 'a*|B*'", "tree -L 1 missing internal", "tree -d -L 1 empty", "tree -a -d -L 2 -f",
		"tree -I '*' ", "tree internal/a/a.go", "tree -L 1 . internal", "tree -I node_modules -d", "tree -L 5 cmd",
	}
	for _, form := range forms {
		cmd := exec.Command("bash", "-c", form)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "LC_ALL=C.UTF-8")
		stdout, stderr, code := runCmd(t, cmd)
		got, gotErr, gotCode := sh(t, s, form)
		if got != stdout || gotErr != stderr || gotCode != code {
			t.Errorf("%s:\n--- fast path (%d):\n%s%s--- tree (%d):\n%s%s", form, gotCode, got, gotErr, code, stdout, stderr)
		}
	}
}
