package kv

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/cockroachdb/pebble/v2"
)

// Check verifies the store's invariants in one streaming pass over all keys
// (memory does not grow with the store) and returns every problem found, at
// most max of them (0: no limit). It is meant for a store that nothing else
// is changing: after a crash, in tests, and for `computerfs fsck`.
//
// Invariants: every inode has attributes; a directory entry names an inode
// that has a back reference to it, and every back reference has its entry;
// a non-directory's link count is its number of names; a directory has one
// name (the root none) and 2 + subdirectories links; an inode without names
// is an orphan; no data lies past a file's size; a symlink has a target;
// an inode marked FlagNoXattrs has none;
// the inode counter is above every inode and the inode count is right;
// the usage count (usage.go) is what the inodes add up to;
// journal records decode and are numbered without gaps (from 1, or
// from the oldest record that TrimJournal kept).
func (s *Store) Check(limit int) ([]string, error) {
	s.enter()
	defer s.leave()
	var problems []string
	report := func(format string, args ...any) {
		if limit == 0 || len(problems) < limit {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{pfxInode}, UpperBound: []byte{pfxInode + 1}})
	if err != nil {
		return nil, err
	}
	defer it.Close()

	type inodeState struct {
		ino                     uint64
		attr                    *Attr
		names, subdirs, entries uint64
		chunks                  uint64
		hasLink                 bool
	}
	blobInodes := map[uint64]bool{}
	var cur inodeState
	var count, maxIno uint64
	finish := func() {
		if cur.ino == 0 {
			return
		}
		a := cur.attr
		if a == nil {
			report("inode %d: keys but no attributes", cur.ino)
			return
		}
		count++
		maxIno = max(maxIno, cur.ino)
		switch {
		case a.IsDir():
			wantNames := uint64(1)
			if cur.ino == RootIno {
				wantNames = 0
			}
			if a.Nlink != 0 && cur.names != wantNames {
				report("directory %d: %d names, want %d", cur.ino, cur.names, wantNames)
			}
			if a.Nlink != 0 && uint64(a.Nlink) != 2+cur.subdirs {
				report("directory %d: nlink %d, want 2 + %d subdirectories", cur.ino, a.Nlink, cur.subdirs)
			}
		default:
			if uint64(a.Nlink) != cur.names {
				report("inode %d: nlink %d but %d names", cur.ino, a.Nlink, cur.names)
			}
			if cur.entries > 0 {
				report("inode %d: not a directory but has %d entries", cur.ino, cur.entries)
			}
		}
		if a.Mode&S_IFMT == S_IFLNK && !cur.hasLink {
			report("symlink %d: no target", cur.ino)
		}
		if a.Flags&FlagBlob != 0 {
			blobInodes[cur.ino] = true
			if cur.chunks > 0 {
				report("inode %d: a blob file with %d chunks", cur.ino, cur.chunks)
			}
			if !a.IsRegular() {
				report("inode %d: a blob but not a regular file", cur.ino)
			}
		}
		if a.Nlink == 0 && cur.ino != RootIno {
			if _, err := s.get(orphanKey(cur.ino)); err != nil {
				report("inode %d: no names and not an orphan (leaked)", cur.ino)
			}
		}
	}
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) < 10 {
			report("malformed key %x", k)
			continue
		}
		ino := binary.BigEndian.Uint64(k[1:9])
		if ino != cur.ino {
			finish()
			cur = inodeState{ino: ino}
		}
		rest := k[10:]
		switch k[9] {
		case kindAttr:
			a, err := decodeAttr(it.Value())
			if err != nil {
				report("inode %d: %v", ino, err)
				continue
			}
			if a.Ino != ino {
				report("inode %d: attributes say inode %d", ino, a.Ino)
			}
			cur.attr = &a
		case kindChunk:
			if cur.attr == nil || len(rest) != 8 {
				report("inode %d: malformed chunk key", ino)
				continue
			}
			cur.chunks++
			start := binary.BigEndian.Uint64(rest) * ChunkSize
			if end := start + uint64(len(it.Value())); end > cur.attr.Size {
				report("inode %d: data up to %d past its size %d", ino, end, cur.attr.Size)
			}
		case kindDirent:
			cur.entries++
			child, typ, err := decodeDirent(it.Value())
			if err != nil {
				report("directory %d: %v", ino, err)
				continue
			}
			if typ == S_IFDIR {
				cur.subdirs++
			}
			if _, err := s.get(backrefKey(child, ino, string(rest))); err != nil {
				report("entry %d/%q -> %d: no back reference", ino, rest, child)
			}
			if ca, err := s.GetAttr(child); err != nil {
				report("entry %d/%q -> %d: %v", ino, rest, child, err)
			} else if ca.Mode&S_IFMT != typ {
				report("entry %d/%q -> %d: type %o, inode has %o", ino, rest, child, typ, ca.Mode&S_IFMT)
			}
		case kindLink:
			cur.hasLink = true
		case kindBackref:
			cur.names++
			if len(rest) < 8 {
				report("inode %d: malformed back reference", ino)
				continue
			}
			parent, name := binary.BigEndian.Uint64(rest), string(rest[8:])
			v, err := s.get(direntKey(parent, name))
			if err != nil {
				report("inode %d: back reference %d/%q has no entry", ino, parent, name)
			} else if child, _, _ := decodeDirent(v); child != ino {
				report("inode %d: back reference %d/%q but the entry names %d", ino, parent, name, child)
			}
		case kindXattr:
			if cur.attr != nil && cur.attr.Flags&FlagNoXattrs != 0 {
				report("inode %d: marked without xattrs but has %q", ino, rest)
			}
		case kindOrigin:
			if _, err := decodeOrigin(it.Value()); err != nil {
				report("inode %d: %v", ino, err)
			}
		default:
			report("inode %d: unknown key kind %q", ino, k[9])
		}
	}
	finish()
	if err := it.Error(); err != nil {
		return problems, err
	}
	s.checkBlobs(blobInodes, report)
	if err := s.checkJournal(report); err != nil {
		return problems, err
	}
	if n, err := s.getUint64(keyInodes); err != nil || n != count {
		report("inode count %d (err %v), found %d", n, err, count)
	}
	if n, err := s.getUint64(keyNextIno); err != nil || n <= maxIno {
		report("next inode %d (err %v), highest inode %d", n, err, maxIno)
	}
	counted, err := s.countUsage()
	if err != nil {
		return problems, err
	}
	for _, p := range []struct {
		what    string
		key     []byte
		mem     int64
		counted int64
	}{{"usage", keyUsage, s.used.Load(), counted.files}, {"journal usage", keyJournalUsage, s.usedJ.Load(), counted.journal},
		{"audit usage", keyAuditUsage, s.usedA.Load(), counted.audit}} {
		if stored, _, err := s.readCount(p.key); err != nil || stored != p.counted || p.mem != p.counted {
			report("%s count %d (err %v; %d in memory), counted %d", p.what, stored, err, p.mem, p.counted)
		}
	}
	return problems, nil
}

func (s *Store) checkJournal(report func(string, ...any)) error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{pfxJournal}, UpperBound: []byte{pfxJournal + 1}})
	if err != nil {
		return err
	}
	defer it.Close()
	want := uint64(0) // the first record kept (older ones may have been trimmed)
	for it.First(); it.Valid(); it.Next() {
		if len(it.Key()) != 9 {
			report("malformed journal key %x", it.Key())
			continue
		}
		seq := binary.BigEndian.Uint64(it.Key()[1:])
		if want != 0 && seq != want {
			report("journal: record %d where %d was due", seq, want)
		}
		want = seq + 1
		if _, err := decodeRecord(seq, it.Value()); err != nil {
			report("%v", err)
		}
	}
	return it.Error()
}

// checkBlobs reports blob inodes without their blob file, and blob files
// that no blob inode claims (the store removes those when it opens).
func (s *Store) checkBlobs(blobInodes map[uint64]bool, report func(string, ...any)) {
	entries, err := os.ReadDir(s.blobs.dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		report("blobs: %v", err)
		return
	}
	found := map[uint64]bool{}
	for _, e := range entries {
		ino, err := strconv.ParseUint(e.Name(), 16, 64)
		if err != nil || !blobInodes[ino] {
			report("blob %s: no blob inode claims it", e.Name())
			continue
		}
		found[ino] = true
	}
	for ino := range blobInodes {
		if !found[ino] {
			report("inode %d: its blob file is missing", ino)
		}
	}
}
