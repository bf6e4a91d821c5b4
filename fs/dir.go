package fs

import (
	"github.com/computerfs/computerfs/kv"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// OpenDir implements OPENDIR.
func (f *FS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	a, err := f.store.GetAttr(in.NodeId)
	if err != nil {
		return f.status("opendir", err)
	}
	if !a.IsDir() {
		return fuse.ENOTDIR
	}
	out.Fh = f.newHandle(in.NodeId, in.Flags)
	return fuse.OK
}

// ReleaseDir implements RELEASEDIR.
func (f *FS) ReleaseDir(in *fuse.ReleaseIn) { f.dropHandle(in.Fh) }

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
// 1 is ".", 2 is "..", then the entries in name order. The handle remembers
// the name at its current position, so a sequential reader resumes with a
// seek in the store; an offset the handle does not know (seekdir to an
// earlier place) restarts the scan and skips ahead.
func (f *FS) readDir(in *fuse.ReadIn, out *fuse.DirEntryList, plus bool) fuse.Status {
	h := f.handle(in.Fh)
	if h == nil {
		return fuse.EBADF
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	off := in.Offset
	if off == 0 {
		if a, err := f.store.GetAttr(h.ino); err == nil && kv.NeedsAtime(&a) {
			if err := f.store.TouchAtime(h.ino); err != nil {
				return f.status("readdir", err)
			}
		}
	}
	add := func(name string, ino uint64, mode uint32, next uint64) bool {
		e := fuse.DirEntry{Name: name, Ino: ino, Mode: mode, Off: next}
		if !plus {
			return out.AddDirEntry(e)
		}
		eo := out.AddDirLookupEntry(e)
		if eo == nil {
			return false
		}
		if name == "." || name == ".." {
			return true // no lookup for these
		}
		a, err := f.store.GetAttr(ino)
		if err != nil {
			return true // raced with a removal: leave the entry without attributes
		}
		f.fillEntry(&a, eo)
		return true
	}
	if off < 1 {
		if !add(".", h.ino, kv.S_IFDIR, 1) {
			return fuse.OK
		}
		off = 1
	}
	if off < 2 {
		parent, err := f.store.Parent(h.ino)
		if err != nil {
			parent = h.ino
		}
		if !add("..", parent, kv.S_IFDIR, 2) {
			return fuse.OK
		}
		off = 2
	}
	after := ""
	skip := uint64(0)
	if off == h.nextOff && off > 2 {
		after = h.lastName
	} else if off > 2 {
		skip = off - 2 // unknown position: count entries from the start
	}
	var err error
	err = f.store.ReadDir(h.ino, after, func(d kv.Dirent) bool {
		if skip > 0 {
			skip--
			return true
		}
		if !add(d.Name, d.Ino, d.Type, off+1) {
			return false
		}
		off++
		h.nextOff, h.lastName = off, d.Name
		return true
	})
	return f.status("readdir", err)
}
