package fstest

import (
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// File names and path resolution errors.

var nameChecks = []check{
	{"name/max_len", checkNameMaxLen},
	{"name/bytes", checkNameBytes},
	{"name/path_errors", checkPathErrors},
	{"name/dot_entries", checkDotEntries},
}

func checkNameMaxLen(c *C) {
	n255 := strings.Repeat("a", 255)
	n256 := strings.Repeat("b", 256)
	// 85 three-byte UTF-8 characters: 255 bytes.
	u255 := strings.Repeat("\u20ac", 85)
	p := c.create(n255, []byte("long"))
	c.wantBytes("file with a 255-byte name", c.readFile(p), []byte("long"))
	c.create(u255, nil)
	c.mkdir(strings.Repeat("d", 255), 0o755)
	c.must(xSymlink(n255, c.path(strings.Repeat("l", 255))), "symlink with a 255-byte name")
	c.must(xLink(p, c.path(strings.Repeat("h", 255))), "link to a 255-byte name")
	c.must(xRename(p, c.path(strings.Repeat("r", 255))), "rename to a 255-byte name")
	names, err := listNames(c.Dir)
	c.must(err, "readdir")
	sort.Strings(names)
	want := []string{strings.Repeat("d", 255), strings.Repeat("h", 255), strings.Repeat("l", 255), strings.Repeat("r", 255), u255}
	if strings.Join(names, "/") != strings.Join(want, "/") {
		c.Errorf("listing of 255-byte names: %d names %q", len(names), names)
	}

	var st unix.Stat_t
	c.wantErr(xStat(c.path(n256), &st), "stat of a 256-byte name", unix.ENAMETOOLONG)
	_, err = xOpen(c.path(n256), unix.O_CREAT|unix.O_WRONLY, 0o644)
	c.wantErr(err, "create with a 256-byte name", unix.ENAMETOOLONG)
	c.wantErr(xMkdir(c.path(n256), 0o755), "mkdir with a 256-byte name", unix.ENAMETOOLONG)
	c.wantErr(xSymlink("x", c.path(n256)), "symlink with a 256-byte name", unix.ENAMETOOLONG)
	c.wantErr(xLink(c.path(strings.Repeat("r", 255)), c.path(n256)), "link to a 256-byte name", unix.ENAMETOOLONG)
	c.wantErr(xRename(c.path(strings.Repeat("r", 255)), c.path(n256)), "rename to a 256-byte name", unix.ENAMETOOLONG)
	c.wantErr(xUnlink(c.path(n256)), "unlink of a 256-byte name", unix.ENAMETOOLONG)
	c.wantErr(xMknod(c.path(n256), unix.S_IFIFO|0o644, 0), "mknod with a 256-byte name", unix.ENAMETOOLONG)
	c.wantErr(xStat(c.path(strings.Repeat("\u20ac", 86)), &st), "stat of a 258-byte UTF-8 name", unix.ENAMETOOLONG)
	// A 256-byte component in the middle of a path.
	c.wantErr(xStat(c.path(n256, "x"), &st), "stat below a 256-byte component", unix.ENAMETOOLONG)
}

func checkNameBytes(c *C) {
	names := []string{
		"with space", " leading space", "trailing space ", "new\nline", "tab\there",
		"-dash", "...", "..a", ".hidden", "ünïcödé", "日本語", "\xff\xfe not utf-8",
		"back\\slash", "quote\"'", "star*?", "\x01control", "semi;colon", "#hash",
		"CaSe", "case",
	}
	for _, n := range names {
		c.create(n, []byte(n))
	}
	got, err := listNames(c.Dir)
	c.must(err, "readdir")
	sort.Strings(got)
	want := append([]string{}, names...)
	sort.Strings(want)
	if strings.Join(got, "\x00") != strings.Join(want, "\x00") {
		c.Errorf("listing: %q, want %q", got, want)
	}
	for _, n := range names {
		if b, err := readFile(c.path(n)); err != nil || string(b) != n {
			c.Errorf("file %q: %q, %s", n, b, errString(err))
		}
	}
	// Case matters.
	if a, b := c.stat(c.path("CaSe")), c.stat(c.path("case")); a.Ino == b.Ino {
		c.Errorf("\"CaSe\" and \"case\" are the same file")
	}
}

func checkPathErrors(c *C) {
	f := c.create("f", []byte("x"))
	c.mkdir("d", 0o755)
	var st unix.Stat_t
	c.wantErr(xStat("", &st), "stat of an empty path", unix.ENOENT)
	_, err := xOpen("", unix.O_RDONLY, 0)
	c.wantErr(err, "open of an empty path", unix.ENOENT)
	c.wantErr(xStat(f+"/", &st), "stat of file/", unix.ENOTDIR)
	_, err = xOpen(f+"/", unix.O_RDONLY, 0)
	c.wantErr(err, "open of file/", unix.ENOTDIR)
	c.wantErr(xStat(c.path("f", "x"), &st), "stat of file/x", unix.ENOTDIR)
	c.wantErr(xStat(c.path("f")+"/.", &st), "stat of file/.", unix.ENOTDIR)
	c.wantErr(xStat(c.path("f")+"/..", &st), "stat of file/..", unix.ENOTDIR)
	_, err = xOpen(c.path("new")+"/", unix.O_CREAT|unix.O_WRONLY, 0o644)
	c.wantErr(err, "O_CREAT of new/", unix.EISDIR)
	c.wantErr(xStat(c.path("missing")+"/../f", &st), "stat of missing/../f", unix.ENOENT)
	c.wantErr(xMkdir(c.path("missing", "x", "y"), 0o755), "mkdir missing/x/y", unix.ENOENT)
	c.wantOK(xStat(c.path("d")+"//.//", &st), "stat of d//.//")
	c.wantOK(xStat(c.path("d")+"/../d/./../f", &st), "stat of d/../d/./../f")
	// A path longer than PATH_MAX.
	long := c.Dir + strings.Repeat("/.", 2100)
	c.wantErr(xStat(long, &st), "stat of a path of more than 4096 bytes", unix.ENAMETOOLONG)
	// Bad arguments.
	c.wantErr(xUtimens(f, []unix.Timespec{{Sec: 0, Nsec: 1_000_000_000}, {Sec: 0, Nsec: 0}}, 0), "utimensat with tv_nsec = 1e9", unix.EINVAL)
	c.wantErr(xUtimens(f, []unix.Timespec{{Sec: 0, Nsec: -2}, {Sec: 0, Nsec: 0}}, 0), "utimensat with tv_nsec = -2", unix.EINVAL)
	_, err = xOpen(f, unix.O_RDONLY|unix.O_TMPFILE&^unix.O_DIRECTORY, 0)
	c.wantErr(err, "open with __O_TMPFILE but not O_DIRECTORY", unix.EINVAL)
	_, err = xOpenat(unix.Stdin+1000, "relative", unix.O_RDONLY, 0)
	c.wantErr(err, "openat with a bad dirfd", unix.EBADF)
	ffd := c.open(f, unix.O_RDONLY, 0)
	_, err = xOpenat(ffd, "relative", unix.O_RDONLY, 0)
	c.wantErr(err, "openat relative to a file fd", unix.ENOTDIR)
}

func checkDotEntries(c *C) {
	d := c.mkdir("d", 0o755)
	c.create("d/f", []byte("x"))
	c.wantErr(xMkdir(c.path("d", "."), 0o755), "mkdir d/.", unix.EEXIST)
	c.wantErr(xMkdir(c.path("d", ".."), 0o755), "mkdir d/..", unix.EEXIST)
	_, err := xOpen(c.path("d")+"/.", unix.O_CREAT|unix.O_WRONLY, 0o644)
	c.wantErr(err, "O_CREAT of d/.", unix.EISDIR)
	c.wantErr(xLink(c.path("d", "f"), c.path("d")+"/."), "link to d/.", unix.EEXIST)
	c.wantErr(xSymlink("x", c.path("d")+"/.."), "symlink at d/..", unix.EEXIST)
	c.wantErr(xMknod(c.path("d")+"/.", unix.S_IFIFO|0o644, 0), "mknod d/.", unix.EEXIST)
	if a, b := c.stat(c.path("d")+"/."), c.stat(d); a.Ino != b.Ino {
		c.Errorf("d/. is inode %d, d is %d", a.Ino, b.Ino)
	}
	if a, b := c.stat(c.path("d")+"/.."), c.stat(c.Dir); a.Ino != b.Ino {
		c.Errorf("d/.. is inode %d, its parent is %d", a.Ino, b.Ino)
	}
	if a, b := c.stat(c.Dir+"/d/./../d/f"), c.stat(c.path("d", "f")); a.Ino != b.Ino {
		c.Errorf("d/./../d/f is not d/f")
	}
}
