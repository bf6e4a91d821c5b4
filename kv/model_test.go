package kv

import (
	"fmt"
	"path"
	"sort"
	"strings"
	"syscall"
	"testing"
)

// A model of a file tree in memory, with the errors POSIX (and this store)
// gives, for the model-based fuzz test and the crash test.

type mNode struct {
	typ    uint32 // S_IFREG, S_IFDIR or S_IFLNK
	perm   uint32
	data   []byte // file contents or symlink target
	kids   map[string]*mNode
	parent *mNode // directories only
	names  int    // non-directories: number of names
}

func (n *mNode) isDir() bool { return n.typ == S_IFDIR }

func (n *mNode) nlink() uint32 {
	if !n.isDir() {
		return uint32(n.names)
	}
	l := uint32(2)
	for _, k := range n.kids {
		if k.isDir() {
			l++
		}
	}
	return l
}

// model is a tree whose root stands for the store's directory base.
type model struct {
	root *mNode
	base uint64
}

func newModel() *model {
	return &model{root: &mNode{typ: S_IFDIR, perm: 0o755, kids: map[string]*mNode{}}, base: RootIno}
}

// lookup resolves a path; ok is false if a component is missing or an
// intermediate one is not a directory.
func (m *model) lookup(p string) (*mNode, bool) {
	n := m.root
	if p == "." {
		return n, true
	}
	for _, c := range strings.Split(p, "/") {
		if !n.isDir() {
			return nil, false
		}
		if n = n.kids[c]; n == nil {
			return nil, false
		}
	}
	return n, true
}

// within reports whether d is n or inside n.
func within(d, n *mNode) bool {
	for ; d != nil; d = d.parent {
		if d == n {
			return true
		}
	}
	return false
}

func (m *model) create(dir *mNode, name string, typ uint32, target string) syscall.Errno {
	switch {
	case !dir.isDir():
		return syscall.ENOTDIR
	case dir.kids[name] != nil:
		return syscall.EEXIST
	}
	n := &mNode{typ: typ, names: 1}
	switch typ {
	case S_IFDIR:
		n.perm, n.kids, n.parent, n.names = 0o755, map[string]*mNode{}, dir, 0
	case S_IFLNK:
		n.perm, n.data = 0o777, []byte(target)
	default:
		n.perm = 0o644
	}
	dir.kids[name] = n
	return 0
}

func (m *model) link(src *mNode, dir *mNode, name string) syscall.Errno {
	switch {
	case !dir.isDir():
		return syscall.ENOTDIR
	case src.isDir():
		return syscall.EPERM
	case dir.kids[name] != nil:
		return syscall.EEXIST
	}
	dir.kids[name] = src
	src.names++
	return 0
}

func (m *model) remove(dir *mNode, name string, rmdir bool) syscall.Errno {
	if !dir.isDir() {
		return syscall.ENOTDIR
	}
	n := dir.kids[name]
	switch {
	case n == nil:
		return syscall.ENOENT
	case rmdir && !n.isDir():
		return syscall.ENOTDIR
	case !rmdir && n.isDir():
		return syscall.EISDIR
	case rmdir && len(n.kids) > 0:
		return syscall.ENOTEMPTY
	}
	delete(dir.kids, name)
	n.names--
	return 0
}

func (m *model) rename(od *mNode, on string, nd *mNode, nn string, flags uint32) syscall.Errno {
	if !od.isDir() || !nd.isDir() {
		return syscall.ENOTDIR
	}
	src, dst := od.kids[on], nd.kids[nn]
	switch {
	case src == nil:
		return syscall.ENOENT
	case dst == nil && flags&RenameExchange != 0:
		return syscall.ENOENT
	case dst != nil && flags&RenameNoReplace != 0:
		return syscall.EEXIST
	case src == dst:
		return 0
	case src.isDir() && od != nd && within(nd, src):
		return syscall.EINVAL
	case flags&RenameExchange != 0 && dst.isDir() && od != nd && within(od, dst):
		return syscall.EINVAL
	}
	if flags&RenameExchange != 0 {
		od.kids[on], nd.kids[nn] = dst, src
		if src.isDir() {
			src.parent = nd
		}
		if dst.isDir() {
			dst.parent = od
		}
		return 0
	}
	if dst != nil {
		switch {
		case src.isDir() && !dst.isDir():
			return syscall.ENOTDIR
		case !src.isDir() && dst.isDir():
			return syscall.EISDIR
		case dst.isDir() && len(dst.kids) > 0:
			return syscall.ENOTEMPTY
		}
		dst.names--
	}
	delete(od.kids, on)
	nd.kids[nn] = src
	if src.isDir() {
		src.parent = nd
	}
	return 0
}

// view is the model's equivalent of storeView.
func (m *model) view(data bool) view {
	v := view{}
	first := map[*mNode]string{}
	var walk func(n *mNode, prefix string)
	walk = func(d *mNode, prefix string) {
		names := make([]string, 0, len(d.kids))
		for k := range d.kids {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, name := range names {
			n := d.kids[name]
			p := path.Join(prefix, name)
			e := entry{Type: n.typ, Perm: n.perm, Nlink: n.nlink(), Size: uint64(len(n.data))}
			if f, ok := first[n]; ok {
				e.Linkto = f
			} else {
				first[n] = p
			}
			switch {
			case n.isDir():
				e.Size = 0
				walk(n, p)
			case n.typ == S_IFLNK:
				e.Data = string(n.data)
			case data && e.Linkto == "":
				e.Data = string(n.data)
			}
			v[p] = e
		}
	}
	walk(m.root, "")
	return v
}

// ---- operations -----------------------------------------------------------

// The operations work on a few directories and names, so that they collide
// often: renames over existing files, into subtrees, removals of non-empty
// directories...
var (
	opDirs  = []string{".", ".", ".", "a", "a", "b", "b", "a/c", "a/c", "b/d", "a/c/e", "c", "d", ".", "a", "b"}
	opNames = []string{"a", "b", "c", "d", "e", "f"}
	opOffs  = []int64{0, 1, 100, C - 1, C, C + 1, 2*C - 3, 3 * C}
	opLens  = []int64{1, 2, 10, 1000, C - 1, C, C + 1, 2*C + 5}
)

const (
	opCreate = iota
	opMkdir
	opSymlink
	opLink
	opUnlink
	opRmdir
	opRename
	opWrite
	opTruncate
	opPunch
	opZero
	opExtend
	opAppend // a write at the file's end, of o.len bytes
	numOps
)

// op is one decoded operation.
type op struct {
	kind        byte
	dir1, name1 byte
	dir2, name2 byte
	param       byte
	off, len    int64
}

func (o op) path1() (string, string) { return opDirs[o.dir1], opNames[o.name1] }
func (o op) path2() (string, string) { return opDirs[o.dir2], opNames[o.name2] }

func (o op) String() string {
	d1, n1 := o.path1()
	d2, n2 := o.path2()
	p1, p2 := path.Join(d1, n1), path.Join(d2, n2)
	switch o.kind {
	case opCreate:
		return "create " + p1
	case opMkdir:
		return "mkdir " + p1
	case opSymlink:
		return fmt.Sprintf("symlink %s -> t%d", p1, o.param)
	case opLink:
		return fmt.Sprintf("link %s %s", p1, p2)
	case opUnlink:
		return "unlink " + p1
	case opRmdir:
		return "rmdir " + p1
	case opRename:
		return fmt.Sprintf("rename %s %s flags %d", p1, p2, renameFlags(o.param))
	case opWrite:
		return fmt.Sprintf("write %s at %d, %d bytes", p1, o.off, o.len)
	case opTruncate:
		return fmt.Sprintf("truncate %s to %d", p1, o.off+o.len)
	case opPunch:
		return fmt.Sprintf("punch %s at %d, %d bytes", p1, o.off, o.len)
	case opZero:
		return fmt.Sprintf("zero range %s at %d, %d bytes", p1, o.off, o.len)
	case opExtend:
		return fmt.Sprintf("fallocate %s at %d, %d bytes", p1, o.off, o.len)
	case opAppend:
		return fmt.Sprintf("append to %s, %d bytes", p1, o.len)
	}
	return "?"
}

func renameFlags(p byte) uint32 { return []uint32{0, 0, RenameNoReplace, RenameExchange}[p%4] }

// decodeOps turns fuzz input into operations, four bytes each.
func decodeOps(data []byte) []op {
	var ops []op
	for ; len(data) >= 4; data = data[4:] {
		o := op{
			kind:  data[0] % numOps,
			dir1:  data[1] % 16,
			name1: data[1] / 16 % byte(len(opNames)),
			dir2:  data[2] % 16,
			name2: data[2] / 16 % byte(len(opNames)),
			param: data[3],
		}
		o.off = opOffs[o.param%8]
		o.len = opLens[o.param/8%8]
		ops = append(ops, o)
	}
	return ops
}

// applyResult is what one operation did.
type applyResult struct {
	op      op            // the operation, with missing directories replaced by the root
	skipped bool          // a path did not resolve (in both)
	store   syscall.Errno // the store's answer
	model   syscall.Errno // the model's answer
	file    string        // path of the regular file whose contents changed
}

// resolveDirs looks up the directories of o in the model and, unless s is
// nil, in the store; a directory that does not exist (in both) is replaced by
// the root, so that most operations do something.
func resolveDirs(t testing.TB, s *Store, m *model, o *op) (sd1, sd2 uint64, md1, md2 *mNode) {
	t.Helper()
	resolve := func(idx *byte) (uint64, *mNode) {
		p := opDirs[*idx]
		sd, ok := resolveBoth(t, s, m, *o, p)
		if !ok {
			*idx = 0
			return m.base, m.root
		}
		return sd, m.mustLookup(p)
	}
	sd1, md1 = resolve(&o.dir1)
	sd2, md2 = resolve(&o.dir2)
	return
}

func (m *model) mustLookup(p string) *mNode {
	n, _ := m.lookup(p)
	return n
}

// resolveBoth resolves p in the model and (unless s is nil) in the store,
// and fails the test if only one of them has it.
func resolveBoth(t testing.TB, s *Store, m *model, o op, p string) (uint64, bool) {
	t.Helper()
	_, ok := m.lookup(p)
	if s == nil {
		return 0, ok
	}
	ino, err := lookupFrom(s, m.base, p)
	if (err == nil) != ok {
		t.Fatalf("%v: %s resolves differently: store %v, model %v", o, p, err, ok)
	}
	return ino, ok
}

// apply runs o on the model and, unless s is nil, on the store. seq makes
// written data unique.
func apply(t testing.TB, s *Store, m *model, o op, seq int) applyResult {
	t.Helper()
	sd1, sd2, md1, md2 := resolveDirs(t, s, m, &o)
	d1, n1 := o.path1()
	_, n2 := o.path2()
	r := applyResult{op: o}
	call := func(f func() error) {
		if s != nil {
			r.store = Errno(f())
		}
	}
	switch o.kind {
	case opCreate, opMkdir, opSymlink:
		typ := []uint32{S_IFREG, S_IFDIR, S_IFLNK}[o.kind-opCreate]
		perm := map[uint32]uint32{S_IFREG: 0o644, S_IFDIR: 0o755, S_IFLNK: 0o777}[typ]
		target := fmt.Sprint("t", o.param)
		call(func() error { _, err := s.Create(sd1, n1, NewInode{Mode: typ | perm, Target: target}); return err })
		r.model = m.create(md1, n1, typ, target)
	case opLink:
		src, ok := resolveBoth(t, s, m, o, path.Join(d1, n1))
		if !ok {
			return applyResult{skipped: true}
		}
		call(func() error { _, err := s.Link(src, sd2, n2); return err })
		r.model = m.link(m.mustLookup(path.Join(d1, n1)), md2, n2)
	case opUnlink:
		call(func() error { return s.Unlink(sd1, n1) })
		r.model = m.remove(md1, n1, false)
	case opRmdir:
		call(func() error { return s.Rmdir(sd1, n1) })
		r.model = m.remove(md1, n1, true)
	case opRename:
		flags := renameFlags(o.param)
		call(func() error { return s.Rename(sd1, n1, sd2, n2, flags) })
		r.model = m.rename(md1, n1, md2, n2, flags)
	default: // data operations on path1
		p := path.Join(d1, n1)
		ino, ok := resolveBoth(t, s, m, o, p)
		if !ok {
			return applyResult{skipped: true}
		}
		n := m.mustLookup(p)
		if n.typ == S_IFLNK { // the kernel follows symlinks itself
			return applyResult{skipped: true}
		}
		call(func() error { return storeDataOp(s, ino, o, seq) })
		r.model = modelDataOp(n, o, seq)
		r.file = p
	}
	return r
}

// storeDataOp applies a data operation to a file in the store.
func storeDataOp(s *Store, ino uint64, o op, seq int) error {
	var err error
	switch o.kind {
	case opWrite:
		_, err = s.Write(ino, o.off, pattern(byte(seq), int(o.len)))
	case opTruncate:
		_, err = s.SetAttr(ino, SetAttrRequest{Valid: SetSize, Size: uint64(o.off + o.len)})
	case opPunch:
		_, err = s.Fallocate(ino, FallocPunchHole|FallocKeepSize, o.off, o.len)
	case opZero:
		_, err = s.Fallocate(ino, FallocZeroRange, o.off, o.len)
	case opExtend:
		_, err = s.Fallocate(ino, 0, o.off, o.len)
	case opAppend:
		var a Attr
		if a, err = s.GetAttr(ino); err == nil {
			_, err = s.Write(ino, int64(a.Size), pattern(byte(seq), int(o.len)))
		}
	}
	return err
}

// modelDataOp applies a data operation to a file (or a directory, which
// refuses) of the model.
func modelDataOp(n *mNode, o op, seq int) syscall.Errno {
	if n.isDir() {
		return syscall.EISDIR
	}
	grow := func(size int64) {
		if size > int64(len(n.data)) {
			n.data = append(n.data, make([]byte, size-int64(len(n.data)))...)
		}
	}
	zero := func(off, end int64) {
		end = min(end, int64(len(n.data)))
		if off < end {
			clear(n.data[off:end])
		}
	}
	switch o.kind {
	case opWrite:
		grow(o.off + o.len)
		copy(n.data[o.off:], pattern(byte(seq), int(o.len)))
	case opTruncate:
		size := o.off + o.len
		if size < int64(len(n.data)) {
			n.data = n.data[:size]
		}
		grow(size)
	case opPunch:
		zero(o.off, o.off+o.len)
	case opZero:
		zero(o.off, o.off+o.len)
		grow(o.off + o.len)
	case opExtend:
		grow(o.off + o.len)
	case opAppend:
		n.data = append(n.data, pattern(byte(seq), int(o.len))...)
	}
	return 0
}

// runOps applies ops to the directory base of a store and to a fresh model
// and fails at the first
// difference. It returns how many operations ran (were not skipped) and how
// many of those succeeded.
func runOps(t testing.TB, s *Store, base uint64, ops []op) (ran, ok int) {
	t.Helper()
	m := newModel()
	m.base = base
	var trace []string
	for i, o := range ops {
		r := apply(t, s, m, o, i)
		if !r.skipped {
			trace = append(trace, fmt.Sprintf("%3d %v: %v", i, r.op, r.store))
		}
		if r.skipped {
			continue
		}
		ran++
		if r.store == 0 {
			ok++
		}
		if r.store != r.model {
			t.Fatalf("operations:\n%s\nthe store answered %v (%d), the model %v (%d)",
				strings.Join(trace, "\n"), r.store, int(r.store), r.model, int(r.model))
		}
		if d := m.view(false).diff(storeView(t, s, base, false)); d != "" {
			t.Fatalf("operations:\n%s\nmodel (first) and store (second) differ:\n%s", strings.Join(trace, "\n"), d)
		}
		if r.file != "" && r.model == 0 {
			mv, sv := m.view(true)[r.file], storeView(t, s, base, true)[r.file]
			if mv.Data != sv.Data {
				n := min(len(mv.Data), len(sv.Data))
				t.Fatalf("operations:\n%s\ncontents of %s differ at byte %d", strings.Join(trace, "\n"), r.file,
					firstDiff([]byte(mv.Data[:n]), []byte(sv.Data[:n])))
			}
		}
	}
	if d := m.view(true).diff(storeView(t, s, base, true)); d != "" {
		t.Fatalf("operations:\n%s\nat the end, model and store differ:\n%s", strings.Join(trace, "\n"), d)
	}
	checkInvariants(t, s, checkOpts{})
	return ran, ok
}
