package sandbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/computerfs/computerfs/sandbox/backend"
)

// Backend is the sandbox as an exec backend: each Exec runs `bash -c
// COMMAND` (`/bin/sh -c COMMAND` where the root file system has no bash:
// see Shell) in a new sandbox with Workspace at /workspace. Base holds what
// every run shares (rootfs, user, limits, state directory); a request's
// options override its Cwd, Env, stdio, timeout, output limit and
// network.
type Backend struct {
	Workspace string // the workspace's mount point on the host
	Base      Options
	// Pool, if set, runs the commands that fit its sandboxes warm (see
	// Pool); the others start cold.
	Pool *Pool
}

var _ backend.Backend = (*Backend)(nil)

// DefaultMaxOutput bounds a command's stdout and stderr together when
// neither the request nor Base sets a limit: the shell fast path's default
// (shell.DefaultMaxOutput), so that a command that prints without end
// (`yes`) is stopped with status 125 on either backend instead of making
// the daemon read and pass on output until its timeout.
const DefaultMaxOutput = 64 << 20

// Name is "sandbox".
func (b *Backend) Name() string { return "sandbox" }

// Exec runs command in a new sandbox. Its status is the program's, except
// that a timeout is 124 and the output limit 125, as on the shell fast
// path, so that a caller reads both backends' results the same way.
func (b *Backend) Exec(ctx context.Context, command string, opts backend.Options) (backend.Result, error) {
	o := b.Base
	o.Workspace = b.Workspace
	o.Cwd = opts.Cwd
	o.Env = append(append([]string(nil), o.Env...), opts.Env...)
	o.Stdin, o.Stdout, o.Stderr = opts.Stdin, opts.Stdout, opts.Stderr
	if opts.Timeout > 0 && (o.Limits.Timeout == 0 || opts.Timeout < o.Limits.Timeout) {
		o.Limits.Timeout = opts.Timeout
	}
	switch {
	case opts.MaxOutput > 0:
		o.Limits.OutputBytes = opts.MaxOutput
	case opts.MaxOutput < 0:
		o.Limits.OutputBytes = 0
	case o.Limits.OutputBytes == 0:
		o.Limits.OutputBytes = DefaultMaxOutput
	}
	switch opts.Network {
	case "", string(NetworkNone):
		o.Network = NetworkNone
	case string(NetworkHost):
		o.Network = NetworkHost
	default:
		return backend.Result{}, fmt.Errorf("network %q: want none or host", opts.Network)
	}
	var res Result
	var err error
	if b.Pool != nil {
		res, err = b.Pool.Exec(ctx, command, o)
	} else {
		res, err = Exec(ctx, command, o)
	}
	var se *StartError
	if err != nil && !errors.As(err, &se) {
		return backend.Result{}, err
	}
	out := backend.Result{ExitCode: res.ExitCode, Duration: res.Duration, PeakMemory: res.PeakMemory, CPUTime: res.CPUTime, Warm: res.Warm}
	switch {
	case res.TimedOut:
		out.ExitCode, out.Stopped = 124, "timeout"
	case res.OutputLimited:
		out.ExitCode, out.Stopped, out.Truncated = 125, "output limit", true
	case res.OOMKilled:
		out.Stopped = "memory limit"
	}
	return out, nil
}
