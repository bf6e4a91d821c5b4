package kv

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestCheckpoint: a checkpoint is taken only when the journal moved, is
// listed once finished, not among the snapshots, and can be rolled back
// to and forked; pruning keeps the newest.
func TestCheckpoint(t *testing.T) {
	s := openSnapStore(t, filepath.Join(t.TempDir(), "store"))
	ino := mkfile(t, s, RootIno, "f").Ino
	write(t, s, ino, 0, pattern(1, 100<<10))
	take := func() CheckpointInfo {
		t.Helper()
		info, finish, err := s.Checkpoint("t")
		if err != nil {
			t.Fatal(err)
		}
		if info.New != (finish != nil) {
			t.Fatalf("Checkpoint: New %v with finish %v", info.New, finish != nil)
		}
		if finish != nil {
			if list, _ := s.Checkpoints(); len(list) > 0 && list[len(list)-1].Name == info.Name {
				t.Fatalf("checkpoint %s listed before its finish", info.Name)
			}
			// Asked again before the finish: the pending one, not a second.
			if again, f2, err := s.Checkpoint("t2"); err != nil || again.Name != info.Name || again.New || f2 != nil {
				t.Fatalf("Checkpoint while %s is pending: %+v (finish %v), %v", info.Name, again, f2 != nil, err)
			}
			if err := finish(); err != nil {
				t.Fatal(err)
			}
		}
		return info
	}
	first := take()
	if !first.New || first.Name != CheckpointName(s.LastSeq()) {
		t.Fatalf("first checkpoint %+v, journal at %d", first, s.LastSeq())
	}
	// Nothing changed: the same checkpoint, nothing taken.
	if again := take(); again.New || again.Name != first.Name {
		t.Fatalf("checkpoint of an unchanged store: %+v, want %s again", again, first.Name)
	}
	readAll(t, s, ino)
	if again := take(); again.New {
		t.Fatalf("a read made a new checkpoint: %+v", again)
	}
	write(t, s, ino, 0, pattern(2, 100<<10))
	second := take()
	if !second.New || second.Seq <= first.Seq {
		t.Fatalf("checkpoint after a write: %+v (first %+v)", second, first)
	}
	write(t, s, ino, 0, pattern(3, 100<<10))
	third := take()

	list, err := s.Checkpoints()
	if err != nil || len(list) != 3 || list[0].Name != first.Name || list[2].Name != third.Name {
		t.Fatalf("Checkpoints: %+v %v", list, err)
	}
	if list[1].Label != "t" || list[1].Seq != second.Seq {
		t.Errorf("checkpoint listed as %+v, want label t and seq %d", list[1], second.Seq)
	}
	if snaps, _ := s.Snapshots(); len(snaps) != 0 {
		t.Errorf("checkpoints listed as snapshots: %+v", snaps)
	}
	f := openFork(t, s, second.Name)
	if got := readAll(t, f, ino); !bytes.Equal(got, pattern(2, 100<<10)) {
		t.Errorf("fork of %s: wrong content", second.Name)
	}
	if _, err := s.Rollback(first.Name); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, s, ino); !bytes.Equal(got, pattern(1, 100<<10)) {
		t.Errorf("after rollback to %s: wrong content", first.Name)
	}
	// The rollback is a change: the next checkpoint is a new one.
	if after := take(); !after.New || after.Seq <= third.Seq {
		t.Errorf("checkpoint after the rollback: %+v", after)
	}
	gone, err := s.PruneCheckpoints(2, 0)
	if err != nil || len(gone) != 2 || gone[0] != first.Name {
		t.Fatalf("PruneCheckpoints(2): %v %v", gone, err)
	}
	// By age: all but the newest.
	old := time.Now().Add(-time.Hour)
	list, _ = s.Checkpoints()
	for _, c := range list {
		os.Chtimes(filepath.Join(s.Dir(), snapshotsDir, c.Name), old, old)
	}
	if gone, err := s.PruneCheckpoints(0, time.Minute); err != nil || len(gone) != len(list)-1 {
		t.Fatalf("PruneCheckpoints by age: %v %v (of %d)", gone, err, len(list))
	}
	if list, _ := s.Checkpoints(); len(list) != 1 {
		t.Errorf("after pruning: %+v", list)
	}
	// A checkpoint left unfinished (a crash) goes at the next open.
	write(t, s, ino, 0, pattern(4, 100<<10))
	if _, finish, err := s.Checkpoint("t"); err != nil || finish == nil {
		t.Fatalf("Checkpoint: %v", err)
	}
	s = reopenSnap(t, s)
	if list, _ := s.Checkpoints(); len(list) != 1 {
		t.Errorf("an unfinished checkpoint is listed after reopen: %+v", list)
	}
	if left, _ := filepath.Glob(filepath.Join(s.Dir(), snapshotsDir, ".tmp-*")); len(left) != 0 {
		t.Errorf("left after reopen: %v", left)
	}
}

func reopenSnap(t *testing.T, s *Store) *Store {
	t.Helper()
	dir := s.Dir()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return openSnapStore(t, dir)
}
