package computerfs

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/computerfs/computerfs/kv"
)

// RollbackInfo describes a rollback (kv.RollbackInfo): the snapshot and
// the sequence number of its journal record.
type RollbackInfo = kv.RollbackInfo

// RollbackStore puts the store in dir, which must not be mounted, back to
// its snapshot name (kv.Rollback): the files become the snapshot's, while
// the journal goes on with a rollback record that sync back takes as a
// change anywhere in the workspace, and the audit, the spec, the sync
// state, the agent identity and the snapshots stay the store's.
func RollbackStore(dir, name string, log *slog.Logger) (RollbackInfo, error) {
	if log == nil {
		log = slog.Default()
	}
	if err := checkExisting(dir); err != nil {
		return RollbackInfo{}, err
	}
	info, err := kv.Rollback(dir, name, kv.Options{Logger: log, MinFree: -1, Ballast: -1})
	if err != nil {
		return RollbackInfo{}, mountedHint(dir, err)
	}
	log.Info("rolled back", "store", dir, "snapshot", name, "seq", info.Seq)
	return info, nil
}

// callsHeld marks a context whose call holds callMu already (a tool call
// running exec), so that Exec does not take it again: a read lock taken
// twice waits behind a rollback waiting for the first.
type callsHeld struct{}

// invalidateAgain is when a rollback drops the kernel's caches of the old
// state a second time (fs.FS.Rollback).
const invalidateAgain = time.Second

// RollbackResult describes a rollback of a mounted workspace.
type RollbackResult struct {
	kv.RollbackInfo
	DurationMs int64 `json:"duration_ms"`
}

// ErrNotMounted is returned by Workspace.Rollback for a workspace that is
// not mounted (use RollbackStore).
var ErrNotMounted = errors.New("the workspace is not mounted")

// Rollback puts the mounted workspace back to its snapshot name while the
// daemon runs (fs.FS.Rollback, kv.Store.RollbackWith): its files become
// the snapshot's and the journal ends with a rollback record, as with
// RollbackStore. It waits for running tool calls, shell fast-path
// commands, refreshes and sync passes, and holds new ones off until it is
// done; commands in the sandbox work on the mount and are not waited for:
// their files open from before fail with EIO afterwards, as any
// program's.
func (w *Workspace) Rollback(name string) (RollbackResult, error) {
	if w.mount == nil {
		return RollbackResult{}, ErrNotMounted
	}
	start := time.Now()
	w.callMu.Lock()
	defer w.callMu.Unlock()
	w.refreshMu.Lock()
	defer w.refreshMu.Unlock()
	info, again, err := w.mount.Rollback(name)
	if again != nil {
		time.AfterFunc(invalidateAgain, func() {
			w.callMu.RLock()
			defer w.callMu.RUnlock()
			if !w.closed {
				again()
			}
		})
	}
	if err != nil {
		return RollbackResult{}, err
	}
	w.log.Info("rolled back", "snapshot", name, "seq", info.Seq, "took", time.Since(start))
	return RollbackResult{RollbackInfo: info, DurationMs: time.Since(start).Milliseconds()}, nil
}

// serveRollback adds the rollback endpoint to the control socket.
func (w *Workspace) serveRollback(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/rollback", func(rw http.ResponseWriter, r *http.Request) {
		res, err := w.Rollback(r.URL.Query().Get("name"))
		if err != nil {
			httpError(rw, err)
			return
		}
		writeJSON(rw, res)
	})
}

// Rollback asks the daemon to put its workspace back to the snapshot name.
func (c *Client) Rollback(ctx context.Context, name string) (RollbackResult, error) {
	var res RollbackResult
	return res, c.call(ctx, http.MethodPost, "/v1/rollback?"+url.Values{"name": {name}}.Encode(), &res)
}
