package kv

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// TestSnapshotBarrier races snapshots against writers of many blobs, so
// that most of a snapshot's blobs are linked after changes go on, behind
// the write barrier. Each writer rewrites its files in turn, round after
// round, each write a whole new version: through Store.Write ("store"),
// through the pinned blob file as the kernel writes in passthrough, the
// pin taken and dropped around each write ("pass"), or by a new file
// renamed over the old one, whose blob is removed ("rename"). The state
// at any point of the sequence of operations is, for each writer, its
// files up to some j at round k and the rest at round k-1; a snapshot
// must hold exactly such a state, byte for byte, page by page (a
// passthrough write in flight at the point may be in the copy partly,
// its first pages new: the order of the kernel's writes), and one
// between the writes ended before Snapshot began and those begun before
// it returned. A blob linked after a writer changed it breaks the order.
func TestSnapshotBarrier(t *testing.T) {
	s := openSnapStore(t, filepath.Join(t.TempDir(), "store"))
	const nFiles, size, rounds, page = 48, 32 << 10, 24, 4096
	type bw struct {
		kind  string
		dir   uint64
		inos  []uint64
		done  atomic.Int64 // file writes ended
		begun atomic.Int64 // file writes begun
	}
	content := func(w int, i, k int) []byte { return pattern(byte(k*3+i*11+w*101), size) }
	var ws []*bw
	for wi, kind := range []string{"store", "pass", "rename", "store"} {
		w := &bw{kind: kind, dir: mkdir(t, s, RootIno, fmt.Sprintf("w%d", wi)).Ino}
		for i := range nFiles {
			a := mkfile(t, s, w.dir, fmt.Sprintf("f%d", i))
			write(t, s, a.Ino, 0, content(wi, i, 0))
			w.inos = append(w.inos, a.Ino)
		}
		ws = append(ws, w)
	}
	step := func(wi int, w *bw, i, k int) error {
		data := content(wi, i, k)
		switch w.kind {
		case "store":
			_, err := s.Write(w.inos[i], 0, data)
			return err
		case "pass":
			f, ok, err := s.PinBlob(w.inos[i], true)
			if err != nil || !ok {
				return fmt.Errorf("PinBlob: %v %v", ok, err)
			}
			_, err = f.WriteAt(data, 0)
			if uerr := s.UnpinBlob(w.inos[i], true); err == nil {
				err = uerr
			}
			return err
		default:
			tmp := fmt.Sprintf("t%d", i)
			a, err := s.Create(w.dir, tmp, NewInode{Mode: S_IFREG | 0o644})
			if err != nil {
				return err
			}
			if _, err := s.Write(a.Ino, 0, data); err != nil {
				return err
			}
			return s.Rename(w.dir, tmp, w.dir, fmt.Sprintf("f%d", i), 0)
		}
	}
	var wg sync.WaitGroup
	var running atomic.Int32
	errs := make(chan error, len(ws))
	for wi, w := range ws {
		wg.Add(1)
		running.Add(1)
		go func() {
			defer wg.Done()
			defer running.Add(-1)
			for k := 1; k <= rounds; k++ {
				for i := range nFiles {
					w.begun.Add(1)
					if err := step(wi, w, i, k); err != nil {
						errs <- fmt.Errorf("%s writer: %w", w.kind, err)
						return
					}
					w.done.Add(1)
				}
			}
		}()
	}
	type snap struct {
		name     string
		lo, hi   []int64
		blobsOut int // blobs linked once changes went on
	}
	var snaps []snap
	for n := 0; running.Load() > 0 && n < 16; n++ {
		sn := snap{name: fmt.Sprintf("s%d", n)}
		for _, w := range ws {
			sn.lo = append(sn.lo, w.done.Load())
		}
		if _, err := s.Snapshot(sn.name); err != nil {
			t.Fatalf("Snapshot: %v", err)
		}
		for _, w := range ws {
			sn.hi = append(sn.hi, w.begun.Load())
		}
		snaps = append(snaps, sn)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(snaps) < 3 {
		t.Fatalf("only %d snapshots taken while the writers ran", len(snaps))
	}
	t.Logf("%d snapshots taken while the writers ran", len(snaps))
	// pageVersion is the round whose content (pattern) page p of file i
	// of writer wi holds, or -1.
	pageVersion := func(wi, i, p int, got []byte) int {
		off := p * page
		seed := got[0] - byte(off*7) - byte(off>>8)        // pattern's first byte
		k := int(byte((seed-byte(i*11+wi*101))*171)) % 256 // 3*171 = 1 mod 256
		if k > rounds {
			return -1
		}
		for j, c := range got {
			if c != byte(k*3+i*11+wi*101)+byte((off+j)*7)+byte((off+j)>>8) {
				return -1
			}
		}
		return k
	}
	for _, sn := range snaps {
		f := openFork(t, s, sn.name)
		for wi, w := range ws {
			var seq []int // every page's round, files in order
			for i := range nFiles {
				a, err := f.Lookup(w.dir, fmt.Sprintf("f%d", i))
				if err != nil {
					t.Fatalf("%s: %s writer, f%d: %v", sn.name, w.kind, i, err)
				}
				got := readAll(t, f, a.Ino)
				if len(got) != size {
					t.Fatalf("%s: %s writer, f%d holds %d bytes, want %d", sn.name, w.kind, i, len(got), size)
				}
				for p := range size / page {
					v := pageVersion(wi, i, p, got[p*page:(p+1)*page])
					if v < 0 {
						t.Fatalf("%s: %s writer, f%d page %d holds no version of it", sn.name, w.kind, i, p)
					}
					seq = append(seq, v)
				}
			}
			// Non-increasing, within one round: a cut of the writes.
			top, cut := seq[0], len(seq)
			for j, v := range seq {
				if v > seq[max(j-1, 0)] || v < top-1 {
					t.Fatalf("%s: %s writer: its pages' rounds %v are no point of its writes (a blob linked after it changed?)", sn.name, w.kind, seq)
				}
				if v < top && cut == len(seq) {
					cut = j
				}
			}
			if top == seq[len(seq)-1] {
				cut = len(seq) // all at top: top whole rounds
			}
			ppf := size / page
			full := int64((top-1)*nFiles + cut/ppf) // whole file writes in it
			if cut == len(seq) {
				full = int64(top * nFiles)
			}
			partial := int64(0)
			if cut%ppf != 0 {
				partial = 1
				if w.kind != "pass" {
					t.Fatalf("%s: %s writer: f%d is half written: %v", sn.name, w.kind, cut/ppf, seq)
				}
			}
			if full < sn.lo[wi] || full+partial > sn.hi[wi] {
				t.Errorf("%s: %s writer: the snapshot holds %d (+%d partial) of its writes; %d had ended before it began, %d begun before it returned", sn.name, w.kind, full, partial, sn.lo[wi], sn.hi[wi])
			}
		}
		checkInvariants(t, f, checkOpts{})
		f.Close()
		os.RemoveAll(f.dir)
	}
}
