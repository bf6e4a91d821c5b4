package kv

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkSnapshot takes snapshots of stores of 100 MB and 1 GB, in small
// files (32 KiB: chunks in Pebble), big ones (8 MiB: blobs) or both
// (mixed: a tenth of the bytes in small files, the rest in big ones), and
// reports per snapshot the time changes were held off (held-ms), split
// into the database's part (held-db-ms: the cut's marker and Pebble
// snapshot) and the blobs' part (held-blobs-ms: the copies of pinned
// blobs), Pebble's checkpoint once changes go on (db-after-ms), the links
// made once changes go on (links-after-ms), a fork of it (fork-ms), and,
// once per store in the same run, `cp -a` of the store directory (cp-ms).
// The old- metrics are snapshots taken in the same run as before the cut,
// Pebble's checkpoint made while changes are held (snapshotPebbleHeld).
// Run with:
//
//	go test -tags seccomp -run '^$' -bench Snapshot -benchtime 5x ./kv/
//
// The 1 GB stores take a minute or more to build. BENCH_SNAPSHOT_SIZES
// chooses the sizes (a comma-separated list of MB or GB, default
// "100MB,1GB"); the 10 GB figures of docs/snapshots.md come from
//
//	BENCH_SNAPSHOT_SIZES=10GB go test -tags seccomp -run '^$' -bench 'Snapshot/10240MB/mixed' -benchtime 1x -timeout 60m ./kv/
//
// which needs some 25 GB of free disk under TMPDIR (the store and its cp -a).
func BenchmarkSnapshot(b *testing.B) {
	for _, size := range benchSnapshotSizes(b) {
		for _, kind := range []string{"small", "big", "mixed"} {
			b.Run(fmt.Sprintf("%dMB/%s", size>>20, kind), func(b *testing.B) {
				dir := filepath.Join(b.TempDir(), "store")
				s, err := Open(dir, quietOptions())
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				fillBenchStore(b, s, size, kind)
				// cp -a of the store closed (Pebble's compactions would
				// remove tables under it), then open again.
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				if out, err := exec.Command("cp", "-a", dir, dir+".cp").CombinedOutput(); err != nil {
					b.Fatalf("cp -a: %v %s", err, out)
				}
				cp := time.Since(start)
				if s, err = Open(dir, quietOptions()); err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				var held, fork, old, oldHeld time.Duration
				parts := map[string]time.Duration{}
				oldParts := map[string]time.Duration{}
				defer func() { snapshotTrace, snapshotPebbleHeld = nil, false }()
				// Each round also takes one snapshot the way they were
				// taken before the cut (Pebble's checkpoint while changes
				// are held: snapshotPebbleHeld), untimed, first on
				// even rounds and last on odd ones: before and after in
				// the same run, on the same store.
				legacy := func(i int) {
					snapshotPebbleHeld = true
					before := maps.Clone(oldParts)
					snapshotTrace = func(part string, d time.Duration) { oldParts[part] += d }
					start := time.Now()
					info, err := s.Snapshot(fmt.Sprintf("old%d", i))
					if err != nil {
						b.Fatal(err)
					}
					old += time.Since(start)
					oldHeld += info.Held
					b.Logf("round %d: old way: snapshot %v, held %v (db %v, blobs %v)", i, time.Since(start), info.Held, oldParts["db"]-before["db"], oldParts["blobs"]-before["blobs"])
					snapshotPebbleHeld = false
					snapshotTrace = func(part string, d time.Duration) { parts[part] += d }
				}
				snapshotTrace = func(part string, d time.Duration) { parts[part] += d }
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if i%2 == 0 {
						b.StopTimer()
						legacy(i)
						b.StartTimer()
					}
					before := maps.Clone(parts)
					start := time.Now()
					info, err := s.Snapshot(fmt.Sprintf("s%d", i))
					if err != nil {
						b.Fatal(err)
					}
					took := time.Since(start)
					held += info.Held
					b.StopTimer()
					b.Logf("round %d: cut: snapshot %v, held %v (db %v, blobs %v), Pebble's checkpoint after %v, links after %v", i, took, info.Held, parts["db"]-before["db"], parts["blobs"]-before["blobs"], parts["db-after"]-before["db-after"], parts["after"]-before["after"])
					if i%2 == 1 {
						legacy(i)
					}
					start = time.Now()
					if err := s.Fork(filepath.Join(b.TempDir(), "fork"), fmt.Sprintf("s%d", i)); err != nil {
						b.Fatal(err)
					}
					fork += time.Since(start)
					b.StartTimer()
				}
				b.StopTimer()
				ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
				b.ReportMetric(ms(held), "held-ms")
				b.ReportMetric(ms(parts["db"]), "held-db-ms")
				b.ReportMetric(ms(parts["blobs"]), "held-blobs-ms")
				b.ReportMetric(ms(parts["db-after"]), "db-after-ms")
				b.ReportMetric(ms(parts["after"]), "links-after-ms")
				b.ReportMetric(ms(old), "old-snapshot-ms")
				b.ReportMetric(ms(oldHeld), "old-held-ms")
				b.ReportMetric(ms(oldParts["db"]), "old-held-db-ms")
				b.ReportMetric(ms(oldParts["blobs"]), "old-held-blobs-ms")
				b.ReportMetric(ms(fork), "fork-ms")
				b.ReportMetric(float64(cp.Microseconds())/1000, "cp-ms")
			})
		}
	}
}

// benchSnapshotSizes is BENCH_SNAPSHOT_SIZES in bytes ("100MB,1GB" when
// unset).
func benchSnapshotSizes(b *testing.B) []int64 {
	env := os.Getenv("BENCH_SNAPSHOT_SIZES")
	if env == "" {
		env = "100MB,1GB"
	}
	var sizes []int64
	for _, f := range strings.Split(env, ",") {
		f = strings.ToUpper(strings.TrimSpace(f))
		unit := int64(1 << 20)
		num, ok := strings.CutSuffix(f, "MB")
		if !ok {
			num, ok = strings.CutSuffix(f, "GB")
			unit = 1 << 30
		}
		n, err := strconv.ParseInt(num, 10, 64)
		if !ok || err != nil || n <= 0 {
			b.Fatalf("BENCH_SNAPSHOT_SIZES: %q is not a size such as 100MB or 10GB", f)
		}
		sizes = append(sizes, n*unit)
	}
	return sizes
}

// fillBenchStore writes size bytes of files into s, a thousand to a
// directory: 32 KiB files (small), 8 MiB ones (big), or a tenth of the
// bytes in 32 KiB files and the rest in 8 MiB ones (mixed).
func fillBenchStore(b *testing.B, s *Store, size int64, kind string) {
	const small, big = 32 << 10, 8 << 20
	bigBytes := map[string]int64{"small": 0, "big": size, "mixed": size - size/10}[kind]
	smallData, bigData := pattern(7, small), pattern(7, big)
	const perDir = 1000
	var d uint64
	for i, written := 0, int64(0); written < size; i++ {
		if i%perDir == 0 {
			a, err := s.Create(RootIno, fmt.Sprintf("d%d", i/perDir), NewInode{Mode: S_IFDIR | 0o755})
			if err != nil {
				b.Fatal(err)
			}
			d = a.Ino
		}
		a, err := s.Create(d, fmt.Sprintf("f%d", i), NewInode{Mode: S_IFREG | 0o644})
		if err != nil {
			b.Fatal(err)
		}
		data := smallData
		if written < bigBytes {
			data = bigData
		}
		if _, err := s.Write(a.Ino, 0, data); err != nil {
			b.Fatal(err)
		}
		written += int64(len(data))
	}
}

// BenchmarkChangeOwners gives the 10,000 files of one owner (a fork's
// parent agent) to another, and back: the cost of a fork's new agent (an
// entry in the owner map, whatever the number of files).
func BenchmarkChangeOwners(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "store"), quietOptions())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for i := range 10000 {
		if _, err := s.Create(RootIno, fmt.Sprintf("f%d", i), NewInode{Mode: S_IFREG | 0o644, Uid: 7, Gid: 7}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		from, to := Owner{7, 7}, Owner{8, 8}
		if i%2 == 1 {
			from, to = to, from
		}
		if err := s.ChangeOwners(from, to); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRollback rolls stores of 100 MB and 1 GB (small or big files,
// as BenchmarkSnapshot) back to a snapshot, the store closed, after a
// tenth of the files were rewritten and as many made: the time of a whole
// Rollback (the store opened, the new database built from links with the
// journal copied in, the swap, the old one removed) and the journal it
// copied (records). The open/ rows roll the store back while it is open
// (Store.Rollback, as a mounted workspace is) and report how long every
// call was held off (held-ms). Run with:
//
//	go test -tags seccomp -run '^$' -bench Rollback -benchtime 3x ./kv/
func BenchmarkRollback(b *testing.B) {
	for _, open := range []bool{false, true} {
		for _, size := range []int64{100 << 20, 1 << 30} {
			for _, kind := range []struct {
				name string
				file int
			}{{"small", 32 << 10}, {"big", 8 << 20}} {
				name := fmt.Sprintf("%dMB/%s", size>>20, kind.name)
				if open {
					name = "open/" + name
				}
				benchRollback(b, name, open, size, kind.file)
			}
		}
	}
}

func benchRollback(b *testing.B, name string, open bool, size int64, file int) {
	b.Run(name, func(b *testing.B) {
		dir := filepath.Join(b.TempDir(), "store")
		s, err := Open(dir, quietOptions())
		if err != nil {
			b.Fatal(err)
		}
		data := pattern(7, file)
		n := int(size / int64(file))
		var inos []uint64
		for i := 0; i < n; i++ {
			a, err := s.Create(RootIno, fmt.Sprintf("f%d", i), NewInode{Mode: S_IFREG | 0o644})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.Write(a.Ino, 0, data); err != nil {
				b.Fatal(err)
			}
			inos = append(inos, a.Ino)
		}
		if _, err := s.Snapshot("s0"); err != nil {
			b.Fatal(err)
		}
		s.Close()
		var records uint64
		var held time.Duration
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			if !open || i == 0 {
				if s, err = Open(dir, quietOptions()); err != nil {
					b.Fatal(err)
				}
			}
			for j := 0; j < n/10+1; j++ {
				if _, err := s.Write(inos[(j*7)%n], 0, data[:4096]); err != nil {
					b.Fatal(err)
				}
				if _, err := s.Create(RootIno, fmt.Sprintf("new%d-%d", i, j), NewInode{Mode: S_IFREG | 0o644}); err != nil {
					b.Fatal(err)
				}
			}
			records = s.LastSeq()
			if open {
				b.StartTimer()
				info, err := s.Rollback("s0")
				if err != nil {
					b.Fatal(err)
				}
				held += info.Held
				continue
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if _, err := Rollback(dir, "s0", quietOptions()); err != nil {
				b.Fatal(err)
			}
		}
		if open {
			b.StopTimer()
			s.Close()
			b.ReportMetric(float64(held.Microseconds())/1000/float64(b.N), "held-ms")
		}
		b.ReportMetric(float64(records), "records")
	})
}
