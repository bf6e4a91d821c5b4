package computerfs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/computerfs/computerfs/internal/testmount"
)

// treeFiles reads the tree under dir through the mount: each path's
// content, "dir" for a directory, with its size from stat.
func treeFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			out[rel] = "dir"
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if fi.Size() != int64(len(b)) {
			t.Errorf("%s: stat says %d bytes, read %d", rel, fi.Size(), len(b))
		}
		out[rel] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTree(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for p, w := range want {
		if g, ok := got[p]; !ok {
			t.Errorf("%s: %s is missing", what, p)
		} else if g != w {
			t.Errorf("%s: %s holds %d bytes %.20q, want %d bytes %.20q", what, p, len(g), g, len(w), w)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%s: %s should not be there", what, p)
		}
	}
}

// TestRollbackMounted rolls a mounted workspace back (computerfs rollback
// -w) with files open for reading and writing, one written through
// passthrough, one mapped and one locked, and names and attributes the
// kernel has cached: every handle from before fails with EIO or shows
// the old state, never the snapshot's or a mix; new opens, listings and
// stats through the mount show the snapshot; a passthrough writer from
// before writes a file nothing reads again; the journal shows the
// rollback.
func TestRollbackMounted(t *testing.T) {
	store := filepath.Join(t.TempDir(), "ws")
	m := testmount.Start(t, store)
	bin := testmount.Binary(t)
	cli := workspaceCLI(t, bin, m)
	p := func(name string) string { return filepath.Join(m.Dir, name) }
	put := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(p(name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bigSnap := strings.Repeat("snapshot-", 300_000) // 2.7 MB: a blob, opened for passthrough
	put("big", bigSnap)
	put("small", "small as in the snapshot")
	put("rw", "rw as in the snapshot")
	put("mapped", strings.Repeat("m", 8192))
	put("locked", "locked as in the snapshot")
	put("ghost", "a file removed after the snapshot")
	if err := os.Mkdir(p("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	put("d/keep", "kept in d")
	put("d/moved", "moved away after the snapshot")
	snap := treeFiles(t, m.Dir)
	cli(false, "snapshot", "s1")

	// Changes after the snapshot, each cached by the kernel.
	put("small", "small changed after the snapshot")
	put("new", "made after the snapshot")
	put("d/added", "added after")
	if err := os.Rename(p("d/moved"), p("moved-here")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(p("ghost")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(p("newdir"), 0o755); err != nil {
		t.Fatal(err)
	}
	put("newdir/x", "x")
	if _, err := os.Stat(p("ghost")); !errors.Is(err, os.ErrNotExist) { // a negative entry, cached
		t.Fatalf("stat ghost: %v", err)
	}
	before := treeFiles(t, m.Dir)

	open := func(name string, flag int) *os.File {
		t.Helper()
		f, err := os.OpenFile(p(name), flag, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	rd := open("small", os.O_RDONLY)
	buf := make([]byte, 100)
	if n, err := rd.ReadAt(buf, 0); string(buf[:n]) != before["small"] {
		t.Fatalf("small before: %q, %v", buf[:n], err)
	}
	rw := open("rw", os.O_RDWR)
	time.Sleep(50 * time.Millisecond) // the RELEASE of big's writer (put), for passthrough
	ptw := open("big", os.O_RDWR)
	mf := open("mapped", os.O_RDONLY)
	mem, err := syscall.Mmap(int(mf.Fd()), 0, 8192, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(mem)
	if mem[0] != 'm' {
		t.Fatal("the mapping does not show the file")
	}
	lf := open("locked", os.O_RDWR)
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}

	out := cli(false, "rollback", "s1")
	if !strings.Contains(out, "rolled back to snapshot s1") {
		t.Fatalf("rollback: %s", out)
	}

	// Handles from before: EIO or the old state.
	oldOrEIO := func(what string, got string, err error, old string) {
		t.Helper()
		switch {
		case errors.Is(err, syscall.EIO):
		case err == nil && got == old:
		default:
			t.Errorf("%s after the rollback: %q, %v; want EIO or the old %q", what, got, err, old)
		}
	}
	readOld := func(f *os.File) (string, error) {
		n, err := f.ReadAt(buf, 0)
		if errors.Is(err, io.EOF) {
			err = nil
		}
		return string(buf[:n]), err
	}
	got, err := readOld(rd)
	oldOrEIO("a read of a file open from before", got, err, before["small"])
	if _, err := rw.WriteAt([]byte("WRITTEN"), 0); !errors.Is(err, syscall.EIO) {
		t.Errorf("a write through a handle from before: %v, want EIO", err)
	}
	if err := rw.Sync(); !errors.Is(err, syscall.EIO) {
		t.Errorf("fsync of a handle from before: %v, want EIO", err)
	}
	got, err = readOld(lf)
	oldOrEIO("a read through a locked handle from before", got, err, before["locked"])
	func() {
		old := debug.SetPanicOnFault(true)
		defer debug.SetPanicOnFault(old)
		defer func() {
			if r := recover(); r != nil {
				t.Logf("the mapping faults after the rollback (%v)", r)
			}
		}()
		if c := mem[4096]; c != 'm' {
			t.Errorf("the mapping shows %q after the rollback, neither the old state nor a fault", c)
		}
	}()
	// A passthrough writer writes its old file; the file is not opened
	// again while it stays open.
	if _, err := ptw.WriteAt([]byte("WRITTEN-BY-AN-OLD-HANDLE"), 0); err != nil {
		t.Logf("a passthrough write from before: %v", err)
	}
	if _, err := os.ReadFile(p("big")); err == nil {
		t.Log("big opened while a passthrough handle from before is open (kernel without passthrough?)")
	} else if !errors.Is(err, syscall.EIO) {
		t.Errorf("an open of big while an old passthrough handle is open: %v, want EIO", err)
	}
	ptw.Close()
	lf.Close()
	rd.Close()
	rw.Close()
	time.Sleep(100 * time.Millisecond) // their RELEASEs

	// New opens, listings and stats: the snapshot.
	sameTree(t, "after the rollback", treeFiles(t, m.Dir), snap)
	for _, gone := range []string{"new", "moved-here", "newdir", "d/added"} {
		if _, err := os.Lstat(p(gone)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("stat %s after the rollback: %v, want ENOENT", gone, err)
		}
	}
	nf := open("locked", os.O_RDWR)
	if err := syscall.Flock(int(nf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Errorf("flock of a new open after the old locked handle closed: %v", err)
	}
	if out := cli(false, "log"); !strings.Contains(out, "rollback /...") || !strings.Contains(out, "s1") {
		t.Errorf("log does not show the rollback:\n%s", out)
	}
	// Work goes on, and a second rollback works too.
	put("after", "after the rollback")
	if got, err := os.ReadFile(p("after")); err != nil || string(got) != "after the rollback" {
		t.Fatalf("a file made after the rollback: %q, %v", got, err)
	}
	cli(false, "rollback", "s1")
	sameTree(t, "after a second rollback", treeFiles(t, m.Dir), snap)
	noRace(t, m)
}

// noRace fails if the daemon's log reports a data race or a panic.
func noRace(t *testing.T, m *testmount.Mount) {
	t.Helper()
	if log := m.Log(); strings.Contains(log, "DATA RACE") || strings.Contains(log, "panic:") {
		t.Errorf("the daemon reports a race or a panic:\n%s", log)
	}
}

// TestRollbackMountedUnderLoad rolls a mounted workspace back while
// writers work through the mount and through the shell fast path (run
// under -race: the daemon is built with it): the daemon goes on, and each
// writer's file ends as the snapshot had it or as a write that had not
// returned before the rollback began left it, and as its last write when
// that began after the rollback returned.
func TestRollbackMountedUnderLoad(t *testing.T) {
	store := filepath.Join(t.TempDir(), "ws")
	m := testmount.Start(t, store)
	cli := workspaceCLI(t, testmount.Binary(t), m)
	c, err := Dial(m.Dir)
	if err != nil {
		t.Fatal(err)
	}
	const mountWriters, shellWriters = 3, 2
	name := func(kind string, i int) string { return fmt.Sprintf("%s%d", kind, i) }
	for i := range mountWriters {
		if err := os.WriteFile(filepath.Join(m.Dir, name("m", i)), []byte("0"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i := range shellWriters {
		if err := os.WriteFile(filepath.Join(m.Dir, name("s", i)), []byte("0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(m.Dir, "big"), bytes.Repeat([]byte("b"), 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	cli(false, "snapshot", "s1")

	type wrote struct {
		v                         int
		endedBefore, startedAfter bool
		err                       error
	}
	var started, done atomic.Bool
	logs := map[string]*[]wrote{}
	var wg sync.WaitGroup
	writer := func(file string, write func(v int) error) {
		log := &[]wrote{}
		logs[file] = log
		wg.Add(1)
		go func() {
			defer wg.Done()
			for v, after := 1, 0; after < 5; v++ {
				sa := done.Load()
				err := write(v)
				*log = append(*log, wrote{v, !started.Load(), sa, err})
				if sa {
					after++
				}
			}
		}()
	}
	for i := range mountWriters {
		p := filepath.Join(m.Dir, name("m", i))
		writer(name("m", i), func(v int) error { return os.WriteFile(p, []byte(strconv.Itoa(v)), 0o644) })
	}
	for i := range shellWriters {
		f := name("s", i)
		writer(f, func(v int) error {
			res, err := c.Exec(context.Background(), ExecRequest{Command: fmt.Sprintf("echo %d > /workspace/%s", v, f), Backend: "shell"}, io.Discard, io.Discard)
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("exit %d", res.ExitCode)
			}
			return err
		})
	}
	wg.Add(1)
	go func() { // a passthrough writer of big
		defer wg.Done()
		for !done.Load() {
			f, err := os.OpenFile(filepath.Join(m.Dir, "big"), os.O_RDWR, 0)
			if err != nil {
				continue // EIO while an old handle is open
			}
			f.WriteAt([]byte("written"), 1<<20)
			f.Close()
		}
	}()
	time.Sleep(300 * time.Millisecond)
	started.Store(true)
	cli(false, "rollback", "s1")
	done.Store(true)
	wg.Wait()

	for file, log := range logs {
		b, err := os.ReadFile(filepath.Join(m.Dir, file))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		got := strings.TrimSpace(string(b))
		last := (*log)[len(*log)-1]
		if last.startedAfter && last.err == nil && got != strconv.Itoa(last.v) {
			t.Errorf("%s holds %q, not its last write %d, which began after the rollback", file, got, last.v)
		}
		if got == "0" {
			continue // the snapshot's
		}
		ok := false
		for _, w := range *log {
			ok = ok || strconv.Itoa(w.v) == got && !w.endedBefore
		}
		if !ok {
			t.Errorf("%s holds %q: neither the snapshot's nor a write that had not returned before the rollback", file, got)
		}
	}
	if b, err := os.ReadFile(filepath.Join(m.Dir, "big")); err != nil || len(b) != 3<<20 {
		t.Errorf("big after the rollback: %d bytes, %v", len(b), err)
	}
	if _, err := c.Status(context.Background()); err != nil {
		t.Fatalf("the daemon after the rollback: %v\n%s", err, m.Log())
	}
	noRace(t, m)
}

// TestRollbackMountedKilled kills the daemon (SIGKILL) at random moments
// of a rollback -w: the store mounted again is the snapshot or the state
// before, whole, and works. (kv's TestRollbackCrash stops the shared swap
// at each of its steps.)
func TestRollbackMountedKilled(t *testing.T) {
	store := filepath.Join(t.TempDir(), "ws")
	m := testmount.Start(t, store)
	bin := testmount.Binary(t)
	for i := range 20 {
		if err := os.WriteFile(filepath.Join(m.Dir, fmt.Sprint("f", i)), bytes.Repeat([]byte{'s'}, 1000*i), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(m.Dir, "big"), bytes.Repeat([]byte("s"), 2<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	snap := treeFiles(t, m.Dir)
	cli := workspaceCLI(t, bin, m)
	cli(false, "snapshot", "s1")
	// How long a rollback takes here, CLI included: the kills fall within.
	start := time.Now()
	cli(false, "rollback", "s1")
	took := time.Since(start)
	t.Logf("a rollback -w takes %v", took)
	sawSnap, sawBefore := 1, 0
	for round := range 6 {
		for i := range 20 {
			if err := os.WriteFile(filepath.Join(m.Dir, fmt.Sprint("f", i)), []byte(fmt.Sprint("round ", round)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(m.Dir, fmt.Sprint("new", round)), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		before := treeFiles(t, m.Dir)
		cmd := exec.Command(bin, "rollback", "-w", m.Dir, "s1")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rand.Int64N(int64(took))))
		m.Kill(t)
		cmd.Wait()
		m.Remount(t)
		got := treeFiles(t, m.Dir)
		switch {
		case maps.Equal(got, snap):
			sawSnap++
		case maps.Equal(got, before):
			sawBefore++
		default:
			sameTree(t, fmt.Sprint("round ", round, ": neither the snapshot nor the state before; against the snapshot"), got, snap)
			t.FailNow()
		}
		out, err := exec.Command(bin, "log", "-w", m.Dir).CombinedOutput()
		if err != nil {
			t.Fatalf("log: %v\n%s", err, out)
		}
		if n := strings.Count(string(out), "rollback /..."); n != sawSnap {
			t.Errorf("round %d: the journal shows %d rollbacks, the files %d:\n%s", round, n, sawSnap, out)
		}
	}
	t.Logf("after a kill: the snapshot %d times, the state before %d times", sawSnap, sawBefore)
	m.Unmount(t)
	if out, err := exec.Command(bin, "fsck", "--store", store).CombinedOutput(); err != nil {
		t.Errorf("fsck: %v\n%s", err, out)
	}
}
