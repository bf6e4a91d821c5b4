package fstest

import (
	"golang.org/x/sys/unix"
)

// Memory mapped I/O.

var mmapChecks = []check{
	{"mmap/shared_write", checkMmapSharedWrite},
	{"mmap/coherence", checkMmapCoherence},
	{"mmap/private", checkMmapPrivate},
	{"mmap/extend", checkMmapExtend},
}

func mmapFile(c *C, fd int, off int64, n int, prot, flags int) []byte {
	c.Helper()
	b, err := retry1(func() ([]byte, error) { return unix.Mmap(fd, off, n, prot, flags) })
	c.must(err, "mmap %d bytes at %d", n, off)
	return b
}

func checkMmapSharedWrite(c *C) {
	page := unix.Getpagesize()
	size := 3*page + 123
	orig := pattern(30, 0, size)
	p := c.create("f", orig)
	fd := c.open(p, unix.O_RDWR, 0)
	m := mmapFile(c, fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	c.wantBytes("mapping before writing", m, orig)
	want := append([]byte{}, orig...)
	// Writes inside one page, across a page boundary, and at the very end.
	for _, w := range [][2]int{{10, 100}, {page - 50, 100}, {2*page + 1, page}, {size - 7, 7}} {
		src := pattern(31, int64(w[0]), w[1])
		copy(m[w[0]:], src)
		copy(want[w[0]:], src)
	}
	c.must(retry(func() error { return unix.Msync(m, unix.MS_SYNC) }), "msync")
	got := make([]byte, size+10)
	n, err := readFull(fd, got, 0)
	c.must(err, "read after msync")
	c.wantBytes("read(2) after writing through a shared mapping", got[:n], want)
	c.must(unix.Munmap(m), "munmap")
	c.close(fd)
	c.wantBytes("contents after munmap, close and reopen", c.readFile(p), want)
	if st := c.stat(p); st.Size != int64(size) {
		c.Errorf("writes through a mapping changed the size to %d", st.Size)
	}
	// A mapping at a page-aligned offset.
	fd = c.open(p, unix.O_RDWR, 0)
	m = mmapFile(c, fd, int64(page), page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	copy(m[5:], "offset mapping")
	copy(want[page+5:], "offset mapping")
	c.must(retry(func() error { return unix.Msync(m, unix.MS_SYNC) }), "msync")
	c.must(unix.Munmap(m), "munmap")
	c.wantBytes("after writing through a mapping at an offset", c.readFile(p), want)
	// The data also survives closing without msync.
	m = mmapFile(c, fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	copy(m[1:], "no msync")
	copy(want[1:], "no msync")
	c.must(unix.Munmap(m), "munmap")
	c.close(fd)
	c.wantBytes("after writing through a mapping without msync", c.readFile(p), want)
	// An unaligned offset is refused.
	_, err = unix.Mmap(c.open(p, unix.O_RDONLY, 0), 1, 10, unix.PROT_READ, unix.MAP_SHARED)
	c.wantErr(err, "mmap at an unaligned offset", unix.EINVAL)
	// A shared writable mapping needs the fd open for writing.
	_, err = unix.Mmap(c.open(p, unix.O_RDONLY, 0), 0, 10, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	c.wantErr(err, "shared writable mapping of an O_RDONLY fd", unix.EACCES)
}

func checkMmapCoherence(c *C) {
	page := unix.Getpagesize()
	size := 2 * page
	p := c.create("f", make([]byte, size))
	fd := c.open(p, unix.O_RDWR, 0)
	m := mmapFile(c, fd, 0, size, unix.PROT_READ, unix.MAP_SHARED)
	defer unix.Munmap(m)
	// write(2) is seen by an existing mapping at once.
	c.must(writeFull(fd, []byte("written by pwrite"), int64(page-3)), "pwrite")
	c.wantBytes("mapping after pwrite", m[page-3:page-3+17], []byte("written by pwrite"))
	// And a write through a mapping is seen by read(2) without msync.
	w := mmapFile(c, fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	defer unix.Munmap(w)
	copy(w[100:], "via mapping")
	got := make([]byte, 11)
	_, err := readFull(fd, got, 100)
	c.must(err, "pread")
	c.wantBytes("pread of data written through a mapping", got, []byte("via mapping"))
	c.wantBytes("another mapping of the same file", m[100:111], []byte("via mapping"))
	// Truncation is seen: the pages beyond EOF go away and reads stop.
	c.must(xFtruncate(fd, int64(page)), "ftruncate")
	n, err := xPread(fd, got, int64(page))
	if err != nil || n != 0 {
		c.Errorf("pread beyond the new EOF: %d, %s", n, errString(err))
	}
}

func checkMmapPrivate(c *C) {
	page := unix.Getpagesize()
	orig := pattern(32, 0, page+10)
	p := c.create("f", orig)
	fd := c.open(p, unix.O_RDONLY, 0)
	m := mmapFile(c, fd, 0, page+10, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE)
	copy(m, "private change")
	c.must(retry(func() error { return unix.Msync(m, unix.MS_SYNC) }), "msync")
	c.must(unix.Munmap(m), "munmap")
	c.wantBytes("file after writing to a private mapping", c.readFile(p), orig)
}

func checkMmapExtend(c *C) {
	page := unix.Getpagesize()
	p := c.create("f", []byte("start"))
	fd := c.open(p, unix.O_RDWR, 0)
	size := 4*page + 100
	c.must(xFtruncate(fd, int64(size)), "ftruncate up")
	m := mmapFile(c, fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if !isZero(m[5:]) {
		c.Errorf("mapping of the extended part is not zero")
	}
	copy(m[size-10:], "tail bytes")
	copy(m[2*page:], "middle")
	c.must(retry(func() error { return unix.Msync(m, unix.MS_SYNC) }), "msync")
	c.must(unix.Munmap(m), "munmap")
	want := make([]byte, size)
	copy(want, "start")
	copy(want[size-10:], "tail bytes")
	copy(want[2*page:], "middle")
	c.wantBytes("file after writing through a mapping of the extended part", c.readFile(p), want)
	if st := c.fstat(fd); st.Size != int64(size) {
		c.Errorf("size %d, want %d", st.Size, size)
	}
}
