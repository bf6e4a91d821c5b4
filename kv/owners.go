package kv

import (
	"encoding/binary"
	"errors"
	"sync/atomic"
)

// A fork gives its parent's agent's files to an agent of its own. Doing
// that inode by inode costs a seek and a write per inode (seconds for a
// million files), so a store keeps instead an owner map, applied where
// attributes are read: an inode whose stored uid (gid) is a key of the map
// is the map's value's. The map is small (one pair per fork in the
// store's ancestry) and read once, at Open. An inode's attributes written
// again are written with the mapped owner, so inodes move over as they
// are touched; nothing else changes on disk.
//
// The map is part of what stays the store's across a rollback (as the
// agent identity does): a snapshot's inodes, stored with any owner in the
// store's history, are mapped alike.

// keyOwners holds the owner map: pairs of (from, to) uids, then gids, as
// 4-byte big-endian numbers after a count of each.
var keyOwners = []byte{pfxMeta, 'o', 'w', 'n', 'e', 'r', 's'}

// ownerMap maps stored owners to current ones.
type ownerMap struct{ uid, gid map[uint32]uint32 }

func (m *ownerMap) apply(a *Attr) {
	if m == nil {
		return
	}
	if to, ok := m.uid[a.Uid]; ok {
		a.Uid = to
	}
	if to, ok := m.gid[a.Gid]; ok {
		a.Gid = to
	}
}

// mapOwner gives a the owner the store's owner map says.
func (s *Store) mapOwner(a *Attr) { s.owners.Load().apply(a) }

type ownersPtr = atomic.Pointer[ownerMap]

func (m *ownerMap) encode() []byte {
	var b []byte
	for _, side := range []map[uint32]uint32{m.uid, m.gid} {
		b = binary.BigEndian.AppendUint32(b, uint32(len(side)))
		for from, to := range side {
			b = binary.BigEndian.AppendUint32(b, from)
			b = binary.BigEndian.AppendUint32(b, to)
		}
	}
	return b
}

func decodeOwners(b []byte) (*ownerMap, error) {
	m := &ownerMap{uid: map[uint32]uint32{}, gid: map[uint32]uint32{}}
	for _, side := range []map[uint32]uint32{m.uid, m.gid} {
		if len(b) < 4 {
			return nil, corrupt("owner map: %d bytes", len(b))
		}
		n := binary.BigEndian.Uint32(b)
		b = b[4:]
		if uint64(len(b)) < 8*uint64(n) {
			return nil, corrupt("owner map: %d pairs in %d bytes", n, len(b))
		}
		for range n {
			side[binary.BigEndian.Uint32(b)] = binary.BigEndian.Uint32(b[4:])
			b = b[8:]
		}
	}
	if len(b) != 0 {
		return nil, corrupt("owner map: %d bytes left over", len(b))
	}
	return m, nil
}

// loadOwners reads the owner map at Open.
func (s *Store) loadOwners() error {
	v, err := s.get(keyOwners)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	m, err := decodeOwners(v)
	if err != nil {
		return err
	}
	s.owners.Store(m)
	return nil
}

// ChangeOwners gives every inode owned by uid from.UID to to.UID, and
// every inode of group from.GID to to.GID (a fork takes a new owner this
// way, see the root package), without a journal record (the files did not
// change) and in constant time: it adds the pairs to the store's owner
// map, and owners already mapped to from are mapped to to; a to that was
// mapped away before (its number given again) is no longer mapped. It is
// for a store that nothing else uses yet (a fork before its first mount).
func (s *Store) ChangeOwners(from, to Owner) error {
	s.enter()
	defer s.leave()
	old := s.owners.Load()
	m := &ownerMap{uid: map[uint32]uint32{}, gid: map[uint32]uint32{}}
	if old != nil {
		for k, v := range old.uid {
			m.uid[k] = v
		}
		for k, v := range old.gid {
			m.gid[k] = v
		}
	}
	for _, p := range []struct {
		side     map[uint32]uint32
		from, to uint32
	}{{m.uid, from.UID, to.UID}, {m.gid, from.GID, to.GID}} {
		if p.from == p.to {
			continue
		}
		delete(p.side, p.to)
		for k, v := range p.side {
			if v == p.from {
				p.side[k] = p.to
			}
		}
		p.side[p.from] = p.to
	}
	b := s.db.NewBatch()
	defer b.Close()
	b.Set(keyOwners, m.encode(), nil)
	if err := s.commit(b); err != nil {
		return err
	}
	if err := s.Sync(); err != nil {
		return err
	}
	s.owners.Store(m)
	return nil
}
