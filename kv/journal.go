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
	JRefresh  // content replaced from the source by a refresh
	JRollback // the content put back to a snapshot (Rollback): path "/", cut
	jOpEnd
)

var journalOpNames = [...]string{"", "create", "mkdir", "symlink", "tmpfile", "link", "unlink", "rmdir", "rename",
	"write", "truncate", "setattr", "fallocate", "setxattr", "removexattr", "refresh", "rollback"}

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
	// PathCut (Path2Cut) says that Path (Path2) is not the whole path but
	// its nearest ancestor that fits: a record holds at most
	// MaxRecordPath bytes of a path, and past the quota a record of a
	// change that frees space only minimalPath (minimalRecord).
	PathCut, Path2Cut bool

	// where computes Path and Path2 just before the record is written
	// (and not at all when a write joins the previous record).
	where func() (string, string)
	// For the cache of paths: a rename's replaced or exchanged inode, and
	// whether the rename moves, exchanges or replaces a directory (the
	// paths of everything below it change).
	replaced uint64
	movesDir bool
}

// journalVersion is the format of a record; journalVersionCut the same
// followed by a byte of flags (cutPath, cutPath2), for a record whose
// paths are cut.
const (
	journalVersion    = 1
	journalVersionCut = 2
)

const (
	cutPath = 1 << iota
	cutPath2
)

// MaxRecordPath is the longest path a journal record holds (PATH_MAX:
// the longest a program can pass in one call). A longer path is recorded
// as its nearest ancestor that fits, with Record.PathCut: a reader that
// takes the record to mean "something at or under this path changed" (as
// sync back does) is right.
const MaxRecordPath = 4096

// maxActorString is the most of each of an actor's names a record holds.
const maxActorString = 128

// minimalPath is how much of each path a minimal record keeps, and
// minimalActorString of each of its actor's names (minimalRecord).
const (
	minimalPath        = 24
	minimalActorString = 16
)

// pathCutMark ends a path, inside the store, that is cut: the nearest
// ancestor that fits, before the mark. Names hold no NUL.
const pathCutMark = "\x00"

// cutTo returns p cut to its nearest ancestor (or, for what is not a path
// such as an xattr's name, its first bytes) of at most n bytes, and
// whether it was cut. p may be cut already (pathCutMark).
func cutTo(p string, n int) (string, bool) {
	p, cut := strings.CutSuffix(p, pathCutMark)
	if len(p) <= n {
		return p, cut
	}
	if !strings.HasPrefix(p, "/") {
		return p[:n], true
	}
	i := strings.LastIndexByte(p[:n+1], '/')
	if i <= 0 {
		return "/", true
	}
	return p[:i], true
}

func cutString(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// capped is a with its names cut to n bytes each.
func (a Actor) capped(n int) Actor {
	a.Comm, a.Sandbox, a.Entry, a.Request = cutString(a.Comm, n), cutString(a.Sandbox, n), cutString(a.Entry, n), cutString(a.Request, n)
	return a
}

// minimalRecord cuts r to the least a record of a change says: its kind,
// inode, size, time and actor (names cut to minimalActorString), and its
// paths cut to an ancestor of at most minimalPath bytes. Past the quota
// this is the record of a change that frees space; the name a removal
// frees reserved room for it (nameRecordReserve), so such a change never
// adds to the count.
func (r *Record) minimal() {
	r.Actor = r.Actor.capped(minimalActorString)
	var cut bool
	if r.Path, cut = cutTo(r.Path, minimalPath); cut {
		r.PathCut = true
	}
	if r.Path2, cut = cutTo(r.Path2, minimalPath); cut {
		r.Path2Cut = true
	}
}

func (r *Record) encode() []byte {
	b := make([]byte, 0, 64+len(r.Path)+len(r.Path2)+len(r.Actor.Comm))
	version := byte(journalVersion)
	if r.PathCut || r.Path2Cut {
		version = journalVersionCut
	}
	b = append(b, version, byte(r.Op))
	b = binary.AppendVarint(b, r.Time)
	for _, v := range []uint64{r.Ino, r.Size, uint64(r.Actor.Pid), uint64(r.Actor.Uid), uint64(r.Actor.Gid)} {
		b = binary.AppendUvarint(b, v)
	}
	for _, s := range []string{r.Path, r.Path2, r.Actor.Comm, r.Actor.Sandbox, r.Actor.Entry, r.Actor.Request} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	if version == journalVersionCut {
		var flags byte
		if r.PathCut {
			flags |= cutPath
		}
		if r.Path2Cut {
			flags |= cutPath2
		}
		b = append(b, flags)
	}
	return b
}

func decodeRecord(seq uint64, b []byte) (Record, error) {
	orig := b
	bad := func() error { return corrupt("journal record %d: %x", seq, orig) } // formatted only when needed
	if len(b) < 2 || b[0] != journalVersion && b[0] != journalVersionCut {
		return Record{}, bad()
	}
	version := b[0]
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
	if ok && version == journalVersionCut {
		if ok = len(b) == 1 && b[0] != 0 && b[0]&^(cutPath|cutPath2) == 0; ok {
			r.PathCut, r.Path2Cut = b[0]&cutPath != 0, b[0]&cutPath2 != 0
			b = b[1:]
		}
	}
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
	jnext      uint64                // the next sequence number
	jlast      Record                // the last record written (for joining writes)
	jlastCost  int64                 // what jlast counts (recordBytes)
	trimMu     sync.Mutex            // one TrimJournal at a time
	paths      map[uint64]cachedPath // inode -> the path of its first name, for records (pathCutMark: cut)
	pathBytes  int                   // the paths' bytes charged
	journalOff bool                  // no journal (imports into a new store, benchmarks)
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
//
// The records count in the journal's part of the usage, and the quota
// decides on them with the change (usage.go): a change that adds to the
// count past the quota fails with ErrQuota, one that frees space goes in
// within the quota's grace, and past that with minimal records if those
// do not outweigh what it frees. Writes, checked before they touched any
// data (checkQuota), always go in.
func (s *Store) commitRecords(b *pebble.Batch, recs []*Record, a *Actor) error {
	if s.journalOff {
		return s.commit(b)
	}
	if a == nil {
		a = system
	}
	actor := a.capped(maxActorString)
	s.jmu.Lock()
	defer s.jmu.Unlock()
	change, err := s.accountAttrs(b)
	if err != nil {
		return err
	}
	ts := time.Now().UnixNano() // not now(): tests fake that clock for inode times
	last := &s.jlast
	join := len(recs) == 1 && recs[0].Op == JWrite && last.Op == JWrite && last.Ino == recs[0].Ino &&
		last.Actor == actor && last.Seq+1 == s.jnext
	next := s.jnext
	raw := make([]string, len(recs)) // the paths as the cache keeps them
	for i, rec := range recs {
		rec.Time, rec.Actor = ts, actor
		if join {
			rec.Seq, rec.Path, rec.Path2, rec.PathCut, rec.Path2Cut = last.Seq, last.Path, last.Path2, last.PathCut, last.Path2Cut
		} else {
			rec.Seq = next
			next++
			if rec.where != nil {
				raw[i], rec.Path2 = rec.where()
				rec.Path, rec.PathCut = cutTo(raw[i], MaxRecordPath)
				rec.Path2, rec.Path2Cut = cutTo(rec.Path2, MaxRecordPath)
			}
		}
	}
	vals, cost := encodeRecords(recs)
	if join {
		cost -= s.jlastCost
	}
	if err := s.admitRecords(change.files, recs, &vals, &cost, join); err != nil {
		return err
	}
	for i, rec := range recs {
		b.Set(journalKey(rec.Seq), vals[i], nil)
	}
	s.accountTo(b, keyJournalUsage, cost)
	change.journal += cost
	if err := s.commitAccounted(b, change); err != nil {
		return err
	}
	s.jnext = next
	for i, rec := range recs {
		rec.where = nil
		s.notePath(rec, raw[i], join)
	}
	s.jlast = *recs[len(recs)-1]
	s.jlastCost = recordBytes(9, len(vals[len(vals)-1]))
	return nil
}

// encodeRecords encodes recs and returns what they count.
func encodeRecords(recs []*Record) ([][]byte, int64) {
	vals := make([][]byte, len(recs))
	var cost int64
	for i, rec := range recs {
		vals[i] = rec.encode()
		cost += recordBytes(9, len(vals[i]))
	}
	return vals, cost
}

// admitRecords decides on a change that moves the files' count by files
// and whose records (encoded as vals) count cost, under the quota: it
// fails with ErrQuota, or lets it go in, with its records made minimal if
// need be (vals and cost then change). jmu is held: records go in one at
// a time, each checked against the count with the one before.
func (s *Store) admitRecords(files int64, recs []*Record, vals *[][]byte, cost *int64, joined bool) error {
	quota := s.quota.Load()
	if quota <= 0 || files+*cost <= 0 {
		return nil
	}
	for _, rec := range recs {
		switch rec.Op {
		case JWrite, JFallocate, JRefresh:
			if files >= 0 {
				return nil // checked before it began (checkQuota); its data may be in a blob already
			}
		}
	}
	u := s.usageNow()
	used := u.total()
	if files >= 0 {
		if used+files+*cost > quota {
			return s.quotaError(u, quota, "")
		}
		return nil
	}
	if used+files+*cost <= quota+QuotaGrace(quota) {
		return nil
	}
	if joined {
		return s.quotaError(u, quota, "")
	}
	for _, rec := range recs {
		rec.minimal()
	}
	*vals, *cost = encodeRecords(recs)
	if files+*cost > 0 {
		return s.quotaError(u, quota, fmt.Sprintf("the workspace is past its quota and its grace, and this change frees %d bytes, less than even a short journal record takes (%d)", -files, *cost))
	}
	return nil
}

// notePath keeps the cache of paths right after a change: a new inode's
// path is the one the record names (raw: as the cache keeps it), a
// removed name or a renamed inode loses its path, and when a directory
// moves everything below it does. jmu is held.
func (s *Store) notePath(rec *Record, raw string, joined bool) {
	switch rec.Op {
	case JCreate, JMkdir, JSymlink:
		if !joined && raw != "" {
			s.cachePath(rec.Ino, raw, len(raw))
		}
	case JUnlink, JRmdir: // a removed directory was empty: nothing below it is cached
		s.uncachePath(rec.Ino)
	case JRename:
		if rec.movesDir {
			clear(s.paths)
			s.pathBytes = 0
		}
		s.uncachePath(rec.Ino)
		s.uncachePath(rec.replaced)
	}
}

// The cache of paths holds at most pathCacheEntries paths of
// pathCacheBytes in all (each at most MaxRecordPath).
const (
	pathCacheEntries = 16384
	pathCacheBytes   = 4 << 20
)

// cachedPath is a path in the cache and the bytes it is charged: its
// length, or nothing for a cut path that is its directory's cut path
// (the same string: every directory below a cut shares its ancestor's).
type cachedPath struct {
	p string
	n int
}

func (s *Store) cachePath(ino uint64, p string, charge int) {
	if len(s.paths) >= pathCacheEntries || s.pathBytes+charge > pathCacheBytes {
		clear(s.paths)
		s.pathBytes = 0
	}
	s.uncachePath(ino)
	s.paths[ino] = cachedPath{p, charge}
	s.pathBytes += charge
}

func (s *Store) uncachePath(ino uint64) {
	if c, ok := s.paths[ino]; ok {
		s.pathBytes -= c.n
		delete(s.paths, ino)
	}
}

// dirPath returns the path of directory dir ("" for the root), ending in
// pathCutMark if it is cut (its nearest ancestor within MaxRecordPath).
// jmu is held.
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
//
// It walks up to the root (or a directory whose path is cached) in a
// loop, then down again making each path: the agent makes trees of any
// depth, and a recursion a level deep on each would end the daemon with
// a fatal stack overflow at the first change deep down. The walk holds
// an inode and a name a level; past maxPathWalk levels (a damaged store's
// loop) the top is named by its inode number.
func (s *Store) pathOf(ino uint64) (string, bool) {
	if c, ok := s.paths[ino]; ok {
		return c.p, true
	}
	type step struct {
		ino  uint64
		name string
	}
	var up []step // ino and its directories, innermost first, with their names
	base := ""    // the path of the directory above up's last
	for d := ino; ; {
		parent, name, err := s.firstName(d)
		if err != nil {
			if d == ino {
				return "", false
			}
			base = fmt.Sprintf("(inode %d)", d)
			break
		}
		up = append(up, step{d, name})
		if parent == RootIno {
			break
		}
		if c, ok := s.paths[parent]; ok {
			base = c.p
			break
		}
		if len(up) >= maxPathWalk {
			base = fmt.Sprintf("(inode %d)", parent)
			break
		}
		d = parent
	}
	p := base
	for i := len(up) - 1; i >= 0; i-- {
		charge := 0
		if !strings.HasSuffix(p, pathCutMark) { // else p stays the same string
			p = joinCut(p, up[i].name)
			charge = len(p)
		}
		s.cachePath(up[i].ino, p, charge)
	}
	return p, true
}

// maxPathWalk bounds pathOf's walk up the tree.
const maxPathWalk = 1 << 24

// entryPath is the path of name in dir, cut (pathCutMark) past
// MaxRecordPath. jmu is held.
func (s *Store) entryPath(dir uint64, name string) string {
	return joinCut(s.dirPath(dir), name)
}

// joinCut is the path of name in the directory at d ("" for the root),
// cut (pathCutMark) past MaxRecordPath.
func joinCut(d, name string) string {
	if strings.HasSuffix(d, pathCutMark) {
		return d
	}
	if len(d)+1+len(name) > MaxRecordPath {
		if d == "" {
			d = "/"
		}
		return d + pathCutMark
	}
	return d + "/" + name
}

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
	s.paths = make(map[uint64]cachedPath)
	s.pathBytes = 0
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
	s.enter()
	defer s.leave()
	s.jmu.Lock()
	defer s.jmu.Unlock()
	return s.jnext - 1
}

// ReadJournal calls fn for the records after seq, oldest first, until fn
// returns false. A record that later writes join is read as it is now.
func (s *Store) ReadJournal(after uint64, fn func(Record) bool) error {
	s.enter()
	defer s.leave()
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
	fmt.Fprintf(&b, "%d %s %s", r.Seq, r.Op, cutName(r.Path, r.PathCut))
	if r.Path2 != "" || r.Path2Cut {
		fmt.Fprintf(&b, " -> %s", cutName(r.Path2, r.Path2Cut))
	}
	if r.Op == JWrite || r.Op == JTruncate || r.Op == JFallocate || r.Op == JRefresh {
		fmt.Fprintf(&b, " size=%d", r.Size)
	}
	b.WriteString(" by " + r.Actor.String())
	return b.String()
}

// cutName formats a record's path: quoted if need be, and a cut one as
// "/its/ancestor/...".
func cutName(p string, cut bool) string {
	if !cut {
		return textsafe.Name(p)
	}
	if strings.HasPrefix(p, "/") {
		return textsafe.Name(strings.TrimSuffix(p, "/")+"/") + "..."
	}
	return textsafe.Name(p) + "..."
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
