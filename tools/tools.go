// Package tools gives agents the workspace's tools (read, write, edit,
// mkdir, ls, find, grep, delete, exec) as a Go API and, through an MCP
// server (NewServer), to any agent harness.
//
// Design:
//
//   - The tools run where the store is (in the daemon, or in a program that
//     opened the store itself), on wsfs: no FUSE round trip, and every
//     change they make is journaled with the actor {Entry: "tools",
//     Request: ID}, ID being the call's audit id.
//   - Paths are what exec sees: absolute under /workspace or relative to
//     it. Every path is resolved here first, link by link, and refused if
//     it leaves /workspace in any way (.., an absolute path elsewhere, a
//     symbolic link pointing outside); the policy's globs are checked on
//     the path as spelled and as resolved.
//   - Every call is gated by the policy (spec.Policy) and audited in the
//     store (kv.AuditRecord): arguments with large values as size and
//     SHA-256, the result's summary or the error, the rule that refused
//     it, start, duration, backend, and the journal records it caused.
//   - Writes are atomic: the new content goes to a temporary file beside
//     the target, which is then renamed over it (mode and owner kept), so
//     a reader sees the old content or the new, and a failed call leaves
//     nothing half written. (As with sed -i, a hard link to the old file
//     keeps the old content.)
//   - Tool errors (a refusal, a missing file, an edit that does not match)
//     are ordinary errors for the Go API and tool errors (isError) for MCP;
//     only a broken transport is a protocol error.
package tools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/computerfs/computerfs/kv"
	rules "github.com/computerfs/computerfs/policy"
	"github.com/computerfs/computerfs/spec"
	"github.com/computerfs/computerfs/wsfs"
)

// Runner runs exec's commands: the workspace's exec backends.
type Runner func(ctx context.Context, req RunRequest, stdout, stderr io.Writer) (RunResult, error)

// RunRequest is a command for a Runner.
type RunRequest struct {
	Command string
	Backend string // "shell", "sandbox" or "auto"
	Cwd     string // absolute, under /workspace
	Env     []string
	Timeout time.Duration
	Stdin   []byte
	Network string // the policy's sandbox network: "none" or "host"
}

// RunResult is how a command ended.
type RunResult struct {
	ExitCode int
	Backend  string
	Stopped  string // "timeout", "output limit"... or ""
	// Actor is who the journal names as the author of the command's
	// changes, so that the audit can find them.
	Actor kv.Actor
}

// Options configure New.
type Options struct {
	Policy *spec.Policy // nil: everything allowed, default limits
	// Rules, if set, are the path rules in force, shared with the
	// workspace's other backends (they may grow: see policy.DenyPath);
	// else the tools compile Policy's.
	Rules *rules.Checker
	Run   Runner // nil: exec is refused
	Log   *slog.Logger
	// Checkpoint, if set, is called before every call, with the call's
	// name and id, and returns the name of the checkpoint taken for it
	// (the audit records it); AfterCall when the call has ended.
	Checkpoint func(label string) string
	AfterCall  func(label string)
	// Checkpoints serves the checkpoints and undo tools (nil: refused).
	Checkpoints Checkpoints
}

// Tools are a workspace's tools. They are safe for concurrent use.
type Tools struct {
	fs  *wsfs.FS
	raw *wsfs.FS // fs without the path rules: GitClone's new directory
	st  *kv.Store
	pol *policy
	run Runner
	log *slog.Logger
	// slots bound the file tools' calls that run at once (each may hold
	// tens of MiB: a file grep searches, an edit's copies); the others
	// wait their turn.
	slots chan struct{}

	ckpt  func(label string) string
	after func(label string)
	ckpts Checkpoints
}

// MaxConcurrent is how many calls of the file tools (all but exec, which
// its backends bound) run at once in a workspace.
const MaxConcurrent = 4

// New returns the tools of the workspace f.
func New(f *wsfs.FS, opts Options) (*Tools, error) {
	p := opts.Policy
	if p == nil {
		p = &spec.Policy{}
	}
	paths := opts.Rules
	if paths == nil {
		paths = rules.New(p)
	}
	pl := &policy{p: *p, paths: paths, maxWrite: spec.DefaultMaxWrite, maxRead: spec.DefaultMaxRead, maxOutput: spec.DefaultMaxOutput, network: "none"}
	if l := p.Limits; l != nil {
		pl.maxWrite = cmpOr(int64(l.MaxWrite), pl.maxWrite)
		pl.maxRead = cmpOr(int64(l.MaxRead), pl.maxRead)
		pl.maxOutput = cmpOr(int64(l.MaxOutput), pl.maxOutput)
	}
	pl.maxTimeout = p.Exec.MaxTimeoutDuration().Milliseconds()
	if e := p.Exec; e != nil {
		if len(e.Backends) > 0 {
			pl.backends = map[string]bool{}
			for _, b := range e.Backends {
				pl.backends[b] = true
			}
		}
		for i, c := range e.DenyCommands {
			re, err := regexp.Compile(c)
			if err != nil {
				return nil, fmt.Errorf("policy exec.deny_commands[%d]: %w", i, err)
			}
			pl.denyCmds = append(pl.denyCmds, &regexpRule{rule: fmt.Sprintf("policy exec.deny_commands[%d] %q", i, c), re: re})
		}
		if e.Network != "" {
			pl.network = e.Network
		}
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// The tools check each path argument themselves, for a refusal that
	// names the rule; the workspace they work on enforces the rules again
	// where each file is resolved and changed (links, hard links, renames
	// of directories, races with other writers).
	raw := f.As(kv.Actor{Entry: "tools"})
	raw.SetRootPrefix(Root)
	return &Tools{fs: raw.WithPolicy(pl.paths), raw: raw, st: f.Store(), pol: pl, run: opts.Run, log: log, slots: make(chan struct{}, MaxConcurrent),
		ckpt: opts.Checkpoint, after: opts.AfterCall, ckpts: opts.Checkpoints}, nil
}

func cmpOr(v, def int64) int64 {
	if v > 0 {
		return v
	}
	return def
}

// call is one tool call in progress.
type call struct {
	id      uint64
	fs      *wsfs.FS // journaled as this call's
	actor   kv.Actor
	backend string
}

// summarizer gives a result's one-line summary for the audit.
type summarizer interface{ summary() string }

// do runs one audited call of tool.
func do[A any, R summarizer](ctx context.Context, t *Tools, tool string, args A, fn func(c *call) (R, error)) (R, error) {
	var zero R
	id, err := t.st.NewAuditID()
	if err != nil {
		return zero, fmt.Errorf("audit: %w", err)
	}
	start := time.Now()
	c := &call{id: id, actor: kv.Actor{Entry: "tools", Request: strconv.FormatUint(id, 10)}}
	c.fs = t.fs.As(c.actor)
	rec := &kv.AuditRecord{ID: id, Tool: tool, Args: auditArgs(args), Start: start.UnixNano(), Actor: c.actor}
	if t.ckpt != nil {
		rec.Checkpoint = t.ckpt(tool + " #" + strconv.FormatUint(id, 10))
	}
	if t.after != nil {
		defer t.after(tool + " #" + strconv.FormatUint(id, 10))
	}
	// Past the workspace's quota the audit keeps a short record (the
	// arguments as one digest, the result or error cut short); past its
	// grace too the call is refused before it runs, so that nothing that
	// ran goes unrecorded.
	short := false
	if full, _ := t.st.AuditRoom(auditSize(rec)); !full {
		short = true
		rec.Args = shortArgs(rec.Args)
	}
	if err := t.st.PutAudit(rec); err != nil {
		if errors.Is(err, kv.ErrQuota) {
			t.log.Warn("audit: a tool call refused: no room for its record", "tool", tool, "id", id, "err", err)
			return zero, fmt.Errorf("%s was not run: %w; free space in the workspace or raise its quota", tool, err)
		}
		return zero, fmt.Errorf("audit: %w", err)
	}
	before := t.st.LastSeq()
	res, err := func() (res R, err error) {
		defer func() {
			if p := recover(); p != nil {
				t.log.Error("tool panicked", "tool", tool, "id", id, "panic", p)
				err = fmt.Errorf("internal error in %s: %v", tool, p)
			}
		}()
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if tool != "exec" {
			// A file tool's call stops at the policy's longest timeout
			// (a client that never cancels cannot keep a core busy), and
			// waits for a slot.
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, time.Duration(t.pol.maxTimeout)*time.Millisecond)
			defer cancel()
			select {
			case t.slots <- struct{}{}:
				defer func() { <-t.slots }()
			case <-ctx.Done():
				return res, fmt.Errorf("%s: waiting for another call to end: %w", tool, ctx.Err())
			}
		}
		return fn(c)
	}()
	rec.Done, rec.DurationNs, rec.Backend, rec.Actor = true, time.Since(start).Nanoseconds(), c.backend, c.actor
	if err != nil {
		rec.Error = auditText(err.Error())
		var rf *Refusal
		if errors.As(err, &rf) {
			rec.Refused = rf.Rule
		}
	} else {
		rec.Result = auditText(res.summary())
	}
	if full, _ := t.st.AuditRoom(auditSize(rec)); short || !full {
		rec.Args = shortArgs(rec.Args)
		rec.Error, rec.Result = cutText(rec.Error, shortAuditText), cutText(rec.Result, shortAuditText)
	}
	if jerr := t.st.ReadJournal(before, func(r kv.Record) bool {
		if r.Actor == c.actor {
			if rec.JournalFirst == 0 {
				rec.JournalFirst = r.Seq
			}
			rec.JournalLast = r.Seq
			rec.Journal++
		}
		return true
	}); jerr != nil {
		t.log.Error("audit: reading the journal", "err", jerr)
	}
	if perr := t.st.PutAudit(rec); perr != nil {
		t.log.Error("audit: writing the record", "id", id, "err", perr)
		if err == nil {
			return res, fmt.Errorf("audit: %w", perr)
		}
	}
	return res, err
}

// largeArg is how long a string argument may be before the audit keeps
// only its size and hash; maxAuditArgs how long the arguments may be in
// all (many small strings: an edit's batch), and maxAuditText an error or
// a summary, before the audit keeps less.
const (
	largeArg     = 256
	maxAuditArgs = 4 << 10
	maxAuditText = 2 << 10
)

// shortAuditText is how long an error or a summary may be in the short
// record a call gets past the workspace's quota.
const shortAuditText = 200

// shortArgs is args for a short record: as they are if short, else
// their digest.
func shortArgs(args string) string {
	if len(args) <= shortAuditText {
		return args
	}
	return encodeArgs(digest(args))
}

// auditSize is about what rec takes in the store.
func auditSize(rec *kv.AuditRecord) int64 {
	js, _ := json.Marshal(rec)
	return int64(len(js)) + 1
}

// auditText is s cut to maxAuditText bytes, with its length.
func auditText(s string) string { return cutText(s, maxAuditText) }

// cutText is s cut to n bytes, with its length.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("... [cut: %d bytes in all]", len(s))
}

// digest stands for a value too large for the audit: its size (of its
// JSON) and SHA-256, and for an array its length.
func digest(v any) map[string]any {
	js, _ := json.Marshal(v)
	if s, ok := v.(string); ok {
		js = []byte(s)
	}
	sum := sha256.Sum256(js)
	d := map[string]any{"size": len(js), "sha256": hex.EncodeToString(sum[:])}
	if a, ok := v.([]any); ok {
		d["items"] = len(a)
	}
	return d
}

// auditArgs encodes arguments for the audit, with large string values
// replaced by {"size": N, "sha256": "..."}.
func auditArgs(args any) string {
	js, err := json.Marshal(args)
	if err != nil {
		return fmt.Sprintf("%q", err.Error())
	}
	if len(js) > 4*maxAuditArgs {
		// Too large to look into (an edit's batch of thousands): the
		// large arguments as digests, the small ones as they are.
		var m map[string]json.RawMessage
		if json.Unmarshal(js, &m) != nil {
			return encodeArgs(digest(string(js)))
		}
		out := map[string]any{}
		for k, raw := range m {
			if len(raw) <= largeArg {
				out[k] = raw
				continue
			}
			var items []json.RawMessage
			d := digest(string(raw))
			if json.Unmarshal(raw, &items) == nil {
				d["items"] = len(items)
			}
			out[k] = d
		}
		return encodeArgs(out)
	}
	var v any
	if json.Unmarshal(js, &v) != nil {
		return string(js)
	}
	v = shrink(v)
	s := encodeArgs(v)
	if len(s) <= maxAuditArgs {
		return s
	}
	// Too long in all: the largest arguments go as digests, one by one.
	if m, ok := v.(map[string]any); ok {
		for len(s) > maxAuditArgs {
			big, size := "", 0
			for k, e := range m {
				if _, done := e.(map[string]any); done {
					continue
				}
				if n := len(encodeArgs(e)); n > size {
					big, size = k, n
				}
			}
			if big == "" {
				break
			}
			m[big] = digest(m[big])
			s = encodeArgs(m)
		}
	}
	if len(s) > maxAuditArgs {
		return encodeArgs(digest(v))
	}
	return s
}

func encodeArgs(v any) string {
	var out strings.Builder
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false) // commands read better with < and > as they are
	enc.Encode(v)
	return strings.TrimSuffix(out.String(), "\n")
}

func shrink(v any) any {
	switch x := v.(type) {
	case string:
		if len(x) > largeArg {
			sum := sha256.Sum256([]byte(x))
			return map[string]any{"size": len(x), "sha256": hex.EncodeToString(sum[:])}
		}
	case map[string]any:
		for k, e := range x {
			x[k] = shrink(e)
		}
	case []any:
		for i, e := range x {
			x[i] = shrink(e)
		}
	}
	return v
}

// Names lists the tools.
var Names = []string{"read", "write", "edit", "mkdir", "ls", "find", "grep", "delete", "exec", "checkpoints", "undo"}

// Call runs the tool name with JSON arguments and returns its result as
// JSON: for servers (the daemon's control socket) that take calls by name.
// Unknown fields in args are refused.
func (t *Tools) Call(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	switch name {
	case "read":
		return callJSON(ctx, args, t.Read)
	case "write":
		return callJSON(ctx, args, t.Write)
	case "edit":
		return callJSON(ctx, args, t.Edit)
	case "mkdir":
		return callJSON(ctx, args, t.Mkdir)
	case "ls":
		return callJSON(ctx, args, t.Ls)
	case "find":
		return callJSON(ctx, args, t.Find)
	case "grep":
		return callJSON(ctx, args, t.Grep)
	case "delete":
		return callJSON(ctx, args, t.Delete)
	case "exec":
		return callJSON(ctx, args, t.Exec)
	case "checkpoints":
		return callJSON(ctx, args, t.CheckpointList)
	case "undo":
		return callJSON(ctx, args, t.Undo)
	}
	return nil, fmt.Errorf("unknown tool %q (the tools are %v)", name, Names)
}

// ArgsError is a call whose arguments do not decode.
type ArgsError struct{ Err error }

func (e *ArgsError) Error() string { return "arguments: " + e.Err.Error() }
func (e *ArgsError) Unwrap() error { return e.Err }

func callJSON[A, R any](ctx context.Context, raw json.RawMessage, fn func(context.Context, A) (R, error)) (json.RawMessage, error) {
	var a A
	if len(raw) > 0 {
		dec := json.NewDecoder(bytesReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&a); err != nil {
			return nil, &ArgsError{err}
		}
	}
	r, err := fn(ctx, a)
	if err != nil {
		return nil, err
	}
	return json.Marshal(r)
}
