package computerfs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStoreInsideMountRefused: a store directory under its own mount
// point put the daemon's control socket (and the raw store, on a remount
// where the agent had made the directory) in the agent's reach; a mount
// point under the store put the workspace in the raw store. Both are
// refused before anything is opened, however spelled (a link, "..").
func TestStoreInsideMountRefused(t *testing.T) {
	dir := t.TempDir()
	mp := filepath.Join(dir, "mnt")
	os.Mkdir(mp, 0o755)
	os.Symlink(mp, filepath.Join(dir, "link"))
	for _, c := range []struct{ store, mp string }{
		{filepath.Join(mp, "store"), mp},
		{filepath.Join(mp, "a", "b", "store"), mp},
		{filepath.Join(dir, "link", "store"), mp},
		{filepath.Join(mp, "x", "..", "store"), mp},
		{mp, mp},
		{dir, mp},
		{filepath.Join(dir, "store"), filepath.Join(dir, "store", "mnt")},
	} {
		_, err := Mount(MountOptions{Store: c.store, Mountpoint: c.mp})
		if err == nil || !strings.Contains(err.Error(), "neither may be inside the other") {
			t.Errorf("store %s, mount point %s: %v", c.store, c.mp, err)
		}
		if _, err := os.Stat(filepath.Join(mp, "store")); err == nil {
			t.Fatalf("store %s, mount point %s: a refused mount made the store", c.store, c.mp)
		}
	}
}
