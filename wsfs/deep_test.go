package wsfs_test

import (
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/format/index"

	"github.com/computerfs/computerfs/internal/deeptree"
	"github.com/computerfs/computerfs/internal/safegit"
	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/policy"
	"github.com/computerfs/computerfs/spec"
	"github.com/computerfs/computerfs/wsfs"
)

// TestDeepTreeStore runs the store's, the path rules' and the daemon's
// git's walks on a chain of deeptree.Depth directories, each in a child
// process whose Go stack is limited (see internal/deeptree): each must
// answer (or fail with ENAMETOOLONG or the git bound) without a stack
// that grows with the depth. Before they were loops, the removal, the
// journal's path of a change deep down and the rules' path of a
// directory recursed a level deep on each and ended the child.
func TestDeepTreeStore(t *testing.T) {
	if op, dir, ok := deeptree.Child(); ok {
		deepStoreChild(t, op, dir)
		return
	}
	store := filepath.Join(t.TempDir(), "store")
	deeptree.Build(t, store, 0, 0, func(st *kv.Store, bottom uint64) {
		// a checkout for the daemon's git: its status walks the chain
		git, err := st.Create(kv.RootIno, ".git", kv.NewInode{Mode: syscall.S_IFDIR | 0o755})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{"objects", "refs"} {
			if _, err := st.Create(git.Ino, d, kv.NewInode{Mode: syscall.S_IFDIR | 0o755}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := st.Create(git.Ino, "HEAD", kv.NewInode{Mode: syscall.S_IFREG | 0o644, Data: []byte("ref: refs/heads/main\n")}); err != nil {
			t.Fatal(err)
		}
	})
	deeptree.Run(t, "TestDeepTreeStore", store, []string{"remove", "journal", "rules", "git-status"}, 3*time.Minute)
}

func deepStoreChild(t *testing.T, op, dir string) {
	opts := deeptree.Options()
	opts.NoJournal = op != "journal"
	st, err := kv.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	f := wsfs.New(st, wsfs.Owner{})
	start := time.Now()
	switch op {
	case "remove":
		// rm -rf's way in the daemon (the tools' delete, the fast path's
		// rm of a whole tree): to the bottom and back, any depth
		if err := f.RemoveAll("d"); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Lstat("d"); !errors.Is(err, syscall.ENOENT) {
			t.Fatalf("d after RemoveAll: %v", err)
		}
	case "journal":
		// a change at the bottom, its path's cache empty (a store just
		// opened): the record names the ancestor that fits, cut
		bottom, err := deeptree.Bottom(st)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Create(bottom, "g", kv.NewInode{Mode: syscall.S_IFREG | 0o644}); err != nil {
			t.Fatal(err)
		}
		var last kv.Record
		if err := st.ReadJournal(st.LastSeq()-1, func(r kv.Record) bool { last = r; return true }); err != nil {
			t.Fatal(err)
		}
		if !last.PathCut || !strings.HasPrefix(last.Path, "/d/d/") || len(last.Path) > kv.MaxRecordPath+8 {
			t.Fatalf("the record of the change at the bottom: cut %v, path %.60q... (%d bytes)", last.PathCut, last.Path, len(last.Path))
		}
	case "rules":
		// what the mount asks of the path rules at every open: the
		// path of the file's directory, cold
		c := policy.New(&spec.Policy{Deny: []string{"*.pem"}})
		bottom, err := deeptree.Bottom(st)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.DirPath(st, bottom); !errors.Is(err, syscall.ENAMETOOLONG) {
			t.Fatalf("DirPath of the bottom: %v, want ENAMETOOLONG", err)
		}
		file, _, err := st.LookupIno(bottom, "f")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Ino(st, file, false); !errors.Is(err, syscall.ENAMETOOLONG) {
			t.Fatalf("the rules on the file at the bottom: %v, want ENAMETOOLONG", err)
		}
		// near the top it still answers
		top, _, _ := st.LookupIno(kv.RootIno, "d")
		if p, err := c.DirPath(st, top); err != nil || p != "/d" {
			t.Fatalf("DirPath of the top: %q %v", p, err)
		}
	case "git-status":
		// push-back checks the work tree (and the index) before go-git's
		// status walks it: go-git's walk costs the cube of the depth
		if err := safegit.CheckTree(f, "/"); !errors.Is(err, safegit.ErrTooDeep) {
			t.Fatalf("the check of the deep work tree: %v, want ErrTooDeep", err)
		}
		idx := &index.Index{Version: 2, Entries: []*index.Entry{{Name: strings.Repeat("d/", deeptree.Depth) + "f"}}}
		if err := safegit.CheckIndex(idx); !errors.Is(err, safegit.ErrTooDeep) {
			t.Fatalf("the check of a deep index entry: %v, want ErrTooDeep", err)
		}
	default:
		t.Fatalf("no operation %q", op)
	}
	t.Logf("deeptree: %s answered in %.2fs", op, time.Since(start).Seconds())
}
