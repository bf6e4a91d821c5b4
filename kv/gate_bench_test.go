package kv

import (
	"fmt"
	"testing"
)

// BenchmarkReadPath measures the store's cheapest reads, in parallel
// (the gate's counter is one cache line for every reader): GetAttr of a
// cached inode, Lookup of a name, and a 4 KiB Read. Run against the
// build before the gate (gate.go) to see what it costs.
func BenchmarkReadPath(b *testing.B) {
	s := newStore(b)
	var inos []uint64
	for i := range 64 {
		a := mkfile(b, s, RootIno, fmt.Sprint("f", i))
		write(b, s, a.Ino, 0, pattern(byte(i), 16<<10))
		inos = append(inos, a.Ino)
	}
	b.Run("GetAttr", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for i := 0; pb.Next(); i++ {
				if _, err := s.GetAttr(inos[i%len(inos)]); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("Lookup", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for i := 0; pb.Next(); i++ {
				if _, err := s.Lookup(RootIno, "f7"); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("Read4KiB", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			buf := make([]byte, 4096)
			for i := 0; pb.Next(); i++ {
				if _, _, err := s.Read(inos[i%len(inos)], 4096, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}
