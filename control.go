package computerfs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/sources"
	"github.com/computerfs/computerfs/syncer"
	"golang.org/x/sys/unix"
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
//	GET  /v1/audit     the tools' audit records

const controlSocket = "control.sock"

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
	w.control = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := w.control.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			w.log.Error("control socket stopped", "err", err)
		}
	}()
	return nil
}

func (w *Workspace) stopControl() {
	if w.control != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		w.control.Shutdown(ctx)
		os.Remove(filepath.Join(w.Store.Dir(), controlSocket))
	}
}

// maxSocketPath is the longest path a unix socket address holds (sun_path
// is 108 bytes, with a terminating NUL).
const maxSocketPath = 107

// withSocketAddr calls f with an address for the unix socket at path (to
// bind or to connect): the path itself, or, when that is too long for a
// socket address (a store deep in a directory tree), the same file reached
// through a descriptor of its directory, /proc/self/fd/N/NAME, which is
// open only while f runs.
func withSocketAddr(path string, f func(addr string) error) error {
	if len(path) <= maxSocketPath {
		return f(path)
	}
	dir, err := os.OpenFile(filepath.Dir(path), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer dir.Close()
	addr := fmt.Sprintf("/proc/self/fd/%d/%s", dir.Fd(), filepath.Base(path))
	if len(addr) > maxSocketPath {
		return fmt.Errorf("socket path %s: name too long", path)
	}
	return f(addr)
}

func writeJSON(rw http.ResponseWriter, v any) {
	rw.Header().Set("Content-Type", "application/json")
	json.NewEncoder(rw).Encode(v)
}

// Status describes the workspace.
func (w *Workspace) Status() Status {
	st := Status{Mountpoint: w.Mountpoint, Store: w.Store.Dir(), Pid: os.Getpid(), Agent: w.agent, Sources: []SourceStatus{},
		Usage: w.Store.UsageDetail()}
	states := map[string]*syncer.SourceStatus{}
	if w.syncer != nil {
		for _, ss := range w.syncer.Status() {
			states[ss.Path] = &ss
		}
	}
	if w.spec != nil {
		for _, s := range w.spec.Sources {
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
			st.Sources = append(st.Sources, ss)
		}
	}
	return st
}

// Refresh brings upstream changes into the workspace's sources (see
// sources.Refresher); the mount's caches are told of every change.
func (w *Workspace) Refresh(ctx context.Context) (sources.RefreshReport, error) {
	if w.spec == nil {
		return sources.RefreshReport{}, errors.New("the workspace was not imported from a spec: no sources to refresh")
	}
	w.refreshMu.Lock()
	defer w.refreshMu.Unlock()
	r := &sources.Refresher{FS: w.FS.As(refreshActor()), Spec: w.spec, Log: w.log, HTTPClient: w.httpClient}
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
	hc *http.Client
}

// Dial finds the daemon serving the computerfs mount at mountpoint.
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
		return nil, fmt.Errorf("workspace at %s: no control socket (%w)", mp, err)
	}
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (c net.Conn, err error) {
		err = withSocketAddr(sock, func(addr string) (err error) {
			var d net.Dialer
			c, err = d.DialContext(ctx, "unix", addr)
			return err
		})
		return c, err
	}}
	return &Client{hc: &http.Client{Transport: tr}}, nil
}

func (c *Client) call(ctx context.Context, method, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, "http://computerfs"+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return fmt.Errorf("workspace daemon: %s", strings.TrimSpace(string(msg)))
	}
	return json.NewDecoder(resp.Body).Decode(out)
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
	st, err := openStore(store, opts)
	if err != nil {
		return sources.RefreshReport{}, err
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
			agent = Agent{a.Uid, a.Gid}
		}
	}
	r := &sources.Refresher{FS: newFS(st, agent).As(refreshActor()), Spec: sp, Log: opts.Logger, HTTPClient: opts.HTTPClient}
	return r.Run(ctx)
}
