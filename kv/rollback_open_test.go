package kv

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// TestRollbackOpen rolls an open store back (Store.Rollback) with a blob
// pinned for writing: the store is the snapshot's while it stays open,
// with the store's history, and the pinned file was moved aside, so a
// write to it afterwards changes nothing the store has.
func TestRollbackOpen(t *testing.T) {
	dir, snap, lastSeq, nextIno := rollbackFixture(t)
	s := openSnapStore(t, dir)
	b, err := s.Lookup(RootIno, "b")
	if err != nil {
		t.Fatal(err)
	}
	pinned, ok, err := s.PinBlob(b.Ino, true)
	if err != nil || !ok {
		t.Fatalf("PinBlob: %v %v", ok, err)
	}
	// The kernel's hold on the blob, as a passthrough backing file.
	held, err := os.OpenFile(pinned.Name(), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	gen := s.Generation()
	info, err := s.Rollback("s1")
	if err != nil {
		t.Fatal(err)
	}
	if info.Seq != lastSeq+1 || s.Generation() != gen+1 {
		t.Errorf("rollback seq %d generation %d, want %d and %d", info.Seq, s.Generation(), lastSeq+1, gen+1)
	}
	if got := storeView(t, s, RootIno, true); !got.equal(snap) {
		t.Fatalf("the open store is not the snapshot:\n%s", got.diff(snap))
	}
	before := readAll(t, s, b.Ino)
	if _, err := held.WriteAt(bytes.Repeat([]byte{'X'}, 4096), 0); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, s, b.Ino); !bytes.Equal(got, before) {
		t.Error("a write to the blob file pinned before the rollback changed the file after it")
	}
	if err := s.UnpinBlob(b.Ino, true); err != nil { // the old handle's release: nothing to undo
		t.Errorf("UnpinBlob of a pin from before the rollback: %v", err)
	}
	if _, err := s.Rollback("nope"); err == nil {
		t.Error("a rollback to a snapshot that does not exist succeeded")
	}
	checkInvariants(t, s, checkOpts{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	checkRolledBack(t, dir, snap, lastSeq, nextIno).Close()
}

// TestRollbackOpenConcurrent rolls an open store back while writers and
// readers run (run it under -race): nothing fails but with the store's
// own errors, and each writer's file holds the snapshot's content or a
// write that had not returned before the rollback began, and the last
// write when one began after the rollback returned.
func TestRollbackOpenConcurrent(t *testing.T) {
	s := newStore(t)
	const writers = 4
	var inos [writers]uint64
	for i := range inos {
		inos[i] = mkfile(t, s, RootIno, fmt.Sprint("w", i)).Ino
		write(t, s, inos[i], 0, u64(0))
	}
	big := mkfile(t, s, RootIno, "big")
	write(t, s, big.Ino, 0, pattern(7, 3<<20)) // a blob
	if _, err := s.Snapshot("s"); err != nil {
		t.Fatal(err)
	}
	var started, done atomic.Bool
	var stop atomic.Bool
	type wrote struct {
		n            uint64
		endedBefore  bool // returned before the rollback began
		startedAfter bool // began after it returned
	}
	logs := make([][]wrote, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := uint64(1); !stop.Load(); n++ {
				after := done.Load()
				if _, err := s.SetContent(inos[i], u64(n)); err != nil {
					t.Errorf("SetContent: %v", err)
					return
				}
				logs[i] = append(logs[i], wrote{n, !started.Load(), after})
				if _, err := s.Write(big.Ino, int64(n%40)<<16, pattern(byte(n), 4096)); err != nil {
					t.Errorf("Write: %v", err)
					return
				}
				if n > 20 && done.Load() {
					return
				}
			}
		}()
	}
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 64<<10)
			for !stop.Load() {
				for _, ino := range inos {
					if _, _, err := s.Read(ino, 0, buf); err != nil {
						t.Errorf("Read: %v", err)
						return
					}
				}
				if err := s.ReadDir(RootIno, "", func(d Dirent) bool {
					_, err := s.GetAttr(d.Ino) // nested in ReadDir
					return err == nil
				}); err != nil {
					t.Errorf("ReadDir: %v", err)
					return
				}
				if done.Load() {
					return
				}
			}
		}()
	}
	for s.LastSeq() < 50 { // let the writers write before the rollback
		runtime.Gosched()
	}
	started.Store(true)
	if _, err := s.Rollback("s"); err != nil {
		t.Fatal(err)
	}
	done.Store(true)
	wg.Wait()
	stop.Store(true)
	for i, ino := range inos {
		v := binary.BigEndian.Uint64(readAll(t, s, ino))
		log := logs[i]
		if last := log[len(log)-1]; last.startedAfter && v != last.n {
			t.Errorf("w%d holds %d, not its last write %d, which began after the rollback", i, v, last.n)
		}
		if v == 0 {
			continue // the snapshot's
		}
		for _, w := range log {
			if w.n == v && w.endedBefore {
				t.Errorf("w%d holds %d, written before the rollback began", i, v)
			}
		}
	}
	if problems, err := s.Check(0); err != nil || len(problems) > 0 {
		t.Errorf("Check: %v %q", err, problems)
	}
	checkInvariants(t, s, checkOpts{})
}
