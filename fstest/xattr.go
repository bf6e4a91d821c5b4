package fstest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// Extended attributes: user.*, trusted.*, their permission rules, and POSIX
// ACLs (system.posix_acl_*).

var xattrChecks = []check{
	{"xattr/user", checkXattrUser},
	{"xattr/sizes", checkXattrSizes},
	{"xattr/names", checkXattrNames},
	{"xattr/trusted", checkXattrTrusted},
	{"xattr/symlink", checkXattrSymlink},
	{"xattr/perm", checkXattrPerm},
	{"xattr/ctime", checkXattrCtime},
	{"xattr/acl_access", checkACLAccess},
	{"xattr/acl_default", checkACLDefault},
}

// getx reads an attribute with a size query first, as getfattr does.
func (c *C) getx(p, name string) ([]byte, error) {
	n, err := xGetxattr(p, name, nil)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, n+16)
	m, err := xGetxattr(p, name, buf)
	if err != nil {
		return nil, err
	}
	if m != n {
		c.Errorf("getxattr %s: size query said %d, read returned %d", name, n, m)
	}
	return buf[:m], nil
}

// listx lists the attribute names of p in a namespace prefix, sorted.
func (c *C) listx(p, prefix string, follow bool) []string {
	c.Helper()
	list := xListxattr
	if !follow {
		list = xLlistxattr
	}
	n, err := list(p, nil)
	c.must(err, "listxattr size query")
	buf := make([]byte, n+16)
	m, err := list(p, buf)
	c.must(err, "listxattr")
	if m != n {
		c.Errorf("listxattr: size query said %d, list returned %d", n, m)
	}
	if m > 0 && buf[m-1] != 0 {
		c.Errorf("listxattr result is not NUL-terminated")
	}
	var out []string
	for _, name := range splitXattrList(buf[:m]) {
		if strings.HasPrefix(name, prefix) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

func checkXattrUser(c *C) {
	f := c.create("f", nil)
	c.must(xSetxattr(f, "user.a", []byte("hello"), 0), "setxattr user.a")
	if v, err := c.getx(f, "user.a"); err != nil || string(v) != "hello" {
		c.Errorf("getxattr user.a: %q, %s", v, errString(err))
	}
	c.wantErr(xSetxattr(f, "user.a", []byte("x"), unix.XATTR_CREATE), "XATTR_CREATE of an existing attribute", unix.EEXIST)
	c.wantErr(xSetxattr(f, "user.b", []byte("x"), unix.XATTR_REPLACE), "XATTR_REPLACE of a missing attribute", unix.ENODATA)
	c.must(xSetxattr(f, "user.a", []byte("bye"), unix.XATTR_REPLACE), "XATTR_REPLACE")
	if v, err := c.getx(f, "user.a"); err != nil || string(v) != "bye" {
		c.Errorf("getxattr after replace: %q, %s", v, errString(err))
	}
	c.must(xSetxattr(f, "user.b", nil, unix.XATTR_CREATE), "XATTR_CREATE of an empty value")
	if v, err := c.getx(f, "user.b"); err != nil || len(v) != 0 {
		c.Errorf("empty value reads back as %q, %s", v, errString(err))
	}
	bin := []byte{0, 1, 0, 0xff, 0xfe, 0, '\n'}
	c.must(xSetxattr(f, "user.bin", bin, 0), "setxattr of a binary value")
	if v, err := c.getx(f, "user.bin"); err != nil || !bytes.Equal(v, bin) {
		c.Errorf("binary value reads back as % x, %s", v, errString(err))
	}
	if got := c.listx(f, "user.", true); fmt.Sprint(got) != "[user.a user.b user.bin]" {
		c.Errorf("listxattr: %q, want [user.a user.b user.bin]", got)
	}
	_, err := c.getx(f, "user.missing")
	c.wantErr(err, "getxattr of a missing attribute", unix.ENODATA)
	_, err = xGetxattr(f, "user.a", make([]byte, 2))
	c.wantErr(err, "getxattr into a buffer too small", unix.ERANGE)
	_, err = xListxattr(f, make([]byte, 3))
	c.wantErr(err, "listxattr into a buffer too small", unix.ERANGE)
	c.must(xRemovexattr(f, "user.a"), "removexattr")
	_, err = c.getx(f, "user.a")
	c.wantErr(err, "getxattr after removexattr", unix.ENODATA)
	c.wantErr(xRemovexattr(f, "user.a"), "removexattr of a missing attribute", unix.ENODATA)
	if got := c.listx(f, "user.", true); fmt.Sprint(got) != "[user.b user.bin]" {
		c.Errorf("listxattr after remove: %q", got)
	}
	c.wantErr(xSetxattr(f, "user.a", []byte("x"), 4), "setxattr with unknown flags", unix.EINVAL)
	// Directories carry user attributes too, and they survive a rename.
	d := c.mkdir("d", 0o755)
	c.must(xSetxattr(d, "user.dir", []byte("on a dir"), 0), "setxattr on a directory")
	c.must(xRename(d, c.path("e")), "rename")
	if v, err := c.getx(c.path("e"), "user.dir"); err != nil || string(v) != "on a dir" {
		c.Errorf("directory attribute after rename: %q, %s", v, errString(err))
	}
	// Hard links share them.
	c.must(xLink(f, c.path("g")), "link")
	if v, err := c.getx(c.path("g"), "user.bin"); err != nil || !bytes.Equal(v, bin) {
		c.Errorf("attribute through another hard link: % x, %s", v, errString(err))
	}
	// Missing files.
	_, err = c.getx(c.path("missing"), "user.a")
	c.wantErr(err, "getxattr of a missing file", unix.ENOENT)
}

func checkXattrSizes(c *C) {
	// Each value on a file of its own: ext4 keeps all attributes of an
	// inode in one block.
	for _, n := range []int{1, 255, 256, 1000, 3000} {
		f := c.create(fmt.Sprintf("f%d", n), nil)
		v := pattern(uint64(n), 0, n)
		c.must(xSetxattr(f, "user.v", v, 0), "setxattr of %d bytes", n)
		got, err := c.getx(f, "user.v")
		c.must(err, "getxattr of %d bytes", n)
		c.wantBytes(fmt.Sprintf("value of %d bytes", n), got, v)
	}
	// Larger values up to the limit of 64 KiB either work exactly or are
	// refused for lack of space (ext4 without ea_inode).
	for _, n := range []int{4096, 16384, 65536} {
		f := c.create(fmt.Sprintf("f%d", n), nil)
		v := pattern(uint64(n), 0, n)
		err := xSetxattr(f, "user.v", v, 0)
		if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.E2BIG) {
			continue
		}
		c.must(err, "setxattr of %d bytes", n)
		got, err := c.getx(f, "user.v")
		c.must(err, "getxattr of %d bytes", n)
		c.wantBytes(fmt.Sprintf("value of %d bytes", n), got, v)
	}
	f := c.create("many", nil)
	c.wantErr(xSetxattr(f, "user.huge", make([]byte, 65537), 0), "setxattr of 65537 bytes", unix.E2BIG)
	for i := 0; i < 60; i++ {
		c.must(xSetxattr(f, fmt.Sprintf("user.m%02d", i), []byte{byte(i)}, 0), "setxattr %d", i)
	}
	if got := c.listx(f, "user.m", true); len(got) != 60 {
		c.Errorf("listxattr shows %d of 60 attributes", len(got))
	}
	for i := 0; i < 60; i += 7 {
		if v, err := c.getx(f, fmt.Sprintf("user.m%02d", i)); err != nil || len(v) != 1 || v[0] != byte(i) {
			c.Errorf("user.m%02d reads back as % x, %s", i, v, errString(err))
		}
	}
}

func checkXattrNames(c *C) {
	f := c.create("f", nil)
	long := "user." + strings.Repeat("n", 250) // 255 bytes
	c.must(xSetxattr(f, long, []byte("v"), 0), "setxattr with a 255-byte name")
	if v, err := c.getx(f, long); err != nil || string(v) != "v" {
		c.Errorf("getxattr with a 255-byte name: %q, %s", v, errString(err))
	}
	c.wantErr(xSetxattr(f, long+"n", []byte("v"), 0), "setxattr with a 256-byte name", unix.ERANGE)
	_, err := xGetxattr(f, long+"n", make([]byte, 10))
	c.wantErr(err, "getxattr with a 256-byte name", unix.ERANGE)
	c.wantErr(xSetxattr(f, "", []byte("v"), 0), "setxattr with an empty name", unix.ERANGE)
	c.wantErr(xSetxattr(f, "user.", []byte("v"), 0), "setxattr of \"user.\"", unix.EINVAL)
	c.wantErr(xSetxattr(f, "bogus.name", []byte("v"), 0), "setxattr in an unknown namespace", unix.EOPNOTSUPP)
	_, err = xGetxattr(f, "bogus.name", make([]byte, 10))
	c.wantErr(err, "getxattr in an unknown namespace", unix.EOPNOTSUPP)
	c.wantOK(xSetxattr(f, "user.with space\tand\x01", []byte("ok"), 0), "setxattr with odd characters in a name")
	if v, err := c.getx(f, "user.with space\tand\x01"); err != nil || string(v) != "ok" {
		c.Errorf("getxattr with odd characters: %q, %s", v, errString(err))
	}
}

func checkXattrTrusted(c *C) {
	f := c.create("f", nil)
	c.chmod(f, 0o666)
	c.must(xSetxattr(f, "trusted.t", []byte("root only"), 0), "setxattr trusted.t")
	if v, err := c.getx(f, "trusted.t"); err != nil || string(v) != "root only" {
		c.Errorf("getxattr trusted.t: %q, %s", v, errString(err))
	}
	c.wantErr(xSetxattr(f, "trusted.t", nil, unix.XATTR_CREATE), "XATTR_CREATE of an existing trusted attribute", unix.EEXIST)
	c.wantErr(xSetxattr(f, "trusted.u", nil, unix.XATTR_REPLACE), "XATTR_REPLACE of a missing trusted attribute", unix.ENODATA)
	c.must(xSetxattr(f, "user.u", []byte("everyone"), 0), "setxattr user.u")
	if got := c.listx(f, "trusted.", true); fmt.Sprint(got) != "[trusted.t]" {
		c.Errorf("root's listxattr: %q, want [trusted.t]", got)
	}
	res := c.as(c.user(),
		hop{Op: "listxattr", Path: f},
		hop{Op: "getxattr", Path: f, Path2: "trusted.t"},
		hop{Op: "setxattr", Path: f, Path2: "trusted.x", Data: []byte("x")},
		hop{Op: "getxattr", Path: f, Path2: "user.u"},
	)
	c.wantOK(res[0].err(), "user listxattr")
	for _, n := range res[0].Names {
		if strings.HasPrefix(n, "trusted.") {
			c.Errorf("a user's listxattr shows %q", n)
		}
	}
	if !contains(res[0].Names, "user.u") {
		c.Errorf("a user's listxattr does not show user.u: %q", res[0].Names)
	}
	c.wantErr(res[1].err(), "user getxattr trusted.t", unix.ENODATA)
	c.wantErr(res[2].err(), "user setxattr trusted.x", unix.EPERM)
	c.wantOK(res[3].err(), "user getxattr user.u")
	c.must(xRemovexattr(f, "trusted.t"), "removexattr trusted.t")
	_, err := c.getx(f, "trusted.t")
	c.wantErr(err, "getxattr after removexattr", unix.ENODATA)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func checkXattrSymlink(c *C) {
	f := c.create("f", nil)
	l := c.path("l")
	c.must(xSymlink("f", l), "symlink")
	c.wantErr(xLsetxattr(l, "user.x", []byte("v"), 0), "lsetxattr user.x on a symlink", unix.EPERM)
	_, err := xLgetxattr(l, "user.x", make([]byte, 10))
	c.wantErr(err, "lgetxattr user.x on a symlink", unix.ENODATA)
	// Following the link sets it on the target.
	c.must(xSetxattr(l, "user.x", []byte("target"), 0), "setxattr through a symlink")
	if v, err := c.getx(f, "user.x"); err != nil || string(v) != "target" {
		c.Errorf("attribute set through a symlink, read on the target: %q, %s", v, errString(err))
	}
	if got := c.listx(l, "user.", false); len(got) != 0 {
		c.Errorf("llistxattr of the symlink shows %q", got)
	}
	// trusted.* is allowed on a symlink for root.
	c.must(xLsetxattr(l, "trusted.x", []byte("link"), 0), "lsetxattr trusted.x on a symlink")
	n, err := xLgetxattr(l, "trusted.x", make([]byte, 10))
	if err != nil || n != 4 {
		c.Errorf("lgetxattr trusted.x on a symlink: %d, %s", n, errString(err))
	}
	if _, err := c.getx(f, "trusted.x"); err == nil {
		c.Errorf("lsetxattr on a symlink set the attribute on the target")
	}
	// user.* is refused on special files too.
	c.must(xMknod(c.path("fifo"), unix.S_IFIFO|0o644, 0), "mkfifo")
	c.wantErr(xSetxattr(c.path("fifo"), "user.x", []byte("v"), 0), "setxattr user.x on a fifo", unix.EPERM)
}

func checkXattrPerm(c *C) {
	ro := c.create("ro", nil)
	c.chmod(ro, 0o644)
	c.must(xSetxattr(ro, "user.a", []byte("a"), 0), "setxattr")
	secret := c.create("secret", nil)
	c.chmod(secret, 0o600)
	c.must(xSetxattr(secret, "user.a", []byte("a"), 0), "setxattr")
	rw := c.create("rw", nil)
	c.chmod(rw, 0o666)
	sticky := c.mkdir("sticky", 0o777)
	c.chmod(sticky, 0o1777)
	res := c.as(c.user(),
		hop{Op: "setxattr", Path: ro, Path2: "user.b", Data: []byte("b")},
		hop{Op: "getxattr", Path: ro, Path2: "user.a"},
		hop{Op: "getxattr", Path: secret, Path2: "user.a"},
		hop{Op: "setxattr", Path: rw, Path2: "user.b", Data: []byte("b")},
		hop{Op: "setxattr", Path: sticky, Path2: "user.b", Data: []byte("b")},
	)
	c.wantErr(res[0].err(), "user sets user.* without write permission", unix.EACCES)
	c.wantOK(res[1].err(), "user reads user.* with read permission")
	c.wantErr(res[2].err(), "user reads user.* without read permission", unix.EACCES)
	c.wantOK(res[3].err(), "user sets user.* with write permission")
	c.wantErr(res[4].err(), "non-owner sets user.* on a sticky directory", unix.EPERM)
}

func checkXattrCtime(c *C) {
	f := c.create("f", nil)
	before := c.stat(f)
	tick()
	c.must(xSetxattr(f, "user.a", []byte("a"), 0), "setxattr")
	after := c.stat(f)
	if !tsLess(before.Ctim, after.Ctim) {
		c.Errorf("setxattr did not change ctime (%s -> %s)", tsString(before.Ctim), tsString(after.Ctim))
	}
	if after.Mtim != before.Mtim {
		c.Errorf("setxattr changed mtime")
	}
	tick()
	c.must(xRemovexattr(f, "user.a"), "removexattr")
	if st := c.stat(f); !tsLess(after.Ctim, st.Ctim) {
		c.Errorf("removexattr did not change ctime")
	}
}

// POSIX ACL extended attribute format (struct posix_acl_xattr_header and
// posix_acl_xattr_entry, little endian).
const (
	aclUserObj  = 0x01
	aclUser     = 0x02
	aclGroupObj = 0x04
	aclGroup    = 0x08
	aclMask     = 0x10
	aclOther    = 0x20
	aclNoID     = 0xffffffff
)

type aclEntry struct {
	tag, perm uint16
	id        uint32
}

func encodeACL(ents []aclEntry) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 2)
	for _, e := range ents {
		b = binary.LittleEndian.AppendUint16(b, e.tag)
		b = binary.LittleEndian.AppendUint16(b, e.perm)
		b = binary.LittleEndian.AppendUint32(b, e.id)
	}
	return b
}

func decodeACL(b []byte) ([]aclEntry, error) {
	if len(b) < 4 || (len(b)-4)%8 != 0 || binary.LittleEndian.Uint32(b) != 2 {
		return nil, fmt.Errorf("malformed ACL of %d bytes", len(b))
	}
	var out []aclEntry
	for b = b[4:]; len(b) > 0; b = b[8:] {
		out = append(out, aclEntry{binary.LittleEndian.Uint16(b), binary.LittleEndian.Uint16(b[2:]), binary.LittleEndian.Uint32(b[4:])})
	}
	return out, nil
}

func aclString(ents []aclEntry) string {
	var parts []string
	for _, e := range ents {
		id := ""
		if e.tag == aclUser || e.tag == aclGroup {
			id = fmt.Sprint(e.id)
		}
		parts = append(parts, fmt.Sprintf("%#x:%s:%o", e.tag, id, e.perm))
	}
	return strings.Join(parts, ",")
}

func checkACLAccess(c *C) {
	f := c.create("f", []byte("acl"))
	c.chmod(f, 0o640)
	uid := c.opts.UID
	acl := []aclEntry{
		{aclUserObj, 6, aclNoID},
		{aclUser, 6, uid},
		{aclGroupObj, 4, aclNoID},
		{aclMask, 6, aclNoID},
		{aclOther, 0, aclNoID},
	}
	c.must(xSetxattr(f, "system.posix_acl_access", encodeACL(acl), 0), "set an access ACL")
	st := c.stat(f)
	c.wantMode("mode after setting an ACL with mask rw-", &st, unix.S_IFREG|0o660)
	v, err := c.getx(f, "system.posix_acl_access")
	c.must(err, "get the access ACL")
	got, err := decodeACL(v)
	c.must(err, "decode")
	if aclString(got) != aclString(acl) {
		c.Errorf("access ACL reads back as %s, want %s", aclString(got), aclString(acl))
	}
	res := c.as(c.user(), hop{Op: "open", Path: f, Flags: unix.O_RDWR})
	c.wantOK(res[0].err(), "named user of the ACL opens O_RDWR")
	c.wantErr(c.as1(c.other(), hop{Op: "open", Path: f, Flags: unix.O_RDONLY}), "user not in the ACL opens", unix.EACCES)
	// chmod sets the mask: the named user loses write access.
	c.chmod(f, 0o640)
	v, err = c.getx(f, "system.posix_acl_access")
	c.must(err, "get the ACL after chmod")
	got, _ = decodeACL(v)
	for _, e := range got {
		if e.tag == aclMask && e.perm != 4 {
			c.Errorf("ACL mask after chmod 0640 is %o, want 4", e.perm)
		}
	}
	res = c.as(c.user(), hop{Op: "open", Path: f, Flags: unix.O_RDWR}, hop{Op: "open", Path: f, Flags: unix.O_RDONLY})
	c.wantErr(res[0].err(), "named user opens O_RDWR after the mask became r--", unix.EACCES)
	c.wantOK(res[1].err(), "named user opens O_RDONLY after chmod")
	// Removing the ACL leaves the plain mode.
	c.must(xRemovexattr(f, "system.posix_acl_access"), "remove the ACL")
	c.wantErr(c.as1(c.user(), hop{Op: "open", Path: f, Flags: unix.O_RDONLY}), "former named user opens after the ACL is gone", unix.EACCES)
	// A malformed ACL is refused.
	c.wantErr(xSetxattr(f, "system.posix_acl_access", []byte{1, 2, 3}, 0), "setting a malformed ACL", unix.EINVAL)
}

func checkACLDefault(c *C) {
	d := c.mkdir("d", 0o755)
	uid := c.opts.UID
	def := []aclEntry{
		{aclUserObj, 7, aclNoID},
		{aclUser, 7, uid},
		{aclGroupObj, 5, aclNoID},
		{aclMask, 7, aclNoID},
		{aclOther, 5, aclNoID},
	}
	c.must(xSetxattr(d, "system.posix_acl_default", encodeACL(def), 0), "set a default ACL")
	// A new file gets an access ACL from the default ACL, and its mode is
	// the requested mode masked by that ACL: the umask does not apply.
	fd, err := xOpen(c.path("d", "f"), unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o666)
	c.must(err, "create below a default ACL")
	unix.Close(fd)
	st := c.stat(c.path("d", "f"))
	c.wantMode("file created 0666 below a default ACL", &st, unix.S_IFREG|0o664)
	v, err := c.getx(c.path("d", "f"), "system.posix_acl_access")
	if c.wantOK(err, "the new file has an access ACL") {
		got, _ := decodeACL(v)
		found := false
		for _, e := range got {
			if e.tag == aclUser && e.id == uid {
				found = e.perm == 7
			}
		}
		if !found {
			c.Errorf("inherited access ACL %s lacks user %d with rwx", aclString(got), uid)
		}
	}
	_, err = c.getx(c.path("d", "f"), "system.posix_acl_default")
	c.wantErr(err, "a file has no default ACL", unix.ENODATA)
	// A subdirectory inherits the default ACL as its own default.
	c.mkdir("d/sub", 0o777)
	v, err = c.getx(c.path("d", "sub"), "system.posix_acl_default")
	if c.wantOK(err, "subdirectory default ACL") {
		got, _ := decodeACL(v)
		if aclString(got) != aclString(def) {
			c.Errorf("subdirectory default ACL %s, want %s", aclString(got), aclString(def))
		}
	}
	st = c.stat(c.path("d", "sub"))
	c.wantMode("subdirectory created 0777 below a default ACL", &st, unix.S_IFDIR|0o775)
	// The named user may write there.
	c.wantOK(c.as1(c.user(), hop{Op: "write", Path: c.path("d", "sub", "u"), Flags: unix.O_CREAT, Mode: 0o600}), "named user creates below the default ACL")
	c.wantErr(xSetxattr(c.path("d", "f"), "system.posix_acl_default", encodeACL(def), 0), "setting a default ACL on a file", unix.EACCES, unix.EINVAL)
}
