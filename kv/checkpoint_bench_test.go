package kv

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
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

// BenchmarkCheckpointWriting is the writing of an each-call policy's
// checkpoints as the daemon does it: after each of a run of calls that
// change one small file each (in a store of 1,000 files, with up to 1 MiB
// in Pebble's log), a checkpoint is cut; the run's checkpoints are then
// written one after the other (pending=1: a checkpoint written after each
// call, as with an agent's think time; pending=32: back to back) and the
// oldest past 20 pruned. It reports the writing's time and the process's
// CPU per checkpoint, and the same for the cut (Checkpoint, as the call
// returns).
//
//	go test -run '^$' -bench CheckpointWriting ./kv/
func BenchmarkCheckpointWriting(b *testing.B) {
	for _, pending := range []int{1, 32} {
		b.Run(fmt.Sprintf("pending=%d", pending), func(b *testing.B) {
			s := openSnapStore(b, filepath.Join(b.TempDir(), "store"))
			inos := make([]uint64, 1000)
			for i := range inos {
				inos[i] = mkfile(b, s, RootIno, fmt.Sprintf("f%04d", i)).Ino
				write(b, s, inos[i], 0, pattern(byte(i), 4<<10))
			}
			var wall, cpu, cutWall, cutCPU time.Duration
			n := 0
			b.ResetTimer()
			for n < b.N {
				var finishes []func() error
				for range pending {
					write(b, s, inos[n%len(inos)], 0, pattern(byte(n), 4<<10))
					t0, c0 := time.Now(), processCPU(b)
					_, finish, err := s.Checkpoint("bench")
					cutWall += time.Since(t0)
					cutCPU += processCPU(b) - c0
					if err != nil || finish == nil {
						b.Fatalf("checkpoint: %v", err)
					}
					finishes = append(finishes, finish)
					n++
				}
				t0, c0 := time.Now(), processCPU(b)
				for _, f := range finishes {
					if err := f(); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := s.PruneCheckpoints(20, 0); err != nil {
					b.Fatal(err)
				}
				wall += time.Since(t0)
				cpu += processCPU(b) - c0
			}
			b.ReportMetric(float64(wall.Microseconds())/float64(n), "write-µs/ckpt")
			b.ReportMetric(float64(cpu.Microseconds())/float64(n), "cpu-µs/ckpt")
			b.ReportMetric(float64(cutWall.Microseconds())/float64(n), "cut-µs")
			b.ReportMetric(float64(cutCPU.Microseconds())/float64(n), "cut-cpu-µs")
		})
	}
}

// processCPU is the CPU time this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
