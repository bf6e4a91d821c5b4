package fs_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/computerfs/computerfs/internal/proc"
	"github.com/computerfs/computerfs/internal/testmount"
)

// smallTmpfs mounts a tmpfs of size for one test, removed after the
// mounts on it.
func smallTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) }) // after the mounts' own cleanups
	return dir
}

func shErr(script string) (string, error) {
	out, err := exec.Command("sh", "-c", script).CombinedOutput()
	return string(out), err
}

// fillFS writes path until its file system is full, to the last byte.
func fillFS(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for n := len(buf); n > 0; {
		if _, err := f.Write(buf[:n]); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			n /= 2 // then the last pages
		}
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(filepath.Dir(path), &st); err != nil || st.Bavail != 0 {
		t.Fatalf("after filling: %d blocks free, %v", st.Bavail, err)
	}
}

// TestFullDiskKillsNoDaemon: two workspaces share a small file system. A
// dd in one of them writes a big file by passthrough (the kernel writes
// its blob, the daemon does not see it) until the file system is full,
// and another program takes the last byte. Both daemons live and answer:
// stat, read and ls work, new data and new files get ENOSPC (a new dd
// goes through the daemon now), rm works. Once the space is freed writes
// work again, and after a remount every file is there.
func TestFullDiskKillsNoDaemon(t *testing.T) {
	requireRoot(t)
	fsDir := smallTmpfs(t, "400m")
	// Reserve 80 MiB, ballast 48 MiB each.
	args := []string{"--memtable-size", "8", "--debug"}
	var ms []*testmount.Mount
	logs := t.TempDir() // off the full file system
	logOf := func(i int) string { b, _ := os.ReadFile(filepath.Join(logs, strconv.Itoa(i))); return tail(string(b)) }
	for i := 0; i < 2; i++ {
		m := testmount.Start(t, filepath.Join(fsDir, "store"+strconv.Itoa(i)), append(args, "--log-file", filepath.Join(logs, strconv.Itoa(i)))...)
		writeFile(t, filepath.Join(m.Dir, "keep"), []byte("kept "+strconv.Itoa(i)+"\n"))
		writeFile(t, filepath.Join(m.Dir, "old"), []byte("old\n"))
		writeFile(t, filepath.Join(m.Dir, "bigkeep"), bytes.Repeat([]byte{byte('a' + i)}, 3<<20)) // a blob
		ms = append(ms, m)
	}
	// The attack: dd in workspace 0, by passthrough, past the reserve.
	out, err := shErr("dd if=/dev/zero of=" + filepath.Join(ms[0].Dir, "dd") + " bs=1M 2>&1")
	if err == nil || !strings.Contains(out, "No space left on device") {
		t.Fatalf("dd: %v %s", err, out)
	}
	if !strings.Contains(logOf(0), "backing=") {
		t.Fatal("the dd was not passthrough: the test does not test what it should")
	}
	fillFS(t, filepath.Join(fsDir, "filler"))

	for round := 0; round < 3; round++ {
		for i, m := range ms {
			if !proc.Running(m.Pid) {
				t.Fatalf("daemon %d died; its log:\n%s", i, logOf(i))
			}
			if got, err := os.ReadFile(filepath.Join(m.Dir, "keep")); err != nil || string(got) != "kept "+strconv.Itoa(i)+"\n" {
				t.Fatalf("daemon %d: read on a full disk: %q %v", i, got, err)
			}
			if _, err := os.Stat(filepath.Join(m.Dir, "bigkeep")); err != nil {
				t.Fatalf("daemon %d: stat on a full disk: %v", i, err)
			}
			if out, err := shErr("ls -l " + m.Dir); err != nil {
				t.Fatalf("daemon %d: ls on a full disk: %v %s", i, err, out)
			}
			for _, script := range []string{"head -c 5 /dev/zero >> keep", "echo x > new" + strconv.Itoa(round), "mkdir dir", "dd if=/dev/zero of=dd2 bs=1M count=4"} {
				if out, err := shErr("cd " + m.Dir + " && " + script); err == nil || !strings.Contains(out, "No space left on device") {
					t.Fatalf("daemon %d: %s on a full disk: %v %s\n(daemon alive: %v) daemon log:\n%s", i, script, err, out, proc.Running(m.Pid), logOf(i))
				}
			}
			if round == 0 {
				if out, err := shErr("rm " + filepath.Join(m.Dir, "old")); err != nil {
					t.Fatalf("daemon %d: rm on a full disk: %v %s", i, err, out)
				}
			}
		}
	}
	// Someone keeps taking every byte freed, while both workspaces change
	// metadata as fast as they can (each change is a commit, and Pebble
	// needs room for its log): every change works or gets ENOSPC, and
	// both daemons live.
	stop := make(chan struct{})
	fillerDone := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(filepath.Join(fsDir, "filler"), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			fillerDone <- err
			return
		}
		// Closed before the test hears from it: a removed file that is
		// still open keeps its space, and the test frees it next.
		page := make([]byte, 4096)
		for {
			select {
			case <-stop:
				fillerDone <- f.Close()
				return
			default:
			}
			if _, err := f.Write(page); err != nil && !errors.Is(err, syscall.ENOSPC) {
				f.Close()
				fillerDone <- err
				return
			}
		}
	}()
	counts := make([][2]int, len(ms))
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
		for i, m := range ms {
			for j := 0; j < 200; j++ {
				err := os.Chmod(filepath.Join(m.Dir, "keep"), os.FileMode(0o600|j%2*0o44))
				switch {
				case err == nil:
					counts[i][0]++
				case errors.Is(err, syscall.ENOSPC):
					counts[i][1]++
				default:
					close(stop)
					t.Fatalf("daemon %d: chmod on a full disk: %v (daemon alive: %v); its log:\n%s", i, err, proc.Running(m.Pid), logOf(i))
				}
			}
		}
	}
	close(stop)
	if err := <-fillerDone; err != nil {
		t.Fatal(err)
	}
	for i, m := range ms {
		t.Logf("daemon %d on a full disk: %d changes done, %d refused with ENOSPC", i, counts[i][0], counts[i][1])
		if !proc.Running(m.Pid) {
			t.Fatalf("daemon %d died; its log:\n%s", i, logOf(i))
		}
		if _, err := os.Stat(filepath.Join(m.Dir, "keep")); err != nil {
			t.Fatalf("daemon %d: stat after: %v", i, err)
		}
	}

	// Space back: the filler and the dd go.
	if err := os.Remove(filepath.Join(fsDir, "filler")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(ms[0].Dir, "dd")); err != nil {
		t.Fatal(err)
	}
	for i, m := range ms {
		var out string
		var err error
		for start := time.Now(); time.Since(start) < 20*time.Second; time.Sleep(100 * time.Millisecond) {
			if out, err = shErr("cd " + m.Dir + " && echo after > after && dd if=/dev/zero of=dd3 bs=1M count=4 2>&1"); err == nil {
				break
			}
		}
		if err != nil {
			t.Fatalf("daemon %d: writes once space is back: %v %s", i, err, out)
		}
		m.Unmount(t)
		m.Remount(t, args...)
		for name, want := range map[string][]byte{
			"keep": []byte("kept " + strconv.Itoa(i) + "\n"), "after": []byte("after\n"),
			"bigkeep": bytes.Repeat([]byte{byte('a' + i)}, 3<<20), "dd3": make([]byte, 4<<20),
		} {
			if got, err := os.ReadFile(filepath.Join(m.Dir, name)); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("daemon %d: %s after remounting: %d bytes, %v", i, name, len(got), err)
			}
		}
		if _, err := os.Stat(filepath.Join(m.Dir, "old")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("daemon %d: old after remounting: %v", i, err)
		}
	}
}

func tail(s string) string {
	if len(s) > 4000 {
		return "..." + s[len(s)-4000:]
	}
	return s
}

// TestQuotaOnMount: a workspace mounted with --quota shows the quota as
// its size, stops dd, shell redirections, mkdir, ln and setfattr with
// "Disk quota exceeded" there (and dd does not get past it by
// passthrough), lets rm free room, and the spec's quota works the same.
func TestQuotaOnMount(t *testing.T) {
	requireRoot(t)
	fsDir := smallTmpfs(t, "256m")
	m := testmount.Start(t, filepath.Join(fsDir, "store"), "--quota", "32MiB", "--debug")
	var st syscall.Statfs_t
	if err := syscall.Statfs(m.Dir, &st); err != nil || st.Blocks*uint64(st.Bsize) != 32<<20 {
		t.Fatalf("statfs: %d blocks of %d, %v; want 32 MiB", st.Blocks, st.Bsize, err)
	}
	if out, err := shErr("df -B1M " + m.Dir); err != nil || !strings.Contains(out, " 32 ") {
		t.Errorf("df: %v %s", err, out)
	}
	writeFile(t, filepath.Join(m.Dir, "keep"), []byte("kept\n"))
	out, err := shErr("cd " + m.Dir + " && dd if=/dev/zero of=big bs=1M count=100 2>&1")
	if err == nil || !strings.Contains(out, "Disk quota exceeded") {
		t.Fatalf("dd past the quota: %v %s", err, out)
	}
	if fi, err := os.Stat(filepath.Join(m.Dir, "big")); err != nil || fi.Size() > 32<<20 || fi.Size() < 30<<20 {
		t.Fatalf("dd wrote %d bytes of a 32 MiB quota (%v)", fi.Size(), err)
	}
	if strings.Contains(m.Log(), "backing=") {
		t.Fatal("a file of a workspace with a quota was opened for passthrough")
	}
	// Whatever is left, a few more of each is refused.
	for _, script := range []string{
		"for i in $(seq 30); do head -c 100000 /dev/zero > f$i || exit 1; done",
		"for i in $(seq 1000); do mkdir d$i || exit 1; done",
		"for i in $(seq 2000); do ln keep l$i || exit 1; done",
		"for i in $(seq 100); do setfattr -n user.a$i -v $(head -c 1000 /dev/zero | tr '\\0' x) keep || exit 1; done",
		"truncate -s 1G keep",
		"fallocate -l 1G new",
	} {
		if out, err := shErr("cd " + m.Dir + " && " + script); err == nil || !strings.Contains(out, "Disk quota exceeded") {
			t.Errorf("%s at the quota: %v %s", script, err, out)
		}
	}
	if got, err := os.ReadFile(filepath.Join(m.Dir, "keep")); err != nil || string(got) != "kept\n" {
		t.Fatalf("keep at the quota: %q %v", got, err)
	}
	if out, err := shErr("rm " + filepath.Join(m.Dir, "big")); err != nil {
		t.Fatalf("rm at the quota: %v %s", err, out)
	}
	if out, err := shErr("cd " + m.Dir + " && dd if=/dev/zero of=big2 bs=1M count=8 2>&1"); err != nil {
		t.Fatalf("dd after rm: %v %s", err, out)
	}
	m.Unmount(t)

	// The spec's quota, when no --quota is given.
	specFile := filepath.Join(t.TempDir(), "spec.yaml")
	writeFile(t, specFile, []byte("quota: 16MiB\nsources:\n  - path: notes\n    content: hello\n"))
	m2 := testmount.Start(t, filepath.Join(t.TempDir(), "store2"), "--spec", specFile) // 16 MiB at most
	if err := syscall.Statfs(m2.Dir, &st); err != nil || st.Blocks*uint64(st.Bsize) != 16<<20 {
		t.Fatalf("statfs with the spec's quota: %d blocks of %d, %v; want 16 MiB", st.Blocks, st.Bsize, err)
	}
	if out, err := shErr("cd " + m2.Dir + " && dd if=/dev/zero of=big bs=1M count=20 2>&1"); err == nil || !strings.Contains(out, "Disk quota exceeded") {
		t.Fatalf("dd past the spec's quota: %v %s", err, out)
	}
}

// TestXattrLimitsOnMount: setfattr on the mount gets ENOSPC past an
// inode's 128 attributes or 128 KiB, E2BIG for a value over 64 KiB.
func TestXattrLimitsOnMount(t *testing.T) {
	requireRoot(t)
	m := testmount.Start(t, filepath.Join(t.TempDir(), "store"))
	p := filepath.Join(m.Dir, "f")
	writeFile(t, p, []byte("x"))
	for i := 0; i < 128; i++ {
		if err := syscall.Setxattr(p, "user.n"+strconv.Itoa(i), []byte("v"), 0); err != nil {
			t.Fatalf("attribute %d: %v", i, err)
		}
	}
	if out, err := shErr("setfattr -n user.more -v 1 " + p); err == nil || !strings.Contains(out, "No space left on device") {
		t.Fatalf("the 129th attribute: %v %s", err, out)
	}
	if err := syscall.Setxattr(p, "user.n0", []byte("replaced"), 0); err != nil {
		t.Fatalf("replacing at the limit: %v", err)
	}
	for i := 0; i < 128; i++ {
		if err := syscall.Removexattr(p, "user.n"+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	big := make([]byte, 64<<10)
	if err := syscall.Setxattr(p, "user.a", big, 0); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setxattr(p, "user.b", big, 0); err != syscall.ENOSPC {
		t.Fatalf("a second 64 KiB value: %v, want ENOSPC", err)
	}
	if err := syscall.Setxattr(p, "user.c", make([]byte, 64<<10+1), 0); err != syscall.E2BIG {
		t.Fatalf("a value over 64 KiB: %v, want E2BIG", err)
	}
	if out, err := shErr("getfattr -d " + p); err != nil || !strings.Contains(out, "user.a") {
		t.Fatalf("getfattr: %v %s", err, out)
	}
}
