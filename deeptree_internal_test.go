package computerfs

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/computerfs/computerfs/internal/deeptree"
	"github.com/computerfs/computerfs/kv"
)

// TestDeepTreeChown runs the re-ownership that a mount does of a store
// whose files are root's (chownRootFiles) on a chain of deeptree.Depth
// directories, in a child whose Go stack is limited: it recursed a level
// deep on each directory, so a chain of a few million that an agent left
// behind ended the daemon at every mount.
func TestDeepTreeChown(t *testing.T) {
	if _, dir, ok := deeptree.Child(); ok {
		st, err := kv.Open(dir, deeptree.Options())
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		start := time.Now()
		a := Agent{UID: 0x70000005, GID: 0x70000005}
		n, err := chownRootFiles(st, a)
		if err != nil {
			t.Fatal(err)
		}
		if n != deeptree.Depth+2 { // the root, the chain and the file
			t.Errorf("%d inodes changed, want %d", n, deeptree.Depth+2)
		}
		bottom, err := deeptree.Bottom(st)
		if err != nil {
			t.Fatal(err)
		}
		if attr, err := st.GetAttr(bottom); err != nil || attr.Uid != a.UID || attr.Gid != a.GID {
			t.Errorf("the bottom after: %+v %v", attr, err)
		}
		t.Logf("deeptree: chownRootFiles answered in %.2fs", time.Since(start).Seconds())
		return
	}
	store := filepath.Join(t.TempDir(), "store")
	deeptree.Build(t, store, 0, 0, nil)
	deeptree.Run(t, "TestDeepTreeChown", store, []string{"chown"}, 3*time.Minute)
}
