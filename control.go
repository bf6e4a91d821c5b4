package computerfs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/computerfs/computerfs/fs"
	"github.com/computerfs/computerfs/internal/execwire"
	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/sources"
	"github.com/computerfs/computerfs/spec"
	"github.com/computerfs/computerfs/syncer"
)

// The control socket: a running workspace's daemon answers HTTP+JSON on a
// unix socket beside its store (STORE/control.sock, mode 0600), for the
// commands that must run inside it (it holds the store). Clients find it
// from the mount point through the mount's source.
//
//	GET  /v1/status    the workspace: mount point, store, pid, sources
//	GET  /v1/log       journal records (?after=SEQ&since=TIME&path=P&limit=N)
//	POST /v1/refresh   bring upstream changes in (sources.RefreshReport)
//	POST /v1/sync      write back everything pending now (syncer.Report)
//	POST /v1/exec      run a command (ExecRequest); the answer streams JSON
//	                   lines: {"out":...}, {"err":...}, then {"result":...}
//	POST /v1/tools/T   call the agent tool T (see tools.go)
//	GET  /v1/tools     the names of the tools the policy offers
//	GET  /v1/audit     the tools' audit records
//	GET  /v1/snapshots, POST /v1/snapshots?name=N, DELETE /v1/snapshots/{name},
//	POST /v1/fork?store=DIR&from=N   snapshots and forks (snapshot.go)
//	POST /v1/rollback?name=N   the mounted workspace back to a snapshot (rollback.go)

const controlSocket = execwire.SocketName

// Status describes a running workspace.
type Status struct {
	Mountpoint string         `json:"mountpoint"`
	Store      string         `json:"store"`
	Pid        int            `json:"pid"`
	Agent      Agent          `json:"agent"` // the workspace's agent identity on the host
	Sources    []SourceStatus `json:"sources"`
	// Usage is what the workspace holds (files, journal, audit) of its
	// quota.
	Usage kv.UsageReport `json:"usage"`
	// Fetch is how far the fetch of a lazily resumed workspace's blobs
	// is; nil once every blob is there (or for a workspace not resumed).
	Fetch *FetchStatus `json:"fetch,omitempty"`
}

// FetchStatus says how far the background fetch of a lazily resumed
// workspace's blobs is.
type FetchStatus struct {
	Owed    int    `json:"owed"`    // blobs still to come
	Fetched int    `json:"fetched"` // blobs fetched (or no longer needed)
	Failed  int    `json:"failed"`  // blobs the image does not give whole: reads of their files fail with EIO
	Bytes   int64  `json:"bytes"`   // received
	Error   string `json:"error,omitempty"`
}

// SourceStatus is one source of the workspace's spec.
type SourceStatus struct {
	Path string `json:"path"`
	Kind string `json:"kind"`
	From string `json:"from"` // url, s3://bucket/prefix, directory
	// Sync says where edits go: "push" (git, not built yet), "write back"
	// (S3) or "none".
	Sync string `json:"sync"`
	// SyncState is the write-back state of a source that has it.
	SyncState *syncer.SourceStatus `json:"sync_state,omitempty"`
}

func (w *Workspace) serveControl() error {
	path := filepath.Join(w.Store.Dir(), controlSocket)
	os.Remove(path) // left by a daemon that was killed
	var l net.Listener
	err := withSocketAddr(path, func(addr string) (err error) {
		l, err = net.Listen("unix", addr)
		return err
	})
	if err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", func(rw http.ResponseWriter, r *http.Request) {
		writeJSON(rw, w.Status())
	})
	mux.HandleFunc("GET /v1/log", w.serveLog)
	mux.HandleFunc("POST /v1/exec", w.serveExec)
	mux.HandleFunc("POST /v1/tools/{name}", w.serveTool)
	mux.HandleFunc("GET /v1/audit", w.serveAudit)
	mux.HandleFunc("GET /v1/tools", w.serveToolNames)
	w.serveSnapshots(mux)
	w.serveRollback(mux)
	w.serveCheckpoints(mux)
	mux.HandleFunc("POST /v1/sync", func(rw http.ResponseWriter, r *http.Request) {
		writeJSON(rw, w.Sync(r.Context()))
	})
	mux.HandleFunc("POST /v1/refresh", func(rw http.ResponseWriter, r *http.Request) {
		rep, err := w.Refresh(r.Context())
		if err != nil {
			http.Error(rw, err.Error(), http.StatusInternalServerError)
			return
		}
		writeJSON(rw, rep)
	})
	w.control = &http.Server{Handler: guardBodies(mux), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: controlIdleTimeout}
	go func() {
		if err := w.control.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			w.log.Error("control socket stopped", "err", err)
		}
	}()
	return nil
}

// Bounds on what a control socket client holds: a connection that made
// its requests is closed after controlIdleTimeout without another; a
// request body must keep coming (a read waits at most controlBodyStall)
// and be in within controlBodyTimeout; at most bigBodies requests with a
// body over smallBody run at once (a body is up to 32 MiB, and its
// request is held decoded for the call's life), the others wait their
// turn.
const (
	controlIdleTimeout = 10 * time.Second
	controlBodyStall   = 30 * time.Second
	controlBodyTimeout = 5 * time.Minute
	smallBody          = 1 << 20
	bigBodies          = 4
)

// guardBodies reads each request's body, under the bounds above, before
// h sees the request.
func guardBodies(h http.Handler) http.Handler {
	big := make(chan struct{}, bigBodies)
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(rw, r)
			return
		}
		rc := http.NewResponseController(rw)
		end := time.Now().Add(controlBodyTimeout)
		buf, err := readBody(rc, r.Body, nil, smallBody+1, end)
		if err == nil && len(buf) > smallBody {
			select {
			case big <- struct{}{}:
				defer func() { <-big }()
			case <-r.Context().Done():
				return
			}
			buf, err = readBody(rc, r.Body, buf, maxExecRequest+1, time.Now().Add(controlBodyTimeout))
		}
		if err != nil {
			http.Error(rw, fmt.Sprintf("request body (%d bytes): %v", len(buf), err), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(buf))
		h.ServeHTTP(rw, r)
	})
}

// readBody appends body to buf until it holds limit bytes or the body
// ends, each read within controlBodyStall and all before end. No
// deadline is left behind: the server's read that watches for the client
// going away must not end the call.
func readBody(rc *http.ResponseController, body io.Reader, buf []byte, limit int, end time.Time) ([]byte, error) {
	defer rc.SetReadDeadline(time.Time{})
	for len(buf) < limit {
		d := time.Now().Add(controlBodyStall)
		if d.After(end) {
			d = end
		}
		rc.SetReadDeadline(d)
		if cap(buf)-len(buf) < 64<<10 {
			buf = slices.Grow(buf, min(max(len(buf), 64<<10), limit-len(buf)))
		}
		n, err := body.Read(buf[len(buf):min(cap(buf), limit)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
	return buf, nil
}

func (w *Workspace) stopControl() {
	if w.control != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		w.control.Shutdown(ctx)
		os.Remove(filepath.Join(w.Store.Dir(), controlSocket))
	}
}

// withSocketAddr calls f with an address for the unix socket at path (see
// execwire.WithSocketAddr).
func withSocketAddr(path string, f func(addr string) error) error {
	return execwire.WithSocketAddr(path, f)
}

func writeJSON(rw http.ResponseWriter, v any) {
	rw.Header().Set("Content-Type", "application/json")
	json.NewEncoder(rw).Encode(v)
}

// Status describes the workspace.
func (w *Workspace) Status() Status {
	states := map[string]*syncer.SourceStatus{}
	if w.syncer != nil {
		for _, ss := range w.syncer.Status() {
			states[ss.Path] = &ss
		}
	}
	st := Status{Mountpoint: w.Mountpoint, Store: w.Store.Dir(), Pid: os.Getpid(), Agent: w.agent, Sources: sourcesStatus(w.spec, states),
		Usage: w.Store.UsageDetail()}
	if w.blobFetch != nil {
		if fs := w.blobFetch.Stats(); fs.Owed > 0 || fs.Failed > 0 {
			st.Fetch = &FetchStatus{Owed: fs.Owed, Fetched: fs.Fetched, Failed: fs.Failed, Bytes: fs.Bytes}
			if fs.Err != nil {
				st.Fetch.Error = fs.Err.Error()
			}
		}
	}
	return st
}

// sourcesStatus describes a spec's sources, with the write-back states
// the syncer has.
func sourcesStatus(sp *spec.Spec, states map[string]*syncer.SourceStatus) []SourceStatus {
	out := []SourceStatus{}
	if sp == nil {
		return out
	}
	for _, s := range sp.Sources {
		ss := SourceStatus{Path: s.Path, Kind: s.Kind(), Sync: "none"}
		switch {
		case s.Git != nil:
			ss.From = s.Git.URL
			if s.Git.Push.On {
				ss.Sync = "push"
				ss.SyncState = states[s.Path]
			}
		case s.S3 != nil:
			ss.From = "s3://" + s.S3.Bucket + "/" + s.S3.Prefix
			if s.S3.WriteBack {
				ss.Sync = "write back"
				ss.SyncState = states[s.Path]
			}
		case s.Dir != "":
			ss.From = s.Dir
		default:
			ss.From = "inline"
		}
		out = append(out, ss)
	}
	return out
}

// OpenExisting opens the store in dir for a command that reads it (log,
// status, fsck): unlike kv.Open it makes no new store where there is none,
// and it neither makes the ballast file nor keeps the free-space reserve
// (kv.Options.Ballast and MinFree), which are the daemon's.
func OpenExisting(dir string, log *slog.Logger) (*kv.Store, error) {
	if err := checkExisting(dir); err != nil {
		return nil, err
	}
	st, err := kv.Open(dir, kv.Options{Logger: log, MinFree: -1, Ballast: -1})
	return st, mountedHint(dir, err)
}

// StoreMountedError is kv.ErrLocked from a command that opens a store
// (OpenExisting, RefreshStore) when the store is mounted.
type StoreMountedError struct {
	Err        error // from kv.Open
	Mountpoint string
}

func (e *StoreMountedError) Error() string {
	return e.Err.Error() + "; it is mounted at " + e.Mountpoint
}
func (e *StoreMountedError) Unwrap() error { return e.Err }

// mountedHint turns kv.ErrLocked into a *StoreMountedError if the store
// is mounted.
func mountedHint(dir string, err error) error {
	if !errors.Is(err, kv.ErrLocked) {
		return err
	}
	if abs, aerr := filepath.Abs(dir); aerr == nil {
		if mp, ok, ferr := fs.FindSource("computerfs:" + abs); ferr == nil && ok {
			return &StoreMountedError{Err: err, Mountpoint: mp}
		}
	}
	return err
}

// checkExisting fails unless dir holds a store.
func checkExisting(dir string) error {
	if _, err := os.Stat(dir); err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("store %s: %w", dir, err)
	}
	if ok, err := kv.IsStore(dir); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("store %s: %w", dir, kv.ErrNotStore)
	}
	return nil
}

// StoreStatus describes the workspace kept in store, whether it is
// mounted or not. A mounted store's daemon is asked (as Dial and
// Client.Status). One that is not mounted is opened here, as `log
// --store` does: its Status has no mount point, pid 0 and no sync state,
// and its usage is measured against the spec's quota (a --quota given to
// the mount is not recorded). It fails with kv.ErrLocked while another
// process (an import, fsck) holds the store without mounting it.
func StoreStatus(ctx context.Context, store string) (Status, error) {
	dir, err := filepath.Abs(store)
	if err != nil {
		return Status{}, err
	}
	if err := checkExisting(dir); err != nil {
		return Status{}, err
	}
	viaDaemon := func() (Status, bool, error) {
		mp, ok, err := fs.FindSource("computerfs:" + dir)
		if err != nil || !ok {
			return Status{}, false, err
		}
		c, err := Dial(mp) // a dead mount: the daemon is gone
		if err != nil {
			return Status{}, true, err
		}
		st, err := c.Status(ctx)
		return st, true, err
	}
	if st, ok, err := viaDaemon(); ok || err != nil {
		return st, err
	}
	st, err := OpenExisting(dir, slog.New(slog.DiscardHandler))
	if errors.Is(err, kv.ErrLocked) { // mounted meanwhile?
		if st, ok, err := viaDaemon(); ok {
			return st, err
		}
	}
	if err != nil {
		return Status{}, err
	}
	defer st.Close()
	sp, err := storedSpec(st)
	if err != nil {
		return Status{}, err
	}
	agent, ok, err := storedAgent(st)
	if err != nil {
		return Status{}, err
	}
	if !ok { // a store from before agent identities: its root's owner
		if a, err := st.GetAttr(kv.RootIno); err == nil {
			agent = Agent{UID: a.Uid, GID: a.Gid}
		}
	}
	if sp != nil {
		st.SetQuota(int64(sp.Quota))
	}
	return Status{Store: dir, Agent: agent, Sources: sourcesStatus(sp, nil), Usage: st.UsageDetail()}, nil
}

// Refresh brings upstream changes into the workspace's sources (see
// sources.Refresher); the mount's caches are told of every change.
func (w *Workspace) Refresh(ctx context.Context) (sources.RefreshReport, error) {
	if w.spec == nil {
		return sources.RefreshReport{}, errors.New("the workspace was not imported from a spec: no sources to refresh")
	}
	w.refreshMu.Lock()
	defer w.refreshMu.Unlock()
	r := &sources.Refresher{FS: w.FS.As(refreshActor()), Spec: w.spec, Rules: w.rules, Log: w.log, HTTPClient: w.httpClient}
	return r.Run(ctx)
}

// refreshSeq numbers refreshes (from 1 in each process, as execSeq numbers
// the shell's commands): a refresh's changes are journaled as "refresh #N".
var refreshSeq atomic.Uint64

func refreshActor() kv.Actor {
	return kv.Actor{Entry: "refresh", Request: strconv.FormatUint(refreshSeq.Add(1), 10)}
}

// Client talks to a running workspace's daemon.
type Client struct {
	hc        *http.Client
	mp, store string
	pid       int // the daemon's, when Dial found it
	// the optional tools the daemon offers (Offers), asked once
	offerOnce sync.Once
	offered   []string
}

// DaemonGoneError is what Dial and the Client's calls return when the
// computerfs mount at Mountpoint has no daemon answering for it any more
// (killed, crashed): its control socket is refused or missing. Mounting
// the store again replaces the dead mount.
type DaemonGoneError = execwire.DaemonGoneError

// gone tells whether a failure to reach the control socket means that the
// daemon is gone, and if so returns the error that says so.
func gone(mp, store string, err error) error { return execwire.Gone(mp, store, err) }

// lost is the error of a call whose connection broke off (err): a
// *DaemonGoneError if the daemon that was asked has ended.
func (c *Client) lost(err error) error { return execwire.Lost(c.mp, c.store, c.pid, err) }

// transportErr is the error of a call that did not reach the daemon.
func (c *Client) transportErr(err error) error {
	var g *DaemonGoneError
	if errors.As(err, &g) {
		return g
	}
	return c.lost(fmt.Errorf("control socket: %w", err))
}

// Dial finds the daemon serving the computerfs mount at mountpoint. If
// the mount's daemon is gone, the error is a *DaemonGoneError.
func Dial(mountpoint string) (*Client, error) {
	mp, err := filepath.Abs(mountpoint)
	if err != nil {
		return nil, err
	}
	store, err := mountedStore(mp)
	if err != nil {
		return nil, err
	}
	sock := filepath.Join(store, controlSocket)
	if _, err := os.Stat(sock); err != nil {
		if g := gone(mp, store, err); g != nil {
			return nil, g
		}
		return nil, fmt.Errorf("workspace at %s: no control socket (%w)", mp, err)
	}
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (c net.Conn, err error) {
		err = withSocketAddr(sock, func(addr string) (err error) {
			var d net.Dialer
			c, err = d.DialContext(ctx, "unix", addr)
			return err
		})
		if g := gone(mp, store, err); g != nil {
			return nil, g
		}
		return c, err
	}}
	c := &Client{hc: &http.Client{Transport: tr}, mp: mp, store: store, pid: storePid(store)}
	// Find out now whether anybody answers, so that every command says
	// so before it does anything else.
	conn, err := tr.DialContext(context.Background(), "unix", "")
	if err != nil {
		return nil, c.transportErr(err)
	}
	conn.Close()
	return c, nil
}

func (c *Client) call(ctx context.Context, method, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, "http://computerfs"+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return c.transportErr(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return fmt.Errorf("workspace daemon: %s", strings.TrimSpace(string(msg)))
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return c.lost(fmt.Errorf("workspace daemon's answer: %w", err))
	}
	return nil
}

// Status asks the daemon to describe its workspace.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var st Status
	return st, c.call(ctx, http.MethodGet, "/v1/status", &st)
}

// Refresh asks the daemon to refresh its sources.
func (c *Client) Refresh(ctx context.Context) (sources.RefreshReport, error) {
	var rep sources.RefreshReport
	return rep, c.call(ctx, http.MethodPost, "/v1/refresh", &rep)
}

// Sync asks the daemon to write back everything pending now.
func (c *Client) Sync(ctx context.Context) (syncer.Report, error) {
	var rep syncer.Report
	return rep, c.call(ctx, http.MethodPost, "/v1/sync", &rep)
}

// RefreshStore refreshes the sources of a store that is not mounted.
func RefreshStore(ctx context.Context, store string, opts MountOptions) (sources.RefreshReport, error) {
	if err := checkExisting(store); err != nil {
		return sources.RefreshReport{}, err
	}
	st, err := openStore(store, opts)
	if err != nil {
		return sources.RefreshReport{}, mountedHint(store, err)
	}
	defer st.Close()
	sp, err := storedSpec(st)
	if err != nil {
		return sources.RefreshReport{}, err
	}
	if sp == nil {
		return sources.RefreshReport{}, errors.New("the store was not imported from a spec: no sources to refresh")
	}
	st.SetFetcher(sources.NewFetcher(sp, opts.HTTPClient).Fetch)
	agent, ok, err := storedAgent(st)
	if err != nil {
		return sources.RefreshReport{}, err
	}
	if !ok { // a store from before agent identities: its root's owner
		if a, err := st.GetAttr(kv.RootIno); err == nil {
			agent = Agent{UID: a.Uid, GID: a.Gid}
		}
	}
	r := &sources.Refresher{FS: newFS(st, agent).As(refreshActor()), Spec: sp, Log: opts.Logger, HTTPClient: opts.HTTPClient}
	return r.Run(ctx)
}
