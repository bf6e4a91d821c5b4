package shell

import (
	"context"

	"github.com/computerfs/computerfs/kv"
	api "github.com/computerfs/computerfs/sandbox/backend"
	"github.com/computerfs/computerfs/wsfs"
)

// Backend is the shell fast path as an exec backend: each Exec runs in a
// new Shell (its own empty /tmp) on FS, and its changes are journaled as
// the entry point "shell" with the request's id.
type Backend struct {
	FS   *wsfs.FS
	Opts Options
}

var _ api.Backend = (*Backend)(nil)

// Name is "shell".
func (b *Backend) Name() string { return "shell" }

// Exec runs command on the fast path. Options.Network is ignored: the
// fast path has no network commands.
func (b *Backend) Exec(ctx context.Context, command string, opts api.Options) (api.Result, error) {
	res, err := b.shell(opts.Request).Exec(ctx, command, ExecOptions{
		Cwd: opts.Cwd, Env: opts.Env, Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr,
		Timeout: opts.Timeout, MaxOutput: opts.MaxOutput,
	})
	if err != nil {
		return api.Result{}, err
	}
	return api.Result{ExitCode: res.ExitCode, Duration: res.Duration, Truncated: res.Truncated, Stopped: res.Stopped}, nil
}

// CanRunIn is Shell.CanRunIn on the backend's workspace: whether command,
// run in cwd, runs entirely on the fast path (see CanRunIn).
func (b *Backend) CanRunIn(cwd, command string) (ok bool, reason string) {
	return b.shell("").CanRunIn(cwd, command)
}

// shell is a Shell on the workspace as /workspace, whose changes are
// journaled as the entry point "shell" with the request's id.
func (b *Backend) shell(request string) *Shell {
	fs := b.FS.As(kv.Actor{Entry: "shell", Request: request})
	fs.SetRootPrefix(wsRoot) // absolute symlinks mean what they mean in the sandbox
	return New(fs, b.Opts)
}
