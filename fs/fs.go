package fs

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/computerfs/computerfs/kv"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Config tunes the server. The zero value is usable.
type Config struct {
	// EntryTimeout is how long the kernel may cache names and attributes
	// (default 60 s).
	EntryTimeout time.Duration
	// Logger gets unexpected errors (default slog.Default()).
	Logger *slog.Logger
	// Written, if set, hears of a file whose last open handle that wrote
	// to it was released, and of every fsync: the file is complete for
	// now (sync back uploads it without waiting for its debounce). It is
	// called on the request's goroutine and must not block.
	Written func(ino uint64)
	// NoPassthrough keeps every read and write going through the daemon,
	// blobs included (see passthrough.go).
	NoPassthrough bool
	// Agent, if set, are the path rules the agent's requests are bound by
	// (see AgentRules).
	Agent *AgentRules
	// NoPassthroughCreates leaves files created with O_TRUNC in chunks
	// until they grow big, so that their first writer goes through the
	// daemon; by default they are blobs from their first byte, written by
	// the kernel (see createPassthrough).
	NoPassthroughCreates bool
	// PrivateRoot shows the root directory without group and other
	// permissions whatever its stored mode, so that the kernel lets no
	// other user than its owner (the agent) and root into the mount, and
	// a chmod by the agent cannot open it.
	PrivateRoot bool
}

// ioBlockSize is st_blksize: the I/O size that cp, cat and friends use.
const ioBlockSize = 1 << 20

// FS is the FUSE file system of one store.
type FS struct {
	fuse.RawFileSystem
	store   *kv.Store
	log     *slog.Logger
	timeout time.Duration

	mu      sync.Mutex
	lookups map[uint64]uint64 // kernel lookup counts, absent when zero
	handles map[uint64]*handle
	opens   map[uint64]int // open handles per inode, absent when zero
	nextFh  uint64

	cursors dirCursors // where READDIRs resume

	privateRoot bool // see Config.PrivateRoot

	// passthrough: blobs opened for the kernel's direct I/O
	ptLocks   [ptStripes]sync.Mutex // by inode: its opens and passthrough releases, one at a time
	ptOn      atomic.Bool
	ptMapMu   sync.Mutex
	pt        map[uint64]*ptFile // guarded by ptMapMu; an entry changes under its inode's ptLock
	ptOff     bool               // Config.NoPassthrough
	ptCreates bool               // !Config.NoPassthroughCreates

	// rollback (rollback.go): handles up to staleFh are from before it;
	// ptStale are the passthrough backing files of those, guarded by
	// ptMapMu; opens and releases hold rollMu for reading
	rollMu  sync.RWMutex
	staleFh atomic.Uint64
	ptStale map[uint64]*ptFile

	server  *fuse.Server
	agent   *AgentRules // nil: no rules to enforce
	actors  actorCache
	written func(ino uint64)
	// inodes written through a handle since their last open; told to
	// written when the last handle goes
	dirtyMu   sync.Mutex
	dirtyInos map[uint64]bool
}

// handle is an open file or directory.
type handle struct {
	ino uint64
	// flushEach: each write is flushed before it is answered (a write-only
	// handle, opened with FOPEN_NOFLUSH: its close sends no FLUSH)
	flushEach bool
	pid       uint32 // the process that opened it
	// pt: the kernel reads and writes the inode's blob itself; ptWrite:
	// for writing; sess: who opened it, for the journal record at release
	pt, ptWrite bool
	sess        kv.Session
	mu          sync.Mutex // guards the fields below
	wrote       bool
	dirty       bool // wrote since open
}

// New returns the file system for store.
func New(store *kv.Store, cfg Config) *FS {
	if cfg.EntryTimeout <= 0 {
		cfg.EntryTimeout = 60 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	f := &FS{
		RawFileSystem: fuse.NewDefaultRawFileSystem(),
		store:         store,
		log:           cfg.Logger,
		timeout:       cfg.EntryTimeout,
		lookups:       make(map[uint64]uint64),
		handles:       make(map[uint64]*handle),
		opens:         make(map[uint64]int),
		written:       cfg.Written,
		dirtyInos:     make(map[uint64]bool),
		pt:            make(map[uint64]*ptFile),
		ptStale:       make(map[uint64]*ptFile),
		ptOff:         cfg.NoPassthrough,
		ptCreates:     !cfg.NoPassthroughCreates,
		privateRoot:   cfg.PrivateRoot,
		agent:         agentRules(&cfg),
	}
	store.SetInUse(f.inUse)
	return f
}

func (f *FS) String() string { return "computerfs" }

// Init is called by go-fuse once the kernel has answered INIT.
func (f *FS) Init(s *fuse.Server) {
	f.server = s
	f.ptOn.Store(!f.ptOff && s.KernelSettings().Flags64()&fuse.CAP_PASSTHROUGH != 0)
}

// inUse tells the store whether an inode that just lost its last name must
// stay (as an orphan) for now. A file stays while it is open: nothing else
// can reach a file without a name, whatever the kernel's lookup count says,
// so an unlinked file that is not open is deleted at once, in the same batch
// as the unlink. A directory stays while the kernel knows it (it may be a
// process's working directory).
func (f *FS) inUse(ino uint64, isDir bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.opens[ino] > 0 || isDir && f.lookups[ino] > 0
}

// status maps a store error to a FUSE status, logging unexpected ones.
func (f *FS) status(op string, err error) fuse.Status {
	if err == nil {
		return fuse.OK
	}
	errno := kv.Errno(err)
	if errno == syscall.EIO {
		f.log.Error("fuse: "+op+" failed", "err", err)
	}
	return fuse.Status(errno)
}

// splitTime turns nanoseconds since the epoch into FUSE's seconds (a
// two's-complement int64 in a uint64) and non-negative nanoseconds.
func splitTime(ns int64) (uint64, uint32) {
	sec, nsec := ns/1e9, ns%1e9
	if nsec < 0 { // times before 1970: floor, not truncate
		sec, nsec = sec-1, nsec+1e9
	}
	return uint64(sec), uint32(nsec)
}

func (f *FS) fillAttr(a *kv.Attr, out *fuse.Attr) {
	*out = fuse.Attr{
		Ino: a.Ino, Size: a.Size, Blocks: a.Blocks,
		Mode: a.Mode, Nlink: a.Nlink, Owner: fuse.Owner{Uid: a.Uid, Gid: a.Gid},
		Rdev: a.Rdev, Blksize: ioBlockSize,
	}
	if a.Ino == kv.RootIno && f.privateRoot {
		out.Mode &^= 0o077
	}
	out.Atime, out.Atimensec = splitTime(a.Atime)
	out.Mtime, out.Mtimensec = splitTime(a.Mtime)
	out.Ctime, out.Ctimensec = splitTime(a.Ctime)
}

// fillEntry answers a request that gives the kernel a new reference to an
// inode, and counts that reference.
func (f *FS) fillEntry(a *kv.Attr, out *fuse.EntryOut) {
	f.mu.Lock()
	f.lookups[a.Ino]++
	f.mu.Unlock()
	out.NodeId = a.Ino
	out.Generation = 0 // inode numbers are never reused
	out.SetEntryTimeout(f.timeout)
	out.SetAttrTimeout(f.timeout)
	f.fillAttr(a, &out.Attr)
}

func (f *FS) fillAttrOut(a *kv.Attr, out *fuse.AttrOut) {
	out.SetTimeout(f.timeout)
	f.fillAttr(a, &out.Attr)
}

// Lookup implements LOOKUP.
func (f *FS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	denied, err := f.lookupDenied(h.NodeId, name)
	if err != nil && err != syscall.ENOENT {
		return f.status("lookup", err)
	}
	if denied && f.bound(h) {
		return fuse.EACCES
	}
	a, err := f.store.Lookup(h.NodeId, name)
	if denied {
		// Never cached, so that the agent's lookups reach the daemon.
		defer func() { out.SetEntryTimeout(0); out.SetAttrTimeout(0) }()
	}
	if err == kv.ErrNotFound {
		// A negative entry: the kernel remembers that name does not exist
		// (a reply without error, node 0: an ENOENT reply would be cached
		// by no one), so programs that probe for files (include paths,
		// module resolution, lstat before create) ask once. Names made
		// by the daemon's other writers are dropped from the kernel's
		// cache, negative or not (Notifier.EntryChanged).
		out.NodeId = 0
		out.SetEntryTimeout(f.timeout)
		return fuse.OK
	}
	if err != nil {
		return f.status("lookup", err)
	}
	f.fillEntry(&a, out)
	return fuse.OK
}

// Forget implements FORGET: the kernel dropped n references to ino.
func (f *FS) Forget(ino, n uint64) {
	f.mu.Lock()
	left := f.lookups[ino] - min(n, f.lookups[ino])
	if left == 0 {
		delete(f.lookups, ino)
	} else {
		f.lookups[ino] = left
	}
	f.mu.Unlock()
	if left == 0 {
		if err := f.store.Forget(ino); err != nil {
			f.log.Error("fuse: forget failed", "ino", ino, "err", err)
		}
	}
}

// GetAttr implements GETATTR.
func (f *FS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	if in.Flags()&fuse.FUSE_GETATTR_FH != 0 && f.stale(in.Fh()) {
		return fuse.EIO
	}
	a, err := f.store.GetAttr(in.NodeId)
	if err != nil {
		return f.status("getattr", err)
	}
	f.fillAttrOut(&a, out)
	return fuse.OK
}

// SetAttr implements SETATTR (chmod, chown, truncate, utimens). The kernel
// has checked permissions (default_permissions). With HANDLE_KILLPRIV_V2 it
// leaves clearing setuid/setgid to us: the store does it on chown, and on
// truncate when the kernel says the caller is unprivileged.
func (f *FS) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	if fh, ok := in.GetFh(); ok && f.stale(fh) {
		return fuse.EIO
	}
	if err := f.checkIno(&in.InHeader, in.NodeId, true); err != nil {
		return f.status("setattr", err)
	}
	var req kv.SetAttrRequest
	v := in.Valid
	if v&fuse.FATTR_MODE != 0 {
		req.Valid |= kv.SetMode
		req.Mode = in.Mode
	}
	if v&fuse.FATTR_UID != 0 {
		req.Valid |= kv.SetUid
		req.Uid = in.Uid
	}
	if v&fuse.FATTR_GID != 0 {
		req.Valid |= kv.SetGid
		req.Gid = in.Gid
	}
	if v&fuse.FATTR_SIZE != 0 {
		req.Valid |= kv.SetSize
		req.Size = in.Size
	}
	if v&fuse.FATTR_ATIME_NOW != 0 {
		req.Valid |= kv.SetAtimeNow
	} else if v&fuse.FATTR_ATIME != 0 {
		req.Valid |= kv.SetAtime
		req.Atime = int64(in.Atime)*1e9 + int64(in.Atimensec)
	}
	if v&fuse.FATTR_MTIME_NOW != 0 {
		req.Valid |= kv.SetMtimeNow
	} else if v&fuse.FATTR_MTIME != 0 {
		req.Valid |= kv.SetMtime
		req.Mtime = int64(in.Mtime)*1e9 + int64(in.Mtimensec)
	}
	if v&fuse.FATTR_KILL_SUIDGID != 0 {
		req.Valid |= kv.SetKillPriv
		req.InGroup = inGroup(&in.Caller)
	}
	if v&fuse.FATTR_CTIME != 0 {
		req.Valid |= kv.SetCtime
		req.Ctime = int64(in.Ctime)*1e9 + int64(in.Ctimensec)
	}
	a, err := f.as(&in.InHeader).SetAttr(in.NodeId, req)
	if err != nil {
		return f.status("setattr", err)
	}
	if a.IsDir() && kv.NeedsAtime(&a) && f.server != nil {
		// The kernel keeps listing the directory from its cache while
		// its mtime stays: drop that, so the next listing reaches
		// readDir and sets the access time, as relatime wants after a
		// change of ctime. After this reply: invalidating pages may wait
		// for locks the kernel holds until then.
		go f.server.InodeNotify(in.NodeId, 0, 0)
	}
	f.fillAttrOut(&a, out)
	return fuse.OK
}

func (f *FS) create(h *fuse.InHeader, name string, n kv.NewInode, out *fuse.EntryOut) fuse.Status {
	if err := f.checkEntry(h, h.NodeId, name); err != nil {
		return f.status("create", err)
	}
	a, err := f.as(h).Create(h.NodeId, name, n)
	if err != nil {
		return f.status("create", err)
	}
	f.fillEntry(&a, out)
	return fuse.OK
}

// Mknod implements MKNOD (regular files, fifos, sockets and device nodes).
func (f *FS) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	return f.create(&in.InHeader, name, kv.NewInode{Mode: in.Mode, Uid: in.Uid, Gid: in.Gid, Rdev: in.Rdev}, out)
}

// Mkdir implements MKDIR.
func (f *FS) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	mode := in.Mode&^kv.S_IFMT | kv.S_IFDIR
	return f.create(&in.InHeader, name, kv.NewInode{Mode: mode, Uid: in.Uid, Gid: in.Gid}, out)
}

// Symlink implements SYMLINK.
func (f *FS) Symlink(cancel <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	return f.create(h, name, kv.NewInode{Mode: kv.S_IFLNK | 0o777, Uid: h.Uid, Gid: h.Gid, Target: target}, out)
}

// Readlink implements READLINK.
func (f *FS) Readlink(cancel <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	if err := f.checkIno(h, h.NodeId, false); err != nil {
		return nil, f.status("readlink", err)
	}
	t, err := f.store.Readlink(h.NodeId)
	if err != nil {
		return nil, f.status("readlink", err)
	}
	return []byte(t), fuse.OK
}

// Link implements LINK.
func (f *FS) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	if err := f.checkIno(&in.InHeader, in.Oldnodeid, true); err != nil { // no other name for a denied or read-only file
		return f.status("link", err)
	}
	if err := f.checkEntry(&in.InHeader, in.NodeId, name); err != nil {
		return f.status("link", err)
	}
	a, err := f.as(&in.InHeader).Link(in.Oldnodeid, in.NodeId, name)
	if err != nil {
		return f.status("link", err)
	}
	f.fillEntry(&a, out)
	return fuse.OK
}

// Unlink implements UNLINK.
func (f *FS) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	if err := f.checkUnlink(h, h.NodeId, name); err != nil {
		return f.status("unlink", err)
	}
	return f.status("unlink", f.as(h).Unlink(h.NodeId, name))
}

// Rmdir implements RMDIR.
func (f *FS) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	if err := f.checkEntry(h, h.NodeId, name); err != nil {
		return f.status("rmdir", err)
	}
	return f.status("rmdir", f.as(h).Rmdir(h.NodeId, name))
}

// Rename implements RENAME and RENAME2.
func (f *FS) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	if err := f.checkRename(&in.InHeader, in.NodeId, oldName, in.Newdir, newName, in.Flags); err != nil {
		return f.status("rename", err)
	}
	return f.status("rename", f.as(&in.InHeader).Rename(in.NodeId, oldName, in.Newdir, newName, in.Flags))
}

// StatFs implements STATFS.
func (f *FS) StatFs(cancel <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	st, err := f.store.StatFs()
	if err != nil {
		return f.status("statfs", err)
	}
	*out = fuse.StatfsOut{Blocks: st.Blocks, Bfree: st.Bfree, Bavail: st.Bavail, Files: st.Files,
		Ffree: st.Ffree, Bsize: st.Bsize, NameLen: st.NameLen, Frsize: st.Bsize}
	return fuse.OK
}
