// Package computerfs owns a running workspace: it opens the store, mounts
// it, and shuts it down cleanly. The command-line tool (cmd/computerfs) only
// parses flags and calls this package.
package computerfs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/computerfs/computerfs/fs"
	"github.com/computerfs/computerfs/hibernate"
	"github.com/computerfs/computerfs/internal/execwire"
	"github.com/computerfs/computerfs/internal/proc"
	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/policy"
	"github.com/computerfs/computerfs/sandbox"
	"github.com/computerfs/computerfs/sandbox/backend"
	"github.com/computerfs/computerfs/sandbox/shell"
	"github.com/computerfs/computerfs/sources"
	"github.com/computerfs/computerfs/spec"
	"github.com/computerfs/computerfs/syncer"
	"github.com/computerfs/computerfs/tools"
	"github.com/computerfs/computerfs/wsfs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// MountOptions configure Mount.
type MountOptions struct {
	blobs      kv.BlobSource // the blobs a lazy resume still fetches (nil: none)
	Store      string        // store directory; created if missing
	Mountpoint string
	Private    bool  // only the mounting user may use the mount
	CacheSize  int64 // Pebble block cache in bytes (0: default)
	// MemTableSize is the largest Pebble memtable in bytes (0: default).
	MemTableSize uint64
	// MinFree is the free space the store keeps on its file system
	// (kv.Options.MinFree; 0: default).
	MinFree int64
	// Quota bounds what the workspace holds (kv.Options.Quota; 0: the
	// spec's quota, if any).
	Quota int64
	// Ballast is the store's ballast file (kv.Options.Ballast; 0: default).
	Ballast int64
	// BlobThreshold is the file size past which data moves out of Pebble
	// (0: kv.DefaultBlobThreshold; negative: never).
	BlobThreshold int64
	Debug         bool // log every FUSE request
	Logger        *slog.Logger
	// HTTPClient fetches lazy S3 files (nil: the SDK's, with timeouts).
	HTTPClient *http.Client
	// NoJournal keeps no journal: for measuring what the journal costs.
	NoJournal bool
	// NoPassthrough sends every read and write of big files through the
	// daemon too (fs.Config.NoPassthrough): for measuring passthrough.
	NoPassthrough bool
	// NoPassthroughCreates: files created with O_TRUNC stay in chunks
	// until they grow big (fs.Config.NoPassthroughCreates).
	NoPassthroughCreates bool
	// Sandbox enables the sandbox exec backend (nil: only the shell fast
	// path). The program must call sandbox.Init first in main.
	Sandbox *SandboxOptions
	// SyncDebounce, if set, replaces the spec's sync debounce (tests).
	SyncDebounce time.Duration
	// Agent names the workspace's agent identity, the host user that owns
	// what the agent writes (nil: the one the store recorded, else the
	// spec's, else one allocated from AgentBase up; see setupAgent for a
	// store that recorded none). A store keeps its identity for good.
	Agent *Agent
	// AgentsDir is the host-wide registry of agent identities (default
	// DefaultAgentsDir).
	AgentsDir string
	// SharedRoot lets the root directory's stored mode through: by
	// default the mount shows it without group and other permissions
	// (fs.Config.PrivateRoot), so that no host user but the agent and root
	// can enter the workspace, whatever the agent does with chmod.
	SharedRoot bool
}

// Workspace is a store mounted by Mount, or opened without a mount by Open.
type Workspace struct {
	Store      *kv.Store
	Mountpoint string
	// FS is the workspace by path for code in the daemon; the mount's
	// caches hear of every change made through it.
	FS *wsfs.FS

	agent     Agent        // who the agent is on the host
	agentsDir string       // the registry of agent identities (MountOptions.AgentsDir)
	tools     *tools.Tools // the agent tools (see tools.go)
	spec      *spec.Spec   // nil for a store not imported from a spec
	// rules are the path rules in force for every backend (the mount,
	// the fast path, the tools): the spec's, and the .git of each git
	// source whose history holds a denied path (see sources/history.go).
	rules      *policy.Checker
	httpClient *http.Client
	srv        *fuse.Server
	mount      *fs.FS // what srv serves (Rollback)
	control    *http.Server
	refreshMu  sync.Mutex // one refresh at a time
	// callMu: fast-path execs and tool calls (read), a rollback (write)
	callMu    sync.RWMutex
	closed    bool // the store is closed; guarded by callMu
	stopTrim  chan struct{}
	log       *slog.Logger
	closeOnce sync.Once
	closeErr  error

	shell        *shell.Backend
	sandbox      backend.Backend // nil: noSandbox says why
	noSandbox    string
	allowNetwork bool
	// execCtx ends when the workspace shuts down: commands still running
	// then are stopped (a sandbox would otherwise hold the mount).
	execCtx  context.Context
	stopExec context.CancelFunc

	syncer      *syncer.Syncer
	syncerReady atomic.Pointer[syncer.Syncer] // for the mount's callbacks

	ckpt *checkpointer // the policy's checkpoint: each-call (checkpoint.go); nil if off

	lease *leaseKeeper // renews a resumed workspace's lease (hibernate.go); nil if none
	// blobFetch fetches the blobs of a lazily resumed workspace
	// (hibernate.go); nil if none are owed.
	blobFetch *hibernate.Fetcher
}

// openStore opens a workspace's store with the options' tuning.
func openStore(dir string, opts MountOptions) (*kv.Store, error) {
	return kv.Open(dir, kv.Options{CacheSize: opts.CacheSize, MemTableSize: opts.MemTableSize, MinFree: opts.MinFree, Ballast: opts.Ballast, BlobThreshold: opts.BlobThreshold, Logger: opts.Logger, NoJournal: opts.NoJournal, Blobs: opts.blobs})
}

// newFS returns the store by path; files made through it belong to the
// agent.
func newFS(st *kv.Store, a Agent) *wsfs.FS { return wsfs.New(st, a.owner()) }

// Agent is the workspace's agent identity: the host uid and gid that own
// what the agent writes and that its sandboxed commands run as.
func (w *Workspace) Agent() Agent { return w.agent }

// Mount opens the store and mounts it.
func Mount(opts MountOptions) (*Workspace, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	mp, err := filepath.Abs(opts.Mountpoint)
	if err != nil {
		return nil, err
	}
	if err := checkMountpointPlace(mp); err != nil {
		return nil, err
	}
	if opts.Store, err = filepath.Abs(opts.Store); err != nil {
		return nil, err
	}
	if err := checkStorePlace(opts.Store, mp); err != nil {
		return nil, err
	}
	if err := prepareNewStore(opts.Store, opts); err != nil {
		return nil, err
	}
	fetcher, err := openBlobFetcher(opts.Store, opts.HTTPClient, opts.Logger)
	if err != nil {
		return nil, err
	}
	mounted := false
	if fetcher != nil {
		opts.blobs = fetcher
		defer func() {
			if !mounted {
				fetcher.Close()
			}
		}()
	}
	store, err := openStore(opts.Store, opts)
	if err != nil {
		return nil, err
	}
	sp, err := storedSpec(store)
	if err != nil {
		store.Close()
		return nil, err
	}
	if sp != nil {
		store.SetFetcher(sources.NewFetcher(sp, opts.HTTPClient).Fetch)
	}
	if opts.Quota == 0 && sp != nil {
		opts.Quota = int64(sp.Quota)
	}
	store.SetQuota(opts.Quota)
	agent, err := setupAgent(store, opts.Store, sp, AgentOptions{Agent: opts.Agent, Dir: opts.AgentsDir}, opts.Logger)
	if err != nil {
		store.Close()
		return nil, err
	}
	w := &Workspace{Store: store, Mountpoint: mp, FS: newFS(store, agent), agent: agent, agentsDir: opts.AgentsDir, spec: sp, httpClient: opts.HTTPClient, log: opts.Logger, blobFetch: fetcher}
	if w.rules, err = historyRules(context.Background(), w.FS, sp, opts.Logger); err != nil {
		store.Close()
		return nil, err
	}
	mfs, srv, err := fs.MountFS(store, mp, fs.MountOptions{
		Config: fs.Config{Logger: opts.Logger, Written: w.written, NoPassthrough: opts.NoPassthrough, NoPassthroughCreates: opts.NoPassthroughCreates,
			PrivateRoot: !opts.SharedRoot, Agent: agentRules(w.rules, agent)},
		Private: opts.Private,
		Debug:   opts.Debug,
	})
	if err != nil {
		store.Close()
		return nil, err
	}
	w.srv, w.mount = srv, mfs
	w.FS.SetNotifier(fs.NewNotifier(srv))
	w.setBackends(opts)
	w.execCtx, w.stopExec = context.WithCancel(context.Background())
	if sb, ok := w.sandbox.(*workspaceSandbox); ok {
		go w.collectSandboxes(w.execCtx, sb.sb.Base.StateDir)
	}
	if err := w.startSyncer(opts); err != nil {
		w.Unmount()
		return nil, err
	}
	if sp != nil {
		w.ckpt = newCheckpointer(store, sp.Policy, opts.Logger)
	}
	if w.tools, err = newTools(w); err != nil {
		w.Unmount()
		return nil, err
	}
	if err := w.serveControl(); err != nil {
		w.Unmount()
		return nil, err
	}
	w.lease = keepLease(opts.Store, opts.HTTPClient, opts.Logger)
	w.stopTrim = make(chan struct{})
	go trimMemory(w.stopTrim, w.Store.DropBlockCache)
	if opts.Sandbox != nil && opts.Sandbox.Warm > 0 {
		// An umount(8) from outside only detaches the mount here: the
		// warm sandboxes' namespaces still hold it, so the kernel would
		// not end the FUSE connection while they wait.
		go watchUnmount(mp, w.stopTrim, w.log, w.endCommands)
	}
	if fetcher != nil {
		fetcher.Start(2)
	}
	mounted = true
	opts.Logger.Info("mounted", "store", opts.Store, "mountpoint", mp, "pid", os.Getpid(), "agent", agent.String())
	return w, nil
}

// MountpointHidesFiles tells whether a mount at mp would hide files: mp
// is a directory with entries and not a mount point already (a dead mount
// there is replaced; a live one is refused). FUSE mounts over a directory
// that is not empty, as Mount does: what it holds is hidden while the
// workspace is mounted and is there again, untouched, after the unmount.
func MountpointHidesFiles(mp string) bool {
	if mounted, err := fs.IsMounted(mp); err != nil || mounted {
		return false
	}
	d, err := os.Open(mp)
	if err != nil {
		return false
	}
	defer d.Close()
	names, _ := d.Readdirnames(1)
	return len(names) > 0
}

// checkMountpointPlace refuses a mount point that is one of the host
// directories every sandbox on the host binds from the host (/usr, /etc,
// /opt...) or under one: there, the workspace would stop every sandbox
// of the host from starting, or appear inside all of them.
func checkMountpointPlace(mp string) error {
	real := mp
	if r, err := filepath.EvalSymlinks(mp); err == nil {
		real = r
	}
	for _, d := range sandbox.HostDirs() {
		where := ""
		switch {
		case real == d:
			where = "is " + d
		case strings.HasPrefix(real, d+"/"):
			where = "is under " + d
		default:
			continue
		}
		return fmt.Errorf("mount point %s %s, which every sandbox on this host binds from the host: a mount there would stop every sandbox from starting (or appear in all of them); mount the workspace elsewhere, e.g. under /mnt or /srv", mp, where)
	}
	return nil
}

// checkStorePlace refuses a store directory under the mount point (the
// mount would hide it, and the daemon's control socket would be made in
// the workspace, where the agent reaches it) or a mount point under the
// store directory (the workspace inside the raw store).
func checkStorePlace(store, mp string) error {
	real := func(p string) string {
		// The deepest part that exists, its links resolved.
		rest := ""
		for {
			if r, err := filepath.EvalSymlinks(p); err == nil {
				return filepath.Join(r, rest)
			}
			d := filepath.Dir(p)
			if d == p {
				return filepath.Join(p, rest)
			}
			rest = filepath.Join(filepath.Base(p), rest)
			p = d
		}
	}
	s, m := real(store), real(mp)
	if s == m || strings.HasPrefix(s, m+"/") || strings.HasPrefix(m, s+"/") {
		return fmt.Errorf("store %s and mount point %s: neither may be inside the other (the agent would reach the store's files and its control socket)", store, mp)
	}
	return nil
}

// Wait blocks until the file system is unmounted (by Unmount, umount(8) or
// fusermount -u), then closes the store.
func (w *Workspace) Wait() error {
	w.srv.Wait()
	return w.closeStore()
}

func (w *Workspace) closeStore() error {
	w.closeOnce.Do(func() {
		if sb, ok := w.sandbox.(*workspaceSandbox); ok {
			sb.closeCache() // the mount is gone: so are the sandboxes, but for the last moments of some
		}
		w.stopControl()
		if w.syncer != nil {
			w.syncer.Close()
		}
		if w.stopTrim != nil {
			close(w.stopTrim)
		}
		if w.lease != nil {
			w.lease.stop() // its errors were logged
		}
		w.callMu.Lock() // no rollback under way, nor one's second invalidation
		w.closed = true
		w.callMu.Unlock()
		if w.blobFetch != nil {
			w.blobFetch.Close() // what is not fetched yet is, at the next mount
		}
		w.ckpt.close()
		w.closeErr = w.Store.Close()
		if w.closeErr != nil {
			w.log.Error("closing store failed", "err", w.closeErr)
		} else {
			w.log.Info("unmounted; store closed", "mountpoint", w.Mountpoint)
		}
	})
	return w.closeErr
}

// Unmount unmounts the workspace and closes the store. If files are still
// open on the mount it detaches the mount lazily: programs that hold files
// open get errors from then on.
func (w *Workspace) Unmount() error {
	w.endCommands()
	if err := w.srv.Unmount(); err != nil {
		w.log.Warn("mount busy; detaching it", "mountpoint", w.Mountpoint, "err", err)
		if derr := syscall.Unmount(w.Mountpoint, syscall.MNT_DETACH); derr != nil {
			return fmt.Errorf("unmount %s: %w", w.Mountpoint, err)
		}
		w.srv.Wait()
	}
	return w.closeStore()
}

// Unmount unmounts the computerfs mount at mountpoint, whichever process
// serves it, and waits up to timeout for that process to close its store.
func Unmount(mountpoint string, timeout time.Duration) error {
	mp, err := filepath.Abs(mountpoint)
	if err != nil {
		return err
	}
	store, err := mountedStore(mp)
	if err != nil {
		return err
	}
	pid := storePid(store)
	if err := syscall.Unmount(mp, 0); err != nil {
		if !errors.Is(err, syscall.EPERM) {
			return fmt.Errorf("unmount %s: %w", mp, err)
		}
		if out, ferr := fusermount("-u", mp); ferr != nil {
			return fmt.Errorf("unmount %s: %v: %s", mp, ferr, out)
		}
	}
	if pid <= 0 || pid == os.Getpid() {
		return nil
	}
	deadline := time.Now().Add(timeout)
	for proc.Running(pid) {
		if time.Now().After(deadline) {
			return fmt.Errorf("unmounted %s, but daemon pid %d is still running after %v", mp, pid, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// mountedStore returns the store directory of the computerfs mount at mp,
// an absolute path.
func mountedStore(mp string) (string, error) { return execwire.MountedStore(mp) }

// storePid returns the pid recorded in the store's lock file, or 0.
func storePid(store string) int { return execwire.StorePid(store) }
