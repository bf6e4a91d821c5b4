// Package backend is the interface every exec backend implements: the
// shell fast path (package sandbox/shell) and the namespace sandbox
// (package sandbox). The daemon routes each command to one of them; a
// harness can also hold a Backend and call it directly.
package backend

import (
	"context"
	"io"
	"time"
)

// The environment both backends give a command unless its Options.Env
// says otherwise: the same PATH, HOME, LANG and TMPDIR, so that a command
// reads them the same wherever it was routed (GNU tools quote names as
// ‘x’ under LANG=C.UTF-8, and the fast path's built-ins do as they do).
const (
	// DefaultPath is $PATH. The fast path's built-in commands claim to
	// live in /usr/bin; /usr/local/go/bin is where the Go distribution
	// puts go.
	DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/local/go/bin"
	// Home is $HOME: the workspace (and ~ is the workspace).
	Home = "/workspace"
	// Lang is $LANG: C's collation and messages, UTF-8 characters.
	Lang = "C.UTF-8"
	// TmpDir is $TMPDIR.
	TmpDir = "/tmp"
)

// Backend runs shell command strings on a workspace.
type Backend interface {
	// Name is the backend's name in results and requests: "shell" or
	// "sandbox".
	Name() string
	// Exec runs command as `sh -c` would, with the workspace at
	// /workspace. An error means the command could not be run at all (a
	// syntax error, a sandbox that could not be set up, ctx ended before
	// it started); how a command that ran ended is in the Result.
	Exec(ctx context.Context, command string, opts Options) (Result, error)
}

// Options are what one command gets. Zero values mean the backend's
// defaults.
type Options struct {
	// Cwd is the working directory: absolute (under /workspace) or
	// relative to /workspace. Default /workspace.
	Cwd string
	// Env holds KEY=VALUE pairs added to the backend's clean environment.
	Env []string
	// Stdin, Stdout and Stderr are the command's streams; nil is empty
	// input and discarded output.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Timeout stops the command (every process of it) after that long.
	Timeout time.Duration
	// MaxOutput bounds stdout and stderr together; past it the output is
	// cut and the command stopped. 0: the backend's default; negative: no
	// limit.
	MaxOutput int64
	// Network asks for the host's network ("host") instead of none ("" or
	// "none"). Only the sandbox has a network; the shell fast path has no
	// network commands at all.
	Network string
	// Request names the call in the journal (the shell fast path records
	// it with each change; the sandbox's changes come through the mount
	// and are named by the sandbox instead).
	Request string
}

// Result is how a command ended.
type Result struct {
	// ExitCode is the command's status: 128+N when signal N killed it,
	// 124 on a timeout, 125 when a limit stopped it (shell fast path).
	ExitCode int
	Duration time.Duration
	// Truncated: the output passed MaxOutput and was cut.
	Truncated bool
	// Stopped says why the command was stopped early ("timeout", "output
	// limit", "command limit", "memory limit", "canceled"), "" if it ran
	// to its end.
	Stopped string
	// Sandbox only: the container that ran it, its peak memory and CPU
	// time.
	Sandbox    string        `json:",omitempty"`
	PeakMemory int64         `json:",omitempty"`
	CPUTime    time.Duration `json:",omitempty"`
	// Warm: a pre-started sandbox ran it.
	Warm bool `json:",omitempty"`
}
