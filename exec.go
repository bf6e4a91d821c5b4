package computerfs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/computerfs/computerfs/internal/execwire"
	"github.com/computerfs/computerfs/sandbox"
	"github.com/computerfs/computerfs/sandbox/backend"
	"github.com/computerfs/computerfs/sandbox/shell"
)

// ExecRequest is a command to run on the workspace, and ExecResult how it
// ended: the exec call's messages, defined with the thin client's
// (internal/execwire) so that the daemon and its clients cannot drift.
type (
	ExecRequest = execwire.Request
	ExecResult  = execwire.Result
	// execEvent is one line of the streamed answer: output, or the end.
	execEvent = execwire.Event
)

var execSeq atomic.Uint64

// SandboxOptions configure the daemon's sandbox backend: what every
// sandboxed command shares.
type SandboxOptions struct {
	// Base is the sandbox's options: rootfs, user, limits, state
	// directory. Base.User nil: the workspace's agent (sandbox.DefaultUser
	// inside, the agent's uid and gid on the host).
	Base sandbox.Options
	// AllowNetwork lets a request ask for the host's network.
	AllowNetwork bool
	// Warm is how many sandboxes wait, pre-started, for the next command
	// (0: every command starts its sandbox). A command that asks for the
	// host's network starts cold.
	Warm int
	// CacheSize is the size of the workspace's cache volume, where its
	// sandboxes keep the Go, npm, pip and cargo caches from one command
	// to the next (see sandbox.OpenCache): 0 is sandbox.DefaultCacheSize,
	// negative none (the caches go with each sandbox's /tmp).
	CacheSize int64
}

// cacheImage is the cache volume's image in the store directory.
const cacheImage = "sandbox-cache.img"

// cacheMinFree is what the store's file system keeps free once a cache
// volume is allocated on it.
const cacheMinFree = 512 << 20

// setBackends makes the workspace's exec backends: the shell fast path
// always, the sandbox when the daemon was started with one and other
// users (the sandbox's) can use the mount.
func (w *Workspace) setBackends(opts MountOptions) {
	git := newGitIdentity(w.spec)
	w.shell = &shell.Backend{FS: w.FS.ForAgent().WithPolicy(w.rules),
		Opts: shell.Options{GitName: git.name, GitEmail: git.email, GitDirs: git.dirs}}
	switch {
	case w.Mountpoint == "":
		w.noSandbox = "the workspace is not mounted (the sandbox runs on the mount)"
	case opts.Sandbox == nil:
		w.noSandbox = "the daemon was started without the sandbox backend"
	case opts.Private:
		w.noSandbox = "the mount is private (--private), so the sandbox's users cannot reach it"
	default:
		sb := &workspaceSandbox{agent: w.agent, sb: sandbox.Backend{Workspace: w.Mountpoint, Base: opts.Sandbox.Base}, log: w.log}
		sb.sb.Base.GitConfig, sb.sb.Base.GitConfigIncludes = git.sandboxConfig()
		if opts.Sandbox.CacheSize >= 0 {
			state := opts.Sandbox.Base.StateDir
			if state == "" {
				state = sandbox.DefaultStateDir
			}
			h := sha256.Sum256([]byte(w.Store.Dir()))
			sb.cacheOpts = &sandbox.CacheOptions{
				Image:      filepath.Join(w.Store.Dir(), cacheImage),
				Mountpoint: filepath.Join(state, "caches", hex.EncodeToString(h[:8])),
				Size:       opts.Sandbox.CacheSize,
				Owner:      sandbox.User{UID: w.agent.UID, GID: w.agent.GID},
				MinFree:    cacheMinFree,
			}
		}
		if opts.Sandbox.Warm > 0 {
			sb.warm = &warmPool{size: opts.Sandbox.Warm, idle: warmIdle, log: w.log}
		}
		w.sandbox = sb
		w.allowNetwork = opts.Sandbox.AllowNetwork
		// which and command -v on the fast path find what the sandbox has
		rootfs := opts.Sandbox.Base.Rootfs
		w.shell.Opts.SandboxProgram = func(p string) bool { return sandbox.HasProgram(rootfs, p) }
	}
}

// sandboxGCInterval is how often a daemon looks for what dead daemons'
// sandboxes left: once at the start, then at this interval, so that a
// sandbox that was being created when its daemon died (it has no state
// yet, and sandbox.GC leaves such a sandbox alone for a minute) goes too.
const sandboxGCInterval = 5 * time.Minute

// collectSandboxes removes, until ctx ends, what the sandboxes of daemons
// that died (a SIGKILL, a crash) left in the state directory: their state
// and cgroups. It leaves the sandboxes of live daemons alone (sandbox.GC).
func (w *Workspace) collectSandboxes(ctx context.Context, stateDir string) {
	for {
		removed, err := sandbox.GC(stateDir)
		if len(removed) > 0 {
			w.log.Info("removed the sandboxes of dead daemons", "count", len(removed))
		}
		if err != nil {
			w.log.Warn("sandbox leftovers", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(sandboxGCInterval):
		}
	}
}

// endCommands stops the commands that run (their sandboxes die with
// them) and ends the warm sandboxes: the workspace is going away.
func (w *Workspace) endCommands() {
	if w.stopExec != nil {
		w.stopExec()
	}
	w.closePool()
}

// closePool ends the warm sandboxes, if any. Each holds the mount in its
// own mount namespace, so they must go before the file system can be
// unmounted.
func (w *Workspace) closePool() {
	if sb, ok := w.sandbox.(*workspaceSandbox); ok {
		if sb.warm != nil {
			sb.warm.close()
		}
		sb.closeCache()
	}
}

// warmIdle: warm sandboxes are kept this long after the last sandboxed
// command, so an idle workspace holds none.
const warmIdle = 2 * time.Minute

// warmPool keeps a sandbox.Pool while the workspace uses its sandbox: the
// pool starts after the first sandboxed command and ends after warmIdle
// without one.
type warmPool struct {
	size int
	idle time.Duration
	log  *slog.Logger

	mu     sync.Mutex
	pool   *sandbox.Pool
	timer  *time.Timer
	closed bool
}

// get returns the pool, or nil if there is none now.
func (p *warmPool) get() *sandbox.Pool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pool
}

// used starts the pool if there is none, with the options of the command
// that just ran, and restarts the idle clock.
func (p *warmPool) used(o sandbox.Options) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	if p.pool == nil {
		o.Network = sandbox.NetworkNone
		pool, err := sandbox.NewPool(sandbox.PoolOptions{Options: o, Size: p.size})
		if err != nil {
			p.log.Warn("no warm sandboxes: every command starts its own", "err", err)
			return
		}
		p.pool = pool
	}
	if p.timer == nil {
		p.timer = time.AfterFunc(p.idle, p.expire)
	} else {
		p.timer.Reset(p.idle)
	}
}

func (p *warmPool) expire() {
	p.mu.Lock()
	pool := p.pool
	p.pool = nil
	p.mu.Unlock()
	if pool != nil {
		pool.Close()
	}
}

func (p *warmPool) close() {
	p.mu.Lock()
	p.closed = true
	if p.timer != nil {
		p.timer.Stop()
	}
	p.mu.Unlock()
	p.expire()
}

// workspaceSandbox is the sandbox backend that, unless told a user, runs
// commands as the workspace's agent.
type workspaceSandbox struct {
	agent Agent
	sb    sandbox.Backend
	warm  *warmPool // nil: no warm sandboxes
	log   *slog.Logger

	cacheOpts *sandbox.CacheOptions // nil: no cache volume
	cacheMu   sync.Mutex
	cache     *sandbox.CacheVolume // mounted at the first sandboxed command
	cacheErr  error                // why it could not be; not tried again
	cacheDone bool                 // closed: the workspace is going away
}

// cacheDir is the host directory of the workspace's cache volume,
// mounting it if this is the first sandboxed command; "" if there is none
// (the commands then run without one, as they did before).
func (s *workspaceSandbox) cacheDir() string {
	if s.cacheOpts == nil {
		return ""
	}
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	if s.cache == nil && s.cacheErr == nil && !s.cacheDone {
		start := time.Now()
		s.cache, s.cacheErr = sandbox.OpenCache(*s.cacheOpts)
		if s.cacheErr != nil {
			s.log.Warn("no cache volume: sandboxed commands keep their caches in their /tmp", "err", s.cacheErr)
		} else {
			s.log.Info("cache volume mounted", "image", s.cacheOpts.Image, "dir", s.cache.Dir(), "size", s.cacheOpts.Size,
				"new", s.cache.Fresh, "took", time.Since(start).Round(time.Millisecond))
		}
	}
	if s.cache == nil {
		return ""
	}
	return s.cache.Dir()
}

func (s *workspaceSandbox) closeCache() {
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	s.cacheDone = true
	if s.cache != nil {
		if err := s.cache.Close(); err != nil {
			s.log.Warn("cache volume unmount", "err", err)
		}
		s.cache = nil
	}
}

func (s *workspaceSandbox) Name() string { return s.sb.Name() }

func (s *workspaceSandbox) Exec(ctx context.Context, command string, opts backend.Options) (backend.Result, error) {
	b := s.sb
	b.Base = s.options()
	if s.warm == nil {
		return b.Exec(ctx, command, opts)
	}
	b.Pool = s.warm.get()
	if b.Pool == nil {
		// The pool starts now, with this command cold: its sandboxes are
		// ready by the next one unless this one is shorter than their
		// start (go test ./... right after a first build would wait
		// for one otherwise).
		o := b.Base
		o.Workspace = b.Workspace
		s.warm.used(o)
	}
	res, err := b.Exec(ctx, command, opts)
	if errors.Is(err, sandbox.ErrPoolClosed) { // it expired meanwhile
		b.Pool = nil
		res, err = b.Exec(ctx, command, opts)
	}
	if err == nil {
		o := b.Base
		o.Workspace = b.Workspace
		s.warm.used(o)
	}
	return res, err
}

// options are the sandbox's options for a command.
func (s *workspaceSandbox) options() sandbox.Options {
	o := s.sb.Base
	if o.User == nil {
		o.User, o.HostUser = agentUser(s.agent)
		if o.HostUser != nil {
			o.IDs = s.agent.sandboxIDs()
		}
		// The cache volume is the agent's: only the agent gets it.
		o.Cache = s.cacheDir()
	}
	return o
}

// agentUser is who sandboxed commands run as: sandbox.DefaultUser inside,
// the agent on the host. An agent of the sandbox's shared range (mount
// --owner 101000:101000 made such workspaces) is its inside id there.
func agentUser(a Agent) (inside, host *sandbox.User) {
	u, g := sandbox.InsideID(a.UID)
	gid, h := sandbox.InsideID(a.GID)
	if g && h {
		return &sandbox.User{UID: u, GID: gid}, nil
	}
	in := sandbox.DefaultUser
	return &in, &sandbox.User{UID: a.UID, GID: a.GID}
}

// route picks the backend for a request. The network asked for is the
// sandbox's: it does not decide the backend (the fast path has no network
// commands, so a script that needs the network goes to the sandbox
// anyway).
func (w *Workspace) route(req *ExecRequest) (b backend.Backend, why string, err error) {
	switch req.Network {
	case "", "none", "host":
	default:
		return nil, "", fmt.Errorf("network %q: want none or host", req.Network)
	}
	switch req.Backend {
	case "", "auto":
		ok, reason := w.shell.CanRunIn(req.Cwd, req.Command)
		if ok {
			return w.shell, "every command in the script is built into the fast path", nil
		}
		if w.sandbox == nil {
			return nil, "", fmt.Errorf("auto: %s, which needs the sandbox, and %s", reason, w.noSandbox)
		}
		b, why = w.sandbox, reason
	case "shell":
		return w.shell, "asked for", nil
	case "sandbox":
		if w.sandbox == nil {
			return nil, "", errors.New("no sandbox backend: " + w.noSandbox)
		}
		b, why = w.sandbox, "asked for"
	default:
		return nil, "", fmt.Errorf("unknown backend %q (shell, sandbox or auto)", req.Backend)
	}
	if req.Network == "host" && !w.allowNetwork {
		return nil, "", errors.New("network host: the daemon does not allow the sandbox the host's network (mount --sandbox-network)")
	}
	return b, why, nil
}

// Exec runs a command on the workspace, its output going to stdout and
// stderr as it comes. The shell fast path's changes are journaled as the
// entry point "shell" and the result's request id; the sandbox's come
// through the mount and name the sandbox.
func (w *Workspace) Exec(ctx context.Context, req ExecRequest, stdout, stderr io.Writer) (ExecResult, error) {
	b, why, err := w.route(&req)
	if err != nil {
		return ExecResult{}, err
	}
	var timeout time.Duration
	if req.Timeout != "" {
		if timeout, err = time.ParseDuration(req.Timeout); err != nil || timeout < 0 {
			return ExecResult{}, fmt.Errorf("timeout %q: want a duration such as 30s", req.Timeout)
		}
	}
	// The checkpoint before the command (the policy's checkpoint:
	// each-call): taken already if a tool call runs it, and then a look
	// at the journal's end.
	label := "exec " + cutLabel(req.Command)
	w.ckpt.before(label)
	defer w.ckpt.after(label)
	if b.Name() == "shell" && ctx.Value(callsHeld{}) == nil {
		w.callMu.RLock() // a rollback waits for the call (rollback.go)
		defer w.callMu.RUnlock()
	}
	id := strconv.FormatUint(execSeq.Add(1), 10)
	if w.execCtx != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(w.execCtx, cancel)()
		if w.execCtx.Err() != nil {
			return ExecResult{}, errors.New("the workspace is shutting down")
		}
	}
	// No stdin in the request is none at all (nil: /dev/null in the
	// sandbox), not an empty pipe: a program that reads its input when it
	// is a pipe (rg PATTERN, with no path) must see that there is none.
	var stdin io.Reader
	if len(req.Stdin) > 0 {
		stdin = bytes.NewReader(req.Stdin)
	}
	res, err := b.Exec(ctx, req.Command, backend.Options{Cwd: req.Cwd, Env: req.Env,
		Stdin: stdin, Stdout: stdout, Stderr: stderr, Timeout: timeout,
		Network: req.Network, Request: id})
	if err != nil {
		if w.execCtx != nil && w.execCtx.Err() != nil {
			return ExecResult{}, errors.New("the workspace was shut down while the command ran")
		}
		return ExecResult{}, err
	}
	return ExecResult{ExitCode: res.ExitCode, Backend: b.Name(), Why: why, DurationMs: res.Duration.Milliseconds(),
		Truncated: res.Truncated, Stopped: res.Stopped, Request: id,
		PeakMemory: res.PeakMemory, CPUTimeMs: res.CPUTime.Milliseconds(), Warm: res.Warm}, nil
}

// eventWriter streams one of a command's outputs as events.
type eventWriter struct {
	mu     *sync.Mutex
	enc    *json.Encoder
	flush  func()
	stderr bool
}

func (e *eventWriter) Write(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ev := execEvent{Out: p}
	if e.stderr {
		ev = execEvent{Err: p}
	}
	if err := e.enc.Encode(ev); err != nil {
		return 0, err
	}
	e.flush()
	return len(p), nil
}

const maxExecRequest = execwire.MaxRequest

func (w *Workspace) serveExec(rw http.ResponseWriter, r *http.Request) {
	var req ExecRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, maxExecRequest)).Decode(&req); err != nil {
		http.Error(rw, "exec request: "+err.Error(), http.StatusBadRequest)
		return
	}
	if _, _, err := w.route(&req); err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	rw.Header().Set("Content-Type", "application/x-ndjson")
	flusher, _ := rw.(http.Flusher)
	flush := func() {
		if flusher != nil {
			flusher.Flush()
		}
	}
	var mu sync.Mutex
	enc := json.NewEncoder(rw)
	res, err := w.Exec(r.Context(), req, &eventWriter{mu: &mu, enc: enc, flush: flush}, &eventWriter{mu: &mu, enc: enc, flush: flush, stderr: true})
	mu.Lock()
	defer mu.Unlock()
	if err != nil {
		enc.Encode(execEvent{Error: err.Error()})
	} else {
		enc.Encode(execEvent{Result: &res})
	}
	flush()
}

// Exec asks the daemon to run a command, copying its output to stdout and
// stderr as it comes.
func (c *Client) Exec(ctx context.Context, req ExecRequest, stdout, stderr io.Writer) (ExecResult, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return ExecResult{}, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://computerfs/v1/exec", bytes.NewReader(body))
	if err != nil {
		return ExecResult{}, err
	}
	resp, err := c.hc.Do(hr)
	if err != nil {
		return ExecResult{}, c.transportErr(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return ExecResult{}, errors.New(strings.TrimSpace(string(msg)))
	}
	res, transport, err := execwire.ReadAnswer(resp.Body, stdout, stderr)
	if transport {
		return ExecResult{}, c.lost(err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10)) // to the end, so the connection is reused
	return res, err
}
