package fs

import (
	"syscall"
	"time"

	"github.com/computerfs/computerfs/internal/proc"
	"github.com/computerfs/computerfs/kv"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Passthrough. A file whose data is a blob (a file of its own under the
// store, see kv/blob.go) is opened with FOPEN_PASSTHROUGH: the kernel reads
// and writes (and maps) the blob file itself, with no READ or WRITE
// request, no copy through the daemon, and the host file system's page
// cache. The store merges the blob's size and times into the file's
// attributes while it is open, and records them at fsync and at the last
// close (kv.Store.PinBlob).
//
// The kernel refuses (EIO) to open an inode for passthrough while it has
// a cached open, and the reverse, and wants one backing file per inode.
// So an inode's opens are all passthrough or all cached: a blob is opened
// for passthrough unless a cached handle of it is open (one opened while
// the file was small, or since); its passthrough opens share one backing
// id, registered with the first and unregistered with the last. The
// decision and the handle's registration happen under the inode's ptLock,
// so that two opens cannot decide differently; opens of other inodes, and
// their store work (commits, and for a pin for writing handing the WAL to
// the system), go on meanwhile.

// ptStripes is how many locks the inodes' opens are spread over.
const ptStripes = 64

// ptLock locks ino's opens and passthrough releases and returns the
// function that unlocks them.
func (f *FS) ptLock(ino uint64) func() {
	mu := &f.ptLocks[ino%ptStripes]
	mu.Lock()
	return mu.Unlock
}

func (f *FS) ptFileOf(ino uint64) *ptFile {
	f.ptMapMu.Lock()
	defer f.ptMapMu.Unlock()
	return f.pt[ino]
}

// ptFile is an inode open for passthrough.
type ptFile struct {
	n  int   // passthrough handles
	id int32 // the kernel's backing id
}

// openPassthrough opens ino (attributes a) for passthrough if it can, and
// then fills out and reports true. No FLUSH at close: the kernel wrote
// the blob already, and the store takes the size at release, or from the
// blob after a crash. The caller holds ino's ptLock.
func (f *FS) openPassthrough(h *fuse.InHeader, a *kv.Attr, flags uint32, out *fuse.OpenOut) bool {
	if !f.ptOn.Load() || a.Flags&kv.FlagBlob == 0 || !f.ptAllowed(a) {
		return false
	}
	ino := a.Ino
	write := flags&syscall.O_ACCMODE != syscall.O_RDONLY
	pf := f.ptFileOf(ino)
	if pf == nil && (!f.cachedClosed(ino) || write && f.store.SpaceLow()) {
		// Low on space, the first writer goes through the daemon, which
		// refuses new data; the kernel's writes would not be held back.
		return false
	}
	sess := f.as(h)
	blob, ok, err := f.store.PinBlob(ino, write)
	if err != nil {
		f.log.Warn("fuse: passthrough open failed; opening through the daemon", "ino", ino, "err", err)
	}
	if !ok {
		return false
	}
	if pf == nil {
		id, errno := f.server.RegisterBackingFd(&fuse.BackingMap{Fd: int32(blob.Fd())})
		if errno != 0 {
			if err := sess.UnpinBlob(ino, write); err != nil {
				f.log.Error("fuse: unpinning a blob failed", "ino", ino, "err", err)
			}
			f.ptMapMu.Lock()
			if len(f.pt) == 0 {
				f.ptOn.Store(false)
				f.log.Warn("fuse: the kernel refused a backing file; passthrough is off", "errno", errno)
			}
			f.ptMapMu.Unlock()
			return false
		}
		pf = &ptFile{id: id}
		f.ptMapMu.Lock()
		f.pt[ino] = pf
		f.ptMapMu.Unlock()
	}
	pf.n++
	fh := f.newHandle(ino, flags, h.Pid)
	hd := f.handle(fh)
	hd.pt, hd.ptWrite, hd.sess = true, write, sess
	if write {
		hd.dirty = true // the kernel writes; the store learns what at release
	}
	out.Fh, out.BackingID = fh, pf.id
	out.OpenFlags = fuse.FOPEN_PASSTHROUGH | fuse.FOPEN_NOFLUSH
	return true
}

// createPassthrough opens the file just created (attributes a) for
// passthrough, as a blob from its first byte (kv.Store.MakeBlob); one that
// stays small returns to chunks at its last close. The caller holds the
// inode's ptLock.
func (f *FS) createPassthrough(h *fuse.InHeader, a *kv.Attr, flags uint32, out *fuse.OpenOut) bool {
	if !f.ptOn.Load() || !f.ptAllowed(a) || f.store.SpaceLow() {
		return false
	}
	made, err := f.store.MakeBlob(a.Ino)
	if err != nil {
		f.log.Warn("fuse: making a new file a blob failed", "ino", a.Ino, "err", err)
	}
	if !made {
		return false
	}
	b := *a
	b.Flags |= kv.FlagBlob
	return f.openPassthrough(h, &b, flags, out)
}

// ptAllowed tells whether a blob may be opened for passthrough at all: not
// if a write must clear its setuid or setgid bit or file capabilities
// (security.capability), which only the daemon does (the kernel's
// passthrough write clears them on the blob file, not on the file), and
// not in a workspace with a quota: the kernel's writes would not count
// against it until the file is closed, and could not be refused. Read and
// write opens decide alike, since an inode's opens cannot mix.
func (f *FS) ptAllowed(a *kv.Attr) bool {
	if a.Mode&(kv.S_ISUID|kv.S_ISGID) != 0 {
		return false
	}
	if _, quota := f.store.Usage(); quota > 0 {
		return false
	}
	_, err := f.store.GetXattr(a.Ino, "security.capability")
	return err == kv.ErrNoData
}

// releaseWait bounds how long an open waits for the RELEASE of a cached
// handle of the same inode. The kernel sends RELEASE in the background
// after close(2) returns, so the next open of a file just written (dd,
// then cat) often arrives first, although the kernel has already let the
// handle go and would accept passthrough.
const releaseWait = 2 * time.Millisecond

// cachedClosed tells whether ino has no cached handle open. While the
// processes that opened those handles have all exited (the handles are
// closed, their RELEASEs on the way) it waits up to releaseWait for them;
// a live opener may well still use its handle, and then it does not wait.
// The caller holds ino's ptLock (which releases of cached handles do not
// take).
func (f *FS) cachedClosed(ino uint64) bool {
	deadline := time.Now().Add(releaseWait)
	for {
		var pids []uint32
		f.mu.Lock()
		if f.opens[ino] > 0 {
			for _, h := range f.handles {
				if h.ino == ino {
					pids = append(pids, h.pid)
				}
			}
		}
		f.mu.Unlock()
		if len(pids) == 0 {
			return true
		}
		for _, pid := range pids {
			if pid == 0 || proc.Running(int(pid)) {
				return false // alive (or unknown): its handle may be in use
			}
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// releasePassthrough ends handle h's passthrough: the store records what
// the kernel changed, and the last one gives the backing id back.
func (f *FS) releasePassthrough(h *handle) {
	defer f.ptLock(h.ino)()
	if err := h.sess.UnpinBlob(h.ino, h.ptWrite); err != nil {
		f.log.Error("fuse: recording a passthrough file's changes failed", "ino", h.ino, "err", err)
	}
	pf := f.ptFileOf(h.ino)
	if pf == nil {
		return
	}
	if pf.n--; pf.n == 0 {
		f.ptMapMu.Lock()
		delete(f.pt, h.ino)
		f.ptMapMu.Unlock()
		if errno := f.server.UnregisterBackingFd(pf.id); errno != 0 {
			f.log.Warn("fuse: releasing a backing file failed", "ino", h.ino, "errno", errno)
		}
	}
}
