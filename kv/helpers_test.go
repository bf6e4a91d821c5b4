package kv

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path"
	"sort"
	"syscall"
	"testing"
)

// quietOptions are the options every test opens stores with: Pebble's
// messages are dropped.
func quietOptions() Options {
	return Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// openStore opens a store in dir and closes it when the test ends.
func openStore(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(dir, quietOptions())
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	s.checkTails = true
	t.Cleanup(func() { s.Close() })
	return s
}

// newChunkStore opens a fresh store that keeps all data in chunks, for
// tests of the chunk layout itself.
func newChunkStore(t testing.TB) *Store {
	t.Helper()
	opts := quietOptions()
	opts.BlobThreshold = -1
	s, err := Open(t.TempDir()+"/store", opts)
	if err != nil {
		t.Fatal(err)
	}
	s.checkTails = true
	t.Cleanup(func() { s.Close() })
	return s
}

// newStore opens a fresh store in a temporary directory.
func newStore(t testing.TB) *Store {
	t.Helper()
	return openStore(t, t.TempDir()+"/store")
}

// reopen closes s and opens its directory again.
func reopen(t testing.TB, s *Store) *Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return openStore(t, s.Dir())
}

// wantErrno fails the test unless err maps to errno (0 for success).
func wantErrno(t testing.TB, what string, err error, errno syscall.Errno) {
	t.Helper()
	if got := Errno(err); got != errno {
		t.Fatalf("%s: got error %v (errno %d %v), want errno %d (%v)", what, err, int(got), got, int(errno), errno)
	}
}

func must[T any](t testing.TB, what string) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}
}

func mkfile(t testing.TB, s *Store, dir uint64, name string) Attr {
	t.Helper()
	a, err := s.Create(dir, name, NewInode{Mode: S_IFREG | 0o644})
	if err != nil {
		t.Fatalf("create file %q in %d: %v", name, dir, err)
	}
	return a
}

func mkdir(t testing.TB, s *Store, dir uint64, name string) Attr {
	t.Helper()
	a, err := s.Create(dir, name, NewInode{Mode: S_IFDIR | 0o755})
	if err != nil {
		t.Fatalf("mkdir %q in %d: %v", name, dir, err)
	}
	return a
}

func getattr(t testing.TB, s *Store, ino uint64) Attr {
	t.Helper()
	a, err := s.GetAttr(ino)
	if err != nil {
		t.Fatalf("GetAttr(%d): %v", ino, err)
	}
	return a
}

func write(t testing.TB, s *Store, ino uint64, off int64, data []byte) Attr {
	t.Helper()
	a, err := s.Write(ino, off, data)
	if err != nil {
		t.Fatalf("Write(%d, %d, %d bytes): %v", ino, off, len(data), err)
	}
	return a
}

// readAll reads the whole file.
func readAll(t testing.TB, s *Store, ino uint64) []byte {
	t.Helper()
	a := getattr(t, s, ino)
	buf := make([]byte, a.Size)
	n, _, err := s.Read(ino, 0, buf)
	if err != nil || n != len(buf) {
		t.Fatalf("Read(%d) whole file: %d of %d bytes, %v", ino, n, len(buf), err)
	}
	return buf
}

func readAt(t testing.TB, s *Store, ino uint64, off int64, n int) []byte {
	t.Helper()
	buf := make([]byte, n)
	got, _, err := s.Read(ino, off, buf)
	if err != nil {
		t.Fatalf("Read(%d, %d, %d): %v", ino, off, n, err)
	}
	return buf[:got]
}

// names lists a directory.
func names(t testing.TB, s *Store, dir uint64) []string {
	t.Helper()
	var out []string
	if err := s.ReadDir(dir, "", func(d Dirent) bool { out = append(out, d.Name); return true }); err != nil {
		t.Fatalf("ReadDir(%d): %v", dir, err)
	}
	return out
}

// pattern returns n bytes that depend on seed and on their position.
func pattern(seed byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7) + byte(i>>8)
	}
	return b
}

// ---- invariants ----------------------------------------------------------

// rawInode is everything the store holds under one inode prefix.
type rawInode struct {
	attr     *Attr
	dirents  map[string]Dirent
	backrefs map[backref]bool
	chunks   map[uint64]int // chunk index -> stored length
	link     *string
	xattrs   int
}

type backref struct {
	parent uint64
	name   string
}

// rawState reads every key of the store.
type rawState struct {
	inodes              map[uint64]*rawInode
	orphans             map[uint64]bool
	format, next, count uint64
	journal             []Record
	journalFirst        uint64 // the oldest record's number
}

func readRaw(t testing.TB, s *Store) *rawState {
	t.Helper()
	st := &rawState{inodes: map[uint64]*rawInode{}, orphans: map[uint64]bool{}}
	it, err := s.db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	ino := func(n uint64) *rawInode {
		r := st.inodes[n]
		if r == nil {
			r = &rawInode{dirents: map[string]Dirent{}, backrefs: map[backref]bool{}, chunks: map[uint64]int{}}
			st.inodes[n] = r
		}
		return r
	}
	for it.First(); it.Valid(); it.Next() {
		k, v := it.Key(), it.Value()
		switch k[0] {
		case pfxMeta:
			if bytes.HasPrefix(k, userMetaKey("")) {
				continue // values of the layers above
			}
			if bytes.Equal(k, keyUsage) || bytes.Equal(k, keyJournalUsage) || bytes.Equal(k, keyAuditUsage) {
				continue // merge operands; Check counts them
			}
			if bytes.Equal(k, keyOwners) {
				if _, err := decodeOwners(v); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if len(v) != 8 {
				t.Fatalf("meta key %q holds %d bytes", k, len(v))
			}
			switch {
			case bytes.Equal(k, keyFormat):
				st.format = binary.BigEndian.Uint64(v)
			case bytes.Equal(k, keyNextIno):
				st.next = binary.BigEndian.Uint64(v)
			case bytes.Equal(k, keyInodes):
				st.count = binary.BigEndian.Uint64(v)
			default:
				t.Errorf("unknown meta key %q", k)
			}
		case pfxJournal:
			if len(k) != 9 {
				t.Fatalf("journal key %q", k)
			}
			seq := binary.BigEndian.Uint64(k[1:])
			r, err := decodeRecord(seq, v)
			if err != nil {
				t.Fatal(err)
			}
			if len(st.journal) == 0 {
				st.journalFirst = seq // older ones may have been trimmed
			}
			if want := st.journalFirst + uint64(len(st.journal)); seq != want {
				t.Fatalf("journal record %d where %d was due: a gap", seq, want)
			}
			st.journal = append(st.journal, r)
		case pfxOrphan:
			if len(k) != 9 {
				t.Fatalf("orphan key %q", k)
			}
			st.orphans[binary.BigEndian.Uint64(k[1:])] = true
		case pfxInode:
			if len(k) < 10 {
				t.Fatalf("short inode key %q", k)
			}
			r := ino(binary.BigEndian.Uint64(k[1:]))
			rest := k[10:]
			switch k[9] {
			case kindAttr:
				a, err := decodeAttr(v)
				if err != nil || len(rest) != 0 {
					t.Fatalf("attr key %q: %v", k, err)
				}
				r.attr = &a
			case kindChunk:
				if len(rest) != 8 {
					t.Fatalf("chunk key %q", k)
				}
				r.chunks[binary.BigEndian.Uint64(rest)] = len(v)
			case kindDirent:
				child, typ, err := decodeDirent(v)
				if err != nil {
					t.Fatalf("dirent %q: %v", k, err)
				}
				r.dirents[string(rest)] = Dirent{Name: string(rest), Ino: child, Type: typ}
			case kindLink:
				target := string(v)
				r.link = &target
			case kindBackref:
				if len(rest) < 8 {
					t.Fatalf("back reference key %q", k)
				}
				r.backrefs[backref{binary.BigEndian.Uint64(rest), string(rest[8:])}] = true
			case kindXattr:
				r.xattrs++
			case kindOrigin:
				if _, err := decodeOrigin(v); err != nil {
					t.Fatalf("origin %q: %v", k, err)
				}
			default:
				t.Fatalf("unknown inode key kind %q", k)
			}
		case pfxAudit: // the tools' records; Check counts them
		default:
			t.Fatalf("key with unknown prefix %q", k)
		}
	}
	return st
}

// checkOpts relax checkInvariants for stores where the rules do not hold.
type checkOpts struct {
	approxBlocks bool // st_blocks may be approximate (huge sparse truncates)
}

// checkInvariants reads the whole store and checks that it is a consistent
// file system: every key belongs to a live inode, directory entries and back
// references mirror each other, link counts match the names, every inode is
// reachable from the root or an orphan, the counters agree with the keys and
// file data lies within the file sizes. It returns the raw state.
func checkInvariants(t testing.TB, s *Store, o checkOpts) *rawState {
	t.Helper()
	st := readRaw(t, s)
	errorf := func(format string, args ...any) {
		t.Helper()
		t.Errorf("invariant: "+format, args...)
	}
	if st.format != FormatVersion {
		errorf("format version %d", st.format)
	}
	s.attrs.mu.Lock()
	for ino, cached := range s.attrs.m {
		r := st.inodes[ino]
		if r == nil || r.attr == nil {
			errorf("the attribute cache holds inode %d, which the store does not have", ino)
		} else if *r.attr != cached {
			errorf("the attribute cache holds %+v for inode %d, the store %+v", cached, ino, *r.attr)
		}
	}
	for ino, tail := range s.attrs.tails {
		r := st.inodes[ino]
		switch {
		case r == nil || r.attr == nil:
			errorf("the cache knows the tail of inode %d, which the store does not have", ino)
		case r.attr.Size != tail.ci*ChunkSize+tail.len || uint64(r.chunks[tail.ci]) != tail.len:
			errorf("the cache says inode %d ends with %d bytes in chunk %d; it is %d bytes long, that chunk holds %d",
				ino, tail.len, tail.ci, r.attr.Size, r.chunks[tail.ci])
		}
	}
	s.attrs.mu.Unlock()
	var maxIno uint64
	for ino, r := range st.inodes {
		maxIno = max(maxIno, ino)
		if r.attr == nil {
			errorf("inode %d has keys but no attributes (%d dirents, %d backrefs, %d chunks, %d xattrs)",
				ino, len(r.dirents), len(r.backrefs), len(r.chunks), r.xattrs)
			continue
		}
		a := r.attr
		if a.Ino != ino {
			errorf("attributes of %d say ino %d", ino, a.Ino)
		}
		if len(r.dirents) > 0 && !a.IsDir() {
			errorf("non-directory %d has %d entries", ino, len(r.dirents))
		}
		if (a.Mode&S_IFMT == S_IFLNK) != (r.link != nil) {
			errorf("inode %d mode %o: symlink target present = %v", ino, a.Mode, r.link != nil)
		}
		if r.link != nil && a.Size != uint64(len(*r.link)) {
			errorf("symlink %d size %d, target %d bytes", ino, a.Size, len(*r.link))
		}
		if len(r.chunks) > 0 && !a.IsRegular() {
			errorf("non-regular inode %d (mode %o) has %d chunks", ino, a.Mode, len(r.chunks))
		}
		var blocks uint64
		for ci, n := range r.chunks {
			if n > ChunkSize {
				errorf("inode %d chunk %d holds %d bytes", ino, ci, n)
			}
			if ci*ChunkSize+uint64(n) > a.Size {
				errorf("inode %d chunk %d (%d bytes) extends past the size %d", ino, ci, n, a.Size)
			}
			blocks += blocksFor(uint64(n))
		}
		if a.Flags&FlagBlob != 0 {
			// The data is in the blob: st_blocks is the blob file's.
			if len(r.chunks) > 0 {
				errorf("blob inode %d has %d chunks", ino, len(r.chunks))
			}
			var fst syscall.Stat_t
			if err := syscall.Stat(s.blobs.path(ino), &fst); err != nil {
				errorf("blob inode %d: %v", ino, err)
			} else if !o.approxBlocks && a.Blocks != uint64(fst.Blocks) {
				errorf("blob inode %d has Blocks %d, its blob holds %d", ino, a.Blocks, fst.Blocks)
			}
		} else if !o.approxBlocks && a.IsRegular() && a.Blocks != blocks {
			errorf("inode %d has Blocks %d, its chunks hold %d", ino, a.Blocks, blocks)
		}
		if a.Nlink == 0 && !st.orphans[ino] {
			errorf("inode %d has nlink 0 and is no orphan", ino)
		}
		if a.Nlink != 0 && st.orphans[ino] {
			errorf("orphan %d has nlink %d", ino, a.Nlink)
		}
	}
	for ino := range st.orphans {
		if r := st.inodes[ino]; r == nil || r.attr == nil {
			errorf("orphan key for missing inode %d", ino)
		}
	}
	if st.next <= maxIno {
		errorf("next inode %d <= largest inode %d", st.next, maxIno)
	}
	if s.nextIno != st.next {
		errorf("in-memory next inode %d, stored %d", s.nextIno, st.next)
	}

	// Names: walk every directory's entries.
	names := map[uint64]int{}   // ino -> number of dirents naming it
	subdirs := map[uint64]int{} // dir -> number of subdirectories
	for dir, r := range st.inodes {
		for name, d := range r.dirents {
			if checkName(name) != nil {
				errorf("entry %q in %d has an invalid name", name, dir)
			}
			c := st.inodes[d.Ino]
			if c == nil || c.attr == nil {
				errorf("entry %q in %d names missing inode %d", name, dir, d.Ino)
				continue
			}
			if c.attr.Mode&S_IFMT != d.Type {
				errorf("entry %q in %d has type %o, inode %d has mode %o", name, dir, d.Type, d.Ino, c.attr.Mode)
			}
			if !c.backrefs[backref{dir, name}] {
				errorf("entry %q in %d -> %d has no back reference", name, dir, d.Ino)
			}
			names[d.Ino]++
			if c.attr.IsDir() {
				subdirs[dir]++
			}
		}
	}
	for ino, r := range st.inodes {
		for br := range r.backrefs {
			p := st.inodes[br.parent]
			if p == nil || p.dirents[br.name].Ino != ino {
				errorf("back reference of %d to (%d, %q) has no matching entry", ino, br.parent, br.name)
			}
		}
		if r.attr == nil {
			continue
		}
		a := r.attr
		switch {
		case ino == RootIno:
			if !a.IsDir() || names[ino] != 0 {
				errorf("root: mode %o, %d names", a.Mode, names[ino])
			}
		case a.IsDir() && a.Nlink > 0 && names[ino] != 1:
			errorf("directory %d has %d names", ino, names[ino])
		case !a.IsDir() && int(a.Nlink) != names[ino]:
			errorf("inode %d has nlink %d and %d names", ino, a.Nlink, names[ino])
		case a.Nlink == 0 && names[ino] != 0:
			errorf("inode %d has nlink 0 and %d names", ino, names[ino])
		}
		if a.IsDir() && a.Nlink > 0 && int(a.Nlink) != 2+subdirs[ino] {
			errorf("directory %d has nlink %d and %d subdirectories", ino, a.Nlink, subdirs[ino])
		}
	}

	// Reachability from the root.
	seen := map[uint64]bool{RootIno: true}
	queue := []uint64{RootIno}
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		r := st.inodes[d]
		if r == nil {
			continue
		}
		for _, e := range r.dirents {
			if !seen[e.Ino] {
				seen[e.Ino] = true
				queue = append(queue, e.Ino)
			}
		}
	}
	live := 0
	for ino, r := range st.inodes {
		if r.attr == nil {
			continue
		}
		live++
		if !seen[ino] && !st.orphans[ino] {
			errorf("inode %d (mode %o, nlink %d) is unreachable and no orphan", ino, r.attr.Mode, r.attr.Nlink)
		}
	}
	if st.count != uint64(live) {
		errorf("stored inode count %d, %d inodes exist", st.count, live)
	}
	if n := s.inodes.Load(); n != int64(live) {
		errorf("in-memory inode count %d, %d inodes exist", n, live)
	}
	if problems, err := s.Check(0); err != nil || len(problems) > 0 {
		t.Errorf("Check: %v %q", err, problems)
	}
	if fs, err := s.StatFs(); err != nil {
		t.Errorf("StatFs: %v", err)
	} else if used := fs.Files - fs.Ffree; used != uint64(live) {
		errorf("StatFs counts %d inodes, %d exist", used, live)
	}
	return st
}

// ---- canonical view ------------------------------------------------------

// entry is what a path shows: enough to compare a store with a model.
type entry struct {
	Type   uint32 // S_IFMT bits
	Perm   uint32
	Nlink  uint32
	Size   uint64
	Data   string // file contents or symlink target
	Linkto string // the first path (in walk order) with the same inode
}

// view is the observable state of a tree: path -> entry.
type view map[string]entry

// storeView walks the tree below dir. With data, file contents are read.
func storeView(t testing.TB, s *Store, dir uint64, data bool) view {
	t.Helper()
	v := view{}
	first := map[uint64]string{}
	var walk func(dir uint64, prefix string)
	walk = func(dir uint64, prefix string) {
		var ents []Dirent
		if err := s.ReadDir(dir, "", func(d Dirent) bool { ents = append(ents, d); return true }); err != nil {
			t.Fatalf("ReadDir(%d): %v", dir, err)
		}
		for _, d := range ents {
			p := path.Join(prefix, d.Name)
			a, err := s.GetAttr(d.Ino)
			if err != nil {
				t.Fatalf("%s: GetAttr(%d): %v", p, d.Ino, err)
			}
			if a.Mode&S_IFMT != d.Type {
				t.Fatalf("%s: entry type %o, inode mode %o", p, d.Type, a.Mode)
			}
			e := entry{Type: a.Mode & S_IFMT, Perm: a.Mode &^ S_IFMT, Nlink: a.Nlink, Size: a.Size}
			if f, ok := first[d.Ino]; ok {
				e.Linkto = f
			} else {
				first[d.Ino] = p
			}
			switch {
			case a.IsDir():
				walk(d.Ino, p)
			case a.Mode&S_IFMT == S_IFLNK:
				target, err := s.Readlink(d.Ino)
				if err != nil {
					t.Fatalf("%s: Readlink: %v", p, err)
				}
				e.Data = target
			case a.IsRegular() && data && e.Linkto == "":
				buf := make([]byte, a.Size)
				n, _, err := s.Read(d.Ino, 0, buf)
				if err != nil || n != len(buf) {
					t.Fatalf("%s: Read: %d of %d bytes, %v", p, n, len(buf), err)
				}
				e.Data = string(buf)
			}
			v[p] = e
		}
	}
	walk(dir, "")
	return v
}

// equal reports whether two views are the same.
func (v view) equal(w view) bool {
	if len(v) != len(w) {
		return false
	}
	for k, e := range v {
		if f, ok := w[k]; !ok || e != f {
			return false
		}
	}
	return true
}

// diff describes how two views differ ("" if they are equal).
func (v view) diff(w view) string {
	var keys []string
	for k := range v {
		keys = append(keys, k)
	}
	for k := range w {
		if _, ok := v[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var out bytes.Buffer
	for _, k := range keys {
		a, aok := v[k]
		b, bok := w[k]
		switch {
		case !aok:
			fmt.Fprintf(&out, "  %s: missing in the first, second has %s\n", k, b)
		case !bok:
			fmt.Fprintf(&out, "  %s: first has %s, missing in the second\n", k, a)
		case a != b:
			fmt.Fprintf(&out, "  %s: %s != %s\n", k, a, b)
		}
	}
	return out.String()
}

func (e entry) String() string {
	d := e.Data
	if len(d) > 16 {
		d = fmt.Sprintf("%q...(%d bytes, crc %08x)", d[:16], len(d), crc(d))
	} else {
		d = fmt.Sprintf("%q", d)
	}
	return fmt.Sprintf("{type %o perm %o nlink %d size %d data %s link %q}", e.Type, e.Perm, e.Nlink, e.Size, d, e.Linkto)
}

func crc(s string) uint32 {
	var h uint32 = 2166136261
	for i := 0; i < len(s); i++ {
		h = (h ^ uint32(s[i])) * 16777619
	}
	return h
}

// isSentinel reports whether err is one of the package's POSIX errors (and
// not an I/O or corruption error).
func isSentinel(err error) bool {
	var e *Error
	return err == nil || errors.As(err, &e)
}

// plantKey writes a raw key into an open store (for corrupting tests).
// It goes through commit, as the store's own writes do, so that the
// attribute cache sees it.
func plantKey(t testing.TB, s *Store, key, value []byte) {
	t.Helper()
	b := s.db.NewBatch()
	defer b.Close()
	b.Set(key, value, nil)
	if err := s.commit(b); err != nil {
		t.Fatal(err)
	}
}

// bulkCreateFiles writes the records Create would write for empty regular
// files named names in dir, many per batch. Only for building huge
// directories under the race detector, where Create is slow.
func bulkCreateFiles(t testing.TB, s *Store, dir uint64, names []string) {
	t.Helper()
	s.nsMu.Lock()
	defer s.nsMu.Unlock()
	ts := now()
	b := s.db.NewBatch()
	for i, name := range names {
		a := Attr{Ino: s.nextIno, Mode: S_IFREG | 0o644, Nlink: 1, Atime: ts, Mtime: ts, Ctime: ts, Btime: ts}
		b.Set(attrKey(a.Ino), a.encode(), nil)
		b.Set(direntKey(dir, name), encodeDirent(a.Ino, a.Mode), nil)
		b.Set(backrefKey(a.Ino, dir, name), nil, nil)
		s.nextIno++
		s.inodes.Add(1)
		if i%5000 == 4999 || i == len(names)-1 {
			b.Set(keyNextIno, u64(s.nextIno), nil)
			b.Set(keyInodes, u64(uint64(s.inodes.Load())), nil)
			if err := s.commit(b); err != nil {
				t.Fatal(err)
			}
			b.Close()
			b = s.db.NewBatch()
		}
	}
	b.Close()
}
