package kv

// Session is the store seen by one actor: its changes are journaled as
// that actor's. The FUSE server makes one per request from the caller's
// pid, uid and gid; code in the daemon makes one per entry point and
// request. A Session is a small value; make them freely.
type Session struct {
	s *Store
	a *Actor
}

// As returns a session whose changes are journaled as a's.
func (s *Store) As(a *Actor) Session { return Session{s: s, a: a} }

// Store returns the session's store (for reads and the rest).
func (x Session) Store() *Store { return x.s }

// Create is Store.Create, journaled as the session's actor.
func (x Session) Create(dir uint64, name string, n NewInode) (Attr, error) {
	x.s.enter()
	defer x.s.leave()
	return x.s.create(x.a, dir, name, n)
}

// CreateTmpfile is Store.CreateTmpfile for the session's actor.
func (x Session) CreateTmpfile(dir uint64, n NewInode) (Attr, error) {
	x.s.enter()
	defer x.s.leave()
	return x.s.createTmpfile(x.a, dir, n)
}

// Link is Store.Link for the session's actor.
func (x Session) Link(ino, dir uint64, name string) (Attr, error) {
	x.s.enter()
	defer x.s.leave()
	return x.s.link(x.a, ino, dir, name)
}

// Unlink is Store.Unlink for the session's actor.
func (x Session) Unlink(dir uint64, name string) error {
	x.s.enter()
	defer x.s.leave()
	return x.s.remove(x.a, dir, name, false)
}

// Rmdir is Store.Rmdir for the session's actor.
func (x Session) Rmdir(dir uint64, name string) error {
	x.s.enter()
	defer x.s.leave()
	return x.s.remove(x.a, dir, name, true)
}

// Rename is Store.Rename for the session's actor.
func (x Session) Rename(oldDir uint64, oldName string, newDir uint64, newName string, flags uint32) error {
	x.s.enter()
	defer x.s.leave()
	return x.s.rename(x.a, oldDir, oldName, newDir, newName, flags)
}

// Write is Store.Write for the session's actor.
func (x Session) Write(ino uint64, off int64, data []byte) (Attr, error) {
	x.s.enter()
	defer x.s.leave()
	a, _, err := x.s.write(x.a, ino, off, data, nil)
	return a, err
}

// WriteKillPriv is Store.WriteKillPriv for the session's actor.
func (x Session) WriteKillPriv(ino uint64, off int64, data []byte, inGroup func(gid uint32) bool) (Attr, bool, error) {
	x.s.enter()
	defer x.s.leave()
	return x.s.write(x.a, ino, off, data, inGroup)
}

// SetContent is Store.SetContent for the session's actor.
func (x Session) SetContent(ino uint64, data []byte) (Attr, error) {
	x.s.enter()
	defer x.s.leave()
	return x.s.setContent(x.a, ino, data)
}

// SetAttr is Store.SetAttr for the session's actor.
func (x Session) SetAttr(ino uint64, req SetAttrRequest) (Attr, error) {
	x.s.enter()
	defer x.s.leave()
	return x.s.setAttr(x.a, ino, req)
}

// Fallocate is Store.Fallocate for the session's actor.
func (x Session) Fallocate(ino uint64, mode uint32, off, length int64) (Attr, error) {
	x.s.enter()
	defer x.s.leave()
	return x.s.fallocate(x.a, ino, mode, off, length)
}

// SetXattr is Store.SetXattr for the session's actor.
func (x Session) SetXattr(ino uint64, name string, value []byte, flags uint32) error {
	x.s.enter()
	defer x.s.leave()
	return x.s.setXattr(x.a, ino, name, value, flags)
}

// RemoveXattr is Store.RemoveXattr for the session's actor.
func (x Session) RemoveXattr(ino uint64, name string) error {
	x.s.enter()
	defer x.s.leave()
	return x.s.removeXattr(x.a, ino, name)
}

// ReplaceRemote is Store.ReplaceRemote for the session's actor.
func (x Session) ReplaceRemote(ino uint64, size uint64, mtime int64, o Origin) (Attr, error) {
	x.s.enter()
	defer x.s.leave()
	return x.s.replaceRemote(x.a, ino, size, mtime, o)
}

// CopyRange is Store.CopyRange for the session's actor; with kill (the
// caller is not privileged) it clears setuid, setgid and capabilities of
// dst as a write does, and reports whether the mode changed.
func (x Session) CopyRange(src uint64, srcOff int64, dst uint64, dstOff int64, n int64, kill func(gid uint32) bool) (int64, bool, error) {
	x.s.enter()
	defer x.s.leave()
	return x.s.copyRange(x.a, src, srcOff, dst, dstOff, n, kill)
}

// UnpinBlob is Store.UnpinBlob; what the kernel wrote is journaled as the
// session's actor's.
func (x Session) UnpinBlob(ino uint64, write bool) error {
	x.s.enter()
	defer x.s.leave()
	return x.s.unpinBlob(x.a, ino, write)
}

// SyncPinned is Store.SyncPinned for the session's actor.
func (x Session) SyncPinned(ino uint64) error {
	x.s.enter()
	defer x.s.leave()
	return x.s.syncPinned(x.a, ino)
}
