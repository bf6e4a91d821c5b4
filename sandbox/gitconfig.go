package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
)

// GitConfigPath is where a sandbox with Options.GitConfig finds it,
// read-only; GIT_CONFIG_SYSTEM names it.
const GitConfigPath = "/dev/computerfs/gitconfig"

// maxGitConfig bounds Options.GitConfig.
const maxGitConfig = 64 << 10

// gitConfigText is the file a sandbox's git reads as its system
// configuration: the host's /etc/gitconfig (an include of a missing file
// is nothing), then opts' settings.
func gitConfigText(cfg string) []byte {
	return []byte("[include]\n\tpath = /etc/gitconfig\n" + cfg)
}

// gitConfigSource is the host file, under the state directory, that holds
// cfg: named by its content, so that every sandbox with the same settings
// shares one file and no file is ever rewritten under a running sandbox.
func gitConfigSource(stateDir, cfg string) string {
	h := sha256.Sum256(gitConfigText(cfg))
	return filepath.Join(stateDir, "gitconfig-"+hex.EncodeToString(h[:8]))
}

// writeGitConfig makes the file of gitConfigSource if it is not there.
func writeGitConfig(stateDir, cfg string) error {
	if len(cfg) > maxGitConfig {
		return fmt.Errorf("sandbox: git configuration of %d bytes (at most %d)", len(cfg), maxGitConfig)
	}
	dst := gitConfigSource(stateDir, cfg)
	if _, err := os.Stat(dst); err == nil {
		return nil
	}
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return fmt.Errorf("sandbox: state directory: %w", err)
	}
	f, err := os.CreateTemp(stateDir, ".gitconfig-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, err = f.Write(gitConfigText(cfg))
	if err == nil {
		err = f.Chmod(0o644) // the mapped users read it
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), dst)
	}
	return err
}
