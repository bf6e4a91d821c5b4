package computerfs

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/sandbox/shell"
)

// ExecRequest is a command to run on the workspace.
type ExecRequest struct {
	Command string   `json:"command"`
	Backend string   `json:"backend,omitempty"` // "shell", "sandbox" or "auto" (default)
	Cwd     string   `json:"cwd,omitempty"`     // default /workspace
	Env     []string `json:"env,omitempty"`
	Timeout string   `json:"timeout,omitempty"` // a Go duration
	Stdin   []byte   `json:"stdin,omitempty"`
}

// ExecResult is how a command ended.
type ExecResult struct {
	ExitCode   int    `json:"exit_code"`
	Backend    string `json:"backend"`
	Why        string `json:"why"` // why that backend
	DurationMs int64  `json:"duration_ms"`
	Truncated  bool   `json:"truncated,omitempty"`
	Stopped    string `json:"stopped,omitempty"`
	Request    string `json:"request"` // the id the journal names its changes by
}

// execEvent is one line of the streamed answer: output, or the end.
type execEvent struct {
	Out    []byte      `json:"out,omitempty"`
	Err    []byte      `json:"err,omitempty"`
	Result *ExecResult `json:"result,omitempty"`
	Error  string      `json:"error,omitempty"`
}

var execSeq atomic.Uint64

// errNoSandbox: the daemon cannot run the sandbox backend yet.
var errNoSandbox = errors.New("the sandbox backend is not wired into the daemon yet: run native programs with sandboxctl run -w MOUNTPOINT")

// route picks the backend for a request. auto reads the script files the
// command runs (shell.Shell.CanRunIn) as they are in the workspace now.
func (w *Workspace) route(req *ExecRequest) (backend, why string, err error) {
	switch req.Backend {
	case "", "auto":
		fs := w.FS.As(kv.Actor{Entry: "shell"})
		fs.SetRootPrefix("/workspace")
		if ok, reason := shell.New(fs, shell.Options{}).CanRunIn(req.Cwd, req.Command); !ok {
			return "", "", fmt.Errorf("auto: %s, which needs the sandbox; %w", reason, errNoSandbox)
		}
		return "shell", "every command in the script is built into the fast path", nil
	case "shell":
		return "shell", "asked for", nil
	case "sandbox":
		return "", "", errNoSandbox
	}
	return "", "", fmt.Errorf("unknown backend %q (shell, sandbox or auto)", req.Backend)
}

// Exec runs a command on the workspace, its output going to stdout and
// stderr as it comes. Changes are journaled as the entry point "shell" and
// the result's request id.
func (w *Workspace) Exec(ctx context.Context, req ExecRequest, stdout, stderr io.Writer) (ExecResult, error) {
	backend, why, err := w.route(&req)
	if err != nil {
		return ExecResult{}, err
	}
	var timeout time.Duration
	if req.Timeout != "" {
		if timeout, err = time.ParseDuration(req.Timeout); err != nil || timeout < 0 {
			return ExecResult{}, fmt.Errorf("timeout %q: want a duration such as 30s", req.Timeout)
		}
	}
	id := strconv.FormatUint(execSeq.Add(1), 10)
	fs := w.FS.As(kv.Actor{Entry: "shell", Request: id})
	fs.SetRootPrefix("/workspace")
	sh := shell.New(fs, shell.Options{})
	res, err := sh.Exec(ctx, req.Command, shell.ExecOptions{Cwd: req.Cwd, Env: req.Env,
		Stdin: bytes.NewReader(req.Stdin), Stdout: stdout, Stderr: stderr, Timeout: timeout})
	if err != nil {
		return ExecResult{}, err
	}
	return ExecResult{ExitCode: res.ExitCode, Backend: backend, Why: why, DurationMs: res.Duration.Milliseconds(),
		Truncated: res.Truncated, Stopped: res.Stopped, Request: id}, nil
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

const maxExecRequest = 32 << 20

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
		return ExecResult{}, fmt.Errorf("control socket: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return ExecResult{}, errors.New(strings.TrimSpace(string(msg)))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), maxExecRequest)
	for sc.Scan() {
		var ev execEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return ExecResult{}, fmt.Errorf("exec answer: %w", err)
		}
		switch {
		case ev.Out != nil:
			stdout.Write(ev.Out)
		case ev.Err != nil:
			stderr.Write(ev.Err)
		case ev.Error != "":
			return ExecResult{}, errors.New(ev.Error)
		case ev.Result != nil:
			return *ev.Result, nil
		}
	}
	if err := sc.Err(); err != nil {
		return ExecResult{}, err
	}
	return ExecResult{}, errors.New("exec: the daemon's answer ended without a result")
}
