package fs_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/computerfs/computerfs/internal/proc"
	"github.com/computerfs/computerfs/internal/testmount"
)

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Fatal("these tests mount FUSE file systems and need root")
	}
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestRemountKeepsEverything(t *testing.T) {
	requireRoot(t)
	store := filepath.Join(t.TempDir(), "store")
	m := testmount.Start(t, store)
	big := bytes.Repeat([]byte("0123456789abcdef"), 300_000) // 4.8 MB, many chunks
	writeFile(t, filepath.Join(m.Dir, "big"), big)
	if err := os.MkdirAll(filepath.Join(m.Dir, "a/b/c"), 0o750); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(m.Dir, "a/b/c/small"), []byte("small"))
	if err := os.Symlink("b/c/small", filepath.Join(m.Dir, "a/link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(m.Dir, "big"), filepath.Join(m.Dir, "a/big2")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setxattr(filepath.Join(m.Dir, "big"), "user.k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	mtime := time.Unix(1234567890, 123456789)
	if err := os.Chtimes(filepath.Join(m.Dir, "a/b/c/small"), mtime, mtime); err != nil {
		t.Fatal(err)
	}
	m.Unmount(t)
	m.Remount(t)

	got, err := os.ReadFile(filepath.Join(m.Dir, "a/big2"))
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("big file after remount: %d bytes, err %v; want %d bytes", len(got), err, len(big))
	}
	if s, err := os.ReadFile(filepath.Join(m.Dir, "a/link")); err != nil || string(s) != "small" {
		t.Fatalf("through symlink: %q, %v", s, err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(m.Dir, "big"), &st); err != nil || st.Nlink != 2 {
		t.Fatalf("nlink of big = %d (err %v), want 2", st.Nlink, err)
	}
	if err := syscall.Stat(filepath.Join(m.Dir, "a/b/c/small"), &st); err != nil || st.Mtim.Nano() != mtime.UnixNano() {
		t.Fatalf("mtime = %d, want %d", st.Mtim.Nano(), mtime.UnixNano())
	}
	if err := syscall.Stat(filepath.Join(m.Dir, "a/b"), &st); err != nil || st.Mode&0o777 != 0o750 {
		t.Fatalf("mode of a/b = %o, want 750", st.Mode&0o777)
	}
	buf := make([]byte, 8)
	if n, err := syscall.Getxattr(filepath.Join(m.Dir, "big"), "user.k", buf); err != nil || string(buf[:n]) != "v" {
		t.Fatalf("xattr = %q, %v", buf[:n], err)
	}
}

func TestSecondMountOfStoreFails(t *testing.T) {
	requireRoot(t)
	store := filepath.Join(t.TempDir(), "store")
	m := testmount.Start(t, store)
	writeFile(t, filepath.Join(m.Dir, "keep"), []byte("keep"))
	other := testmount.PublicDir(t, "computerfs-mnt2-")
	out, err := exec.Command(testmount.Binary(t), "mount", "--store", store, other).CombinedOutput()
	if err == nil {
		exec.Command(testmount.Binary(t), "unmount", other).Run()
		t.Fatal("second mount of the same store succeeded")
	}
	if !strings.Contains(string(out), "in use by another process") {
		t.Fatalf("second mount: want a clear 'in use' error, got %q", out)
	}
	if got, err := os.ReadFile(filepath.Join(m.Dir, "keep")); err != nil || string(got) != "keep" {
		t.Fatalf("first mount damaged: %q, %v", got, err)
	}
}

func TestMountErrors(t *testing.T) {
	requireRoot(t)
	bin := testmount.Binary(t)
	tmp := t.TempDir()
	notStore := filepath.Join(tmp, "notstore")
	os.MkdirAll(notStore, 0o755)
	writeFile(t, filepath.Join(notStore, "photo.jpg"), []byte("x"))
	busy := testmount.Start(t, filepath.Join(tmp, "busystore"))
	mp := testmount.PublicDir(t, "computerfs-mnt-")
	aFile := filepath.Join(tmp, "file")
	writeFile(t, aFile, nil)

	cases := []struct {
		name string
		args []string
		want string
	}{
		{"missing mountpoint", []string{"--store", filepath.Join(tmp, "s1"), filepath.Join(tmp, "nope")}, "no such file or directory"},
		{"mountpoint is a file", []string{"--store", filepath.Join(tmp, "s2"), aFile}, "not a directory"},
		{"busy mountpoint", []string{"--store", filepath.Join(tmp, "s3"), busy.Dir}, "busy"},
		{"not a store", []string{"--store", notStore, mp}, "not a computerfs store"},
		{"store is a file", []string{"--store", aFile, mp}, "not a computerfs store"},
		{"no mountpoint", []string{"--store", filepath.Join(tmp, "s4")}, "MOUNTPOINT"},
		{"bad cache size", []string{"--store", filepath.Join(tmp, "s5"), "--cache-size", "-1", mp}, "--cache-size"},
		{"bad memtable size", []string{"--store", filepath.Join(tmp, "s6"), "--memtable-size", "2", mp}, "--memtable-size"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, bg := range []bool{false, true} {
				args := append([]string{"mount"}, c.args...)
				if bg {
					args = append(args, "--background")
				}
				out, err := exec.Command(bin, args...).CombinedOutput()
				if err == nil {
					exec.Command(bin, "unmount", mp).Run()
					t.Fatalf("%v succeeded", args)
				}
				if !strings.Contains(string(out), c.want) {
					t.Fatalf("%v: want an error mentioning %q, got %q", args, c.want, out)
				}
			}
		})
	}
	if entries, _ := os.ReadDir(notStore); len(entries) != 1 {
		t.Errorf("the directory that is not a store was changed: %d entries", len(entries))
	}
}

func TestUnmountPaths(t *testing.T) {
	requireRoot(t)
	bin := testmount.Binary(t)
	for _, how := range []string{"computerfs unmount", "umount", "SIGTERM", "SIGINT"} {
		t.Run(how, func(t *testing.T) {
			store := filepath.Join(t.TempDir(), "store")
			m := testmount.Start(t, store)
			writeFile(t, filepath.Join(m.Dir, "f"), []byte(how))
			switch how {
			case "computerfs unmount":
				m.Unmount(t)
			case "umount":
				if out, err := exec.Command("umount", m.Dir).CombinedOutput(); err != nil {
					t.Fatalf("umount: %v %s", err, out)
				}
			case "SIGTERM", "SIGINT":
				sig := map[string]syscall.Signal{"SIGTERM": syscall.SIGTERM, "SIGINT": syscall.SIGINT}[how]
				if err := syscall.Kill(m.Pid, sig); err != nil {
					t.Fatal(err)
				}
			}
			waitGone(t, m.Pid)
			if mounted(t, m.Dir) {
				t.Fatalf("%s left the mount in place", how)
			}
			if !strings.Contains(m.Log(), "store closed") {
				t.Fatalf("daemon did not close its store cleanly; log:\n%s", m.Log())
			}
			m.Remount(t)
			if got, err := os.ReadFile(filepath.Join(m.Dir, "f")); err != nil || string(got) != how {
				t.Fatalf("after %s and remount: %q, %v", how, got, err)
			}
			_ = bin
		})
	}
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if !proc.Running(pid) {
			return
		}
	}
	t.Fatalf("daemon %d still running", pid)
}

func mounted(t *testing.T, dir string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

// TestCrashKeepsClosedAndSyncedFiles kills the daemon with SIGKILL at
// random moments while files are being written, then checks the promise of
// the README: the store opens, and every file whose close(2) or fsync(2)
// returned before the crash is there with its full contents.
// openModes are the ways TestCrashKeepsClosedAndSyncedFiles opens the files
// it writes.
var openModes = []int{
	os.O_RDWR | os.O_CREATE | os.O_TRUNC,    // os.Create: FLUSH at close
	os.O_WRONLY | os.O_CREATE | os.O_EXCL,   // tar, touch: no FLUSH
	os.O_WRONLY | os.O_CREATE | os.O_APPEND, // shell >>: no FLUSH
	os.O_WRONLY | os.O_CREATE | os.O_TRUNC,  // dd, shell >: FLUSH
}

func TestCrashKeepsClosedAndSyncedFiles(t *testing.T) {
	requireRoot(t)
	rounds := 4
	if testing.Short() {
		rounds = 2
	}
	store := filepath.Join(t.TempDir(), "store")
	m := testmount.Start(t, store)
	content := func(round, i int) []byte {
		r := rand.New(rand.NewSource(int64(round*100000 + i)))
		n := r.Intn(300 << 10)
		if i%5 == 0 { // past the blob threshold, crossing it halfway
			n = 1<<20 + r.Intn(2<<20)
		}
		b := make([]byte, n)
		r.Read(b)
		return b
	}
	type done struct{ round, i int }
	var survivors []done
	for round := 0; round < rounds; round++ {
		dir := filepath.Join(m.Dir, fmt.Sprintf("round%d", round))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var closed []done
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				// Read-write handles flush at close (FLUSH); write-only
				// ones that do not truncate flush each write instead
				// (FOPEN_NOFLUSH): cover both, and appends.
				flags := openModes[i%len(openModes)]
				f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("f%d", i)), flags, 0o644)
				if err != nil {
					return
				}
				data := content(round, i)
				half := len(data) / 2
				if i%5 == 0 {
					// A blob (past 1 MiB) before the second half, which
					// a second open appends: the kernel writes it into
					// the blob itself (passthrough).
					half = min(len(data), 1<<20+4096)
				}
				if _, err := f.Write(data[:half]); err != nil {
					f.Close()
					return
				}
				if i%5 == 0 {
					if f.Close() != nil {
						return
					}
					if f, err = os.OpenFile(f.Name(), os.O_WRONLY|os.O_APPEND, 0); err != nil {
						return
					}
				}
				if _, err := f.Write(data[half:]); err != nil {
					f.Close()
					return
				}
				if i%7 == 0 && f.Sync() != nil {
					f.Close()
					return
				}
				if f.Close() != nil {
					return
				}
				mu.Lock()
				closed = append(closed, done{round, i})
				mu.Unlock()
			}
		}()
		time.Sleep(time.Duration(50+rand.Intn(400)) * time.Millisecond)
		mu.Lock()
		survivors = append(survivors, closed...) // closed before the kill
		mu.Unlock()
		m.Kill(t)
		close(stop)
		wg.Wait()
		if out, err := exec.Command(testmount.Binary(t), "fsck", "--store", store).CombinedOutput(); err != nil {
			t.Fatalf("round %d: fsck after the crash: %v\n%s", round, err, out)
		}
		m.Remount(t)
		for _, d := range survivors {
			p := filepath.Join(m.Dir, fmt.Sprintf("round%d/f%d", d.round, d.i))
			got, err := os.ReadFile(p)
			if err != nil {
				t.Fatalf("round %d: file closed before the crash is gone: %v", round, err)
			}
			if want := content(d.round, d.i); !bytes.Equal(got, want) {
				t.Fatalf("round %d: %s has %d bytes, want %d (or different bytes)", round, p, len(got), len(want))
			}
		}
		t.Logf("round %d: %d closed files survived", round, len(survivors))
	}
	if len(survivors) == 0 {
		t.Fatal("no file was closed before any crash: the test checked nothing")
	}
}

// hugeDirEntries is the size of the directory in TestHugeDirectory:
// COMPUTERFS_HUGE_DIR entries (make stress: 1,000,000), 50,000 by default.
func hugeDirEntries(t *testing.T) int {
	n := 50_000
	if v := os.Getenv("COMPUTERFS_HUGE_DIR"); v != "" {
		if _, err := fmt.Sscan(v, &n); err != nil {
			t.Fatalf("COMPUTERFS_HUGE_DIR=%q: %v", v, err)
		}
	}
	return n
}

func rssKB(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb int
			fmt.Sscan(v, &kb)
			return kb
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

func sh(t *testing.T, dir, script string) string {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestHugeDirectory creates a directory with many entries, lists it after a
// remount (the daemon's memory must stay flat: listing streams from the
// store) and removes it.
func TestHugeDirectory(t *testing.T) {
	requireRoot(t)
	n := hugeDirEntries(t)
	store := filepath.Join(t.TempDir(), "store")
	m := testmount.StartPlain(t, store) // memory is measured: no race detector
	start := time.Now()
	sh(t, m.Dir, fmt.Sprintf("mkdir d && cd d && seq -f 'entry-with-a-longish-name-%%09g' %d | xargs touch", n))
	created := time.Since(start)
	m.Unmount(t)
	m.Remount(t)

	before := rssKB(t, m.Pid)
	start = time.Now()
	if got := sh(t, m.Dir, "ls -f d | wc -l"); got != fmt.Sprint(n+2) {
		t.Fatalf("ls -f listed %s entries, want %d", got, n+2)
	}
	listed := time.Since(start)
	growth := rssKB(t, m.Pid) - before
	t.Logf("%d entries: created in %v, listed in %v; daemon RSS %d KiB, +%d KiB while listing", n, created, listed, before, growth)
	if growth > 32<<10 {
		t.Errorf("listing grew the daemon by %d KiB: not streamed", growth)
	}
	if got := sh(t, m.Dir, "find d -name 'entry-*7' | wc -l"); got != fmt.Sprint(n/10) {
		t.Fatalf("find matched %s entries, want %d", got, n/10)
	}
	start = time.Now()
	sh(t, m.Dir, "rm -rf d")
	t.Logf("removed in %v", time.Since(start))
	if _, err := os.Stat(filepath.Join(m.Dir, "d")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("after rm -rf: %v", err)
	}
	m.Unmount(t)
	if out, err := exec.Command(testmount.Binary(t), "fsck", "--store", store).CombinedOutput(); err != nil {
		t.Fatalf("fsck: %v\n%s", err, out)
	}
}

func runFsck(t *testing.T, store string) ([]byte, error) {
	t.Helper()
	return exec.Command(testmount.Binary(t), "fsck", "--store", store).CombinedOutput()
}

// TestIdleMemory: a mounted workspace that holds data but is idle stays
// under 64 MiB; the data lives on disk, not in memory. What is measured is
// the workspace's processes together, the daemon and the sandbox it keeps
// waiting (--sandbox-warm), each by its proportional set size: that
// sandbox's pid 1 is the daemon's own binary, and the code pages they
// share would otherwise be counted twice.
func TestIdleMemory(t *testing.T) {
	requireRoot(t)
	store := filepath.Join(t.TempDir(), "store")
	m := testmount.StartPlain(t, store) // memory is measured: no race detector
	const limitKB = 64 << 10
	if kb := workspaceKB(t, m.Pid); kb > limitKB {
		t.Errorf("new empty workspace: PSS %d KiB, want under %d KiB", kb, limitKB)
	}
	// 256 MiB of data and 2,000 files, then a remount: idle again.
	sh(t, m.Dir, "dd if=/dev/urandom of=big bs=1M count=256 status=none && mkdir d && cd d && seq 2000 | xargs touch")
	m.Unmount(t)
	m.Remount(t)
	sh(t, m.Dir, "ls -lR >/dev/null && md5sum big >/dev/null")
	time.Sleep(3 * time.Second) // idle: the daemon returns freed memory every 2 s
	kb := workspaceKB(t, m.Pid)
	t.Logf("after reading a 256 MiB workspace: PSS of the daemon and its waiting sandbox %d KiB (daemon RSS %d KiB)", kb, rssKB(t, m.Pid))
	if kb > limitKB {
		t.Errorf("idle workspace holding 256 MiB: PSS %d KiB, want under %d KiB", kb, limitKB)
	}
}

// workspaceKB is the proportional set size of pid and its descendants.
func workspaceKB(t *testing.T, pid int) int {
	t.Helper()
	total := 0
	for _, p := range append([]int{pid}, descendants(pid)...) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", p))
		if err != nil {
			continue // ended meanwhile
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Pss:"); ok {
				var kb int
				fmt.Sscan(v, &kb)
				total += kb
			}
		}
	}
	return total
}

// descendants lists the processes below pid (children are listed per
// thread that started them).
func descendants(pid int) []int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, task := range tasks {
		b, err := os.ReadFile(task)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			var c int
			fmt.Sscan(f, &c)
			out = append(out, c)
			out = append(out, descendants(c)...)
		}
	}
	return out
}

// TestMountOverDeadMount: after the daemon was killed and nobody unmounted,
// mounting the store again on the same mount point just works.
func TestMountOverDeadMount(t *testing.T) {
	requireRoot(t)
	store := filepath.Join(t.TempDir(), "store")
	m := testmount.Start(t, store)
	writeFile(t, filepath.Join(m.Dir, "f"), []byte("kept"))
	if err := syscall.Kill(m.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, m.Pid)
	// Which error the dead mount gives depends on timing (ENOTCONN,
	// ECONNABORTED, EIO were all seen); the remount must not care.
	if _, err := os.Stat(m.Dir); err == nil {
		t.Fatal("stat of the dead mount succeeded")
	} else {
		t.Logf("stat of the dead mount: %v", err)
	}
	m.Remount(t)
	if got, err := os.ReadFile(filepath.Join(m.Dir, "f")); err != nil || string(got) != "kept" {
		t.Fatalf("after remounting over the dead mount: %q, %v", got, err)
	}
}

// A big file is read and written by the kernel directly (passthrough,
// from its creation with O_TRUNC, and when opened again): the daemon sees
// no READ or WRITE for it. What such a
// writer wrote more than 100 ms before the daemon is killed is there after
// the restart although the file was never closed (the store takes the
// size from the blob), and shared mappings and appends reach the blob.
func TestPassthroughWritesSurviveKill(t *testing.T) {
	requireRoot(t)
	store := filepath.Join(t.TempDir(), "store")
	m := testmount.Start(t, store, "--debug")
	p := filepath.Join(m.Dir, "big")
	first := bytes.Repeat([]byte("first-"), 400_000) // 2.4 MB: a blob
	if err := os.WriteFile(p, first, 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the RELEASE of the first handle
	f, err := os.OpenFile(p, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	more := bytes.Repeat([]byte("more-"), 200_000)
	if _, err := f.Write(more); err != nil {
		t.Fatal(err)
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, 4096, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	copy(mem, "mapped")
	syscall.Munmap(mem)
	want := append(append([]byte("mapped"), first[6:]...), more...)
	if fi, err := os.Stat(p); err != nil || fi.Size() != int64(len(want)) {
		t.Fatalf("stat while open: %v, %v; want size %d", fi.Size(), err, len(want))
	}
	got, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read while open: %d bytes, %v; first difference at %d", len(got), err, firstDiff(got, want))
	}
	log := m.Log()
	if !strings.Contains(log, "PASSTHROUGH") {
		t.Fatalf("no open was passthrough; daemon log:\n%s", log)
	}
	for _, op := range []string{": WRITE n", ": READ n"} {
		if strings.Contains(log, op) {
			t.Fatalf("the daemon saw a request %q; daemon log:\n%s", op, log)
		}
	}
	// Reading it again recorded the size so far (the reader's close);
	// what follows only the blob has until the writer closes.
	tail := bytes.Repeat([]byte("tail-"), 1000)
	if _, err := f.Write(tail); err != nil {
		t.Fatal(err)
	}
	want = append(want, tail...)
	time.Sleep(300 * time.Millisecond)
	m.Kill(t)
	f.Close()
	m.Remount(t)
	got, err = os.ReadFile(p)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("after the kill: %d bytes (want %d), %v; first difference at %d", len(got), len(want), err, firstDiff(got, want))
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// A file created with O_TRUNC is a blob from its first byte: its first writer is passthrough too (the daemon sees no
// WRITE), what it wrote survives a SIGKILL before close, and a file that
// stays small is back in chunks (no blob file) once closed.
func TestPassthroughCreates(t *testing.T) {
	requireRoot(t)
	store := filepath.Join(t.TempDir(), "store")
	m := testmount.Start(t, store, "--debug")
	big := bytes.Repeat([]byte("0123456789abcdef"), 200_000) // 3.2 MB
	if err := os.WriteFile(filepath.Join(m.Dir, "big"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	small := []byte("small\n")
	if err := os.WriteFile(filepath.Join(m.Dir, "small"), small, 0o644); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(m.Log(), ": WRITE n") {
		t.Fatalf("the daemon saw WRITEs of files created with O_TRUNC:\n%s", m.Log())
	}
	for name, want := range map[string][]byte{"big": big, "small": small} {
		if got, err := os.ReadFile(filepath.Join(m.Dir, name)); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: %d bytes, %v; want %d", name, len(got), err, len(want))
		}
	}
	blobs := func() int {
		entries, err := os.ReadDir(filepath.Join(store, "blobs"))
		if err != nil {
			t.Fatal(err)
		}
		return len(entries)
	}
	deadline := time.Now().Add(5 * time.Second)
	for blobs() != 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // the RELEASEs come after close
	}
	if n := blobs(); n != 1 {
		t.Fatalf("%d blob files, want 1 (the small file back in chunks)", n)
	}

	f, err := os.OpenFile(filepath.Join(m.Dir, "unclosed"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(big); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	m.Kill(t)
	f.Close()
	m.Remount(t)
	if got, err := os.ReadFile(filepath.Join(m.Dir, "unclosed")); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("unclosed after the kill: %d bytes, %v; want %d", len(got), err, len(big))
	}
}

// TestNoSpaceOnMount: on a nearly full file system, programs on the mount
// get ENOSPC for new files and directories while rm works and the daemon
// keeps serving; when the file system is full, mount fails at once with a
// clear error; once space is back, everything written before is there.
func TestNoSpaceOnMount(t *testing.T) {
	requireRoot(t)
	fsDir := t.TempDir()
	if err := syscall.Mount("tmpfs", fsDir, "tmpfs", 0, "size=256m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Unmount(fsDir, syscall.MNT_DETACH) }) // after the mount's own cleanup
	store := filepath.Join(fsDir, "store")
	m := testmount.Start(t, store) // the default reserve: 192 MiB
	writeFile(t, filepath.Join(m.Dir, "keep"), []byte("kept\n"))
	writeFile(t, filepath.Join(m.Dir, "old"), []byte("old\n"))
	ballast := filepath.Join(fsDir, "ballast")
	writeFile(t, ballast, make([]byte, 150<<20)) // leaves about 100 MiB
	sh := func(script string) (string, error) {
		out, err := exec.Command("sh", "-c", script).CombinedOutput()
		return string(out), err
	}
	for _, script := range []string{"echo x > new", "mkdir dir", "ln keep keep2", "setfattr -n user.a -v 1 keep"} {
		if out, err := sh("cd " + m.Dir + " && " + script); err == nil || !strings.Contains(out, "No space left on device") {
			t.Errorf("%s below the reserve: %v %s", script, err, out)
		}
	}
	if out, err := sh("rm " + filepath.Join(m.Dir, "old")); err != nil {
		t.Fatalf("rm below the reserve: %v %s", err, out)
	}
	m.Unmount(t)

	// Full: mount says why and exits.
	f, err := os.OpenFile(ballast, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	for err == nil {
		_, err = f.Write(make([]byte, 1<<20))
	}
	f.Close()
	start := time.Now()
	out, err := exec.Command(testmount.Binary(t), "mount", "--background", "--store", store, m.Dir).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no space left on device") || time.Since(start) > 20*time.Second {
		t.Fatalf("mount on a full file system: %v after %v: %s", err, time.Since(start), out)
	}
	os.Remove(ballast)
	m.Remount(t)
	if got, err := os.ReadFile(filepath.Join(m.Dir, "keep")); err != nil || string(got) != "kept\n" {
		t.Fatalf("keep after remounting: %q %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(m.Dir, "old")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("old after remounting: %v", err)
	}
	writeFile(t, filepath.Join(m.Dir, "new"), []byte("x"))
}
