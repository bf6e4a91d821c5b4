package kv

import (
	"encoding/binary"

	"github.com/cockroachdb/pebble/v2"
)

// Names calls fn with the directory and name of each name of ino (one for
// a directory, one per hard link for other files; none for the root or an
// orphan), in no particular order, until fn returns false. It is how a
// layer above the store finds every path of an inode (a policy that
// refuses a path must refuse its other names too).
func (s *Store) Names(ino uint64, fn func(dir uint64, name string) bool) error {
	s.enter()
	defer s.leave()
	prefix := kindPrefix(ino, kindBackref)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) < len(prefix)+8 {
			it.Close()
			return corrupt("back reference key of %d bytes", len(k))
		}
		if !fn(binary.BigEndian.Uint64(k[len(prefix):]), string(k[len(prefix)+8:])) {
			break
		}
	}
	return it.Close()
}

// DirMoves counts, twice each, the renames that moved, replaced or
// exchanged a directory, which change the paths of everything under it:
// it is odd while one is under way (renames are one at a time) and grows
// again after its commit. A directory's path computed between two reads
// of the same even value is right while DirMoves still reads that value,
// which is how a cache of paths knows when to drop its entries.
func (s *Store) DirMoves() uint64 { return s.dirMoves.Load() }
