package fstest

import (
	"bytes"
	"os"

	"golang.org/x/sys/unix"
)

// Regular file I/O: create, read, write, pread/pwrite, truncation, sparse
// and large files, unlink of open files, fsync, copy_file_range, O_TMPFILE.

var fileChecks = []check{
	{"file/create_read_write", checkCreateReadWrite},
	{"file/other_fd", checkOtherFd},
	{"file/pread_pwrite", checkPreadPwrite},
	{"file/large_io_odd", checkLargeIOOdd},
	{"file/truncate", checkTruncate},
	{"file/ftruncate", checkFtruncate},
	{"file/sparse", checkSparse},
	{"file/seek_data_hole", checkSeekDataHole},
	{"file/over_4gib", checkOver4GiB},
	{"file/unlink_open", checkUnlinkOpen},
	{"file/fsync", checkFsync},
	{"file/copy_file_range", checkCopyFileRange},
	{"file/tmpfile", checkTmpfile},
	{"file/fd_errors", checkFdErrors},
}

func checkCreateReadWrite(c *C) {
	p := c.path("f")
	fd, err := xOpen(p, unix.O_CREAT|unix.O_EXCL|unix.O_RDWR, 0o640)
	c.must(err, "create")
	defer unix.Close(fd)
	st := c.fstat(fd)
	c.wantMode("new file", &st, unix.S_IFREG|0o640&^processUmask())
	if st.Size != 0 || st.Nlink != 1 {
		c.Errorf("new file: size %d nlink %d, want 0 and 1", st.Size, st.Nlink)
	}
	if st.Uid != uint32(os.Geteuid()) || st.Gid != uint32(os.Getegid()) {
		c.Errorf("new file owned by %d:%d, want %d:%d", st.Uid, st.Gid, os.Geteuid(), os.Getegid())
	}
	data := []byte("hello, world\n")
	n, err := xWrite(fd, data)
	c.must(err, "write")
	if n != len(data) {
		c.Fatalf("write returned %d, want %d", n, len(data))
	}
	if off, err := xSeek(fd, 0, unix.SEEK_CUR); err != nil || off != int64(len(data)) {
		c.Errorf("offset after write: %d, %v; want %d", off, errString(err), len(data))
	}
	big := pattern(1, 0, 5000)
	_, err = xWrite(fd, big)
	c.must(err, "second write")
	want := append(append([]byte{}, data...), big...)

	_, err = xSeek(fd, 0, unix.SEEK_SET)
	c.must(err, "lseek")
	got := make([]byte, len(want)+100)
	n, err = xRead(fd, got)
	c.must(err, "read")
	// A read of a regular file returns everything up to EOF at once.
	c.wantBytes("read back through the same fd", got[:n], want)
	n, err = xRead(fd, got)
	if err != nil || n != 0 {
		c.Errorf("read at EOF: %d, %s; want 0", n, errString(err))
	}
	st = c.fstat(fd)
	if st.Size != int64(len(want)) {
		c.Errorf("size %d, want %d", st.Size, len(want))
	}
	if st.Blocks*512 < st.Size {
		c.Errorf("dense file of %d bytes has only %d blocks", st.Size, st.Blocks)
	}
	c.wantBytes("read back after reopen", c.readFile(p), want)

	// O_CREAT without O_EXCL opens the existing file untouched.
	fd2, err := xOpen(p, unix.O_CREAT|unix.O_WRONLY, 0o600)
	c.must(err, "open existing with O_CREAT")
	unix.Close(fd2)
	st = c.stat(p)
	c.wantMode("mode after O_CREAT of an existing file", &st, unix.S_IFREG|0o640&^processUmask())
	c.wantBytes("contents after O_CREAT of an existing file", c.readFile(p), want)
}

func checkOtherFd(c *C) {
	p := c.path("f")
	w, err := xOpen(p, unix.O_CREAT|unix.O_RDWR, 0o644)
	c.must(err, "create")
	defer unix.Close(w)
	r, err := xOpen(p, unix.O_RDONLY, 0)
	c.must(err, "open for reading")
	defer unix.Close(r)

	data := pattern(2, 0, 100_000)
	c.must(writeFull(w, data, 0), "write")
	got := make([]byte, len(data)+10)
	n, err := readFull(r, got, 0)
	c.must(err, "read through the other fd")
	c.wantBytes("data written on one fd, read on another opened before", got[:n], data)
	if st := c.fstat(r); st.Size != int64(len(data)) {
		c.Errorf("fstat on the reading fd: size %d, want %d", st.Size, len(data))
	}

	w2, err := xOpen(p, unix.O_WRONLY, 0)
	c.must(err, "open a second writer")
	patch := []byte("PATCHED")
	c.must(writeFull(w2, patch, 10), "write through the second writer")
	copy(data[10:], patch)
	unix.Close(w2)
	n, err = readFull(r, got, 0)
	c.must(err, "read")
	c.wantBytes("data after a write through a third fd", got[:n], data)

	unix.Close(w)
	c.wantBytes("data through a new fd after close", c.readFile(p), data)
}

func checkPreadPwrite(c *C) {
	p := c.path("f")
	fd := c.open(p, unix.O_CREAT|unix.O_RDWR, 0o644)
	model := []byte{}
	put := func(off int64, b []byte) {
		c.Helper()
		c.must(writeFull(fd, b, off), "pwrite %d bytes at %d", len(b), off)
		if end := off + int64(len(b)); end > int64(len(model)) {
			model = append(model, make([]byte, end-int64(len(model)))...)
		}
		copy(model[off:], b)
	}
	put(0, pattern(3, 0, 1000))
	put(5000, pattern(3, 5000, 333)) // leaves a gap that reads as zeros
	put(500, pattern(4, 500, 100))
	if off, _ := xSeek(fd, 0, unix.SEEK_CUR); off != 0 {
		c.Errorf("pwrite moved the file offset to %d", off)
	}
	for _, r := range [][2]int64{{0, 1000}, {999, 10}, {900, 4500}, {5000, 333}, {5300, 100}} {
		buf := make([]byte, r[1])
		n, err := xPread(fd, buf, r[0])
		c.must(err, "pread")
		want := model[min(r[0], int64(len(model))):min(r[0]+r[1], int64(len(model)))]
		c.wantBytes("pread", buf[:n], want)
	}
	n, err := xPread(fd, make([]byte, 10), int64(len(model))+100)
	if err != nil || n != 0 {
		c.Errorf("pread beyond EOF: %d, %s; want 0", n, errString(err))
	}
	_, err = xPread(fd, make([]byte, 10), -1)
	c.wantErr(err, "pread at offset -1", unix.EINVAL)
	_, err = xPwrite(fd, []byte("x"), -1)
	c.wantErr(err, "pwrite at offset -1", unix.EINVAL)

	// write(2) continues at the offset set by lseek.
	_, err = xSeek(fd, 2000, unix.SEEK_SET)
	c.must(err, "lseek")
	_, err = xWrite(fd, []byte("AB"))
	c.must(err, "write")
	copy(model[2000:], "AB")
	if off, _ := xSeek(fd, 0, unix.SEEK_CUR); off != 2002 {
		c.Errorf("offset after write at 2000: %d, want 2002", off)
	}
	if off, _ := xSeek(fd, -2, unix.SEEK_END); off != int64(len(model))-2 {
		c.Errorf("SEEK_END -2: %d, want %d", off, len(model)-2)
	}
	c.wantBytes("whole file", c.readFile(p), model)
}

// checkLargeIOOdd writes and reads at odd offsets and sizes that straddle
// 4 KiB, 64 KiB and 1 MiB boundaries and compares every byte.
func checkLargeIOOdd(c *C) {
	p := c.path("f")
	fd := c.open(p, unix.O_CREAT|unix.O_RDWR, 0o644)
	const K, M = 1 << 10, 1 << 20
	model := make([]byte, 0, 4*M)
	put := func(off int64, n int, seed uint64) {
		c.Helper()
		b := pattern(seed, off, n)
		c.must(writeFull(fd, b, off), "pwrite %d bytes at %d", n, off)
		if end := off + int64(n); end > int64(len(model)) {
			model = append(model, make([]byte, end-int64(len(model)))...)
		}
		copy(model[off:], b)
	}
	// One big write(2) first: the FUSE kernel module splits it.
	big := pattern(10, 0, 2*M+12345)
	n, err := xWrite(fd, big)
	c.must(err, "write 2 MiB")
	if n != len(big) {
		c.Fatalf("write of %d bytes returned %d", len(big), n)
	}
	model = append(model, big...)
	writes := []struct {
		off int64
		n   int
	}{
		{64*K - 7, 13},
		{M - 100_003, 200_011},
		{3, 64*K + 5},
		{2*M - 1, 2},
		{128*K - 1, 1},
		{M + 64*K - 4095, 64*K + 8191},
		{3*M - 31, 65_537}, // beyond the end: leaves a gap
		{4095, 4097},
	}
	for i, w := range writes {
		put(w.off, w.n, uint64(20+i))
	}
	reads := [][2]int64{
		{0, 64 * K}, {64*K - 1, 2}, {M - 3, 7}, {M - 100_000, 300_001},
		{2*M + 12340, 10}, {2*M + 12345, M}, {3*M - 40, 100_000}, {5, 3 * M},
	}
	for _, r := range reads {
		buf := make([]byte, r[1])
		n, err := readFull(fd, buf, r[0])
		c.must(err, "pread %d at %d", r[1], r[0])
		lo, hi := min(r[0], int64(len(model))), min(r[0]+r[1], int64(len(model)))
		c.wantBytes("pread", buf[:n], model[lo:hi])
	}
	if st := c.fstat(fd); st.Size != int64(len(model)) {
		c.Errorf("size %d, want %d", st.Size, len(model))
	}
	c.wantBytes("whole file through another fd", c.readFile(p), model)
}

func checkTruncate(c *C) {
	p := c.create("f", pattern(5, 0, 200_000))
	c.must(xTruncate(p, 70_001), "truncate down to 70001")
	st := c.stat(p)
	if st.Size != 70_001 {
		c.Errorf("size after truncate down: %d", st.Size)
	}
	c.wantBytes("contents after truncate down", c.readFile(p), pattern(5, 0, 70_001))
	c.must(xTruncate(p, 200_000), "truncate up to 200000")
	want := append(pattern(5, 0, 70_001), make([]byte, 200_000-70_001)...)
	c.wantBytes("contents after truncate up (beyond the old cut must be zeros)", c.readFile(p), want)
	c.must(xTruncate(p, 0), "truncate to 0")
	if st := c.stat(p); st.Size != 0 {
		c.Errorf("size after truncate to 0: %d", st.Size)
	}
	c.must(xTruncate(p, 5000), "truncate up from 0")
	c.wantBytes("contents after truncate 0 then up", c.readFile(p), make([]byte, 5000))

	c.wantErr(xTruncate(p, -1), "truncate to -1", unix.EINVAL)
	d := c.mkdir("d", 0o755)
	c.wantErr(xTruncate(d, 0), "truncate a directory", unix.EISDIR)
	c.wantErr(xTruncate(c.path("missing"), 0), "truncate a missing file", unix.ENOENT)
	c.wantErr(xTruncate(c.path("f", "x"), 0), "truncate file/x", unix.ENOTDIR)
}

func checkFtruncate(c *C) {
	p := c.path("f")
	fd := c.open(p, unix.O_CREAT|unix.O_RDWR, 0o644)
	c.must(writeFull(fd, pattern(6, 0, 150_000), 0), "write")
	// The cut is inside a 4 KiB page and a 64 KiB chunk.
	c.must(xFtruncate(fd, 65_537), "ftruncate down")
	if st := c.fstat(fd); st.Size != 65_537 {
		c.Errorf("size after ftruncate down: %d", st.Size)
	}
	c.must(xFtruncate(fd, 150_000), "ftruncate up")
	got, err := readAllFd(fd)
	c.must(err, "read")
	want := append(pattern(6, 0, 65_537), make([]byte, 150_000-65_537)...)
	c.wantBytes("after ftruncate down and up", got, want)

	// The file offset is not moved by ftruncate; a write past the new end
	// leaves a hole.
	_, err = xSeek(fd, 100, unix.SEEK_SET)
	c.must(err, "lseek")
	c.must(xFtruncate(fd, 10), "ftruncate to 10")
	_, err = xWrite(fd, []byte("Z"))
	c.must(err, "write at offset 100")
	got, err = readAllFd(fd)
	c.must(err, "read")
	want = append(append(pattern(6, 0, 10), make([]byte, 90)...), 'Z')
	c.wantBytes("write past the end after ftruncate", got, want)

	c.wantErr(xFtruncate(fd, -1), "ftruncate to -1", unix.EINVAL)
	ro := c.open(p, unix.O_RDONLY, 0)
	c.wantErr(xFtruncate(ro, 0), "ftruncate of a read-only fd", unix.EINVAL, unix.EBADF)
	if st := c.stat(p); st.Size != 101 {
		c.Errorf("size changed by a failed ftruncate: %d", st.Size)
	}
}

func checkSparse(c *C) {
	p := c.path("f")
	fd := c.open(p, unix.O_CREAT|unix.O_RDWR, 0o644)
	const size = 64 << 20
	head, tail := pattern(7, 0, 4096), pattern(7, size-4096, 4096)
	c.must(writeFull(fd, head, 0), "write head")
	c.must(writeFull(fd, tail, size-4096), "write tail")
	c.must(xFsync(fd), "fsync")
	st := c.fstat(fd)
	if st.Size != size {
		c.Errorf("size %d, want %d", st.Size, size)
	}
	if st.Blocks*512 >= size/4 {
		c.Errorf("st_blocks %d (%d bytes) for 8 KiB of data in a %d-byte file: holes take space", st.Blocks, st.Blocks*512, size)
	}
	mid := make([]byte, 1<<20)
	n, err := readFull(fd, mid, size/2)
	c.must(err, "read the hole")
	if n != len(mid) || !isZero(mid) {
		c.Errorf("reading inside the hole: %d bytes, all zero %v", n, isZero(mid[:n]))
	}
	got := make([]byte, 8192)
	n, err = readFull(fd, got, size-8192)
	c.must(err, "read across the end of the hole")
	c.wantBytes("read across the end of the hole", got[:n], append(make([]byte, 4096), tail...))
	n, err = readFull(fd, got[:4096], 0)
	c.must(err, "read head")
	c.wantBytes("head", got[:n], head)
}

func checkSeekDataHole(c *C) {
	p := c.path("f")
	fd := c.open(p, unix.O_CREAT|unix.O_RDWR, 0o644)
	const M = 1 << 20
	const size = 4*M + 4096
	c.must(writeFull(fd, pattern(8, 0, 4096), 0), "write")
	c.must(writeFull(fd, pattern(8, 4*M, 4096), 4*M), "write")
	hole, err := xSeek(fd, 0, unix.SEEK_HOLE)
	c.must(err, "SEEK_HOLE from 0")
	if hole < 4096 || hole > M {
		c.Errorf("SEEK_HOLE from 0 = %d, want the first hole between 4096 and 1 MiB", hole)
	}
	data, err := xSeek(fd, hole, unix.SEEK_DATA)
	c.must(err, "SEEK_DATA from %d", hole)
	if data < 3*M || data > 4*M {
		c.Errorf("SEEK_DATA from %d = %d, want the second extent between 3 MiB and 4 MiB", hole, data)
	}
	if d, err := xSeek(fd, 0, unix.SEEK_DATA); err != nil || d != 0 {
		c.Errorf("SEEK_DATA from 0 = %d, %s; want 0", d, errString(err))
	}
	if h, err := xSeek(fd, 4*M, unix.SEEK_HOLE); err != nil || h != size {
		c.Errorf("SEEK_HOLE from 4 MiB = %d, %s; want the end of file %d", h, errString(err), size)
	}
	_, err = xSeek(fd, size, unix.SEEK_DATA)
	c.wantErr(err, "SEEK_DATA at EOF", unix.ENXIO)
	_, err = xSeek(fd, size+10, unix.SEEK_HOLE)
	c.wantErr(err, "SEEK_HOLE beyond EOF", unix.ENXIO)
}

func checkOver4GiB(c *C) {
	p := c.path("f")
	fd := c.open(p, unix.O_CREAT|unix.O_RDWR, 0o644)
	const G = int64(1) << 30
	msg := []byte("far away")
	c.must(writeFull(fd, msg, 5*G), "pwrite at 5 GiB")
	// Across the 4 GiB boundary, to catch 32-bit offsets.
	across := pattern(9, 4*G-3, 7)
	c.must(writeFull(fd, across, 4*G-3), "pwrite across 4 GiB")
	st := c.fstat(fd)
	if st.Size != 5*G+int64(len(msg)) {
		c.Errorf("size %d, want %d", st.Size, 5*G+int64(len(msg)))
	}
	buf := make([]byte, 64)
	n, err := readFull(fd, buf, 5*G)
	c.must(err, "pread at 5 GiB")
	c.wantBytes("data at 5 GiB", buf[:n], msg)
	n, err = readFull(fd, buf[:7], 4*G-3)
	c.must(err, "pread across 4 GiB")
	c.wantBytes("data across 4 GiB", buf[:n], across)
	n, err = readFull(fd, buf[:16], 1*G)
	c.must(err, "pread at 1 GiB")
	if n != 16 || !isZero(buf[:16]) {
		c.Errorf("data at 1 GiB (the low 32 bits of 5 GiB): % x, want zeros", buf[:n])
	}
	n, err = readFull(fd, buf[:8], 4*G+4)
	c.must(err, "pread at 4 GiB + 4")
	if n != 8 || !isZero(buf[:8]) {
		c.Errorf("data after the write across 4 GiB: % x, want zeros", buf[:n])
	}
	// Reopened through another fd, and after truncating below 4 GiB.
	fd2 := c.open(p, unix.O_RDONLY, 0)
	n, err = readFull(fd2, buf, 5*G-2)
	c.must(err, "pread at 5 GiB - 2")
	c.wantBytes("tail through another fd", buf[:n], append([]byte{0, 0}, msg...))
	c.must(xFtruncate(fd, 3*G), "ftruncate to 3 GiB")
	if st := c.fstat(fd2); st.Size != 3*G {
		c.Errorf("size after ftruncate to 3 GiB: %d", st.Size)
	}
	n, err = readFull(fd2, buf, 5*G)
	if err != nil || n != 0 {
		c.Errorf("read at 5 GiB after truncating to 3 GiB: %d, %s; want 0", n, errString(err))
	}
}

func checkUnlinkOpen(c *C) {
	p := c.create("f", []byte("hello"))
	rw := c.open(p, unix.O_RDWR, 0)
	ro := c.open(p, unix.O_RDONLY, 0)
	c.must(xUnlink(p), "unlink")
	var st unix.Stat_t
	c.wantErr(xStat(p, &st), "stat after unlink", unix.ENOENT)
	names, err := listNames(c.Dir)
	c.must(err, "readdir")
	if len(names) != 0 {
		c.Errorf("directory still lists %q after unlink", names)
	}
	if st := c.fstat(rw); st.Nlink != 0 {
		c.Errorf("fstat of the unlinked file: nlink %d, want 0", st.Nlink)
	}
	c.must(writeFull(rw, []byte("world"), 5), "write to the unlinked file")
	got, err := readAllFd(ro)
	c.must(err, "read the unlinked file")
	c.wantBytes("unlinked file through the other fd", got, []byte("helloworld"))
	if st := c.fstat(ro); st.Size != 10 {
		c.Errorf("fstat size %d, want 10", st.Size)
	}
	c.must(xFtruncate(rw, 3), "ftruncate the unlinked file")
	c.close(rw)
	got, err = readAllFd(ro)
	c.must(err, "read after closing the writer")
	c.wantBytes("unlinked file after the first close", got, []byte("hel"))

	// A new file with the same name is a different file.
	c.create("f", []byte("new"))
	got, err = readAllFd(ro)
	c.must(err, "read the old file again")
	c.wantBytes("old open file after a new file took its name", got, []byte("hel"))
	c.wantBytes("new file", c.readFile(p), []byte("new"))
	if a, b := c.fstat(ro), c.stat(p); a.Ino == b.Ino {
		c.Errorf("new file has the inode number %d of the open unlinked file", a.Ino)
	}

	// With a second name the open file keeps nlink 1.
	q := c.path("g")
	c.must(xLink(p, q), "link")
	fd := c.open(p, unix.O_RDONLY, 0)
	c.must(xUnlink(p), "unlink one of two names")
	if st := c.fstat(fd); st.Nlink != 1 {
		c.Errorf("nlink after removing one of two names: %d, want 1", st.Nlink)
	}
	c.wantBytes("remaining name", c.readFile(q), []byte("new"))
}

func checkFsync(c *C) {
	p := c.path("f")
	fd := c.open(p, unix.O_CREAT|unix.O_RDWR, 0o644)
	data := pattern(11, 0, 300_000)
	c.must(writeFull(fd, data, 0), "write")
	c.wantOK(xFsync(fd), "fsync")
	c.wantOK(xFdatasync(fd), "fdatasync")
	c.must(xFtruncate(fd, 1000), "ftruncate")
	c.wantOK(xFdatasync(fd), "fdatasync after ftruncate")
	ro := c.open(p, unix.O_RDONLY, 0)
	c.wantOK(xFsync(ro), "fsync of a read-only fd")
	dfd := c.open(c.Dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	c.wantOK(xFsync(dfd), "fsync of a directory")
	c.wantOK(retry(func() error { return unix.Syncfs(fd) }), "syncfs")
	c.wantBytes("contents after fsync", c.readFile(p), data[:1000])
}

func checkCopyFileRange(c *C) {
	src := c.create("src", pattern(12, 0, 300_000))
	dstData := pattern(13, 0, 10_000)
	dst := c.create("dst", dstData)
	in := c.open(src, unix.O_RDONLY, 0)
	out := c.open(dst, unix.O_RDWR, 0)

	copyAll := func(roff, woff int64, n int) int {
		c.Helper()
		total := 0
		for total < n {
			k, err := xCopyFileRange(in, &roff, out, &woff, n-total)
			c.must(err, "copy_file_range")
			if k == 0 {
				break
			}
			total += k
		}
		return total
	}
	// Into the middle and past the end of dst, from an odd offset.
	if n := copyAll(1000, 5000, 100_000); n != 100_000 {
		c.Errorf("copied %d bytes, want 100000", n)
	}
	want := append(append([]byte{}, dstData[:5000]...), pattern(12, 1000, 100_000)...)
	c.wantBytes("destination after copy_file_range", c.readFile(dst), want)
	if off, _ := xSeek(in, 0, unix.SEEK_CUR); off != 0 {
		c.Errorf("copy_file_range with explicit offsets moved the source offset to %d", off)
	}
	// Starting at the end of the source copies nothing.
	if n := copyAll(300_000, 0, 10); n != 0 {
		c.Errorf("copy from EOF copied %d bytes", n)
	}
	// With NULL offsets the file offsets are used and advanced.
	_, err := xSeek(in, 299_990, unix.SEEK_SET)
	c.must(err, "lseek")
	_, err = xSeek(out, 0, unix.SEEK_SET)
	c.must(err, "lseek")
	n, err := xCopyFileRange(in, nil, out, nil, 100)
	c.must(err, "copy_file_range with file offsets")
	if n != 10 {
		c.Errorf("copy of the last 10 bytes returned %d", n)
	}
	if off, _ := xSeek(in, 0, unix.SEEK_CUR); off != 300_000 {
		c.Errorf("source offset after copy: %d, want 300000", off)
	}
	copy(want, pattern(12, 299_990, 10))
	c.wantBytes("destination after the second copy", c.readFile(dst), want)

	// Overlapping ranges in one file, and an O_APPEND destination.
	roff, woff := int64(0), int64(10)
	_, err = xCopyFileRange(out, &roff, out, &woff, 100)
	c.wantErr(err, "copy_file_range of overlapping ranges in one file", unix.EINVAL)
	app := c.open(dst, unix.O_WRONLY|unix.O_APPEND, 0)
	_, err = xCopyFileRange(in, nil, app, nil, 10)
	c.wantErr(err, "copy_file_range to an O_APPEND fd", unix.EBADF)
	wo := c.open(src, unix.O_WRONLY, 0)
	_, err = xCopyFileRange(wo, nil, out, nil, 10)
	c.wantErr(err, "copy_file_range from a write-only fd", unix.EBADF)
}

func checkTmpfile(c *C) {
	fd, err := xOpen(c.Dir, unix.O_TMPFILE|unix.O_RDWR, 0o600)
	c.must(err, "open O_TMPFILE")
	defer unix.Close(fd)
	st := c.fstat(fd)
	if st.Nlink != 0 || st.Mode != unix.S_IFREG|0o600 {
		c.Errorf("O_TMPFILE file: nlink %d mode %#o, want 0 and %#o", st.Nlink, st.Mode, unix.S_IFREG|0o600)
	}
	data := pattern(14, 0, 10_000)
	c.must(writeFull(fd, data, 0), "write")
	if names, _ := listNames(c.Dir); len(names) != 0 {
		c.Errorf("the directory lists %q", names)
	}
	p := c.path("linked")
	c.must(retry(func() error {
		return unix.Linkat(fd, "", unix.AT_FDCWD, p, unix.AT_EMPTY_PATH)
	}), "linkat the O_TMPFILE file into the directory")
	if st := c.fstat(fd); st.Nlink != 1 {
		c.Errorf("nlink after linkat: %d, want 1", st.Nlink)
	}
	c.wantBytes("linked O_TMPFILE file", c.readFile(p), data)

	ex, err := xOpen(c.Dir, unix.O_TMPFILE|unix.O_EXCL|unix.O_WRONLY, 0o600)
	c.must(err, "open O_TMPFILE|O_EXCL")
	defer unix.Close(ex)
	err = retry(func() error {
		return unix.Linkat(ex, "", unix.AT_FDCWD, c.path("excl"), unix.AT_EMPTY_PATH)
	})
	c.wantErr(err, "linkat of an O_TMPFILE|O_EXCL file", unix.ENOENT)

	_, err = xOpen(c.Dir, unix.O_TMPFILE|unix.O_RDONLY, 0o600)
	c.wantErr(err, "O_TMPFILE without write access", unix.EINVAL)
	_, err = xOpen(p, unix.O_TMPFILE|unix.O_RDWR, 0o600)
	c.wantErr(err, "O_TMPFILE on a regular file", unix.ENOTDIR)
}

func checkFdErrors(c *C) {
	p := c.create("f", []byte("data"))
	ro := c.open(p, unix.O_RDONLY, 0)
	_, err := xWrite(ro, []byte("x"))
	c.wantErr(err, "write to an O_RDONLY fd", unix.EBADF)
	wo := c.open(p, unix.O_WRONLY, 0)
	_, err = xRead(wo, make([]byte, 4))
	c.wantErr(err, "read from an O_WRONLY fd", unix.EBADF)
	dfd := c.open(c.Dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	_, err = xRead(dfd, make([]byte, 4))
	c.wantErr(err, "read from a directory fd", unix.EISDIR)
	_, err = xSeek(ro, -1, unix.SEEK_SET)
	c.wantErr(err, "lseek to -1", unix.EINVAL)
	_, err = xSeek(ro, 0, 77)
	c.wantErr(err, "lseek with whence 77", unix.EINVAL)
	if !bytes.Equal(c.readFile(p), []byte("data")) {
		c.Errorf("file changed by failed operations")
	}
}
