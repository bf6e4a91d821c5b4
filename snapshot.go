package computerfs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/computerfs/computerfs/hibernate"
	"github.com/computerfs/computerfs/kv"
)

// Snapshots and forks of a workspace (kv/snapshot.go does the work).
//
// A snapshot is kept in the store (STORE/snapshots/NAME) and costs the
// disk of what changes after it. A fork is a new store directory made
// from a snapshot or from the live state; it is mounted like any store
// (computerfs mount --store DIR). A fork gets an agent identity of its
// own, as a new store does: everything the parent's agent owned in it is
// given to the new agent, so the fork's agent can never reach the parent's
// files (the parent's mount is its agent's, mode 0700), nor the parent's
// agent the fork's.

// SnapshotInfo describes one snapshot (kv.SnapshotInfo).
type SnapshotInfo = kv.SnapshotInfo

// ForkOptions configure a fork.
type ForkOptions struct {
	// From is the snapshot to fork ("": the live state).
	From string
	// AgentsDir is the host-wide registry of agent identities (default
	// DefaultAgentsDir).
	AgentsDir string
	Logger    *slog.Logger
}

// ForkResult describes a fork just made.
type ForkResult struct {
	Store string `json:"store"`
	From  string `json:"from,omitempty"` // the snapshot, "" for the live state
	// Agent is the fork's agent identity: the parent's agent's files are
	// its (kv.Store.ChangeOwners, in constant time).
	Agent Agent `json:"agent"`
}

// Snapshot takes the snapshot name of the workspace's current state: a
// point in the sequence of its operations, including the files programs
// are writing (see kv.Store.Snapshot).
func (w *Workspace) Snapshot(name string) (SnapshotInfo, error) {
	info, err := w.Store.Snapshot(name)
	if err == nil {
		w.log.Info("snapshot taken", "name", name)
	}
	return info, err
}

// Snapshots lists the workspace's snapshots, oldest first.
func (w *Workspace) Snapshots() ([]SnapshotInfo, error) { return w.Store.Snapshots() }

// DeleteSnapshot removes the snapshot name.
func (w *Workspace) DeleteSnapshot(name string) error {
	err := w.Store.DeleteSnapshot(name)
	if err == nil {
		w.log.Info("snapshot deleted", "name", name)
	}
	return err
}

// Fork makes a new store in dst (a directory that does not exist or is
// empty, on the store's file system for the fork to share its data) from
// the snapshot opts.From or the live state, with an agent of its own.
func (w *Workspace) Fork(dst string, opts ForkOptions) (ForkResult, error) {
	dst, err := filepath.Abs(dst)
	if err != nil {
		return ForkResult{}, err
	}
	if err := checkForkPlace(dst, w.Store.Dir(), w.Mountpoint); err != nil {
		return ForkResult{}, err
	}
	if opts.AgentsDir == "" {
		opts.AgentsDir = w.agentsDir
	}
	if opts.Logger == nil {
		opts.Logger = w.log
	}
	if err := w.Store.Fork(dst, opts.From); err != nil {
		return ForkResult{}, err
	}
	res, err := finishFork(dst, opts)
	if err == nil {
		w.log.Info("forked", "store", dst, "from", opts.From, "agent", res.Agent.String())
	}
	return res, err
}

// ForkStore forks the store in src, which is not mounted (or, with
// opts.From, may be: its snapshots are read without opening it), into dst.
func ForkStore(src, dst string, opts ForkOptions) (ForkResult, error) {
	dst, err := filepath.Abs(dst)
	if err != nil {
		return ForkResult{}, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if err := checkExisting(src); err != nil {
		return ForkResult{}, err
	}
	if abs, err := filepath.Abs(src); err != nil {
		return ForkResult{}, err
	} else if err := checkForkPlace(dst, abs, ""); err != nil {
		return ForkResult{}, err
	}
	if opts.From != "" {
		snap, err := kv.SnapshotDir(src, opts.From)
		if err != nil {
			return ForkResult{}, err
		}
		if err := kv.ForkSnapshot(snap, dst); err != nil {
			return ForkResult{}, err
		}
	} else {
		if hibernate.HasPending(src) {
			// Its blobs are not all there to be linked.
			return ForkResult{}, fmt.Errorf("store %s still lacks blobs of the image it was resumed from: mount it until they are fetched (computerfs status), then fork", src)
		}
		st, err := OpenExisting(src, opts.Logger)
		if err != nil {
			return ForkResult{}, err
		}
		err = st.Fork(dst, "")
		if cerr := st.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return ForkResult{}, err
		}
	}
	return finishFork(dst, opts)
}

// checkForkPlace refuses a fork into the parent's store directory or its
// mount (the daemon would write its own mount while it holds every change
// off: a deadlock), symbolic links resolved.
func checkForkPlace(dst, store, mountpoint string) error {
	real := func(p string) string {
		// dst may not exist yet: resolve its nearest existing ancestor.
		rest := ""
		for {
			if r, err := filepath.EvalSymlinks(p); err == nil {
				return filepath.Join(r, rest)
			}
			parent := filepath.Dir(p)
			if parent == p {
				return filepath.Join(p, rest)
			}
			rest = filepath.Join(filepath.Base(p), rest)
			p = parent
		}
	}
	d := real(dst)
	for _, p := range []string{store, mountpoint} {
		if p == "" {
			continue
		}
		if r := real(p); d == r || strings.HasPrefix(d, r+"/") {
			return fmt.Errorf("fork into %s: it is in %s, the workspace's own store or mount; fork next to the store instead", dst, p)
		}
	}
	return nil
}

// finishFork gives the new store in dst an agent identity of its own, as
// a new store gets one, and gives it everything of the parent's agent. A
// fork that cannot be finished is removed.
func finishFork(dst string, opts ForkOptions) (res ForkResult, err error) {
	res = ForkResult{Store: dst, From: opts.From}
	st, err := kv.Open(dst, kv.Options{Logger: opts.Logger, MinFree: -1, Ballast: -1})
	if err != nil {
		os.RemoveAll(dst)
		return res, err
	}
	defer func() {
		if cerr := st.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.RemoveAll(dst)
			err = fmt.Errorf("fork into %s: %w", dst, err)
		}
	}()
	parent, ok, err := storedAgent(st)
	if err != nil {
		return res, err
	}
	if !ok {
		// A store from before agent identities: its root's owner is
		// its agent (setupAgent), or root, whose files a new agent gets
		// at the first mount.
		root, err := st.GetAttr(kv.RootIno)
		if err != nil {
			return res, err
		}
		if root.Uid == 0 {
			return res, nil
		}
		parent = Agent{UID: root.Uid, GID: root.Gid}
	}
	if err := st.UpdateMeta(nil, []string{metaAgent}); err != nil {
		return res, err
	}
	a, err := resolveAgent(dst, nil, AgentOptions{Dir: opts.AgentsDir})
	if err != nil {
		return res, err
	}
	if a != parent {
		if err := st.ChangeOwners(kv.Owner{UID: parent.UID, GID: parent.GID}, kv.Owner{UID: a.UID, GID: a.GID}); err != nil {
			return res, err
		}
	}
	if err := privateRoot(st, a); err != nil {
		return res, err
	}
	res.Agent = a
	return res, recordAgent(st, a)
}

// serveSnapshots adds the snapshot and fork endpoints to the control
// socket.
func (w *Workspace) serveSnapshots(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/snapshots", func(rw http.ResponseWriter, r *http.Request) {
		list, err := w.Snapshots()
		if err != nil {
			httpError(rw, err)
			return
		}
		if list == nil {
			list = []SnapshotInfo{}
		}
		writeJSON(rw, list)
	})
	mux.HandleFunc("POST /v1/snapshots", func(rw http.ResponseWriter, r *http.Request) {
		info, err := w.Snapshot(r.URL.Query().Get("name"))
		if err != nil {
			httpError(rw, err)
			return
		}
		writeJSON(rw, info)
	})
	mux.HandleFunc("DELETE /v1/snapshots/{name}", func(rw http.ResponseWriter, r *http.Request) {
		if err := w.DeleteSnapshot(r.PathValue("name")); err != nil {
			httpError(rw, err)
			return
		}
		writeJSON(rw, struct{}{})
	})
	mux.HandleFunc("POST /v1/fork", func(rw http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		dst := q.Get("store")
		if !filepath.IsAbs(dst) {
			http.Error(rw, "fork: the store directory must be an absolute path", http.StatusBadRequest)
			return
		}
		res, err := w.Fork(dst, ForkOptions{From: q.Get("from")})
		if err != nil {
			httpError(rw, err)
			return
		}
		writeJSON(rw, res)
	})
}

// httpError answers err with the status that fits it.
func httpError(rw http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, kv.ErrNoSnapshot):
		code = http.StatusNotFound
	case errors.Is(err, kv.ErrSnapshotExists):
		code = http.StatusConflict
	}
	http.Error(rw, err.Error(), code)
}

// Snapshot asks the daemon to take the snapshot name.
func (c *Client) Snapshot(ctx context.Context, name string) (SnapshotInfo, error) {
	var info SnapshotInfo
	return info, c.call(ctx, http.MethodPost, "/v1/snapshots?"+url.Values{"name": {name}}.Encode(), &info)
}

// Snapshots asks the daemon for the list of snapshots.
func (c *Client) Snapshots(ctx context.Context) ([]SnapshotInfo, error) {
	var list []SnapshotInfo
	return list, c.call(ctx, http.MethodGet, "/v1/snapshots", &list)
}

// DeleteSnapshot asks the daemon to delete the snapshot name.
func (c *Client) DeleteSnapshot(ctx context.Context, name string) error {
	var out struct{}
	return c.call(ctx, http.MethodDelete, "/v1/snapshots/"+url.PathEscape(name), &out)
}

// Fork asks the daemon to fork its workspace into the new store dst, from
// the snapshot from ("": the live state).
func (c *Client) Fork(ctx context.Context, dst, from string) (ForkResult, error) {
	dst, err := filepath.Abs(dst)
	if err != nil {
		return ForkResult{}, err
	}
	var res ForkResult
	q := url.Values{"store": {dst}}
	if from != "" {
		q.Set("from", from)
	}
	return res, c.call(ctx, http.MethodPost, "/v1/fork?"+q.Encode(), &res)
}
