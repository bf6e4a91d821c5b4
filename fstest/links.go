package fstest

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// Symbolic links, hard links and unlink.

var symlinkChecks = []check{
	{"symlink/basic", checkSymlinkBasic},
	{"symlink/dangling", checkSymlinkDangling},
	{"symlink/loop", checkSymlinkLoop},
	{"symlink/errors", checkSymlinkErrors},
	{"symlink/long_target", checkSymlinkLong},
	{"symlink/owner_times", checkSymlinkOwner},
}

var linkChecks = []check{
	{"link/nlink", checkLinkNlink},
	{"link/errors", checkLinkErrors},
	{"link/symlink", checkLinkOfSymlink},
	{"unlink/errors", checkUnlinkErrors},
}

func checkSymlinkBasic(c *C) {
	data := []byte("target data")
	f := c.create("f", data)
	c.mkdir("d", 0o755)
	l := c.path("l")
	c.must(xSymlink("f", l), "symlink")
	target, err := xReadlink(l)
	c.must(err, "readlink")
	if target != "f" {
		c.Errorf("readlink: %q, want \"f\"", target)
	}
	lst := c.lstat(l)
	if lst.Mode&unix.S_IFMT != unix.S_IFLNK {
		c.Errorf("lstat of a symlink: %s", typeOf(lst.Mode))
	}
	if lst.Mode&0o7777 != 0o777 {
		c.Errorf("symlink permission bits %#o, want 0777", lst.Mode&0o7777)
	}
	if lst.Size != 1 {
		c.Errorf("lstat size of a symlink to \"f\": %d, want 1", lst.Size)
	}
	if lst.Nlink != 1 {
		c.Errorf("symlink nlink %d, want 1", lst.Nlink)
	}
	st, fst := c.stat(l), c.stat(f)
	if st.Ino != fst.Ino || st.Mode != fst.Mode || st.Size != int64(len(data)) {
		c.Errorf("stat through the symlink: ino %d mode %#o size %d; target has ino %d mode %#o", st.Ino, st.Mode, st.Size, fst.Ino, fst.Mode)
	}
	if lst.Ino == fst.Ino {
		c.Errorf("the symlink has the inode number of its target")
	}
	c.wantBytes("read through the symlink", c.readFile(l), data)
	// Writing through the link writes the target.
	fd := c.open(l, unix.O_WRONLY|unix.O_APPEND, 0)
	c.must(writeFull(fd, []byte("+"), 0), "write through the symlink")
	c.wantBytes("target after a write through the symlink", c.readFile(f), []byte("target data+"))
	// Relative targets resolve from the link's directory.
	c.must(xSymlink("../f", c.path("d", "up")), "symlink ../f")
	c.wantBytes("read through d/up -> ../f", c.readFile(c.path("d", "up")), []byte("target data+"))
	c.must(xSymlink("d", c.path("ld")), "symlink to a directory")
	c.wantBytes("read through ld/up", c.readFile(c.path("ld", "up")), []byte("target data+"))
	// An absolute target.
	c.must(xSymlink(f, c.path("abs")), "symlink to an absolute path")
	if t, _ := xReadlink(c.path("abs")); t != f {
		c.Errorf("readlink of an absolute symlink: %q, want %q", t, f)
	}
	// A symlink is not followed by unlink, rename or lstat.
	c.must(xRename(l, c.path("l2")), "rename the symlink")
	if t, _ := xReadlink(c.path("l2")); t != "f" {
		c.Errorf("renamed symlink reads %q", t)
	}
	c.must(xUnlink(c.path("l2")), "unlink the symlink")
	c.stat(f)
}

func checkSymlinkDangling(c *C) {
	l := c.path("l")
	c.must(xSymlink("nowhere", l), "symlink")
	var st unix.Stat_t
	c.wantErr(xStat(l, &st), "stat of a dangling symlink", unix.ENOENT)
	c.lstat(l)
	_, err := xOpen(l, unix.O_RDONLY, 0)
	c.wantErr(err, "open of a dangling symlink", unix.ENOENT)
	if t, err := xReadlink(l); err != nil || t != "nowhere" {
		c.Errorf("readlink of a dangling symlink: %q, %s", t, errString(err))
	}
	// O_CREAT without O_EXCL creates the target.
	fd, err := xOpen(l, unix.O_CREAT|unix.O_WRONLY, 0o644)
	c.must(err, "O_CREAT through a dangling symlink")
	c.must(writeFull(fd, []byte("made"), 0), "write")
	unix.Close(fd)
	c.wantBytes("target created through the symlink", c.readFile(c.path("nowhere")), []byte("made"))
	if lst := c.lstat(l); lst.Mode&unix.S_IFMT != unix.S_IFLNK {
		c.Errorf("the symlink became a %s", typeOf(lst.Mode))
	}
	// A dangling link into a missing directory cannot be created through.
	c.must(xSymlink("missing/x", c.path("l2")), "symlink")
	_, err = xOpen(c.path("l2"), unix.O_CREAT|unix.O_WRONLY, 0o644)
	c.wantErr(err, "O_CREAT through a symlink into a missing directory", unix.ENOENT)
}

func checkSymlinkLoop(c *C) {
	a, b := c.path("a"), c.path("b")
	c.must(xSymlink("b", a), "symlink")
	c.must(xSymlink("a", b), "symlink")
	var st unix.Stat_t
	c.wantErr(xStat(a, &st), "stat of a symlink loop", unix.ELOOP)
	_, err := xOpen(a, unix.O_RDONLY, 0)
	c.wantErr(err, "open of a symlink loop", unix.ELOOP)
	_, err = xOpen(a, unix.O_CREAT|unix.O_WRONLY, 0o644)
	c.wantErr(err, "O_CREAT through a symlink loop", unix.ELOOP)
	c.must(xSymlink("self", c.path("self")), "symlink")
	c.wantErr(xStat(c.path("self"), &st), "stat of a self-referencing symlink", unix.ELOOP)
	c.wantErr(xStat(c.path("self", "x"), &st), "lookup below a symlink loop", unix.ELOOP)
	c.lstat(a)
	// A chain of 40 links resolves (the Linux limit); 41 do not.
	c.create("end", []byte("end"))
	prev := "end"
	for i := 1; i <= 41; i++ {
		name := fmt.Sprintf("c%02d", i)
		c.must(xSymlink(prev, c.path(name)), "symlink %s", name)
		prev = name
	}
	c.wantBytes("through 40 symlinks", c.readFile(c.path("c40")), []byte("end"))
	c.wantErr(xStat(c.path("c41"), &st), "stat through 41 symlinks", unix.ELOOP)
}

func checkSymlinkErrors(c *C) {
	f := c.create("f", []byte("x"))
	l := c.path("l")
	c.must(xSymlink("f", l), "symlink")
	c.wantErr(xSymlink("other", l), "symlink over an existing symlink", unix.EEXIST)
	c.wantErr(xSymlink("other", f), "symlink over a file", unix.EEXIST)
	c.wantErr(xSymlink("other", c.Dir), "symlink over a directory", unix.EEXIST)
	c.wantErr(xSymlink("", c.path("empty")), "symlink with an empty target", unix.ENOENT)
	c.wantErr(xSymlink("x", c.path("missing", "l")), "symlink in a missing directory", unix.ENOENT)
	c.wantErr(xSymlink("x", c.path("f", "l")), "symlink below a file", unix.ENOTDIR)
	_, err := xReadlink(f)
	c.wantErr(err, "readlink of a regular file", unix.EINVAL)
	_, err = xReadlink(c.Dir)
	c.wantErr(err, "readlink of a directory", unix.EINVAL)
	_, err = xReadlink(c.path("missing"))
	c.wantErr(err, "readlink of a missing name", unix.ENOENT)
	// readlink truncates to the buffer and does not NUL-terminate.
	c.must(xSymlink("0123456789", c.path("long")), "symlink")
	buf := []byte("xxxxxxxx")
	n, err := retry1(func() (int, error) { return unix.Readlink(c.path("long"), buf[:4]) })
	if err != nil || n != 4 || string(buf) != "0123xxxx" {
		c.Errorf("readlink into a 4-byte buffer: %d, %s, %q; want 4 and \"0123xxxx\"", n, errString(err), buf)
	}
}

func checkSymlinkLong(c *C) {
	target := strings.Repeat("abcdefgh/", 455) + "abcd" // 4099 bytes
	target = target[:4095]
	l := c.path("l")
	c.must(xSymlink(target, l), "symlink with a 4095-byte target")
	got, err := xReadlink(l)
	c.must(err, "readlink")
	if got != target {
		c.Errorf("readlink of a 4095-byte target returned %d bytes, differing at %d", len(got), firstDiff([]byte(got), []byte(target)))
	}
	if st := c.lstat(l); st.Size != 4095 {
		c.Errorf("lstat size %d, want 4095", st.Size)
	}
	c.wantErr(xSymlink(target+"x", c.path("l2")), "symlink with a 4096-byte target", unix.ENAMETOOLONG)
}

func checkSymlinkOwner(c *C) {
	f := c.create("f", nil)
	l := c.path("l")
	c.must(xSymlink("f", l), "symlink")
	c.must(xLchown(l, int(c.opts.UID), int(c.opts.GID)), "lchown")
	lst, st := c.lstat(l), c.stat(f)
	if lst.Uid != c.opts.UID || lst.Gid != c.opts.GID {
		c.Errorf("lchown: symlink owned by %d:%d", lst.Uid, lst.Gid)
	}
	if st.Uid != 0 || st.Gid != 0 {
		c.Errorf("lchown changed the target's owner to %d:%d", st.Uid, st.Gid)
	}
	c.must(xChown(l, int(c.opts.OtherUID), -1), "chown through the symlink")
	if st := c.stat(f); st.Uid != c.opts.OtherUID {
		c.Errorf("chown through a symlink: target owned by %d", st.Uid)
	}
	if lst := c.lstat(l); lst.Uid != c.opts.UID {
		c.Errorf("chown through a symlink changed the link to %d", lst.Uid)
	}
	// Times of the link itself, with AT_SYMLINK_NOFOLLOW.
	ts := []unix.Timespec{{Sec: 1_000_000_000, Nsec: 1}, {Sec: 1_100_000_000, Nsec: 2}}
	c.must(xUtimens(l, ts, unix.AT_SYMLINK_NOFOLLOW), "utimensat AT_SYMLINK_NOFOLLOW")
	lst, st = c.lstat(l), c.stat(f)
	if lst.Atim != ts[0] || lst.Mtim != ts[1] {
		c.Errorf("symlink times %s %s, want %s %s", tsString(lst.Atim), tsString(lst.Mtim), tsString(ts[0]), tsString(ts[1]))
	}
	if st.Mtim == ts[1] {
		c.Errorf("utimensat AT_SYMLINK_NOFOLLOW changed the target")
	}
	// A user who does not own it can still create and own a symlink.
	res := c.as(c.user(), hop{Op: "symlink", Path: c.path("ul"), Path2: "f"}, hop{Op: "lstat", Path: c.path("ul")})
	c.wantOK(res[0].err(), "user creates a symlink")
	c.wantOK(res[1].err(), "user lstats its symlink")
	if s := res[1].Stat; s != nil && (s.UID != c.opts.UID || s.GID != c.opts.GID) {
		c.Errorf("symlink made by %d:%d is owned by %d:%d", c.opts.UID, c.opts.GID, s.UID, s.GID)
	}
}

func checkLinkNlink(c *C) {
	f := c.create("f", []byte("shared"))
	c.mkdir("d", 0o755)
	g, h := c.path("g"), c.path("d", "h")
	c.must(xLink(f, g), "link")
	c.must(xLink(g, h), "link into a subdirectory")
	for _, p := range []string{f, g, h} {
		c.wantNlink("three names", p, 3)
	}
	a, b := c.stat(f), c.stat(h)
	if a.Ino != b.Ino {
		c.Errorf("hard links have inode numbers %d and %d", a.Ino, b.Ino)
	}
	fd := c.open(h, unix.O_WRONLY|unix.O_APPEND, 0)
	c.must(writeFull(fd, []byte("!"), 0), "write through one name")
	c.wantBytes("read through another name", c.readFile(f), []byte("shared!"))
	c.must(xUnlink(f), "unlink")
	c.wantNlink("after unlinking one name", g, 2)
	c.wantNlink("fstat after unlinking one name", h, 2)
	if st := c.fstat(fd); st.Nlink != 2 {
		c.Errorf("fstat nlink %d, want 2", st.Nlink)
	}
	// Many links, removed out of order.
	for i := 0; i < 20; i++ {
		c.must(xLink(g, c.path(fmt.Sprintf("m%02d", i))), "link %d", i)
	}
	c.wantNlink("22 names", g, 22)
	for _, i := range []int{7, 0, 19, 3, 12} {
		c.must(xUnlink(c.path(fmt.Sprintf("m%02d", i))), "unlink")
	}
	c.wantNlink("17 names", h, 17)
	// A link to a file is not a directory entry of type dir: parent nlink
	// is unchanged.
	c.wantNlink("directory with hard links", c.path("d"), 2)
}

func checkLinkErrors(c *C) {
	f := c.create("f", nil)
	g := c.create("g", nil)
	d := c.mkdir("d", 0o755)
	c.wantErr(xLink(f, g), "link onto an existing file", unix.EEXIST)
	c.wantErr(xLink(f, d), "link onto an existing directory", unix.EEXIST)
	c.wantErr(xLink(d, c.path("d2")), "link of a directory", unix.EPERM)
	c.wantErr(xLink(c.path("missing"), c.path("x")), "link of a missing file", unix.ENOENT)
	c.wantErr(xLink(f, c.path("missing", "x")), "link into a missing directory", unix.ENOENT)
	c.wantErr(xLink(c.path("f", "x"), c.path("y")), "link of file/x", unix.ENOTDIR)
	c.wantErr(xLink(f, c.path("g", "x")), "link to g/x with g a file", unix.ENOTDIR)
	c.wantNlink("after failed links", f, 1)
}

func checkLinkOfSymlink(c *C) {
	c.create("f", nil)
	l := c.path("l")
	c.must(xSymlink("f", l), "symlink")
	// link(2) does not follow a symlink: the new name is the symlink.
	c.must(xLink(l, c.path("l2")), "link of a symlink")
	a, b := c.lstat(l), c.lstat(c.path("l2"))
	if a.Ino != b.Ino || b.Mode&unix.S_IFMT != unix.S_IFLNK || a.Nlink != 2 {
		c.Errorf("hard link to a symlink: ino %d/%d type %s nlink %d", a.Ino, b.Ino, typeOf(b.Mode), a.Nlink)
	}
	c.wantNlink("target of the linked symlink", c.path("f"), 1)
	// linkat with AT_SYMLINK_FOLLOW links the target.
	c.must(retry(func() error {
		return unix.Linkat(unix.AT_FDCWD, l, unix.AT_FDCWD, c.path("f2"), unix.AT_SYMLINK_FOLLOW)
	}), "linkat AT_SYMLINK_FOLLOW")
	st := c.lstat(c.path("f2"))
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink != 2 {
		c.Errorf("linkat AT_SYMLINK_FOLLOW made a %s with nlink %d", typeOf(st.Mode), st.Nlink)
	}
}

func checkUnlinkErrors(c *C) {
	d := c.mkdir("d", 0o755)
	c.create("f", nil)
	c.wantErr(xUnlink(d), "unlink of a directory", unix.EISDIR)
	c.wantErr(xUnlink(c.path("missing")), "unlink of a missing name", unix.ENOENT)
	c.wantErr(xUnlink(c.path("f", "x")), "unlink of file/x", unix.ENOTDIR)
	c.wantErr(xUnlink(c.path("missing", "x")), "unlink in a missing directory", unix.ENOENT)
	err := retry(func() error { return unix.Unlinkat(unix.AT_FDCWD, c.path("f"), unix.AT_REMOVEDIR) })
	c.wantErr(err, "unlinkat AT_REMOVEDIR of a file", unix.ENOTDIR)
	c.wantErr(xUnlink(c.path("d", ".")), "unlink of d/.", unix.EISDIR)
	c.lstat(d)
	c.lstat(c.path("f"))
	// Unlinking a symlink removes the link, not the target.
	c.must(xSymlink("f", c.path("l")), "symlink")
	c.must(xUnlink(c.path("l")), "unlink a symlink")
	c.lstat(c.path("f"))
	c.must(xSymlink("d", c.path("ld")), "symlink")
	c.wantOK(xUnlink(c.path("ld")), "unlink a symlink to a directory")
	c.lstat(d)
}
