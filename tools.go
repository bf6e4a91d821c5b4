package computerfs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/computerfs/computerfs/internal/textsafe"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/spec"
	"github.com/computerfs/computerfs/tools"
)

// The agent tools run in the daemon, on the store (package tools); the
// control socket takes calls by name, so that `computerfs mcp`, a
// separate process, serves them over MCP:
//
//	POST /v1/tools/NAME   arguments as JSON; answer {"result": ...} or
//	                      {"error": "...", "refused": "RULE"}; with
//	                      ?progress=1, JSON lines {"progress": ...} come
//	                      before it while exec runs (tools.Progress)
//	GET  /v1/audit        audit records (?after=ID&limit=N)

// newTools makes the workspace's tools, with the stored spec's policy.
func newTools(w *Workspace) (*tools.Tools, error) {
	var pol *spec.Policy
	if w.spec != nil {
		pol = w.spec.Policy
	}
	opts := tools.Options{Policy: pol, Rules: w.rules, Run: w.runTool, Log: w.log}
	if w.ckpt != nil {
		opts.Checkpoint, opts.AfterCall, opts.Checkpoints = w.ckpt.before, w.ckpt.after, checkpointTools{w}
	}
	return tools.New(w.FS.ForAgent(), opts)
}

// runTool is exec's backend: Workspace.Exec.
func (w *Workspace) runTool(ctx context.Context, r tools.RunRequest, stdout, stderr io.Writer) (tools.RunResult, error) {
	req := ExecRequest{Command: r.Command, Backend: r.Backend, Cwd: r.Cwd, Env: r.Env, Stdin: r.Stdin, Network: r.Network}
	if r.Timeout > 0 {
		req.Timeout = r.Timeout.String()
	}
	res, err := w.Exec(ctx, req, stdout, stderr)
	if err != nil {
		return tools.RunResult{}, err
	}
	out := tools.RunResult{ExitCode: res.ExitCode, Backend: res.Backend, Stopped: res.Stopped}
	if res.Backend == "shell" {
		out.Actor = kv.Actor{Entry: "shell", Request: res.Request}
	}
	return out, nil
}

// Tools returns the workspace's agent tools.
func (w *Workspace) Tools() *tools.Tools { return w.tools }

// toolAnswer is the control socket's answer to a tool call.
type toolAnswer struct {
	Result   json.RawMessage `json:"result,omitempty"`
	Error    string          `json:"error,omitempty"`
	Refused  string          `json:"refused,omitempty"`
	Progress *tools.Progress `json:"progress,omitempty"`
}

// progressWriteTimeout bounds the write of one progress line to a client
// of the control socket that does not read: the call goes on without
// progress past it.
const progressWriteTimeout = 30 * time.Second

func (w *Workspace) serveTool(rw http.ResponseWriter, r *http.Request) {
	args, err := io.ReadAll(io.LimitReader(r.Body, maxExecRequest+1))
	if err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	if len(args) > maxExecRequest {
		writeJSON(rw, toolAnswer{Error: fmt.Sprintf("arguments over %d bytes", maxExecRequest)})
		return
	}
	ctx := r.Context()
	if r.URL.Query().Get("progress") == "1" {
		rc := http.NewResponseController(rw)
		rw.Header().Set("Content-Type", "application/x-ndjson")
		enc := json.NewEncoder(rw)
		broken := false
		// The tool calls this from one goroutine at a time and never
		// after it returns.
		ctx = tools.WithProgress(ctx, func(p tools.Progress) {
			if broken {
				return
			}
			rc.SetWriteDeadline(time.Now().Add(progressWriteTimeout))
			if enc.Encode(toolAnswer{Progress: &p}) != nil || rc.Flush() != nil {
				broken = true
			}
			rc.SetWriteDeadline(time.Time{})
		})
	}
	var res json.RawMessage
	if name := r.PathValue("name"); name == "undo" {
		res, err = w.tools.Call(ctx, name, args) // a rollback: it waits for the others
	} else {
		w.callMu.RLock() // a rollback waits for the call (rollback.go)
		res, err = w.tools.Call(context.WithValue(ctx, callsHeld{}, true), name, args)
		w.callMu.RUnlock()
	}
	if err != nil {
		ans := toolAnswer{Error: err.Error()}
		var rf *tools.Refusal
		if errors.As(err, &rf) {
			ans.Refused = rf.Rule
		}
		writeJSON(rw, ans)
		return
	}
	writeJSON(rw, toolAnswer{Result: res})
}

func (w *Workspace) serveAudit(rw http.ResponseWriter, r *http.Request) {
	after, _ := strconv.ParseUint(r.URL.Query().Get("after"), 10, 64)
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	recs, err := ReadAudit(w.Store, after, limit)
	if err != nil {
		http.Error(rw, err.Error(), http.StatusInternalServerError)
		return
	}
	writeJSON(rw, recs)
}

// ReadAudit returns up to limit audit records after the id after (limit
// 0: 1000).
func ReadAudit(st *kv.Store, after uint64, limit int) ([]kv.AuditRecord, error) {
	if limit <= 0 || limit > maxLogLimit {
		limit = 1000
	}
	out := []kv.AuditRecord{}
	err := st.ReadAudit(after, func(r kv.AuditRecord) bool {
		out = append(out, r)
		return len(out) < limit
	})
	return out, err
}

// ToolError is a tool call that failed or was refused.
type ToolError struct {
	Msg     string
	Refused string // the rule, when the policy refused the call
}

func (e *ToolError) Error() string { return e.Msg }

// Call runs a tool in the daemon (tools.Caller). A tool's failure is a
// *ToolError; anything else means the daemon could not be asked.
func (c *Client) Call(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	url := "http://computerfs/v1/tools/" + name
	progress := tools.ProgressFrom(ctx)
	if progress != nil {
		url += "?progress=1"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(args))
	if err != nil {
		return nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, c.transportErr(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return nil, fmt.Errorf("workspace daemon: %s", strings.TrimSpace(string(msg)))
	}
	var ans toolAnswer
	dec := json.NewDecoder(resp.Body)
	for {
		ans = toolAnswer{}
		if err := dec.Decode(&ans); err != nil {
			return nil, c.lost(fmt.Errorf("workspace daemon: %w", err))
		}
		if ans.Progress == nil {
			break
		}
		if progress != nil {
			progress(*ans.Progress)
		}
	}
	if ans.Error != "" {
		return nil, &ToolError{Msg: ans.Error, Refused: ans.Refused}
	}
	return ans.Result, nil
}

// Audit asks the daemon for audit records after an id.
func (c *Client) Audit(ctx context.Context, after uint64, limit int) ([]kv.AuditRecord, error) {
	var out []kv.AuditRecord
	return out, c.call(ctx, http.MethodGet, fmt.Sprintf("/v1/audit?after=%d&limit=%d", after, limit), &out)
}

// OpenOptions configure Open.
type OpenOptions struct {
	Store  string     // the store directory
	Spec   *spec.Spec // imported first into a new store; nil: the store must exist
	Logger *slog.Logger
}

// Open opens a workspace without mounting it, importing the spec's
// sources first when the store is new: for Go programs that embed
// computerfs and use its tools (Workspace.Tools) directly. Close it when
// done. The store must not be mounted meanwhile.
func Open(ctx context.Context, opts OpenOptions) (*Workspace, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Spec != nil {
		if _, err := Import(ctx, ImportOptions{Spec: opts.Spec, Store: opts.Store, Logger: opts.Logger}); err != nil {
			return nil, err
		}
	}
	mo := MountOptions{Logger: opts.Logger}
	st, err := openStore(opts.Store, mo)
	if err != nil {
		return nil, err
	}
	sp, err := storedSpec(st)
	if err != nil {
		st.Close()
		return nil, err
	}
	dir, _ := filepath.Abs(opts.Store)
	agent, err := setupAgent(st, dir, sp, AgentOptions{}, opts.Logger)
	if err != nil {
		st.Close()
		return nil, err
	}
	w := &Workspace{Store: st, FS: newFS(st, agent), agent: agent, spec: sp, log: opts.Logger}
	w.setBackends(mo) // no mount: the shell fast path only
	if w.tools, err = newTools(w); err != nil {
		st.Close()
		return nil, err
	}
	return w, nil
}

// Close closes a workspace that Open opened.
func (w *Workspace) Close() error { return w.closeStore() }

// AuditString formats an audit record for people: start time, id, tool,
// arguments, then the outcome, duration, backend and journal records.
func AuditString(r kv.AuditRecord) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s #%d %s %s", time.Unix(0, r.Start).UTC().Format("2006-01-02T15:04:05.000Z"), r.ID, textsafe.Name(r.Tool), textsafe.Text(r.Args))
	switch {
	case !r.Done:
		b.WriteString(" -> running (or interrupted)")
		return b.String()
	case r.Refused != "":
		fmt.Fprintf(&b, " -> REFUSED: %s", textsafe.Text(r.Error))
	case r.Error != "":
		fmt.Fprintf(&b, " -> ERROR: %s", textsafe.Text(r.Error))
	default:
		fmt.Fprintf(&b, " -> %s", textsafe.Text(r.Result))
	}
	fmt.Fprintf(&b, " (%s", time.Duration(r.DurationNs).Round(time.Microsecond))
	if r.Checkpoint != "" {
		b.WriteString(", checkpoint " + textsafe.Name(r.Checkpoint))
	}
	if r.Backend != "" {
		b.WriteString(", " + textsafe.Name(r.Backend))
	}
	switch {
	case r.Journal == 1:
		fmt.Fprintf(&b, ", journal %d", r.JournalFirst)
	case r.Journal > 1:
		fmt.Fprintf(&b, ", journal %d-%d: %d records", r.JournalFirst, r.JournalLast, r.Journal)
	}
	b.WriteString(")")
	return b.String()
}

func (w *Workspace) serveToolNames(rw http.ResponseWriter, r *http.Request) {
	names := []string{}
	for _, n := range tools.Names {
		if w.tools.Offers(n) {
			names = append(names, n)
		}
	}
	writeJSON(rw, names)
}

// Offers says whether the daemon's policy offers the agent the tool name
// (tools.Offerer); the first call asks the daemon, and its answer is kept.
func (c *Client) Offers(name string) bool {
	c.offerOnce.Do(func() {
		var names []string
		if err := c.call(context.Background(), http.MethodGet, "/v1/tools", &names); err == nil {
			c.offered = names
		}
	})
	return slices.Contains(c.offered, name)
}
