package kv

import (
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
)

// cacheKeeper keeps Pebble's block cache at the size the options ask for.
// Pebble charges every memtable to the block cache (a reservation of the
// memtable's whole size, taken when it is made and given back when it is
// freed), so a 16 MiB cache beside a 64 MiB memtable holds no block at
// all, and every point read goes to the table files for its index,
// filter and data blocks again. The cache is therefore made larger by a
// headroom, and the keeper reserves the part of the headroom that the
// memtables do not use: the blocks get the asked size whatever the
// memtables hold (up to the headroom), and the memory that the cache and
// the memtables take together stays what it was meant to be.
type cacheKeeper struct {
	cache    *pebble.Cache
	headroom int64

	mu      sync.Mutex
	release func() // the keeper's reservation
	closed  bool   // the store is closing: the cache is Pebble's to free

	// cacheChecks counts the flusher's ticks that still look at the
	// memtables' reservation after a flush began or ended (a flushed
	// memtable is freed once its last reader is done).
	cacheChecks atomic.Int32
}

// memtableHeadroom is how much memtable reservation the keeper makes up
// for: the memtable being written and one being flushed.
func memtableHeadroom(memtable uint64) int64 { return 2 * int64(memtable) }

func (s *Store) keepCache(c *pebble.Cache, headroom int64) {
	s.cacheKeeper.cache, s.cacheKeeper.headroom = c, headroom
	s.reserveCache(0)
}

// memtablesChanged is called from Pebble's flush events.
func (s *Store) memtablesChanged() { s.cacheChecks.Store(10) }

// adjustCache sets the keeper's reservation to the headroom less what the
// memtables reserve now.
func (s *Store) adjustCache() {
	m := s.db.Metrics()
	s.reserveCache(int64(m.MemTable.Size + m.MemTable.ZombieSize))
}

func (s *Store) reserveCache(memtables int64) {
	k := &s.cacheKeeper
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.release != nil {
		k.release()
		k.release = nil
	}
	if q := k.headroom - memtables; q > 0 {
		k.release = k.cache.Reserve(int(q))
	}
}

// releaseCache gives the keeper's reservation back (before the store
// closes the cache's last user).
func (s *Store) releaseCache() {
	s.reserveCache(s.cacheKeeper.headroom) // as if the memtables took it all: no reservation
	s.cacheKeeper.mu.Lock()
	s.cacheKeeper.closed = true
	s.cacheKeeper.mu.Unlock()
}

// DropBlockCache evicts every block from the block cache, so that a
// daemon gone idle gives that memory back (with the allocator's trim); the
// next reads fill it again from the table files, which the kernel caches.
// Blocks in use stay until their readers are done.
func (s *Store) DropBlockCache() {
	s.enter()
	defer s.leave()
	k := &s.cacheKeeper
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cache == nil || k.closed {
		return
	}
	k.cache.Reserve(int(k.cache.MaxSize()))() // reserving the whole cache evicts it
}
