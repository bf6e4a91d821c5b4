package kv

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The journal and the audit count in the usage and so in the quota: the
// holes TestRedteamJournalOutgrowsQuota found (a create/unlink loop deep
// in a tree of long names wrote ~200 KB of journal per pair, uncounted).

// deepTree makes depth nested directories of MaxNameLen-byte names under
// the root and returns the inodes, outermost first.
func deepTree(t *testing.T, s *Store, depth int) []uint64 {
	t.Helper()
	name := strings.Repeat("n", MaxNameLen)
	dirs := []uint64{RootIno}
	for i := 0; i < depth; i++ {
		a, err := s.Create(dirs[len(dirs)-1], name, NewInode{Mode: S_IFDIR | 0o755})
		if err != nil {
			t.Fatalf("level %d: %v", i, err)
		}
		dirs = append(dirs, a.Ino)
	}
	return dirs[1:]
}

// quotaBound is what the count may reach: the quota, its grace, and one
// record that a write took past the quota after its check.
func quotaBound(quota int64) int64 { return quota + QuotaGrace(quota) + 2*MaxRecordPath + 1024 }

// journalRecords reads the whole journal, checking each record's size.
func journalRecords(t *testing.T, s *Store) []Record {
	t.Helper()
	var recs []Record
	if err := s.ReadJournal(0, func(r Record) bool {
		if len(r.Path) > MaxRecordPath || len(r.Path2) > MaxRecordPath {
			t.Fatalf("record %d holds a path of %d bytes", r.Seq, max(len(r.Path), len(r.Path2)))
		}
		recs = append(recs, r)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return recs
}

func wantQuotaErr(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, ErrQuota) || Errno(err) != syscall.EDQUOT {
		t.Fatalf("%s: %v, want EDQUOT", what, err)
	}
}

// TestJournalCountsInQuota: in a 4 MiB workspace 400 levels deep in
// 255-byte names, create/unlink, chmod, rename, setxattr/removexattr,
// write/truncate, overwrite and link/unlink loops each stop with EDQUOT at
// the quota; the count (files, journal, audit) never passes the quota and
// its grace; every change that went in has its record and none is lost;
// records hold at most MaxRecordPath of a path (an ancestor, marked cut);
// the full workspace can still remove everything; Check agrees with the
// count, before and after reopening; trimming the journal gives its room
// back.
func TestJournalCountsInQuota(t *testing.T) {
	const quota = 4 << 20
	long := strings.Repeat("n", MaxNameLen)
	type env struct {
		s      *Store
		dirs   []uint64
		deep   uint64
		parent uint64
		state  string
	}
	variants := []struct {
		name string
		prep func(e *env)
		add  func(e *env, i int) error // may fail with EDQUOT
		free func(e *env, i int) error // nil, or must work
	}{
		{"create/unlink", nil,
			func(e *env, i int) error {
				_, err := e.s.Create(e.deep, "f", NewInode{Mode: S_IFREG | 0o644})
				return err
			},
			func(e *env, i int) error { return e.s.Unlink(e.deep, "f") }},
		{"mkdir/rmdir", nil,
			func(e *env, i int) error {
				_, err := e.s.Create(e.deep, long, NewInode{Mode: S_IFDIR | 0o755})
				return err
			},
			func(e *env, i int) error { return e.s.Rmdir(e.deep, long) }},
		{"chmod", nil,
			func(e *env, i int) error {
				_, err := e.s.SetAttr(e.deep, SetAttrRequest{Valid: SetMode, Mode: uint32(0o700 + i%2)})
				return err
			}, nil},
		{"rename a file", func(e *env) { mkfile(t, e.s, e.deep, "r0"); e.state = "r0" },
			func(e *env, i int) error {
				next := "r" + strconv.Itoa((i+1)%2)
				err := e.s.Rename(e.deep, e.state, e.deep, next, 0)
				if err == nil {
					e.state = next
				}
				return err
			}, nil},
		{"rename the deepest directory", func(e *env) { e.state = long },
			func(e *env, i int) error {
				next := strings.Repeat(string(rune('a'+i%2)), MaxNameLen)
				err := e.s.Rename(e.parent, e.state, e.parent, next, 0)
				if err == nil {
					e.state = next
				}
				return err
			}, nil},
		{"setxattr/removexattr", nil,
			func(e *env, i int) error { return e.s.SetXattr(e.deep, "user.k", []byte("v"), 0) },
			func(e *env, i int) error { return e.s.RemoveXattr(e.deep, "user.k") }},
		{"write/truncate", func(e *env) { e.state = strconv.FormatUint(mkfile(t, e.s, e.deep, "w").Ino, 10) },
			func(e *env, i int) error {
				ino, _ := strconv.ParseUint(e.state, 10, 64)
				_, err := e.s.Write(ino, 0, []byte("x"))
				return err
			},
			func(e *env, i int) error {
				ino, _ := strconv.ParseUint(e.state, 10, 64)
				_, err := e.s.SetAttr(ino, SetAttrRequest{Valid: SetSize, Size: 0})
				return err
			}},
		{"overwrite two files", func(e *env) {
			a, b := mkfile(t, e.s, e.deep, "o1"), mkfile(t, e.s, e.deep, "o2")
			write(t, e.s, a.Ino, 0, []byte("x"))
			write(t, e.s, b.Ino, 0, []byte("x"))
			e.state = strconv.FormatUint(a.Ino, 10) + " " + strconv.FormatUint(b.Ino, 10)
		},
			func(e *env, i int) error {
				ino, _ := strconv.ParseUint(strings.Fields(e.state)[i%2], 10, 64)
				_, err := e.s.Write(ino, 0, []byte("y"))
				return err
			}, nil},
		{"link/unlink", func(e *env) { e.state = strconv.FormatUint(mkfile(t, e.s, e.deep, "l").Ino, 10) },
			func(e *env, i int) error {
				ino, _ := strconv.ParseUint(e.state, 10, 64)
				_, err := e.s.Link(ino, e.deep, long)
				return err
			},
			func(e *env, i int) error { return e.s.Unlink(e.deep, long) }},
	}
	for _, v := range variants {
		t.Run(strings.ReplaceAll(v.name, " ", "_"), func(t *testing.T) {
			s := openQuota(t, quota)
			defer func() { s.Close() }()
			e := &env{s: s, dirs: deepTree(t, s, 400)}
			e.deep, e.parent = e.dirs[len(e.dirs)-1], e.dirs[len(e.dirs)-2]
			if v.prep != nil {
				v.prep(e)
			}
			bound := quotaBound(quota)
			check := func(what string) {
				t.Helper()
				if u := s.UsageDetail(); u.Used > bound {
					t.Fatalf("%s: the count is %d KiB (files %d, journal %d), past the quota and its grace (%d KiB)",
						what, u.Used>>10, u.Files>>10, u.Journal>>10, bound>>10)
				}
			}
			start, ok := s.LastSeq(), 0 // changes that went in, each with one record
			refused := false
			for i := 0; i < 20000 && !refused; i++ {
				if err := v.add(e, i); err != nil {
					wantQuotaErr(t, v.name, err)
					t.Logf("EDQUOT after %d loops at %d KiB of %d: %v", i, s.UsageDetail().Used>>10, quota>>10, err)
					refused = true
				} else {
					ok++
				}
				check("add")
				if v.free != nil && (!refused || v.name == "create/unlink") {
					err := v.free(e, i)
					if refused && errors.Is(err, ErrNotFound) {
						break
					}
					if err != nil {
						t.Fatalf("loop %d: the change that frees: %v", i, err)
					}
					ok++
					check("free")
				}
			}
			if !refused {
				t.Fatalf("20000 loops went in, none refused: the quota does not bound them")
			}
			// Removals always work on the full workspace: every name in
			// the deepest directory, then the whole tree.
			var names []string
			if err := s.ReadDir(e.deep, "", func(d Dirent) bool { names = append(names, d.Name); return true }); err != nil {
				t.Fatal(err)
			}
			for _, n := range names {
				rm := s.Unlink
				if a, err := s.Lookup(e.deep, n); err == nil && a.IsDir() {
					rm = s.Rmdir
				}
				if err := rm(e.deep, n); err != nil {
					t.Fatalf("removing %.20s on a full workspace: %v", n, err)
				}
				ok++
				check("unlink")
			}
			for i := len(e.dirs) - 1; i >= 0; i-- {
				parent := uint64(RootIno)
				if i > 0 {
					parent = e.dirs[i-1]
				}
				_, name, err := s.firstName(e.dirs[i])
				if err != nil {
					t.Fatal(err)
				}
				if err := s.Rmdir(parent, name); err != nil {
					t.Fatalf("rmdir at level %d on a full workspace: %v", i, err)
				}
				ok++
				check("rmdir")
			}
			var after, cut int
			for _, r := range journalRecords(t, s) {
				if r.Seq <= start {
					continue
				}
				after++
				if r.PathCut {
					cut++
					if !strings.HasPrefix(r.Path, "/"+long) && r.Path != "/" {
						t.Fatalf("record %d: cut path %.40q... is not an ancestor", r.Seq, r.Path)
					}
				}
			}
			if after != ok {
				t.Fatalf("%d changes went in, the journal holds %d records of them", ok, after)
			}
			if cut == 0 {
				t.Fatalf("no record with a cut path")
			}
			t.Logf("%d records, %d with cut paths; count now %+v", after, cut, s.UsageDetail())
			checkInvariants(t, s, checkOpts{})
			u := s.UsageDetail()
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			opts := quietOptions()
			opts.Quota = quota
			var err error
			if s, err = Open(s.Dir(), opts); err != nil {
				t.Fatal(err)
			}
			if got := s.UsageDetail(); got != u {
				t.Fatalf("count %+v after reopening, %+v before", got, u)
			}
			// Trimming the journal gives its room back.
			last := s.LastSeq()
			if n, err := s.TrimJournal(last, math.MaxInt64); err != nil || n != int(last)-1 {
				t.Fatalf("trim: %d %v", n, err)
			}
			if got := s.UsageDetail(); got.Journal >= 1<<10 || got.Files != u.Files {
				t.Fatalf("after trimming the journal: %+v", got)
			}
			checkInvariants(t, s, checkOpts{})
		})
	}
}

// TestRemovalsAlwaysWork: past its quota and its grace, a workspace can
// still remove every file, hard link, directory and extended attribute
// (a removal's minimal record is paid for by what it frees), while a
// truncate that frees less than even that record is refused.
func TestRemovalsAlwaysWork(t *testing.T) {
	const quota = 2 << 20
	s := openQuota(t, quota)
	defer func() { s.Close() }()
	dirs := deepTree(t, s, 200)
	deep := dirs[len(dirs)-1]
	f := mkfile(t, s, deep, "f")
	var links []string
	for i := 0; ; i++ { // one-byte-ish names: a removal frees little
		n := strconv.Itoa(i)
		if _, err := s.Link(f.Ino, deep, n); err != nil {
			wantQuotaErr(t, "link", err)
			break
		}
		links = append(links, n)
	}
	if err := s.SetXattr(f.Ino, "user.x", nil, 0); err != nil && !errors.Is(err, ErrQuota) {
		t.Fatal(err)
	}
	// Take the count past the quota and its grace with removals' records
	// (full ones, while they fit), then remove everything.
	bound := quotaBound(quota)
	for i, n := range links {
		if err := s.Unlink(deep, n); err != nil {
			t.Fatalf("unlink of link %d of %d past the quota: %v", i, len(links), err)
		}
		if u, _ := s.Usage(); u > bound {
			t.Fatalf("unlink %d: count %d, bound %d", i, u, bound)
		}
	}
	if u, _ := s.Usage(); u <= quota {
		t.Logf("removals did not take the count past the quota (%d of %d)", u, quota)
	}
	if err := s.RemoveXattr(f.Ino, "user.x"); err != nil && Errno(err) != syscall.ENODATA {
		t.Logf("removexattr of an empty attribute past the grace: %v", err)
	}
	if err := s.Unlink(deep, "f"); err != nil {
		t.Fatalf("unlink of the last name: %v", err)
	}
	for i := len(dirs) - 1; i > 0; i-- {
		_, name, _ := s.firstName(dirs[i])
		if err := s.Rmdir(dirs[i-1], name); err != nil {
			t.Fatalf("rmdir at level %d: %v", i, err)
		}
		if u, _ := s.Usage(); u > bound {
			t.Fatalf("rmdir %d: count %d, bound %d", i, u, bound)
		}
	}
	t.Logf("after removing everything: %+v", s.UsageDetail())
	checkInvariants(t, s, checkOpts{})
}

// TestMinimalRecordFitsReserve: the minimal record of any removal, with
// every field at its largest, costs no more than the room its name
// reserved, so that removing a name never adds to the count.
func TestMinimalRecordFitsReserve(t *testing.T) {
	long := strings.Repeat("x", 4000)
	for _, op := range []JournalOp{JUnlink, JRmdir, JRename, JTruncate, JRemovexattr} {
		r := Record{Seq: math.MaxUint64, Time: math.MaxInt64, Op: op, Ino: math.MaxUint64, Size: math.MaxUint64,
			Path: "/" + long, Path2: "/" + long,
			Actor: Actor{Pid: math.MaxUint32, Uid: math.MaxUint32, Gid: math.MaxUint32, Comm: long, Sandbox: long, Entry: long, Request: long}}
		r.minimal()
		if c := recordBytes(9, len(r.encode())); c > nameRecordReserve {
			t.Errorf("%s: a minimal record counts %d, more than a name reserves (%d)", op, c, nameRecordReserve)
		}
		if !r.PathCut || !r.Path2Cut || r.Path != "/" {
			t.Errorf("%s: minimal paths %q %q", op, r.Path, r.Path2)
		}
		got, err := decodeRecord(r.Seq, r.encode())
		if err != nil || got.Path != r.Path || !got.PathCut || !got.Path2Cut {
			t.Errorf("%s: round trip %+v %v", op, got, err)
		}
	}
}

// TestJournalCountMigrates: a store made before the journal and the audit
// counted (no count of them, a smaller name cost) gets its count made
// when it opens, and Check agrees.
func TestJournalCountMigrates(t *testing.T) {
	s := newStore(t)
	a := mkfile(t, s, RootIno, "a")
	write(t, s, a.Ino, 0, []byte("data"))
	id, _ := s.NewAuditID()
	if err := s.PutAudit(&AuditRecord{ID: id, Tool: "ls", Args: "{}"}); err != nil {
		t.Fatal(err)
	}
	want := s.UsageDetail()
	if want.Journal == 0 || want.Audit == 0 {
		t.Fatalf("nothing counted: %+v", want)
	}
	plantKey(t, s, keyUsage, u64(12345)) // as an older version counted
	deleteKey(t, s, keyJournalUsage)
	deleteKey(t, s, keyAuditUsage)
	s = reopen(t, s)
	if got := s.UsageDetail(); got != want {
		t.Fatalf("counted %+v on opening, want %+v", got, want)
	}
	checkInvariants(t, s, checkOpts{})
}

// TestAuditCountsInQuota: audit records count; past the quota and its
// grace a new one is refused (the call must not run), while the record of
// a call that ran is always rewritten.
func TestAuditCountsInQuota(t *testing.T) {
	const quota = 1 << 20
	s := openQuota(t, quota)
	defer func() { s.Close() }()
	args := strings.Repeat("a", 2000)
	var last *AuditRecord
	n := 0
	for ; n < 100000; n++ {
		id, err := s.NewAuditID()
		if err != nil {
			t.Fatal(err)
		}
		r := &AuditRecord{ID: id, Tool: "edit", Args: args}
		if err := s.PutAudit(r); err != nil {
			wantQuotaErr(t, "audit", err)
			break
		}
		last = r
	}
	u := s.UsageDetail()
	if n == 100000 || u.Used > quota+QuotaGrace(quota) || u.Audit < quota/2 {
		t.Fatalf("after %d records: %+v", n, u)
	}
	last.Done, last.Result = true, strings.Repeat("r", 1000)
	if err := s.PutAudit(last); err != nil {
		t.Fatalf("rewriting the record of a call that ran: %v", err)
	}
	got := 0
	if err := s.ReadAudit(0, func(AuditRecord) bool { got++; return true }); err != nil || got != n {
		t.Fatalf("read %d records (%v), wrote %d", got, err, n)
	}
	t.Logf("%d audit records of 2 KB went in: %+v", n, s.UsageDetail())
	checkInvariants(t, s, checkOpts{})
}

// TestRecordStringCut: a cut path reads as its ancestor and "...", so
// `computerfs log` does not show an ancestor as the file that changed.
func TestRecordStringCut(t *testing.T) {
	for _, c := range []struct {
		r    Record
		want string
	}{
		{Record{Seq: 1, Op: JUnlink, Path: "/a/b", PathCut: true}, "1 unlink /a/b/... by unknown"},
		{Record{Seq: 2, Op: JRmdir, Path: "/", PathCut: true}, "2 rmdir /... by unknown"},
		{Record{Seq: 3, Op: JRename, Path: "/a", Path2: "/b", Path2Cut: true}, "3 rename /a -> /b/... by unknown"},
		{Record{Seq: 4, Op: JUnlink, Path: "/a\nb", PathCut: true}, `4 unlink "/a\nb/"... by unknown`},
	} {
		if got := c.r.String(); got != c.want {
			t.Errorf("%q, want %q", got, c.want)
		}
	}
}

// openQuota opens a new store with a quota of quota bytes.
func openQuota(t *testing.T, quota int64) *Store {
	t.Helper()
	opts := quietOptions()
	opts.Quota = quota
	s, err := Open(t.TempDir()+"/store", opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
