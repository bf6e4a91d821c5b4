package wsfs

import "github.com/computerfs/computerfs/kv"

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
	return &FS{s: f.s, owner: f.owner, umask: f.umask, locks: f.locks, notify: f.notify, actor: &a, prefix: f.prefix, guard: f.guard}
}

// Session is the store as the FS's actor, for changes wsfs has no call
// for.
func (f *FS) Session() kv.Session { return f.ses() }

func (f *FS) ses() kv.Session { return f.s.As(f.actor) }

// Notifier returns the notifier SetNotifier installed, or nil.
func (f *FS) Notifier() Notifier { return f.notify }
