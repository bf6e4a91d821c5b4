package kv

import (
	"bytes"
	"fmt"
	"syscall"
	"testing"
	"time"
)

const C = ChunkSize

// fileModel is the expected contents of a file.
type fileModel []byte

func (m *fileModel) write(off int64, data []byte) {
	if end := int(off) + len(data); end > len(*m) {
		*m = append(*m, make([]byte, end-len(*m))...)
	}
	copy((*m)[off:], data)
}

func (m *fileModel) truncate(size int) {
	if size <= len(*m) {
		*m = (*m)[:size]
	} else {
		*m = append(*m, make([]byte, size-len(*m))...)
	}
}

func (m *fileModel) zero(off, end int) {
	end = min(end, len(*m))
	if off < end {
		clear((*m)[off:end])
	}
}

// checkFile compares the whole file and a set of reads at odd offsets with m.
func checkFile(t *testing.T, s *Store, ino uint64, m fileModel) {
	t.Helper()
	a := getattr(t, s, ino)
	if a.Size != uint64(len(m)) {
		t.Fatalf("size %d, want %d", a.Size, len(m))
	}
	if got := readAll(t, s, ino); !bytes.Equal(got, m) {
		t.Fatalf("contents differ from the model at byte %d", firstDiff(got, m))
	}
	for _, off := range []int{0, 1, C - 1, C, C + 1, 2*C - 3, 3*C + 17, len(m) - 1, len(m)} {
		for _, n := range []int{1, 2, 100, C, C + 2, 3*C + 5} {
			if off < 0 {
				continue
			}
			want := []byte{}
			if off < len(m) {
				want = m[off:min(len(m), off+n)]
			}
			if got := readAt(t, s, ino, int64(off), n); !bytes.Equal(got, want) {
				t.Fatalf("Read(%d, %d): %d bytes, want %d (first difference at %d)", off, n, len(got), len(want), firstDiff(got, want))
			}
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := 0; i < min(len(a), len(b)); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestWriteRead(t *testing.T) {
	clock := fakeClock(t)
	s := newStore(t)
	f := mkfile(t, s, RootIno, "f")
	var m fileModel
	writes := []struct{ off, n int }{
		{0, 1}, {1, 10}, {C - 3, 6}, {5, C}, {2*C - 1, 2}, {3, 3*C + 11}, {C, C}, {0, 0},
		{7*C + 100, 50}, {4*C - 2, 4}, {C / 2, 2 * C}, {0, 9 * C}, {123456, 7}, {9*C - 1, 1},
	}
	for i, w := range writes {
		data := pattern(byte(i+1), w.n)
		a := write(t, s, f.Ino, int64(w.off), data)
		m.write(int64(w.off), data)
		if a.Size != uint64(len(m)) || a.Mtime != clock.Load() || a.Ctime != clock.Load() {
			t.Fatalf("write %d: returned %+v, want size %d and times %d", i, a, len(m), clock.Load())
		}
		if got := getattr(t, s, f.Ino); got != a {
			t.Fatalf("write %d: GetAttr %+v, Write returned %+v", i, got, a)
		}
		checkFile(t, s, f.Ino, m)
		checkInvariants(t, s, checkOpts{})
	}
	s = reopen(t, s)
	checkFile(t, s, f.Ino, m)
}

func TestWriteErrors(t *testing.T) {
	s := newChunkStore(t) // sizes past ext4's largest file: chunks only
	f := mkfile(t, s, RootIno, "f")
	d := mkdir(t, s, RootIno, "d")
	tests := []struct {
		name  string
		ino   uint64
		off   int64
		n     int
		errno syscall.Errno
	}{
		{"negative offset", f.Ino, -1, 1, syscall.EINVAL},
		{"directory", d.Ino, 0, 1, syscall.EISDIR},
		{"missing inode", 999, 0, 1, syscall.ENOENT},
		{"past the largest size", f.Ino, MaxFileSize, 1, syscall.EFBIG},
		{"ending past the largest size", f.Ino, MaxFileSize - 2, 3, syscall.EFBIG},
		{"huge offset", f.Ino, 1<<63 - 1, 1, syscall.EFBIG},
		{"ending at the largest size", f.Ino, MaxFileSize - 2, 2, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Write(tc.ino, tc.off, make([]byte, tc.n))
			wantErrno(t, "Write", err, tc.errno)
		})
	}
	// The last chunk is stored from its start: a full chunk.
	if a := getattr(t, s, f.Ino); a.Size != MaxFileSize || a.Blocks != C/512 {
		t.Fatalf("after writing the last two bytes: %+v", a)
	}
	if got := readAt(t, s, f.Ino, MaxFileSize-5, 10); !bytes.Equal(got, make([]byte, 5)) {
		t.Fatalf("read at the end: %v", got)
	}
	for _, tc := range []struct {
		name  string
		ino   uint64
		off   int64
		errno syscall.Errno
	}{{"negative offset", f.Ino, -1, syscall.EINVAL}, {"directory", d.Ino, 0, syscall.EISDIR}, {"missing", 999, 0, syscall.ENOENT}} {
		_, _, err := s.Read(tc.ino, tc.off, make([]byte, 4))
		wantErrno(t, "Read "+tc.name, err, tc.errno)
	}
	checkInvariants(t, s, checkOpts{})
}

// A write of no bytes changes nothing: pwrite(fd, buf, 0, off) past the end
// of a file does not extend it.
func TestWriteEmpty(t *testing.T) {
	s := newStore(t)
	f := mkfile(t, s, RootIno, "f")
	before := write(t, s, f.Ino, 0, []byte("abc"))
	for _, off := range []int64{0, 3, 1000, 1 << 40} {
		a := write(t, s, f.Ino, off, nil)
		if a != before || getattr(t, s, f.Ino) != before {
			t.Fatalf("an empty write at %d changed the attributes:\n%+v\n%+v", off, before, a)
		}
	}
}

func TestReadPastEOF(t *testing.T) {
	s := newStore(t)
	f := mkfile(t, s, RootIno, "f")
	data := pattern(9, C+10)
	write(t, s, f.Ino, 0, data)
	for _, tc := range []struct {
		off  int64
		n    int
		want int
	}{
		{0, C + 10, C + 10}, {0, 10 * C, C + 10}, {C, 100, 10}, {C + 10, 5, 0}, {C + 11, 5, 0},
		{1 << 40, 5, 0}, {1<<63 - 1, 5, 0}, {5, 0, 0},
	} {
		buf := bytes.Repeat([]byte{0xee}, tc.n)
		n, a, err := s.Read(f.Ino, tc.off, buf)
		if err != nil || n != tc.want || a.Size != C+10 {
			t.Fatalf("Read(%d, %d) = %d, size %d, %v; want %d", tc.off, tc.n, n, a.Size, err, tc.want)
		}
		if n > 0 && !bytes.Equal(buf[:n], data[tc.off:tc.off+int64(n)]) {
			t.Fatalf("Read(%d, %d): wrong bytes", tc.off, tc.n)
		}
	}
	// An empty file.
	e := mkfile(t, s, RootIno, "e")
	if n, _, err := s.Read(e.Ino, 0, make([]byte, 10)); n != 0 || err != nil {
		t.Fatalf("Read of an empty file: %d, %v", n, err)
	}
}

func TestSparse(t *testing.T) {
	s := newChunkStore(t) // the chunk layout
	f := mkfile(t, s, RootIno, "f")
	var m fileModel
	for _, w := range []struct{ off, n int }{{10*C + 5, 1}, {3*C + 100, 10}, {20 * C, C}} {
		d := pattern(byte(w.n), w.n)
		write(t, s, f.Ino, int64(w.off), d)
		m.write(int64(w.off), d)
	}
	checkFile(t, s, f.Ino, m)
	a := getattr(t, s, f.Ino)
	// Chunks 3 (110 bytes), 10 (6 bytes) and 20 (full) are stored.
	if want := uint64(8 + 8 + C/512); a.Blocks != want {
		t.Fatalf("Blocks = %d, want %d", a.Blocks, want)
	}
	if a.Blocks*512 >= a.Size {
		t.Fatalf("a sparse file of %d bytes has %d blocks", a.Size, a.Blocks)
	}
	st := checkInvariants(t, s, checkOpts{})
	if n := len(st.inodes[f.Ino].chunks); n != 3 {
		t.Fatalf("%d chunks stored, want 3", n)
	}
	// Filling a hole in the middle of a chunk keeps the bytes around it.
	d := pattern(77, 3)
	write(t, s, f.Ino, 3*C+50, d)
	m.write(3*C+50, d)
	checkFile(t, s, f.Ino, m)
	checkInvariants(t, s, checkOpts{})
}

// Offsets past 4 GiB (and past 2^32 chunks' worth of bytes in a uint32)
// work: nothing truncates offsets to 32 bits.
func TestWriteBeyond4GiB(t *testing.T) {
	s := newChunkStore(t) // past ext4's largest file: chunks only
	f := mkfile(t, s, RootIno, "f")
	for _, off := range []int64{1<<32 - 5, 5<<30 + 3, 1<<40 + C - 1, 1 << 50} {
		data := pattern(byte(off), 2*C+9)
		write(t, s, f.Ino, off, data)
		if got := readAt(t, s, f.Ino, off, len(data)); !bytes.Equal(got, data) {
			t.Fatalf("read back at %d: first difference at %d", off, firstDiff(got, data))
		}
		if got := readAt(t, s, f.Ino, off-7, 7); !bytes.Equal(got, make([]byte, 7)) {
			t.Fatalf("the hole before %d reads %v", off, got)
		}
		if n, err := s.SeekData(f.Ino, off-C*3, SeekData); err != nil || n != off-off%C && n != off {
			t.Fatalf("SeekData before %d = %d, %v", off, n, err)
		}
	}
	a := getattr(t, s, f.Ino)
	if a.Size != 1<<50+2*C+9 || a.Blocks > 4*4*C/512 {
		t.Fatalf("attributes %+v", a)
	}
	// A read that spans the 4 GiB boundary.
	got := readAt(t, s, f.Ino, 1<<32-10, 20)
	want := append(make([]byte, 5), pattern(byte(int64(1<<32-5)&0xff), 15)...)
	if !bytes.Equal(got, want) {
		t.Fatalf("read across 4 GiB = %v, want %v", got, want)
	}
	checkInvariants(t, s, checkOpts{approxBlocks: true})
	must[Attr](t, "truncate")(s.SetAttr(f.Ino, SetAttrRequest{Valid: SetSize, Size: 0}))
	st := checkInvariants(t, s, checkOpts{})
	if n := len(st.inodes[f.Ino].chunks); n != 0 || getattr(t, s, f.Ino).Blocks != 0 {
		t.Fatalf("%d chunks and %d blocks left after truncating to 0", n, getattr(t, s, f.Ino).Blocks)
	}
}

func TestTruncate(t *testing.T) {
	clock := fakeClock(t)
	s := newStore(t)
	f := mkfile(t, s, RootIno, "f")
	var m fileModel
	data := pattern(1, 4*C+300)
	write(t, s, f.Ino, 0, data)
	m.write(0, data)
	steps := []int{4*C + 300, 3*C + 100, 5 * C, C + 7, C + 7, 2*C - 1, C / 2, C, 2 * C, 10, 0, 3 * C, 1}
	for i, size := range steps {
		a, err := s.SetAttr(f.Ino, SetAttrRequest{Valid: SetSize, Size: uint64(size)})
		if err != nil {
			t.Fatalf("truncate to %d: %v", size, err)
		}
		m.truncate(size)
		if a.Size != uint64(size) || a.Mtime != clock.Load() || a.Ctime != clock.Load() {
			t.Fatalf("truncate to %d returned %+v", size, a)
		}
		checkFile(t, s, f.Ino, m)
		checkInvariants(t, s, checkOpts{})
		// Write a little past the new end every other step: the bytes
		// between the old cut and the write must read as zeros.
		if i%2 == 1 {
			d := pattern(byte(i), 5)
			write(t, s, f.Ino, int64(size+C/3), d)
			m.write(int64(size+C/3), d)
			checkFile(t, s, f.Ino, m)
		}
	}
}

// Truncating in the middle of a chunk and extending again must not bring
// back the old bytes of that chunk.
func TestTruncateMidChunkThenExtend(t *testing.T) {
	s := newStore(t)
	f := mkfile(t, s, RootIno, "f")
	write(t, s, f.Ino, 0, bytes.Repeat([]byte{'x'}, 2*C))
	must[Attr](t, "truncate down")(s.SetAttr(f.Ino, SetAttrRequest{Valid: SetSize, Size: 100}))
	must[Attr](t, "truncate up")(s.SetAttr(f.Ino, SetAttrRequest{Valid: SetSize, Size: 2 * C}))
	got := readAll(t, s, f.Ino)
	want := append(bytes.Repeat([]byte{'x'}, 100), make([]byte, 2*C-100)...)
	if !bytes.Equal(got, want) {
		t.Fatalf("after truncate down and up: first difference at %d", firstDiff(got, want))
	}
	// Same with Fallocate extending the size, and a write past the old cut.
	must[Attr](t, "truncate down")(s.SetAttr(f.Ino, SetAttrRequest{Valid: SetSize, Size: 50}))
	must[Attr](t, "fallocate")(s.Fallocate(f.Ino, 0, 0, 3*C))
	write(t, s, f.Ino, 200, []byte("y"))
	got = readAll(t, s, f.Ino)
	want = append(append(bytes.Repeat([]byte{'x'}, 50), make([]byte, 150)...), 'y')
	want = append(want, make([]byte, 3*C-201)...)
	if !bytes.Equal(got, want) {
		t.Fatalf("after truncate, fallocate and write: first difference at %d", firstDiff(got, want))
	}
	checkInvariants(t, s, checkOpts{})
}

// st_blocks must stay exact when a truncate or hole punch spans more than
// exactBlocksLimit chunks of a sparse file; a regular file with data and
// st_blocks 0 is taken by tar --sparse and similar tools for all holes.
func TestBlocksAfterHugeSparseTruncate(t *testing.T) {
	s := newChunkStore(t) // the chunk layout
	f := mkfile(t, s, RootIno, "f")
	write(t, s, f.Ino, 0, pattern(1, C))
	write(t, s, f.Ino, 1<<30, []byte("z")) // 16384 chunks further
	a := must[Attr](t, "truncate")(s.SetAttr(f.Ino, SetAttrRequest{Valid: SetSize, Size: C}))
	if a.Blocks != C/512 {
		t.Errorf("truncate: Blocks = %d with one full chunk stored, want %d", a.Blocks, C/512)
	}
	g := mkfile(t, s, RootIno, "g")
	write(t, s, g.Ino, 0, pattern(1, C))
	write(t, s, g.Ino, 1<<30, []byte("z"))
	a = must[Attr](t, "punch")(s.Fallocate(g.Ino, FallocPunchHole|FallocKeepSize, C, 1<<30-C))
	if a.Blocks != C/512+8 {
		t.Errorf("punch hole: Blocks = %d, want %d", a.Blocks, C/512+8)
	}
	checkInvariants(t, s, checkOpts{})
}

// The same with more stored chunks in the range than zeroRange counts one
// by one (exactBlocksLimit): a dense 20 MB head, a hole up to 1 GiB and one
// byte there, truncated back to its first chunk. The chunk that stays must
// still count (st_blocks 0 for a file with data makes tar --sparse store it
// as one hole).
func TestBlocksAfterDenseThenSparseTruncate(t *testing.T) {
	s := newStore(t)
	f := mkfile(t, s, RootIno, "f")
	write(t, s, f.Ino, 0, pattern(1, 320*C))
	write(t, s, f.Ino, 1<<30, []byte("z"))
	a := must[Attr](t, "truncate")(s.SetAttr(f.Ino, SetAttrRequest{Valid: SetSize, Size: C}))
	if a.Blocks != C/512 {
		t.Errorf("truncate: Blocks = %d with one full chunk stored, want %d", a.Blocks, C/512)
	}
	g := mkfile(t, s, RootIno, "g")
	write(t, s, g.Ino, 0, pattern(1, 320*C))
	write(t, s, g.Ino, 1<<30, []byte("z"))
	a = must[Attr](t, "punch")(s.Fallocate(g.Ino, FallocPunchHole|FallocKeepSize, C, 1<<30-C))
	if a.Blocks < C/512+8 {
		t.Errorf("punch hole: Blocks = %d with a full chunk and a partial one stored, want %d", a.Blocks, C/512+8)
	}
	checkInvariants(t, s, checkOpts{approxBlocks: true})
}

func TestSetAttr(t *testing.T) {
	clock := fakeClock(t)
	s := newStore(t)
	f := must[Attr](t, "create")(s.Create(RootIno, "f", NewInode{Mode: S_IFREG | 0o644, Uid: 1, Gid: 2}))
	d := mkdir(t, s, RootIno, "d")
	l := must[Attr](t, "symlink")(s.Create(RootIno, "l", NewInode{Mode: S_IFLNK | 0o777, Target: "f"}))
	fifo := must[Attr](t, "fifo")(s.Create(RootIno, "p", NewInode{Mode: S_IFIFO | 0o644}))
	tests := []struct {
		name  string
		ino   uint64
		req   SetAttrRequest
		errno syscall.Errno
		check func(before, after Attr, ts int64) string
	}{
		{"chmod keeps the type", f.Ino, SetAttrRequest{Valid: SetMode, Mode: S_IFDIR | S_ISUID | 0o700}, 0,
			func(b, a Attr, ts int64) string {
				return cond(a.Mode == S_IFREG|S_ISUID|0o700 && a.Ctime == ts && a.Mtime == b.Mtime, "mode %o", a.Mode)
			}},
		{"chown", f.Ino, SetAttrRequest{Valid: SetUid | SetGid, Uid: 1000, Gid: 1001}, 0,
			func(b, a Attr, ts int64) string {
				return cond(a.Uid == 1000 && a.Gid == 1001 && a.Ctime == ts, "uid %d gid %d", a.Uid, a.Gid)
			}},
		{"chown uid only", f.Ino, SetAttrRequest{Valid: SetUid, Uid: 5, Gid: 99}, 0,
			func(b, a Attr, ts int64) string {
				return cond(a.Uid == 5 && a.Gid == b.Gid, "uid %d gid %d", a.Uid, a.Gid)
			}},
		{"explicit times", f.Ino, SetAttrRequest{Valid: SetAtime | SetMtime, Atime: -5, Mtime: 1 << 62}, 0,
			func(b, a Attr, ts int64) string {
				return cond(a.Atime == -5 && a.Mtime == 1<<62 && a.Ctime == ts, "%+v", a)
			}},
		{"times now", f.Ino, SetAttrRequest{Valid: SetAtime | SetAtimeNow | SetMtime | SetMtimeNow, Atime: 1, Mtime: 1}, 0,
			func(b, a Attr, ts int64) string {
				return cond(a.Atime == ts && a.Mtime == ts && a.Ctime == ts, "%+v", a)
			}},
		{"atime only", f.Ino, SetAttrRequest{Valid: SetAtime, Atime: 77}, 0,
			func(b, a Attr, ts int64) string { return cond(a.Atime == 77 && a.Mtime == b.Mtime, "%+v", a) }},
		{"explicit ctime", f.Ino, SetAttrRequest{Valid: SetCtime, Ctime: 12}, 0,
			func(b, a Attr, ts int64) string { return cond(a.Ctime == 12, "%+v", a) }},
		{"nothing still sets ctime", f.Ino, SetAttrRequest{}, 0,
			func(b, a Attr, ts int64) string {
				return cond(a.Ctime == ts && a.Mtime == b.Mtime && a.Mode == b.Mode, "%+v", a)
			}},
		{"truncate sets mtime", f.Ino, SetAttrRequest{Valid: SetSize, Size: 10}, 0,
			func(b, a Attr, ts int64) string {
				return cond(a.Size == 10 && a.Mtime == ts && a.Ctime == ts, "%+v", a)
			}},
		{"truncate and explicit mtime", f.Ino, SetAttrRequest{Valid: SetSize | SetMtime, Size: 5, Mtime: 3}, 0,
			func(b, a Attr, ts int64) string { return cond(a.Size == 5 && a.Mtime == 3, "%+v", a) }},
		{"chmod dir", d.Ino, SetAttrRequest{Valid: SetMode, Mode: 0o1777}, 0,
			func(b, a Attr, ts int64) string { return cond(a.Mode == S_IFDIR|0o1777 && a.Nlink == 2, "%+v", a) }},
		{"chown symlink", l.Ino, SetAttrRequest{Valid: SetUid, Uid: 3}, 0,
			func(b, a Attr, ts int64) string { return cond(a.Uid == 3 && a.Size == 1, "%+v", a) }},
		{"truncate dir", d.Ino, SetAttrRequest{Valid: SetSize}, syscall.EISDIR, nil},
		{"truncate symlink", l.Ino, SetAttrRequest{Valid: SetSize}, syscall.EINVAL, nil},
		{"truncate fifo", fifo.Ino, SetAttrRequest{Valid: SetSize}, syscall.EINVAL, nil},
		{"truncate too far", f.Ino, SetAttrRequest{Valid: SetSize, Size: MaxFileSize + 1}, syscall.EFBIG, nil},
		{"missing inode", 999, SetAttrRequest{Valid: SetMode}, syscall.ENOENT, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := s.GetAttr(tc.ino)
			a, err := s.SetAttr(tc.ino, tc.req)
			ts := clock.Load()
			wantErrno(t, "SetAttr", err, tc.errno)
			if tc.errno != 0 {
				if after, _ := s.GetAttr(tc.ino); after != before {
					t.Fatalf("failed SetAttr changed the attributes:\n%+v\n%+v", before, after)
				}
				return
			}
			if got := getattr(t, s, tc.ino); got != a {
				t.Fatalf("GetAttr %+v, SetAttr returned %+v", got, a)
			}
			if msg := tc.check(before, a, ts); msg != "" {
				t.Fatal(msg)
			}
		})
	}
	checkInvariants(t, s, checkOpts{})
}

func cond(ok bool, format string, args ...any) string {
	if ok {
		return ""
	}
	return fmt.Sprintf(format, args...)
}

func TestFallocate(t *testing.T) {
	const size = 3*C + 1000
	tests := []struct {
		name      string
		mode      uint32
		off, n    int64
		errno     syscall.Errno
		zeroFrom  int64 // the range that reads as zeros afterwards
		zeroTo    int64
		wantSize  int64
		gone      []uint64 // chunks that must be deleted
		mtimeSame bool
	}{
		{"extend", 0, 4 * C, 10, 0, 0, 0, 4*C + 10, nil, false},
		{"inside", 0, 10, 10, 0, 0, 0, size, nil, true},
		{"keep size past the end", FallocKeepSize, size, C, 0, 0, 0, size, nil, true},
		{"punch in one chunk", FallocPunchHole | FallocKeepSize, 100, 200, 0, 100, 300, size, nil, false},
		{"punch across a boundary", FallocPunchHole | FallocKeepSize, C - 10, 20, 0, C - 10, C + 10, size, nil, false},
		{"punch partial, whole, partial", FallocPunchHole | FallocKeepSize, 10, 2*C + 10, 0, 10, 2*C + 20, size, []uint64{1}, false},
		{"punch one whole chunk", FallocPunchHole | FallocKeepSize, C, C, 0, C, 2 * C, size, []uint64{1}, false},
		{"punch two whole chunks", FallocPunchHole | FallocKeepSize, 0, 2 * C, 0, 0, 2 * C, size, []uint64{0, 1}, false},
		{"punch ending at a boundary", FallocPunchHole | FallocKeepSize, C + 5, C - 5, 0, C + 5, 2 * C, size, nil, false},
		{"punch starting at a boundary", FallocPunchHole | FallocKeepSize, 2 * C, 5, 0, 2 * C, 2*C + 5, size, nil, false},
		{"punch the tail", FallocPunchHole | FallocKeepSize, 3 * C, 5 * C, 0, 3 * C, size, size, nil, false},
		{"punch past the end", FallocPunchHole | FallocKeepSize, size + 10, C, 0, 0, 0, size, nil, false},
		{"punch everything", FallocPunchHole | FallocKeepSize, 0, 10 * C, 0, 0, size, size, []uint64{0, 1, 2}, false},
		{"punch one byte", FallocPunchHole | FallocKeepSize, 2*C + 7, 1, 0, 2*C + 7, 2*C + 8, size, nil, false},
		{"zero range", FallocZeroRange, C - 1, C + 2, 0, C - 1, 2*C + 1, size, nil, false},
		{"zero range extends", FallocZeroRange, 3 * C, 2 * C, 0, 3 * C, 5 * C, 5 * C, nil, false},
		{"zero range keep size", FallocZeroRange | FallocKeepSize, 3 * C, 2 * C, 0, 3 * C, size, size, nil, false},
		{"punch without keep size", FallocPunchHole, 0, 10, syscall.EOPNOTSUPP, 0, 0, size, nil, true},
		{"collapse range", 0x08, 0, C, syscall.EOPNOTSUPP, 0, 0, size, nil, true},
		{"insert range", 0x20, 0, C, syscall.EOPNOTSUPP, 0, 0, size, nil, true},
		{"zero length", 0, 0, 0, syscall.EINVAL, 0, 0, size, nil, true},
		{"negative length", 0, 0, -1, syscall.EINVAL, 0, 0, size, nil, true},
		{"negative offset", 0, -1, 10, syscall.EINVAL, 0, 0, size, nil, true},
		{"too large", 0, MaxFileSize, 1, syscall.EFBIG, 0, 0, size, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := fakeClock(t)
			s := newStore(t)
			f := mkfile(t, s, RootIno, "f")
			data := pattern(5, size)
			before := write(t, s, f.Ino, 0, data)
			a, err := s.Fallocate(f.Ino, tc.mode, tc.off, tc.n)
			wantErrno(t, "Fallocate", err, tc.errno)
			if tc.errno != 0 {
				a = getattr(t, s, f.Ino)
				if a != before {
					t.Fatalf("failed Fallocate changed the attributes")
				}
			} else {
				if a.Ctime != clock.Load() {
					t.Errorf("ctime not updated")
				}
				if tc.mtimeSame != (a.Mtime == before.Mtime) {
					t.Errorf("mtime %d, before %d", a.Mtime, before.Mtime)
				}
			}
			m := fileModel(append([]byte(nil), data...))
			m.truncate(int(max(size, tc.wantSize)))
			m.zero(int(tc.zeroFrom), int(tc.zeroTo))
			m.truncate(int(tc.wantSize))
			checkFile(t, s, f.Ino, m)
			st := checkInvariants(t, s, checkOpts{})
			for _, ci := range tc.gone {
				if _, ok := st.inodes[f.Ino].chunks[ci]; ok {
					t.Errorf("chunk %d still stored", ci)
				}
			}
		})
	}
	s := newStore(t)
	d := mkdir(t, s, RootIno, "d")
	l := must[Attr](t, "symlink")(s.Create(RootIno, "l", NewInode{Mode: S_IFLNK | 0o777, Target: "x"}))
	_, err := s.Fallocate(d.Ino, 0, 0, 10)
	wantErrno(t, "Fallocate on a dir", err, syscall.EISDIR)
	_, err = s.Fallocate(l.Ino, 0, 0, 10)
	wantErrno(t, "Fallocate on a symlink", err, syscall.EOPNOTSUPP)
	_, err = s.Fallocate(999, 0, 0, 10)
	wantErrno(t, "Fallocate on a missing inode", err, syscall.ENOENT)
}

// Punching every byte of a chunk in two halves leaves a stored chunk of
// zeros; reading it still gives zeros and the file keeps its size.
func TestPunchHalves(t *testing.T) {
	s := newStore(t)
	f := mkfile(t, s, RootIno, "f")
	write(t, s, f.Ino, 0, pattern(3, 2*C))
	must[Attr](t, "punch")(s.Fallocate(f.Ino, FallocPunchHole|FallocKeepSize, 0, C/2))
	must[Attr](t, "punch")(s.Fallocate(f.Ino, FallocPunchHole|FallocKeepSize, C/2, C/2))
	m := fileModel(pattern(3, 2*C))
	m.zero(0, C)
	checkFile(t, s, f.Ino, m)
	checkInvariants(t, s, checkOpts{})
}

func TestSeekData(t *testing.T) {
	s := newStore(t)
	f := mkfile(t, s, RootIno, "f")
	// Data in chunks 0, 2, 3 and 10 (partial); holes in 1 and 4-9.
	for _, ci := range []int64{0, 2, 3} {
		write(t, s, f.Ino, ci*C, pattern(byte(ci), C))
	}
	size := int64(10*C + 100)
	write(t, s, f.Ino, 10*C, pattern(10, 100))
	const enxio = syscall.ENXIO
	tests := []struct {
		off    int64
		whence int
		want   int64
		errno  syscall.Errno
	}{
		{0, SeekData, 0, 0},
		{100, SeekData, 100, 0},
		{C, SeekData, 2 * C, 0},
		{C + 5, SeekData, 2 * C, 0},
		{3*C + 7, SeekData, 3*C + 7, 0},
		{4 * C, SeekData, 10 * C, 0},
		{10*C + 50, SeekData, 10*C + 50, 0},
		{size - 1, SeekData, size - 1, 0},
		{size, SeekData, 0, enxio},
		{size + C, SeekData, 0, enxio},
		{-1, SeekData, 0, enxio},
		{0, SeekHole, C, 0},
		{5, SeekHole, C, 0},
		{C + 5, SeekHole, C + 5, 0},
		{2 * C, SeekHole, 4 * C, 0},
		{3*C + 9, SeekHole, 4 * C, 0},
		{5 * C, SeekHole, 5 * C, 0},
		{10 * C, SeekHole, size, 0},
		{size - 1, SeekHole, size, 0},
		{size, SeekHole, 0, enxio},
	}
	for _, tc := range tests {
		name := map[int]string{SeekData: "SEEK_DATA", SeekHole: "SEEK_HOLE"}[tc.whence]
		got, err := s.SeekData(f.Ino, tc.off, tc.whence)
		wantErrno(t, fmt.Sprintf("%s at %d", name, tc.off), err, tc.errno)
		if err == nil && got != tc.want {
			t.Errorf("%s at %d = %d, want %d", name, tc.off, got, tc.want)
		}
	}
	// A file ending in a hole: no data after the last chunk.
	must[Attr](t, "extend")(s.SetAttr(f.Ino, SetAttrRequest{Valid: SetSize, Size: uint64(20 * C)}))
	_, err := s.SeekData(f.Ino, 12*C, SeekData)
	wantErrno(t, "SEEK_DATA in a trailing hole", err, enxio)
	if got, err := s.SeekData(f.Ino, 12*C, SeekHole); err != nil || got != 12*C {
		t.Fatalf("SEEK_HOLE in a trailing hole = %d, %v", got, err)
	}
	if got, err := s.SeekData(f.Ino, 10*C, SeekHole); err != nil || got != 11*C {
		t.Fatalf("SEEK_HOLE before a trailing hole = %d, %v", got, err)
	}
	// Empty and missing files.
	e := mkfile(t, s, RootIno, "e")
	_, err = s.SeekData(e.Ino, 0, SeekData)
	wantErrno(t, "SEEK_DATA in an empty file", err, enxio)
	_, err = s.SeekData(e.Ino, 0, SeekHole)
	wantErrno(t, "SEEK_HOLE in an empty file", err, enxio)
	_, err = s.SeekData(999, 0, SeekHole)
	wantErrno(t, "SEEK_HOLE in a missing file", err, syscall.ENOENT)
	// A completely sparse file is one hole.
	h := mkfile(t, s, RootIno, "h")
	must[Attr](t, "extend")(s.SetAttr(h.Ino, SetAttrRequest{Valid: SetSize, Size: 5 * C}))
	if got, err := s.SeekData(h.Ino, 0, SeekHole); err != nil || got != 0 {
		t.Fatalf("SEEK_HOLE in a sparse file = %d, %v", got, err)
	}
}

func TestAtime(t *testing.T) {
	clock := fakeClock(t)
	s := newStore(t)
	f := mkfile(t, s, RootIno, "f")
	if !NeedsAtime(&f) {
		t.Fatal("a new file (atime == mtime) needs no atime update")
	}
	must0(t, s.TouchAtime(f.Ino))
	a := getattr(t, s, f.Ino)
	if a.Atime != clock.Load() || NeedsAtime(&a) {
		t.Fatalf("after TouchAtime: %+v, needs %v", a, NeedsAtime(&a))
	}
	must0(t, s.TouchAtime(f.Ino)) // nothing to do
	if b := getattr(t, s, f.Ino); b != a {
		t.Fatalf("a second TouchAtime changed %+v to %+v", a, b)
	}
	write(t, s, f.Ino, 0, []byte("x"))
	if a = getattr(t, s, f.Ino); !NeedsAtime(&a) {
		t.Fatal("atime older than mtime needs no update")
	}
	must0(t, s.TouchAtime(f.Ino))
	if a = getattr(t, s, f.Ino); NeedsAtime(&a) {
		t.Fatal("still needs an update after TouchAtime")
	}
	// A day later it is due again.
	clock.Add(24*3600*1e9 + 1)
	if !NeedsAtime(&a) {
		t.Fatal("an atime more than a day old needs no update")
	}
	// Table of the relatime rule, at "now" = 100 days.
	day := int64(24 * 3600 * 1e9)
	clock.Store(100*day - 1000)
	for _, tc := range []struct {
		atime, mtime, ctime int64
		want                bool
	}{
		{50 * day, 40 * day, 40 * day, true},       // more than a day old
		{100*day - 5, 99 * day, 99 * day, false},   // recent, after both
		{100*day - 5, 100*day - 5, 99 * day, true}, // equal to mtime
		{100*day - 5, 99 * day, 100*day - 5, true}, // equal to ctime
		{100*day - 5, 100*day - 1, 0, true},        // older than mtime
		{100*day - 5, 0, 100*day - 1, true},        // older than ctime
		{99*day + 1e6, 0, 0, false},                // just under a day
		{99*day - 1e6, 0, 0, true},                 // just over a day
	} {
		a := Attr{Atime: tc.atime, Mtime: tc.mtime, Ctime: tc.ctime}
		if got := NeedsAtime(&a); got != tc.want {
			t.Errorf("NeedsAtime(atime %d, mtime %d, ctime %d) = %v at %d", tc.atime, tc.mtime, tc.ctime, got, clock.Load()+1000)
		}
	}
	wantErrno(t, "TouchAtime of a missing inode", s.TouchAtime(999), syscall.ENOENT)
}

// Write and Read are for regular files: a write to a symlink would store
// data under it and break its st_size (which must be the target's length),
// and fifos and devices hold no data in the store.
func TestWriteNonRegular(t *testing.T) {
	s := newStore(t)
	for _, in := range []NewInode{
		{Mode: S_IFLNK | 0o777, Target: "target"},
		{Mode: S_IFIFO | 0o644},
		{Mode: S_IFCHR | 0o644, Rdev: 5},
		{Mode: S_IFSOCK | 0o644},
	} {
		a := must[Attr](t, "create")(s.Create(RootIno, fmt.Sprintf("%o", in.Mode), in))
		_, err := s.Write(a.Ino, 0, []byte("data"))
		wantErrno(t, fmt.Sprintf("Write to mode %o", in.Mode), err, syscall.EINVAL)
		if b := getattr(t, s, a.Ino); b.Size != a.Size || b.Blocks != 0 {
			t.Errorf("mode %o: a refused write changed the size to %d, blocks %d", in.Mode, b.Size, b.Blocks)
		}
	}
	checkInvariants(t, s, checkOpts{})
}

// Linux's rules for what a write, a truncate and a chown by an unprivileged
// user clear: setuid always; setgid if the group may execute (otherwise it
// marks mandatory locking and stays, unless the writer is not in the group
// and it is a write or truncate); security.capability always.
func TestKillPriv(t *testing.T) {
	inGroup := func(g uint32) bool { return g == 10 }
	tests := []struct {
		name        string
		mode        uint32
		gid         uint32
		do          func(s *Store, ino uint64) (Attr, error)
		wantMode    uint32
		wantCapGone bool
	}{
		{"write, suid+sgid+gx", 0o6755, 10, func(s *Store, ino uint64) (Attr, error) {
			a, _, err := s.WriteKillPriv(ino, 0, []byte("x"), inGroup)
			return a, err
		}, 0o755, true},
		{"write, sgid without gx, in group", 0o2644, 10, func(s *Store, ino uint64) (Attr, error) {
			a, _, err := s.WriteKillPriv(ino, 0, []byte("x"), inGroup)
			return a, err
		}, 0o2644, true},
		{"write, sgid without gx, not in group", 0o2644, 11, func(s *Store, ino uint64) (Attr, error) {
			a, _, err := s.WriteKillPriv(ino, 0, []byte("x"), inGroup)
			return a, err
		}, 0o644, true},
		{"plain write keeps everything", 0o6755, 11, func(s *Store, ino uint64) (Attr, error) {
			return s.Write(ino, 0, []byte("x"))
		}, 0o6755, false},
		{"truncate with kill", 0o4755, 10, func(s *Store, ino uint64) (Attr, error) {
			return s.SetAttr(ino, SetAttrRequest{Valid: SetSize | SetKillPriv, Size: 0, InGroup: inGroup})
		}, 0o755, true},
		{"kill without InGroup: not in the group", 0o2644, 10, func(s *Store, ino uint64) (Attr, error) {
			return s.SetAttr(ino, SetAttrRequest{Valid: SetKillPriv})
		}, 0o644, true},
		{"chown clears suid and sgid+gx", 0o6755, 10, func(s *Store, ino uint64) (Attr, error) {
			return s.SetAttr(ino, SetAttrRequest{Valid: SetUid, Uid: 5})
		}, 0o755, true},
		{"chgrp keeps sgid without gx", 0o2644, 10, func(s *Store, ino uint64) (Attr, error) {
			return s.SetAttr(ino, SetAttrRequest{Valid: SetGid, Gid: 11})
		}, 0o2644, true},
		{"chmod alone keeps capabilities", 0o644, 10, func(s *Store, ino uint64) (Attr, error) {
			return s.SetAttr(ino, SetAttrRequest{Valid: SetMode, Mode: 0o6755})
		}, 0o6755, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			f := must[Attr](t, "create")(s.Create(RootIno, "f", NewInode{Mode: S_IFREG | tc.mode, Gid: tc.gid}))
			must0(t, s.SetXattr(f.Ino, "security.capability", []byte("cap"), 0))
			a, err := tc.do(s, f.Ino)
			if err != nil {
				t.Fatal(err)
			}
			if a.Mode != S_IFREG|tc.wantMode {
				t.Errorf("mode %o, want %o", a.Mode&^S_IFMT, tc.wantMode)
			}
			if got := getattr(t, s, f.Ino); got != a {
				t.Errorf("GetAttr %+v, returned %+v", got, a)
			}
			_, err = s.GetXattr(f.Ino, "security.capability")
			if gone := Errno(err) == syscall.ENODATA; gone != tc.wantCapGone {
				t.Errorf("capability removed: %v, want %v (%v)", gone, tc.wantCapGone, err)
			}
		})
	}
	// A directory's setgid survives a chown.
	s := newStore(t)
	d := must[Attr](t, "mkdir")(s.Create(RootIno, "d", NewInode{Mode: S_IFDIR | 0o2775}))
	if a := must[Attr](t, "chown")(s.SetAttr(d.Ino, SetAttrRequest{Valid: SetUid | SetGid, Uid: 1, Gid: 1})); a.Mode != S_IFDIR|0o2775 {
		t.Errorf("directory mode after chown %o", a.Mode)
	}
	// WriteKillPriv reports whether the mode changed.
	f := must[Attr](t, "create")(s.Create(RootIno, "f", NewInode{Mode: S_IFREG | 0o4755}))
	if _, changed, err := s.WriteKillPriv(f.Ino, 0, []byte("x"), inGroup); err != nil || !changed {
		t.Errorf("first write: changed %v, %v", changed, err)
	}
	if _, changed, err := s.WriteKillPriv(f.Ino, 0, []byte("x"), inGroup); err != nil || changed {
		t.Errorf("second write: changed %v, %v", changed, err)
	}
}

// A read sees one state of the file: its size and its data from the same
// moment. Here a writer keeps truncating the file to 0 and writing it full
// of 'A' again; a reader must get either nothing or only 'A's, never the
// zeros of a size read before a truncate and data read after it.
func TestReadConsistentWithTruncate(t *testing.T) {
	s := newStore(t)
	f := mkfile(t, s, RootIno, "f")
	full := bytes.Repeat([]byte{'A'}, 2*C)
	write(t, s, f.Ino, 0, full)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := s.SetAttr(f.Ino, SetAttrRequest{Valid: SetSize, Size: 0}); err != nil {
				t.Error(err)
				return
			}
			if _, err := s.Write(f.Ino, 0, full); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	buf := make([]byte, 2*C)
	bad, n := 0, 0
	limit := 1500 * time.Millisecond
	if testing.Short() {
		limit = 300 * time.Millisecond
	}
	for start := time.Now(); time.Since(start) < limit && bad == 0; n++ {
		got, _, err := s.Read(f.Ino, 0, buf)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.IndexByte(buf[:got], 0) >= 0 {
			bad++
		}
	}
	close(stop)
	<-done
	if bad > 0 {
		t.Errorf("%d of %d reads returned zeros that the file never held", bad, n)
	}
}

// TestAppend covers appends that go in as merge operands on the file's
// last chunk: of every size, across chunk boundaries, past maxTailMerges
// (the chunk is then written whole again), and after a reopen, which
// replays them from the log and forgets every tail.
func TestAppend(t *testing.T) {
	s := newChunkStore(t)
	f := mkfile(t, s, RootIno, "f")
	var m fileModel
	appendN := func(i, n int) {
		t.Helper()
		data := pattern(byte(i), n)
		m.write(int64(len(m)), data)
		if a := write(t, s, f.Ino, int64(len(m)-n), data); a.Size != uint64(len(m)) {
			t.Fatalf("append %d: size %d, want %d", i, a.Size, len(m))
		}
	}
	sizes := []int{1, 10, 4096, 4095, 1, C - 8200, 2 * C, 3, C + 7}
	for i, n := range sizes {
		appendN(i, n)
		checkFile(t, s, f.Ino, m)
		checkInvariants(t, s, checkOpts{})
	}
	// One-byte appends: the merges on the last chunk are folded every
	// maxTailMerges+1 writes.
	folded := false
	for i := 0; i < 3*maxTailMerges; i++ {
		appendN(100+i, 1)
		tail, ok := s.attrs.tail(f.Ino)
		if !ok || tail.merges > maxTailMerges {
			t.Fatalf("append %d: tail %+v, %v", i, tail, ok)
		}
		folded = folded || i > 0 && tail.merges == 0
	}
	if !folded {
		t.Fatal("the last chunk was never written whole again")
	}
	checkFile(t, s, f.Ino, m)
	checkInvariants(t, s, checkOpts{})
	s = reopen(t, s)
	if _, ok := s.attrs.tail(f.Ino); ok {
		t.Fatal("a reopened store knows a tail")
	}
	checkFile(t, s, f.Ino, m)
	for i := 0; i < 4; i++ {
		appendN(200+i, 1000)
	}
	checkFile(t, s, f.Ino, m)
	checkInvariants(t, s, checkOpts{})
}
