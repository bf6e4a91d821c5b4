package fstest

import (
	"os"

	"golang.org/x/sys/unix"
)

// flock(2), POSIX record locks (fcntl F_SETLK/F_GETLK, per process, seen
// from a child process) and open file description locks.

var lockChecks = []check{
	{"lock/flock", checkFlock},
	{"lock/posix", checkPosixLocks},
	{"lock/posix_child_holds", checkPosixChildHolds},
	{"lock/posix_close_releases", checkPosixCloseReleases},
	{"lock/ofd", checkOFDLocks},
}

func checkFlock(c *C) {
	p := c.create("f", nil)
	a := c.open(p, unix.O_RDWR, 0)
	b := c.open(p, unix.O_RDWR, 0)
	c.must(xFlock(a, unix.LOCK_EX), "LOCK_EX")
	c.wantErr(xFlock(b, unix.LOCK_EX|unix.LOCK_NB), "LOCK_EX|LOCK_NB from another open file description", unix.EWOULDBLOCK)
	c.wantErr(xFlock(b, unix.LOCK_SH|unix.LOCK_NB), "LOCK_SH|LOCK_NB against LOCK_EX", unix.EWOULDBLOCK)
	// Another process sees the lock as well.
	res := c.as(nil,
		hop{Op: "openkeep", Path: p, Flags: unix.O_RDONLY},
		hop{Op: "flock", Flags: unix.LOCK_SH | unix.LOCK_NB})
	c.wantErr(res[1].err(), "LOCK_SH|LOCK_NB in another process", unix.EWOULDBLOCK)
	// A dup shares the open file description: converting is fine.
	dup, err := unix.Dup(a)
	c.must(err, "dup")
	defer unix.Close(dup)
	c.wantOK(xFlock(dup, unix.LOCK_SH), "LOCK_SH through a dup of the holder")
	c.wantOK(xFlock(b, unix.LOCK_SH|unix.LOCK_NB), "second LOCK_SH")
	c.wantErr(xFlock(a, unix.LOCK_EX|unix.LOCK_NB), "upgrade to LOCK_EX while another holds LOCK_SH", unix.EWOULDBLOCK)
	c.must(xFlock(b, unix.LOCK_UN), "LOCK_UN")
	c.wantOK(xFlock(a, unix.LOCK_EX|unix.LOCK_NB), "upgrade to LOCK_EX once alone")
	c.must(xFlock(a, unix.LOCK_UN), "LOCK_UN")
	c.wantOK(xFlock(b, unix.LOCK_EX|unix.LOCK_NB), "LOCK_EX after the other unlocked")
	// Closing the last fd of the description releases the lock.
	c.close(b)
	d := c.open(p, unix.O_RDONLY, 0)
	c.wantOK(xFlock(d, unix.LOCK_EX|unix.LOCK_NB), "LOCK_EX after the holder closed")
	c.wantErr(xFlock(d, 0x40), "flock with an invalid operation", unix.EINVAL)
}

func wantLock(c *C, what string, got *hlock, typ int16, start, length int64, pid int) {
	c.Helper()
	if got == nil {
		c.Errorf("%s: no lock reported", what)
		return
	}
	if got.Type != typ || got.Start != start || got.Len != length || int(got.Pid) != pid {
		c.Errorf("%s: type %d start %d len %d pid %d; want type %d start %d len %d pid %d",
			what, got.Type, got.Start, got.Len, got.Pid, typ, start, length, pid)
	}
}

func setlk(fd int, typ int16, start, length int64) error {
	return xFcntlLock(fd, unix.F_SETLK, &unix.Flock_t{Type: typ, Whence: 0, Start: start, Len: length})
}

func checkPosixLocks(c *C) {
	p := c.create("f", make([]byte, 1000))
	fd := c.open(p, unix.O_RDWR, 0)
	c.must(setlk(fd, unix.F_WRLCK, 0, 100), "F_SETLK write lock on [0,100)")
	// Our own locks never conflict with us.
	lk := unix.Flock_t{Type: unix.F_WRLCK, Start: 10, Len: 10}
	c.must(xFcntlLock(fd, unix.F_GETLK, &lk), "F_GETLK")
	if lk.Type != unix.F_UNLCK {
		c.Errorf("F_GETLK over our own lock reports type %d, want F_UNLCK", lk.Type)
	}
	me := os.Getpid()
	res := c.as(nil,
		hop{Op: "openkeep", Path: p, Flags: unix.O_RDWR},
		hop{Op: "setlk", Flags: unix.F_WRLCK, Off: 50, Len: 10},
		hop{Op: "setlk", Flags: unix.F_RDLCK, Off: 0, Len: 1},
		hop{Op: "getlk", Flags: unix.F_WRLCK, Off: 0, Len: 10},
		hop{Op: "getlk", Flags: unix.F_RDLCK, Off: 99, Len: 0},
		hop{Op: "setlk", Flags: unix.F_WRLCK, Off: 100, Len: 100},
		hop{Op: "getlk", Flags: unix.F_WRLCK, Off: 200, Len: 10},
	)
	c.wantErr(res[1].err(), "child F_SETLK write lock overlapping the parent's", unix.EAGAIN, unix.EACCES)
	c.wantErr(res[2].err(), "child F_SETLK read lock overlapping the parent's write lock", unix.EAGAIN, unix.EACCES)
	wantLock(c, "child F_GETLK on [0,10)", res[3].Lock, unix.F_WRLCK, 0, 100, me)
	wantLock(c, "child F_GETLK on [99,EOF)", res[4].Lock, unix.F_WRLCK, 0, 100, me)
	c.wantOK(res[5].err(), "child F_SETLK on the free range [100,200)")
	if l := res[6].Lock; l == nil || l.Type != unix.F_UNLCK {
		c.Errorf("child F_GETLK on a free range: %+v, want F_UNLCK", l)
	}
	// Unlocking a hole in the middle splits the lock.
	c.must(setlk(fd, unix.F_UNLCK, 40, 20), "F_UNLCK of [40,60)")
	res = c.as(nil,
		hop{Op: "openkeep", Path: p, Flags: unix.O_RDWR},
		hop{Op: "getlk", Flags: unix.F_WRLCK, Off: 0, Len: 100},
		hop{Op: "setlk", Flags: unix.F_WRLCK, Off: 45, Len: 10},
		hop{Op: "getlk", Flags: unix.F_WRLCK, Off: 55, Len: 45},
	)
	wantLock(c, "child F_GETLK after splitting", res[1].Lock, unix.F_WRLCK, 0, 40, me)
	c.wantOK(res[2].err(), "child F_SETLK in the unlocked hole")
	wantLock(c, "child F_GETLK of the upper half", res[3].Lock, unix.F_WRLCK, 60, 40, me)
	// Read locks are shared, write locks not.
	c.must(setlk(fd, unix.F_RDLCK, 0, 100), "downgrade to a read lock")
	res = c.as(nil,
		hop{Op: "openkeep", Path: p, Flags: unix.O_RDWR},
		hop{Op: "setlk", Flags: unix.F_RDLCK, Off: 0, Len: 50},
		hop{Op: "setlk", Flags: unix.F_WRLCK, Off: 10, Len: 1},
	)
	c.wantOK(res[1].err(), "child read lock over the parent's read lock")
	c.wantErr(res[2].err(), "child write lock over the parent's read lock", unix.EAGAIN, unix.EACCES)
	// A read lock needs the fd open for reading.
	wo := c.open(p, unix.O_WRONLY, 0)
	c.wantErr(setlk(wo, unix.F_RDLCK, 0, 1), "read lock on a write-only fd", unix.EBADF)
}

// checkPosixChildHolds: a lock held by a child is reported with the
// child's pid, blocks the parent, and goes away when the child exits.
func checkPosixChildHolds(c *C) {
	p := c.create("f", make([]byte, 100))
	h := c.start(nil,
		hop{Op: "openkeep", Path: p, Flags: unix.O_RDWR},
		hop{Op: "setlk", Flags: unix.F_WRLCK, Off: 10, Len: 20},
		hop{Op: "wait"},
	)
	c.must(c.next(h).err(), "child open")
	c.must(c.next(h).err(), "child F_SETLK")
	w := c.next(h)
	fd := c.open(p, unix.O_RDWR, 0)
	lk := unix.Flock_t{Type: unix.F_RDLCK, Start: 0, Len: 0}
	c.must(xFcntlLock(fd, unix.F_GETLK, &lk), "F_GETLK")
	wantLock(c, "parent F_GETLK of the child's lock", &hlock{Type: lk.Type, Start: lk.Start, Len: lk.Len, Pid: lk.Pid}, unix.F_WRLCK, 10, 20, w.Pid)
	c.wantErr(setlk(fd, unix.F_WRLCK, 25, 10), "parent F_SETLK over the child's lock", unix.EAGAIN, unix.EACCES)
	c.wantOK(setlk(fd, unix.F_WRLCK, 30, 10), "parent F_SETLK next to the child's lock")
	h.release()
	if err := h.wait(); err != nil {
		c.Fatalf("%v", err)
	}
	c.wantOK(setlk(fd, unix.F_WRLCK, 0, 0), "parent F_SETLK of the whole file after the child exited")
}

// checkPosixCloseReleases: closing any fd of a file drops all of the
// process's POSIX locks on it.
func checkPosixCloseReleases(c *C) {
	p := c.create("f", make([]byte, 10))
	h := c.start(nil,
		hop{Op: "openkeep", Path: p, Flags: unix.O_RDWR, Slot: 0},
		hop{Op: "setlk", Flags: unix.F_WRLCK, Off: 0, Len: 0, Slot: 0},
		hop{Op: "openkeep", Path: p, Flags: unix.O_RDONLY, Slot: 1},
		hop{Op: "wait"},
		hop{Op: "close", Slot: 1},
		hop{Op: "wait"},
	)
	for i := 0; i < 4; i++ {
		c.must(c.next(h).err(), "child op %d", i)
	}
	fd := c.open(p, unix.O_RDWR, 0)
	c.wantErr(setlk(fd, unix.F_WRLCK, 0, 1), "F_SETLK while the child holds the lock", unix.EAGAIN, unix.EACCES)
	h.release()
	c.must(c.next(h).err(), "child closes its second fd")
	c.next(h)
	c.wantOK(setlk(fd, unix.F_WRLCK, 0, 1), "F_SETLK after the child closed another fd of the file")
	h.release()
	if err := h.wait(); err != nil {
		c.Fatalf("%v", err)
	}
}

func checkOFDLocks(c *C) {
	p := c.create("f", make([]byte, 100))
	a := c.open(p, unix.O_RDWR, 0)
	b := c.open(p, unix.O_RDWR, 0)
	ofd := func(fd, cmd int, typ int16, start, length int64) (unix.Flock_t, error) {
		lk := unix.Flock_t{Type: typ, Whence: 0, Start: start, Len: length}
		err := xFcntlLock(fd, cmd, &lk)
		return lk, err
	}
	_, err := ofd(a, unix.F_OFD_SETLK, unix.F_WRLCK, 0, 10)
	c.must(err, "F_OFD_SETLK")
	_, err = ofd(b, unix.F_OFD_SETLK, unix.F_WRLCK, 5, 1)
	c.wantErr(err, "F_OFD_SETLK from another open file description of the same process", unix.EAGAIN)
	lk, err := ofd(b, unix.F_OFD_GETLK, unix.F_WRLCK, 0, 0)
	c.must(err, "F_OFD_GETLK")
	wantLock(c, "F_OFD_GETLK", &hlock{Type: lk.Type, Start: lk.Start, Len: lk.Len, Pid: lk.Pid}, unix.F_WRLCK, 0, 10, -1)
	// A classic POSIX lock of this process conflicts with the OFD lock too.
	c.wantErr(setlk(b, unix.F_WRLCK, 0, 1), "F_SETLK against an OFD lock", unix.EAGAIN, unix.EACCES)
	c.close(a)
	_, err = ofd(b, unix.F_OFD_SETLK, unix.F_WRLCK, 5, 1)
	c.wantOK(err, "F_OFD_SETLK after the holder closed")
}
