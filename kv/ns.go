package kv

import (
	"runtime"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// Rename flags, with Linux's values.
const (
	RenameNoReplace = 1 << 0
	RenameExchange  = 1 << 1
	RenameWhiteout  = 1 << 2
)

// maxLinks is the largest link count, as on ext4.
const maxLinks = 65000

// NewInode describes an inode to create.
type NewInode struct {
	Mode   uint32 // type and permission bits, after the caller's umask
	Uid    uint32
	Gid    uint32
	Rdev   uint32
	Target string // symlink target

	// For imported files:
	Mtime  int64   // if not zero, the modification time
	Origin *Origin // where the file came from (Origin.Ctime is set here)
	Remote bool    // a regular file whose Size bytes stay at Origin until first read
	Size   uint64  // with Remote, the file's size

	// Data is a new regular file's content, written in the same batch as
	// the file itself: the file never exists empty or half written.
	Data []byte
}

// Dirent is one directory entry.
type Dirent struct {
	Name string
	Ino  uint64
	Type uint32 // S_IFMT bits
}

func checkName(name string) error {
	switch {
	case name == "" || name == "." || name == ".." || strings.IndexByte(name, '/') >= 0 || strings.IndexByte(name, 0) >= 0:
		return ErrInvalid
	case len(name) > MaxNameLen:
		return ErrNameTooLong
	}
	return nil
}

// GetAttr returns an inode's attributes (with what the kernel changed in
// a pinned blob merged in, see PinBlob).
func (s *Store) GetAttr(ino uint64) (Attr, error) {
	s.enter()
	defer s.leave()
	for {
		g := s.pins.seq.Load()
		a, err := s.storedAttr(ino)
		if err == nil {
			s.mergePin(&a, nil)
		}
		if s.pins.stable(g) {
			return a, err
		}
		runtime.Gosched()
	}
}

// storedAttr returns an inode's attributes as the store has them.
func (s *Store) storedAttr(ino uint64) (a Attr, err error) {
	a, ok, gen := s.attrs.get(ino)
	if ok {
		s.mapOwner(&a)
		return a, nil
	}
	err = s.view(attrKey(ino), func(v []byte) (err error) {
		a, err = decodeAttr(v)
		return err
	})
	if err == nil {
		s.attrs.add(a, gen)
		s.mapOwner(&a)
	}
	return a, err
}

// LookupIno returns the inode and type that name has in dir.
func (s *Store) LookupIno(dir uint64, name string) (ino uint64, typ uint32, err error) {
	s.enter()
	defer s.leave()
	if len(name) > MaxNameLen {
		return 0, 0, ErrNameTooLong
	}
	err = s.view(direntKey(dir, name), func(v []byte) (err error) {
		ino, typ, err = decodeDirent(v)
		return err
	})
	return ino, typ, err
}

// Lookup returns the attributes of name in dir.
func (s *Store) Lookup(dir uint64, name string) (Attr, error) {
	s.enter()
	defer s.leave()
	ino, _, err := s.LookupIno(dir, name)
	if err != nil {
		return Attr{}, err
	}
	return s.GetAttr(ino)
}

// Readlink returns a symbolic link's target.
func (s *Store) Readlink(ino uint64) (string, error) {
	s.enter()
	defer s.leave()
	v, err := s.get(linkKey(ino))
	if err == ErrNotFound {
		// Not a symlink, or a symlink deleted since the kernel looked it
		// up. Ask Pebble, not the attribute cache: a commit is visible in
		// Pebble a moment before it reaches the cache, and the cached
		// attributes of a symlink just deleted would turn ENOENT into
		// EINVAL.
		if aerr := s.view(attrKey(ino), func([]byte) error { return nil }); aerr == nil {
			return "", ErrInvalid
		}
	}
	return string(v), err
}

// ReadDir calls fn for each entry of dir whose name sorts after `after`
// ("" starts at the beginning), in name order, until fn returns false. It
// streams from the store: memory does not grow with the directory.
func (s *Store) ReadDir(dir uint64, after string, fn func(Dirent) bool) error {
	s.enter()
	defer s.leave()
	return s.readDir(dir, after, fn)
}

func (s *Store) readDir(dir uint64, after string, fn func(Dirent) bool) error {
	prefix := kindPrefix(dir, kindDirent)
	lower := prefix
	if after != "" {
		lower = append(direntKey(dir, after), 0)
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		ino, typ, err := decodeDirent(it.Value())
		if err != nil {
			it.Close()
			return err
		}
		if !fn(Dirent{Name: string(it.Key()[len(prefix):]), Ino: ino, Type: typ}) {
			break
		}
	}
	return it.Close()
}

func (s *Store) isEmptyDir(dir uint64) (bool, error) {
	empty := true
	err := s.ReadDir(dir, "", func(Dirent) bool { empty = false; return false })
	return empty, err
}

// Parent returns the directory that holds dir (the root is its own parent).
func (s *Store) Parent(dir uint64) (uint64, error) {
	s.enter()
	defer s.leave()
	if dir == RootIno {
		return RootIno, nil
	}
	parent, _, err := s.firstName(dir)
	return parent, err
}

// Create makes a new inode of any type (file, directory, symlink, device,
// fifo, socket) named name in dir.
func (s *Store) Create(dir uint64, name string, n NewInode) (Attr, error) {
	s.enter()
	defer s.leave()
	return s.create(nil, dir, name, n)
}

func (s *Store) create(actor *Actor, dir uint64, name string, n NewInode) (Attr, error) {
	attrs, errs, err := s.createMany(actor, dir, []NewEntry{{Name: name, Inode: n}})
	if err != nil {
		return Attr{}, err
	}
	return attrs[0], errs[0]
}

// NewEntry is one name for CreateMany.
type NewEntry struct {
	Name  string
	Inode NewInode
}

// CreateMany creates entries in dir in one batch: what an import of many
// files in one directory does, without a commit per file. errs[i] is the
// error of entries[i] alone (ErrExist for a name that dir, or an earlier
// entry, already has), which leaves attrs[i] zero and the others alone;
// err is an error of the whole batch, which then created nothing.
func (s *Store) CreateMany(dir uint64, entries []NewEntry) (attrs []Attr, errs []error, err error) {
	s.enter()
	defer s.leave()
	return s.createMany(nil, dir, entries)
}

func (s *Store) createMany(actor *Actor, dir uint64, entries []NewEntry) ([]Attr, []error, error) {
	if err := s.space.check(0); err != nil {
		return nil, nil, err
	}
	var adds int64
	for _, e := range entries {
		adds += inodeCost + nameBytes(e.Name) + int64(len(e.Inode.Data)) + int64(len(e.Inode.Target))
		if e.Inode.Remote {
			adds += int64(min(e.Inode.Size, MaxFileSize))
		}
	}
	if err := s.checkQuota(adds); err != nil {
		return nil, nil, err
	}
	attrs, errs := make([]Attr, len(entries)), make([]error, len(entries))
	s.nsMu.Lock()
	defer s.nsMu.Unlock()
	unlock := s.lockInodes(dir)
	defer unlock()
	t := s.newTxn()
	defer t.close()
	p, err := t.dir(dir)
	if err != nil {
		return nil, nil, err
	}
	if p.Nlink == 0 {
		return nil, nil, ErrNotFound // creating in a removed directory
	}
	ts := now()
	next, made := s.nextIno, 0
	var recs []*Record
	var names map[string]bool // taken by earlier entries (the batch is not read back)
	if len(entries) > 1 {
		names = make(map[string]bool, len(entries))
	}
	for i, e := range entries {
		if names[e.Name] {
			errs[i] = ErrExist
			continue
		}
		a, rec, err := s.addEntry(t, p, dir, e.Name, e.Inode, next, ts)
		if err != nil {
			errs[i] = err
			continue
		}
		attrs[i] = *a
		recs = append(recs, rec)
		if names != nil {
			names[e.Name] = true
		}
		next++
		made++
	}
	if made == 0 {
		return attrs, errs, nil
	}
	t.touch(dir)
	t.b.Set(keyNextIno, u64(next), nil)
	t.b.Set(keyInodes, u64(uint64(s.inodes.Load()+int64(made))), nil)
	if err := t.commitRecords(recs, actor); err != nil {
		return nil, nil, err
	}
	s.nextIno = next
	s.inodes.Add(int64(made))
	return attrs, errs, nil
}

// addEntry adds to t a new inode numbered ino, named name in directory p
// (dir), and returns its attributes and journal record.
func (s *Store) addEntry(t *txn, p *Attr, dir uint64, name string, n NewInode, ino uint64, ts int64) (*Attr, *Record, error) {
	if err := checkName(name); err != nil {
		return nil, nil, err
	}
	typ := n.Mode & S_IFMT
	switch typ {
	case S_IFREG, S_IFDIR, S_IFLNK, S_IFCHR, S_IFBLK, S_IFIFO, S_IFSOCK:
	case 0:
		typ = S_IFREG
		n.Mode |= S_IFREG
	default:
		return nil, nil, ErrInvalid
	}
	if err := s.checkAbsent(dir, name); err != nil {
		return nil, nil, err
	}
	if typ == S_IFDIR && p.Nlink >= maxLinks {
		return nil, nil, ErrTooManyLinks
	}
	a := newAttr(p, n, ino, ts)
	a.Nlink = 1
	switch typ {
	case S_IFDIR:
		a.Nlink = 2
	case S_IFLNK:
		a.Size = uint64(len(n.Target))
	case S_IFREG:
		if n.Remote {
			if n.Origin == nil || n.Size > MaxFileSize {
				return nil, nil, ErrInvalid
			}
			a.Flags |= FlagRemote
			a.Size = n.Size
		} else if uint64(len(n.Data)) > MaxFileSize {
			return nil, nil, ErrFileTooLarge
		}
	}
	// Nothing fails past this point: the entry's keys go into the batch.
	switch {
	case typ == S_IFDIR:
		p.Nlink++
	case typ == S_IFLNK:
		t.b.Set(linkKey(a.Ino), []byte(n.Target), nil)
	case typ == S_IFREG && !n.Remote && len(n.Data) > 0:
		putContent(t.b, a, n.Data)
	}
	if n.Mtime != 0 {
		a.Mtime = n.Mtime
	}
	if n.Origin != nil {
		o := *n.Origin
		o.Ctime = a.Ctime
		t.b.Set(originKey(a.Ino), o.encode(), nil)
	}
	if typ != S_IFCHR && typ != S_IFBLK {
		a.Rdev = 0
	}
	p.Mtime, p.Ctime = ts, ts
	t.put(a)
	t.b.Set(direntKey(dir, name), encodeDirent(a.Ino, a.Mode), nil)
	t.b.Set(backrefKey(a.Ino, dir, name), nil, nil)
	s.account(t.b, nameBytes(name)) // the inode: accountAttrs
	op := JCreate
	switch typ {
	case S_IFDIR:
		op = JMkdir
	case S_IFLNK:
		op = JSymlink
	}
	rec := &Record{Op: op, Ino: a.Ino, Size: a.Size, where: func() (string, string) { return s.entryPath(dir, name), "" }}
	return a, rec, nil
}

// newAttr returns the attributes of a new inode ino in directory p, with
// the times ts and BSD group semantics for a setgid parent: the group is
// the directory's, and a new directory is setgid too.
func newAttr(p *Attr, n NewInode, ino uint64, ts int64) *Attr {
	a := &Attr{Ino: ino, Mode: n.Mode, Uid: n.Uid, Gid: n.Gid, Rdev: n.Rdev,
		Atime: ts, Mtime: ts, Ctime: ts, Btime: ts, Flags: FlagNoXattrs}
	if p.Mode&S_ISGID != 0 {
		a.Gid = p.Gid
		if a.IsDir() {
			a.Mode |= S_ISGID
		}
	}
	return a
}

// checkAbsent fails with ErrExist if dir has an entry name.
func (s *Store) checkAbsent(dir uint64, name string) error {
	_, _, err := s.LookupIno(dir, name)
	switch err {
	case nil:
		return ErrExist
	case ErrNotFound:
		return nil
	}
	return err
}

// CreateTmpfile makes a regular file without a name (open(2) with
// O_TMPFILE in dir): an orphan until Link gives it a name, deleted on
// Forget or at the next Open otherwise.
func (s *Store) CreateTmpfile(dir uint64, n NewInode) (Attr, error) {
	s.enter()
	defer s.leave()
	return s.createTmpfile(nil, dir, n)
}

func (s *Store) createTmpfile(actor *Actor, dir uint64, n NewInode) (Attr, error) {
	n.Mode = n.Mode&^S_IFMT | S_IFREG
	if err := s.space.check(0); err != nil {
		return Attr{}, err
	}
	if err := s.checkQuota(inodeCost); err != nil {
		return Attr{}, err
	}
	s.nsMu.Lock()
	defer s.nsMu.Unlock()
	unlock := s.lockInodes(dir)
	defer unlock()
	p, err := s.GetAttr(dir)
	if err != nil {
		return Attr{}, err
	}
	if !p.IsDir() {
		return Attr{}, ErrNotDir
	}
	if p.Nlink == 0 {
		return Attr{}, ErrNotFound // a removed directory
	}
	a := newAttr(&p, n, s.nextIno, now()) // no name, so no link yet
	b := s.db.NewBatch()
	defer b.Close()
	b.Set(attrKey(a.Ino), a.encode(), nil)
	b.Set(orphanKey(a.Ino), []byte{orphanLinkable}, nil)
	b.Set(keyNextIno, u64(a.Ino+1), nil)
	b.Set(keyInodes, u64(uint64(s.inodes.Load()+1)), nil)
	rec := &Record{Op: JTmpfile, Ino: a.Ino, where: func() (string, string) { return s.entryPath(dir, "(unnamed)"), "" }}
	if err := s.commitRecord(b, rec, actor); err != nil {
		return Attr{}, err
	}
	s.nextIno++
	s.inodes.Add(1)
	s.orphans[a.Ino] = struct{}{}
	return *a, nil
}

// orphanLinkable marks an orphan that Link may give a name (an O_TMPFILE
// file); other orphans (unlinked while open) cannot be linked again.
const orphanLinkable = 1

// Link gives inode ino the additional name name in dir.
func (s *Store) Link(ino, dir uint64, name string) (Attr, error) {
	s.enter()
	defer s.leave()
	return s.link(nil, ino, dir, name)
}

func (s *Store) link(actor *Actor, ino, dir uint64, name string) (Attr, error) {
	if err := checkName(name); err != nil {
		return Attr{}, err
	}
	if err := s.space.check(0); err != nil {
		return Attr{}, err
	}
	if err := s.checkQuota(nameBytes(name)); err != nil {
		return Attr{}, err
	}
	s.nsMu.Lock()
	defer s.nsMu.Unlock()
	unlock := s.lockInodes(ino, dir)
	defer unlock()
	t := s.newTxn()
	defer t.close()
	p, err := t.dir(dir)
	if err != nil {
		return Attr{}, err
	}
	a, err := t.attr(ino)
	if err != nil {
		return Attr{}, err
	}
	switch {
	case a.IsDir():
		return Attr{}, ErrPerm
	case p.Nlink == 0:
		return Attr{}, ErrNotFound
	case a.Nlink >= maxLinks:
		return Attr{}, ErrTooManyLinks
	case a.Nlink == 0:
		if v, err := s.get(orphanKey(ino)); err != nil || len(v) != 1 || v[0] != orphanLinkable {
			return Attr{}, ErrNotFound // unlinked: it cannot come back
		}
		t.b.Delete(orphanKey(ino), nil)
		defer delete(s.orphans, ino) // linked; a failed commit leaves a harmless entry
	}
	if err := s.checkAbsent(dir, name); err != nil {
		return Attr{}, err
	}
	ts := now()
	a.Nlink++
	a.Ctime = ts
	p.Mtime, p.Ctime = ts, ts
	t.touch(ino)
	t.touch(dir)
	t.b.Set(direntKey(dir, name), encodeDirent(ino, a.Mode), nil)
	t.b.Set(backrefKey(ino, dir, name), nil, nil)
	s.account(t.b, nameBytes(name))
	rec := &Record{Op: JLink, Ino: ino, where: func() (string, string) { return s.entryPath(dir, name), "" }}
	if err := t.commitRecord(rec, actor); err != nil {
		return Attr{}, err
	}
	return *a, nil
}

// Unlink removes the name of a non-directory.
func (s *Store) Unlink(dir uint64, name string) error {
	s.enter()
	defer s.leave()
	return s.remove(nil, dir, name, false)
}

// Rmdir removes an empty directory.
func (s *Store) Rmdir(dir uint64, name string) error {
	s.enter()
	defer s.leave()
	return s.remove(nil, dir, name, true)
}

func (s *Store) remove(actor *Actor, dir uint64, name string, isDir bool) error {
	if name == "." {
		return ErrInvalid
	}
	if name == ".." {
		return ErrNotEmpty
	}
	if len(name) > MaxNameLen {
		return ErrNameTooLong
	}
	s.nsMu.Lock()
	defer s.nsMu.Unlock()
	// Namespace operations may take stripe locks one by one: they are
	// serialised by nsMu, and data operations hold one stripe at a time.
	unlockDir := s.lockInodes(dir)
	defer unlockDir()
	t := s.newTxn()
	defer t.close()
	p, err := t.dir(dir)
	if err != nil {
		return err
	}
	ino, typ, err := s.LookupIno(dir, name)
	if err != nil {
		return err
	}
	if s.stripe(ino) != s.stripe(dir) {
		unlockIno := s.lockInodes(ino)
		defer unlockIno()
	}
	if isDir && typ != S_IFDIR {
		return ErrNotDir
	}
	if !isDir && typ == S_IFDIR {
		return ErrIsDir
	}
	if isDir {
		if empty, err := s.isEmptyDir(ino); err != nil {
			return err
		} else if !empty {
			return ErrNotEmpty
		}
	}
	ts := now()
	p.Mtime, p.Ctime = ts, ts
	t.touch(dir)
	t.b.Delete(direntKey(dir, name), nil)
	t.b.Delete(backrefKey(ino, dir, name), nil)
	s.account(t.b, -nameBytes(name))
	if err := s.dropLink(t, ino, ts); err != nil {
		return err
	}
	if isDir {
		p.Nlink--
	}
	op := JUnlink
	if isDir {
		op = JRmdir
	}
	return t.commitRecord(&Record{Op: op, Ino: ino, where: func() (string, string) { return s.entryPath(dir, name), "" }}, actor)
}

// dropLink takes one link away from ino (a name of it was removed or
// replaced) and deletes the inode, or keeps it as an orphan while it is in
// use, once it has no name left.
func (s *Store) dropLink(t *txn, ino uint64, ts int64) error {
	a, err := t.attr(ino)
	if err != nil {
		return err
	}
	a.Ctime = ts
	if a.IsDir() || a.Nlink <= 1 {
		a.Nlink = 0
	} else {
		a.Nlink--
	}
	t.touch(ino)
	if a.Nlink > 0 {
		return nil
	}
	if s.isInUse(ino, a.IsDir()) {
		t.b.Set(orphanKey(ino), nil, nil)
		s.orphans[ino] = struct{}{} // a failed commit leaves only a harmless entry
		return nil
	}
	t.forget(ino)
	if a.Flags&FlagBlob != 0 {
		t.blobsGone = append(t.blobsGone, ino)
	}
	return s.deleteInode(t.b, ino, a)
}

// deleteInode removes every key of ino, whose attributes are a (zero if
// unknown). Small inodes get point deletions: range tombstones are cheap to
// write but every later read in their span has to consult them, and
// untar-then-rm workloads would leave thousands. A big file is deleted with
// one range over all its keys. The keys of an inode that never had an
// extended attribute follow from its attributes (deleteKnownKeys); any
// other is scanned for them, which costs a seek in every level of the
// tree. Callers hold nsMu (or run alone).
func (s *Store) deleteInode(b *pebble.Batch, ino uint64, a *Attr) error {
	var usage int64 // of its extended attributes; the inode: accountAttrs
	switch {
	case a.Size > exactBlocksLimit*ChunkSize:
		if a.Flags&FlagNoXattrs == 0 {
			_, x, err := s.inodeXattrs(ino, "")
			if err != nil {
				return err
			}
			usage += x
		}
		b.DeleteRange(inodePrefix(ino), inodeEnd(ino), nil)
	case a.Flags&FlagNoXattrs != 0 && a.Flags&FlagRemote == 0:
		deleteKnownKeys(b, a)
	default:
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: inodePrefix(ino), UpperBound: inodeEnd(ino)})
		if err != nil {
			return err
		}
		for it.First(); it.Valid(); it.Next() {
			if k := it.Key(); len(k) > 10 && k[9] == kindXattr {
				usage += xattrBytes(string(k[10:]), len(it.Value()))
			}
			b.Delete(it.Key(), nil)
		}
		if err := it.Close(); err != nil {
			return err
		}
	}
	s.account(b, -usage)
	n := s.inodes.Add(-1)
	b.Set(keyInodes, u64(uint64(n)), nil)
	return nil
}

// deleteKnownKeys deletes the keys that a local inode without extended
// attributes and without names left can have: its attributes, its origin (a file
// synced back or imported keeps one), a symlink's target, a regular file's
// chunks below its size (writes extend the size in the batch that writes
// past it; truncation deletes what lies beyond). A directory being deleted
// is empty. Deleting a key that is not there costs a tombstone, no read.
func deleteKnownKeys(b *pebble.Batch, a *Attr) {
	b.Delete(attrKey(a.Ino), nil)
	b.Delete(originKey(a.Ino), nil)
	switch {
	case a.Mode&S_IFMT == S_IFLNK:
		b.Delete(linkKey(a.Ino), nil)
	case a.IsRegular() && a.Flags&FlagBlob == 0:
		for c := uint64(0); c < (a.Size+ChunkSize-1)/ChunkSize; c++ {
			b.Delete(chunkKey(a.Ino, c), nil)
		}
	}
}

// Forget is called once nothing outside the store references ino any more:
// an orphan (an inode without names) is deleted now.
func (s *Store) Forget(ino uint64) error {
	s.enter()
	defer s.leave()
	s.nsMu.Lock()
	defer s.nsMu.Unlock()
	if _, ok := s.orphans[ino]; !ok {
		return nil // the common case: nothing to do, nothing to read
	}
	unlock := s.lockInodes(ino) // no write may resurrect what we delete
	defer unlock()
	a, err := s.GetAttr(ino)
	if err != nil || a.Nlink > 0 {
		delete(s.orphans, ino)
		return nil
	}
	b := s.db.NewBatch()
	defer b.Close()
	if err := s.deleteInode(b, ino, &a); err != nil {
		return err
	}
	b.Delete(orphanKey(ino), nil)
	if err := s.commit(b); err != nil {
		return err
	}
	if a.Flags&FlagBlob != 0 {
		s.dropBlob(ino)
	}
	delete(s.orphans, ino)
	return nil
}

// Rename moves oldName in oldDir to newName in newDir, with the semantics of
// renameat2(2) for flags 0, RenameNoReplace and RenameExchange.
func (s *Store) Rename(oldDir uint64, oldName string, newDir uint64, newName string, flags uint32) error {
	s.enter()
	defer s.leave()
	return s.rename(nil, oldDir, oldName, newDir, newName, flags)
}

func (s *Store) rename(actor *Actor, oldDir uint64, oldName string, newDir uint64, newName string, flags uint32) error {
	if flags&^(RenameNoReplace|RenameExchange) != 0 || flags == RenameNoReplace|RenameExchange {
		return ErrInvalid
	}
	if err := checkName(oldName); err != nil {
		return err
	}
	if err := checkName(newName); err != nil {
		return err
	}
	s.nsMu.Lock()
	defer s.nsMu.Unlock()
	if err := s.checkDir(oldDir); err != nil {
		return err
	}
	if err := s.checkDir(newDir); err != nil {
		return err
	}
	src, srcType, err := s.LookupIno(oldDir, oldName)
	if err != nil {
		return err
	}
	dst, dstType, err := s.LookupIno(newDir, newName)
	switch {
	case err == ErrNotFound:
		dst = 0
		if flags&RenameExchange != 0 {
			return ErrNotFound
		}
	case err != nil:
		return err
	case flags&RenameNoReplace != 0:
		return ErrExist
	}
	if src == dst {
		return nil // two names of one inode: POSIX says do nothing
	}
	unlock := s.lockInodes(oldDir, newDir, src, dst)
	defer unlock()
	t := s.newTxn()
	defer t.close()
	op, err := t.dir(oldDir)
	if err != nil {
		return err
	}
	np, err := t.dir(newDir)
	if err != nil {
		return err
	}
	if np.Nlink == 0 {
		return ErrNotFound
	}
	srcDir, dstDir := srcType == S_IFDIR, dst != 0 && dstType == S_IFDIR
	if srcDir || dstDir {
		s.dirMoves.Add(1)       // odd from before the commit (see DirMoves)
		defer s.dirMoves.Add(1) // to after it
	}
	if srcDir && oldDir != newDir && !dstDir && np.Nlink >= maxLinks {
		return ErrTooManyLinks
	}
	if srcDir && oldDir != newDir {
		if err := s.checkNotAncestor(src, newDir); err != nil {
			return err
		}
	}
	if flags&RenameExchange != 0 && dstDir && oldDir != newDir {
		if err := s.checkNotAncestor(dst, oldDir); err != nil {
			return err
		}
	}
	if dst != 0 && flags&RenameExchange == 0 {
		switch {
		case srcDir && !dstDir:
			return ErrNotDir
		case !srcDir && dstDir:
			return ErrIsDir
		case dstDir:
			if empty, err := s.isEmptyDir(dst); err != nil {
				return err
			} else if !empty {
				return ErrNotEmpty
			}
		}
	}
	ts := now()
	sa, err := t.attr(src)
	if err != nil {
		return err
	}
	sa.Ctime = ts
	t.touch(src)
	op.Mtime, op.Ctime, np.Mtime, np.Ctime = ts, ts, ts, ts
	t.touch(oldDir)
	t.touch(newDir)
	t.b.Delete(backrefKey(src, oldDir, oldName), nil)
	t.b.Set(backrefKey(src, newDir, newName), nil, nil)
	t.b.Set(direntKey(newDir, newName), encodeDirent(src, srcType), nil)

	if flags&RenameExchange != 0 {
		da, err := t.attr(dst)
		if err != nil {
			return err
		}
		da.Ctime = ts
		t.touch(dst)
		t.b.Delete(backrefKey(dst, newDir, newName), nil)
		t.b.Set(backrefKey(dst, oldDir, oldName), nil, nil)
		t.b.Set(direntKey(oldDir, oldName), encodeDirent(dst, dstType), nil)
		if srcDir != dstDir && oldDir != newDir {
			gainer := op // the directory that gains a subdirectory
			if srcDir {
				gainer = np
			}
			if gainer.Nlink >= maxLinks {
				return ErrTooManyLinks
			}
			if srcDir { // a directory moved to newDir, a non-directory back
				op.Nlink--
				np.Nlink++
			} else {
				op.Nlink++
				np.Nlink--
			}
		}
		return t.commitRecord(renameRecord(s, src, dst, oldDir, oldName, newDir, newName, srcDir || dstDir), actor)
	}

	t.b.Delete(direntKey(oldDir, oldName), nil)
	s.account(t.b, nameBytes(newName)-nameBytes(oldName)) // a longer name is not refused
	if dst != 0 {
		s.account(t.b, -nameBytes(newName))
		t.b.Delete(backrefKey(dst, newDir, newName), nil)
		if err := s.dropLink(t, dst, ts); err != nil {
			return err
		}
		if dstDir {
			np.Nlink--
		}
	}
	if srcDir && oldDir != newDir {
		op.Nlink--
		np.Nlink++
	}
	return t.commitRecord(renameRecord(s, src, dst, oldDir, oldName, newDir, newName, srcDir || dstDir), actor)
}

func renameRecord(s *Store, ino, replaced, oldDir uint64, oldName string, newDir uint64, newName string, movesDir bool) *Record {
	return &Record{Op: JRename, Ino: ino, replaced: replaced, movesDir: movesDir, where: func() (string, string) {
		return s.entryPath(oldDir, oldName), s.entryPath(newDir, newName)
	}}
}

// checkDir fails with ErrNotDir if ino is not a directory. The type of an
// inode never changes, so this needs no lock.
func (s *Store) checkDir(ino uint64) error {
	a, err := s.GetAttr(ino)
	if err != nil {
		return err
	}
	if !a.IsDir() {
		return ErrNotDir
	}
	return nil
}

// checkNotAncestor fails with ErrInvalid if dir is inside (or is) ancestor:
// a directory cannot be moved into its own subtree.
func (s *Store) checkNotAncestor(ancestor, dir uint64) error {
	for d := dir; ; {
		if d == ancestor {
			return ErrInvalid
		}
		if d == RootIno {
			return nil
		}
		p, err := s.Parent(d)
		if err != nil {
			return err
		}
		d = p
	}
}
