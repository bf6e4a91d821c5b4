package kv

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

// TestBlockCacheBesideMemtables: memtables larger than the block cache do
// not take its room (Pebble charges them to it): after enough writes to
// grow the memtables past the cache's size, reads are still served from
// the cache.
func TestBlockCacheBesideMemtables(t *testing.T) {
	s, err := Open(t.TempDir(), Options{CacheSize: 4 << 20, MemTableSize: 32 << 20, FlushInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var inos []uint64
	for i := range 2000 {
		a, err := s.Create(RootIno, fmt.Sprint("f", i), NewInode{Mode: S_IFREG | 0o644})
		if err != nil {
			t.Fatal(err)
		}
		inos = append(inos, a.Ino)
	}
	big, err := s.Create(RootIno, "big", NewInode{Mode: S_IFREG | 0o644})
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 1<<20)
	for i := range 40 { // the memtables grow to 16 MiB and more
		if _, err := s.Write(big.Ino, int64(i)<<20, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the flusher's ticks adjust the keeper
	m := s.db.Metrics()
	if r := m.MemTable.Size + m.MemTable.ZombieSize; r <= 4<<20 {
		t.Fatalf("memtables reserve %d bytes: the test needs more than the cache", r)
	}
	before := m.BlockCache
	for range 3 {
		for i := range inos { // names, not attributes: those the store caches itself
			if _, _, err := s.LookupIno(RootIno, fmt.Sprint("f", i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	after := s.db.Metrics().BlockCache
	hits, misses := after.Hits-before.Hits, after.Misses-before.Misses
	t.Logf("block cache: %d hits, %d misses, %d bytes, memtables %d bytes", hits, misses, after.Size, m.MemTable.Size+m.MemTable.ZombieSize)
	if hits < 3*misses {
		t.Fatalf("block cache beside large memtables: %d hits, %d misses", hits, misses)
	}
}

// TestNoSyncStore: a NoSync store (an import being built) works like any
// other and, after Close and SyncTree, opens again with everything in it.
func TestNoSyncStore(t *testing.T) {
	dir := t.TempDir() + "/store"
	s, err := Open(dir, Options{NoSync: true, NoJournal: true})
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.Create(RootIno, "f", NewInode{Mode: S_IFREG | 0o644})
	if err != nil {
		t.Fatal(err)
	}
	data := pattern(2, 3*ChunkSize+5)
	write(t, s, a.Ino, 0, data)
	if err := s.SetMeta("k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteTables(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := SyncTree(dir); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir)
	if got := readAll(t, s, a.Ino); !bytes.Equal(got, data) {
		t.Fatal("data of a NoSync store lost")
	}
	if v, err := s.GetMeta("k"); err != nil || string(v) != "v" {
		t.Fatalf("meta: %q, %v", v, err)
	}
	checkInvariants(t, s, checkOpts{})
}

// TestDropBlockCache: an idle daemon empties the block cache; reads work
// and fill it again; after Close it does nothing.
func TestDropBlockCache(t *testing.T) {
	s, err := Open(t.TempDir(), Options{CacheSize: 8 << 20, BlobThreshold: -1})
	if err != nil {
		t.Fatal(err)
	}
	f, err := s.Create(RootIno, "f", NewInode{Mode: S_IFREG | 0o644})
	if err != nil {
		t.Fatal(err)
	}
	data := pattern(3, 4<<20)
	write(t, s, f.Ino, 0, data)
	if err := s.db.Flush(); err != nil { // into a table, read through the cache
		t.Fatal(err)
	}
	// The keeper learns of the flush on the flusher's next ticks; until
	// then it reserves the memtable's share and every block read is
	// evicted at once.
	s.adjustCache()
	read := func() {
		t.Helper()
		if got := readAll(t, s, f.Ino); !bytes.Equal(got, data) {
			t.Fatal("read back other data")
		}
	}
	read()
	if size := s.db.Metrics().BlockCache.Size; size < 1<<20 {
		t.Fatalf("the cache holds %d bytes after a 4 MiB read: the test checks nothing", size)
	}
	s.DropBlockCache()
	if size := s.db.Metrics().BlockCache.Size; size > 64<<10 {
		t.Fatalf("the cache holds %d bytes after DropBlockCache", size)
	}
	read()
	if size := s.db.Metrics().BlockCache.Size; size < 1<<20 {
		t.Fatalf("the cache holds %d bytes after reading again", size)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s.DropBlockCache() // the cache is gone with the store: nothing to do
}
