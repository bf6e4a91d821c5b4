package computerfs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/computerfs/computerfs/internal/s3test"
	"github.com/computerfs/computerfs/internal/testmount"
)

// TestRollbackSyncBack: a workspace that writes back to S3 is rolled back
// (unmounted) to a snapshot taken after a sync; mounted again it holds the
// snapshot's files, `computerfs log` shows the rollback, and a sync makes
// the bucket the snapshot: the file changed since uploaded as it was, the
// file removed since put back, the file made since deleted. The same for
// a rollback of the mounted workspace (-w), with no remount: the mount
// shows the snapshot at once. A rollback --store of a mounted store is
// refused, leaving it as it is.
func TestRollbackSyncBack(t *testing.T) {
	t.Run("unmounted", func(t *testing.T) { testRollbackSyncBack(t, false) })
	t.Run("mounted", func(t *testing.T) { testRollbackSyncBack(t, true) })
}

func testRollbackSyncBack(t *testing.T, mounted bool) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	bucket := srv.NewBucket(t)
	for k, v := range map[string]string{"a": "v1 a", "b": "v1 b"} {
		srv.Put(t, bucket, "p/"+k, []byte(v))
	}
	store := filepath.Join(t.TempDir(), "ws")
	spec := syncSpec(t, srv, bucket, "1h")
	m := testmount.Start(t, store, "--spec", spec)
	bin := testmount.Binary(t)
	data := filepath.Join(m.Dir, "data")
	cli := workspaceCLI(t, bin, m)
	run := func(wantErr bool, args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, args...).CombinedOutput()
		if (err != nil) != wantErr {
			t.Fatalf("computerfs %v: %v\n%s\ndaemon log:\n%s", args, err, out, m.Log())
		}
		return string(out)
	}

	if err := os.WriteFile(filepath.Join(data, "a"), []byte("snap a"), 0o644); err != nil {
		t.Fatal(err)
	}
	cli(false, "sync")
	// Read before the snapshot, so that it holds b's data: a file not
	// fetched yet is in a snapshot as a reference to its source's version,
	// which the sync below deletes.
	snap := dirFiles(t, data)
	cli(false, "snapshot", "s1")
	owner := func(p string) [2]uint32 {
		t.Helper()
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		return [2]uint32{st.Uid, st.Gid}
	}
	rootOwner, aOwner := owner(m.Dir), owner(filepath.Join(data, "a"))
	t.Logf("owners: root %v, a %v", rootOwner, aOwner)

	if err := os.WriteFile(filepath.Join(data, "a"), []byte("later a"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "c"), []byte("new c"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(data, "b")); err != nil {
		t.Fatal(err)
	}
	cli(false, "sync")
	sameFiles(t, bucketFiles(t, srv, bucket, "p/"), dirFiles(t, data))

	// Mounted: --store is refused, and nothing changes.
	if out := run(true, "rollback", "--store", store, "s1"); !strings.Contains(out, "use -w "+m.Dir) {
		t.Errorf("rollback --store of a mounted store:\n%s", out)
	}
	if b, err := os.ReadFile(filepath.Join(data, "a")); err != nil || string(b) != "later a" {
		t.Fatalf("a refused rollback changed a: %q, %v", b, err)
	}
	if out := cli(true, "rollback", "nosuch"); !strings.Contains(out, "nosuch") || !strings.Contains(out, "no such snapshot") {
		t.Errorf("rollback to a snapshot that does not exist:\n%s", out)
	}

	if mounted {
		if out := cli(false, "rollback", "s1"); !strings.Contains(out, "rolled back to snapshot s1") {
			t.Fatalf("rollback -w:\n%s", out)
		}
	} else {
		m.Unmount(t)
		if out := run(false, "rollback", "--store", store, "s1"); !strings.Contains(out, "rolled back to snapshot s1") {
			t.Fatalf("rollback:\n%s", out)
		}
		m.Remount(t, "--spec", spec)
	}
	got := dirFiles(t, data)
	if len(got) != len(snap) || got["a"] != snap["a"] || got["b"] != snap["b"] {
		t.Fatalf("after the rollback the workspace holds %q, want the snapshot's %q", got, snap)
	}
	// The agent identity is the store's: the root and the files keep
	// their owners.
	if got := owner(m.Dir); got != rootOwner {
		t.Errorf("the root is owned by %v after the rollback, %v before", got, rootOwner)
	}
	if got := owner(filepath.Join(data, "a")); got != aOwner {
		t.Errorf("a is owned by %v after the rollback, %v before", got, aOwner)
	}
	if out := cli(false, "log"); !strings.Contains(out, "rollback /...") || !strings.Contains(out, "s1") {
		t.Errorf("log does not show the rollback:\n%s", out)
	}
	out := cli(false, "sync")
	if !strings.Contains(out, "/data (s3): 2 uploaded, 1 deleted, 0 conflicts, 0 errors") {
		t.Fatalf("sync after the rollback:\n%s", out)
	}
	sameFiles(t, bucketFiles(t, srv, bucket, "p/"), dirFiles(t, data))
	// Work goes on: a new file gets a new inode and is synced.
	if err := os.WriteFile(filepath.Join(data, "d"), []byte("after d"), 0o644); err != nil {
		t.Fatal(err)
	}
	cli(false, "sync")
	sameFiles(t, bucketFiles(t, srv, bucket, "p/"), dirFiles(t, data))
}

// TestRollbackOpenWriter: a snapshot taken while a big file (a blob,
// written through passthrough where the kernel has it) is open for
// writing; the writer goes on, grows the file and closes it. Rolled back,
// the file is what it was at the snapshot, no byte of the later writes.
func TestRollbackOpenWriter(t *testing.T) {
	store := filepath.Join(t.TempDir(), "ws")
	m := testmount.Start(t, store, "--no-sandbox")
	bin := testmount.Binary(t)
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("computerfs %v: %v\n%s\ndaemon log:\n%s", args, err, out, m.Log())
		}
		return string(out)
	}
	p := filepath.Join(m.Dir, "big")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	before := strings.Repeat("a", 3<<20)
	if _, err := f.WriteString(before); err != nil {
		t.Fatal(err)
	}
	run("snapshot", "-w", m.Dir, "s1")
	if _, err := f.WriteAt([]byte(strings.Repeat("b", 1<<20)), 1<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte(strings.Repeat("c", 1<<20)), 3<<20); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	m.Unmount(t)
	run("rollback", "--store", store, "s1")
	m.Remount(t, "--no-sandbox")
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != before {
		t.Fatalf("after the rollback big has %d bytes (%d of them 'a'), want the %d 'a' written before the snapshot",
			len(got), strings.Count(string(got), "a"), len(before))
	}
	// And it can be written again.
	if err := os.WriteFile(p, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "new" {
		t.Fatalf("after a write: %q, %v", b, err)
	}
}
