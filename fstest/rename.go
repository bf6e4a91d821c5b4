package fstest

import (
	"golang.org/x/sys/unix"
)

// rename(2) and renameat2(2) in all their forms.

var renameChecks = []check{
	{"rename/file", checkRenameFile},
	{"rename/over_file", checkRenameOverFile},
	{"rename/over_empty_dir", checkRenameOverEmptyDir},
	{"rename/over_nonempty_dir", checkRenameOverNonemptyDir},
	{"rename/dir_over_file", checkRenameDirOverFile},
	{"rename/file_over_dir", checkRenameFileOverDir},
	{"rename/across_dirs", checkRenameAcrossDirs},
	{"rename/same_inode", checkRenameSameInode},
	{"rename/into_own_subdir", checkRenameIntoSubdir},
	{"rename/noreplace", checkRenameNoreplace},
	{"rename/exchange_files", checkExchangeFiles},
	{"rename/exchange_file_dir", checkExchangeFileDir},
	{"rename/errors", checkRenameErrors},
	{"rename/open_file", checkRenameOpenFile},
}

func (c *C) wantGone(p, what string) {
	c.Helper()
	var st unix.Stat_t
	if err := xLstat(p, &st); err == nil {
		c.Errorf("%s: %s still exists", what, p)
	} else {
		c.wantErr(err, what+": lstat of the old name", unix.ENOENT)
	}
}

func checkRenameFile(c *C) {
	a := c.create("a", []byte("A"))
	ino := c.stat(a).Ino
	b := c.path("b")
	c.must(xRename(a, b), "rename")
	c.wantGone(a, "rename to a new name")
	st := c.stat(b)
	if st.Ino != ino || st.Nlink != 1 {
		c.Errorf("renamed file: ino %d nlink %d, want %d and 1", st.Ino, st.Nlink, ino)
	}
	c.wantBytes("renamed file", c.readFile(b), []byte("A"))
	names, _ := listNames(c.Dir)
	if len(names) != 1 || names[0] != "b" {
		c.Errorf("directory after rename lists %q, want [b]", names)
	}
	// A directory, with contents.
	d := c.mkdir("d", 0o755)
	c.create("d/inner", []byte("in"))
	c.must(xRename(d, c.path("e")), "rename a directory")
	c.wantGone(d, "rename of a directory")
	c.wantBytes("file in a renamed directory", c.readFile(c.path("e", "inner")), []byte("in"))
	// A symlink and a fifo.
	c.must(xSymlink("b", c.path("l")), "symlink")
	c.must(xRename(c.path("l"), c.path("l2")), "rename a symlink")
	if t, _ := xReadlink(c.path("l2")); t != "b" {
		c.Errorf("renamed symlink reads %q", t)
	}
}

func checkRenameOverFile(c *C) {
	a := c.create("a", []byte("new"))
	b := c.create("b", []byte("old"))
	keep := c.path("keep")
	c.must(xLink(b, keep), "link")
	aIno := c.stat(a).Ino
	c.must(xRename(a, b), "rename over an existing file")
	c.wantGone(a, "rename over a file")
	st := c.stat(b)
	if st.Ino != aIno {
		c.Errorf("target name has inode %d, want the source's %d", st.Ino, aIno)
	}
	c.wantBytes("target after rename", c.readFile(b), []byte("new"))
	// The replaced file lost one name.
	c.wantNlink("replaced file with another name", keep, 1)
	c.wantBytes("replaced file", c.readFile(keep), []byte("old"))
	// Over a symlink: the symlink is replaced, its target untouched.
	c.must(xSymlink("keep", c.path("l")), "symlink")
	c.must(xRename(b, c.path("l")), "rename over a symlink")
	if st := c.lstat(c.path("l")); st.Mode&unix.S_IFMT != unix.S_IFREG {
		c.Errorf("rename over a symlink left a %s", typeOf(st.Mode))
	}
	c.wantBytes("symlink target after being renamed over", c.readFile(keep), []byte("old"))
	names, _ := listNames(c.Dir)
	if len(names) != 2 {
		c.Errorf("directory lists %q, want [keep l]", names)
	}
}

func checkRenameOverEmptyDir(c *C) {
	a := c.mkdir("a", 0o755)
	c.create("a/f", []byte("f"))
	b := c.mkdir("b", 0o755)
	c.wantNlink("parent with 2 subdirectories", c.Dir, 4)
	c.must(xRename(a, b), "rename a directory over an empty directory")
	c.wantGone(a, "rename over an empty directory")
	c.wantBytes("contents of the moved directory", c.readFile(c.path("b", "f")), []byte("f"))
	c.wantNlink("parent after rename over an empty directory", c.Dir, 3)
	// Across directories.
	c.mkdir("p", 0o755)
	c.mkdir("p/target", 0o755)
	c.mkdir("q", 0o755)
	c.mkdir("q/src", 0o755)
	c.must(xRename(c.path("q", "src"), c.path("p", "target")), "rename over an empty directory in another directory")
	c.wantNlink("source parent", c.path("q"), 2)
	c.wantNlink("target parent", c.path("p"), 3)
	up := c.stat(c.path("p", "target", ".."))
	if up.Ino != c.stat(c.path("p")).Ino {
		c.Errorf("\"..\" of the moved directory is not its new parent")
	}
}

func checkRenameOverNonemptyDir(c *C) {
	a := c.mkdir("a", 0o755)
	b := c.mkdir("b", 0o755)
	c.create("b/f", nil)
	c.wantErr(xRename(a, b), "rename a directory over a non-empty directory", unix.ENOTEMPTY, unix.EEXIST)
	c.stat(a)
	c.stat(c.path("b", "f"))
	c.mkdir("c", 0o755)
	c.mkdir("c/sub", 0o755)
	c.wantErr(xRename(a, c.path("c")), "rename over a directory with a subdirectory", unix.ENOTEMPTY, unix.EEXIST)
	c.wantNlink("parent after failed renames", c.Dir, 5)
}

func checkRenameDirOverFile(c *C) {
	d := c.mkdir("d", 0o755)
	f := c.create("f", []byte("f"))
	c.wantErr(xRename(d, f), "rename a directory over a file", unix.ENOTDIR)
	c.wantBytes("file after the failed rename", c.readFile(f), []byte("f"))
	c.stat(d)
	c.must(xSymlink("d", c.path("l")), "symlink")
	c.wantErr(xRename(d, c.path("l")), "rename a directory over a symlink to a directory", unix.ENOTDIR)
}

func checkRenameFileOverDir(c *C) {
	d := c.mkdir("d", 0o755)
	f := c.create("f", nil)
	c.wantErr(xRename(f, d), "rename a file over an empty directory", unix.EISDIR)
	c.create("d/x", nil)
	c.wantErr(xRename(f, d), "rename a file over a non-empty directory", unix.EISDIR)
	c.stat(f)
	c.stat(c.path("d", "x"))
}

func checkRenameAcrossDirs(c *C) {
	src := c.mkdir("src", 0o755)
	dst := c.mkdir("dst", 0o755)
	f := c.create("src/f", []byte("moved"))
	ino := c.stat(f).Ino
	tick()
	c.must(xRename(f, c.path("dst", "g")), "rename a file to another directory")
	c.wantGone(f, "rename across directories")
	st := c.stat(c.path("dst", "g"))
	if st.Ino != ino {
		c.Errorf("moved file has inode %d, want %d", st.Ino, ino)
	}
	c.wantBytes("moved file", c.readFile(c.path("dst", "g")), []byte("moved"))
	// A directory: parents' link counts and ".." follow.
	c.mkdir("src/sub", 0o755)
	c.create("src/sub/x", []byte("x"))
	c.wantNlink("source parent before", src, 3)
	c.must(xRename(c.path("src", "sub"), c.path("dst", "sub")), "rename a directory to another directory")
	c.wantNlink("source parent after moving a subdirectory out", src, 2)
	c.wantNlink("target parent after moving a subdirectory in", dst, 3)
	c.wantNlink("moved directory", c.path("dst", "sub"), 2)
	if up, d := c.stat(c.path("dst", "sub", "..")), c.stat(dst); up.Ino != d.Ino {
		c.Errorf("\"..\" of the moved directory has inode %d, want %d", up.Ino, d.Ino)
	}
	c.wantBytes("file in the moved directory", c.readFile(c.path("dst", "sub", "x")), []byte("x"))
	// Deeper: move a directory two levels up.
	c.mkdir("dst/sub/deep", 0o755)
	c.must(xRename(c.path("dst", "sub", "deep"), c.path("deep")), "rename a directory two levels up")
	c.wantNlink("check directory", c.Dir, 5)
	c.wantNlink("old grandparent", c.path("dst", "sub"), 2)
}

func checkRenameSameInode(c *C) {
	a := c.create("a", []byte("same"))
	b := c.path("b")
	c.must(xLink(a, b), "link")
	// POSIX: renaming one hard link onto another of the same file does
	// nothing and succeeds.
	c.wantOK(xRename(a, b), "rename onto another name of the same inode")
	c.stat(a)
	c.stat(b)
	c.wantNlink("after the no-op rename", a, 2)
	c.wantOK(xRename(a, a), "rename onto itself")
	c.stat(a)
	d := c.mkdir("d", 0o755)
	c.wantOK(xRename(d, d), "rename a directory onto itself")
	c.wantNlink("directory renamed onto itself", d, 2)
	names, _ := listNames(c.Dir)
	if len(names) != 3 {
		c.Errorf("directory lists %q, want [a b d]", names)
	}
}

func checkRenameIntoSubdir(c *C) {
	d := c.mkdir("d", 0o755)
	c.mkdir("d/sub", 0o755)
	c.wantErr(xRename(d, c.path("d", "sub", "x")), "rename a directory into its own subdirectory", unix.EINVAL)
	c.wantErr(xRename(d, c.path("d", "x")), "rename a directory into itself", unix.EINVAL)
	c.wantErr(xRename(c.Dir, c.path("d", "x")), "rename an ancestor into a descendant", unix.EINVAL)
	// An existing target inside too.
	c.mkdir("d/sub/empty", 0o755)
	c.wantErr(xRename(d, c.path("d", "sub", "empty")), "rename a directory over its own empty subdirectory", unix.EINVAL, unix.ENOTEMPTY)
	// And the descendant cannot replace the ancestor.
	c.wantErr(xRename(c.path("d", "sub"), d), "rename a subdirectory over its parent", unix.ENOTEMPTY, unix.EEXIST)
	c.stat(c.path("d", "sub", "empty"))
	c.wantNlink("after the refused renames", d, 3)
}

func checkRenameNoreplace(c *C) {
	a := c.create("a", []byte("a"))
	b := c.create("b", []byte("b"))
	c.wantErr(xRename2(a, b, unix.RENAME_NOREPLACE), "RENAME_NOREPLACE onto an existing file", unix.EEXIST)
	c.wantBytes("source after refused RENAME_NOREPLACE", c.readFile(a), []byte("a"))
	c.wantBytes("target after refused RENAME_NOREPLACE", c.readFile(b), []byte("b"))
	d := c.mkdir("d", 0o755)
	c.wantErr(xRename2(c.mkdir("e", 0o755), d, unix.RENAME_NOREPLACE), "RENAME_NOREPLACE of a directory onto an empty directory", unix.EEXIST)
	c.must(xSymlink("nowhere", c.path("dangling")), "symlink")
	c.wantErr(xRename2(a, c.path("dangling"), unix.RENAME_NOREPLACE), "RENAME_NOREPLACE onto a dangling symlink", unix.EEXIST)
	c.wantOK(xRename2(a, c.path("d", "new"), unix.RENAME_NOREPLACE), "RENAME_NOREPLACE to a free name")
	c.wantGone(a, "RENAME_NOREPLACE")
	c.wantBytes("moved with RENAME_NOREPLACE", c.readFile(c.path("d", "new")), []byte("a"))
	c.wantErr(xRename2(b, c.path("x"), unix.RENAME_NOREPLACE|unix.RENAME_EXCHANGE), "RENAME_NOREPLACE|RENAME_EXCHANGE", unix.EINVAL)
	c.wantErr(xRename2(b, c.path("x"), 1<<20), "renameat2 with an unknown flag", unix.EINVAL)
}

func checkExchangeFiles(c *C) {
	c.mkdir("p", 0o755)
	c.mkdir("q", 0o755)
	a := c.create("p/a", []byte("AAAA"))
	b := c.create("q/b", []byte("BB"))
	c.must(xLink(b, c.path("b2")), "link")
	ia, ib := c.stat(a).Ino, c.stat(b).Ino
	c.must(xRename2(a, b, unix.RENAME_EXCHANGE), "RENAME_EXCHANGE of two files in different directories")
	if c.stat(a).Ino != ib || c.stat(b).Ino != ia {
		c.Errorf("after exchange p/a has inode %d and q/b %d, want %d and %d", c.stat(a).Ino, c.stat(b).Ino, ib, ia)
	}
	c.wantBytes("p/a after exchange", c.readFile(a), []byte("BB"))
	c.wantBytes("q/b after exchange", c.readFile(b), []byte("AAAA"))
	c.wantNlink("exchanged file with a second name", a, 2)
	c.wantNlink("exchanged file", b, 1)
	c.wantNlink("parent p", c.path("p"), 2)
	c.wantNlink("parent q", c.path("q"), 2)
	// Exchanging a file with a symlink.
	c.must(xSymlink("target", c.path("p", "l")), "symlink")
	c.must(xRename2(c.path("p", "l"), b, unix.RENAME_EXCHANGE), "exchange a symlink and a file")
	if t, err := xReadlink(b); err != nil || t != "target" {
		c.Errorf("q/b after exchanging with a symlink: %q, %s", t, errString(err))
	}
	c.wantBytes("p/l after exchanging with a file", c.readFile(c.path("p", "l")), []byte("AAAA"))
	// The target must exist.
	c.wantErr(xRename2(a, c.path("q", "missing"), unix.RENAME_EXCHANGE), "RENAME_EXCHANGE with a missing target", unix.ENOENT)
	c.stat(a)
}

func checkExchangeFileDir(c *C) {
	p := c.mkdir("p", 0o755)
	q := c.mkdir("q", 0o755)
	f := c.create("p/f", []byte("file"))
	d := c.mkdir("q/d", 0o755)
	c.create("q/d/inner", []byte("inner"))
	c.wantNlink("p before", p, 2)
	c.wantNlink("q before", q, 3)
	c.must(xRename2(f, d, unix.RENAME_EXCHANGE), "RENAME_EXCHANGE of a file and a directory")
	if st := c.lstat(f); st.Mode&unix.S_IFMT != unix.S_IFDIR {
		c.Errorf("p/f is a %s after exchange, want a directory", typeOf(st.Mode))
	}
	if st := c.lstat(d); st.Mode&unix.S_IFMT != unix.S_IFREG {
		c.Errorf("q/d is a %s after exchange, want a file", typeOf(st.Mode))
	}
	c.wantBytes("q/d after exchange", c.readFile(d), []byte("file"))
	c.wantBytes("p/f/inner after exchange", c.readFile(c.path("p", "f", "inner")), []byte("inner"))
	c.wantNlink("p after receiving the directory", p, 3)
	c.wantNlink("q after giving the directory away", q, 2)
	if up, pp := c.stat(c.path("p", "f", "..")), c.stat(p); up.Ino != pp.Ino {
		c.Errorf("\"..\" of the exchanged directory has inode %d, want p's %d", up.Ino, pp.Ino)
	}
	// Two directories, one empty and one not, may be exchanged.
	c.mkdir("q/e", 0o755)
	c.must(xRename2(f, c.path("q", "e"), unix.RENAME_EXCHANGE), "RENAME_EXCHANGE of two directories")
	c.wantBytes("q/e/inner after exchanging directories", c.readFile(c.path("q", "e", "inner")), []byte("inner"))
	c.wantNlink("p after exchanging directories", p, 3)
	c.wantNlink("q after exchanging directories", q, 3)
	// A directory cannot be exchanged with its own descendant.
	c.mkdir("q/e/deeper", 0o755)
	c.wantErr(xRename2(c.path("q", "e"), c.path("q", "e", "deeper"), unix.RENAME_EXCHANGE), "exchange a directory with its subdirectory", unix.EINVAL)
}

func checkRenameErrors(c *C) {
	f := c.create("f", []byte("f"))
	d := c.mkdir("d", 0o755)
	c.wantErr(xRename(c.path("missing"), c.path("x")), "rename of a missing name", unix.ENOENT)
	c.wantErr(xRename(f, c.path("missing", "x")), "rename into a missing directory", unix.ENOENT)
	c.wantErr(xRename(f, c.path("f", "x")), "rename to below a file", unix.ENOTDIR)
	c.wantErr(xRename(c.path("f", "x"), c.path("y")), "rename of file/x", unix.ENOTDIR)
	c.wantErr(xRename(c.path("d", "."), c.path("y")), "rename of d/.", unix.EBUSY, unix.EINVAL)
	c.wantErr(xRename(c.path("d", ".."), c.path("y")), "rename of d/..", unix.EBUSY, unix.EINVAL)
	c.wantErr(xRename(f, c.path("d", ".")), "rename onto d/.", unix.EBUSY, unix.EINVAL, unix.EISDIR)
	c.wantErr(xRename(f+"/", c.path("g")), "rename of a file with a trailing slash", unix.ENOTDIR)
	c.wantErr(xRename(f, c.path("g")+"/"), "rename of a file to a name with a trailing slash", unix.ENOTDIR)
	c.wantOK(xRename(d+"/", c.path("e")+"/"), "rename of a directory with trailing slashes")
	c.wantBytes("file after failed renames", c.readFile(f), []byte("f"))
}

func checkRenameOpenFile(c *C) {
	f := c.create("f", []byte("0123"))
	fd := c.open(f, unix.O_RDWR, 0)
	c.mkdir("d", 0o755)
	g := c.path("d", "g")
	c.must(xRename(f, g), "rename an open file")
	c.must(writeFull(fd, []byte("AB"), 4), "write through the fd after rename")
	c.wantBytes("renamed open file", c.readFile(g), []byte("0123AB"))
	// Renaming another file over the open one: the fd keeps the old file.
	c.create("h", []byte("other"))
	c.must(xRename(c.path("h"), g), "rename over the open file")
	got, err := readAllFd(fd)
	c.must(err, "read")
	c.wantBytes("open file after being renamed over", got, []byte("0123AB"))
	if st := c.fstat(fd); st.Nlink != 0 {
		c.Errorf("open file replaced by rename: nlink %d, want 0", st.Nlink)
	}
	c.wantBytes("new file under the name", c.readFile(g), []byte("other"))
}
