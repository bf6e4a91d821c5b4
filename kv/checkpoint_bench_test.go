package kv

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkCheckpointAfterWrite is the checkpoint an each-call policy
// takes after a call that changed one small file, in a store of 1,000
// files: the held part (what the next call waits for) and the finish
// (the syncs and the rename, in the background).
//
//	go test -run '^$' -bench CheckpointAfterWrite ./kv/
func BenchmarkCheckpointAfterWrite(b *testing.B) {
	s := openSnapStore(b, filepath.Join(b.TempDir(), "store"))
	inos := make([]uint64, 1000)
	for i := range inos {
		inos[i] = mkfile(b, s, RootIno, fmt.Sprintf("f%04d", i)).Ino
		write(b, s, inos[i], 0, pattern(byte(i), 4<<10))
	}
	var held, fin time.Duration
	parts := map[string]time.Duration{}
	snapshotTrace = func(part string, d time.Duration) { parts[part] += d }
	defer func() { snapshotTrace = nil }()
	b.ResetTimer()
	for i := range b.N {
		write(b, s, inos[i%len(inos)], 0, pattern(byte(i), 4<<10))
		info, finish, err := s.Checkpoint("bench")
		if err != nil || finish == nil {
			b.Fatalf("checkpoint: %+v %v", info, err)
		}
		held += info.Held
		t0 := time.Now()
		if err := finish(); err != nil {
			b.Fatal(err)
		}
		fin += time.Since(t0)
		if i%50 == 49 {
			if _, err := s.PruneCheckpoints(20, 0); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(held.Microseconds())/float64(b.N), "held-µs")
	b.ReportMetric(float64(fin.Microseconds())/float64(b.N), "finish-µs")
	b.ReportMetric(float64(parts["db-after"].Microseconds())/float64(b.N), "pebble-µs")
	b.ReportMetric(float64(parts["after"].Microseconds())/float64(b.N), "links-µs")
	if m, _ := filepath.Glob(filepath.Join(s.Dir(), "db", "MANIFEST-*")); len(m) > 0 {
		if st, err := os.Stat(m[len(m)-1]); err == nil {
			b.ReportMetric(float64(st.Size()>>10), "manifest-KiB")
		}
	}
}
