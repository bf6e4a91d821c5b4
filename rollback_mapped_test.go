package computerfs

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/computerfs/computerfs/internal/testmount"
)

// What TestRollbackMounted leaves out: files mapped for writing (pages
// dirtied before the rollback and after it, through the daemon and
// through passthrough), mappings whose file changed since the snapshot
// (so the old state and the snapshot's can be told apart), and fcntl
// locks (POSIX and open file description ones, and a waiter blocked on
// one across the rollback). Programs see the old state or errors, never
// the snapshot's pages in an old mapping; once they let go, every file
// is the snapshot's, whole: no write through an old mapping reaches it;
// the kernel's locks stay with their holders until closed; the daemon
// goes on.
func TestRollbackMappedAndLocked(t *testing.T) {
	const page = 4096
	store := filepath.Join(t.TempDir(), "ws")
	m := testmount.Start(t, store, "--no-sandbox")
	cli := workspaceCLI(t, testmount.Binary(t), m)
	p := func(name string) string { return filepath.Join(m.Dir, name) }
	fill := func(c byte, n int) []byte { return bytes.Repeat([]byte{c}, n) }
	sizes := map[string]int{
		"maprd": 4 * page, "mapwr": 4 * page, "mapdirty": 4 * page,
		"bigmap": 3 << 20, // a blob: mapped through passthrough
		"plock":  page, "olock": page,
	}
	put := func(c byte) {
		t.Helper()
		for name, n := range sizes {
			if err := os.WriteFile(p(name), fill(c, n), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	put('S') // the snapshot's
	cli(false, "snapshot", "s1")
	put('O')                           // the old state: after the snapshot, before the rollback
	time.Sleep(100 * time.Millisecond) // the RELEASEs of put's writers, for passthrough

	open := func(name string, flag int) *os.File {
		t.Helper()
		f, err := os.OpenFile(p(name), flag, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	mmap := func(f *os.File, prot int) []byte {
		t.Helper()
		fi, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		b, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), prot, unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(b); i += page { // every page in the page cache
			if b[i] != 'O' {
				t.Fatalf("%s: the mapping shows %q before the rollback", f.Name(), b[i])
			}
		}
		return b
	}
	rdf, wrf, dirtyf := open("maprd", os.O_RDONLY), open("mapwr", os.O_RDWR), open("mapdirty", os.O_RDWR)
	rd := mmap(rdf, unix.PROT_READ)
	wr := mmap(wrf, unix.PROT_READ|unix.PROT_WRITE)
	dirty := mmap(dirtyf, unix.PROT_READ|unix.PROT_WRITE)
	copy(dirty[page:], fill('D', page)) // dirtied, not synced
	bigf := open("bigmap", os.O_RDWR)
	big := mmap(bigf, unix.PROT_READ|unix.PROT_WRITE)

	lock := func(f *os.File, cmd int, typ int16, start, n int64) error {
		return unix.FcntlFlock(f.Fd(), cmd, &unix.Flock_t{Type: typ, Whence: 0, Start: start, Len: n})
	}
	pl := open("plock", os.O_RDWR)
	if err := lock(pl, unix.F_SETLK, unix.F_WRLCK, 0, 100); err != nil {
		t.Fatal(err)
	}
	ol := open("olock", os.O_RDWR)
	if err := lock(ol, unix.F_OFD_SETLK, unix.F_WRLCK, 0, 0); err != nil {
		t.Fatal(err)
	}
	waiter := open("olock", os.O_RDWR)
	got := make(chan error, 1)
	go func() { got <- lock(waiter, unix.F_OFD_SETLKW, unix.F_WRLCK, 0, 0) }()
	time.Sleep(100 * time.Millisecond) // the waiter blocks

	if out := cli(false, "rollback", "s1"); !bytes.Contains([]byte(out), []byte("rolled back to snapshot s1")) {
		t.Fatalf("rollback: %s", out)
	}

	// faults runs f, reporting whether the mapping faulted (SIGBUS).
	faults := func(f func()) (faulted bool) {
		old := debug.SetPanicOnFault(true)
		defer debug.SetPanicOnFault(old)
		defer func() {
			if r := recover(); r != nil {
				faulted = true
			}
		}()
		f()
		return false
	}
	// Old mappings: each page the old state, whole, or a fault.
	for name, b := range map[string][]byte{"maprd": rd, "mapwr": wr, "bigmap": big} {
		shown := map[byte]int{}
		for i := 0; i < len(b); i += page {
			var pg []byte
			if faults(func() { pg = bytes.Clone(b[i : i+page]) }) {
				shown['!']++
				continue
			}
			if !bytes.Equal(pg, fill('O', page)) {
				t.Errorf("%s: page %d of a mapping from before shows %q..., neither the old state nor a fault", name, i/page, pg[:8])
			}
			shown['O']++
		}
		t.Logf("%s after the rollback: %d old pages, %d faults", name, shown['O'], shown['!'])
	}
	// Writes through old mappings, after the rollback.
	if faults(func() { copy(wr[2*page:], fill('W', page)) }) {
		t.Log("a write through a mapping from before faults")
	}
	if faults(func() { copy(big[page:], fill('P', page)) }) {
		t.Log("a write through a passthrough mapping from before faults")
	}
	for name, b := range map[string][]byte{"mapwr": wr, "mapdirty": dirty, "bigmap": big} {
		if err := unix.Msync(b, unix.MS_SYNC); err != nil {
			t.Logf("msync of %s from before: %v", name, err)
		}
		if err := unix.Munmap(b); err != nil {
			t.Fatal(err)
		}
	}
	unix.Munmap(rd)
	for _, f := range []*os.File{rdf, wrf, dirtyf, bigf} {
		if err := f.Close(); err != nil && !errors.Is(err, syscall.EIO) {
			t.Errorf("close of %s from before: %v", f.Name(), err)
		}
	}

	// Locks: the kernel's, kept by their holders from before.
	np := open("plock", os.O_RDWR)
	if err := lock(np, unix.F_OFD_SETLK, unix.F_WRLCK, 0, 100); !errors.Is(err, unix.EAGAIN) {
		t.Errorf("a lock on a new open while the POSIX lock from before is held: %v, want EAGAIN", err)
	}
	select {
	case err := <-got:
		t.Errorf("the waiter got the lock (%v) while its holder from before holds it", err)
	default:
	}
	buf := make([]byte, 8)
	if n, err := ol.ReadAt(buf, 0); err == nil && !bytes.Equal(buf[:n], fill('O', 8)) {
		t.Errorf("a read through the locked handle from before: %q, neither EIO nor the old state", buf[:n])
	}
	ol.Close() // the waiter gets the lock
	select {
	case err := <-got:
		if err != nil {
			t.Errorf("the waiter from before the rollback: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the waiter did not get the lock its holder released")
	}
	waiter.Close()
	pl.Close()
	if err := lock(np, unix.F_OFD_SETLK, unix.F_WRLCK, 0, 100); err != nil {
		t.Errorf("a lock on a new open once the POSIX lock from before is released: %v", err)
	}
	no := open("olock", os.O_RDWR)
	if err := lock(no, unix.F_OFD_SETLK, unix.F_WRLCK, 0, 0); err != nil {
		t.Errorf("a lock on a new open once the holders from before are gone: %v", err)
	}
	np.Close()
	no.Close()

	// Every handle from before closed: every file is the snapshot's,
	// whole. The daemon drops the kernel's pages again a second after
	// the rollback; a page written through an old mapping must not
	// survive that either.
	time.Sleep(100 * time.Millisecond) // the RELEASEs
	check := func(when string) {
		t.Helper()
		for name, n := range sizes {
			b, err := os.ReadFile(p(name))
			// An open fails with EIO until the RELEASE of the
			// passthrough handle from before reaches the daemon.
			for i := 0; errors.Is(err, syscall.EIO) && i < 300; i++ {
				time.Sleep(100 * time.Millisecond)
				b, err = os.ReadFile(p(name))
			}
			if err != nil {
				t.Errorf("%s: read %s: %v", when, name, err)
				continue
			}
			if !bytes.Equal(b, fill('S', n)) {
				other := len(b) - bytes.Count(b, []byte{'S'})
				at := bytes.IndexFunc(b, func(r rune) bool { return r != 'S' })
				t.Errorf("%s: %s holds %d bytes, %d of them not the snapshot's (from byte %d)", when, name, len(b), other, at)
			}
		}
	}
	check("after the rollback")
	time.Sleep(1500 * time.Millisecond)
	check("after the second invalidation")
	// A remount reads the store, not the kernel's cache.
	c, err := Dial(m.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Status(context.Background()); err != nil {
		t.Fatalf("the daemon after the rollback: %v\n%s", err, m.Log())
	}
	noRace(t, m)
	m.Unmount(t)
	m.Remount(t, "--no-sandbox")
	check("after a remount")
}
