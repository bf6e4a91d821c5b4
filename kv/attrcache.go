package kv

import (
	"bytes"
	"encoding/binary"
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// attrCacheSize bounds the attribute cache: about 2 MiB.
const attrCacheSize = 1 << 14

// attrCache keeps the attributes of recently used inodes in memory. Every
// namespace operation reads its directory's attributes and the kernel asks
// for them again after each change (default_permissions); each of those
// reads was a seek through Pebble's memtable and tables.
//
// The cache is exact, never stale:
//   - commit drops the inodes a batch changes before the batch commits,
//     and caches their new attributes after, before the writer lets go of
//     the inodes' stripe locks (every writer of an inode's attributes
//     holds its stripe), so writers of one inode update it in the order
//     they committed, and no reader finds the old attributes once Pebble
//     has the new;
//   - a reader that missed adds what it read from Pebble only if no commit
//     was under way at any time between its miss and its add (gen, and
//     inflight): a batch is visible in Pebble a moment before commit
//     updates the cache, and a value read before it, added after it (once
//     another reader has seen the new one), would go back in time.
//
// It also keeps, for files recently written up to their end, the length of
// their last chunk (tails), so that an append does not read that chunk
// back. A tail is recorded by the writer after its commit, holding the
// inode's stripe, and dropped by every batch that has any key of the inode
// (every writer of an inode's chunks holds its stripe too).
type attrCache struct {
	mu       sync.Mutex
	m        map[uint64]Attr
	max      int    // entries
	gen      uint64 // incremented when a commit starts and ends
	inflight int    // commits started and not yet ended
	tails    map[uint64]tailChunk
}

// tailChunk is a file's last chunk as its last write left it: its index,
// its length, and how many appends (merge operands) lie on it since it
// was last written whole.
type tailChunk struct {
	ci, len uint64
	merges  int
}

// maxTails bounds the files whose last chunk the cache knows: those being
// appended to now.
const maxTails = 256

func newAttrCache(max int) *attrCache {
	return &attrCache{m: make(map[uint64]Attr), max: max, tails: make(map[uint64]tailChunk)}
}

// tail returns what is known of ino's last chunk. The caller holds ino's
// stripe.
func (c *attrCache) tail(ino uint64) (tailChunk, bool) {
	c.mu.Lock()
	t, ok := c.tails[ino]
	c.mu.Unlock()
	return t, ok
}

// setTail records ino's last chunk after a write that committed and ended
// at the file's end. The caller holds ino's stripe.
func (c *attrCache) setTail(ino uint64, t tailChunk) {
	c.mu.Lock()
	makeRoom(c.tails, ino, maxTails)
	c.tails[ino] = t
	c.mu.Unlock()
}

// get returns ino's cached attributes, or the generation to pass to add
// once they have been read from the store.
func (c *attrCache) get(ino uint64) (a Attr, ok bool, gen uint64) {
	c.mu.Lock()
	a, ok = c.m[ino]
	gen = c.gen
	c.mu.Unlock()
	return a, ok, gen
}

// add caches attributes read from the store, unless a commit updated the
// cache since gen.
func (c *attrCache) add(a Attr, gen uint64) {
	c.mu.Lock()
	if c.gen == gen && c.inflight == 0 {
		c.put(a)
	}
	c.mu.Unlock()
}

// put caches a, making room by dropping an arbitrary entry. c.mu is held.
func (c *attrCache) put(a Attr) {
	makeRoom(c.m, a.Ino, c.max)
	c.m[a.Ino] = a
}

// makeRoom drops an arbitrary entry of m if it holds max entries and not
// ino, so that ino can be added.
func makeRoom[V any](m map[uint64]V, ino uint64, max int) {
	if _, ok := m[ino]; !ok && len(m) >= max {
		for i := range m {
			delete(m, i)
			break
		}
	}
}

// begin tells the cache that b is about to commit; committed or aborted
// must follow. It drops the inodes whose attributes b changes: between
// the commit and committed, Pebble already has the new attributes, and a
// reader that read them there on a miss must not then hit the old ones.
func (c *attrCache) begin(b *pebble.Batch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.inflight++
	c.apply(b, true)
}

// aborted ends a commit that failed.
func (c *attrCache) aborted() {
	c.mu.Lock()
	c.gen++
	c.inflight--
	c.mu.Unlock()
}

// committed updates the cache from a batch that was just committed: the
// attributes it set, and the inodes it deleted.
func (c *attrCache) committed(b *pebble.Batch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.inflight--
	c.apply(b, false)
}

// apply updates the cache from the attribute keys b sets or deletes; with
// drop, every inode b touches is dropped instead. c.mu is held.
func (c *attrCache) apply(b *pebble.Batch, drop bool) {
	r := b.Reader()
	for {
		kind, k, v, ok, err := r.Next()
		if !ok || err != nil {
			if err != nil { // cannot happen for a batch we built; be safe
				clear(c.m)
				clear(c.tails)
			}
			return
		}
		if len(c.tails) > 0 && len(k) >= 9 && k[0] == pfxInode {
			delete(c.tails, inoOfKey(k))
		}
		switch kind {
		case pebble.InternalKeyKindSet:
			if ino, isAttr := attrKeyIno(k); isAttr {
				if a, err := decodeAttr(v); err == nil && !drop {
					c.put(a)
				} else {
					delete(c.m, ino)
				}
			}
		case pebble.InternalKeyKindMerge: // appends to chunks, the usage count
			if ino, isAttr := attrKeyIno(k); isAttr {
				delete(c.m, ino)
			}
		case pebble.InternalKeyKindDelete, pebble.InternalKeyKindSingleDelete:
			if ino, isAttr := attrKeyIno(k); isAttr {
				delete(c.m, ino)
			}
		case pebble.InternalKeyKindRangeDelete:
			c.deleteRange(k, v)
		default: // not written by the store
			clear(c.m)
			clear(c.tails)
		}
	}
}

// deleteRange drops the inodes whose attribute keys lie in [start, end),
// and the tails of every inode the range reaches.
func (c *attrCache) deleteRange(start, end []byte) {
	if len(start) == 0 || start[0] != pfxInode || len(end) == 0 || end[0] != pfxInode {
		// The store deletes ranges of one inode's keys, or of keys under
		// another prefix (the journal's). Anything else that reaches
		// inode keys is not worth being precise about.
		if bytes.Compare(start, []byte{pfxInode + 1}) < 0 && bytes.Compare(end, []byte{pfxInode}) > 0 {
			clear(c.m)
			clear(c.tails)
		}
		return
	}
	first, last := inoOfKey(start), inoOfKey(end)
	if last-first > 16 {
		clear(c.m)
		clear(c.tails)
		return
	}
	for ino := first; ino <= last; ino++ {
		delete(c.tails, ino)
		if k := attrKey(ino); bytes.Compare(k, start) >= 0 && bytes.Compare(k, end) < 0 {
			delete(c.m, ino)
		}
	}
}

// attrKeyIno returns the inode of an attribute key.
func attrKeyIno(k []byte) (uint64, bool) {
	if len(k) != 10 || k[0] != pfxInode || k[9] != kindAttr {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[1:9]), true
}

// inoOfKey returns the inode number in an inode key ('I' ino ...), with a
// short key's missing bytes taken as zeros.
func inoOfKey(k []byte) uint64 {
	var b [8]byte
	copy(b[:], k[1:])
	return binary.BigEndian.Uint64(b[:])
}
