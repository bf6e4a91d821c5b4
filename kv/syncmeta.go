package kv

import (
	"encoding/binary"
	"sort"

	"github.com/cockroachdb/pebble/v2"
)

// What sync back needs from the store: a point in the journal after which
// no record changes any more, one batch for the outcome of a sync (new
// origins, meta values such as the cursor and the manifest), and trimming
// of old records.

// SealJournal returns the sequence number of the newest record and makes
// sure that record is never updated again: the next write starts a new
// record instead of joining it. A reader that has seen every record up to
// the returned number has seen them in their final form.
func (s *Store) SealJournal() uint64 {
	s.enter()
	defer s.leave()
	s.jmu.Lock()
	defer s.jmu.Unlock()
	s.jlast = Record{}
	return s.jnext - 1
}

// OriginUpdate sets an inode's origin to exactly Origin (Ctime included:
// the change time of the content that the source now holds).
type OriginUpdate struct {
	Ino    uint64
	Origin Origin
}

// CommitSync records what a sync did, in one batch synced to stable
// storage: the origins of the files uploaded (skipped for inodes that are
// gone meanwhile) and meta values set and deleted (cursor, manifest,
// conflicts). Either all of it survives a crash or none of it.
func (s *Store) CommitSync(origins []OriginUpdate, set map[string][]byte, del []string) error {
	s.enter()
	defer s.leave()
	inos := make([]uint64, 0, len(origins))
	for _, u := range origins {
		inos = append(inos, u.Ino)
	}
	sort.Slice(inos, func(i, j int) bool { return inos[i] < inos[j] })
	// lockInodes takes a few inodes; lock the stripes one by one, in order.
	var unlocks []func()
	defer func() {
		for i := len(unlocks) - 1; i >= 0; i-- {
			unlocks[i]()
		}
	}()
	held := map[int]bool{}
	for _, ino := range inos {
		i := int(ino % uint64(len(s.stripes)))
		if !held[i] {
			held[i] = true
			unlocks = append(unlocks, s.lockInodes(ino))
		}
	}
	b := s.db.NewBatch()
	defer b.Close()
	for _, u := range origins {
		if _, err := s.GetAttr(u.Ino); err == ErrNotFound {
			continue
		} else if err != nil {
			return err
		}
		b.Set(originKey(u.Ino), u.Origin.encode(), nil)
	}
	for k, v := range set {
		b.Set(userMetaKey(k), v, nil)
	}
	for _, k := range del {
		b.Delete(userMetaKey(k), nil)
	}
	if err := s.commit(b); err != nil {
		return err
	}
	return s.Sync()
}

// TrimJournal deletes the journal records numbered up to and including
// upto that are older than before (ns since the epoch), oldest first,
// stopping at the first younger one. The newest record is always kept (it
// carries the sequence numbering across restarts). It returns how many
// records went.
func (s *Store) TrimJournal(upto uint64, before int64) (int, error) {
	s.enter()
	defer s.leave()
	s.trimMu.Lock() // two trims would count the same records off twice
	defer s.trimMu.Unlock()
	last := s.SealJournal()
	if last == 0 {
		return 0, nil
	}
	upto = min(upto, last-1)
	if upto == 0 {
		return 0, nil
	}
	var first, end uint64 // delete [first, end)
	var cost int64
	n := 0
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: journalKey(1), UpperBound: journalKey(upto + 1)})
	if err != nil {
		return 0, err
	}
	for it.First(); it.Valid(); it.Next() {
		seq := binary.BigEndian.Uint64(it.Key()[1:])
		r, err := decodeRecord(seq, it.Value())
		if err != nil {
			it.Close()
			return 0, err
		}
		if r.Time >= before {
			break
		}
		if first == 0 {
			first = seq
		}
		end = seq + 1
		cost += recordBytes(len(it.Key()), len(it.Value()))
		n++
	}
	if err := it.Close(); err != nil || n == 0 {
		return 0, err
	}
	b := s.db.NewBatch()
	defer b.Close()
	if err := b.DeleteRange(journalKey(first), journalKey(end), nil); err != nil {
		return 0, err
	}
	s.accountTo(b, keyJournalUsage, -cost)
	return n, s.commit(b)
}

// JournalSpan returns the sequence numbers of the oldest and newest
// journal records (0, 0 when there are none).
func (s *Store) JournalSpan() (first, last uint64, err error) {
	s.enter()
	defer s.leave()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{pfxJournal}, UpperBound: []byte{pfxJournal + 1}})
	if err != nil {
		return 0, 0, err
	}
	if it.First() {
		first = binary.BigEndian.Uint64(it.Key()[1:])
		it.Last()
		last = binary.BigEndian.Uint64(it.Key()[1:])
	}
	return first, last, it.Close()
}
