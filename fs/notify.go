package fs

import "github.com/hanwen/go-fuse/v2/fuse"

// Notifier tells the kernel of changes made to the store by anything but
// the mount itself (the daemon's own writers: refresh, the shell fast
// path, the agent tools), so that the mount never shows what its caches
// kept from before. Its methods satisfy wsfs.Notifier. Errors are
// ignored: the kernel answers ENOENT for inodes it does not hold.
type Notifier struct{ srv *fuse.Server }

// NewNotifier returns the notifier for a mounted server.
func NewNotifier(srv *fuse.Server) *Notifier { return &Notifier{srv: srv} }

// Changed drops the kernel's attributes and cached pages of ino (for a
// directory, its cached listing too).
func (n *Notifier) Changed(ino uint64) { n.srv.InodeNotify(ino, 0, 0) }

// EntryChanged drops the kernel's lookup of name in dir.
func (n *Notifier) EntryChanged(dir uint64, name string) { n.srv.EntryNotify(dir, name) }
