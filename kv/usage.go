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

// Usage and quota. The store counts the workspace's logical size in three
// parts:
//
//   - files: every inode, inodeCost (its attributes and keys), plus the
//     size of a regular file (its logical size: a sparse file counts what
//     it reads, holes included, as chunks or a blob alike; a file still at
//     its source counts too) or the length of a symlink's target; every
//     name (directory entry), nameCost of it (entry, back reference, and
//     room for the journal record of its removal: see below); every
//     extended attribute, its name and value;
//   - journal: every journal record, its key and value and recordCost;
//   - audit: every audit record, likewise.
//
// Pebble's own overhead and the space of deletions not yet compacted are
// not counted: the count is what the workspace holds, which removing
// files, trimming the journal (TrimJournal, once synced) and the audit
// lower at once.
//
// Each part is kept in its key (keyUsage, keyJournalUsage,
// keyAuditUsage) as merge operands, one 8-byte delta in the batch of each
// change that moves it, so that it is exact after any crash with no scan
// (Pebble concatenates the operands; reading sums them). Every foldEvery
// operands, and at open, the operands are folded into one value
// (foldUsage); commits hold usageMu for reading so that the fold sees all
// the operands before the value it writes. Check recomputes the parts from
// the inodes and the records and reports a difference.
//
// With Options.Quota set, the quota bounds the three parts together:
//
//   - a change that adds to the count (data, names, xattrs, or only its
//     journal record: a chmod, a rename, an overwrite) past the quota
//     fails with ErrQuota (EDQUOT, "Disk quota exceeded", as Linux's
//     quotas answer: the limit is the workspace's, not the disk's);
//   - a change that frees space (unlink, rmdir, truncate down, removexattr,
//     a rename over a file) always works while the count after it, its
//     record included, stays within the quota and its grace (QuotaGrace);
//     past that its record is written in its minimal form (paths cut to a
//     short ancestor, see minimalRecord), which every unlink and rmdir
//     pays for with the room its name reserved (nameRecordReserve), so a
//     full workspace can always remove files; a truncate or removexattr
//     that frees less than even its minimal record takes fails there with
//     ErrQuota;
//   - a tool call's audit record is refused past the quota and its grace
//     (PutAudit; the tools then do not run the call).
//
// A write is checked before it touches data (checkQuota, which leaves
// room for a small record) and its record is then always committed, so a
// write can take the count past the quota by one record (a few KiB at
// most: MaxRecordPath); changes under way at the same moment are checked
// against the count before each other's, so the quota can be exceeded by
// what they add together (a few FUSE writes).

// ErrQuota is the answer to a change that would take the workspace past
// its quota (Options.Quota).
var ErrQuota = &Error{"disk quota exceeded", syscall.EDQUOT}

// inodeCost and nameCost are what an inode and a name count, besides the
// data and the name's own bytes (nameCost adds twice its length: the entry
// and the back reference hold it).
const (
	inodeCost = 256
	nameCost  = 64 + nameRecordReserve
)

// nameRecordReserve is the part of a name's cost that pays for the
// minimal journal record of its removal (minimalRecord), so that removing
// a name never adds to the count past the quota.
const nameRecordReserve = 192

func nameBytes(name string) int64 { return nameCost + 2*int64(len(name)) }

// dataBytes is what a's data counts: a regular file's or symlink's size.
func dataBytes(a *Attr) int64 {
	if a.IsRegular() || a.Mode&S_IFMT == S_IFLNK {
		return int64(a.Size)
	}
	return 0
}

func xattrBytes(name string, value int) int64 { return int64(len(name) + value) }

var (
	keyUsage        = []byte{pfxMeta, 'u', 's', 'e', 'd'}
	keyJournalUsage = []byte{pfxMeta, 'u', 's', 'e', 'd', 'j'}
	keyAuditUsage   = []byte{pfxMeta, 'u', 's', 'e', 'd', 'a'}
)

// usage is the count in its parts.
type usage struct{ files, journal, audit int64 }

func (u usage) total() int64 { return u.files + u.journal + u.audit }

// usageState is the part of Store that keeps the count.
type usageState struct {
	quota   atomic.Int64 // 0: none
	used    atomic.Int64 // files, with the changes being committed
	usedJ   atomic.Int64 // the journal's records
	usedA   atomic.Int64 // the audit's records
	usageMu sync.RWMutex // commits (read) against foldUsage (write)
	ops     atomic.Int64 // operands since the last fold

	quotaHits chan struct{} // QuotaHits
}

// recordCost is what a journal or audit record counts besides its key
// and value: Pebble's trailer and lengths.
const recordCost = 16

func recordBytes(key, value int) int64 { return int64(key+value) + recordCost }

// QuotaGrace is how far past its quota a workspace may go for the records
// of changes that free space and of tool calls: quota/16, at least 256 KiB,
// at most 64 MiB.
func QuotaGrace(quota int64) int64 {
	if quota <= 0 {
		return 0
	}
	return min(max(quota/16, 256<<10), 64<<20)
}

func (s *Store) usageNow() usage {
	return usage{s.used.Load(), s.usedJ.Load(), s.usedA.Load()}
}

func (s *Store) addUsage(u usage) {
	s.used.Add(u.files)
	s.usedJ.Add(u.journal)
	s.usedA.Add(u.audit)
}

// accountTo adds delta to the count of key's part, in b.
func (s *Store) accountTo(b *pebble.Batch, key []byte, delta int64) {
	if delta == 0 {
		return
	}
	b.Merge(key, binary.BigEndian.AppendUint64(nil, uint64(delta)), nil)
	s.ops.Add(1)
}

// foldEvery is how many operands gather before a commit folds them (8
// bytes each).
const foldEvery = 1024

// account adds delta to the count, in b: to the count in memory too once
// b commits (commit, attrCache.committed).
func (s *Store) account(b *pebble.Batch, delta int64) { s.accountTo(b, keyUsage, delta) }

// checkQuota fails with ErrQuota if adding delta, and a small journal
// record (minRecordCost), would take the count past the quota. A change
// that frees (delta < 0) passes: commitRecords decides on its record.
func (s *Store) checkQuota(delta int64) error {
	quota := s.quota.Load()
	if quota <= 0 || delta < 0 {
		return nil
	}
	if u := s.usageNow(); u.total()+delta+minRecordCost > quota {
		return s.quotaError(u, quota, "")
	}
	return nil
}

// minRecordCost is the room checkQuota leaves for a change's record.
const minRecordCost = 64

// quotaError is ErrQuota with the count's parts. It also tells whoever
// waits on QuotaHits that a change was refused.
func (s *Store) quotaError(u usage, quota int64, why string) error {
	select {
	case s.quotaHits <- struct{}{}:
	default:
	}
	if why != "" {
		why = ": " + why
	}
	return fmt.Errorf("%w: the workspace holds %s of its %s quota (files %s, journal %s, audit %s)%s",
		ErrQuota, kib(u.total()), kib(quota), kib(u.files), kib(u.journal), kib(u.audit), why)
}

// QuotaHits is told (without waiting: at most one signal pending) each
// time a change or an audit record is refused for the quota. The syncer
// trims the journal on it at once rather than at its next tick, so that a
// workspace full of journal has room again as soon as files are removed
// or records synced.
func (s *Store) QuotaHits() <-chan struct{} { return s.quotaHits }

func kib(n int64) string {
	if n >= 10<<20 || n <= -10<<20 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}

// Usage returns the workspace's logical size (see usage.go: files,
// journal and audit together) and its quota (0: none).
func (s *Store) Usage() (used, quota int64) { return s.usageNow().total(), s.quota.Load() }

// UsageReport is the count in its parts (see usage.go).
type UsageReport struct {
	Files   int64 `json:"files"`   // inodes, names, data, extended attributes
	Journal int64 `json:"journal"` // the journal's records
	Audit   int64 `json:"audit"`   // the audit's records
	Used    int64 `json:"used"`    // the three together: what the quota bounds
	Quota   int64 `json:"quota"`   // 0: none
	Grace   int64 `json:"grace"`   // how far past the quota removals' and tool calls' records may go
}

// UsageDetail returns the count in its parts.
func (s *Store) UsageDetail() UsageReport {
	s.enter()
	defer s.leave()
	u, q := s.usageNow(), s.quota.Load()
	return UsageReport{Files: u.files, Journal: u.journal, Audit: u.audit, Used: u.total(), Quota: q, Grace: QuotaGrace(q)}
}

// SetQuota sets the quota (Options.Quota; 0: none), for a store whose
// quota is known only once it is open (the workspace's spec is in it).
// Set it before the store is mounted: the FUSE server decides on
// passthrough by it.
func (s *Store) SetQuota(n int64) { s.quota.Store(max(n, 0)) }

// readUsage reads the files' count: the sum of the value's 8-byte words.
func (s *Store) readUsage() (int64, int, error) { return s.readCount(keyUsage) }

// readCount reads one part of the count.
func (s *Store) readCount(key []byte) (int64, int, error) {
	v, err := s.get(key)
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
	b := s.db.NewBatch()
	defer b.Close()
	u := s.usageNow()
	b.Set(keyUsage, binary.BigEndian.AppendUint64(nil, uint64(u.files)), nil)
	b.Set(keyJournalUsage, binary.BigEndian.AppendUint64(nil, uint64(u.journal)), nil)
	b.Set(keyAuditUsage, binary.BigEndian.AppendUint64(nil, uint64(u.audit)), nil)
	return b.Commit(pebble.NoSync)
}

// loadUsage reads the count when the store opens; a store that has none
// (made before it was kept), or none of its journal and audit (made before
// those counted, with a smaller nameCost), gets it counted.
func (s *Store) loadUsage() error {
	files, n, err := s.readUsage()
	var journal, audit int64
	var nj, na int
	if err == nil {
		if journal, nj, err = s.readCount(keyJournalUsage); err == nil {
			audit, na, err = s.readCount(keyAuditUsage)
		}
	}
	if errors.Is(err, ErrNotFound) {
		var u usage
		if u, err = s.countUsage(); err != nil {
			return err
		}
		s.log.Info("store: counted its usage", "files", u.files, "journal", u.journal, "audit", u.audit)
		files, journal, audit, n, nj, na = u.files, u.journal, u.audit, 1, 1, 1
		b := s.db.NewBatch()
		b.Set(keyUsage, binary.BigEndian.AppendUint64(nil, uint64(u.files)), nil)
		b.Set(keyJournalUsage, binary.BigEndian.AppendUint64(nil, uint64(u.journal)), nil)
		b.Set(keyAuditUsage, binary.BigEndian.AppendUint64(nil, uint64(u.audit)), nil)
		err = b.Commit(pebble.Sync)
		b.Close()
	}
	if err != nil {
		return fmt.Errorf("store %s: usage: %w", s.dir, err)
	}
	s.used.Store(files)
	s.usedJ.Store(journal)
	s.usedA.Store(audit)
	if n <= 1 && nj <= 1 && na <= 1 {
		return nil // folded already: an open writes nothing
	}
	return s.foldUsage(true)
}

// countUsage counts the usage from the inodes, skipping their data (one
// pass over attributes, names and extended attributes), and from the
// journal's and the audit's records.
func (s *Store) countUsage() (usage, error) {
	files, err := s.countFiles()
	if err != nil {
		return usage{}, err
	}
	journal, err := s.countRecords(pfxJournal)
	if err != nil {
		return usage{}, err
	}
	audit, err := s.countRecords(pfxAudit)
	return usage{files, journal, audit}, err
}

// countRecords counts the records under one prefix (journal, audit).
func (s *Store) countRecords(pfx byte) (int64, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{pfx}, UpperBound: []byte{pfx + 1}})
	if err != nil {
		return 0, err
	}
	var sum int64
	for it.First(); it.Valid(); it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return 0, err
		}
		sum += recordBytes(len(it.Key()), len(v))
	}
	return sum, it.Close()
}

func (s *Store) countFiles() (int64, error) {
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
// operands its operation added before), by part.
func (s *Store) accountAttrs(b *pebble.Batch) (usage, error) {
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
	var delta usage
	newFrom := uint64(math.MaxUint64) // inodes from here on are new: none stored
	r := b.Reader()
	for {
		kind, k, v, ok, err := r.Next()
		if err != nil {
			return usage{}, err
		}
		if !ok {
			break
		}
		switch kind {
		case pebble.InternalKeyKindMerge:
			if len(v) == 8 && len(k) >= len(keyUsage) && bytes.Equal(k[:len(keyUsage)], keyUsage) {
				d := int64(binary.BigEndian.Uint64(v))
				switch {
				case len(k) == len(keyUsage):
					delta.files += d
				case bytes.Equal(k, keyJournalUsage):
					delta.journal += d
				case bytes.Equal(k, keyAuditUsage):
					delta.audit += d
				}
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
			return usage{}, err
		}
		if c.cost >= 0 {
			attrs += c.cost
		}
	}
	s.account(b, attrs)
	delta.files += attrs
	return delta, nil
}
