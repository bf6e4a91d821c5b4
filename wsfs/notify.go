package wsfs

import (
	"syscall"

	"github.com/computerfs/computerfs/kv"
)

// A Notifier hears of every change made through an FS, so that a cache of
// the workspace (the kernel's, for the FUSE mount) drops what the change
// outdated. Its methods are called after the change, with no locks held.
type Notifier interface {
	// Changed: the data or attributes of ino changed.
	Changed(ino uint64)
	// EntryChanged: name in dir was added, removed or replaced.
	EntryChanged(dir uint64, name string)
}

// SetNotifier makes n hear of the changes made through f from now on.
func (f *FS) SetNotifier(n Notifier) { f.notify = n }

func (f *FS) changed(ino uint64) {
	if f.notify != nil {
		f.notify.Changed(ino)
	}
}

func (f *FS) entryChanged(dir uint64, name string) {
	if f.notify != nil {
		f.notify.EntryChanged(dir, name)
		f.notify.Changed(dir)
	}
}

// The store's operations, each followed by its notification.

func (f *FS) kvCreate(dir uint64, name string, n kv.NewInode) (kv.Attr, error) {
	if err := f.mayWrite(dir); err != nil {
		return kv.Attr{}, err
	}
	if err := f.guardEntry(dir, name); err != nil {
		return kv.Attr{}, err
	}
	a, err := f.ses().Create(dir, name, n)
	if err == nil {
		f.entryChanged(dir, name)
	}
	return a, err
}

func (f *FS) kvUnlink(dir uint64, name string) error {
	if err := f.mayWrite(dir); err != nil {
		return err
	}
	if err := f.mayRemove(dir, name); err != nil {
		return err
	}
	if err := f.guardUnlink(dir, name); err != nil {
		return err
	}
	err := f.ses().Unlink(dir, name)
	if err == nil {
		f.entryChanged(dir, name)
	}
	return err
}

func (f *FS) kvRmdir(dir uint64, name string) error {
	if err := f.mayWrite(dir); err != nil {
		return err
	}
	if err := f.mayRemove(dir, name); err != nil {
		return err
	}
	if err := f.guardEntry(dir, name); err != nil {
		return err
	}
	err := f.ses().Rmdir(dir, name)
	if err == nil {
		f.entryChanged(dir, name)
	}
	return err
}

func (f *FS) kvRename(oldDir uint64, oldName string, newDir uint64, newName string) error {
	if err := f.mayWrite(oldDir); err != nil {
		return err
	}
	if err := f.mayWrite(newDir); err != nil {
		return err
	}
	if err := f.mayRemove(oldDir, oldName); err != nil {
		return err
	}
	if err := f.mayRemove(newDir, newName); err != nil {
		return err
	}
	if err := f.guardRename(oldDir, oldName, newDir, newName); err != nil {
		return err
	}
	err := f.ses().Rename(oldDir, oldName, newDir, newName, 0)
	if err == nil {
		f.entryChanged(oldDir, oldName)
		f.entryChanged(newDir, newName)
	}
	return err
}

func (f *FS) kvLink(ino, dir uint64, name string) error {
	if err := f.mayWrite(dir); err != nil {
		return err
	}
	if err := f.guardIno(ino, true); err != nil { // no denied or read-only file gets another name
		return err
	}
	if err := f.guardEntry(dir, name); err != nil {
		return err
	}
	_, err := f.ses().Link(ino, dir, name)
	if err == nil {
		f.changed(ino)
		f.entryChanged(dir, name)
	}
	return err
}

func (f *FS) kvSetAttr(ino uint64, req kv.SetAttrRequest) (kv.Attr, error) {
	if err := f.maySetAttr(ino, req); err != nil {
		return kv.Attr{}, err
	}
	if err := f.guardIno(ino, true); err != nil {
		return kv.Attr{}, err
	}
	a, err := f.ses().SetAttr(ino, req)
	if err == nil {
		f.changed(ino)
	}
	return a, err
}

func (f *FS) kvWrite(ino uint64, off int64, p []byte) error {
	_, err := f.ses().Write(ino, off, p)
	if err == nil {
		f.changed(ino)
	}
	return err
}

func (f *FS) kvSetContent(ino uint64, data []byte) (kv.Attr, error) {
	if err := f.mayWrite(ino); err != nil {
		return kv.Attr{}, err
	}
	if err := f.guardIno(ino, true); err != nil {
		return kv.Attr{}, err
	}
	a, err := f.ses().SetContent(ino, data)
	if err == nil {
		f.changed(ino)
	}
	return a, err
}

// As returns the workspace for another actor: the same store, owner and
// notifier, with changes journaled as a's.
func (f *FS) As(a kv.Actor) *FS {
	return &FS{s: f.s, owner: f.owner, umask: f.umask, locks: f.locks, notify: f.notify, actor: &a, prefix: f.prefix, agent: f.agent, guard: f.guard}
}

// ForAgent returns the workspace as the agent uses it (the shell fast
// path, the tools): the same store, owner, notifier and actor, except
// that what is not the owner's (the operator's files, imports given to
// another owner) is changed only as the kernel would let the owner, a
// user without privileges: written, or its directory entries changed,
// if its mode lets the owner's group or others write; its mode, times
// and owner never. A file that is the owner's can only go to the owner's
// group.
func (f *FS) ForAgent() *FS {
	g := f.As(*f.actor)
	g.agent = true
	return g
}

// Session is the store as the FS's actor, for changes wsfs has no call
// for.
func (f *FS) Session() kv.Session { return f.ses() }

func (f *FS) ses() kv.Session { return f.s.As(f.actor) }

// Notifier returns the notifier SetNotifier installed, or nil.
func (f *FS) Notifier() Notifier { return f.notify }

// mayWrite says whether the agent may change the content or the entries
// of ino (nil for an FS that is not ForAgent, or a file of the owner's).
func (f *FS) mayWrite(ino uint64) error {
	if !f.agent {
		return nil
	}
	a, err := f.s.GetAttr(ino)
	if err != nil {
		return err
	}
	return f.mayWriteAttr(&a)
}

func (f *FS) mayWriteAttr(a *kv.Attr) error {
	switch {
	case !f.agent || a.Uid == f.owner.UID:
		return nil
	case a.Gid == f.owner.GID && a.Mode&0o020 != 0, a.Gid != f.owner.GID && a.Mode&0o002 != 0:
		return nil
	}
	return syscall.EACCES
}

// mayRemove says whether the agent may remove or replace the entry name
// of dir, which it may write: in a sticky directory (the operator's
// 1777 one) only an entry of its own, as the kernel decides.
func (f *FS) mayRemove(dir uint64, name string) error {
	if !f.agent {
		return nil
	}
	d, err := f.s.GetAttr(dir)
	if err != nil || d.Mode&kv.S_ISVTX == 0 || d.Uid == f.owner.UID {
		return err
	}
	a, err := f.s.Lookup(dir, name)
	if err != nil || a.Uid == f.owner.UID {
		return nil // missing: the operation itself says so
	}
	return syscall.EPERM
}

// mayReadAttr says whether the agent may read the file (or list the
// directory) a describes, and maySearch whether it may look names up in
// the directory dir: as the kernel would let the owner, by the group's
// or the others' bits when the file is not the owner's. Without them the
// fast path and the tools read what the agent's programs on the mount
// cannot: the operator's 0600 file, the inside of its 0700 directory.
// What is the owner's is read as before (the owner may chmod it anyway).
func (f *FS) mayReadAttr(a *kv.Attr) error { return f.mayAccess(a, 0o4) }

func (f *FS) maySearch(dir uint64) error {
	if !f.agent {
		return nil
	}
	a, err := f.s.GetAttr(dir)
	if err != nil {
		return err
	}
	return f.mayAccess(&a, 0o1)
}

// mayAccess checks the permission bits want (4 read, 1 search) for the
// agent, not the owner's files.
func (f *FS) mayAccess(a *kv.Attr, want uint32) error {
	switch {
	case !f.agent || a.Uid == f.owner.UID:
		return nil
	case a.Gid == f.owner.GID && a.Mode>>3&want == want, a.Gid != f.owner.GID && a.Mode&want == want:
		return nil
	}
	return syscall.EACCES
}

// maySetAttr says whether the agent may make the change req to ino.
func (f *FS) maySetAttr(ino uint64, req kv.SetAttrRequest) error {
	if !f.agent {
		return nil
	}
	a, err := f.s.GetAttr(ino)
	if err != nil {
		return err
	}
	if req.Valid&(kv.SetUid|kv.SetGid) != 0 {
		uid, gid := a.Uid, a.Gid
		if req.Valid&kv.SetUid != 0 {
			uid = req.Uid
		}
		if req.Valid&kv.SetGid != 0 {
			gid = req.Gid
		}
		same := uid == a.Uid && gid == a.Gid
		mine := a.Uid == f.owner.UID && uid == a.Uid && (gid == a.Gid || gid == f.owner.GID)
		if !same && !mine {
			return syscall.EPERM
		}
	}
	if a.Uid == f.owner.UID {
		return nil
	}
	if req.Valid&(kv.SetMode|kv.SetAtime|kv.SetMtime|kv.SetCtime) != 0 {
		return syscall.EPERM // the owner's alone
	}
	if req.Valid&(kv.SetSize|kv.SetAtimeNow|kv.SetMtimeNow) != 0 {
		return f.mayWriteAttr(&a)
	}
	return nil
}
