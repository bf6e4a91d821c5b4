package fstest

import (
	"golang.org/x/sys/unix"
)

// Permission checks on open, on directory search and write, and access(2).

var accessChecks = []check{
	{"access/open", checkOpenPerm},
	{"access/dir_search", checkDirSearch},
	{"access/dir_write", checkDirWrite},
	{"access/access", checkAccess},
}

func checkOpenPerm(c *C) {
	f := c.create("f", []byte("secret"))
	c.chmod(f, 0o444)
	wo := c.create("wo", nil)
	c.chown(wo, int(c.opts.UID), int(c.opts.GID))
	c.chmod(wo, 0o200)
	grp := c.create("grp", nil)
	c.chown(grp, 0, int(c.opts.GID))
	c.chmod(grp, 0o640)
	// The owner class decides for the owner even when others may read.
	own := c.create("own", nil)
	c.chown(own, int(c.opts.UID), int(c.opts.GID))
	c.chmod(own, 0o044)

	res := c.as(c.user(),
		hop{Op: "open", Path: f, Flags: unix.O_WRONLY},
		hop{Op: "open", Path: f, Flags: unix.O_RDWR},
		hop{Op: "open", Path: f, Flags: unix.O_WRONLY | unix.O_TRUNC},
		hop{Op: "open", Path: f, Flags: unix.O_RDONLY},
		hop{Op: "open", Path: wo, Flags: unix.O_RDONLY},
		hop{Op: "open", Path: wo, Flags: unix.O_WRONLY},
		hop{Op: "open", Path: grp, Flags: unix.O_RDONLY},
		hop{Op: "open", Path: grp, Flags: unix.O_WRONLY},
		hop{Op: "open", Path: own, Flags: unix.O_RDONLY},
		hop{Op: "truncate", Path: f, Len: 0},
	)
	c.wantErr(res[0].err(), "user opens a 0444 file O_WRONLY", unix.EACCES)
	c.wantErr(res[1].err(), "user opens a 0444 file O_RDWR", unix.EACCES)
	c.wantErr(res[2].err(), "user opens a 0444 file O_WRONLY|O_TRUNC", unix.EACCES)
	c.wantOK(res[3].err(), "user opens a 0444 file O_RDONLY")
	c.wantErr(res[4].err(), "owner opens own 0200 file O_RDONLY", unix.EACCES)
	c.wantOK(res[5].err(), "owner opens own 0200 file O_WRONLY")
	c.wantOK(res[6].err(), "group member opens a 0640 file O_RDONLY")
	c.wantErr(res[7].err(), "group member opens a 0640 file O_WRONLY", unix.EACCES)
	c.wantErr(res[8].err(), "owner opens own 0044 file O_RDONLY", unix.EACCES)
	c.wantErr(res[9].err(), "user truncates a 0444 file", unix.EACCES)
	c.wantErr(c.as1(c.other(), hop{Op: "open", Path: grp, Flags: unix.O_RDONLY}), "non-member opens a 0640 file", unix.EACCES)
	c.wantBytes("0444 file after refused opens", c.readFile(f), []byte("secret"))

	// Root ignores permission bits for reading and writing.
	c.chmod(f, 0)
	fd, err := xOpen(f, unix.O_RDWR, 0)
	if c.wantOK(err, "root opens a 0000 file O_RDWR") {
		unix.Close(fd)
	}
}

func checkDirSearch(c *C) {
	d := c.mkdir("d", 0o777)
	f := c.create("d/f", []byte("x"))
	c.chmod(f, 0o644)
	c.chmod(d, 0o666) // read and write, no search
	res := c.as(c.user(),
		hop{Op: "stat", Path: f},
		hop{Op: "open", Path: f, Flags: unix.O_RDONLY},
		hop{Op: "readdir", Path: d},
		hop{Op: "write", Path: c.path("d", "new"), Flags: unix.O_CREAT, Mode: 0o644},
		hop{Op: "unlink", Path: f},
	)
	c.wantErr(res[0].err(), "stat below a directory without search permission", unix.EACCES)
	c.wantErr(res[1].err(), "open below a directory without search permission", unix.EACCES)
	if c.wantOK(res[2].err(), "list a directory with read but no search permission") && (len(res[2].Names) != 1 || res[2].Names[0] != "f") {
		c.Errorf("listing a 0666 directory: %q, want [f]", res[2].Names)
	}
	c.wantErr(res[3].err(), "create in a directory without search permission", unix.EACCES)
	c.wantErr(res[4].err(), "unlink in a directory without search permission", unix.EACCES)

	c.chmod(d, 0o711) // search only
	res = c.as(c.user(),
		hop{Op: "stat", Path: f},
		hop{Op: "read", Path: f},
		hop{Op: "readdir", Path: d},
	)
	c.wantOK(res[0].err(), "stat below a 0711 directory")
	c.wantOK(res[1].err(), "read below a 0711 directory")
	c.wantErr(res[2].err(), "list a 0711 directory", unix.EACCES)

	// Every ancestor must be searchable.
	c.chmod(d, 0o700)
	c.mkdir("d/sub", 0o777)
	c.create("d/sub/x", nil)
	c.wantErr(c.as1(c.user(), hop{Op: "stat", Path: c.path("d", "sub", "x")}), "stat below a 0700 grandparent", unix.EACCES)

	// Root needs no permission bits on directories.
	c.chmod(d, 0)
	c.stat(f)
	c.create("d/rootfile", nil)
	if _, err := listNames(d); err != nil {
		c.Errorf("root lists a 0000 directory: %s", errString(err))
	}
}

func checkDirWrite(c *C) {
	d := c.mkdir("d", 0o755)
	c.chmod(d, 0o755)
	f := c.create("d/f", nil)
	c.chmod(f, 0o666)
	res := c.as(c.user(),
		hop{Op: "write", Path: c.path("d", "new"), Flags: unix.O_CREAT, Mode: 0o644},
		hop{Op: "mkdir", Path: c.path("d", "sub"), Mode: 0o755},
		hop{Op: "unlink", Path: f},
		hop{Op: "rename", Path: f, Path2: c.path("d", "g")},
		hop{Op: "link", Path: f, Path2: c.path("d", "h")},
		hop{Op: "symlink", Path: c.path("d", "l"), Path2: "f"},
		hop{Op: "rename", Path: f, Path2: c.path("moved")},
		hop{Op: "write", Path: f, Data: []byte("writable file")},
	)
	c.wantErr(res[0].err(), "create in a 0755 root directory", unix.EACCES)
	c.wantErr(res[1].err(), "mkdir in a 0755 root directory", unix.EACCES)
	c.wantErr(res[2].err(), "unlink in a 0755 root directory", unix.EACCES)
	c.wantErr(res[3].err(), "rename in a 0755 root directory", unix.EACCES)
	c.wantErr(res[4].err(), "link into a 0755 root directory", unix.EACCES)
	c.wantErr(res[5].err(), "symlink in a 0755 root directory", unix.EACCES)
	c.wantErr(res[6].err(), "rename out of a 0755 root directory", unix.EACCES)
	c.wantOK(res[7].err(), "write to a 0666 file in a 0755 directory")
	c.stat(f)
	// With write and search permission everything works, whoever owns the
	// files (no sticky bit).
	c.chmod(d, 0o733)
	res = c.as(c.user(),
		hop{Op: "write", Path: c.path("d", "new"), Flags: unix.O_CREAT, Mode: 0o644},
		hop{Op: "rename", Path: f, Path2: c.path("d", "g")},
		hop{Op: "unlink", Path: c.path("d", "g")},
	)
	for _, r := range res {
		c.wantOK(r.err(), "user "+r.Op+" in a 0733 directory")
	}
	// Moving a directory to another parent needs write permission on the
	// directory itself (its ".." changes).
	c.chmod(d, 0o777)
	sub := c.mkdir("d/rootsub", 0o755)
	c.chmod(sub, 0o755)
	c.mkdir("other", 0o777)
	c.chmod(c.path("other"), 0o777)
	c.wantErr(c.as1(c.user(), hop{Op: "rename", Path: sub, Path2: c.path("other", "rootsub")}),
		"moving another user's 0755 directory to another parent", unix.EACCES)
	c.wantOK(c.as1(c.user(), hop{Op: "rename", Path: sub, Path2: c.path("d", "renamed")}),
		"renaming another user's directory within its parent")
}

func checkAccess(c *C) {
	f := c.create("f", nil)
	c.chmod(f, 0o644)
	c.wantOK(xFaccessat(f, unix.R_OK|unix.W_OK, 0), "root access(R_OK|W_OK)")
	c.wantErr(xFaccessat(f, unix.X_OK, 0), "root access(X_OK) on a file without any x bit", unix.EACCES)
	c.chmod(f, 0o100)
	c.wantOK(xFaccessat(f, unix.X_OK, 0), "root access(X_OK) on a 0100 file")
	c.chmod(f, 0)
	c.wantOK(xFaccessat(f, unix.R_OK|unix.W_OK, 0), "root access(R_OK|W_OK) on a 0000 file")
	c.wantOK(xFaccessat(c.Dir, unix.X_OK, 0), "root access(X_OK) on a directory")
	c.wantErr(xFaccessat(c.path("missing"), unix.F_OK, 0), "access(F_OK) of a missing file", unix.ENOENT)
	c.wantErr(xFaccessat(c.path("f", "x"), unix.F_OK, 0), "access(F_OK) of file/x", unix.ENOTDIR)
	c.wantErr(xFaccessat(f, 0o100, 0), "access with an invalid mode", unix.EINVAL)
	c.must(xSymlink("nowhere", c.path("dangling")), "symlink")
	c.wantErr(xFaccessat(c.path("dangling"), unix.F_OK, 0), "access(F_OK) of a dangling symlink", unix.ENOENT)
	c.wantOK(xFaccessat(c.path("dangling"), unix.F_OK, unix.AT_SYMLINK_NOFOLLOW), "faccessat(AT_SYMLINK_NOFOLLOW) of a dangling symlink")

	g := c.create("g", nil)
	c.chown(g, 0, int(c.opts.GID))
	c.chmod(g, 0o640)
	d := c.mkdir("d", 0o700)
	c.create("d/x", nil)
	res := c.as(c.user(),
		hop{Op: "access", Path: g, Mode: unix.R_OK},
		hop{Op: "access", Path: g, Mode: unix.W_OK},
		hop{Op: "access", Path: g, Mode: unix.F_OK},
		hop{Op: "access", Path: g, Mode: unix.R_OK, Flags: unix.AT_EACCESS},
		hop{Op: "access", Path: c.path("d", "x"), Mode: unix.F_OK},
		hop{Op: "access", Path: c.Dir, Mode: unix.R_OK | unix.W_OK | unix.X_OK},
		hop{Op: "access", Path: d, Mode: unix.X_OK},
	)
	c.wantOK(res[0].err(), "group member access(R_OK) on a 0640 file")
	c.wantErr(res[1].err(), "group member access(W_OK) on a 0640 file", unix.EACCES)
	c.wantOK(res[2].err(), "access(F_OK)")
	c.wantOK(res[3].err(), "faccessat(AT_EACCESS, R_OK) by a group member")
	c.wantErr(res[4].err(), "access(F_OK) below a 0700 root directory", unix.EACCES)
	c.wantOK(res[5].err(), "access(R_OK|W_OK|X_OK) on a 0777 directory")
	c.wantErr(res[6].err(), "access(X_OK) on a 0700 root directory", unix.EACCES)
	c.wantErr(c.as1(c.other(), hop{Op: "access", Path: g, Mode: unix.R_OK}), "non-member access(R_OK) on a 0640 file", unix.EACCES)
}
