package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// ExecArgs are exec's arguments.
type ExecArgs struct {
	Command   string            `json:"command" jsonschema:"a shell command line (bash syntax: pipes, redirections, && and loops work)"`
	Backend   string            `json:"backend,omitempty" jsonschema:"where to run it: shell (the fast path: built-in coreutils, grep, sed, find, awk, jq, tar, common git commands... running in-process on the workspace in well under a millisecond; no other programs), sandbox (a container with the host's real programs: compilers, test runners, package managers, git push and fetch; tens of milliseconds to start) or auto (the default: shell when every command in the line is built in, otherwise sandbox)"`
	Cwd       string            `json:"cwd,omitempty" jsonschema:"working directory (default /workspace)"`
	Env       map[string]string `json:"env,omitempty" jsonschema:"environment variables to add"`
	TimeoutMs int               `json:"timeoutMs,omitempty" jsonschema:"stop the command after this many milliseconds (default 120000; the policy sets the maximum, 600000 unless it says otherwise); a stopped command exits 124"`
	Stdin     string            `json:"stdin,omitempty" jsonschema:"text given to the command on standard input"`
}

// ExecResult is how a command ended and what it printed.
type ExecResult struct {
	ExitCode   int    `json:"exitCode"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	Backend    string `json:"backend"`
	DurationMs int64  `json:"durationMs"`
	// Truncated: the output went past the limit and was cut there.
	Truncated bool   `json:"truncated,omitempty"`
	Stopped   string `json:"stopped,omitempty"` // "timeout", "output limit"...
}

func (r ExecResult) summary() string {
	s := fmt.Sprintf("exit %d, %d+%d bytes of output", r.ExitCode, len(r.Stdout), len(r.Stderr))
	if r.Stopped != "" {
		s += ", stopped: " + r.Stopped
	}
	if r.Truncated {
		s += ", output truncated"
	}
	return s
}

// Text is the result as a model reads it.
func (r ExecResult) Text() string {
	var b strings.Builder
	b.WriteString(r.Stdout)
	if r.Stderr != "" {
		if b.Len() > 0 && !strings.HasSuffix(r.Stdout, "\n") {
			b.WriteString("\n")
		}
		b.WriteString("[stderr]\n" + r.Stderr)
	}
	if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
		b.WriteString("\n")
	}
	if r.Truncated {
		b.WriteString("[output truncated: the limit was reached]\n")
	}
	if r.Stopped != "" {
		fmt.Fprintf(&b, "[stopped: %s]\n", r.Stopped)
	}
	fmt.Fprintf(&b, "[exit code %d, %s backend, %d ms]", r.ExitCode, r.Backend, r.DurationMs)
	return b.String()
}

// capped keeps the first bytes written to it, up to a shared budget.
type capped struct {
	mu     *sync.Mutex
	budget *int64
	buf    bytes.Buffer
	cut    *bool
	tap    **progressTap // when the caller wants progress
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if *c.tap != nil {
		(*c.tap).see(p)
	}
	n := int64(len(p))
	if n > *c.budget {
		n = *c.budget
		*c.cut = true
	}
	c.buf.Write(p[:n])
	*c.budget -= n
	return len(p), nil // the command goes on; what is past the budget is dropped
}

// DefaultTimeout is exec's timeout when the call gives none.
const DefaultTimeout = 2 * time.Minute

// Exec runs a command on the workspace.
func (t *Tools) Exec(ctx context.Context, a ExecArgs) (ExecResult, error) {
	return do(ctx, t, "exec", a, func(c *call) (ExecResult, error) {
		if a.Command == "" {
			return ExecResult{}, errors.New("command is empty")
		}
		if t.run == nil {
			return ExecResult{}, errors.New("exec is not available in this workspace")
		}
		if e := t.pol.p.Exec; e != nil && e.Disabled {
			return ExecResult{}, &Refusal{Rule: "policy exec.disabled", Msg: "exec is disabled"}
		}
		if t.pol.p.ReadOnly {
			return ExecResult{}, &Refusal{Rule: "policy read_only", Msg: "the workspace is read-only for tools, and a command could change it"}
		}
		backend := cmpOrStr(a.Backend, "auto")
		switch backend {
		case "auto", "shell", "sandbox":
		default:
			return ExecResult{}, fmt.Errorf("backend %q: want shell, sandbox or auto", a.Backend)
		}
		if t.pol.backends != nil {
			if backend == "auto" && len(t.pol.backends) == 1 {
				for b := range t.pol.backends {
					backend = b // auto within what is allowed
				}
			}
			if backend != "auto" && !t.pol.backends[backend] {
				return ExecResult{}, &Refusal{Rule: "policy exec.backends", Msg: fmt.Sprintf("backend %s is not allowed (allowed: %s)", backend, strings.Join(t.pol.p.Exec.Backends, ", "))}
			}
		}
		for _, r := range t.pol.denyCmds {
			if r.re.MatchString(a.Command) {
				return ExecResult{}, &Refusal{Rule: r.rule, Msg: "the command matches a refused pattern"}
			}
		}
		if int64(len(a.Stdin)) > t.pol.maxWrite {
			return ExecResult{}, &Refusal{Rule: "policy limits.max_write", Msg: fmt.Sprintf("stdin of %d bytes is over the limit of %d", len(a.Stdin), t.pol.maxWrite)}
		}
		if a.TimeoutMs < 0 {
			return ExecResult{}, errors.New("timeoutMs must be 0 (the default) or more")
		}
		timeout := min(DefaultTimeout, time.Duration(t.pol.maxTimeout)*time.Millisecond)
		if a.TimeoutMs > 0 {
			timeout = time.Duration(a.TimeoutMs) * time.Millisecond
		}
		if ms := timeout.Milliseconds(); ms > t.pol.maxTimeout {
			return ExecResult{}, &Refusal{Rule: "policy exec.max_timeout", Msg: fmt.Sprintf("timeoutMs %d is over the maximum %d", ms, t.pol.maxTimeout)}
		}
		cwd := Root
		if a.Cwd != "" {
			p, err := t.resolveFor(c.fs, a.Cwd, true, false)
			if err != nil {
				return ExecResult{}, err
			}
			if at, err := c.fs.Stat(p); err != nil {
				return ExecResult{}, showErr(err)
			} else if !at.IsDir() {
				return ExecResult{}, fmt.Errorf("cwd %s is not a directory", show(p))
			}
			cwd = show(p)
		}
		var env []string
		for k, v := range a.Env {
			if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
				return ExecResult{}, fmt.Errorf("env: %q is not a variable name", k)
			}
			env = append(env, k+"="+v)
		}
		sort.Strings(env)
		var mu sync.Mutex
		budget := t.pol.maxOutput
		cut := false
		var tap *progressTap
		stdout := &capped{mu: &mu, budget: &budget, cut: &cut, tap: &tap}
		stderr := &capped{mu: &mu, budget: &budget, cut: &cut, tap: &tap}
		start := time.Now()
		if fn := ProgressFrom(ctx); fn != nil {
			var stop func()
			tap, stop = startProgress(fn, &mu, start)
			defer stop() // before the result goes: fn is not called after
		}
		rr, err := t.run(ctx, RunRequest{Command: a.Command, Backend: backend, Cwd: cwd, Env: env,
			Timeout: timeout, Stdin: []byte(a.Stdin), Network: t.pol.network}, stdout, stderr)
		if err != nil {
			return ExecResult{}, err
		}
		c.backend = rr.Backend
		if rr.Actor != (c.actor) && (rr.Actor.Entry != "" || rr.Actor.Request != "") {
			c.actor = rr.Actor // the journal names the backend's actor
		}
		return ExecResult{ExitCode: rr.ExitCode, Stdout: stdout.buf.String(), Stderr: stderr.buf.String(), Backend: rr.Backend,
			DurationMs: time.Since(start).Milliseconds(), Truncated: cut, Stopped: rr.Stopped}, nil
	})
}
