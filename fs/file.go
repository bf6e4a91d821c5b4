package fs

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/computerfs/computerfs/kv"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// newHandle opens a handle on ino. A write-only handle (flags' access
// mode O_WRONLY) is told to the kernel with FOPEN_NOFLUSH (see openFlags):
// its writes reach the operating system before they are answered instead
// of at close.
func (f *FS) newHandle(ino uint64, flags uint32, pid uint32) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextFh++
	f.handles[f.nextFh] = &handle{ino: ino, flushEach: noFlush(flags), pid: pid}
	f.opens[ino]++
	return f.nextFh
}

func (f *FS) handle(fh uint64) *handle {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.handles[fh]
}

func (f *FS) dropHandle(fh uint64) {
	f.mu.Lock()
	h := f.handles[fh]
	if h == nil {
		f.mu.Unlock()
		return
	}
	delete(f.handles, fh)
	last := false
	if f.opens[h.ino]--; f.opens[h.ino] <= 0 {
		delete(f.opens, h.ino)
		last = true
	}
	f.mu.Unlock()
	h.mu.Lock()
	dirty := h.dirty
	h.mu.Unlock()
	if dirty && f.written != nil {
		f.dirtyMu.Lock()
		f.dirtyInos[h.ino] = true
		f.dirtyMu.Unlock()
	}
	if last && f.written != nil {
		f.dirtyMu.Lock()
		was := f.dirtyInos[h.ino]
		delete(f.dirtyInos, h.ino)
		f.dirtyMu.Unlock()
		if was {
			f.written(h.ino)
		}
	}
}

// openFlags chooses the kernel caching for an open of a file with
// attributes a (nil for a file just created).
//
// close(2) of a file sends FLUSH, a round trip that makes what was written
// reach the operating system before close returns (the durability promise
// for closed files), unless the open said FOPEN_NOFLUSH. A read-only handle
// has nothing to flush. A write-only one cannot be mapped with PROT_WRITE,
// so every byte written through it arrives as a WRITE request, and Write
// flushes each before answering it (handle.flushEach): its close needs no
// round trip. That saves one of the five round trips of `touch`, and one
// per file of untar and cp. A read-write handle keeps FLUSH: its close
// also writes back the pages of a shared writable mapping.
func openFlags(a *kv.Attr, flags uint32) uint32 {
	var out uint32 = fuse.FOPEN_KEEP_CACHE
	if flags&syscall.O_ACCMODE != syscall.O_WRONLY && a != nil && kv.NeedsAtime(a) {
		// The first read must reach us to update the access time.
		out = 0
	}
	if flags&syscall.O_ACCMODE == syscall.O_RDONLY || noFlush(flags) {
		out |= fuse.FOPEN_NOFLUSH
	}
	return out
}

// noFlush tells whether a handle that may write, opened with flags, does
// without FLUSH at close and flushes each write instead: write-only, and not
// truncating. Flushing a write before answering it costs little for the
// small files that touch, tar and shell appends write, but makes the
// writer wait for each block to reach the log: for a big file written in
// 1 MiB requests that waits longer than one FLUSH at close. Programs that
// (re)write whole, possibly big, files open them with O_TRUNC (dd, cp over
// an existing file, shell redirections), so those keep FLUSH.
func noFlush(flags uint32) bool {
	return flags&syscall.O_ACCMODE == syscall.O_WRONLY && flags&syscall.O_TRUNC == 0
}

// Open implements OPEN.
func (f *FS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	f.rollMu.RLock()
	defer f.rollMu.RUnlock()
	if f.ptStaleOpen(in.NodeId) {
		f.log.Warn("fuse: open refused: the file is still open for passthrough from before a rollback", "ino", in.NodeId)
		return fuse.EIO
	}
	a, err := f.store.GetAttr(in.NodeId)
	if err != nil {
		return f.status("open", err)
	}
	if err := f.checkAttr(&in.InHeader, &a, openWrites(in.Flags)); err != nil {
		return f.status("open", err)
	}
	if a.IsDir() {
		return fuse.EISDIR
	}
	if a.Flags&kv.FlagBlob != 0 {
		// A lazily resumed workspace's blob may still be on its way:
		// waited for here, interruptible, before any lock is taken.
		if err := f.store.FetchBlob(in.NodeId, cancel); err != nil {
			return f.status("open", err)
		}
	}
	if in.Flags&syscall.O_TRUNC != 0 && in.Flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		req := kv.SetAttrRequest{Valid: kv.SetSize}
		if in.Mode&fuse.OPEN_KILL_SUIDGID != 0 {
			req.Valid |= kv.SetKillPriv
			req.InGroup = inGroup(&in.Caller)
		}
		mode := a.Mode
		if a, err = f.as(&in.InHeader).SetAttr(in.NodeId, req); err != nil {
			return f.status("open", err)
		}
		if a.Mode != mode {
			f.invalidateAttr(in.NodeId)
		}
	}
	defer f.ptLock(in.NodeId)()
	if f.openPassthrough(&in.InHeader, &a, in.Flags, out) {
		return fuse.OK
	}
	out.Fh = f.newHandle(in.NodeId, in.Flags, in.Pid)
	out.OpenFlags = openFlags(&a, in.Flags)
	return fuse.OK
}

// Create implements CREATE: a new regular file, opened.
func (f *FS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	f.rollMu.RLock()
	defer f.rollMu.RUnlock()
	mode := in.Mode&^kv.S_IFMT | kv.S_IFREG
	if err := f.checkEntry(&in.InHeader, in.NodeId, name); err != nil {
		return f.status("create", err)
	}
	a, err := f.as(&in.InHeader).Create(in.NodeId, name, kv.NewInode{Mode: mode, Uid: in.Uid, Gid: in.Gid})
	if err != nil {
		return f.status("create", err)
	}
	f.fillEntry(&a, &out.EntryOut)
	if f.ptCreates && in.Flags&syscall.O_TRUNC != 0 {
		// Written whole, maybe big (dd, cp, a compiler's output, a shell
		// redirection): a blob from the start, written by the kernel.
		defer f.ptLock(a.Ino)()
		if f.createPassthrough(&in.InHeader, &a, in.Flags, &out.OpenOut) {
			return fuse.OK
		}
	}
	out.Fh = f.newHandle(a.Ino, in.Flags, in.Pid)
	out.OpenFlags = openFlags(nil, in.Flags)
	return fuse.OK
}

// Tmpfile implements TMPFILE: open(2) with O_TMPFILE.
func (f *FS) Tmpfile(cancel <-chan struct{}, in *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	f.rollMu.RLock()
	defer f.rollMu.RUnlock()
	if err := f.checkIno(&in.InHeader, in.NodeId, true); err != nil { // a file made in the directory
		return f.status("tmpfile", err)
	}
	a, err := f.as(&in.InHeader).CreateTmpfile(in.NodeId, kv.NewInode{Mode: in.Mode, Uid: in.Uid, Gid: in.Gid})
	if err != nil {
		return f.status("tmpfile", err)
	}
	f.fillEntry(&a, &out.EntryOut)
	out.Fh = f.newHandle(a.Ino, in.Flags, in.Pid)
	out.OpenFlags = openFlags(nil, in.Flags)
	return fuse.OK
}

// Read implements READ.
func (f *FS) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	if f.stale(in.Fh) {
		return nil, fuse.EIO
	}
	if err := f.store.FetchBlob(in.NodeId, cancel); err != nil { // see Open
		return nil, f.status("read", err)
	}
	n, a, err := f.store.Read(in.NodeId, int64(in.Offset), buf[:min(len(buf), int(in.Size))])
	if err != nil {
		return nil, f.status("read", err)
	}
	if kv.NeedsAtime(&a) {
		if err := f.store.TouchAtime(in.NodeId); err != nil {
			return nil, f.status("read", err)
		}
	}
	return fuse.ReadResultData(buf[:n]), fuse.OK
}

// Write implements WRITE.
func (f *FS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	if f.stale(in.Fh) {
		return 0, fuse.EIO
	}
	var err error
	if in.WriteFlags&fuse.WRITE_KILL_SUIDGID != 0 { // the writer is not privileged
		var cleared bool
		if _, cleared, err = f.as(&in.InHeader).WriteKillPriv(in.NodeId, int64(in.Offset), data, inGroup(&in.Caller)); cleared {
			f.invalidateAttr(in.NodeId)
		}
	} else {
		_, err = f.as(&in.InHeader).Write(in.NodeId, int64(in.Offset), data)
	}
	if err != nil {
		return 0, f.status("write", err)
	}
	if err := f.wroteThrough(in.Fh); err != nil {
		return 0, f.status("write", err)
	}
	return uint32(len(data)), fuse.OK
}

// wroteThrough notes that handle fh wrote, and flushes the write if the
// handle flushes each (it sends no FLUSH at close).
func (f *FS) wroteThrough(fh uint64) error {
	h := f.handle(fh)
	if h == nil {
		return nil
	}
	h.mu.Lock()
	h.wrote, h.dirty = true, true
	h.mu.Unlock()
	if h.flushEach {
		return f.store.Flush()
	}
	return nil
}

// CopyFileRange implements COPY_FILE_RANGE (copy_file_range(2), which cp
// uses): one request instead of a READ and a WRITE per MiB, and between
// two big files no copy through the daemon at all (see kv.CopyRange).
func (f *FS) CopyFileRange(cancel <-chan struct{}, in *fuse.CopyFileRangeIn) (uint32, fuse.Status) {
	if f.stale(in.FhIn) || f.stale(in.FhOut) {
		return 0, fuse.EIO
	}
	var kill func(gid uint32) bool
	if in.Caller.Uid != 0 {
		kill = inGroup(&in.Caller)
	}
	n := min(in.Len, 1<<30) // the reply counts in 32 bits
	done, cleared, err := f.as(&in.InHeader).CopyRange(in.NodeId, int64(in.OffIn), in.NodeIdOut, int64(in.OffOut), int64(n), kill)
	if cleared {
		f.invalidateAttr(in.NodeIdOut)
	}
	if err != nil {
		return 0, f.status("copy_file_range", err)
	}
	if err := f.wroteThrough(in.FhOut); err != nil {
		return 0, f.status("copy_file_range", err)
	}
	return uint32(done), fuse.OK
}

// Flush implements FLUSH, sent at each close(2) of a writable file: what
// was written reaches the operating system before close returns.
func (f *FS) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	h := f.handle(in.Fh)
	if h == nil {
		return fuse.OK
	}
	h.mu.Lock()
	wrote := h.wrote
	h.wrote = false
	h.mu.Unlock()
	if wrote {
		return f.status("flush", f.store.Flush())
	}
	return fuse.OK
}

// Release implements RELEASE.
func (f *FS) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	f.rollMu.RLock()
	defer f.rollMu.RUnlock()
	if f.stale(in.Fh) {
		if h := f.handle(in.Fh); h != nil {
			f.releaseStale(h)
			h.mu.Lock()
			h.dirty = false // what it wrote is not the store's
			h.mu.Unlock()
		}
		f.dropHandle(in.Fh)
		return
	}
	if h := f.handle(in.Fh); h != nil && h.pt {
		f.releasePassthrough(h) // first: the size is the store's when written hears
	}
	f.dropHandle(in.Fh)
}

// Fsync implements FSYNC (fsync and fdatasync alike).
func (f *FS) Fsync(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	if f.stale(in.Fh) {
		return fuse.EIO
	}
	var err error
	if h := f.handle(in.Fh); h != nil && h.pt {
		err = h.sess.SyncPinned(in.NodeId) // what the kernel wrote, recorded
	}
	if err == nil {
		err = f.store.Sync()
	}
	if err == nil && f.written != nil {
		f.written(in.NodeId)
	}
	return f.status("fsync", err)
}

// Fallocate implements FALLOCATE.
func (f *FS) Fallocate(cancel <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	if f.stale(in.Fh) {
		return fuse.EIO
	}
	_, err := f.as(&in.InHeader).Fallocate(in.NodeId, in.Mode, int64(in.Offset), int64(in.Length))
	return f.status("fallocate", err)
}

// Lseek implements LSEEK for SEEK_DATA and SEEK_HOLE (the kernel handles
// the other whence values itself).
func (f *FS) Lseek(cancel <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	if in.Whence != kv.SeekData && in.Whence != kv.SeekHole {
		return fuse.EINVAL
	}
	if f.stale(in.Fh) {
		return fuse.EIO
	}
	off, err := f.store.SeekData(in.NodeId, int64(in.Offset), int(in.Whence))
	if err != nil {
		return f.status("lseek", err)
	}
	out.Offset = uint64(off)
	return fuse.OK
}

// GetXAttr implements GETXATTR.
func (f *FS) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, name string, dest []byte) (uint32, fuse.Status) {
	if err := f.checkIno(h, h.NodeId, false); err != nil {
		return 0, f.status("getxattr", err)
	}
	v, err := f.store.GetXattr(h.NodeId, name)
	if err != nil {
		return 0, f.status("getxattr", err)
	}
	if len(dest) == 0 {
		return uint32(len(v)), fuse.OK
	}
	if len(dest) < len(v) {
		return uint32(len(v)), fuse.ERANGE
	}
	return uint32(copy(dest, v)), fuse.OK
}

// ListXAttr implements LISTXATTR. As on ext4, trusted.* names are listed
// only to privileged callers (here: uid 0; the request does not carry
// capabilities).
func (f *FS) ListXAttr(cancel <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	if err := f.checkIno(h, h.NodeId, false); err != nil {
		return 0, f.status("listxattr", err)
	}
	all, err := f.store.ListXattr(h.NodeId)
	if err != nil {
		return 0, f.status("listxattr", err)
	}
	names := all[:0]
	for _, n := range all {
		if h.Uid == 0 || !strings.HasPrefix(n, "trusted.") {
			names = append(names, n)
		}
	}
	size := 0
	for _, n := range names {
		size += len(n) + 1
	}
	if len(dest) == 0 {
		return uint32(size), fuse.OK
	}
	if len(dest) < size {
		return uint32(size), fuse.ERANGE
	}
	b := dest[:0]
	for _, n := range names {
		b = append(append(b, n...), 0)
	}
	return uint32(size), fuse.OK
}

// SetXAttr implements SETXATTR.
func (f *FS) SetXAttr(cancel <-chan struct{}, in *fuse.SetXAttrIn, name string, data []byte) fuse.Status {
	if err := f.checkIno(&in.InHeader, in.NodeId, true); err != nil {
		return f.status("setxattr", err)
	}
	return f.status("setxattr", f.as(&in.InHeader).SetXattr(in.NodeId, name, data, in.Flags))
}

// RemoveXAttr implements REMOVEXATTR.
func (f *FS) RemoveXAttr(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	if err := f.checkIno(h, h.NodeId, true); err != nil {
		return f.status("removexattr", err)
	}
	return f.status("removexattr", f.as(h).RemoveXattr(h.NodeId, name))
}

// invalidateAttr tells the kernel to drop its cached attributes of ino: for
// changes the kernel cannot know about, such as setuid bits cleared by a
// write. Attributes only (offset -1): this takes no page locks, so it is
// safe while the kernel waits for our answer to a request on ino.
func (f *FS) invalidateAttr(ino uint64) {
	if f.server == nil {
		return
	}
	if st := f.server.InodeNotify(ino, -1, 0); st != fuse.OK && st != fuse.ENOENT {
		f.log.Warn("fuse: invalidating attributes failed", "ino", ino, "status", st)
	}
}

// inGroup returns a function that tells whether the caller of a request is
// in a group: its own gid, or one of its supplementary groups as
// /proc/PID/status lists them (read only when needed: this is rare).
func inGroup(c *fuse.Caller) func(gid uint32) bool {
	return func(gid uint32) bool {
		if gid == c.Gid {
			return true
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.Pid))
		if err != nil {
			return false
		}
		for _, line := range strings.Split(string(data), "\n") {
			if groups, ok := strings.CutPrefix(line, "Groups:"); ok {
				for _, g := range strings.Fields(groups) {
					if n, err := strconv.ParseUint(g, 10, 32); err == nil && uint32(n) == gid {
						return true
					}
				}
			}
		}
		return false
	}
}
