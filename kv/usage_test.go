package kv

import (
	"bytes"
	"errors"
	"strconv"
	"syscall"
	"testing"
)

// TestQuota: with a quota every way of adding data, names or extended
// attributes (write through chunks and blobs, truncate, fallocate,
// SetContent, copy, create, link, setxattr) stops with EDQUOT at the
// quota; removals and truncations always work and give the room back;
// StatFs shows the quota as the size; the count survives a reopen and is
// what Check counts.
func TestQuota(t *testing.T) {
	const quota = 4 << 20
	dir := t.TempDir() + "/store"
	opts := quietOptions()
	opts.BlobThreshold = 256 << 10
	opts.Quota = quota
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	wantQuota := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrQuota) || Errno(err) != syscall.EDQUOT {
			t.Fatalf("%s past the quota: %v, want EDQUOT", what, err)
		}
	}
	used := func() int64 { u, _ := s.Usage(); return u }

	// Writes of 64 KiB into small files, then a big one (a blob).
	chunk := bytes.Repeat([]byte("q"), 64<<10)
	var files []Attr
	var werr error
	for i := 0; werr == nil; i++ {
		a := mkfile(t, s, RootIno, "f"+strconv.Itoa(i))
		files = append(files, a)
		for j := 0; j < 4 && werr == nil; j++ { // 256 KiB: the last write makes it a blob
			_, werr = s.Write(a.Ino, int64(j)*int64(len(chunk)), chunk)
		}
	}
	wantQuota("write", werr)
	select { // the refusal was signalled (the syncer trims on it)
	case <-s.QuotaHits():
	default:
		t.Fatal("a write refused for the quota did not signal QuotaHits")
	}
	if u := used(); u > quota || u < quota-(64<<10)-2*(inodeCost+nameCost+8) {
		t.Fatalf("writes stopped at %d bytes of a %d quota", u, quota)
	}
	t.Logf("writes stopped at %d of %d bytes: %v", used(), quota, werr)
	f := files[0]
	wantQuota("truncate up", func() error { _, err := s.SetAttr(f.Ino, SetAttrRequest{Valid: SetSize, Size: 1 << 30}); return err }())
	wantQuota("fallocate", func() error { _, err := s.Fallocate(f.Ino, 0, 0, 1<<30); return err }())
	wantQuota("SetContent", func() error { _, err := s.SetContent(f.Ino, make([]byte, 2<<20)); return err }())
	wantQuota("copy", func() error {
		_, err := s.CopyRange(files[1].Ino, 0, f.Ino, 1<<20, 256<<10)
		return err
	}())
	for i := 0; ; i++ { // names and inodes count too
		_, err := s.Create(RootIno, "empty"+strconv.Itoa(i), NewInode{Mode: S_IFREG | 0o644})
		if err != nil {
			wantQuota("create", err)
			break
		}
	}
	wantQuota("mkdir", func() error { _, err := s.Create(RootIno, "d", NewInode{Mode: S_IFDIR | 0o755}); return err }())
	for i := 0; ; i++ { // a name is smaller than an inode
		if _, err := s.Link(f.Ino, RootIno, "link"+strconv.Itoa(i)); err != nil {
			wantQuota("link", err)
			break
		}
	}
	wantQuota("setxattr", s.SetXattr(f.Ino, "user.big", make([]byte, 60<<10), 0))
	// What adds only its journal record (overwriting, metadata) is refused
	// too once that record does not fit; the count stays within the quota.
	for i := 0; ; i++ {
		_, err := s.SetAttr(files[i%len(files)].Ino, SetAttrRequest{Valid: SetMode, Mode: 0o600})
		if err != nil {
			wantQuota("chmod", err)
			break
		}
		if i > 1000 {
			t.Fatalf("chmod at the quota: %d records went in", i)
		}
	}
	wantQuota("rename", s.Rename(RootIno, "empty0", RootIno, "renamed-to-a-longer-name", 0))
	wantQuota("overwrite", func() error { _, err := s.Write(files[3].Ino, 0, []byte("overwrite")); return err }())
	if u := used(); u > quota {
		t.Fatalf("the count is %d past the %d quota", u-quota, quota)
	}
	// Removals always work.
	before := used()
	if _, err := s.SetAttr(files[1].Ino, SetAttrRequest{Valid: SetSize, Size: 1000}); err != nil {
		t.Fatalf("truncate down at the quota: %v", err)
	}
	if err := s.Unlink(RootIno, "f2"); err != nil {
		t.Fatalf("unlink at the quota: %v", err)
	}
	if got, want := before-used(), int64(256<<10-1000+256<<10+inodeCost+nameBytes("f2")); got > want || got < want-2*MaxRecordPath {
		t.Fatalf("truncating and unlinking gave back %d bytes, want %d less their records", got, want)
	}
	// The room is there again.
	if _, err := s.Write(f.Ino, 256<<10, make([]byte, 300<<10)); err != nil {
		t.Fatalf("write after removing: %v", err)
	}
	if err := s.SetXattr(f.Ino, "user.x", []byte("v"), 0); err != nil {
		t.Fatalf("setxattr after removing: %v", err)
	}
	st, err := s.StatFs()
	if err != nil {
		t.Fatal(err)
	}
	if size := st.Blocks * uint64(st.Bsize); size != quota {
		t.Errorf("statfs size %d, want the quota %d", size, quota)
	}
	if free := int64(st.Bavail) * int64(st.Bsize); free > quota-used() || free < quota-used()-int64(st.Bsize) {
		t.Errorf("statfs free %d, want %d", free, quota-used())
	}
	u := used()
	checkInvariants(t, s, checkOpts{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(dir, opts); err != nil {
		t.Fatal(err)
	}
	if used() != u {
		t.Fatalf("usage %d after reopening, %d before", used(), u)
	}
	checkInvariants(t, s, checkOpts{})
}

// TestUsageCountsEverything: the count follows every kind of change
// (Check compares it with what the inodes add up to), including blobs the
// kernel wrote directly, and a store without a count (an older one) gets
// it counted when it opens.
func TestUsageCountsEverything(t *testing.T) {
	s := newBlobStore(t, t.TempDir()+"/store")
	used := func() int64 { return s.UsageDetail().Files }
	if used() != inodeCost {
		t.Fatalf("an empty store counts %d", used())
	}
	a := mkfile(t, s, RootIno, "a")
	if got, want := used(), int64(2*inodeCost+nameBytes("a")); got != want {
		t.Fatalf("after a create: %d, want %d", got, want)
	}
	if _, err := s.Write(a.Ino, 1<<20, []byte("x")); err != nil { // sparse: logical size
		t.Fatal(err)
	}
	if got, want := used(), int64(2*inodeCost+nameBytes("a")+1<<20+1); got != want {
		t.Fatalf("after a sparse write: %d, want %d", got, want)
	}
	if _, err := s.Create(RootIno, "l", NewInode{Mode: S_IFLNK | 0o777, Target: "target"}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetXattr(a.Ino, "user.k", []byte("value"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Link(a.Ino, RootIno, "a2"); err != nil {
		t.Fatal(err)
	}
	// The kernel writes a pinned blob: counted when the store takes it.
	b := mkfile(t, s, RootIno, "b")
	if _, err := s.Write(b.Ino, 0, make([]byte, 200<<10)); err != nil {
		t.Fatal(err)
	}
	f, ok, err := s.PinBlob(b.Ino, true)
	if err != nil || !ok {
		t.Fatalf("pin: %v %v", ok, err)
	}
	if _, err := f.WriteAt(make([]byte, 100<<10), 300<<10); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetAttr(b.Ino, SetAttrRequest{Valid: SetMode, Mode: 0o600}); err != nil { // commits the merged size
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 100<<10), 500<<10); err != nil {
		t.Fatal(err)
	}
	if err := s.UnpinBlob(b.Ino, true); err != nil {
		t.Fatal(err)
	}
	if got := getattr(t, s, b.Ino).Size; got != 600<<10 {
		t.Fatalf("size after the kernel's writes: %d", got)
	}
	checkInvariants(t, s, checkOpts{})
	if err := s.Rename(RootIno, "l", RootIno, "a2", 0); err != nil { // replaces a name
		t.Fatal(err)
	}
	if err := s.Unlink(RootIno, "a"); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, s, checkOpts{})
	want := used()
	// An older store: no count; Open counts it.
	deleteKey(t, s, keyUsage)
	s = reopen(t, s)
	if used() != want {
		t.Fatalf("counted %d on opening, was %d", used(), want)
	}
	checkInvariants(t, s, checkOpts{})
}

// TestXattrLimits: an inode holds at most MaxXattrs extended attributes of
// at most MaxXattrBytes in all (then ENOSPC, as ext4), a value at most
// MaxXattrValue (E2BIG); replacing and removing still work.
func TestXattrLimits(t *testing.T) {
	s := newStore(t)
	a := mkfile(t, s, RootIno, "f")
	if err := s.SetXattr(a.Ino, "user.v", make([]byte, MaxXattrValue+1), 0); Errno(err) != syscall.E2BIG {
		t.Fatalf("a value over %d bytes: %v, want E2BIG", MaxXattrValue, err)
	}
	for i := 0; i < MaxXattrs; i++ {
		if err := s.SetXattr(a.Ino, "user.n"+strconv.Itoa(i), []byte("v"), 0); err != nil {
			t.Fatalf("attribute %d: %v", i, err)
		}
	}
	if err := s.SetXattr(a.Ino, "user.one-more", []byte("v"), 0); Errno(err) != syscall.ENOSPC {
		t.Fatalf("attribute %d: %v, want ENOSPC", MaxXattrs+1, err)
	}
	if err := s.SetXattr(a.Ino, "user.n0", []byte("replaced"), 0); err != nil {
		t.Fatalf("replacing an attribute of a full inode: %v", err)
	}
	for i := 0; i < MaxXattrs; i++ {
		if err := s.RemoveXattr(a.Ino, "user.n"+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	big := make([]byte, MaxXattrValue)
	if err := s.SetXattr(a.Ino, "user.a", big, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.SetXattr(a.Ino, "user.b", big, 0); Errno(err) != syscall.ENOSPC {
		t.Fatalf("a second %d-byte value: %v, want ENOSPC (over %d bytes in all)", len(big), err, MaxXattrBytes)
	}
	if err := s.SetXattr(a.Ino, "user.b", big[:MaxXattrBytes-2*len("user.a")-len(big)], 0); err != nil {
		t.Fatalf("filling the inode to %d bytes: %v", MaxXattrBytes, err)
	}
	if err := s.SetXattr(a.Ino, "user.a", big, XattrReplace); err != nil {
		t.Fatalf("replacing a value with one of the same size: %v", err)
	}
	if names, err := s.ListXattr(a.Ino); err != nil || len(names) != 2 {
		t.Fatalf("list: %q %v", names, err)
	}
	checkInvariants(t, s, checkOpts{})
}
