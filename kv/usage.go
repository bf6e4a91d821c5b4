package kv

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
)

// Usage and quota. The store counts the workspace's logical size:
//
//   - every inode: inodeCost (its attributes and keys), plus the size of a
//     regular file (its logical size: a sparse file counts what it reads,
//     holes included, as chunks or a blob alike; a file still at its
//     source counts too) or the length of a symlink's target;
//   - every name (directory entry): nameCost of it (entry and back
//     reference);
//   - every extended attribute: its name and value.
//
// The journal, Pebble's own overhead and the space of deletions not yet
// compacted are not counted: the quota is what the workspace holds, which
// removing files lowers at once.
//
// The count is kept in the key keyUsage as merge operands, one 8-byte
// delta in the batch of each change that moves it, so that it is exact
// after any crash with no scan (Pebble concatenates the operands; reading
// sums them). Every foldEvery operands, and at open, the operands are
// folded into one value (foldUsage); commits hold usageMu for reading so
// that the fold sees all the operands before the value it writes. Check recomputes the
// count from the inodes and reports a difference.
//
// With Options.Quota set, a change that adds to the count past the quota
// fails with ErrQuota (EDQUOT, "Disk quota exceeded", as Linux's quotas
// answer: the limit is the workspace's, not the disk's). Removals,
// truncations and metadata changes always work. Changes under way at the
// same moment are checked against the count before each other's, so the
// quota can be exceeded by what they add together (a few FUSE writes).

// ErrQuota is the answer to a change that would take the workspace past
// its quota (Options.Quota).
var ErrQuota = &Error{"disk quota exceeded", syscall.EDQUOT}

// inodeCost and nameCost are what an inode and a name count, besides the
// data and the name's own bytes (nameCost adds twice its length: the entry
// and the back reference hold it).
const (
	inodeCost = 256
	nameCost  = 64
)

func nameBytes(name string) int64 { return nameCost + 2*int64(len(name)) }

// dataBytes is what a's data counts: a regular file's or symlink's size.
func dataBytes(a *Attr) int64 {
	if a.IsRegular() || a.Mode&S_IFMT == S_IFLNK {
		return int64(a.Size)
	}
	return 0
}

func xattrBytes(name string, value int) int64 { return int64(len(name) + value) }

var keyUsage = []byte{pfxMeta, 'u', 's', 'e', 'd'}

// usageState is the part of Store that keeps the count.
type usageState struct {
	quota   atomic.Int64 // 0: none
	used    atomic.Int64 // the count, with the changes being committed
	usageMu sync.RWMutex // commits (read) against foldUsage (write)
	ops     atomic.Int64 // operands since the last fold
}

// foldEvery is how many operands gather before a commit folds them (8
// bytes each).
const foldEvery = 1024

// account adds delta to the count, in b: to the count in memory too once
// b commits (commit, attrCache.committed).
func (s *Store) account(b *pebble.Batch, delta int64) {
	if delta == 0 {
		return
	}
	b.Merge(keyUsage, binary.BigEndian.AppendUint64(nil, uint64(delta)), nil)
	s.ops.Add(1)
}

// checkQuota fails with ErrQuota if adding delta would take the count
// past the quota.
func (s *Store) checkQuota(delta int64) error {
	quota := s.quota.Load()
	if quota <= 0 || delta <= 0 {
		return nil
	}
	if used := s.used.Load(); used+delta > quota {
		return fmt.Errorf("%w: the workspace holds %d MiB of its %d MiB quota", ErrQuota, used>>20, quota>>20)
	}
	return nil
}

// Usage returns the workspace's logical size (see usage.go) and its quota
// (0: none).
func (s *Store) Usage() (used, quota int64) { return s.used.Load(), s.quota.Load() }

// SetQuota sets the quota (Options.Quota; 0: none), for a store whose
// quota is known only once it is open (the workspace's spec is in it).
// Set it before the store is mounted: the FUSE server decides on
// passthrough by it.
func (s *Store) SetQuota(n int64) { s.quota.Store(max(n, 0)) }

// readUsage reads the count: the sum of the value's 8-byte words.
func (s *Store) readUsage() (int64, int, error) {
	v, err := s.get(keyUsage)
	if err != nil {
		return 0, 0, err
	}
	if len(v)%8 != 0 {
		return 0, 0, corrupt("usage record of %d bytes", len(v))
	}
	var sum int64
	for i := 0; i < len(v); i += 8 {
		sum += int64(binary.BigEndian.Uint64(v[i:]))
	}
	return sum, len(v) / 8, nil
}

// foldUsage writes the count as one value in place of its operands (with
// force, even if no operand was added since the last fold). With no commit
// under way the count in memory is the sum of them all: reading them back
// would cost a copy of the value per operand (Pebble's merging).
func (s *Store) foldUsage(force bool) error {
	if s.space != nil && s.space.low.Load() && s.space.full() != nil {
		return nil // no commit at all on a full disk (space.go); later
	}
	s.usageMu.Lock()
	defer s.usageMu.Unlock()
	if s.ops.Swap(0) == 0 && !force {
		return nil
	}
	return s.db.Set(keyUsage, binary.BigEndian.AppendUint64(nil, uint64(s.used.Load())), pebble.NoSync)
}

// loadUsage reads the count when the store opens; a store that has none
// (made before it was kept) gets it counted.
func (s *Store) loadUsage() error {
	sum, n, err := s.readUsage()
	if errors.Is(err, ErrNotFound) {
		if sum, err = s.countUsage(); err != nil {
			return err
		}
		s.log.Info("store: counted its usage", "bytes", sum)
		err = s.db.Set(keyUsage, binary.BigEndian.AppendUint64(nil, uint64(sum)), pebble.Sync)
	}
	if err != nil {
		return fmt.Errorf("store %s: usage: %w", s.dir, err)
	}
	s.used.Store(sum)
	if n <= 1 {
		return nil // folded already: an open writes nothing
	}
	return s.foldUsage(true)
}

// countUsage counts the usage from the inodes, skipping their data: one
// pass over attributes, names and extended attributes.
func (s *Store) countUsage() (int64, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{pfxInode}, UpperBound: []byte{pfxInode + 1}})
	if err != nil {
		return 0, err
	}
	var sum int64
	for ok := it.First(); ok; {
		k := it.Key()
		if len(k) < 10 {
			ok = it.Next()
			continue
		}
		ino := binary.BigEndian.Uint64(k[1:9])
		switch k[9] {
		case kindAttr:
			a, _ := decodeAttr(it.Value()) // undecodable: Check says so
			sum += inodeCost + dataBytes(&a)
			ok = it.SeekGE(kindPrefix(ino, kindChunk+1)) // over the chunks
		case kindDirent:
			sum += nameBytes(string(k[10:]))
			ok = it.Next()
		case kindXattr:
			v, err := it.ValueAndErr()
			if err != nil {
				it.Close()
				return 0, err
			}
			sum += xattrBytes(string(k[10:]), len(v))
			ok = it.Next()
		case kindChunk:
			ok = it.SeekGE(kindPrefix(ino, kindChunk+1))
		default:
			if k[9] < kindXattr {
				ok = it.SeekGE(kindPrefix(ino, kindXattr))
			} else {
				ok = it.SeekGE(inodePrefix(ino + 1))
			}
		}
	}
	return sum, it.Close()
}

// inodeXattrs returns the number and the bytes (names and values) of
// ino's extended attributes, with those of the names in skip left out.
func (s *Store) inodeXattrs(ino uint64, skip string) (n int, bytes int64, err error) {
	prefix := kindPrefix(ino, kindXattr)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return 0, 0, err
	}
	for it.First(); it.Valid(); it.Next() {
		name := string(it.Key()[len(prefix):])
		if name == skip {
			continue
		}
		n++
		bytes += xattrBytes(name, len(it.Value()))
	}
	return n, bytes, it.Close()
}

// accountAttrs adds to b the change of the count that b's attribute keys
// make: an inode set where the store has none counts inodeCost and its
// data, a deleted one (a point or a range deletion) no longer counts, and
// a size that changes moves the count by as much. The attributes are
// compared with the stored ones, not with what the operation started
// from: those may hold the size the kernel wrote into a pinned blob
// (mergePin), which the store has not counted yet. Every writer of an
// inode's attributes holds its stripe, so the stored attributes are those
// the batch replaces.
//
// It returns the change of the count that b makes in all (with the
// operands its operation added before).
func (s *Store) accountAttrs(b *pebble.Batch) (int64, error) {
	type change struct {
		ino  uint64
		cost int64 // -1: deleted
	}
	var buf [4]change
	changes := buf[:0]
	set := func(ino uint64, cost int64) {
		for i := range changes {
			if changes[i].ino == ino {
				changes[i].cost = cost
				return
			}
		}
		changes = append(changes, change{ino, cost})
	}
	var delta int64
	newFrom := uint64(math.MaxUint64) // inodes from here on are new: none stored
	r := b.Reader()
	for {
		kind, k, v, ok, err := r.Next()
		if err != nil {
			return 0, err
		}
		if !ok {
			break
		}
		switch kind {
		case pebble.InternalKeyKindMerge:
			if len(v) == 8 && bytes.Equal(k, keyUsage) {
				delta += int64(binary.BigEndian.Uint64(v))
			}
		case pebble.InternalKeyKindSet:
			if bytes.Equal(k, keyNextIno) {
				// A create, which holds nsMu: the inodes it makes are
				// those from nextIno on, and reading them costs a miss
				// through every level.
				newFrom = s.nextIno
			}
			if ino, isAttr := attrKeyIno(k); isAttr {
				a, _ := decodeAttr(v) // undecodable (a test's damage): no data
				set(ino, inodeCost+dataBytes(&a))
			}
		case pebble.InternalKeyKindDelete, pebble.InternalKeyKindSingleDelete:
			if ino, isAttr := attrKeyIno(k); isAttr {
				set(ino, -1)
			}
		case pebble.InternalKeyKindRangeDelete:
			// The store deletes ranges of one inode's keys (or of its
			// chunks, which keep the attributes).
			if len(k) == 9 && k[0] == pfxInode && bytes.Equal(v, inodeEnd(binary.BigEndian.Uint64(k[1:]))) {
				set(binary.BigEndian.Uint64(k[1:]), -1)
			}
		}
	}
	var attrs int64
	for _, c := range changes {
		old, err := Attr{}, error(ErrNotFound)
		if c.ino < newFrom {
			old, err = s.storedAttr(c.ino)
		}
		switch {
		case err == nil:
			attrs -= inodeCost + dataBytes(&old)
		case errors.Is(err, ErrCorrupt):
			attrs -= inodeCost
		case err != ErrNotFound:
			return 0, err
		}
		if c.cost >= 0 {
			attrs += c.cost
		}
	}
	s.account(b, attrs)
	return delta + attrs, nil
}
