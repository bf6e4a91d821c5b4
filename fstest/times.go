package fstest

import (
	"time"

	"golang.org/x/sys/unix"
)

// Timestamps: which operations change atime, mtime and ctime of a file and
// of its directory, relatime, nanosecond precision.

var timeChecks = []check{
	{"time/write", checkTimeWrite},
	{"time/truncate", checkTimeTruncate},
	{"time/read", checkTimeRead},
	{"time/attr_change", checkTimeAttrChange},
	{"time/link_unlink", checkTimeLink},
	{"time/rename", checkTimeRename},
	{"time/parent_dir", checkTimeParentDir},
	{"time/atime_relatime", checkAtimeRelatime},
	{"time/nanoseconds", checkNanoseconds},
	{"time/pre_epoch", checkPreEpoch},
	{"time/utime_now_omit", checkUtimeNowOmit},
}

// times records the three timestamps of a path.
type times struct{ a, m, c unix.Timespec }

func (c *C) times(p string) times {
	c.Helper()
	st := c.lstat(p)
	return times{st.Atim, st.Mtim, st.Ctim}
}

// wantTimes compares before and after: for each of atime, mtime, ctime the
// letter in changed says it must have advanced, otherwise it must be
// unchanged. changed is a subset of "amc".
func (c *C) wantTimes(what string, before, after times, changed string) {
	c.Helper()
	check := func(name string, letter byte, b, a unix.Timespec) {
		c.Helper()
		want := false
		for i := 0; i < len(changed); i++ {
			want = want || changed[i] == letter
		}
		switch {
		case want && !tsLess(b, a):
			c.Errorf("%s: %s did not advance (%s -> %s)", what, name, tsString(b), tsString(a))
		case !want && a != b:
			c.Errorf("%s: %s changed (%s -> %s)", what, name, tsString(b), tsString(a))
		}
	}
	check("atime", 'a', before.a, after.a)
	check("mtime", 'm', before.m, after.m)
	check("ctime", 'c', before.c, after.c)
}

func checkTimeWrite(c *C) {
	p := c.create("f", []byte("data"))
	fd := c.open(p, unix.O_RDWR, 0)
	t0 := c.times(p)
	tick()
	c.must(writeFull(fd, []byte("more"), 4), "write")
	t1 := c.times(p)
	c.wantTimes("write", t0, t1, "mc")
	if st := c.fstat(fd); st.Mtim != t1.m {
		c.Errorf("fstat and stat disagree on mtime")
	}
	// A write of zero bytes changes nothing.
	tick()
	_, err := xPwrite(fd, nil, 0)
	c.must(err, "empty write")
	c.wantTimes("empty write", t1, c.times(p), "")
	// Writing through a shared mapping updates mtime by msync at the
	// latest.
	tick()
	m := mmapFile(c, fd, 0, 8, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	m[0] = 'X'
	c.must(retry(func() error { return unix.Msync(m, unix.MS_SYNC) }), "msync")
	unix.Munmap(m)
	t2 := c.times(p)
	if !tsLess(t1.m, t2.m) {
		c.Errorf("write through a mapping and msync did not advance mtime")
	}
}

func checkTimeTruncate(c *C) {
	p := c.create("f", []byte("0123456789"))
	t0 := c.times(p)
	tick()
	c.must(xTruncate(p, 5), "truncate down")
	t1 := c.times(p)
	c.wantTimes("truncate down", t0, t1, "mc")
	tick()
	fd := c.open(p, unix.O_RDWR, 0)
	c.must(xFtruncate(fd, 100), "ftruncate up")
	t2 := c.times(p)
	c.wantTimes("ftruncate up", t1, t2, "mc")
	tick()
	c.must(xFallocate(fd, 0, 0, 1000), "fallocate extending")
	c.wantTimes("fallocate extending the file", t2, c.times(p), "mc")
}

func checkTimeRead(c *C) {
	p := c.create("f", []byte("data"))
	// Put atime well after mtime/ctime so relatime will not update it.
	t0 := c.times(p)
	tick()
	c.readFile(p)
	t1 := c.times(p)
	tick()
	c.readFile(p)
	_, err := listNames(c.Dir)
	c.must(err, "readdir")
	t2 := c.times(p)
	if t2.m != t0.m || t2.c != t0.c {
		c.Errorf("reading changed mtime or ctime")
	}
	c.wantTimes("second read", t1, t2, "")
	// stat, access and open for reading without reading change nothing.
	tick()
	c.stat(p)
	xFaccessat(p, unix.R_OK, 0)
	c.close(c.open(p, unix.O_RDONLY, 0))
	c.wantTimes("stat, access, open", t2, c.times(p), "")
}

func checkTimeAttrChange(c *C) {
	p := c.create("f", []byte("x"))
	t0 := c.times(p)
	tick()
	c.chmod(p, 0o600)
	t1 := c.times(p)
	c.wantTimes("chmod", t0, t1, "c")
	tick()
	c.chown(p, int(c.opts.UID), int(c.opts.GID))
	t2 := c.times(p)
	c.wantTimes("chown", t1, t2, "c")
	tick()
	c.chown(p, -1, -1)
	c.wantTimes("chown -1 -1", t2, c.times(p), "c")
	// The directory is not touched by changes to a child's attributes.
	d0 := c.times(c.Dir)
	tick()
	c.chmod(p, 0o644)
	c.wantTimes("directory after a child's chmod", d0, c.times(c.Dir), "")
}

func checkTimeLink(c *C) {
	p := c.create("f", []byte("x"))
	tf, td := c.times(p), c.times(c.Dir)
	tick()
	c.must(xLink(p, c.path("g")), "link")
	tf2, td2 := c.times(p), c.times(c.Dir)
	c.wantTimes("file after link", tf, tf2, "c")
	c.wantTimes("directory after link", td, td2, "mc")
	tick()
	c.must(xUnlink(c.path("g")), "unlink")
	c.wantTimes("file after unlinking its other name", tf2, c.times(p), "c")
	c.wantTimes("directory after unlink", td2, c.times(c.Dir), "mc")
}

func checkTimeRename(c *C) {
	src := c.mkdir("src", 0o755)
	dst := c.mkdir("dst", 0o755)
	p := c.create("src/f", []byte("x"))
	tf, ts, td := c.times(p), c.times(src), c.times(dst)
	tick()
	q := c.path("dst", "g")
	c.must(xRename(p, q), "rename")
	c.wantTimes("renamed file", tf, c.times(q), "c")
	c.wantTimes("source directory", ts, c.times(src), "mc")
	c.wantTimes("target directory", td, c.times(dst), "mc")
	// Renaming within one directory, and a directory.
	tf, td = c.times(q), c.times(dst)
	tick()
	c.must(xRename(q, c.path("dst", "h")), "rename in place")
	c.wantTimes("file renamed in place", tf, c.times(c.path("dst", "h")), "c")
	c.wantTimes("directory of a rename in place", td, c.times(dst), "mc")
	sub := c.mkdir("src/sub", 0o755)
	tsub := c.times(sub)
	tick()
	c.must(xRename(sub, c.path("dst", "sub")), "rename a directory")
	// Its ".." changed, but only ctime says so.
	c.wantTimes("directory moved to another parent", tsub, c.times(c.path("dst", "sub")), "c")
}

func checkTimeParentDir(c *C) {
	d := c.Dir
	steps := []struct {
		what string
		op   func()
	}{
		{"create", func() { c.create("f", nil) }},
		{"mkdir", func() { c.mkdir("sub", 0o755) }},
		{"symlink", func() { c.must(xSymlink("f", c.path("l")), "symlink") }},
		{"mknod", func() { c.must(xMknod(c.path("p"), unix.S_IFIFO|0o644, 0), "mknod") }},
		{"unlink", func() { c.must(xUnlink(c.path("f")), "unlink") }},
		{"rmdir", func() { c.must(xRmdir(c.path("sub")), "rmdir") }},
	}
	for _, s := range steps {
		before := c.times(d)
		tick()
		s.op()
		c.wantTimes("directory after "+s.what, before, c.times(d), "mc")
	}
	// Writing to a file in the directory does not touch the directory.
	p := c.create("w", nil)
	before := c.times(d)
	tick()
	c.must(writeFull(c.open(p, unix.O_WRONLY, 0), []byte("x"), 0), "write")
	c.wantTimes("directory after a write to a child", before, c.times(d), "")
	// A failed create does not touch it either.
	tick()
	_, err := xOpen(p, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644)
	c.wantErr(err, "O_EXCL of an existing file", unix.EEXIST)
	c.wantTimes("directory after a failed create", before, c.times(d), "")
}

func checkAtimeRelatime(c *C) {
	p := c.create("f", []byte("data"))
	now := time.Now()
	// atime before mtime: a read updates atime.
	set := []unix.Timespec{unix.NsecToTimespec(now.Add(-2 * time.Hour).UnixNano()), unix.NsecToTimespec(now.Add(-time.Hour).UnixNano())}
	c.must(xUtimens(p, set, 0), "utimensat")
	tick()
	c.readFile(p)
	t1 := c.times(p)
	if !tsLess(set[1], t1.a) {
		c.Errorf("read with atime older than mtime did not update atime (%s, mtime %s)", tsString(t1.a), tsString(t1.m))
	}
	if d := time.Since(time.Unix(t1.a.Sec, t1.a.Nsec)); d > time.Minute || d < -time.Minute {
		c.Errorf("atime after read is %v away from now", d)
	}
	// Right after, another read leaves it alone.
	tick()
	c.readFile(p)
	if t2 := c.times(p); t2.a != t1.a {
		c.Errorf("second read updated atime again (%s -> %s): relatime expected", tsString(t1.a), tsString(t2.a))
	}
	// A write makes mtime newer than atime: the next read updates atime.
	tick()
	c.must(writeFull(c.open(p, unix.O_WRONLY, 0), []byte("D"), 0), "write")
	t3 := c.times(p)
	if t3.a != t1.a {
		c.Errorf("write changed atime")
	}
	tick()
	c.readFile(p)
	if t4 := c.times(p); !tsLess(t3.a, t4.a) {
		c.Errorf("read after a write did not update atime")
	}
	// An atime more than a day old is updated even if newer than mtime.
	old := []unix.Timespec{unix.NsecToTimespec(now.Add(-48 * time.Hour).UnixNano()), unix.NsecToTimespec(now.Add(-72 * time.Hour).UnixNano())}
	c.must(xUtimens(p, old, 0), "utimensat")
	tick()
	c.readFile(p)
	if t5 := c.times(p); !tsLess(old[0], t5.a) {
		c.Errorf("read of a file with a 2-day-old atime did not update it")
	}
	// Directories: listing updates atime under the same rule.
	d := c.mkdir("d", 0o755)
	c.must(xUtimens(d, set, 0), "utimensat")
	tick()
	_, err := listNames(d)
	c.must(err, "readdir")
	if t := c.times(d); !tsLess(set[1], t.a) {
		c.Errorf("readdir did not update the directory's atime")
	}
}

func checkNanoseconds(c *C) {
	p := c.create("f", nil)
	for _, ts := range [][2]unix.Timespec{
		{{Sec: 1_234_567_890, Nsec: 123_456_789}, {Sec: 1_500_000_000, Nsec: 987_654_321}},
		{{Sec: 1, Nsec: 1}, {Sec: 2, Nsec: 999_999_999}},
		{{Sec: 0, Nsec: 0}, {Sec: 4_000_000_000, Nsec: 500}},           // after 2038
		{{Sec: 1 << 33, Nsec: 7}, {Sec: 1_700_000_000, Nsec: 100_000}}, // year 2242
	} {
		c.must(xUtimens(p, ts[:], 0), "utimensat %s %s", tsString(ts[0]), tsString(ts[1]))
		st := c.stat(p)
		if st.Atim != ts[0] || st.Mtim != ts[1] {
			c.Errorf("set atime %s mtime %s, read back %s %s", tsString(ts[0]), tsString(ts[1]), tsString(st.Atim), tsString(st.Mtim))
		}
	}
	// Directories and through an fd (futimens).
	d := c.mkdir("d", 0o755)
	ts := []unix.Timespec{{Sec: 1_111_111_111, Nsec: 111_111_111}, {Sec: 1_222_222_222, Nsec: 222_222_222}}
	c.must(xUtimens(d, ts, 0), "utimensat on a directory")
	if st := c.stat(d); st.Atim != ts[0] || st.Mtim != ts[1] {
		c.Errorf("directory times %s %s", tsString(st.Atim), tsString(st.Mtim))
	}
	fd := c.open(p, unix.O_RDONLY, 0)
	c.must(retry(func() error { return unix.UtimesNanoAt(fd, "", ts, unix.AT_EMPTY_PATH) }), "futimens")
	if st := c.fstat(fd); st.Atim != ts[0] || st.Mtim != ts[1] {
		c.Errorf("futimens: times %s %s", tsString(st.Atim), tsString(st.Mtim))
	}
	// ctime, set by the kernel, has sub-second precision as well: over a
	// few changes its nanoseconds are not all zero.
	nonzero := false
	for i := 0; i < 5 && !nonzero; i++ {
		tick()
		c.chmod(p, 0o600+uint32(i))
		nonzero = c.stat(p).Ctim.Nsec != 0
	}
	if !nonzero {
		c.Errorf("ctime has no sub-second part")
	}
}

func checkPreEpoch(c *C) {
	p := c.create("f", nil)
	ts := []unix.Timespec{{Sec: -1, Nsec: 500_000_000}, {Sec: -1_000_000_000, Nsec: 1}}
	c.must(xUtimens(p, ts, 0), "utimensat before 1970")
	if st := c.stat(p); st.Atim != ts[0] || st.Mtim != ts[1] {
		c.Errorf("set %s %s, read back %s %s", tsString(ts[0]), tsString(ts[1]), tsString(st.Atim), tsString(st.Mtim))
	}
}

func checkUtimeNowOmit(c *C) {
	p := c.create("f", nil)
	base := []unix.Timespec{{Sec: 1_000_000_000, Nsec: 10}, {Sec: 1_000_000_100, Nsec: 20}}
	c.must(xUtimens(p, base, 0), "utimensat")
	t0 := c.times(p)
	tick()
	c.must(xUtimens(p, []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Sec: 5, Nsec: 5}}, 0), "utimensat UTIME_OMIT atime")
	t1 := c.times(p)
	if t1.a != base[0] || t1.m != (unix.Timespec{Sec: 5, Nsec: 5}) {
		c.Errorf("UTIME_OMIT atime: times %s %s", tsString(t1.a), tsString(t1.m))
	}
	if !tsLess(t0.c, t1.c) {
		c.Errorf("utimensat did not advance ctime")
	}
	tick()
	c.must(xUtimens(p, []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_OMIT}}, 0), "utimensat both UTIME_OMIT")
	c.wantTimes("utimensat with both UTIME_OMIT", t1, c.times(p), "")
	before := time.Now()
	tick()
	c.must(xUtimens(p, []unix.Timespec{{Nsec: unix.UTIME_NOW}, {Nsec: unix.UTIME_OMIT}}, 0), "utimensat UTIME_NOW atime")
	t2 := c.times(p)
	if t2.m != t1.m {
		c.Errorf("UTIME_OMIT mtime changed it")
	}
	at := time.Unix(t2.a.Sec, t2.a.Nsec)
	if at.Before(before) || time.Since(at) > time.Minute {
		c.Errorf("UTIME_NOW set atime to %v, now is %v", at, time.Now())
	}
	// utimensat with a NULL times array is UTIME_NOW for both.
	tick()
	c.must(retry(func() error { return unix.UtimesNanoAt(unix.AT_FDCWD, p, nil, 0) }), "utimensat(NULL)")
	t3 := c.times(p)
	if !tsLess(t2.m, t3.m) || !tsLess(t2.c, t3.c) {
		c.Errorf("utimensat(NULL) did not set mtime and ctime to now")
	}
}
