package fstest

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The suite run against Linux tmpfs, the reference: every check must pass
// here with an empty skip list.

var long = flag.Bool("long", false, "run the long FSX and Stress variants (also FSTEST_LONG=1)")

func isLong() bool { return *long || os.Getenv("FSTEST_LONG") == "1" }

func TestMain(m *testing.M) {
	MaybeRunHelper() // not needed (init does it), but this is the documented pattern
	os.Exit(m.Run())
}

// mountTmpfs mounts a fresh tmpfs in a temporary directory that other
// users can reach, and unmounts it when the test ends.
func mountTmpfs(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("FSTEST_ALLOW_NONROOT") != "" {
			t.Skip("not root; FSTEST_ALLOW_NONROOT is set")
		}
		t.Fatalf("these tests mount tmpfs and switch users: run them as root (or set FSTEST_ALLOW_NONROOT=1 to skip them)")
	}
	base := t.TempDir()
	// t.TempDir makes its directories 0700; the helper processes running
	// as other users must be able to walk through them.
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mnt := filepath.Join(base, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "mode=0755,size=4g"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(mnt, 0); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
			unix.Unmount(mnt, unix.MNT_DETACH)
		}
	})
	return mnt
}

func TestTmpfs(t *testing.T) {
	Run(t, mountTmpfs(t), Options{})
}

func TestFSXTmpfs(t *testing.T) {
	dir, twin := mountTmpfs(t), mountTmpfs(t)
	nops := 2000
	seeds := []int64{1}
	if isLong() {
		nops = 20000
		seeds = []int64{1, 2, 3, 4}
	}
	for _, seed := range seeds {
		FSX(t, dir, twin, seed, nops)
	}
}

func TestStressTmpfs(t *testing.T) {
	opts := StressOptions{Duration: 2 * time.Second, Seed: 7}
	if isLong() {
		opts.Duration = 20 * time.Second
		opts.Goroutines = 8
		opts.Procs = 4
	}
	Stress(t, mountTmpfs(t), opts)
}

// TestDir runs the suite against the directory in FSTEST_DIR (for example
// an ext4 directory or a FUSE mount), with the checks named in
// FSTEST_SKIP (comma separated) skipped.
func TestDir(t *testing.T) {
	dir := os.Getenv("FSTEST_DIR")
	if dir == "" {
		t.Skip("FSTEST_DIR is not set")
	}
	skip := map[string]string{}
	for _, name := range strings.Split(os.Getenv("FSTEST_SKIP"), ",") {
		if name = strings.TrimSpace(name); name != "" {
			skip[name] = "listed in FSTEST_SKIP"
		}
	}
	Run(t, dir, Options{Skip: skip})
}

// TestDirFSX runs FSX with the directory in FSTEST_DIR against a tmpfs
// twin.
func TestDirFSX(t *testing.T) {
	dir := os.Getenv("FSTEST_DIR")
	if dir == "" {
		t.Skip("FSTEST_DIR is not set")
	}
	nops := 2000
	if isLong() {
		nops = 20000
	}
	FSX(t, dir, mountTmpfs(t), 1, nops)
}

// TestDirStress runs Stress in the directory in FSTEST_DIR.
func TestDirStress(t *testing.T) {
	dir := os.Getenv("FSTEST_DIR")
	if dir == "" {
		t.Skip("FSTEST_DIR is not set")
	}
	Stress(t, dir, StressOptions{Duration: 3 * time.Second, Seed: 7})
}

func TestCheckNames(t *testing.T) {
	seen := map[string]bool{}
	for _, name := range Checks() {
		area, leaf, ok := strings.Cut(name, "/")
		if !ok || area == "" || leaf == "" || strings.Contains(leaf, "/") || strings.ContainsAny(name, " \t") {
			t.Errorf("bad check name %q: want area/leaf", name)
		}
		if seen[name] {
			t.Errorf("duplicate check name %q", name)
		}
		seen[name] = true
	}
	if err := ValidateSkip(map[string]string{"file/truncate": "reason"}); err != nil {
		t.Errorf("valid skip list refused: %v", err)
	}
	if err := ValidateSkip(map[string]string{"no/such_check": "reason"}); err == nil {
		t.Errorf("unknown check name accepted")
	}
	if err := ValidateSkip(map[string]string{"file/truncate": " "}); err == nil {
		t.Errorf("empty reason accepted")
	}
}

// fakeT records a Fatalf instead of stopping the test.
type fakeT struct {
	*testing.T
	failed string
}

type fsxFatal struct{}

func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
	panic(fsxFatal{})
}

// TestFSXDetectsDifference makes the tree under test differ from the twin
// in the middle of a run and expects fsx to report the seed and the op.
func TestFSXDetectsDifference(t *testing.T) {
	dir, twin := mountTmpfs(t), mountTmpfs(t)
	for _, tc := range []struct {
		name   string
		inject func(dir string)
	}{
		{"content", func(dir string) {
			for _, n := range fsxAllNames {
				if fd, err := xOpen(filepath.Join(dir, n), unix.O_WRONLY, 0); err == nil {
					xPwrite(fd, []byte{2}, 0) // the pattern writes odd bytes, holes are 0
					unix.Close(fd)
					return
				}
			}
		}},
		{"extra_name", func(dir string) {
			fd, _ := xOpen(filepath.Join(dir, "extra"), unix.O_CREAT|unix.O_WRONLY, 0o644)
			unix.Close(fd)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeT{T: t}
			func() {
				defer func() {
					if r := recover(); r != nil {
						if _, ok := r.(fsxFatal); !ok {
							panic(r)
						}
					}
				}()
				runFSX(f, dir, twin, FSXOptions{Seed: 42, Ops: 400, afterOp: func(i int, d, _ string) {
					if i == 200 {
						tc.inject(d)
					}
				}})
			}()
			if f.failed == "" {
				t.Fatalf("fsx did not notice the injected difference")
			}
			if !strings.Contains(f.failed, "seed 42") || !strings.Contains(f.failed, "FSX(t, dir, twin, 42,") {
				t.Errorf("report lacks the seed or the replay line: %s", f.failed)
			}
			t.Logf("fsx reported: %.300s", f.failed)
		})
	}
}
