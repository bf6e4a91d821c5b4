package kv

import (
	"os"
	"path/filepath"
	"testing"
)

// TestStoreDirPrivate: a store directory made beforehand with a wider
// mode (0755 under /opt, which every sandbox binds from the host) showed
// the raw store (Pebble's tables, blobs: denied files too) to every host
// user and agent; the store makes it 0700 at open.
func TestStoreDirPrivate(t *testing.T) {
	for _, mode := range []os.FileMode{0o755, 0o777, 0o750, 0o705, 0o700} {
		dir := filepath.Join(t.TempDir(), "store")
		if err := os.Mkdir(dir, mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(dir, mode) // past the umask
		st, err := Open(dir, Options{Ballast: -1, MinFree: -1})
		if err != nil {
			t.Fatal(err)
		}
		st.Close()
		info, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got := info.Mode().Perm(); got != mode&0o700 {
			t.Errorf("a store directory of mode %v is %v after open, want %v", mode, got, mode&0o700)
		}
	}
}
