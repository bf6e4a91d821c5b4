package kv

import (
	"encoding/binary"
	"fmt"
	"github.com/computerfs/computerfs/internal/textsafe"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// The journal: every change to the workspace appends a record, in the same
// batch as the change itself, so a change and its record are never apart
// (not even across a crash). Records are keyed 'J' seq, seq counting from
// 1 without gaps. Consecutive writes to one file by one actor share a
// record, updated in place, so writing a big file in many pieces costs one
// record, not thousands.

// Actor is who made a change: a process on the mount (Pid, Uid, Gid,
// Comm, and the Sandbox it runs in, if any) or code in the daemon (Entry,
// such as "refresh" or "shell", and its Request id).
type Actor struct {
	Pid     uint32 `json:"pid,omitempty"`
	Uid     uint32 `json:"uid"`
	Gid     uint32 `json:"gid"`
	Comm    string `json:"comm,omitempty"`
	Sandbox string `json:"sandbox,omitempty"`
	Entry   string `json:"entry,omitempty"`
	Request string `json:"request,omitempty"`
}

// JournalOp is the kind of a change.
type JournalOp uint8

// The kinds of change.
const (
	JCreate JournalOp = iota + 1 // a regular file, device, fifo or socket
	JMkdir
	JSymlink
	JTmpfile // an unnamed file (O_TMPFILE)
	JLink
	JUnlink
	JRmdir
	JRename
	JWrite
	JTruncate
	JSetattr // mode, owner, times
	JFallocate
	JSetxattr
	JRemovexattr
	JRefresh // content replaced from the source by a refresh
	jOpEnd
)

var journalOpNames = [...]string{"", "create", "mkdir", "symlink", "tmpfile", "link", "unlink", "rmdir", "rename",
	"write", "truncate", "setattr", "fallocate", "setxattr", "removexattr", "refresh"}

func (o JournalOp) String() string {
	if o < jOpEnd {
		return journalOpNames[o]
	}
	return fmt.Sprintf("op%d", o)
}

// Record is one journal entry.
type Record struct {
	Seq   uint64
	Time  int64 // ns since the epoch
	Op    JournalOp
	Ino   uint64
	Path  string // the file's path (for a rename, the old one)
	Path2 string // a rename's new path, a link's new name
	Size  uint64 // the file's size after the change
	Actor Actor

	// where computes Path and Path2 just before the record is written
	// (and not at all when a write joins the previous record).
	where func() (string, string)
	// For the cache of paths: a rename's replaced or exchanged inode, and
	// whether the rename moves, exchanges or replaces a directory (the
	// paths of everything below it change).
	replaced uint64
	movesDir bool
}

const journalVersion = 1

func (r *Record) encode() []byte {
	b := make([]byte, 0, 64+len(r.Path)+len(r.Path2)+len(r.Actor.Comm))
	b = append(b, journalVersion, byte(r.Op))
	b = binary.AppendVarint(b, r.Time)
	for _, v := range []uint64{r.Ino, r.Size, uint64(r.Actor.Pid), uint64(r.Actor.Uid), uint64(r.Actor.Gid)} {
		b = binary.AppendUvarint(b, v)
	}
	for _, s := range []string{r.Path, r.Path2, r.Actor.Comm, r.Actor.Sandbox, r.Actor.Entry, r.Actor.Request} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

func decodeRecord(seq uint64, b []byte) (Record, error) {
	orig := b
	bad := func() error { return corrupt("journal record %d: %x", seq, orig) } // formatted only when needed
	if len(b) < 2 || b[0] != journalVersion {
		return Record{}, bad()
	}
	r := Record{Seq: seq, Op: JournalOp(b[1])}
	b = b[2:]
	t, n := binary.Varint(b)
	if n <= 0 {
		return Record{}, bad()
	}
	r.Time, b = t, b[n:]
	nums := make([]uint64, 5)
	for i := range nums {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return Record{}, bad()
		}
		nums[i], b = v, b[n:]
	}
	r.Ino, r.Size = nums[0], nums[1]
	r.Actor.Pid, r.Actor.Uid, r.Actor.Gid = uint32(nums[2]), uint32(nums[3]), uint32(nums[4])
	b, ok := decodeStrings(b, &r.Path, &r.Path2, &r.Actor.Comm, &r.Actor.Sandbox, &r.Actor.Entry, &r.Actor.Request)
	if !ok || len(b) != 0 {
		return Record{}, bad()
	}
	return r, nil
}

func journalKey(seq uint64) []byte { return binary.BigEndian.AppendUint64([]byte{pfxJournal}, seq) }

// journalState is the part of Store that keeps the journal.
type journalState struct {
	// jmu orders records: it is held from taking a sequence number to the
	// commit of its batch, so records become visible in sequence order.
	jmu        sync.Mutex
	jnext      uint64            // the next sequence number
	jlast      Record            // the last record written (for joining writes)
	paths      map[uint64]string // inode -> the path of its first name, for records
	journalOff bool              // no journal (imports into a new store, benchmarks)
}

// system is the actor of changes made through the Store's own methods
// rather than a Session.
var system = &Actor{Entry: "store"}

// commitRecord commits a change's batch with its journal record.
func (s *Store) commitRecord(b *pebble.Batch, rec *Record, a *Actor) error {
	return s.commitRecords(b, []*Record{rec}, a)
}

// commitRecords commits a change's batch with its journal records (in
// order, with consecutive sequence numbers). A lone write record joins the
// previous record when that was a write of the same file by the same
// actor.
func (s *Store) commitRecords(b *pebble.Batch, recs []*Record, a *Actor) error {
	if s.journalOff {
		return s.commit(b)
	}
	if a == nil {
		a = system
	}
	s.jmu.Lock()
	defer s.jmu.Unlock()
	ts := time.Now().UnixNano() // not now(): tests fake that clock for inode times
	last := &s.jlast
	join := len(recs) == 1 && recs[0].Op == JWrite && last.Op == JWrite && last.Ino == recs[0].Ino &&
		last.Actor == *a && last.Seq+1 == s.jnext
	next := s.jnext
	for _, rec := range recs {
		rec.Time, rec.Actor = ts, *a
		if join {
			rec.Seq, rec.Path, rec.Path2 = last.Seq, last.Path, last.Path2
		} else {
			rec.Seq = next
			next++
			if rec.where != nil {
				rec.Path, rec.Path2 = rec.where()
			}
		}
		b.Set(journalKey(rec.Seq), rec.encode(), nil)
	}
	if err := s.commit(b); err != nil {
		return err
	}
	s.jnext = next
	for _, rec := range recs {
		rec.where = nil
		s.notePath(rec, join)
	}
	s.jlast = *recs[len(recs)-1]
	return nil
}

// notePath keeps the cache of paths right after a change: a new inode's
// path is the one the record names, a removed name or a renamed inode
// loses its path, and when a directory moves everything below it does.
// jmu is held.
func (s *Store) notePath(rec *Record, joined bool) {
	switch rec.Op {
	case JCreate, JMkdir, JSymlink:
		if !joined {
			s.cachePath(rec.Ino, rec.Path)
		}
	case JUnlink, JRmdir: // a removed directory was empty: nothing below it is cached
		delete(s.paths, rec.Ino)
	case JRename:
		if rec.movesDir {
			clear(s.paths)
		}
		delete(s.paths, rec.Ino)
		delete(s.paths, rec.replaced)
	}
}

func (s *Store) cachePath(ino uint64, p string) {
	if len(s.paths) >= 16384 {
		clear(s.paths)
	}
	s.paths[ino] = p
}

// dirPath returns the path of directory dir ("" for the root). jmu is held.
func (s *Store) dirPath(dir uint64) string {
	if dir == RootIno {
		return ""
	}
	if p, ok := s.pathOf(dir); ok {
		return p
	}
	return fmt.Sprintf("(inode %d)", dir)
}

// inoPath returns a path of ino (its first name), for records of changes
// made by inode number. jmu is held.
func (s *Store) inoPath(ino uint64) string {
	if ino == RootIno {
		return "/"
	}
	if p, ok := s.pathOf(ino); ok {
		return p
	}
	return fmt.Sprintf("(inode %d, unlinked)", ino)
}

// pathOf returns the path of a inode other than the root by its first
// name, from the back references, with a cache. jmu is held.
func (s *Store) pathOf(ino uint64) (string, bool) {
	if p, ok := s.paths[ino]; ok {
		return p, true
	}
	parent, name, err := s.firstName(ino)
	if err != nil {
		return "", false
	}
	p := s.dirPath(parent) + "/" + name
	s.cachePath(ino, p)
	return p, true
}

func (s *Store) entryPath(dir uint64, name string) string { return s.dirPath(dir) + "/" + name }

// firstName returns the directory and name of ino's first back reference.
func (s *Store) firstName(ino uint64) (uint64, string, error) {
	prefix := kindPrefix(ino, kindBackref)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return 0, "", err
	}
	defer it.Close()
	if !it.First() {
		return 0, "", ErrNotFound
	}
	k := it.Key()
	if len(k) < len(prefix)+8 {
		return 0, "", corrupt("back reference key of %d bytes", len(k))
	}
	return binary.BigEndian.Uint64(k[len(prefix):]), string(k[len(prefix)+8:]), nil
}

// loadJournal finds the next sequence number at open.
func (s *Store) loadJournal() error {
	s.paths = make(map[uint64]string)
	s.jnext = 1
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{pfxJournal}, UpperBound: []byte{pfxJournal + 1}})
	if err != nil {
		return err
	}
	if it.Last() {
		s.jnext = binary.BigEndian.Uint64(it.Key()[1:]) + 1
	}
	return it.Close()
}

// LastSeq is the sequence number of the newest journal record (0: none).
func (s *Store) LastSeq() uint64 {
	s.jmu.Lock()
	defer s.jmu.Unlock()
	return s.jnext - 1
}

// ReadJournal calls fn for the records after seq, oldest first, until fn
// returns false. A record that later writes join is read as it is now.
func (s *Store) ReadJournal(after uint64, fn func(Record) bool) error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: journalKey(after + 1), UpperBound: []byte{pfxJournal + 1}})
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		r, err := decodeRecord(binary.BigEndian.Uint64(it.Key()[1:]), it.Value())
		if err != nil {
			it.Close()
			return err
		}
		if !fn(r) {
			break
		}
	}
	return it.Close()
}

// String formats a record for people: time, sequence, operation, path(s),
// size and actor. Names are the agent's: one with a control character, a
// newline or bytes that are not UTF-8 is quoted (textsafe.Name), so that
// it can neither drive the terminal nor forge a line.
func (r *Record) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s %s", r.Seq, r.Op, textsafe.Name(r.Path))
	if r.Path2 != "" {
		fmt.Fprintf(&b, " -> %s", textsafe.Name(r.Path2))
	}
	if r.Op == JWrite || r.Op == JTruncate || r.Op == JFallocate || r.Op == JRefresh {
		fmt.Fprintf(&b, " size=%d", r.Size)
	}
	b.WriteString(" by " + r.Actor.String())
	return b.String()
}

// String formats an actor: "pid 12 (vim) uid 1000" or "refresh #r7".
func (a Actor) String() string {
	var parts []string
	if a.Entry != "" {
		e := textsafe.Name(a.Entry)
		if a.Request != "" {
			e += " #" + textsafe.Name(a.Request)
		}
		parts = append(parts, e)
	}
	if a.Pid != 0 {
		p := fmt.Sprintf("pid %d", a.Pid)
		if a.Comm != "" {
			p += " (" + textsafe.Name(a.Comm) + ")"
		}
		parts = append(parts, p, fmt.Sprintf("uid %d", a.Uid))
	}
	if a.Sandbox != "" {
		parts = append(parts, "sandbox "+textsafe.Name(a.Sandbox))
	}
	if len(parts) == 0 {
		return "unknown"
	}
	return strings.Join(parts, " ")
}
