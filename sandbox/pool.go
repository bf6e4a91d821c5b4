package sandbox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/opencontainers/runc/libcontainer"
	"golang.org/x/sys/unix"
)

// PoolOptions configure a Pool.
type PoolOptions struct {
	// Options fix the sandboxes of the pool: Workspace, Cache, Rootfs, User, HostUser,
	// IDs, Network, Limits.Memory, Limits.Pids, Limits.CPU, Hostname,
	// NoSeccomp and StateDir. Its other fields are ignored.
	Options Options
	// Size is how many sandboxes wait for a command (1 if 0).
	Size int
}

// ErrPoolClosed is returned by Run on a closed Pool.
var ErrPoolClosed = errors.New("sandbox: pool closed")

// A Pool keeps sandboxes started ahead of their command, so that Run only
// hands the command to one: their pid 1 waits on a socket for it. Every
// sandbox runs one command and is then destroyed, and a new one is started
// in the background in its place: nothing one command leaves (files in
// /tmp, processes, memory charged to the cgroup) is seen by the next. A
// Pool is safe for concurrent use.
type Pool struct {
	base  Options // normalized
	size  int
	ready chan warmItem // at most size: items and starts in flight never exceed it

	mu     sync.Mutex
	closed bool
	done   chan struct{} // closed by Close
	wg     sync.WaitGroup
}

// warmItem is a pre-started sandbox, or why one could not be started.
type warmItem struct {
	w   *warmSandbox
	err error
}

// warmSandbox is a sandbox whose pid 1 waits for a command on sock.
type warmSandbox struct {
	r      *run
	sock   *os.File // our end of pid 1's socket
	waited bool     // pid 1 has been reaped: its pid is no longer ours to kill
}

// NewPool checks opts and starts opts.Size sandboxes in the background.
func NewPool(opts PoolOptions) (*Pool, error) {
	if opts.Size < 0 {
		return nil, errors.New("sandbox: negative pool size")
	}
	if opts.Size == 0 {
		opts.Size = 1
	}
	base := opts.Options
	base.Args, base.Env, base.Cwd = nil, nil, ""
	base.Stdin, base.Stdout, base.Stderr, base.Signals = nil, nil, nil, nil
	base.Limits.Timeout, base.Limits.OutputBytes = 0, 0
	if base.User != nil {
		u := *base.User // the caller's may change
		base.User = &u
	}
	if base.HostUser != nil {
		u := *base.HostUser
		base.HostUser = &u
	}
	r, err := newRun(&base)
	if err != nil {
		return nil, err
	}
	// What a start would find wrong, said now: the root file system, the
	// filter.
	if _, err := r.config(); err != nil {
		return nil, err
	}
	if _, err := r.filterFile(); err != nil {
		return nil, err
	}
	for _, c := range r.closers {
		c.Close()
	}
	p := &Pool{base: base, size: opts.Size, ready: make(chan warmItem, opts.Size), done: make(chan struct{})}
	p.mu.Lock()
	for range p.size {
		p.refill()
	}
	p.mu.Unlock()
	return p, nil
}

// refill starts a sandbox in the background; p.mu is held.
func (p *Pool) refill() {
	if p.closed {
		return
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		w, err := p.prestart()
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.closed {
			if w != nil {
				w.destroy()
			}
			return
		}
		p.ready <- warmItem{w, err} // never blocks: see ready
	}()
}

// Idle is how many sandboxes wait for a command now.
func (p *Pool) Idle() int { return len(p.ready) }

// fits says whether opts (normalized) run in the pool's sandboxes.
func (p *Pool) fits(o *Options) bool {
	b := &p.base
	user := func(u *User) User {
		if u == nil {
			return DefaultUser
		}
		return *u
	}
	host := func(h string) string {
		if h == "" {
			return "sandbox"
		}
		return h
	}
	return o.Workspace == b.Workspace && o.Cache == b.Cache && o.Rootfs == b.Rootfs &&
		user(o.User) == user(b.User) && sameHostUser(o.HostUser, b.HostUser) && o.IDs.or() == b.IDs.or() && o.Network == b.Network &&
		o.Limits.Memory == b.Limits.Memory && o.Limits.Pids == b.Limits.Pids && o.Limits.CPU == b.Limits.CPU &&
		host(o.Hostname) == host(b.Hostname) && o.NoSeccomp == b.NoSeccomp &&
		filepath.Clean(o.StateDir) == filepath.Clean(b.StateDir) && o.GitConfig == b.GitConfig && maps.Equal(o.GitConfigIncludes, b.GitConfigIncludes)
}

func sameHostUser(a, b *User) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// Exec runs a shell command (bash -c command where the root file system
// has bash, else /bin/sh -c command: see Shell) with opts, as Run.
func (p *Pool) Exec(ctx context.Context, command string, opts Options) (Result, error) {
	opts.Args = []string{Shell(opts.Rootfs), "-c", command}
	return p.Run(ctx, opts)
}

// Run runs opts.Args as the package's Run does, in one of the pool's
// sandboxes if opts has the pool's fixed options (see PoolOptions), else
// in a new sandbox (a cold start: Result.Warm is false). Per command are
// Args, Env, Cwd, Stdin, Stdout, Stderr, Signals, Limits.Timeout and
// Limits.OutputBytes. When every sandbox of the pool is taken, Run waits
// for the next one the pool starts.
func (p *Pool) Run(ctx context.Context, opts Options) (Result, error) {
	if len(opts.Args) == 0 || opts.Args[0] == "" {
		return Result{}, errors.New("sandbox: no program given")
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return Result{}, ErrPoolClosed
	}
	p.wg.Add(1)
	p.mu.Unlock()
	defer p.wg.Done()

	o := opts
	if _, err := newRun(&o); err != nil {
		return Result{}, err
	}
	if !p.fits(&o) {
		return Run(ctx, opts)
	}
	var item warmItem
	select {
	case item = <-p.ready:
	case <-ctx.Done():
		return Result{}, ctx.Err()
	case <-p.done:
		return Result{}, ErrPoolClosed
	}
	p.mu.Lock()
	p.refill()
	p.mu.Unlock()
	if item.err != nil {
		// Whatever failed, a cold start says it as well as it can.
		return Run(ctx, opts)
	}
	w := item.w
	res, err := w.run(ctx, &o)
	// The result is known: the rest of the end in the background.
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		w.destroy()
	}()
	return res, err
}

// Close destroys the sandboxes that wait for a command and waits for the
// commands that run to end (and their sandboxes to be removed). Run then
// returns ErrPoolClosed.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.done)
	p.mu.Unlock()
	for {
		select {
		case item := <-p.ready:
			if item.w != nil {
				item.w.destroy()
			}
			continue
		default:
		}
		break
	}
	p.wg.Wait()
	return nil
}

// prestart starts a sandbox whose pid 1 waits for a command, and returns
// once pid 1 has said it waits.
func (p *Pool) prestart() (w *warmSandbox, err error) {
	opts := p.base
	r := &run{opts: &opts, id: newID()}
	w = &warmSandbox{r: r}
	defer func() {
		if err != nil {
			w.destroy()
			w = nil
		}
	}()
	config, err := r.config()
	if err != nil {
		return w, err
	}
	filter, err := r.filterFile()
	if err != nil {
		return w, err
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return w, err
	}
	r.status = statusR
	r.closers = append(r.closers, statusR)
	r.childEnds = append(r.childEnds, statusW)
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return w, err
	}
	unix.SetNonblock(fds[0], true)
	w.sock = os.NewFile(uintptr(fds[0]), "sandbox-command")
	r.closers = append(r.closers, w.sock)
	child := os.NewFile(uintptr(fds[1]), "sandbox-command")
	r.childEnds = append(r.childEnds, child)

	proc := &libcontainer.Process{
		Args:       []string{"/proc/self/exe", warmArg},
		Env:        r.env(),
		Cwd:        "/",
		UID:        int(r.user().UID),
		GID:        int(r.user().GID),
		ExtraFiles: []*os.File{filter, statusW, child}, // fds 3, 4 and 5
		Init:       true,
	}
	r.process = proc
	c, err := libcontainer.Create(filepath.Join(opts.StateDir, "containers"), r.id, config)
	if err != nil {
		r.closeChildEnds()
		return w, fmt.Errorf("sandbox: create container: %w", err)
	}
	r.container = c
	err = c.Run(proc)
	r.closeChildEnds()
	if err != nil {
		r.process = nil
		return w, fmt.Errorf("sandbox: start: %w", startErr(err))
	}
	w.sock.SetReadDeadline(time.Now().Add(time.Minute))
	var b [1]byte
	if n, err := w.sock.Read(b[:]); n != 1 || b[0] != 'w' {
		return w, fmt.Errorf("sandbox: pre-started sandbox did not answer: %v", err)
	}
	w.sock.SetReadDeadline(time.Time{})
	r.cgroupPaths() // now rather than when the command comes
	// Pid 1 leaves the pids limit once the program runs, as on a cold
	// start: the program, forked by pid 1, must start in the limited
	// cgroup.
	return w, nil
}

// run hands opts (normalized, fitting the sandbox) to pid 1 and follows
// the command to its end.
func (w *warmSandbox) run(ctx context.Context, opts *Options) (Result, error) {
	r := w.r
	r.opts = opts
	// Stdio as the cold path makes it: the caller's files as they are,
	// pipes for the rest; /dev/null for none.
	var sp libcontainer.Process
	if err := r.stdio(&sp); err != nil {
		return Result{Warm: true}, err
	}
	var stdio [3]*os.File
	for i, s := range []any{sp.Stdin, sp.Stdout, sp.Stderr} {
		f, _ := s.(*os.File)
		if f == nil {
			null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
			if err != nil {
				return Result{Warm: true}, err
			}
			r.closers = append(r.closers, null)
			f = null
		}
		stdio[i] = f
	}
	base := r.baseline()
	start := time.Now()
	err := sendCommand(w.sock, command{cwd: r.cwd(), args: opts.Args, env: r.env()}, stdio)
	r.closeChildEnds()
	if err != nil {
		r.kill()
		r.process.Wait()
		w.waited = true
		r.copies.Wait()
		return Result{Warm: true}, err
	}
	res, err := r.supervise(ctx, start, base)
	w.waited = true
	res.Warm = true
	return res, err
}

// destroy ends a pre-started sandbox, used or not, and removes it.
func (w *warmSandbox) destroy() {
	r := w.r
	if r.process != nil && !w.waited {
		if pid, err := r.process.Pid(); err == nil {
			unix.Kill(pid, unix.SIGKILL)
			r.process.Wait() // reaped, once: supervise's Wait is done
		}
	}
	r.cleanup()
}
