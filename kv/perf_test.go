package kv

import (
	"testing"
)

// Benchmarks of the store alone, without FUSE: they tell how much of the
// mount's cost is the store's. Run with: go test -run '^$' -bench . ./kv/

func benchStore(b *testing.B) *Store {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func BenchmarkSequentialWrite1MiB(b *testing.B) {
	s := benchStore(b)
	a, err := s.Create(RootIno, "f", NewInode{Mode: S_IFREG | 0o644})
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.Write(a.Ino, int64(i)*int64(len(buf)), buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Sync(); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkCreateUnlink(b *testing.B) {
	s := benchStore(b)
	names := make([]string, b.N)
	for i := range names {
		names[i] = "file" + string(rune('a'+i%26)) + itoa(i)
	}
	b.ResetTimer()
	for _, n := range names {
		if _, err := s.Create(RootIno, n, NewInode{Mode: S_IFREG | 0o644}); err != nil {
			b.Fatal(err)
		}
	}
	for _, n := range names {
		if err := s.Unlink(RootIno, n); err != nil {
			b.Fatal(err)
		}
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

// BenchmarkAppend4KiB appends 4 KiB writes to files of up to 1 MiB (a new
// file every 256 writes), as git writes a pack and a compiler its output.
func BenchmarkAppend4KiB(b *testing.B) {
	s := benchStore(b)
	buf := make([]byte, 4096)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	b.SetBytes(int64(len(buf)))
	var ino uint64
	for i := 0; i < b.N; i++ {
		n := i % 256
		if n == 0 {
			a, err := s.Create(RootIno, "f"+itoa(i), NewInode{Mode: S_IFREG | 0o644})
			if err != nil {
				b.Fatal(err)
			}
			ino = a.Ino
		}
		if _, err := s.Write(ino, int64(n)*4096, buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSmallFile creates files and writes 4 KiB into each in one
// write, as a checkout or an untar of small files does.
func BenchmarkSmallFile(b *testing.B) {
	s := benchStore(b)
	buf := make([]byte, 4096)
	b.SetBytes(int64(len(buf)))
	for i := 0; i < b.N; i++ {
		a, err := s.Create(RootIno, "f"+itoa(i), NewInode{Mode: S_IFREG | 0o644})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Write(a.Ino, 0, buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendSync appends 4 KiB and syncs the store after each write, as
// a program that fsyncs its log does: every iteration is a hard sync of
// Pebble's write-ahead log.
func BenchmarkAppendSync(b *testing.B) {
	s := benchStore(b)
	a, err := s.Create(RootIno, "log", NewInode{Mode: S_IFREG | 0o644})
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 4096)
	b.SetBytes(int64(len(buf)))
	for i := 0; i < b.N; i++ {
		if _, err := s.Write(a.Ino, int64(i)*4096, buf); err != nil {
			b.Fatal(err)
		}
		if err := s.Sync(); err != nil {
			b.Fatal(err)
		}
	}
}
