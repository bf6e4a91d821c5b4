package kv

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// rollbackFixture makes a store with a snapshot "s1" and changes after it
// (small and big files written, removed and made, a meta value and an
// audit record), closes it and returns its directory, the view of the
// snapshot, the journal's last sequence number and the next inode number
// before the rollback.
func rollbackFixture(t *testing.T) (dir string, snap view, lastSeq, nextIno uint64) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "store")
	s, err := Open(dir, snapOptions())
	if err != nil {
		t.Fatal(err)
	}
	a := mkfile(t, s, RootIno, "a")
	write(t, s, a.Ino, 0, pattern(1, 5000))
	b := mkfile(t, s, RootIno, "b")
	write(t, s, b.Ino, 0, pattern(2, 100<<10)) // a blob
	d := mkdir(t, s, RootIno, "d")
	f := mkfile(t, s, d.Ino, "f")
	write(t, s, f.Ino, 0, pattern(3, 40<<10))
	if err := s.SetMeta("sync:test", []byte("before")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Snapshot("s1"); err != nil {
		t.Fatal(err)
	}
	snap = storeView(t, s, RootIno, true)

	write(t, s, a.Ino, 100, pattern(4, 300))
	write(t, s, b.Ino, 4096, pattern(5, 8192)) // the shared blob is copied first
	if err := s.Unlink(d.Ino, "f"); err != nil {
		t.Fatal(err)
	}
	c := mkfile(t, s, RootIno, "c")
	write(t, s, c.Ino, 0, pattern(6, 200<<10))
	mkfile(t, s, RootIno, "e")
	if err := s.SetMeta("sync:test", []byte("after")); err != nil {
		t.Fatal(err)
	}
	id := must[uint64](t, "NewAuditID")(s.NewAuditID())
	if err := s.PutAudit(&AuditRecord{ID: id, Tool: "t", Args: "{}", Done: true}); err != nil {
		t.Fatal(err)
	}
	if storeView(t, s, RootIno, true).equal(snap) {
		t.Fatal("the changes after the snapshot changed nothing")
	}
	lastSeq, nextIno = s.LastSeq(), s.nextIno
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, snap, lastSeq, nextIno
}

// checkRolledBack checks that the store in dir, rolled back to s1, holds
// the snapshot's files and the store's own history, and returns it open.
func checkRolledBack(t *testing.T, dir string, snap view, lastSeq, nextIno uint64) *Store {
	t.Helper()
	s := openSnapStore(t, dir)
	if got := storeView(t, s, RootIno, true); !got.equal(snap) {
		t.Fatalf("after the rollback the store is not the snapshot:\n%s", got.diff(snap))
	}
	if got := s.LastSeq(); got != lastSeq+1 {
		t.Errorf("last journal record %d, want %d (the store's %d and the rollback's)", got, lastSeq+1, lastSeq)
	}
	var recs []Record
	if err := s.ReadJournal(0, func(r Record) bool { recs = append(recs, r); return true }); err != nil {
		t.Fatal(err)
	}
	if len(recs) == 0 || uint64(len(recs)) != lastSeq+1 {
		t.Fatalf("%d journal records, want %d", len(recs), lastSeq+1)
	}
	last := recs[len(recs)-1]
	if last.Op != JRollback || last.Path != "/" || !last.PathCut || last.Actor.Entry != "rollback" || last.Actor.Request != "s1" {
		t.Errorf("the last record is %+v, want the rollback to s1 at / (cut)", last)
	}
	unlinked := false
	for _, r := range recs {
		unlinked = unlinked || r.Op == JUnlink && r.Path == "/d/f"
	}
	if !unlinked {
		t.Error("the journal lost the records made after the snapshot")
	}
	if v, err := s.GetMeta("sync:test"); err != nil || string(v) != "after" {
		t.Errorf("meta sync:test = %q, %v; want the store's own (after)", v, err)
	}
	audits := 0
	if err := s.ReadAudit(0, func(AuditRecord) bool { audits++; return true }); err != nil || audits != 1 {
		t.Errorf("%d audit records (%v), want the store's 1", audits, err)
	}
	if s.nextIno < nextIno {
		t.Errorf("next inode %d, below the %d the store had given", s.nextIno, nextIno)
	}
	if n := mkfile(t, s, RootIno, "new"); n.Ino < nextIno {
		t.Errorf("a new file got inode %d, which the store had given before the rollback (next %d)", n.Ino, nextIno)
	}
	if problems, err := s.Check(0); err != nil || len(problems) > 0 {
		t.Errorf("Check: %v %q", err, problems)
	}
	checkInvariants(t, s, checkOpts{})
	for _, p := range []string{rollbackNew, rollbackOld, filepath.Join(snapshotsDir, rollbackTmp)} {
		if _, err := os.Lstat(filepath.Join(dir, p)); err == nil {
			t.Errorf("%s is left behind", p)
		}
	}
	if err := s.Unlink(RootIno, "new"); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRollback(t *testing.T) {
	dir, snap, lastSeq, nextIno := rollbackFixture(t)
	info, err := Rollback(dir, "s1", snapOptions())
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "s1" || info.Seq != lastSeq+1 {
		t.Errorf("Rollback = %+v, want s1 at %d", info, lastSeq+1)
	}
	s := checkRolledBack(t, dir, snap, lastSeq, nextIno)
	// The blobs made after the snapshot are gone with the old store.
	entries, err := os.ReadDir(filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Errorf("blobs/ holds %d files, want the snapshot's 2 (b, d/f)", len(entries))
	}
	// The snapshot is still there, and unchanged by writes to the store
	// that shares its blobs: a second rollback to it gives it again.
	b := must[Attr](t, "lookup b")(s.Lookup(RootIno, "b"))
	write(t, s, b.Ino, 0, pattern(9, 64<<10))
	lastSeq, nextIno = s.LastSeq(), s.nextIno
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Rollback(dir, "s1", snapOptions()); err != nil {
		t.Fatal(err)
	}
	checkRolledBack(t, dir, snap, lastSeq, nextIno)
}

// TestRollbackSmallBatches copies the history in many batches.
func TestRollbackSmallBatches(t *testing.T) {
	old := rollbackBatch
	rollbackBatch = 256
	t.Cleanup(func() { rollbackBatch = old })
	dir, snap, lastSeq, nextIno := rollbackFixture(t)
	if _, err := Rollback(dir, "s1", snapOptions()); err != nil {
		t.Fatal(err)
	}
	checkRolledBack(t, dir, snap, lastSeq, nextIno)
}

func TestRollbackRefused(t *testing.T) {
	dir, _, _, _ := rollbackFixture(t)
	if _, err := Rollback(dir, "nope", snapOptions()); !errors.Is(err, ErrNoSnapshot) {
		t.Errorf("Rollback to a snapshot that does not exist: %v, want ErrNoSnapshot", err)
	}
	if _, err := Rollback(dir, "../s1", snapOptions()); err == nil {
		t.Error("Rollback to a bad name worked")
	}
	s := openSnapStore(t, dir)
	if _, err := Rollback(dir, "s1", snapOptions()); !errors.Is(err, ErrLocked) {
		t.Errorf("Rollback of an open store: %v, want ErrLocked", err)
	}
	if _, err := s.Lookup(RootIno, "c"); err != nil {
		t.Errorf("the refused rollback changed the store: %v", err)
	}
}

// TestRollbackCrash stops a rollback before and after its commit point:
// the store is as before, or the next open finishes the rollback.
func TestRollbackCrash(t *testing.T) {
	build := func(t *testing.T, dir string) {
		t.Helper()
		s, err := Open(dir, snapOptions())
		if err != nil {
			t.Fatal(err)
		}
		snap, err := SnapshotDir(dir, "s1")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.buildRollback(snap, "s1"); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("before", func(t *testing.T) {
		dir, snap, _, _ := rollbackFixture(t)
		before := func() view {
			s := openSnapStore(t, dir)
			defer s.Close()
			return storeView(t, s, RootIno, true)
		}()
		build(t, dir)
		s := openSnapStore(t, dir)
		got := storeView(t, s, RootIno, true)
		if got.equal(snap) || !got.equal(before) {
			t.Errorf("a rollback stopped before its commit point changed the store:\n%s", got.diff(before))
		}
		if _, err := os.Lstat(filepath.Join(dir, snapshotsDir, rollbackTmp)); err == nil {
			t.Error("the unfinished rollback is left behind")
		}
	})
	for _, moved := range []int{0, 1, 2, 3} { // parts moved before the crash
		t.Run("after", func(t *testing.T) {
			dir, snap, lastSeq, nextIno := rollbackFixture(t)
			build(t, dir)
			if err := os.Rename(filepath.Join(dir, snapshotsDir, rollbackTmp), filepath.Join(dir, rollbackNew)); err != nil {
				t.Fatal(err)
			}
			os.Mkdir(filepath.Join(dir, rollbackOld), 0o700)
			steps := []func() error{
				func() error { return os.Rename(filepath.Join(dir, "db"), filepath.Join(dir, rollbackOld, "db")) },
				func() error { return os.Rename(filepath.Join(dir, rollbackNew, "db"), filepath.Join(dir, "db")) },
				func() error {
					return os.Rename(filepath.Join(dir, "blobs"), filepath.Join(dir, rollbackOld, "blobs"))
				},
			}
			for _, step := range steps[:moved] {
				if err := step(); err != nil {
					t.Fatal(err)
				}
			}
			if ok, err := IsStore(dir); !ok || err != nil {
				t.Fatalf("IsStore in the middle of a rollback: %v, %v", ok, err)
			}
			checkRolledBack(t, dir, snap, lastSeq, nextIno)
		})
	}
}
