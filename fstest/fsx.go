package fstest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// fsx: a long seeded sequence of random operations applied to the same
// files in two directories, the one under test and a reference twin, with
// results, contents, sizes, link counts and listings compared as it goes.
// It is deterministic in the seed as long as the twin behaves like Linux
// tmpfs, so a failure is replayed with the same seed and op count.

// FSXOptions tunes FSXWithOptions. Zero fields take defaults.
type FSXOptions struct {
	Seed int64
	// Ops is the number of operations (default 2000).
	Ops int
	// MaxLen bounds file sizes (default 2 MiB).
	MaxLen int64
	// FullCheckEvery is how often the whole tree (listings, every file,
	// link groups) is compared; the files an operation touched are
	// compared after every operation. Default 25.
	FullCheckEvery int
	// History is how many recent operations a failure report shows
	// (default 30).
	History int

	// afterOp, when set, runs after each operation (used by the self-test
	// to inject a difference).
	afterOp func(i int, dir, twin string)
}

// FSX runs nops random operations with the given seed in fresh
// subdirectories of dir and of twin, a reference directory (tmpfs), and
// fails at the first difference, reporting the seed, the operation number
// and the operations before it.
func FSX(t *testing.T, dir, twin string, seed int64, nops int) {
	t.Helper()
	FSXWithOptions(t, dir, twin, FSXOptions{Seed: seed, Ops: nops})
}

// fsxT is the part of testing.TB that fsx uses, so that the self-test can
// watch it fail.
type fsxT interface {
	Helper()
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
	Cleanup(func())
}

// FSXWithOptions is FSX with all options.
func FSXWithOptions(t *testing.T, dir, twin string, opts FSXOptions) {
	t.Helper()
	guardHelper()
	runFSX(t, dir, twin, opts)
}

const (
	fsxSlots   = 4
	fsxTopDir  = "d"
	fsxNames   = 5 // f0..f4 at the top, plus d/g0, d/g1
	fsxSubNms  = 2
	fsxPageMax = 64 << 10
)

type fsxOp struct {
	kind string
	a, b string // names relative to the fsx directory
	off  int64
	off2 int64 // copyrange: offset in b
	n    int64
	mode uint32
	slot int
}

func (o *fsxOp) String() string {
	switch o.kind {
	case "write", "read", "mapwrite", "mapread", "append":
		return fmt.Sprintf("%s %s off=%d len=%d", o.kind, o.a, o.off, o.n)
	case "truncate":
		return fmt.Sprintf("truncate %s size=%d", o.a, o.n)
	case "fallocate":
		return fmt.Sprintf("fallocate %s mode=%#x off=%d len=%d", o.a, o.mode, o.off, o.n)
	case "rename", "link", "exchange":
		return fmt.Sprintf("%s %s -> %s", o.kind, o.a, o.b)
	case "copyrange":
		return fmt.Sprintf("copyrange %s@%d -> %s@%d len=%d", o.a, o.off, o.b, o.off2, o.n)
	case "unlink", "fsync":
		return o.kind + " " + o.a
	case "hold":
		return fmt.Sprintf("hold slot%d = open %s", o.slot, o.a)
	case "release":
		return fmt.Sprintf("release slot%d", o.slot)
	case "fdwrite", "fdread":
		return fmt.Sprintf("%s slot%d off=%d len=%d", o.kind, o.slot, o.off, o.n)
	case "ftruncate":
		return fmt.Sprintf("ftruncate slot%d size=%d", o.slot, o.n)
	}
	return o.kind
}

type fsxSide struct {
	name string
	root string
	fds  [fsxSlots]int
}

type fsxResult struct {
	errno unix.Errno
	data  []byte
	n     int64
}

func (r fsxResult) String() string {
	s := "ok"
	if r.errno != 0 {
		s = unix.ErrnoName(r.errno)
	}
	if r.n != 0 {
		s += fmt.Sprintf(" n=%d", r.n)
	}
	if r.data != nil {
		s += fmt.Sprintf(" %d bytes", len(r.data))
	}
	return s
}

func toErrno(err error) unix.Errno {
	if err == nil {
		return 0
	}
	var e unix.Errno
	if errors.As(err, &e) {
		return e
	}
	return unix.EIO
}

type fsxRun struct {
	t       fsxT
	opts    FSXOptions
	rng     *rand.Rand
	sides   [2]*fsxSide // 0: under test, 1: twin
	history []string
	opIndex int
}

func runFSX(t fsxT, dir, twin string, opts FSXOptions) {
	t.Helper()
	if opts.Ops <= 0 {
		opts.Ops = 2000
	}
	if opts.MaxLen <= 0 {
		opts.MaxLen = 2 << 20
	}
	if opts.FullCheckEvery <= 0 {
		opts.FullCheckEvery = 25
	}
	if opts.History <= 0 {
		opts.History = 30
	}
	r := &fsxRun{t: t, opts: opts, rng: rand.New(rand.NewPCG(uint64(opts.Seed), 0x6673780000000000))}
	for i, base := range []string{dir, twin} {
		root, err := os.MkdirTemp(base, fmt.Sprintf("fsx-%d-", opts.Seed))
		if err != nil {
			t.Fatalf("fsx: %v", err)
		}
		if err := xMkdir(filepath.Join(root, fsxTopDir), 0o755); err != nil {
			t.Fatalf("fsx: %v", err)
		}
		s := &fsxSide{name: []string{"dir", "twin"}[i], root: root}
		for j := range s.fds {
			s.fds[j] = -1
		}
		r.sides[i] = s
		t.Cleanup(func() {
			for _, fd := range s.fds {
				if fd >= 0 {
					unix.Close(fd)
				}
			}
			removeAll(root)
		})
	}
	for i := 0; i < opts.Ops; i++ {
		r.opIndex = i
		op := r.gen()
		r.history = append(r.history, fmt.Sprintf("#%d %s", i, op))
		if len(r.history) > opts.History {
			r.history = r.history[1:]
		}
		res0 := r.sides[0].apply(op, uint64(opts.Seed)^uint64(i)*0x9e37)
		res1 := r.sides[1].apply(op, uint64(opts.Seed)^uint64(i)*0x9e37)
		r.history[len(r.history)-1] += " => " + res1.String()
		if res0.errno != res1.errno || res0.n != res1.n {
			r.fail("%s: result %s, twin %s", op, res0, res1)
		}
		if i := firstDiff(res0.data, res1.data); i >= 0 {
			r.fail("%s: data read differs at byte %d (%d vs %d bytes)%s", op, i, len(res0.data), len(res1.data), diffContext(res0.data, res1.data, i))
		}
		if opts.afterOp != nil {
			opts.afterOp(i, r.sides[0].root, r.sides[1].root)
		}
		for _, name := range []string{op.a, op.b} {
			if name != "" {
				r.compareName(name)
			}
		}
		if op.kind == "hold" || strings.HasPrefix(op.kind, "fd") || op.kind == "ftruncate" {
			r.compareSlot(op.slot)
		}
		if (i+1)%opts.FullCheckEvery == 0 || i == opts.Ops-1 {
			r.compareAll()
		}
	}
}

func (r *fsxRun) fail(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("fsx: seed %d, op %d of %d: %s\nlast operations (=> result on the twin):\n  %s\nreplay with FSX(t, dir, twin, %d, %d)",
		r.opts.Seed, r.opIndex, r.opts.Ops, fmt.Sprintf(format, args...),
		strings.Join(r.history, "\n  "), r.opts.Seed, r.opIndex+1)
}

var fsxAllNames = func() []string {
	var n []string
	for i := 0; i < fsxNames; i++ {
		n = append(n, fmt.Sprintf("f%d", i))
	}
	for i := 0; i < fsxSubNms; i++ {
		n = append(n, fmt.Sprintf("%s/g%d", fsxTopDir, i))
	}
	return n
}()

// twinSize is the size of name on the twin, -1 if it does not exist.
func (r *fsxRun) twinSize(name string) int64 {
	var st unix.Stat_t
	if err := xStat(filepath.Join(r.sides[1].root, name), &st); err != nil {
		return -1
	}
	return st.Size
}

func (r *fsxRun) slotSize(slot int) int64 {
	fd := r.sides[1].fds[slot]
	if fd < 0 {
		return -1
	}
	var st unix.Stat_t
	if err := xFstat(fd, &st); err != nil {
		return -1
	}
	return st.Size
}

func (r *fsxRun) genOff(size int64) int64 {
	limit := r.opts.MaxLen
	switch p := r.rng.IntN(10); {
	case p < 6:
		return r.rng.Int64N(min(256<<10, limit))
	case p < 8 && size > 0:
		// Near the current end.
		off := size - 4096 + r.rng.Int64N(8192)
		return min(max(off, 0), limit-1)
	default:
		return r.rng.Int64N(limit)
	}
}

func (r *fsxRun) genLen(off int64) int64 {
	var n int64
	switch p := r.rng.IntN(20); {
	case p < 14:
		n = 1 + r.rng.Int64N(16<<10)
	case p < 19:
		n = 1 + r.rng.Int64N(128<<10)
	default:
		n = 1 + r.rng.Int64N(600<<10)
	}
	return max(1, min(n, r.opts.MaxLen-off))
}

func (r *fsxRun) name() string { return fsxAllNames[r.rng.IntN(len(fsxAllNames))] }

// gen picks the next operation from the state of the twin.
func (r *fsxRun) gen() *fsxOp {
	kinds := []struct {
		kind   string
		weight int
	}{
		{"write", 20}, {"read", 8}, {"truncate", 7}, {"mapwrite", 6}, {"mapread", 4},
		{"fallocate", 6}, {"append", 3}, {"rename", 5}, {"exchange", 1}, {"link", 4},
		{"unlink", 4}, {"hold", 4}, {"release", 2}, {"fdwrite", 5}, {"fdread", 3},
		{"ftruncate", 2}, {"copyrange", 3}, {"fsync", 1},
	}
	total := 0
	for _, k := range kinds {
		total += k.weight
	}
	pick := r.rng.IntN(total)
	kind := ""
	for _, k := range kinds {
		if pick < k.weight {
			kind = k.kind
			break
		}
		pick -= k.weight
	}
	op := &fsxOp{kind: kind, slot: r.rng.IntN(fsxSlots)}
	switch kind {
	case "write", "read", "append":
		op.a = r.name()
		op.off = r.genOff(r.twinSize(op.a))
		op.n = r.genLen(op.off)
	case "mapwrite", "mapread":
		op.a = r.name()
		size := r.twinSize(op.a)
		if size > 0 {
			op.off = r.rng.Int64N(size)
			op.n = 1 + r.rng.Int64N(min(size-op.off, fsxPageMax))
		}
	case "truncate":
		op.a = r.name()
		size := r.twinSize(op.a)
		switch p := r.rng.IntN(4); {
		case p == 0:
			op.n = 0
		case p == 1 && size > 0:
			op.n = r.rng.Int64N(size)
		default:
			op.n = r.rng.Int64N(r.opts.MaxLen)
		}
	case "fallocate":
		op.a = r.name()
		op.mode = []uint32{0, unix.FALLOC_FL_KEEP_SIZE, unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE}[r.rng.IntN(3)]
		op.off = r.genOff(r.twinSize(op.a))
		op.n = r.genLen(op.off)
	case "rename", "link", "exchange":
		op.a, op.b = r.name(), r.name()
	case "copyrange":
		op.a, op.b = r.name(), r.name()
		op.off = r.genOff(r.twinSize(op.a))
		op.off2 = r.genOff(r.twinSize(op.b))
		op.n = r.genLen(max(op.off, op.off2))
	case "unlink", "hold", "fsync":
		op.a = r.name()
	case "fdwrite", "fdread":
		op.off = r.genOff(r.slotSize(op.slot))
		op.n = r.genLen(op.off)
	case "ftruncate":
		op.n = r.rng.Int64N(r.opts.MaxLen)
	}
	return op
}

// apply runs op on one side. seed makes the written data.
func (s *fsxSide) apply(op *fsxOp, seed uint64) fsxResult {
	p := func(name string) string { return filepath.Join(s.root, name) }
	withFd := func(name string, flags int, f func(fd int) fsxResult) fsxResult {
		fd, err := xOpen(p(name), flags, 0o644)
		if err != nil {
			return fsxResult{errno: toErrno(err)}
		}
		defer unix.Close(fd)
		return f(fd)
	}
	switch op.kind {
	case "write":
		return withFd(op.a, unix.O_RDWR|unix.O_CREAT, func(fd int) fsxResult {
			return fsxResult{errno: toErrno(writeFull(fd, pattern(seed, op.off, int(op.n)), op.off))}
		})
	case "append":
		return withFd(op.a, unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT, func(fd int) fsxResult {
			n, err := xWrite(fd, pattern(seed, 0, int(op.n)))
			return fsxResult{errno: toErrno(err), n: int64(n)}
		})
	case "read":
		return withFd(op.a, unix.O_RDONLY, func(fd int) fsxResult {
			buf := make([]byte, op.n)
			n, err := readFull(fd, buf, op.off)
			return fsxResult{errno: toErrno(err), data: buf[:n]}
		})
	case "mapwrite", "mapread":
		flags := unix.O_RDWR
		if op.kind == "mapread" {
			flags = unix.O_RDONLY
		}
		return withFd(op.a, flags, func(fd int) fsxResult { return s.mapIO(fd, op, seed) })
	case "truncate":
		return fsxResult{errno: toErrno(xTruncate(p(op.a), op.n))}
	case "fallocate":
		return withFd(op.a, unix.O_RDWR, func(fd int) fsxResult {
			return fsxResult{errno: toErrno(xFallocate(fd, op.mode, op.off, op.n))}
		})
	case "rename":
		return fsxResult{errno: toErrno(xRename(p(op.a), p(op.b)))}
	case "exchange":
		return fsxResult{errno: toErrno(xRename2(p(op.a), p(op.b), unix.RENAME_EXCHANGE))}
	case "link":
		return fsxResult{errno: toErrno(xLink(p(op.a), p(op.b)))}
	case "unlink":
		return fsxResult{errno: toErrno(xUnlink(p(op.a)))}
	case "fsync":
		return withFd(op.a, unix.O_RDONLY, func(fd int) fsxResult {
			return fsxResult{errno: toErrno(xFsync(fd))}
		})
	case "copyrange":
		in, err := xOpen(p(op.a), unix.O_RDONLY, 0)
		if err != nil {
			return fsxResult{errno: toErrno(err)}
		}
		defer unix.Close(in)
		return withFd(op.b, unix.O_WRONLY, func(out int) fsxResult {
			roff, woff := op.off, op.off2
			total := int64(0)
			for total < op.n {
				n, err := xCopyFileRange(in, &roff, out, &woff, int(op.n-total))
				if err != nil {
					return fsxResult{errno: toErrno(err), n: total}
				}
				if n == 0 {
					break
				}
				total += int64(n)
			}
			return fsxResult{n: total}
		})
	case "hold":
		if s.fds[op.slot] >= 0 {
			unix.Close(s.fds[op.slot])
			s.fds[op.slot] = -1
		}
		fd, err := xOpen(p(op.a), unix.O_RDWR, 0)
		if err != nil {
			return fsxResult{errno: toErrno(err)}
		}
		s.fds[op.slot] = fd
		return fsxResult{}
	case "release":
		if s.fds[op.slot] < 0 {
			return fsxResult{errno: unix.EBADF}
		}
		err := unix.Close(s.fds[op.slot])
		s.fds[op.slot] = -1
		return fsxResult{errno: toErrno(err)}
	case "fdwrite", "fdread", "ftruncate":
		fd := s.fds[op.slot]
		if fd < 0 {
			return fsxResult{errno: unix.EBADF}
		}
		switch op.kind {
		case "fdwrite":
			return fsxResult{errno: toErrno(writeFull(fd, pattern(seed, op.off, int(op.n)), op.off))}
		case "fdread":
			buf := make([]byte, op.n)
			n, err := readFull(fd, buf, op.off)
			return fsxResult{errno: toErrno(err), data: buf[:n]}
		default:
			return fsxResult{errno: toErrno(xFtruncate(fd, op.n))}
		}
	}
	panic("fsx: unknown op " + op.kind)
}

// mapIO reads or writes [op.off, op.off+op.n) of fd through a shared
// mapping, clamped to the file size.
func (s *fsxSide) mapIO(fd int, op *fsxOp, seed uint64) fsxResult {
	var st unix.Stat_t
	if err := xFstat(fd, &st); err != nil {
		return fsxResult{errno: toErrno(err)}
	}
	if op.n == 0 || op.off >= st.Size {
		return fsxResult{n: -1} // nothing to map
	}
	n := min(op.n, st.Size-op.off)
	page := int64(unix.Getpagesize())
	start := op.off / page * page
	prot := unix.PROT_READ
	if op.kind == "mapwrite" {
		prot |= unix.PROT_WRITE
	}
	m, err := retry1(func() ([]byte, error) { return unix.Mmap(fd, start, int(op.off+n-start), prot, unix.MAP_SHARED) })
	if err != nil {
		return fsxResult{errno: toErrno(err)}
	}
	defer unix.Munmap(m)
	region := m[op.off-start:]
	if op.kind == "mapread" {
		return fsxResult{data: append([]byte{}, region...), n: n}
	}
	copy(region, pattern(seed, op.off, int(n)))
	return fsxResult{errno: toErrno(retry(func() error { return unix.Msync(m, unix.MS_SYNC) })), n: n}
}

// fsxStat is what is compared about one name.
type fsxStat struct {
	exists bool
	typ    uint32
	size   int64
	nlink  uint64
	ino    uint64
	target string
}

func statName(root, name string) (fsxStat, error) {
	var st unix.Stat_t
	err := xLstat(filepath.Join(root, name), &st)
	if errors.Is(err, unix.ENOENT) {
		return fsxStat{}, nil
	}
	if err != nil {
		return fsxStat{}, err
	}
	fs := fsxStat{exists: true, typ: st.Mode & unix.S_IFMT, size: st.Size, nlink: uint64(st.Nlink), ino: st.Ino}
	if fs.typ == unix.S_IFDIR {
		fs.size = 0 // directory sizes are filesystem specific
	}
	if fs.typ == unix.S_IFLNK {
		fs.target, _ = xReadlink(filepath.Join(root, name))
	}
	return fs, nil
}

// compareName compares the type, size, link count and contents of name.
func (r *fsxRun) compareName(name string) {
	r.t.Helper()
	var st [2]fsxStat
	for i, s := range r.sides {
		var err error
		st[i], err = statName(s.root, name)
		if err != nil {
			r.fail("lstat %s on %s: %v", name, s.name, err)
		}
	}
	a, b := st[0], st[1]
	if a.exists != b.exists || a.typ != b.typ || a.size != b.size || a.nlink != b.nlink || a.target != b.target {
		r.fail("%s differs: exists %v/%v, type %#o/%#o, size %d/%d, nlink %d/%d",
			name, a.exists, b.exists, a.typ, b.typ, a.size, b.size, a.nlink, b.nlink)
	}
	if a.exists && a.typ == unix.S_IFREG {
		var data [2][]byte
		for i, s := range r.sides {
			var err error
			data[i], err = readFile(filepath.Join(s.root, name))
			if err != nil {
				r.fail("reading %s on %s: %v", name, s.name, err)
			}
		}
		if i := firstDiff(data[0], data[1]); i >= 0 {
			r.fail("contents of %s differ at byte %d (sizes %d/%d)%s", name, i, len(data[0]), len(data[1]), diffContext(data[0], data[1], i))
		}
	}
}

// compareSlot compares the file held open in slot.
func (r *fsxRun) compareSlot(slot int) {
	r.t.Helper()
	a, b := r.sides[0].fds[slot], r.sides[1].fds[slot]
	if (a < 0) != (b < 0) {
		r.fail("slot%d is open on one side only", slot)
	}
	if a < 0 {
		return
	}
	var sa, sb unix.Stat_t
	if err := xFstat(a, &sa); err != nil {
		r.fail("fstat slot%d: %v", slot, err)
	}
	if err := xFstat(b, &sb); err != nil {
		r.fail("fstat slot%d on the twin: %v", slot, err)
	}
	if sa.Size != sb.Size || sa.Nlink != sb.Nlink {
		r.fail("file in slot%d: size %d/%d nlink %d/%d", slot, sa.Size, sb.Size, sa.Nlink, sb.Nlink)
	}
	da, err := readAllFd(a)
	if err != nil {
		r.fail("reading slot%d: %v", slot, err)
	}
	db, err := readAllFd(b)
	if err != nil {
		r.fail("reading slot%d on the twin: %v", slot, err)
	}
	if i := firstDiff(da, db); i >= 0 {
		r.fail("contents of the file in slot%d differ at byte %d%s", slot, i, diffContext(da, db, i))
	}
}

// compareAll compares listings, every name, the held files and which
// names are links to the same inode.
func (r *fsxRun) compareAll() {
	r.t.Helper()
	var groups [2]string
	for i, s := range r.sides {
		var all []string
		for _, d := range []string{".", fsxTopDir} {
			names, err := listNames(filepath.Join(s.root, d))
			if err != nil && !(d == fsxTopDir && errors.Is(err, unix.ENOENT)) {
				r.fail("listing %s on %s: %v", d, s.name, err)
			}
			for _, n := range names {
				if d != "." {
					n = d + "/" + n
				}
				all = append(all, n)
			}
		}
		sort.Strings(all)
		byIno := map[uint64][]string{}
		for _, n := range all {
			st, err := statName(s.root, n)
			if err != nil || !st.exists {
				r.fail("listed name %s does not stat on %s: %v", n, s.name, err)
			}
			if st.typ != unix.S_IFDIR {
				byIno[st.ino] = append(byIno[st.ino], n)
			}
		}
		var gs []string
		for _, g := range byIno {
			if len(g) > 1 {
				gs = append(gs, strings.Join(g, "="))
			}
		}
		sort.Strings(gs)
		groups[i] = strings.Join(all, " ") + " | links: " + strings.Join(gs, " ")
	}
	if groups[0] != groups[1] {
		r.fail("trees differ:\n  dir:  %s\n  twin: %s", groups[0], groups[1])
	}
	names := strings.Fields(strings.SplitN(groups[1], " | ", 2)[0])
	for _, n := range names {
		r.compareName(n)
	}
	for slot := 0; slot < fsxSlots; slot++ {
		r.compareSlot(slot)
	}
}
