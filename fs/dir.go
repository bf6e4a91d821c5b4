package fs

import (
	"sync"

	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/policy"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// OpenDir implements OPENDIR by declining it. ENOSYS tells the kernel
// that directories need no opening: it stops sending OPENDIR and
// RELEASEDIR for good, and treats every directory as opened with
// FOPEN_CACHE_DIR|FOPEN_KEEP_CACHE, so a listing it already holds is
// listed again without any request. That holds for as long as the listing
// stays valid: the kernel drops it itself when the directory changes
// through the mount (its mtime or change counter moves), and the daemon's
// other writers tell it (Notifier.Changed). READDIR then comes without a
// handle; dirCursors keeps what a handle kept.
//
// With deny rules the listing is not the same for every caller (the
// agent does not see denied names, root does), so directories are
// opened, without the kernel's listing cache: every listing is asked of
// the daemon, by its caller.
func (f *FS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	if f.rules().HasDeny() {
		if err := f.checkIno(&in.InHeader, in.NodeId, false); err != nil {
			return f.status("opendir", err)
		}
		return fuse.OK
	}
	return fuse.ENOSYS
}

// FsyncDir implements FSYNCDIR.
func (f *FS) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	return f.status("fsyncdir", f.store.Sync())
}

// ReadDir implements READDIR.
func (f *FS) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return f.readDir(in, out, false)
}

// ReadDirPlus implements READDIRPLUS: entries with their attributes, each
// a lookup the kernel will later forget.
func (f *FS) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return f.readDir(in, out, true)
}

// readDir streams a directory. Entry offsets are positions in the stream:
// 1 is ".", 2 is "..", then the entries in name order. The names of the
// directory's last few replies are kept (dirCursors), so a reader that
// resumes at any of them continues with a seek in the store, whatever was
// added or removed meanwhile. Only an offset that is no longer known
// (seekdir to an old telldir, or more readers of one directory at once than
// the cursors keep) restarts the scan and counts entries, which is exact
// only if nothing changed.
func (f *FS) readDir(in *fuse.ReadIn, out *fuse.DirEntryList, plus bool) fuse.Status {
	ino := in.NodeId
	off := in.Offset
	if err := f.checkIno(&in.InHeader, ino, false); err != nil {
		return f.status("readdir", err)
	}
	// With deny rules, the agent's listing leaves denied names out (its
	// offsets are still those of the whole listing, so that the cursors
	// serve both), and READDIRPLUS gives root no entry of a denied name
	// (a dentry the kernel would keep): the agent's lookups of it must
	// reach LOOKUP.
	dirPath := ""
	hide := false
	if f.rules().HasDeny() && (plus || f.bound(&in.InHeader)) {
		var err error
		if dirPath, err = f.rules().DirPath(f.store, ino); err != nil {
			return f.status("readdir", err)
		}
		hide = f.bound(&in.InHeader)
	}
	if off == 0 {
		if a, err := f.store.GetAttr(ino); err == nil && kv.NeedsAtime(&a) {
			if err := f.store.TouchAtime(ino); err != nil {
				return f.status("readdir", err)
			}
		}
	}
	after, skip := "", uint64(0)
	if off > 2 {
		skip = off - 2
		if name, ok := f.cursors.find(ino, off); ok {
			after, skip = name, 0
		}
	}
	var batch []batchEntry
	add := func(name string, ino uint64, mode uint32, next uint64) bool {
		e := fuse.DirEntry{Name: name, Ino: ino, Mode: mode, Off: next}
		if !plus {
			if !out.AddDirEntry(e) {
				return false
			}
		} else {
			eo := out.AddDirLookupEntry(e)
			if eo == nil {
				return false
			}
			if name != "." && name != ".." && (dirPath == "" || f.rules().Denied(policy.Join(dirPath, name)) == nil) {
				// An entry removed since the scan saw it keeps no attributes.
				if a, err := f.store.GetAttr(ino); err == nil {
					f.fillEntry(&a, eo)
				}
			}
		}
		batch = append(batch, batchEntry{next, name})
		return true
	}
	defer func() { f.cursors.keep(ino, batch) }()
	if off < 1 {
		if !add(".", ino, kv.S_IFDIR, 1) {
			return fuse.OK
		}
		off = 1
	}
	if off < 2 {
		parent, err := f.store.Parent(ino)
		if err != nil {
			parent = ino
		}
		if !add("..", parent, kv.S_IFDIR, 2) {
			return fuse.OK
		}
		off = 2
	}
	err := f.store.ReadDir(ino, after, func(d kv.Dirent) bool {
		if skip > 0 {
			skip--
			return true
		}
		if hide && f.rules().Denied(policy.Join(dirPath, d.Name)) != nil {
			off++
			return true
		}
		if !add(d.Name, d.Ino, d.Type, off+1) {
			return false
		}
		off++
		return true
	})
	return f.status("readdir", err)
}

// dirCursors remembers the entries of recent READDIR replies per directory:
// the offset the kernel continues from is one of them, and its name is
// where the store's scan resumes. A directory keeps its last cursorBatches
// replies (more than one, for several readers at once); a reply that ends
// the listing forgets the directory, and at most maxCursorDirs directories
// are kept (readers that stop halfway leave theirs behind).
type dirCursors struct {
	mu   sync.Mutex
	dirs map[uint64]*dirCursor
}

// dirCursor is one directory's recent replies, next the one to replace.
type dirCursor struct {
	batches [cursorBatches][]batchEntry
	next    int
}

const (
	cursorBatches = 4
	maxCursorDirs = 256
)

type batchEntry struct {
	off  uint64
	name string
}

// find returns the name of the entry at offset off of directory ino.
func (c *dirCursors) find(ino, off uint64) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.dirs[ino]
	if d == nil {
		return "", false
	}
	for _, b := range d.batches {
		if len(b) > 0 && b[0].off <= off && off <= b[len(b)-1].off {
			for _, e := range b {
				if e.off == off {
					return e.name, true
				}
			}
		}
	}
	return "", false
}

// keep records a reply; an empty one (the end of the listing) forgets ino.
func (c *dirCursors) keep(ino uint64, batch []batchEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(batch) == 0 {
		delete(c.dirs, ino)
		return
	}
	if c.dirs == nil {
		c.dirs = make(map[uint64]*dirCursor)
	}
	d := c.dirs[ino]
	if d == nil {
		for victim := range c.dirs {
			if len(c.dirs) < maxCursorDirs {
				break
			}
			delete(c.dirs, victim)
		}
		d = new(dirCursor)
		c.dirs[ino] = d
	}
	d.batches[d.next] = batch
	d.next = (d.next + 1) % cursorBatches
}
