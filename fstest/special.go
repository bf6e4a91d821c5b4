package fstest

import (
	"golang.org/x/sys/unix"
)

// Special files (mknod) and statfs.

var specialChecks = []check{
	{"mknod/fifo", checkFifo},
	{"mknod/devices", checkDevices},
	{"mknod/errors", checkMknodErrors},
	{"statfs/values", checkStatfs},
}

func checkFifo(c *C) {
	p := c.path("fifo")
	c.must(xMknod(p, unix.S_IFIFO|0o640, 0), "mkfifo")
	st := c.lstat(p)
	c.wantMode("fifo", &st, unix.S_IFIFO|0o640&^processUmask())
	if st.Size != 0 || st.Nlink != 1 {
		c.Errorf("fifo: size %d nlink %d", st.Size, st.Nlink)
	}
	// Without a reader a non-blocking writer gets ENXIO.
	_, err := xOpen(p, unix.O_WRONLY|unix.O_NONBLOCK, 0)
	c.wantErr(err, "non-blocking open for writing of a fifo without readers", unix.ENXIO)
	r := c.open(p, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	w := c.open(p, unix.O_WRONLY|unix.O_NONBLOCK, 0)
	_, err = xWrite(w, []byte("through the fifo"))
	c.must(err, "write to the fifo")
	buf := make([]byte, 64)
	n, err := xRead(r, buf)
	c.must(err, "read from the fifo")
	c.wantBytes("data through the fifo", buf[:n], []byte("through the fifo"))
	if st := c.lstat(p); st.Size != 0 {
		c.Errorf("fifo size after use: %d", st.Size)
	}
	// A fifo can be renamed and linked like a file.
	c.must(xLink(p, c.path("fifo2")), "link a fifo")
	c.wantNlink("linked fifo", p, 2)
}

func checkDevices(c *C) {
	umask := processUmask()
	devs := []struct {
		name        string
		typ         uint32
		major, mnr  uint32
		permissions uint32
	}{
		{"null", unix.S_IFCHR, 1, 3, 0o666},
		{"loop", unix.S_IFBLK, 7, 0, 0o660},
		{"big", unix.S_IFCHR, 4000, 1_000_000, 0o600}, // needs the 32-bit dev_t encoding
		{"zero", unix.S_IFBLK, 0, 0, 0o644},
	}
	for _, d := range devs {
		p := c.path(d.name)
		dev := unix.Mkdev(d.major, d.mnr)
		c.must(xMknod(p, d.typ|d.permissions, int(dev)), "mknod %s %d:%d", d.name, d.major, d.mnr)
		st := c.lstat(p)
		c.wantMode("device "+d.name, &st, d.typ|d.permissions&^umask)
		if st.Rdev != dev {
			c.Errorf("device %s: st_rdev %d:%d, want %d:%d", d.name, unix.Major(st.Rdev), unix.Minor(st.Rdev), d.major, d.mnr)
		}
	}
	// Regular files and sockets through mknod; type 0 means a file.
	c.must(xMknod(c.path("reg"), unix.S_IFREG|0o644, 0), "mknod S_IFREG")
	c.must(xMknod(c.path("reg0"), 0o644, 0), "mknod with type 0")
	c.must(xMknod(c.path("sock"), unix.S_IFSOCK|0o644, 0), "mknod S_IFSOCK")
	for name, typ := range map[string]uint32{"reg": unix.S_IFREG, "reg0": unix.S_IFREG, "sock": unix.S_IFSOCK} {
		if st := c.lstat(c.path(name)); st.Mode&unix.S_IFMT != typ || st.Size != 0 {
			c.Errorf("mknod %s made a %s of size %d", name, typeOf(st.Mode), st.Size)
		}
	}
	// A user may make fifos and sockets but not devices.
	res := c.as(c.user(),
		hop{Op: "mknod", Path: c.path("ucdev"), Mode: unix.S_IFCHR | 0o644, Len: int64(unix.Mkdev(1, 3))},
		hop{Op: "mknod", Path: c.path("ubdev"), Mode: unix.S_IFBLK | 0o644, Len: int64(unix.Mkdev(7, 0))},
		hop{Op: "mknod", Path: c.path("ufifo"), Mode: unix.S_IFIFO | 0o644},
		hop{Op: "mknod", Path: c.path("usock"), Mode: unix.S_IFSOCK | 0o644},
	)
	c.wantErr(res[0].err(), "user mknod of a character device", unix.EPERM)
	c.wantErr(res[1].err(), "user mknod of a block device", unix.EPERM)
	c.wantOK(res[2].err(), "user mknod of a fifo")
	c.wantOK(res[3].err(), "user mknod of a socket")
}

func checkMknodErrors(c *C) {
	f := c.create("f", nil)
	c.wantErr(xMknod(f, unix.S_IFIFO|0o644, 0), "mknod over an existing file", unix.EEXIST)
	c.wantErr(xMknod(c.path("d"), unix.S_IFDIR|0o755, 0), "mknod S_IFDIR", unix.EPERM)
	c.wantErr(xMknod(c.path("bad"), 0o170000|0o644, 0), "mknod with an invalid type", unix.EINVAL)
	c.wantErr(xMknod(c.path("missing", "x"), unix.S_IFIFO|0o644, 0), "mknod in a missing directory", unix.ENOENT)
	c.wantErr(xMknod(c.path("f", "x"), unix.S_IFIFO|0o644, 0), "mknod below a file", unix.ENOTDIR)
	var st unix.Stat_t
	c.wantErr(xLstat(c.path("d"), &st), "lstat after a refused mknod", unix.ENOENT)
}

func checkStatfs(c *C) {
	var st unix.Statfs_t
	c.must(xStatfs(c.Dir, &st), "statfs")
	if st.Bsize <= 0 {
		c.Errorf("f_bsize %d", st.Bsize)
	}
	if st.Frsize <= 0 {
		c.Errorf("f_frsize %d", st.Frsize)
	}
	if st.Blocks == 0 {
		c.Errorf("f_blocks is 0")
	}
	if st.Bfree > st.Blocks || st.Bavail > st.Bfree {
		c.Errorf("f_blocks %d f_bfree %d f_bavail %d: want bavail <= bfree <= blocks", st.Blocks, st.Bfree, st.Bavail)
	}
	if st.Files == 0 {
		c.Errorf("f_files is 0")
	}
	if st.Ffree > st.Files {
		c.Errorf("f_ffree %d > f_files %d", st.Ffree, st.Files)
	}
	if st.Namelen < 255 {
		c.Errorf("f_namelen %d, want at least 255", st.Namelen)
	}
	// fstatfs agrees on the constants, and a subdirectory or a file is on
	// the same filesystem.
	f := c.create("f", nil)
	fd := c.open(f, unix.O_RDONLY, 0)
	var fst unix.Statfs_t
	c.must(retry(func() error { return unix.Fstatfs(fd, &fst) }), "fstatfs")
	if fst.Type != st.Type || fst.Bsize != st.Bsize || fst.Blocks != st.Blocks || fst.Namelen != st.Namelen || fst.Fsid != st.Fsid {
		c.Errorf("fstatfs of a file differs from statfs of its directory: %+v vs %+v", fst, st)
	}
	// Writing data does not make free space grow.
	c.must(writeFull(c.open(f, unix.O_WRONLY, 0), make([]byte, 1<<20), 0), "write 1 MiB")
	var after unix.Statfs_t
	c.must(xStatfs(c.Dir, &after), "statfs")
	if after.Bfree > st.Bfree+st.Blocks/100 {
		c.Errorf("f_bfree grew from %d to %d after writing 1 MiB", st.Bfree, after.Bfree)
	}
	c.wantErr(xStatfs(c.path("missing"), &st), "statfs of a missing path", unix.ENOENT)
}
