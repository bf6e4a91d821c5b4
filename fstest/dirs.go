package fstest

import (
	"fmt"
	"math/rand/v2"
	"sort"

	"golang.org/x/sys/unix"
)

// Directories: mkdir, rmdir, link counts, readdir.

var dirChecks = []check{
	{"dir/mkdir", checkMkdir},
	{"dir/rmdir", checkRmdir},
	{"dir/nlink", checkDirNlink},
	{"dir/removed_cwd", checkRemovedDir},
}

var readdirChecks = []check{
	{"readdir/entries", checkReaddirEntries},
	{"readdir/large", checkReaddirLarge},
	{"readdir/modify_while_open", checkReaddirModify},
	{"readdir/seek_tell", checkReaddirSeek},
}

func checkMkdir(c *C) {
	d := c.path("d")
	c.must(xMkdir(d, 0o750), "mkdir")
	st := c.stat(d)
	c.wantMode("new directory", &st, unix.S_IFDIR|0o750&^processUmask())
	if st.Nlink != 2 {
		c.Errorf("new directory: nlink %d, want 2", st.Nlink)
	}
	names, err := listNames(d)
	c.must(err, "readdir")
	if len(names) != 0 {
		c.Errorf("new directory lists %q", names)
	}
	c.wantErr(xMkdir(d, 0o755), "mkdir of an existing directory", unix.EEXIST)
	f := c.create("f", nil)
	c.wantErr(xMkdir(f, 0o755), "mkdir over a file", unix.EEXIST)
	c.must(xSymlink("nowhere", c.path("dangling")), "symlink")
	c.wantErr(xMkdir(c.path("dangling"), 0o755), "mkdir over a dangling symlink", unix.EEXIST)
	c.wantErr(xMkdir(c.path("missing", "d"), 0o755), "mkdir in a missing directory", unix.ENOENT)
	c.wantErr(xMkdir(c.path("f", "d"), 0o755), "mkdir below a file", unix.ENOTDIR)
	// Mode bits beyond 0777 other than sticky are not kept by mkdir; the
	// sticky bit is.
	c.must(xMkdir(c.path("s"), 0o1777), "mkdir 01777")
	st = c.stat(c.path("s"))
	c.wantMode("mkdir with the sticky bit", &st, unix.S_IFDIR|0o1777&^processUmask())
	// A trailing slash is fine for mkdir.
	c.wantOK(xMkdir(c.path("t")+"/", 0o755), "mkdir with a trailing slash")
}

func checkRmdir(c *C) {
	d := c.mkdir("d", 0o755)
	c.create("d/f", nil)
	c.wantErr(xRmdir(d), "rmdir of a non-empty directory", unix.ENOTEMPTY, unix.EEXIST)
	c.wantErr(xRmdir(c.path("d", "f")), "rmdir of a file", unix.ENOTDIR)
	c.wantErr(xRmdir(c.path("missing")), "rmdir of a missing name", unix.ENOENT)
	c.wantErr(xRmdir(c.path("d", ".")), "rmdir of d/.", unix.EINVAL)
	c.wantErr(xRmdir(c.path("d", "..")), "rmdir of d/..", unix.ENOTEMPTY)
	c.must(xSymlink("d", c.path("l")), "symlink")
	c.wantErr(xRmdir(c.path("l")), "rmdir of a symlink to a directory", unix.ENOTDIR)
	c.wantErr(xRmdir(c.path("d", "f", "x")), "rmdir below a file", unix.ENOTDIR)
	c.must(xUnlink(c.path("d", "f")), "unlink")
	c.wantOK(xRmdir(d), "rmdir of an emptied directory")
	var st unix.Stat_t
	c.wantErr(xLstat(d, &st), "lstat after rmdir", unix.ENOENT)
	// A directory emptied of subdirectories can go too, and the parent's
	// link count follows.
	e := c.mkdir("e", 0o755)
	c.mkdir("e/sub", 0o755)
	c.wantNlink("with one subdirectory", e, 3)
	c.must(xRmdir(c.path("e", "sub")), "rmdir e/sub")
	c.wantNlink("after removing the subdirectory", e, 2)
	c.wantOK(xRmdir(e+"/"), "rmdir with a trailing slash")
}

func checkDirNlink(c *C) {
	top := c.Dir
	base := c.stat(top).Nlink
	if base != 2 {
		c.Errorf("empty check directory has nlink %d, want 2", base)
	}
	c.create("f1", nil)
	c.must(xSymlink("f1", c.path("l1")), "symlink")
	c.must(xMknod(c.path("p1"), unix.S_IFIFO|0o644, 0), "mkfifo")
	c.wantNlink("files do not count", top, 2)
	for i := 0; i < 5; i++ {
		c.mkdir(fmt.Sprintf("d%d", i), 0o755)
	}
	c.wantNlink("with 5 subdirectories", top, 7)
	c.mkdir("d0/x", 0o755)
	c.mkdir("d0/y", 0o755)
	c.wantNlink("d0 with 2 subdirectories", c.path("d0"), 4)
	c.wantNlink("grandchildren do not count", top, 7)
	c.must(xRename(c.path("d0", "x"), c.path("d1", "x")), "rename a subdirectory to a sibling")
	c.wantNlink("source after moving a subdirectory out", c.path("d0"), 3)
	c.wantNlink("target after moving a subdirectory in", c.path("d1"), 3)
	c.must(xRename(c.path("d1", "x"), c.path("x")), "rename a subdirectory up")
	c.wantNlink("after moving a subdirectory up", top, 8)
	c.wantNlink("after moving a subdirectory up", c.path("d1"), 2)
	c.must(xRmdir(c.path("x")), "rmdir")
	c.must(xRmdir(c.path("d4")), "rmdir")
	c.wantNlink("after two rmdirs", top, 6)
	// Renaming a directory within its parent keeps the count.
	c.must(xRename(c.path("d3"), c.path("d3renamed")), "rename")
	c.wantNlink("after renaming a subdirectory in place", top, 6)
	// A file renamed over does not change the count.
	c.must(xRename(c.path("f1"), c.path("d2", "f1")), "rename a file into a subdirectory")
	c.wantNlink("after moving a file", c.path("d2"), 2)
}

// checkRemovedDir: operations in a directory that was removed while open.
func checkRemovedDir(c *C) {
	d := c.mkdir("d", 0o755)
	fd := c.open(d, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	c.must(xRmdir(d), "rmdir")
	st := c.fstat(fd)
	if st.Nlink != 0 {
		c.Errorf("fstat of a removed directory: nlink %d, want 0", st.Nlink)
	}
	_, err := xOpenat(fd, "new", unix.O_CREAT|unix.O_WRONLY, 0o644)
	c.wantErr(err, "create in a removed directory", unix.ENOENT)
	err = retry(func() error { return unix.Mkdirat(fd, "sub", 0o755) })
	c.wantErr(err, "mkdir in a removed directory", unix.ENOENT)
	_, err = xGetdents(fd, make([]byte, 4096))
	c.wantErr(err, "getdents on a removed directory", unix.ENOENT)
}

func checkReaddirEntries(c *C) {
	c.create("file", []byte("x"))
	c.mkdir("dir", 0o755)
	c.must(xSymlink("file", c.path("link")), "symlink")
	c.must(xMknod(c.path("fifo"), unix.S_IFIFO|0o644, 0), "mkfifo")
	c.must(xMknod(c.path("sock"), unix.S_IFSOCK|0o644, 0), "mknod socket")
	c.must(xMknod(c.path("chr"), unix.S_IFCHR|0o644, int(unix.Mkdev(1, 3))), "mknod char device")
	c.must(xMknod(c.path("blk"), unix.S_IFBLK|0o644, int(unix.Mkdev(7, 0))), "mknod block device")
	c.must(xLink(c.path("file"), c.path("hard")), "link")

	for _, bufSize := range []int{32 << 10, 64} {
		fd := c.open(c.Dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		ents, err := readDirents(fd, bufSize)
		c.must(err, "getdents with a %d-byte buffer", bufSize)
		seen := map[string]int{}
		for _, e := range ents {
			seen[e.Name]++
			var st unix.Stat_t
			c.must(xLstat(c.path(e.Name), &st), "lstat %q", e.Name)
			if e.Name == "." || e.Name == ".." {
				if e.Type != unix.DT_DIR {
					c.Errorf("%q has d_type %d, want DT_DIR", e.Name, e.Type)
				}
				continue
			}
			if e.Type != dtypeOf(st.Mode) {
				c.Errorf("%q (a %s) has d_type %d, want %d", e.Name, typeOf(st.Mode), e.Type, dtypeOf(st.Mode))
			}
			if e.Ino != st.Ino {
				c.Errorf("%q has d_ino %d, but lstat says %d", e.Name, e.Ino, st.Ino)
			}
		}
		want := []string{".", "..", "blk", "chr", "dir", "fifo", "file", "hard", "link", "sock"}
		var got []string
		for name, n := range seen {
			got = append(got, name)
			if n != 1 {
				c.Errorf("%q listed %d times", name, n)
			}
		}
		sort.Strings(got)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			c.Errorf("buffer %d: entries %q, want %q", bufSize, got, want)
		}
		// A second read at the end returns nothing, and after a rewind
		// everything again.
		ents, err = readDirents(fd, bufSize)
		if err != nil || len(ents) != 0 {
			c.Errorf("getdents at the end: %d entries, %s", len(ents), errString(err))
		}
		_, err = xSeek(fd, 0, unix.SEEK_SET)
		c.must(err, "rewind")
		ents, err = readDirents(fd, bufSize)
		c.must(err, "getdents after rewind")
		if len(ents) != len(want) {
			c.Errorf("after rewinddir: %d entries, want %d", len(ents), len(want))
		}
	}
	// The ".." of the check directory is its parent.
	dot, dotdot := c.stat(c.Dir), c.stat(c.path(".."))
	for _, e := range mustList(c, c.Dir) {
		if e.Name == "." && e.Ino != dot.Ino {
			c.Errorf("\".\" has d_ino %d, want %d", e.Ino, dot.Ino)
		}
		if e.Name == ".." && e.Ino != dotdot.Ino {
			// FUSE cannot know the inode of the parent of its root, but the
			// check directory is below the root.
			c.Errorf("\"..\" has d_ino %d, want %d", e.Ino, dotdot.Ino)
		}
	}
	// getdents with a buffer too small for one entry fails with EINVAL.
	fd := c.open(c.Dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	_, err := xGetdents(fd, make([]byte, 8))
	c.wantErr(err, "getdents with an 8-byte buffer", unix.EINVAL)
	// getdents on a regular file fails with ENOTDIR.
	ffd := c.open(c.path("file"), unix.O_RDONLY, 0)
	_, err = xGetdents(ffd, make([]byte, 4096))
	c.wantErr(err, "getdents on a regular file", unix.ENOTDIR)
}

func mustList(c *C, p string) []dirent {
	c.Helper()
	ents, err := listDir(p)
	c.must(err, "readdir %s", p)
	return ents
}

// checkReaddirLarge lists 5000 entries with a small getdents buffer.
func checkReaddirLarge(c *C) {
	const n = 5000
	d := c.mkdir("big", 0o755)
	want := map[string]bool{}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("entry-%05d-%s", i, string(rune('a'+i%26)))
		want[name] = true
		fd, err := xOpen(c.path("big", name), unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644)
		c.must(err, "create %s", name)
		unix.Close(fd)
	}
	fd := c.open(d, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	ents, err := readDirents(fd, 512)
	c.must(err, "getdents with a 512-byte buffer")
	seen := map[string]bool{}
	offs := map[int64]string{}
	for _, e := range ents {
		if e.Name == "." || e.Name == ".." {
			continue
		}
		if seen[e.Name] {
			c.Errorf("%q listed twice", e.Name)
		}
		seen[e.Name] = true
		if !want[e.Name] {
			c.Errorf("unexpected entry %q", e.Name)
		}
		if prev, ok := offs[e.Off]; ok {
			c.Errorf("entries %q and %q share d_off %d", prev, e.Name, e.Off)
		}
		offs[e.Off] = e.Name
	}
	if len(seen) != n {
		missing := 0
		for name := range want {
			if !seen[name] {
				missing++
			}
		}
		c.Errorf("listed %d of %d entries (%d missing)", len(seen), n, missing)
	}
	if st := c.stat(d); st.Nlink != 2 {
		c.Errorf("directory with %d files: nlink %d, want 2", n, st.Nlink)
	}
}

// checkReaddirModify adds and removes entries while a directory stream is
// open. POSIX leaves open whether changed entries show up; entries that
// were not touched must be listed exactly once, and nothing that never
// existed may appear.
func checkReaddirModify(c *C) {
	const n = 600
	d := c.mkdir("d", 0o755)
	for i := 0; i < n; i++ {
		c.create(fmt.Sprintf("d/old%04d", i), nil)
	}
	fd := c.open(d, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	buf := make([]byte, 1024)
	k, err := xGetdents(fd, buf)
	c.must(err, "first getdents")
	first, err := parseDirents(buf[:k])
	c.must(err, "parse")
	seen := map[string]int{}
	for _, e := range first {
		seen[e.Name]++
	}
	// Remove every third old entry, add new ones.
	removed := map[string]bool{}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < n; i += 3 {
		name := fmt.Sprintf("old%04d", i)
		c.must(xUnlink(c.path("d", name)), "unlink")
		removed[name] = true
	}
	added := map[string]bool{}
	for i := 0; i < 200; i++ {
		name := fmt.Sprintf("new%04d-%d", i, rng.IntN(1000))
		c.create("d/"+name, nil)
		added[name] = true
	}
	rest, err := readDirents(fd, 1024)
	c.must(err, "getdents after changes")
	for _, e := range rest {
		seen[e.Name]++
	}
	for name, cnt := range seen {
		if cnt > 1 {
			c.Errorf("%q listed %d times by one directory stream", name, cnt)
		}
		if name != "." && name != ".." && !added[name] && !removed[name] && !isOld(name, n) {
			c.Errorf("unknown entry %q", name)
		}
	}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("old%04d", i)
		if !removed[name] && seen[name] != 1 {
			c.Errorf("untouched entry %q listed %d times", name, seen[name])
		}
	}
	// After a rewind the listing is exactly the current contents.
	_, err = xSeek(fd, 0, unix.SEEK_SET)
	c.must(err, "rewind")
	all, err := readDirents(fd, 1024)
	c.must(err, "getdents after rewind")
	got := map[string]int{}
	for _, e := range all {
		got[e.Name]++
	}
	if len(got) != n-len(removed)+len(added)+2 || len(all) != len(got) {
		c.Errorf("after rewind: %d entries (%d distinct), want %d", len(all), len(got), n-len(removed)+len(added)+2)
	}
	for name := range removed {
		if got[name] != 0 {
			c.Errorf("removed entry %q listed after rewind", name)
		}
	}
	for name := range added {
		if got[name] != 1 {
			c.Errorf("added entry %q listed %d times after rewind", name, got[name])
		}
	}
}

func isOld(name string, n int) bool {
	var i int
	if _, err := fmt.Sscanf(name, "old%04d", &i); err != nil {
		return false
	}
	return i >= 0 && i < n && name == fmt.Sprintf("old%04d", i)
}

// checkReaddirSeek: telldir/seekdir round trip through the d_off values.
func checkReaddirSeek(c *C) {
	d := c.mkdir("d", 0o755)
	for i := 0; i < 300; i++ {
		c.create(fmt.Sprintf("d/file-with-a-longish-name-%03d", i), nil)
	}
	fd := c.open(d, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	all, err := readDirents(fd, 4096)
	c.must(err, "getdents")
	if len(all) != 302 {
		c.Fatalf("listed %d entries, want 302", len(all))
	}
	// Seeking to an entry's d_off continues right after that entry.
	buf := make([]byte, 600)
	for _, i := range []int{0, 1, 2, 57, 150, 299, 300} {
		pos, err := xSeek(fd, all[i].Off, unix.SEEK_SET)
		c.must(err, "seekdir to d_off of entry %d", i)
		if pos != all[i].Off {
			c.Errorf("lseek returned %d, want %d", pos, all[i].Off)
		}
		if tell, _ := xSeek(fd, 0, unix.SEEK_CUR); tell != all[i].Off {
			c.Errorf("telldir after seekdir(%d) = %d", all[i].Off, tell)
		}
		k, err := xGetdents(fd, buf)
		c.must(err, "getdents after seekdir")
		ents, err := parseDirents(buf[:k])
		c.must(err, "parse")
		if len(ents) == 0 || ents[0].Name != all[i+1].Name {
			got := "nothing"
			if len(ents) > 0 {
				got = ents[0].Name
			}
			c.Errorf("after seekdir to the d_off of entry %d (%q): got %s, want %q", i, all[i].Name, got, all[i+1].Name)
		}
		// telldir after reading is the d_off of the last entry returned.
		if len(ents) > 0 {
			if tell, _ := xSeek(fd, 0, unix.SEEK_CUR); tell != ents[len(ents)-1].Off {
				c.Errorf("telldir after getdents = %d, want the last d_off %d", tell, ents[len(ents)-1].Off)
			}
		}
	}
	// The d_off of the last entry is the end of the stream.
	_, err = xSeek(fd, all[len(all)-1].Off, unix.SEEK_SET)
	c.must(err, "seekdir to the end")
	rest, err := readDirents(fd, 4096)
	if err != nil || len(rest) != 0 {
		c.Errorf("reading at the last d_off: %d entries, %s", len(rest), errString(err))
	}
	// A rewind gives the whole listing in the same order.
	_, err = xSeek(fd, 0, unix.SEEK_SET)
	c.must(err, "rewind")
	again, err := readDirents(fd, 4096)
	c.must(err, "getdents after rewind")
	if len(again) != len(all) {
		c.Fatalf("after rewind: %d entries, want %d", len(again), len(all))
	}
	for i := range all {
		if again[i].Name != all[i].Name || again[i].Off != all[i].Off {
			c.Errorf("after rewind entry %d is %q@%d, was %q@%d", i, again[i].Name, again[i].Off, all[i].Name, all[i].Off)
			break
		}
	}
}
