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
	a, err := f.ses().Create(dir, name, n)
	if err == nil {
		f.entryChanged(dir, name)
	}
	return a, err
}

func (f *FS) kvUnlink(dir uint64, name string) error {
	err := f.ses().Unlink(dir, name)
	if err == nil {
		f.entryChanged(dir, name)
	}
	return err
}

func (f *FS) kvRmdir(dir uint64, name string) error {
	err := f.ses().Rmdir(dir, name)
	if err == nil {
		f.entryChanged(dir, name)
	}
	return err
}

func (f *FS) kvRename(oldDir uint64, oldName string, newDir uint64, newName string) error {
	err := f.ses().Rename(oldDir, oldName, newDir, newName, 0)
	if err == nil {
		f.entryChanged(oldDir, oldName)
		f.entryChanged(newDir, newName)
	}
	return err
}

func (f *FS) kvLink(ino, dir uint64, name string) error {
	_, err := f.ses().Link(ino, dir, name)
	if err == nil {
		f.changed(ino)
		f.entryChanged(dir, name)
	}
	return err
}

func (f *FS) kvSetAttr(ino uint64, req kv.SetAttrRequest) (kv.Attr, error) {
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
	a, err := f.ses().SetContent(ino, data)
	if err == nil {
		f.changed(ino)
	}
	return a, err
}

// As returns the workspace for another actor: the same store, owner and
// notifier, with changes journaled as a's.
func (f *FS) As(a kv.Actor) *FS {
	return &FS{s: f.s, owner: f.owner, umask: f.umask, locks: f.locks, notify: f.notify, actor: &a, prefix: f.prefix, agent: f.agent}
}

// ForAgent returns the workspace as the agent uses it (the shell fast
// path, the tools): the same store, owner, notifier and actor, except
// that ownership changes are the owner's as the kernel allows them to a
// user without privileges: a file that is not the owner's keeps its owner
// and group, and one that is can only go to the owner's group.
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
