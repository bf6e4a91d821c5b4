package kv

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
)

// TestCheckpointCut: a checkpoint holds the state at its cut, not at its
// materialization: changes made between the two (to chunked files and to
// blobs, a removal, a new file), with several cuts pending at once and
// finished out of order, with a Pebble flush in between (the tables then
// hold changes after the cut: the checkpoint is written from the Pebble
// snapshot), with every materialization written that way, and with a
// rollback of the store in between (which writes the pending cuts first),
// and with a flush after the first cut only (the others share one Pebble
// checkpoint, the first is written key by key).
func TestCheckpointCut(t *testing.T) {
	for _, mode := range []string{"log", "flush", "copy", "rollback", "preflush", "flush-between"} {
		t.Run(mode, func(t *testing.T) {
			switch mode {
			case "copy":
				cutForceCopy = true
				defer func() { cutForceCopy = false }()
			case "preflush":
				// The memtable passes the bound before a cut while others
				// wait: they are written before the flush, from their logs.
				checkpointPreFlushAt = 32 << 10
				defer func() { checkpointPreFlushAt = 8 << 20 }()
			}
			s := openSnapStore(t, filepath.Join(t.TempDir(), "store"))
			small := mkfile(t, s, RootIno, "small").Ino // chunks (under the 16 KiB blob threshold)
			big := mkfile(t, s, RootIno, "big").Ino     // a blob
			content := func(v byte) ([]byte, []byte) { return pattern(v, 4<<10), pattern(v+100, 64<<10) }
			set := func(v byte) {
				a, b := content(v)
				write(t, s, small, 0, a)
				write(t, s, big, 0, b)
			}
			set(1)
			if mode == "preflush" {
				if err := s.db.Flush(); err != nil { // an empty memtable to start from
					t.Fatal(err)
				}
			}
			if mode == "rollback" {
				if _, err := s.Snapshot("base"); err != nil {
					t.Fatal(err)
				}
			}
			type pending struct {
				info   CheckpointInfo
				finish func() error
				v      byte
			}
			var cuts []pending
			copies, shared, flushes := cutCopies.Load(), cutShared.Load(), s.cuts.flushes.Load()
			for v := byte(1); v <= 3; v++ {
				info, finish, err := s.Checkpoint(fmt.Sprint(v))
				if err != nil || finish == nil {
					t.Fatalf("Checkpoint %d: %v (finish %v)", v, err, finish != nil)
				}
				cuts = append(cuts, pending{info, finish, v})
				set(v + 1) // after the cut, before its materialization
				if mode == "flush-between" && v == 1 {
					if err := s.db.Flush(); err != nil {
						t.Fatal(err)
					}
				}
				if mode == "preflush" { // more than the bound, under the blob threshold
					for i := range 3 {
						ino := mkfile(t, s, RootIno, fmt.Sprint("pad", v, i)).Ino
						write(t, s, ino, 0, pattern(v, 12<<10))
					}
				}
			}
			if n := s.cuts.flushes.Load() - flushes; mode == "preflush" && n < 2 {
				t.Errorf("%d flushes before the cuts, with the memtable past the bound before the last two", n)
			}
			// Changes of every kind after the last cut.
			mkfile(t, s, RootIno, "new")
			if err := s.Unlink(RootIno, "small"); err != nil {
				t.Fatal(err)
			}
			switch mode {
			case "flush":
				if err := s.db.Flush(); err != nil {
					t.Fatal(err)
				}
			case "rollback":
				if _, err := s.Rollback("base"); err != nil {
					t.Fatal(err)
				}
			}
			for _, i := range []int{1, 2, 0} {
				if err := cuts[i].finish(); err != nil {
					t.Fatalf("finish %s: %v", cuts[i].info.Name, err)
				}
			}
			switch n := cutCopies.Load() - copies; {
			case mode == "log" || mode == "rollback" || mode == "preflush":
				if n != 0 {
					t.Errorf("%d checkpoints written key by key, want none", n)
				}
			case mode == "flush-between":
				if n != 1 {
					t.Errorf("%d checkpoints written key by key, want 1", n)
				}
			case n != 3:
				t.Errorf("%d checkpoints written key by key, want 3", n)
			}
			// The three pending cuts share one Pebble checkpoint (the
			// newest's) when their markers are in its logs.
			wantShared := map[string]int64{"log": 2, "rollback": 2, "flush-between": 1}[mode]
			if mode == "preflush" {
				wantShared = -1 // as the flushes fell
			}
			if n := cutShared.Load() - shared; wantShared >= 0 && n != wantShared {
				t.Errorf("%d cuts made from another's Pebble checkpoint, want %d", n, wantShared)
			}
			for _, c := range cuts {
				f := openFork(t, s, c.info.Name)
				a, b := content(c.v)
				if got := readAll(t, f, small); !bytes.Equal(got, a) {
					t.Errorf("%s (cut after version %d): the small file is not that version", c.info.Name, c.v)
				}
				if got := readAll(t, f, big); !bytes.Equal(got, b) {
					t.Errorf("%s (cut after version %d): the blob is not that version", c.info.Name, c.v)
				}
				if _, err := f.Lookup(RootIno, "new"); err == nil {
					t.Errorf("%s: holds a file made after it", c.info.Name)
				}
				if f.LastSeq() != c.info.Seq {
					t.Errorf("%s: journal ends at %d", c.info.Name, f.LastSeq())
				}
				checkInvariants(t, f, checkOpts{})
			}
		})
	}
}

// TestCheckpointFlushBound: the memtable is written to a table after a
// checkpoint only when its log holds more than the bound, not whenever
// Pebble's memtable arena is larger than it (the arena doubles at each
// flush, up to MemTableSize, whatever it holds: measured by it, every
// checkpoint of a store that had flushed a few times flushed a memtable
// of a few kilobytes, and the small tables were compacted again and again).
func TestCheckpointFlushBound(t *testing.T) {
	s := openSnapStore(t, filepath.Join(t.TempDir(), "store"))
	ino := mkfile(t, s, RootIno, "f").Ino
	// Memtables filled and rotated: 256 KiB, 512 KiB, 1 MiB, then 2 MiB.
	for i := range 256 {
		write(t, s, mkfile(t, s, RootIno, fmt.Sprint("pad", i)).Ino, 0, pattern(byte(i), 12<<10))
	}
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	if m := s.db.Metrics(); m.MemTable.Size <= checkpointFlushAt {
		t.Fatalf("the memtable's arena is %d bytes after the flushes, want more than %d", m.MemTable.Size, checkpointFlushAt)
	}
	flushes := s.cuts.flushes.Load()
	for v := range 10 {
		write(t, s, ino, 0, pattern(byte(v), 4<<10))
		_, finish, err := s.Checkpoint(fmt.Sprint(v))
		if err != nil || finish == nil {
			t.Fatalf("Checkpoint %d: %v (finish %v)", v, err, finish != nil)
		}
		if err := finish(); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.cuts.flushes.Load() - flushes; n != 0 {
		t.Errorf("%d flushes for 10 checkpoints of 4 KiB changes each, want none (log under %d bytes)", n, checkpointFlushAt)
	}
}
