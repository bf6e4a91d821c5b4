package fstest

import (
	"bytes"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// open(2) flags: O_APPEND, O_EXCL, O_TRUNC, O_DIRECT, O_NOFOLLOW,
// O_DIRECTORY, O_CREAT modes; and fallocate(2).

var openFlagChecks = []check{
	{"open/append", checkAppend},
	{"open/append_pwrite", checkAppendPwrite},
	{"open/append_concurrent", checkAppendConcurrent},
	{"open/excl", checkExcl},
	{"open/trunc", checkTrunc},
	{"open/creat_mode", checkCreatMode},
	{"open/direct", checkDirect},
	{"open/nofollow", checkNofollow},
	{"open/directory", checkODirectory},
}

func checkAppend(c *C) {
	p := c.path("f")
	a := c.open(p, unix.O_CREAT|unix.O_WRONLY|unix.O_APPEND, 0o644)
	_, err := xWrite(a, []byte("abc"))
	c.must(err, "write")
	_, err = xSeek(a, 0, unix.SEEK_SET)
	c.must(err, "lseek")
	_, err = xWrite(a, []byte("def"))
	c.must(err, "write after lseek to 0")
	c.wantBytes("O_APPEND write after lseek(0)", c.readFile(p), []byte("abcdef"))
	if off, _ := xSeek(a, 0, unix.SEEK_CUR); off != 6 {
		c.Errorf("offset after an appending write: %d, want 6", off)
	}
	// Another writer changes the file; appends still land at the new end.
	w := c.open(p, unix.O_WRONLY, 0)
	c.must(writeFull(w, []byte("XYZ0123"), 0), "pwrite through a second fd")
	_, err = xWrite(a, []byte("g"))
	c.must(err, "append after the other write grew the file")
	c.wantBytes("append after the file grew", c.readFile(p), []byte("XYZ0123g"))
	c.must(xFtruncate(w, 2), "ftruncate")
	_, err = xWrite(a, []byte("h"))
	c.must(err, "append after the file shrank")
	c.wantBytes("append after the file shrank", c.readFile(p), []byte("XYh"))
	// Two appenders interleave without overwriting each other.
	b := c.open(p, unix.O_WRONLY|unix.O_APPEND, 0)
	for i := 0; i < 10; i++ {
		_, err = xWrite(a, []byte("a"))
		c.must(err, "write")
		_, err = xWrite(b, []byte("b"))
		c.must(err, "write")
	}
	c.wantBytes("two appenders", c.readFile(p), []byte("XYhabababababababababab"))
}

// checkAppendConcurrent: writers appending records through fds of their
// own, at the same time, lose none and tear none (a log several processes
// write to). Records are not a multiple of any block or chunk size.
func checkAppendConcurrent(c *C) {
	const writers, records, size = 4, 300, 61
	p := c.create("log", nil)
	fds := make([]int, writers)
	for w := range fds {
		fds[w] = c.open(p, unix.O_WRONLY|unix.O_APPEND, 0)
	}
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for w, fd := range fds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < records; i++ {
				rec := fmt.Appendf(nil, "writer %d record %04d ", w, i)
				rec = append(rec, bytes.Repeat([]byte{'a' + byte(w)}, size-1-len(rec))...)
				rec = append(rec, '\n')
				if n, err := xWrite(fd, rec); err != nil || n != size {
					errs <- fmt.Errorf("writer %d, record %d: wrote %d bytes: %v", w, i, n, errString(err))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		c.Fatalf("%v", err)
	}
	data := c.readFile(p)
	if len(data) != writers*records*size {
		c.Fatalf("%d writers appending %d records of %d bytes made %d bytes, want %d", writers, records, size, len(data), writers*records*size)
	}
	next := make([]int, writers) // each writer's records come in its order
	for off := 0; off < len(data); off += size {
		var w, i int
		rec := data[off : off+size]
		if _, err := fmt.Sscanf(string(rec), "writer %d record %d ", &w, &i); err != nil || w < 0 || w >= writers ||
			i != next[w] || rec[size-1] != '\n' || rec[size-2] != 'a'+byte(w) {
			c.Fatalf("at byte %d: %q (records of the writers so far: %v)", off, rec, next)
		}
		next[w]++
	}
}

// checkAppendPwrite: on Linux pwrite on an O_APPEND fd appends and ignores
// the offset (documented in pwrite(2) BUGS).
func checkAppendPwrite(c *C) {
	p := c.create("f", []byte("0123456789"))
	a := c.open(p, unix.O_WRONLY|unix.O_APPEND, 0)
	_, err := xPwrite(a, []byte("AB"), 0)
	c.must(err, "pwrite on an O_APPEND fd")
	c.wantBytes("pwrite at 0 on an O_APPEND fd", c.readFile(p), []byte("0123456789AB"))
}

func checkExcl(c *C) {
	p := c.create("f", []byte("x"))
	_, err := xOpen(p, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644)
	c.wantErr(err, "O_CREAT|O_EXCL on an existing file", unix.EEXIST)

	dangling := c.path("dangling")
	c.must(xSymlink("nowhere", dangling), "symlink")
	_, err = xOpen(dangling, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644)
	c.wantErr(err, "O_CREAT|O_EXCL on a dangling symlink", unix.EEXIST)
	var st unix.Stat_t
	c.wantErr(xLstat(c.path("nowhere"), &st), "target of the dangling symlink after O_EXCL", unix.ENOENT)

	good := c.path("good")
	c.must(xSymlink("f", good), "symlink")
	_, err = xOpen(good, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644)
	c.wantErr(err, "O_CREAT|O_EXCL on a symlink to a file", unix.EEXIST)

	d := c.mkdir("d", 0o755)
	_, err = xOpen(d, unix.O_CREAT|unix.O_EXCL|unix.O_RDONLY, 0o644)
	c.wantErr(err, "O_CREAT|O_EXCL on a directory", unix.EEXIST)

	fd, err := xOpen(p, unix.O_EXCL|unix.O_RDONLY, 0)
	if c.wantOK(err, "O_EXCL without O_CREAT on an existing file") {
		unix.Close(fd)
	}
	fd, err = xOpen(c.path("new"), unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644)
	if c.wantOK(err, "O_CREAT|O_EXCL of a new name") {
		unix.Close(fd)
	}
	c.lstat(c.path("new"))
}

func checkTrunc(c *C) {
	p := c.create("f", pattern(15, 0, 100_000))
	before := c.stat(p)
	tick()
	fd := c.open(p, unix.O_WRONLY|unix.O_TRUNC, 0)
	st := c.fstat(fd)
	if st.Size != 0 {
		c.Errorf("size after O_TRUNC: %d", st.Size)
	}
	if !tsLess(before.Mtim, st.Mtim) || !tsLess(before.Ctim, st.Ctim) {
		c.Errorf("O_TRUNC of a nonempty file did not update mtime/ctime: mtime %s -> %s, ctime %s -> %s",
			tsString(before.Mtim), tsString(st.Mtim), tsString(before.Ctim), tsString(st.Ctim))
	}
	c.must(writeFull(fd, []byte("new"), 0), "write")
	c.wantBytes("contents after O_TRUNC and a write", c.readFile(p), []byte("new"))
	fd2 := c.open(p, unix.O_RDWR|unix.O_TRUNC|unix.O_CREAT, 0o600)
	if st := c.fstat(fd2); st.Size != 0 || st.Mode&0o777 != 0o644&^processUmask() {
		c.Errorf("O_CREAT|O_TRUNC of an existing file: size %d mode %#o", st.Size, st.Mode)
	}
}

func checkCreatMode(c *C) {
	// The creator gets the access it asked for, even if the new mode
	// forbids it.
	p := c.path("f")
	fd, err := xOpen(p, unix.O_CREAT|unix.O_EXCL|unix.O_RDWR, 0)
	c.must(err, "create with mode 0")
	defer unix.Close(fd)
	c.must(writeFull(fd, []byte("ok"), 0), "write to a mode 0 file through its creating fd")
	st := c.fstat(fd)
	c.wantMode("file created with mode 0", &st, unix.S_IFREG)
	c.wantBytes("mode 0 file", c.readFile(p), []byte("ok"))

	// As a user the same holds, and a later open is refused.
	q := c.path("g")
	res := c.as(c.user(),
		hop{Op: "write", Path: q, Flags: unix.O_CREAT | unix.O_EXCL, Mode: 0o400, Data: []byte("mine")},
		hop{Op: "open", Path: q, Flags: unix.O_WRONLY},
		hop{Op: "stat", Path: q})
	c.wantOK(res[0].err(), "user creates a 0400 file for writing")
	c.wantErr(res[1].err(), "user opens own 0400 file for writing", unix.EACCES)
	c.wantOK(res[2].err(), "user stats own file")
	if s := res[2].Stat; s != nil && (s.UID != c.opts.UID || s.GID != c.opts.GID || s.Mode != unix.S_IFREG|0o400&^processUmask()) {
		c.Errorf("file created by %d:%d is %d:%d mode %#o", c.opts.UID, c.opts.GID, s.UID, s.GID, s.Mode)
	}
	c.wantBytes("file written through the creating fd", c.readFile(q), []byte("mine"))
}

func checkDirect(c *C) {
	p := c.path("f")
	fd, err := xOpen(p, unix.O_CREAT|unix.O_RDWR|unix.O_DIRECT, 0o644)
	if err == unix.EINVAL {
		c.Logf("O_DIRECT is refused with EINVAL")
		return
	}
	c.must(err, "open O_DIRECT")
	defer unix.Close(fd)
	const n = 64 << 10
	buf, free, err := mmapAligned(n)
	c.must(err, "mmap")
	defer free()
	want := pattern(16, 0, n)
	copy(buf, want)
	k, err := xPwrite(fd, buf, 0)
	if err == unix.EINVAL {
		c.Logf("O_DIRECT write of an aligned buffer is refused with EINVAL")
		return
	}
	c.must(err, "O_DIRECT pwrite")
	if k != n {
		c.Fatalf("O_DIRECT pwrite wrote %d of %d", k, n)
	}
	c.wantBytes("written with O_DIRECT, read through the page cache", c.readFile(p), want)

	// Written through the page cache, read with O_DIRECT.
	other := pattern(17, 4096, 8192)
	w := c.open(p, unix.O_WRONLY, 0)
	c.must(writeFull(w, other, 4096), "buffered write")
	copy(want[4096:], other)
	for i := range buf {
		buf[i] = 0
	}
	k, err = xPread(fd, buf, 0)
	if err == unix.EINVAL {
		c.Logf("O_DIRECT read of an aligned buffer is refused with EINVAL")
		return
	}
	c.must(err, "O_DIRECT pread")
	c.wantBytes("read with O_DIRECT", buf[:k], want)

	// An unaligned O_DIRECT write either fails with EINVAL or is right.
	odd := pattern(18, 10, 100)
	_, err = xPwrite(fd, odd, 10)
	switch err {
	case unix.EINVAL:
	case nil:
		copy(want[10:], odd)
	default:
		c.Errorf("unaligned O_DIRECT pwrite: %s, want success or EINVAL", errString(err))
	}
	c.wantBytes("file after an unaligned O_DIRECT write", c.readFile(p), want)
}

func checkNofollow(c *C) {
	f := c.create("f", []byte("x"))
	l := c.path("l")
	c.must(xSymlink("f", l), "symlink")
	_, err := xOpen(l, unix.O_RDONLY|unix.O_NOFOLLOW, 0)
	c.wantErr(err, "O_NOFOLLOW on a symlink", unix.ELOOP)
	_, err = xOpen(l, unix.O_WRONLY|unix.O_CREAT|unix.O_NOFOLLOW, 0o644)
	c.wantErr(err, "O_CREAT|O_NOFOLLOW on a symlink", unix.ELOOP)
	fd, err := xOpen(f, unix.O_RDONLY|unix.O_NOFOLLOW, 0)
	if c.wantOK(err, "O_NOFOLLOW on a regular file") {
		unix.Close(fd)
	}
	// Only the last component is not followed.
	c.mkdir("d", 0o755)
	c.create("d/g", nil)
	c.must(xSymlink("d", c.path("ld")), "symlink")
	fd, err = xOpen(c.path("ld", "g"), unix.O_RDONLY|unix.O_NOFOLLOW, 0)
	if c.wantOK(err, "O_NOFOLLOW with a symlink in the middle of the path") {
		unix.Close(fd)
	}
	// O_PATH|O_NOFOLLOW opens the link itself.
	fd, err = xOpen(l, unix.O_PATH|unix.O_NOFOLLOW, 0)
	if c.wantOK(err, "O_PATH|O_NOFOLLOW on a symlink") {
		st := c.fstat(fd)
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			c.Errorf("fstat of an O_PATH|O_NOFOLLOW fd of a symlink: %s", typeOf(st.Mode))
		}
		unix.Close(fd)
	}
}

func checkODirectory(c *C) {
	f := c.create("f", nil)
	d := c.mkdir("d", 0o755)
	_, err := xOpen(f, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	c.wantErr(err, "O_DIRECTORY on a file", unix.ENOTDIR)
	_, err = xOpen(d, unix.O_WRONLY, 0)
	c.wantErr(err, "open a directory O_WRONLY", unix.EISDIR)
	_, err = xOpen(d, unix.O_RDWR, 0)
	c.wantErr(err, "open a directory O_RDWR", unix.EISDIR)
	_, err = xOpen(d, unix.O_WRONLY|unix.O_CREAT, 0o644)
	c.wantErr(err, "O_CREAT on an existing directory", unix.EISDIR)
	c.must(xSymlink("d", c.path("ld")), "symlink")
	fd, err := xOpen(c.path("ld"), unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if c.wantOK(err, "O_DIRECTORY through a symlink to a directory") {
		unix.Close(fd)
	}
	c.must(xSymlink("f", c.path("lf")), "symlink")
	_, err = xOpen(c.path("lf"), unix.O_RDONLY|unix.O_DIRECTORY, 0)
	c.wantErr(err, "O_DIRECTORY through a symlink to a file", unix.ENOTDIR)
	_, err = xOpen(c.path("missing"), unix.O_RDONLY|unix.O_DIRECTORY, 0)
	c.wantErr(err, "O_DIRECTORY on a missing name", unix.ENOENT)
}

var fallocChecks = []check{
	{"fallocate/extend", checkFallocExtend},
	{"fallocate/keep_size", checkFallocKeepSize},
	{"fallocate/punch_hole", checkPunchHole},
	{"fallocate/errors", checkFallocErrors},
}

func checkFallocExtend(c *C) {
	p := c.path("f")
	fd := c.open(p, unix.O_CREAT|unix.O_RDWR, 0o644)
	const M = 1 << 20
	c.must(xFallocate(fd, 0, 0, M), "fallocate 1 MiB")
	st := c.fstat(fd)
	if st.Size != M {
		c.Errorf("size after fallocate(0, 1 MiB): %d, want %d", st.Size, M)
	}
	if st.Blocks*512 < M {
		c.Errorf("st_blocks after fallocate of 1 MiB: %d (%d bytes)", st.Blocks, st.Blocks*512)
	}
	got := c.readFile(p)
	if len(got) != M || !isZero(got) {
		c.Errorf("fallocated range: %d bytes, zero %v", len(got), isZero(got))
	}
	// Allocating inside existing data keeps it; allocating past the end
	// from an odd offset extends to offset+len.
	data := pattern(19, 0, 10_000)
	c.must(writeFull(fd, data, 100), "write")
	c.must(xFallocate(fd, 0, 0, 20_000), "fallocate inside")
	c.must(xFallocate(fd, 0, M-10, 4096+10+7), "fallocate past the end")
	if st := c.fstat(fd); st.Size != M+4096+7 {
		c.Errorf("size after fallocate past the end: %d, want %d", st.Size, M+4096+7)
	}
	want := make([]byte, M+4096+7)
	copy(want[100:], data)
	c.wantBytes("contents after fallocate", c.readFile(p), want)
}

func checkFallocKeepSize(c *C) {
	p := c.create("f", pattern(20, 0, 5000))
	fd := c.open(p, unix.O_RDWR, 0)
	before := c.fstat(fd)
	const M = 1 << 20
	c.must(xFallocate(fd, unix.FALLOC_FL_KEEP_SIZE, 0, 2*M), "fallocate KEEP_SIZE")
	st := c.fstat(fd)
	if st.Size != 5000 {
		c.Errorf("size after FALLOC_FL_KEEP_SIZE: %d, want 5000", st.Size)
	}
	if st.Blocks < before.Blocks+(2*M-8192)/512 {
		c.Errorf("st_blocks after preallocating 2 MiB with KEEP_SIZE: %d -> %d", before.Blocks, st.Blocks)
	}
	c.wantBytes("contents after KEEP_SIZE", c.readFile(p), pattern(20, 0, 5000))
	// The preallocated range reads as zeros once the file is extended.
	c.must(xFtruncate(fd, M), "ftruncate up")
	want := append(pattern(20, 0, 5000), make([]byte, M-5000)...)
	c.wantBytes("preallocated range after extending", c.readFile(p), want)
}

func checkPunchHole(c *C) {
	const size = 256 << 10
	data := pattern(21, 0, size)
	p := c.create("f", data)
	fd := c.open(p, unix.O_RDWR, 0)
	c.must(xFsync(fd), "fsync")
	before := c.fstat(fd)
	punch := unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE
	c.must(xFallocate(fd, uint32(punch), 8192, 128<<10), "punch an aligned hole")
	c.must(xFallocate(fd, uint32(punch), 100, 4900), "punch an unaligned hole")
	c.must(xFallocate(fd, uint32(punch), size-10, 1000), "punch a hole across the end")
	want := append([]byte{}, data...)
	clear(want[8192 : 8192+128<<10])
	clear(want[100:5000])
	clear(want[size-10:])
	st := c.fstat(fd)
	if st.Size != size {
		c.Errorf("size after punching holes: %d, want %d", st.Size, size)
	}
	c.wantBytes("contents after punching holes", c.readFile(p), want)
	if st.Blocks > before.Blocks-(128<<10)/512 {
		c.Errorf("st_blocks after punching a 128 KiB hole: %d -> %d", before.Blocks, st.Blocks)
	}
	err := xFallocate(fd, unix.FALLOC_FL_PUNCH_HOLE, 0, 10)
	c.wantErr(err, "PUNCH_HOLE without KEEP_SIZE", unix.EOPNOTSUPP)
	c.wantBytes("contents after the refused punch", c.readFile(p), want)
}

func checkFallocErrors(c *C) {
	p := c.create("f", []byte("x"))
	fd := c.open(p, unix.O_RDWR, 0)
	c.wantErr(xFallocate(fd, 0, 0, 0), "fallocate of length 0", unix.EINVAL)
	c.wantErr(xFallocate(fd, 0, -1, 10), "fallocate at offset -1", unix.EINVAL)
	ro := c.open(p, unix.O_RDONLY, 0)
	c.wantErr(xFallocate(ro, 0, 0, 10), "fallocate on a read-only fd", unix.EBADF)
	if st := c.stat(p); st.Size != 1 {
		c.Errorf("size changed by failed fallocate calls: %d", st.Size)
	}
}
