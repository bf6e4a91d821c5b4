package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
)

// GitConfigDir is where a sandbox with Options.GitConfig finds it,
// read-only: GitConfigDir/config, which GIT_CONFIG_SYSTEM names, and the
// files of Options.GitConfigIncludes beside it.
const GitConfigDir = "/dev/computerfs/git"

// Bounds of Options.GitConfig and GitConfigIncludes together.
const (
	maxGitConfig         = 64 << 10
	maxGitConfigIncludes = 64
)

// plainName says whether name is a plain file name: letters, digits,
// '.', '_' and '-', not starting with '.', '_' or '-', at most 64 bytes.
func plainName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for i, c := range []byte(name) {
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return false
		}
	}
	return true
}

// gitConfigFiles are the files of the configuration directory: config
// starts with an include of the host's /etc/gitconfig (an include of a
// missing file is nothing), then opts' settings.
func (o *Options) gitConfigFiles() (map[string]string, error) {
	if len(o.GitConfigIncludes) > maxGitConfigIncludes {
		return nil, fmt.Errorf("sandbox: %d git configuration includes (at most %d)", len(o.GitConfigIncludes), maxGitConfigIncludes)
	}
	files := map[string]string{"config": "[include]\n\tpath = /etc/gitconfig\n" + o.GitConfig}
	n := len(o.GitConfig)
	for name, text := range o.GitConfigIncludes {
		if !plainName(name) || name == "config" {
			return nil, fmt.Errorf("sandbox: git configuration include %q: want a plain file name other than config", name)
		}
		files[name] = text
		n += len(text)
	}
	if n > maxGitConfig {
		return nil, fmt.Errorf("sandbox: git configuration of %d bytes (at most %d)", n, maxGitConfig)
	}
	return files, nil
}

// gitConfigSource is the host directory, under the state directory, that
// holds files: named by their content, so that every sandbox with the
// same settings shares it and no file is ever rewritten under a running
// sandbox.
func gitConfigSource(stateDir string, files map[string]string) string {
	h := sha256.New()
	for _, name := range slices.Sorted(maps.Keys(files)) {
		fmt.Fprintf(h, "%d:%s%d:%s", len(name), name, len(files[name]), files[name])
	}
	return filepath.Join(stateDir, "gitconfig-"+hex.EncodeToString(h.Sum(nil)[:8]))
}

// writeGitConfig makes the directory of gitConfigSource if it is not
// there: written beside it, then renamed into place.
func writeGitConfig(stateDir string, files map[string]string) error {
	dst := gitConfigSource(stateDir, files)
	if _, err := os.Stat(dst); err == nil {
		return nil
	}
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return fmt.Errorf("sandbox: state directory: %w", err)
	}
	tmp, err := os.MkdirTemp(stateDir, ".gitconfig-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil { // the mapped users read it
		return err
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(tmp, name), []byte(text), 0o644); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, dst); err != nil {
		if _, serr := os.Stat(dst); serr == nil {
			return nil // another sandbox made it meanwhile
		}
		return err
	}
	return nil
}
