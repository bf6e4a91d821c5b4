package fstest

import (
	"golang.org/x/sys/unix"
)

// chmod, chown and utimens permission rules, set-id bits, setgid and
// sticky directories, as Linux local filesystems (ext4, tmpfs) apply them
// to root and to other users.

var permChecks = []check{
	{"perm/chmod", checkChmod},
	{"perm/chmod_nonowner", checkChmodNonOwner},
	{"perm/chown_root", checkChownRoot},
	{"perm/chown_nonroot", checkChownNonRoot},
	{"perm/create_owner", checkCreateOwner},
	{"perm/suid_cleared_on_write", checkSuidWrite},
	{"perm/suid_cleared_on_chown", checkSuidChown},
	{"perm/sgid_cleared_on_chmod", checkSgidChmod},
	{"perm/setgid_dir", checkSetgidDir},
	{"perm/sticky_dir", checkStickyDir},
	{"perm/utimens", checkUtimensPerm},
}

func checkChmod(c *C) {
	f := c.create("f", nil)
	for _, m := range []uint32{0, 0o777, 0o4755, 0o2755, 0o1755, 0o7777, 0o640} {
		c.must(xChmod(f, m), "chmod %#o", m)
		st := c.stat(f)
		c.wantMode("root chmod", &st, unix.S_IFREG|m)
	}
	d := c.mkdir("d", 0o755)
	c.must(xChmod(d, 0o3777), "chmod a directory")
	st := c.stat(d)
	c.wantMode("directory chmod", &st, unix.S_IFDIR|0o3777)
	// chmod through a symlink changes the target; the link stays 0777.
	c.must(xSymlink("f", c.path("l")), "symlink")
	c.must(xChmod(c.path("l"), 0o600), "chmod through a symlink")
	st = c.stat(f)
	c.wantMode("target after chmod through a symlink", &st, unix.S_IFREG|0o600)
	st = c.lstat(c.path("l"))
	c.wantMode("symlink after chmod through it", &st, unix.S_IFLNK|0o777)
	// fchmod on an O_RDONLY fd works for the owner.
	fd := c.open(f, unix.O_RDONLY, 0)
	c.must(retry(func() error { return unix.Fchmod(fd, 0o604) }), "fchmod")
	st = c.stat(f)
	c.wantMode("after fchmod", &st, unix.S_IFREG|0o604)
	c.wantErr(xChmod(c.path("missing"), 0o644), "chmod of a missing file", unix.ENOENT)

	// The owner, not root, may chmod too.
	u := c.create("u", nil)
	c.chown(u, int(c.opts.UID), int(c.opts.GID))
	c.wantOK(c.as1(c.user(), hop{Op: "chmod", Path: u, Mode: 0o4751}), "owner chmod 04751")
	st = c.stat(u)
	c.wantMode("after the owner's chmod", &st, unix.S_IFREG|0o4751)
}

func checkChmodNonOwner(c *C) {
	f := c.create("f", nil)
	c.chmod(f, 0o666)
	res := c.as(c.user(),
		hop{Op: "chmod", Path: f, Mode: 0o777},
		hop{Op: "chmod", Path: c.Dir, Mode: 0o700})
	c.wantErr(res[0].err(), "chmod of root's file by another user", unix.EPERM)
	c.wantErr(res[1].err(), "chmod of root's directory by another user", unix.EPERM)
	st := c.stat(f)
	c.wantMode("after the refused chmod", &st, unix.S_IFREG|0o666)
	// Group membership does not help either.
	o := c.create("o", nil)
	c.chown(o, int(c.opts.OtherUID), int(c.opts.GID))
	c.chmod(o, 0o664)
	c.wantErr(c.as1(c.user(), hop{Op: "chmod", Path: o, Mode: 0o666}), "chmod by a member of the file's group", unix.EPERM)
}

func checkChownRoot(c *C) {
	f := c.create("f", nil)
	uid, gid := int(c.opts.UID), int(c.opts.GID)
	c.must(xChown(f, uid, gid), "chown")
	st := c.stat(f)
	if st.Uid != uint32(uid) || st.Gid != uint32(gid) {
		c.Errorf("after chown %d:%d: %d:%d", uid, gid, st.Uid, st.Gid)
	}
	c.must(xChown(f, -1, int(c.opts.OtherGID)), "chown -1:gid")
	st = c.stat(f)
	if st.Uid != uint32(uid) || st.Gid != c.opts.OtherGID {
		c.Errorf("after chown -1:%d: %d:%d", c.opts.OtherGID, st.Uid, st.Gid)
	}
	c.must(xChown(f, int(c.opts.OtherUID), -1), "chown uid:-1")
	st = c.stat(f)
	if st.Uid != c.opts.OtherUID || st.Gid != c.opts.OtherGID {
		c.Errorf("after chown %d:-1: %d:%d", c.opts.OtherUID, st.Uid, st.Gid)
	}
	// Large ids that no user has are fine.
	c.must(xChown(f, 123456, 654321), "chown 123456:654321")
	st = c.stat(f)
	if st.Uid != 123456 || st.Gid != 654321 {
		c.Errorf("after chown 123456:654321: %d:%d", st.Uid, st.Gid)
	}
	d := c.mkdir("d", 0o755)
	c.must(xChown(d, uid, gid), "chown a directory")
	if st := c.stat(d); st.Uid != uint32(uid) || st.Gid != uint32(gid) {
		c.Errorf("directory after chown: %d:%d", st.Uid, st.Gid)
	}
	c.wantErr(xChown(c.path("missing"), 0, 0), "chown of a missing file", unix.ENOENT)
}

func checkChownNonRoot(c *C) {
	u := c.opts
	f := c.create("f", nil)
	c.chown(f, int(u.UID), int(u.GID))
	me := &Ident{UID: u.UID, GID: u.GID, Groups: []uint32{u.GID, u.ExtraGID}}
	res := c.as(me,
		hop{Op: "chown", Path: f, UID: int(u.OtherUID), GID: -1},     // give away: EPERM
		hop{Op: "chown", Path: f, UID: -1, GID: int(u.OtherGID)},     // group not mine: EPERM
		hop{Op: "chown", Path: f, UID: -1, GID: int(u.ExtraGID)},     // own supplementary group: ok
		hop{Op: "chown", Path: f, UID: int(u.UID), GID: int(u.GID)},  // own uid, primary group: ok
		hop{Op: "chown", Path: f, UID: -1, GID: -1},                  // no change: ok
		hop{Op: "chown", Path: c.Dir, UID: -1, GID: int(u.ExtraGID)}, // not the owner: EPERM
	)
	c.wantErr(res[0].err(), "non-root chown to another user", unix.EPERM)
	c.wantErr(res[1].err(), "non-root chgrp to a group it is not in", unix.EPERM)
	c.wantOK(res[2].err(), "non-root chgrp to its supplementary group")
	c.wantOK(res[3].err(), "non-root chown to its own uid and primary group")
	c.wantOK(res[4].err(), "non-root chown -1:-1")
	c.wantErr(res[5].err(), "non-root chgrp of a file it does not own", unix.EPERM)
	if st := c.stat(f); st.Uid != u.UID || st.Gid != u.GID {
		c.Errorf("after the user's chowns: %d:%d, want %d:%d", st.Uid, st.Gid, u.UID, u.GID)
	}
	// The intermediate chgrp took effect.
	g := c.create("g", nil)
	c.chown(g, int(u.UID), int(u.GID))
	c.wantOK(c.as1(me, hop{Op: "chown", Path: g, UID: -1, GID: int(u.ExtraGID)}), "chgrp to a supplementary group")
	if st := c.stat(g); st.Gid != u.ExtraGID {
		c.Errorf("group after chgrp: %d, want %d", st.Gid, u.ExtraGID)
	}
}

// checkCreateOwner: new files belong to the creating process's fsuid and
// fsgid.
func checkCreateOwner(c *C) {
	res := c.as(c.user(),
		hop{Op: "write", Path: c.path("f"), Flags: unix.O_CREAT | unix.O_EXCL, Mode: 0o644},
		hop{Op: "mkdir", Path: c.path("d"), Mode: 0o755},
		hop{Op: "symlink", Path: c.path("l"), Path2: "f"},
		hop{Op: "mknod", Path: c.path("p"), Mode: unix.S_IFIFO | 0o644},
	)
	for i, name := range []string{"f", "d", "l", "p"} {
		if !c.wantOK(res[i].err(), "user creates "+name) {
			continue
		}
		st := c.lstat(c.path(name))
		if st.Uid != c.opts.UID || st.Gid != c.opts.GID {
			c.Errorf("%s created by %d:%d is owned by %d:%d", name, c.opts.UID, c.opts.GID, st.Uid, st.Gid)
		}
	}
}

func checkSuidWrite(c *C) {
	// A user with write permission, not the owner.
	f := c.create("f", []byte("data"))
	c.chmod(f, 0o6777)
	c.wantOK(c.as1(c.user(), hop{Op: "write", Path: f, Data: []byte("x")}), "user writes a 06777 file")
	st := c.stat(f)
	c.wantMode("after a write by another user", &st, unix.S_IFREG|0o777)
	// The owner, not root: cleared too.
	g := c.create("g", []byte("data"))
	c.chown(g, int(c.opts.UID), int(c.opts.GID))
	c.chmod(g, 0o6755)
	c.wantOK(c.as1(c.user(), hop{Op: "write", Path: g, Data: []byte("x")}), "owner writes a 06755 file")
	st = c.stat(g)
	c.wantMode("after a write by the (non-root) owner", &st, unix.S_IFREG|0o755)
	// setgid without group execute (mandatory locking marker) survives a
	// write by a member of the group.
	h := c.create("h", []byte("data"))
	c.chown(h, int(c.opts.UID), int(c.opts.GID))
	c.chmod(h, 0o2644)
	c.wantOK(c.as1(c.user(), hop{Op: "write", Path: h, Data: []byte("x")}), "owner writes a 02644 file")
	st = c.stat(h)
	c.wantMode("02644 file after a write by its owner and group member", &st, unix.S_IFREG|0o2644)
	// Truncation by another user clears the bits as well.
	k := c.create("k", []byte("data"))
	c.chmod(k, 0o4777)
	c.wantOK(c.as1(c.user(), hop{Op: "truncate", Path: k, Len: 1}), "user truncates a 04777 file")
	st = c.stat(k)
	c.wantMode("after truncate by another user", &st, unix.S_IFREG|0o777)
	// Root keeps them (CAP_FSETID).
	r := c.create("r", []byte("data"))
	c.chmod(r, 0o6755)
	fd := c.open(r, unix.O_WRONLY, 0)
	c.must(writeFull(fd, []byte("x"), 0), "root writes")
	st = c.stat(r)
	c.wantMode("after a write by root", &st, unix.S_IFREG|0o6755)
}

func checkSuidChown(c *C) {
	f := c.create("f", nil)
	c.chmod(f, 0o6755)
	c.must(xChown(f, int(c.opts.UID), int(c.opts.GID)), "chown")
	st := c.stat(f)
	c.wantMode("06755 file after chown by root", &st, unix.S_IFREG|0o755)
	// setgid without group execute is kept by root's chown.
	g := c.create("g", nil)
	c.chmod(g, 0o6745)
	c.must(xChown(g, int(c.opts.UID), -1), "chown")
	st = c.stat(g)
	c.wantMode("06745 file after chown by root", &st, unix.S_IFREG|0o2745)
	// The owner's chgrp clears them too.
	h := c.create("h", nil)
	c.chown(h, int(c.opts.UID), int(c.opts.GID))
	c.chmod(h, 0o6755)
	me := &Ident{UID: c.opts.UID, GID: c.opts.GID, Groups: []uint32{c.opts.ExtraGID}}
	c.wantOK(c.as1(me, hop{Op: "chown", Path: h, UID: -1, GID: int(c.opts.ExtraGID)}), "owner chgrp")
	st = c.stat(h)
	c.wantMode("06755 file after chgrp by its owner", &st, unix.S_IFREG|0o755)
	// Directories keep their set-id bits.
	d := c.mkdir("d", 0o755)
	c.chmod(d, 0o2755)
	c.must(xChown(d, int(c.opts.UID), int(c.opts.GID)), "chown a directory")
	st = c.stat(d)
	c.wantMode("setgid directory after chown", &st, unix.S_IFDIR|0o2755)
}

func checkSgidChmod(c *C) {
	// The owner is not in the file's group: chmod g+s is accepted but the
	// bit is silently dropped.
	f := c.create("f", nil)
	c.chown(f, int(c.opts.UID), int(c.opts.OtherGID))
	c.wantOK(c.as1(c.user(), hop{Op: "chmod", Path: f, Mode: 0o2755}), "chmod 02755 by an owner outside the group")
	st := c.stat(f)
	c.wantMode("after chmod g+s by an owner outside the group", &st, unix.S_IFREG|0o755)
	// setuid is kept.
	c.wantOK(c.as1(c.user(), hop{Op: "chmod", Path: f, Mode: 0o6755}), "chmod 06755 by an owner outside the group")
	st = c.stat(f)
	c.wantMode("after chmod 06755 by an owner outside the group", &st, unix.S_IFREG|0o4755)
	// In the group (primary or supplementary) the bit sticks.
	g := c.create("g", nil)
	c.chown(g, int(c.opts.UID), int(c.opts.ExtraGID))
	me := &Ident{UID: c.opts.UID, GID: c.opts.GID, Groups: []uint32{c.opts.ExtraGID}}
	c.wantOK(c.as1(me, hop{Op: "chmod", Path: g, Mode: 0o2755}), "chmod 02755 by an owner in the group")
	st = c.stat(g)
	c.wantMode("after chmod g+s by a group member", &st, unix.S_IFREG|0o2755)
	// Root may set it regardless.
	h := c.create("h", nil)
	c.chown(h, int(c.opts.UID), int(c.opts.OtherGID))
	c.chmod(h, 0o2755)
	st = c.stat(h)
	c.wantMode("after chmod g+s by root", &st, unix.S_IFREG|0o2755)
}

func checkSetgidDir(c *C) {
	const grp = 4242
	d := c.mkdir("d", 0o777)
	c.chown(d, 0, grp)
	c.chmod(d, 0o2777)
	// Root's new entries get the directory's group.
	f := c.create("d/f", nil)
	if st := c.stat(f); st.Gid != grp {
		c.Errorf("file created by root in a setgid directory has gid %d, want %d", st.Gid, grp)
	}
	sub := c.mkdir("d/sub", 0o755)
	st := c.stat(sub)
	if st.Gid != grp {
		c.Errorf("subdirectory of a setgid directory has gid %d, want %d", st.Gid, grp)
	}
	c.wantMode("subdirectory of a setgid directory (inherits setgid)", &st, unix.S_IFDIR|0o2000|0o755&^processUmask())
	c.must(xSymlink("f", c.path("d", "l")), "symlink")
	if st := c.lstat(c.path("d", "l")); st.Gid != grp {
		c.Errorf("symlink in a setgid directory has gid %d, want %d", st.Gid, grp)
	}
	// Another user, not in the group: same group; the subdirectory gets
	// setgid; a setgid bit asked for on a new file is dropped.
	res := c.as(c.user(),
		hop{Op: "write", Path: c.path("d", "uf"), Flags: unix.O_CREAT | unix.O_EXCL, Mode: 0o644},
		hop{Op: "mkdir", Path: c.path("d", "ud"), Mode: 0o755},
		hop{Op: "stat", Path: c.path("d", "uf")},
		hop{Op: "stat", Path: c.path("d", "ud")},
		hop{Op: "mkdir", Path: c.path("d", "ud", "deeper"), Mode: 0o700},
		hop{Op: "stat", Path: c.path("d", "ud", "deeper")},
		hop{Op: "write", Path: c.path("d", "usg"), Flags: unix.O_CREAT | unix.O_EXCL, Mode: 0o2755},
		hop{Op: "stat", Path: c.path("d", "usg")},
	)
	for i := range res {
		c.wantOK(res[i].err(), "user op "+res[i].Op)
	}
	if s := res[2].Stat; s != nil && (s.UID != c.opts.UID || s.GID != grp) {
		c.Errorf("file created by the user in a setgid directory: %d:%d, want %d:%d", s.UID, s.GID, c.opts.UID, grp)
	}
	if s := res[3].Stat; s != nil {
		if s.GID != grp || s.Mode&unix.S_ISGID == 0 {
			c.Errorf("directory created by the user in a setgid directory: gid %d mode %#o, want gid %d with setgid", s.GID, s.Mode, grp)
		}
	}
	if s := res[5].Stat; s != nil && (s.GID != grp || s.Mode != unix.S_IFDIR|0o2700) {
		c.Errorf("grandchild directory: gid %d mode %#o, want %d and %#o", s.GID, s.Mode, grp, unix.S_IFDIR|0o2700)
	}
	if s := res[7].Stat; s != nil && s.Mode != unix.S_IFREG|0o755&^processUmask() {
		c.Errorf("file created 02755 in a setgid directory by a non-member: mode %#o, want %#o (setgid dropped)", s.Mode, unix.S_IFREG|0o755&^processUmask())
	}
	// Outside a setgid directory the creator's group is used.
	res = c.as(c.user(),
		hop{Op: "write", Path: c.path("plain"), Flags: unix.O_CREAT | unix.O_EXCL, Mode: 0o644},
		hop{Op: "stat", Path: c.path("plain")})
	c.wantOK(res[0].err(), "user creates a file outside the setgid directory")
	c.wantOK(res[1].err(), "user stats it")
	if s := res[1].Stat; s != nil && s.GID != c.opts.GID {
		c.Errorf("file created outside a setgid directory has gid %d, want %d", s.GID, c.opts.GID)
	}
}

func checkStickyDir(c *C) {
	d := c.mkdir("d", 0o777)
	c.chmod(d, 0o1777)
	other := c.other()
	res := c.as(other,
		hop{Op: "write", Path: c.path("d", "theirs"), Flags: unix.O_CREAT | unix.O_EXCL, Mode: 0o666},
		hop{Op: "write", Path: c.path("d", "theirs2"), Flags: unix.O_CREAT | unix.O_EXCL, Mode: 0o666},
		hop{Op: "mkdir", Path: c.path("d", "theirdir"), Mode: 0o777})
	for _, r := range res {
		c.must(r.err(), "other user creates in the sticky directory")
	}
	c.chmod(c.path("d", "theirs"), 0o666)
	res = c.as(c.user(),
		hop{Op: "unlink", Path: c.path("d", "theirs")},
		hop{Op: "rename", Path: c.path("d", "theirs"), Path2: c.path("d", "mine")},
		hop{Op: "rmdir", Path: c.path("d", "theirdir")},
		hop{Op: "write", Path: c.path("d", "mine"), Flags: unix.O_CREAT | unix.O_EXCL, Mode: 0o666},
		hop{Op: "rename", Path: c.path("d", "mine"), Path2: c.path("d", "theirs")}, // over theirs
		hop{Op: "rename", Path: c.path("d", "mine"), Path2: c.path("d", "mine2")},
		hop{Op: "write", Path: c.path("d", "theirs"), Data: []byte("still writable")},
	)
	c.wantErr(res[0].err(), "unlink of another user's file in a sticky directory", unix.EPERM)
	c.wantErr(res[1].err(), "rename of another user's file in a sticky directory", unix.EPERM)
	c.wantErr(res[2].err(), "rmdir of another user's directory in a sticky directory", unix.EPERM)
	c.wantOK(res[3].err(), "create own file in a sticky directory")
	c.wantErr(res[4].err(), "rename over another user's file in a sticky directory", unix.EPERM)
	c.wantOK(res[5].err(), "rename of an own file in a sticky directory")
	c.wantOK(res[6].err(), "write to another user's 0666 file in a sticky directory")
	c.stat(c.path("d", "theirs"))
	c.stat(c.path("d", "theirdir"))
	// The file's owner and the directory's owner may remove it; root too.
	c.wantOK(c.as1(other, hop{Op: "unlink", Path: c.path("d", "theirs")}), "owner unlinks own file in a sticky directory")
	c.chown(d, int(c.opts.UID), int(c.opts.GID))
	c.wantOK(c.as1(c.user(), hop{Op: "rename", Path: c.path("d", "theirs2"), Path2: c.path("d", "taken")}), "directory owner renames another user's file")
	c.wantOK(xRmdir(c.path("d", "theirdir")), "root removes another user's directory in a sticky directory")
	// Without the sticky bit anyone with write permission may.
	e := c.mkdir("e", 0o777)
	c.chmod(e, 0o777)
	c.must(c.as1(other, hop{Op: "write", Path: c.path("e", "f"), Flags: unix.O_CREAT, Mode: 0o644}), "create")
	c.wantOK(c.as1(c.user(), hop{Op: "unlink", Path: c.path("e", "f")}), "unlink of another user's file in a 0777 directory")
}

func checkUtimensPerm(c *C) {
	explicit := []int64{1_000_000_000, 5, 1_000_000_001, 6}
	// Not the owner, but may write: UTIME_NOW only.
	w := c.create("w", nil)
	c.chmod(w, 0o666)
	res := c.as(c.user(),
		hop{Op: "utimens_now", Path: w},
		hop{Op: "utimens", Path: w, Times: explicit})
	c.wantOK(res[0].err(), "utimensat(UTIME_NOW) by a non-owner with write permission")
	c.wantErr(res[1].err(), "utimensat with explicit times by a non-owner", unix.EPERM)
	// Neither owner nor writer: nothing.
	r := c.create("r", nil)
	c.chmod(r, 0o644)
	res = c.as(c.user(),
		hop{Op: "utimens_now", Path: r},
		hop{Op: "utimens", Path: r, Times: explicit})
	c.wantErr(res[0].err(), "utimensat(UTIME_NOW) without write permission", unix.EACCES)
	c.wantErr(res[1].err(), "utimensat with explicit times by a non-owner without write permission", unix.EPERM)
	// The owner may do both, even without write permission.
	o := c.create("o", nil)
	c.chown(o, int(c.opts.UID), int(c.opts.GID))
	c.chmod(o, 0o444)
	res = c.as(c.user(),
		hop{Op: "utimens", Path: o, Times: explicit},
		hop{Op: "utimens_now", Path: o})
	c.wantOK(res[0].err(), "utimensat with explicit times by the owner")
	c.wantOK(res[1].err(), "utimensat(UTIME_NOW) by the owner of a 0444 file")
	// Root may set anything.
	ts := []unix.Timespec{{Sec: 1_234_567_890, Nsec: 1}, {Sec: 1_234_567_891, Nsec: 2}}
	c.must(xUtimens(r, ts, 0), "root utimensat")
	st := c.stat(r)
	if st.Atim != ts[0] || st.Mtim != ts[1] {
		c.Errorf("times after root's utimensat: %s %s", tsString(st.Atim), tsString(st.Mtim))
	}
}
