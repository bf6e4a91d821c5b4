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
// rollback of the store in between (which writes the pending cuts first).
func TestCheckpointCut(t *testing.T) {
	for _, mode := range []string{"log", "flush", "copy", "rollback", "preflush"} {
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
			copies, flushes := cutCopies.Load(), s.cuts.flushes.Load()
			for v := byte(1); v <= 3; v++ {
				info, finish, err := s.Checkpoint(fmt.Sprint(v))
				if err != nil || finish == nil {
					t.Fatalf("Checkpoint %d: %v (finish %v)", v, err, finish != nil)
				}
				cuts = append(cuts, pending{info, finish, v})
				set(v + 1)              // after the cut, before its materialization
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
			case n != 3:
				t.Errorf("%d checkpoints written key by key, want 3", n)
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
