package kv

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// snapOptions open stores whose files become blobs past 16 KiB, so that
// the writers below make and overwrite many blobs.
func snapOptions() Options {
	o := quietOptions()
	o.BlobThreshold = 16 << 10
	return o
}

func openSnapStore(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(dir, snapOptions())
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	s.checkTails = true
	t.Cleanup(func() { s.Close() })
	return s
}

// openFork forks s (from the snapshot from, or live) into a new directory
// and opens it.
func openFork(t testing.TB, s *Store, from string) *Store {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "fork")
	if err := s.Fork(dst, from); err != nil {
		t.Fatalf("Fork(%q): %v", from, err)
	}
	return openSnapStore(t, dst)
}

// files is a model: the files of one directory, name to content.
type files map[string]string

func (f files) clone() files {
	c := make(files, len(f))
	for k, v := range f {
		c[k] = v
	}
	return c
}

func (f files) String() string {
	var ks []string
	for k, v := range f {
		ks = append(ks, fmt.Sprintf("%s(%d bytes, crc %08x)", k, len(v), crc(v)))
	}
	sort.Strings(ks)
	return strings.Join(ks, " ")
}

// dirFiles reads the regular files of the directory name under the root.
func dirFiles(t testing.TB, s *Store, name string) files {
	t.Helper()
	out := files{}
	for p, e := range storeView(t, s, RootIno, true) {
		if d, n, ok := strings.Cut(p, "/"); ok && d == name {
			out[n] = e.Data
		}
	}
	return out
}

func equalFiles(a, b files) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || v != w {
			return false
		}
	}
	return true
}

// writer runs random operations in a directory of its own and keeps the
// state after each, with the clock ticks at which each began and ended.
type writer struct {
	name       string
	dir        uint64
	states     []files // states[n]: after n operations
	start, end []int64
	rnd        *rand.Rand
}

func (w *writer) step(t testing.TB, s *Store, clock *atomic.Int64) {
	cur := w.states[len(w.states)-1].clone()
	var names []string
	for n := range cur {
		names = append(names, n)
	}
	sort.Strings(names)
	w.start = append(w.start, clock.Add(1))
	r := w.rnd
	switch op := r.Intn(10); {
	case len(names) == 0 || op < 3: // create, small or big
		name := fmt.Sprintf("f%d", r.Intn(12))
		if _, ok := cur[name]; ok {
			break
		}
		data := pattern(byte(r.Intn(256)), []int{100, 5000, 40 << 10, 100 << 10}[r.Intn(4)])
		a, err := s.Create(w.dir, name, NewInode{Mode: S_IFREG | 0o644})
		if err != nil {
			t.Errorf("create %s: %v", name, err)
			return
		}
		// Two batches: the model holds the empty file in between, which
		// a snapshot may see; the state after the create is recorded.
		w.end = append(w.end, clock.Add(1))
		cur[name] = ""
		w.states = append(w.states, cur.clone())
		w.start = append(w.start, clock.Add(1))
		if _, err := s.Write(a.Ino, 0, data); err != nil {
			t.Errorf("write %s: %v", name, err)
		}
		cur[name] = string(data)
	case op < 7: // overwrite in place, maybe past the end
		name := names[r.Intn(len(names))]
		a, err := s.Lookup(w.dir, name)
		if err != nil {
			t.Errorf("lookup %s: %v", name, err)
			return
		}
		old := cur[name]
		off := r.Intn(len(old) + 1)
		data := pattern(byte(r.Intn(256)), 1+r.Intn(20<<10))
		if _, err := s.Write(a.Ino, int64(off), data); err != nil {
			t.Errorf("write %s: %v", name, err)
		}
		b := []byte(old)
		if end := off + len(data); end > len(b) {
			b = append(b, make([]byte, end-len(b))...)
		}
		copy(b[off:], data)
		cur[name] = string(b)
	case op < 8: // truncate
		name := names[r.Intn(len(names))]
		a, err := s.Lookup(w.dir, name)
		if err != nil {
			t.Errorf("lookup %s: %v", name, err)
			return
		}
		size := r.Intn(len(cur[name]) + 1)
		if _, err := s.SetAttr(a.Ino, SetAttrRequest{Valid: SetSize, Size: uint64(size)}); err != nil {
			t.Errorf("truncate %s: %v", name, err)
		}
		cur[name] = cur[name][:size]
	case op < 9: // rename, maybe over another
		from, to := names[r.Intn(len(names))], fmt.Sprintf("f%d", r.Intn(12))
		if from == to {
			break
		}
		if err := s.Rename(w.dir, from, w.dir, to, 0); err != nil {
			t.Errorf("rename %s %s: %v", from, to, err)
		}
		cur[to] = cur[from]
		delete(cur, from)
	default:
		name := names[r.Intn(len(names))]
		if err := s.Unlink(w.dir, name); err != nil {
			t.Errorf("unlink %s: %v", name, err)
		}
		delete(cur, name)
	}
	w.end = append(w.end, clock.Add(1))
	w.states = append(w.states, cur)
}

// consistentWith checks that got is the writer's state after some n
// operations, n at least those that ended before the snapshot began and at
// most those that began before it ended.
func (w *writer) consistentWith(t testing.TB, what string, got files, snapStart, snapEnd int64) {
	t.Helper()
	lo, hi := 0, 0
	for i := range w.end {
		if w.end[i] < snapStart {
			lo = i + 1
		}
		if w.start[i] < snapEnd {
			hi = i + 1
		}
	}
	for n := lo; n <= hi; n++ {
		if equalFiles(w.states[n], got) {
			return
		}
	}
	t.Errorf("%s: %s holds %v, which is none of its states after %d to %d operations; after %d: %v", what, w.name, got, lo, hi, lo, w.states[lo])
}

// TestSnapshotConsistentUnderWriters takes snapshots while writers create,
// overwrite (chunks and blobs, in place), truncate, rename and unlink;
// each snapshot, forked and opened, must hold for each writer its state
// after some prefix of its operations that contains every operation ended
// before the snapshot began, and nothing begun after it ended. The parent
// must end in the writers' final states, and the snapshots must not have
// moved meanwhile.
func TestSnapshotConsistentUnderWriters(t *testing.T) {
	s := openSnapStore(t, filepath.Join(t.TempDir(), "store"))
	const nWriters, nOps, nSnaps = 3, 300, 12
	var clock atomic.Int64
	ws := make([]*writer, nWriters)
	for i := range ws {
		name := fmt.Sprintf("w%d", i)
		ws[i] = &writer{name: name, dir: mkdir(t, s, RootIno, name).Ino, states: []files{{}}, rnd: rand.New(rand.NewSource(int64(i + 1)))}
	}
	var wg sync.WaitGroup
	var done atomic.Int32
	for _, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer done.Add(1)
			for range nOps {
				w.step(t, s, &clock)
			}
		}()
	}
	type snap struct {
		name       string
		start, end int64
	}
	var snaps []snap
	for i := 0; i < nSnaps && done.Load() < nWriters; i++ {
		name := fmt.Sprintf("s%d", i)
		start := clock.Add(1)
		if _, err := s.Snapshot(name); err != nil {
			t.Fatalf("Snapshot: %v", err)
		}
		snaps = append(snaps, snap{name, start, clock.Add(1)})
	}
	wg.Wait()
	t.Logf("%d snapshots taken while the writers ran (clock at %d)", len(snaps), clock.Load())
	for _, w := range ws {
		if got, want := dirFiles(t, s, w.name), w.states[len(w.states)-1]; !equalFiles(got, want) {
			t.Errorf("parent: %s holds %v, want %v", w.name, got, want)
		}
	}
	checkInvariants(t, s, checkOpts{})
	for _, sn := range snaps {
		f := openFork(t, s, sn.name)
		for _, w := range ws {
			w.consistentWith(t, sn.name, dirFiles(t, f, w.name), sn.start, sn.end)
		}
		checkInvariants(t, f, checkOpts{})
		if problems, err := f.Check(10); err != nil || len(problems) > 0 {
			t.Errorf("fork of %s: Check: %v %v", sn.name, problems, err)
		}
	}
	list, err := s.Snapshots()
	if err != nil || len(list) != len(snaps) {
		t.Fatalf("Snapshots: %v, %v; want %d", list, err, len(snaps))
	}
}

// TestForkIsolation writes the same files, blobs and chunks, in a parent,
// its snapshot's fork and a live fork: none sees another's writes, and a
// second fork of the snapshot still holds the snapshot's state.
func TestForkIsolation(t *testing.T) {
	s := openSnapStore(t, filepath.Join(t.TempDir(), "store"))
	big := mkfile(t, s, RootIno, "big")
	write(t, s, big.Ino, 0, pattern(1, 200<<10))
	small := mkfile(t, s, RootIno, "small")
	write(t, s, small.Ino, 0, pattern(2, 1000))
	if _, err := s.Snapshot("base"); err != nil {
		t.Fatal(err)
	}
	want := storeView(t, s, RootIno, true)
	a := openFork(t, s, "base")
	b := openFork(t, s, "")
	stores := []*Store{s, a, b}
	for i, st := range stores {
		write(t, st, big.Ino, 4096, bytes.Repeat([]byte{byte('A' + i)}, 8192))
		write(t, st, small.Ino, 10, bytes.Repeat([]byte{byte('a' + i)}, 10))
		if _, err := st.SetAttr(big.Ino, SetAttrRequest{Valid: SetSize, Size: 100 << 10}); err != nil {
			t.Fatal(err)
		}
	}
	for i, st := range stores {
		got := readAll(t, st, big.Ino)
		exp := pattern(1, 200<<10)[:100<<10]
		copy(exp[4096:], bytes.Repeat([]byte{byte('A' + i)}, 8192))
		if !bytes.Equal(got, exp) {
			t.Errorf("store %d: big holds another store's writes", i)
		}
		if got := readAll(t, st, small.Ino); got[10] != byte('a'+i) {
			t.Errorf("store %d: small holds %q", i, got[10])
		}
		checkInvariants(t, st, checkOpts{})
	}
	c := openFork(t, s, "base")
	if got := storeView(t, c, RootIno, true); !got.equal(want) {
		t.Errorf("the snapshot moved:\n%s", want.diff(got))
	}
}

// TestSnapshotPinnedBlob: a blob the kernel writes directly (pinned for
// writing) is copied into the snapshot with what it held then; later
// writes reach the parent only, and the fork takes the blob's size from
// its copy. A blob pinned only for reading is copied too, so that a later
// write through the same backing file cannot reach the snapshot.
func TestSnapshotPinnedBlob(t *testing.T) {
	s := openSnapStore(t, filepath.Join(t.TempDir(), "store"))
	w := mkfile(t, s, RootIno, "w")
	write(t, s, w.Ino, 0, pattern(1, 64<<10))
	r := mkfile(t, s, RootIno, "r")
	write(t, s, r.Ino, 0, pattern(2, 64<<10))
	fw, ok, err := s.PinBlob(w.Ino, true)
	if err != nil || !ok {
		t.Fatalf("PinBlob: %v %v", ok, err)
	}
	fr, ok, err := s.PinBlob(r.Ino, false)
	if err != nil || !ok {
		t.Fatalf("PinBlob: %v %v", ok, err)
	}
	// The kernel's writes: in place and past the recorded end.
	at := pattern(3, 80<<10)
	if _, err := fw.WriteAt(at, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Snapshot("pinned"); err != nil {
		t.Fatal(err)
	}
	if _, err := fw.WriteAt(pattern(4, 90<<10), 0); err != nil {
		t.Fatal(err)
	}
	// A write open of r now shares r's backing file (fr).
	if _, ok, err := s.PinBlob(r.Ino, true); err != nil || !ok {
		t.Fatalf("PinBlob: %v %v", ok, err)
	}
	if _, err := fr.WriteAt(pattern(5, 64<<10), 0); err != nil {
		t.Fatal(err)
	}
	for _, u := range []struct {
		ino   uint64
		write bool
	}{{w.Ino, true}, {r.Ino, false}, {r.Ino, true}} {
		if err := s.UnpinBlob(u.ino, u.write); err != nil {
			t.Fatal(err)
		}
	}
	if got := readAll(t, s, w.Ino); !bytes.Equal(got, pattern(4, 90<<10)) {
		t.Errorf("parent: w holds %d bytes, not the kernel's last write", len(got))
	}
	if got := readAll(t, s, r.Ino); !bytes.Equal(got, pattern(5, 64<<10)) {
		t.Errorf("parent: r holds %d bytes, not the kernel's write", len(got))
	}
	f := openFork(t, s, "pinned")
	if got := readAll(t, f, w.Ino); !bytes.Equal(got, at) {
		t.Errorf("snapshot: w holds %d bytes, want the 80 KiB written before the snapshot", len(got))
	}
	if got := readAll(t, f, r.Ino); !bytes.Equal(got, pattern(2, 64<<10)) {
		t.Errorf("snapshot: r changed after the snapshot")
	}
	checkInvariants(t, f, checkOpts{})
}

// TestSnapshotListDelete: names are checked, taken once, listed, deleted;
// a fork of a deleted snapshot is refused, and deleting a snapshot leaves
// its forks and the parent whole.
func TestSnapshotListDelete(t *testing.T) {
	s := openSnapStore(t, filepath.Join(t.TempDir(), "store"))
	ino := mkfile(t, s, RootIno, "f").Ino
	write(t, s, ino, 0, pattern(1, 100<<10))
	for _, bad := range []string{"", ".x", "../x", "a/b", strings.Repeat("x", 65)} {
		if _, err := s.Snapshot(bad); err == nil {
			t.Errorf("Snapshot(%q) worked", bad)
		}
	}
	if _, err := s.Snapshot("one"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Snapshot("one"); !errors.Is(err, ErrSnapshotExists) {
		t.Errorf("second Snapshot(one): %v", err)
	}
	write(t, s, ino, 0, pattern(2, 100<<10))
	if _, err := s.Snapshot("two"); err != nil {
		t.Fatal(err)
	}
	list, err := s.Snapshots()
	if err != nil || len(list) != 2 || list[0].Name != "one" || list[1].Name != "two" {
		t.Fatalf("Snapshots: %+v %v", list, err)
	}
	// "one" alone holds the blob's old content once the parent wrote it.
	if list[0].Own < 100<<10 {
		t.Errorf("snapshot one owns %d bytes, want at least the old blob's", list[0].Own)
	}
	f := openFork(t, s, "one")
	if err := s.DeleteSnapshot("one"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSnapshot("one"); !errors.Is(err, ErrNoSnapshot) {
		t.Errorf("second delete: %v", err)
	}
	if err := s.Fork(filepath.Join(t.TempDir(), "x"), "one"); !errors.Is(err, ErrNoSnapshot) {
		t.Errorf("fork of a deleted snapshot: %v", err)
	}
	if got := readAll(t, f, ino); !bytes.Equal(got, pattern(1, 100<<10)) {
		t.Errorf("the fork lost its data with the snapshot")
	}
	if got := readAll(t, s, ino); !bytes.Equal(got, pattern(2, 100<<10)) {
		t.Errorf("the parent lost its data with the snapshot")
	}
	if list, _ := s.Snapshots(); len(list) != 1 {
		t.Errorf("Snapshots after delete: %+v", list)
	}
	// A fork goes only into a new or empty directory.
	full := t.TempDir()
	os.WriteFile(filepath.Join(full, "x"), nil, 0o600)
	if err := s.Fork(full, ""); err == nil {
		t.Errorf("fork into a directory that is not empty worked")
	}
	// A fork of a store that is not open, from its snapshot directory.
	dir := s.Dir()
	s.Close()
	src, err := SnapshotDir(dir, "two")
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "fork")
	if err := ForkSnapshot(src, dst); err != nil {
		t.Fatal(err)
	}
	g := openSnapStore(t, dst)
	if got := readAll(t, g, ino); !bytes.Equal(got, pattern(2, 100<<10)) {
		t.Errorf("fork of a closed store's snapshot: wrong content")
	}
}

// TestChangeOwners gives one owner's inodes to another, and only those,
// through the owner map: at once whatever the count, in every way an
// inode's attributes are read, across a reopen, composed over forks of
// forks, a number given again, and a rollback (the map is the store's).
func TestChangeOwners(t *testing.T) {
	s := newStore(t)
	var mine []uint64
	for i := range 2500 {
		a, err := s.Create(RootIno, fmt.Sprintf("f%d", i), NewInode{Mode: S_IFREG | 0o644, Uid: 7, Gid: 8})
		if err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			write(t, s, a.Ino, 0, pattern(1, 3*ChunkSize))
		}
		mine = append(mine, a.Ino)
	}
	other, err := s.Create(RootIno, "other", NewInode{Mode: S_IFREG | 0o644, Uid: 9, Gid: 8})
	if err != nil {
		t.Fatal(err)
	}
	getattr(t, s, mine[1]) // in the attribute cache before the change
	owners := func(s *Store, want map[uint64]Owner) {
		t.Helper()
		for ino, o := range want {
			if a := getattr(t, s, ino); a.Uid != o.UID || a.Gid != o.GID {
				t.Fatalf("inode %d: owner %d:%d, want %d:%d", ino, a.Uid, a.Gid, o.UID, o.GID)
			}
		}
	}
	want := func(mineTo, otherTo Owner) map[uint64]Owner {
		m := map[uint64]Owner{other.Ino: otherTo}
		for _, ino := range mine {
			m[ino] = mineTo
		}
		return m
	}
	if err := s.ChangeOwners(Owner{7, 8}, Owner{70, 80}); err != nil {
		t.Fatal(err)
	}
	owners(s, want(Owner{70, 80}, Owner{9, 80}))
	// Made after: the new owner's own.
	late, err := s.Create(RootIno, "late", NewInode{Mode: S_IFREG | 0o644, Uid: 70, Gid: 80})
	if err != nil {
		t.Fatal(err)
	}
	// A change of attributes writes the mapped owner.
	if _, err := s.SetAttr(mine[2], SetAttrRequest{Valid: SetMode, Mode: 0o600}); err != nil {
		t.Fatal(err)
	}
	stored := func(ino uint64) Attr {
		t.Helper()
		v, err := s.get(attrKey(ino))
		if err != nil {
			t.Fatal(err)
		}
		a, err := decodeAttr(v)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	if a := stored(mine[2]); a.Uid != 70 || a.Gid != 80 {
		t.Errorf("stored after chmod: %d:%d, want 70:80", a.Uid, a.Gid)
	}
	if a := stored(mine[3]); a.Uid != 7 {
		t.Errorf("stored untouched: uid %d, want 7 (the map does the rest)", a.Uid)
	}
	checkInvariants(t, s, checkOpts{})
	if _, err := s.Snapshot("before"); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s)
	owners(s, want(Owner{70, 80}, Owner{9, 80}))
	// A fork of the fork: 70 goes to 700, and 7 (mapped to 70) with it.
	if err := s.ChangeOwners(Owner{70, 80}, Owner{700, 800}); err != nil {
		t.Fatal(err)
	}
	w := want(Owner{700, 800}, Owner{9, 800})
	w[late.Ino] = Owner{700, 800}
	owners(s, w)
	// A rollback to a snapshot of before: its inodes, mapped by the
	// store's map (still 700:800).
	if _, err := s.Rollback("before"); err != nil {
		t.Fatal(err)
	}
	owners(s, w)
	// The number 7 given again (its store gone): 7 is 7 again, and the
	// rest goes to it.
	if err := s.ChangeOwners(Owner{700, 800}, Owner{7, 8}); err != nil {
		t.Fatal(err)
	}
	w = want(Owner{7, 8}, Owner{9, 8})
	w[late.Ino] = Owner{7, 8}
	owners(s, w)
	s = reopen(t, s)
	owners(s, w)
}

// TestSnapshotLeftovers: what a crash leaves of a snapshot being taken or
// deleted is not listed, goes when the store opens, and does not stop a
// snapshot of the same name.
func TestSnapshotLeftovers(t *testing.T) {
	s := openSnapStore(t, filepath.Join(t.TempDir(), "store"))
	ino := mkfile(t, s, RootIno, "f").Ino
	write(t, s, ino, 0, pattern(1, 100<<10))
	root := filepath.Join(s.Dir(), snapshotsDir)
	for _, d := range []string{".tmp-a", ".del-b"} {
		if err := os.MkdirAll(filepath.Join(root, d, "db"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if list, err := s.Snapshots(); err != nil || len(list) != 0 {
		t.Fatalf("Snapshots: %+v %v", list, err)
	}
	if _, err := s.Snapshot("a"); err != nil {
		t.Fatal(err)
	}
	dir := s.Dir()
	s.Close()
	s = openSnapStore(t, dir)
	entries, _ := os.ReadDir(root)
	if len(entries) != 1 || entries[0].Name() != "a" {
		t.Errorf("after open, snapshots/ holds %v", entries)
	}
	f := openFork(t, s, "a")
	if got := readAll(t, f, ino); !bytes.Equal(got, pattern(1, 100<<10)) {
		t.Errorf("fork: wrong content")
	}
}

// TestForkIsolationConcurrent runs random operations (creates, in-place
// overwrites of chunks and blobs, truncates, renames, unlinks) on a parent
// and two forks of it at once, from the same files: each ends in its own
// model's state, and a snapshot taken before the forks still holds the
// state they started from.
func TestForkIsolationConcurrent(t *testing.T) {
	s := openSnapStore(t, filepath.Join(t.TempDir(), "store"))
	var clock atomic.Int64
	base := &writer{name: "w", dir: mkdir(t, s, RootIno, "w").Ino, states: []files{{}}, rnd: rand.New(rand.NewSource(1))}
	for range 100 {
		base.step(t, s, &clock)
	}
	start := base.states[len(base.states)-1]
	if _, err := s.Snapshot("start"); err != nil {
		t.Fatal(err)
	}
	stores := []*Store{s, openFork(t, s, "start"), openFork(t, s, "")}
	var wg sync.WaitGroup
	ws := make([]*writer, len(stores))
	for i, st := range stores {
		ws[i] = &writer{name: "w", dir: base.dir, states: []files{start.clone()}, rnd: rand.New(rand.NewSource(int64(10 + i)))}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				ws[i].step(t, st, &clock)
			}
		}()
	}
	wg.Wait()
	for i, st := range stores {
		if got, want := dirFiles(t, st, "w"), ws[i].states[len(ws[i].states)-1]; !equalFiles(got, want) {
			t.Errorf("store %d: holds %v, want %v", i, got, want)
		}
		checkInvariants(t, st, checkOpts{})
	}
	if got := dirFiles(t, openFork(t, s, "start"), "w"); !equalFiles(got, start) {
		t.Errorf("the snapshot moved: %v, want %v", got, start)
	}
}
