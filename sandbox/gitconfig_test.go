package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGitConfigFiles: the configuration directory holds config (the
// host's /etc/gitconfig included first) and the includes, under a name of
// their content, readable by the mapped users; names that are not plain
// file names and oversized configurations are refused.
func TestGitConfigFiles(t *testing.T) {
	state := t.TempDir()
	o := Options{GitConfig: "[user]\n\tname = a\n", GitConfigIncludes: map[string]string{"source-0": "[user]\n\tname = b\n"}}
	files, err := o.gitConfigFiles()
	if err != nil {
		t.Fatal(err)
	}
	if err := writeGitConfig(state, files); err != nil {
		t.Fatal(err)
	}
	dir := gitConfigSource(state, files)
	cfg, err := os.ReadFile(filepath.Join(dir, "config"))
	if err != nil || string(cfg) != "[include]\n\tpath = /etc/gitconfig\n[user]\n\tname = a\n" {
		t.Fatalf("config: %v %q", err, cfg)
	}
	for _, p := range []string{dir, filepath.Join(dir, "source-0")} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm()&0o005 == 0 {
			t.Errorf("%s: %v %v", p, err, fi.Mode())
		}
	}
	if err := writeGitConfig(state, files); err != nil { // there already
		t.Fatal(err)
	}
	o.GitConfigIncludes["source-0"] = "other"
	files2, _ := o.gitConfigFiles()
	if gitConfigSource(state, files2) == dir {
		t.Error("another include, the same directory")
	}
	for _, bad := range []string{"../x", "config", "a/b", ".hidden", ""} {
		o := Options{GitConfig: "x", GitConfigIncludes: map[string]string{bad: "y"}}
		if _, err := o.gitConfigFiles(); err == nil {
			t.Errorf("include %q accepted", bad)
		}
	}
	big := Options{GitConfig: strings.Repeat("x", maxGitConfig+1)}
	if _, err := big.gitConfigFiles(); err == nil {
		t.Error("an oversized configuration accepted")
	}
}
