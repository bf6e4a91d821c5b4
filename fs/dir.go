package fs

import (
	"syscall"

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
	out.Fh = f.newHandle(in.NodeId, syscall.O_RDONLY)
	// Let the kernel cache the listing: it drops the cache itself when the
	// directory changes through the mount (other paths into the store must
	// notify it). Unless the access time is due: then the first READDIR
	// must reach us, as for files.
	if !kv.NeedsAtime(&a) {
		out.OpenFlags = fuse.FOPEN_CACHE_DIR | fuse.FOPEN_KEEP_CACHE
	} else {
		out.OpenFlags = fuse.FOPEN_CACHE_DIR
	}
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
// 1 is ".", 2 is "..", then the entries in name order. The handle keeps the
// names of its last reply, so a reader that resumes at any of them continues
// with a seek in the store, whatever was added or removed meanwhile. Only
// an offset from further back (seekdir to an older telldir) restarts the
// scan and counts entries, which is exact only if nothing changed.
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
	after, skip := "", uint64(0)
	if off > 2 {
		skip = off - 2
		for _, e := range h.lastBatch {
			if e.off == off {
				after, skip = e.name, 0
				break
			}
		}
	}
	h.lastBatch = h.lastBatch[:0]
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
			if name != "." && name != ".." {
				// An entry removed since the scan saw it keeps no attributes.
				if a, err := f.store.GetAttr(ino); err == nil {
					f.fillEntry(&a, eo)
				}
			}
		}
		h.lastBatch = append(h.lastBatch, batchEntry{next, name})
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
	err := f.store.ReadDir(h.ino, after, func(d kv.Dirent) bool {
		if skip > 0 {
			skip--
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
