package fs_test

import (
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/computerfs/computerfs/internal/testmount"
	"github.com/computerfs/computerfs/kv"
)

// TestJournalQuotaOnMount: through the mount, as a sandboxed agent would
// (openat a level at a time), a tree 400 levels deep in 255-byte names
// and create/unlink, chmod, rename and setxattr loops at its bottom get
// "Disk quota exceeded" at the quota instead of growing the journal
// without end (it wrote 78 MiB of paths for a 4 MiB quota): the count the
// daemon reports (computerfs status), journal included, stays within the
// quota and its grace all along; on the workspace filled to its quota
// with data, rm -rf of the whole tree works; the daemon keeps answering;
// and the store's count is what Check counts.
func TestJournalQuotaOnMount(t *testing.T) {
	requireRoot(t)
	const quota = 8 << 20
	fsDir := smallTmpfs(t, "256m")
	store := filepath.Join(fsDir, "store")
	// A small reserve and ballast (the defaults take most of the tmpfs,
	// and this test is of the quota, not of a full disk).
	m := testmount.Start(t, store, "--quota", "8MiB", "--memtable-size", "8", "--min-free", "24", "--ballast", "16")
	usage := func(what string) kv.UsageReport {
		t.Helper()
		out, err := exec.Command(testmount.Binary(t), "status", "-w", m.Dir, "--json").Output()
		if err != nil {
			t.Fatalf("%s: computerfs status: %v", what, err)
		}
		var st struct{ Usage kv.UsageReport }
		if err := json.Unmarshal(out, &st); err != nil || st.Usage.Quota != quota {
			t.Fatalf("%s: status %s: %v", what, out, err)
		}
		if st.Usage.Used > quota+st.Usage.Grace+16<<10 {
			t.Fatalf("%s: the count is %+v, past the quota and its grace", what, st.Usage)
		}
		return st.Usage
	}
	long := strings.Repeat("n", 255)
	top, err := unix.Open(m.Dir, unix.O_DIRECTORY|unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(top) }) // before the unmount
	fd := top
	for i := 0; i < 400; i++ {
		if err := unix.Mkdirat(fd, long, 0o755); err != nil {
			t.Fatalf("mkdir at level %d: %v", i, err)
		}
		next, err := unix.Openat(fd, long, unix.O_DIRECTORY|unix.O_RDONLY, 0)
		if err != nil {
			t.Fatalf("open at level %d: %v", i, err)
		}
		if fd != top {
			unix.Close(fd)
		}
		fd = next
	}
	deep := fd
	t.Cleanup(func() { unix.Close(deep) })
	// Each loop runs until EDQUOT, or n times (the daemon trims the
	// journal it needs for no sync near the quota, so a loop may go on
	// within it).
	loop := func(what string, n int, step func(i int) error) {
		t.Helper()
		for i := 0; i < n; i++ {
			if err := step(i); err != nil {
				if !errors.Is(err, syscall.EDQUOT) {
					t.Fatalf("%s %d: %v, want EDQUOT", what, i, err)
				}
				t.Logf("%s: EDQUOT after %d, %+v", what, i, usage(what))
				return
			}
			if i%500 == 0 {
				usage(what)
			}
		}
		t.Logf("%s: %d went in, %+v", what, n, usage(what))
	}
	cur := long
	loops := func() {
		loop("create/unlink", 3000, func(i int) error {
			f, err := unix.Openat(deep, "f", unix.O_CREAT|unix.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			unix.Close(f)
			return unix.Unlinkat(deep, "f", 0)
		})
		loop("chmod", 3000, func(i int) error { return unix.Fchmodat(deep, ".", uint32(0o700+i%2), 0) })
		loop("rename", 1000, func(i int) error { // moves the whole tree
			next := strings.Repeat(string(rune('a'+i%2)), 255)
			err := unix.Renameat(top, cur, top, next)
			if err == nil {
				cur = next
			}
			return err
		})
		loop("setxattr", 3000, func(i int) error { return unix.Fsetxattr(deep, "user.k", []byte(strconv.Itoa(i)), 0) })
	}
	loops()
	// Near its quota the daemon trims the journal that no sync needs
	// (here all of it): there is room again within seconds. Then full of
	// data, and the loops again.
	// A refused change makes the daemon trim at once, so the wait is
	// short; the deadline is for a loaded machine.
	roomFor := func(what, name string, data []byte) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			err := os.WriteFile(name, data, 0o644)
			if err == nil {
				return
			}
			if !errors.Is(err, syscall.EDQUOT) || time.Now().After(deadline) {
				t.Fatalf("%s: %v", what, err)
			}
		}
	}
	big := filepath.Join(m.Dir, "big")
	roomFor("creating a file after the loops", big, nil)
	t.Logf("room again: %+v", usage("trim"))
	if out, err := exec.Command("dd", "if=/dev/zero", "of="+big, "bs=64k", "count=1000", "conv=notrunc", "oflag=append").CombinedOutput(); err == nil ||
		!strings.Contains(string(out), "Disk quota exceeded") {
		t.Fatalf("dd past the quota: %v %s", err, out)
	}
	loops()
	// The daemon answers, and the full workspace removes the tree.
	if out, err := exec.Command("rm", "-rf", filepath.Join(m.Dir, cur)).CombinedOutput(); err != nil {
		t.Fatalf("rm -rf of the tree on a full workspace: %v %s", err, out)
	}
	t.Logf("after rm -rf: %+v", usage("rm -rf"))
	if err := os.Remove(big); err != nil {
		t.Fatal(err)
	}
	// The rm -rf's records may fill the journal again: it is trimmed too.
	roomFor("writing after freeing", filepath.Join(m.Dir, "after"), []byte("room again\n"))
	if got, err := os.ReadFile(filepath.Join(m.Dir, "after")); err != nil || string(got) != "room again\n" {
		t.Fatalf("after freeing: %q %v", got, err)
	}
	if err := syscall.Kill(m.Pid, 0); err != nil {
		t.Fatalf("the daemon: %v", err)
	}
	unix.Close(deep)
	unix.Close(top)
	m.Unmount(t)
	s, err := kv.Open(store, kv.Options{Logger: slog.New(slog.DiscardHandler), Quota: quota})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	u := s.UsageDetail()
	t.Logf("the store's count at the end: %+v", u)
	var longest, records int
	if err := s.ReadJournal(0, func(r kv.Record) bool {
		records++
		longest = max(longest, len(r.Path), len(r.Path2))
		return true
	}); err != nil || longest > kv.MaxRecordPath || records < 2 {
		t.Errorf("the journal: %d records, the longest path %d bytes, %v", records, longest, err)
	}
	if p, err := s.Check(10); err != nil || len(p) > 0 {
		t.Errorf("check: %q %v", p, err)
	}
}
