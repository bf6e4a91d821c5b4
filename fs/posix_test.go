package fs_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/computerfs/computerfs/fstest"
	"github.com/computerfs/computerfs/internal/testmount"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) {
	fstest.MaybeRunHelper() // the suite's non-root checks re-execute this binary
	os.Exit(testmount.Run(m))
}

// knownDifferences is where the mount knowingly differs from tmpfs, the
// reference, with the reason. fstest fails on names it does not know.
var knownDifferences = map[string]string{
	"fallocate/extend":    "space is not reserved ahead: data (chunks or a blob) is stored when written, so st_blocks does not grow on fallocate",
	"fallocate/keep_size": "space is not reserved ahead (see fallocate/extend)",
	"fallocate/punch_hole": "st_blocks drops per 64 KiB chunk, not per 4 KiB page: a hole that only partly covers a chunk " +
		"zeroes that chunk's bytes but keeps them stored",
	"xattr/acl_access":  "POSIX ACLs are not supported (ENOTSUP, as on a file system mounted noacl)",
	"xattr/acl_default": "POSIX ACLs are not supported (ENOTSUP, as on a file system mounted noacl)",
}

// TestPOSIX runs the conformance suite against the mount, with the same
// expectations as against tmpfs (fstest's own tests).
func TestPOSIX(t *testing.T) {
	requireRoot(t)
	for _, layout := range dataLayouts {
		t.Run(layout.name, func(t *testing.T) {
			// The suite's users other than root and the agent enter the
			// mount: its root keeps the mode chmod gives it.
			m := testmount.Start(t, filepath.Join(t.TempDir(), "store"), append([]string{"--shared-root"}, layout.args...)...)
			if err := os.Chmod(m.Dir, 0o755); err != nil {
				t.Fatal(err)
			}
			fstest.Run(t, m.Dir, fstest.Options{Skip: knownDifferences})
		})
	}
}

// dataLayouts are the ways the mount keeps file data that the suites run
// against: the default (files up to 1 MiB in Pebble's chunks, bigger ones
// in blob files; files created with O_TRUNC blobs from their first byte,
// back in chunks at the last close if small), every file written in a
// blob, and files created with O_TRUNC in chunks until they grow big.
var dataLayouts = []struct {
	name string
	args []string
}{
	{"default", nil},
	{"blobs", []string{"--blob-threshold", "0"}},
	{"cached-creates", []string{"--passthrough-creates=false"}},
}

// tmpfsTwin mounts a tmpfs that every user can reach, as the reference.
func tmpfsTwin(t *testing.T) string {
	t.Helper()
	dir := testmount.PublicDir(t, "computerfs-twin-")
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "mode=0755,size=4g"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

func isLong() bool { return os.Getenv("FSTEST_LONG") == "1" }

// TestFSX applies a long seeded sequence of random operations to the mount
// and to a tmpfs twin and compares them byte for byte.
func TestFSX(t *testing.T) {
	requireRoot(t)
	for _, layout := range dataLayouts {
		t.Run(layout.name, func(t *testing.T) {
			m := testmount.Start(t, filepath.Join(t.TempDir(), "store"), layout.args...)
			ops := 3000
			if isLong() {
				ops = 100_000
			}
			seed := time.Now().UnixNano()
			if v, err := strconv.ParseInt(os.Getenv("FSX_SEED"), 10, 64); err == nil {
				seed = v // to replay a failure
			}
			t.Logf("seed %d, %d operations", seed, ops)
			fstest.FSX(t, m.Dir, tmpfsTwin(t), seed, ops)
		})
	}
}

// TestStress runs goroutines and processes that create, rename, link and
// delete in the same directories of the mount, then checks the tree, and
// the store with fsck.
func TestStress(t *testing.T) {
	requireRoot(t)
	store := filepath.Join(t.TempDir(), "store")
	m := testmount.Start(t, store)
	opts := fstest.StressOptions{Goroutines: 4, Procs: 3, Duration: 3 * time.Second, Seed: time.Now().UnixNano()}
	if isLong() {
		opts.Duration = 2 * time.Minute
	}
	fstest.Stress(t, m.Dir, opts)
	m.Unmount(t)
	out, err := runFsck(t, store)
	if err != nil {
		t.Fatalf("fsck after the stress run: %v\n%s", err, out)
	}
}
