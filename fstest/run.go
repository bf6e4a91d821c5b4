package fstest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Options tunes Run. The zero value is usable.
type Options struct {
	// Skip maps a check name (one of Checks()) to the reason why the
	// filesystem under test knowingly differs from Linux tmpfs there. Run
	// calls t.Skip(reason) for those checks. An unknown name makes Run fail,
	// so a skip list cannot silently rot when checks are renamed.
	Skip map[string]string

	// UID and GID are the unprivileged identity the non-root checks run
	// as. Default 1000/1000.
	UID, GID uint32
	// OtherUID and OtherGID are a second unprivileged identity, distinct
	// from the first. Default 1001/1001.
	OtherUID, OtherGID uint32
	// ExtraGID is a group that UID is given as a supplementary group in some
	// checks (chgrp to an own group). Default 1002.
	ExtraGID uint32

	// KeepFailed leaves the directory of a failed check in place for
	// inspection instead of removing it.
	KeepFailed bool
}

func (o *Options) setDefaults() {
	def := func(v *uint32, d uint32) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.UID, 1000)
	def(&o.GID, 1000)
	def(&o.OtherUID, 1001)
	def(&o.OtherGID, 1001)
	def(&o.ExtraGID, 1002)
}

// check is one conformance check. name is "area/leaf"; Run runs it as the
// subtest area/leaf.
type check struct {
	name string
	fn   func(c *C)
}

// allChecks lists every check in the order Run runs them.
var allChecks = concat(
	fileChecks,
	openFlagChecks,
	fallocChecks,
	dirChecks,
	readdirChecks,
	symlinkChecks,
	linkChecks,
	renameChecks,
	permChecks,
	accessChecks,
	xattrChecks,
	lockChecks,
	mmapChecks,
	specialChecks,
	nameChecks,
	timeChecks,
)

func concat(lists ...[]check) []check {
	var out []check
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// Checks returns the names of all checks Run runs, in order. They are the
// valid keys of Options.Skip and the subtest names below the test that
// calls Run ("TestX/rename/noreplace").
func Checks() []string {
	names := make([]string, len(allChecks))
	for i, c := range allChecks {
		names[i] = c.name
	}
	return names
}

// ValidateSkip reports an error naming every key of skip that is not a
// check name, and every empty reason.
func ValidateSkip(skip map[string]string) error {
	known := map[string]bool{}
	for _, c := range allChecks {
		known[c.name] = true
	}
	var bad []string
	for name, reason := range skip {
		if !known[name] {
			bad = append(bad, fmt.Sprintf("unknown check %q", name))
		} else if strings.TrimSpace(reason) == "" {
			bad = append(bad, fmt.Sprintf("check %q skipped without a reason", name))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	return errors.New("fstest: bad skip list: " + strings.Join(bad, "; "))
}

// Run runs every check against dir, each as a subtest in a fresh
// subdirectory of dir. It must run as root, and dir must be reachable by
// the unprivileged users of opts (see the package documentation).
func Run(t *testing.T, dir string, opts Options) {
	t.Helper()
	guardHelper()
	opts.setDefaults()
	if err := ValidateSkip(opts.Skip); err != nil {
		t.Fatal(err)
	}
	requireRoot(t)
	preflight(t, dir, &opts)

	var area string
	var group []check
	flush := func() {
		if len(group) == 0 {
			return
		}
		checks := group
		t.Run(area, func(t *testing.T) {
			for _, chk := range checks {
				runCheck(t, dir, &opts, chk)
			}
		})
		group = nil
	}
	for _, chk := range allChecks {
		a, _, _ := strings.Cut(chk.name, "/")
		if a != area {
			flush()
			area = a
		}
		group = append(group, chk)
	}
	flush()
}

func runCheck(t *testing.T, dir string, opts *Options, chk check) {
	_, leaf, _ := strings.Cut(chk.name, "/")
	t.Run(leaf, func(t *testing.T) {
		if reason, ok := opts.Skip[chk.name]; ok {
			t.Skip(reason)
		}
		d, err := os.MkdirTemp(dir, strings.ReplaceAll(chk.name, "/", ".")+".")
		if err != nil {
			t.Fatalf("creating the check directory: %v", err)
		}
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatalf("chmod 0777 %s: %v", d, err)
		}
		c := &C{T: t, Dir: d, opts: opts}
		t.Cleanup(func() {
			if opts.KeepFailed && t.Failed() {
				t.Logf("keeping %s", d)
				return
			}
			if err := removeAll(d); err != nil {
				t.Errorf("removing the check directory: %v", err)
			}
		})
		chk.fn(c)
	})
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("fstest must run as root (euid is %d): the checks use chown, mknod, trusted xattrs and switch to other users", os.Geteuid())
	}
}

// preflight makes sure the unprivileged user can reach dir and create
// files below it, so that a wrongly set up directory fails once with a
// clear message instead of making every non-root check fail.
func preflight(t *testing.T, dir string, opts *Options) {
	t.Helper()
	var st unix.Stat_t
	if err := xStat(dir, &st); err != nil {
		t.Fatalf("fstest: %v", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		t.Fatalf("fstest: %s is not a directory", dir)
	}
	probe, err := os.MkdirTemp(dir, "preflight.")
	if err != nil {
		t.Fatalf("fstest: creating a directory in %s: %v", dir, err)
	}
	defer removeAll(probe)
	if err := os.Chmod(probe, 0o777); err != nil {
		t.Fatalf("fstest: %v", err)
	}
	id := Ident{UID: opts.UID, GID: opts.GID}
	f := probe + "/probe"
	res, err := runHelper(&id, []hop{
		{Op: "write", Path: f, Flags: unix.O_CREAT | unix.O_EXCL, Mode: 0o644, Data: []byte("x")},
		{Op: "stat", Path: f},
	})
	if err != nil {
		t.Fatalf("fstest: running the helper process: %v", err)
	}
	for _, r := range res {
		if r.Errno != 0 {
			t.Fatalf("fstest: uid %d cannot create and stat a file in a 0777 directory below %s (%s: %v): "+
				"every ancestor of the directory must be searchable by other users (o+x), and a FUSE mount needs allow_other",
				opts.UID, dir, r.Op, unix.Errno(r.Errno))
		}
	}
	if s := res[1].Stat; s.UID != opts.UID || s.GID != opts.GID {
		t.Logf("fstest: warning: a file created by uid %d gid %d is owned by %d:%d", opts.UID, opts.GID, s.UID, s.GID)
	}
}

// C is the context of one check: the subtest and its private directory.
type C struct {
	*testing.T
	// Dir is the check's own directory, mode 0777, empty at the start.
	Dir  string
	opts *Options
	fds  map[int]bool // open fds from c.open
}

// path joins elem below the check directory with "/", without cleaning,
// so that "." and ".." stay what the check means.
func (c *C) path(elem ...string) string {
	return c.Dir + "/" + strings.Join(elem, "/")
}

// user is the unprivileged identity; other the second one.
func (c *C) user() *Ident  { return &Ident{UID: c.opts.UID, GID: c.opts.GID} }
func (c *C) other() *Ident { return &Ident{UID: c.opts.OtherUID, GID: c.opts.OtherGID} }

// must fails the check at once if err is not nil.
func (c *C) must(err error, format string, args ...any) {
	c.Helper()
	if err != nil {
		c.Fatalf("%s: %v", fmt.Sprintf(format, args...), errString(err))
	}
}

// wantErr reports an error unless err is one of want.
func (c *C) wantErr(err error, what string, want ...unix.Errno) bool {
	c.Helper()
	for _, w := range want {
		if errors.Is(err, w) {
			return true
		}
	}
	names := make([]string, len(want))
	for i, w := range want {
		names[i] = errnoName(w)
	}
	c.Errorf("%s: got %s, want %s", what, errString(err), strings.Join(names, " or "))
	return false
}

// wantOK reports an error if err is not nil, and says whether it was nil.
func (c *C) wantOK(err error, what string) bool {
	c.Helper()
	if err != nil {
		c.Errorf("%s: unexpected error %s", what, errString(err))
		return false
	}
	return true
}

// errnoName is "EEXIST (file exists)".
func errnoName(e unix.Errno) string {
	if n := unix.ErrnoName(e); n != "" {
		return fmt.Sprintf("%s (%v)", n, error(e))
	}
	return fmt.Sprintf("errno %d (%v)", int(e), error(e))
}

func errString(err error) string {
	if err == nil {
		return "success"
	}
	var e unix.Errno
	if errors.As(err, &e) {
		if e == 0 {
			return "success"
		}
		if s := err.Error(); s != e.Error() {
			return s + " [" + unix.ErrnoName(e) + "]"
		}
		return errnoName(e)
	}
	return err.Error()
}

// create makes a regular file with mode 0644 (before umask) holding data
// and returns its path.
func (c *C) create(name string, data []byte) string {
	c.Helper()
	p := c.path(name)
	fd, err := xOpen(p, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644)
	c.must(err, "create %s", name)
	defer unix.Close(fd)
	if len(data) > 0 {
		c.must(writeFull(fd, data, 0), "write %s", name)
	}
	return p
}

func (c *C) mkdir(name string, mode uint32) string {
	c.Helper()
	p := c.path(name)
	c.must(xMkdir(p, mode), "mkdir %s", name)
	return p
}

func (c *C) stat(p string) unix.Stat_t {
	c.Helper()
	var st unix.Stat_t
	c.must(xStat(p, &st), "stat %s", p)
	return st
}

func (c *C) lstat(p string) unix.Stat_t {
	c.Helper()
	var st unix.Stat_t
	c.must(xLstat(p, &st), "lstat %s", p)
	return st
}

func (c *C) fstat(fd int) unix.Stat_t {
	c.Helper()
	var st unix.Stat_t
	c.must(xFstat(fd, &st), "fstat")
	return st
}

// open opens p or fails the check; the fd is closed when the check ends
// unless the check closes it earlier with c.close.
func (c *C) open(p string, flags int, mode uint32) int {
	c.Helper()
	fd, err := xOpen(p, flags, mode)
	c.must(err, "open %s", p)
	if c.fds == nil {
		c.fds = map[int]bool{}
		c.Cleanup(func() {
			for fd := range c.fds {
				unix.Close(fd)
			}
		})
	}
	c.fds[fd] = true
	return fd
}

// close closes an fd from c.open before the check ends.
func (c *C) close(fd int) {
	c.Helper()
	if !c.fds[fd] {
		c.Fatalf("closing fd %d that c.open did not return", fd)
	}
	delete(c.fds, fd)
	c.must(unix.Close(fd), "close")
}

func (c *C) readFile(p string) []byte {
	c.Helper()
	b, err := readFile(p)
	c.must(err, "read %s", p)
	return b
}

func (c *C) chmod(p string, mode uint32) {
	c.Helper()
	c.must(xChmod(p, mode), "chmod %o %s", mode, p)
}

func (c *C) chown(p string, uid, gid int) {
	c.Helper()
	c.must(xLchown(p, uid, gid), "chown %d:%d %s", uid, gid, p)
}

// wantBytes compares file contents and reports the first difference.
func (c *C) wantBytes(what string, got, want []byte) bool {
	c.Helper()
	if i := firstDiff(got, want); i >= 0 {
		c.Errorf("%s: contents differ at byte %d (got len %d, want len %d)%s", what, i, len(got), len(want), diffContext(got, want, i))
		return false
	}
	return true
}

// wantMode compares the permission and type bits of st.
func (c *C) wantMode(what string, st *unix.Stat_t, want uint32) {
	c.Helper()
	if st.Mode != want {
		c.Errorf("%s: mode %#o, want %#o", what, st.Mode, want)
	}
}

func (c *C) wantNlink(what string, p string, want uint64) {
	c.Helper()
	st := c.lstat(p)
	if uint64(st.Nlink) != want {
		c.Errorf("%s: st_nlink of %s is %d, want %d", what, filepath.Base(p), st.Nlink, want)
	}
}

// tick waits long enough that timestamps taken before and after it differ
// on a filesystem with a coarse (jiffy) clock.
func tick() { time.Sleep(25 * time.Millisecond) }

func firstDiff(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return n
	}
	return -1
}

func diffContext(got, want []byte, i int) string {
	lo := i - 8
	if lo < 0 {
		lo = 0
	}
	hi := func(b []byte) int { return min(len(b), i+16) }
	if lo > len(got) || lo > len(want) {
		return ""
	}
	return fmt.Sprintf("\n got[%d:]  % x\n want[%d:] % x", lo, got[lo:hi(got)], lo, want[lo:hi(want)])
}

// pattern returns n deterministic bytes that differ with seed and offset,
// so that misplaced data is detected.
func pattern(seed uint64, off int64, n int) []byte {
	b := make([]byte, n)
	fillPattern(b, seed, off)
	return b
}

func fillPattern(b []byte, seed uint64, off int64) {
	for i := range b {
		x := uint64(off+int64(i))*0x9e3779b97f4a7c15 ^ seed*0xbf58476d1ce4e5b9
		x ^= x >> 29
		b[i] = byte(x) | 1 // never zero, so holes are distinguishable
	}
}

func isZero(b []byte) bool {
	for _, v := range b {
		if v != 0 {
			return false
		}
	}
	return true
}
