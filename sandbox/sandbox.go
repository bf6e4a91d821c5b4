package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/opencontainers/runc/libcontainer"
	"golang.org/x/sys/unix"

	"github.com/computerfs/computerfs/sandbox/backend"
)

// Network says which network a sandbox sees.
type Network string

const (
	// NetworkNone gives the sandbox its own network namespace with only a
	// loopback interface: nothing outside the sandbox can be reached.
	NetworkNone Network = "none"
	// NetworkHost shares the host's network namespace.
	NetworkHost Network = "host"
)

// User is a user and group inside the sandbox. Inside ids are host ids of
// the sandbox's block (Options.IDs; by default inside ids 0 to 65535 are
// host ids 100000 to 165535): root inside is not root outside.
type User struct {
	UID, GID uint32
}

// DefaultUser is the unprivileged user programs run as by default
// (host uid and gid 101000).
var DefaultUser = User{UID: 1000, GID: 1000}

// Limits bound what a run may use. Zero means no limit.
type Limits struct {
	Memory      int64         // bytes of memory (the cgroup's, page cache and tmpfs included); no swap
	Pids        int64         // processes and threads of the program at once (a few more in the first milliseconds; the sandbox's pid 1 is not counted)
	CPU         float64       // cores (0.5 = half of one core)
	Timeout     time.Duration // wall clock; when it passes every process of the sandbox is killed
	OutputBytes int64         // stdout and stderr together; when exceeded the output is cut there and the sandbox is killed
}

// DefaultLimits are what sandboxctl and the computerfs daemon give each
// sandbox unless told otherwise: a fork bomb or a memory hog is stopped
// there, far from the host's limits (pid_max is 32768 on many hosts; with
// 1024 each, 30 sandboxes fit), with room for parallel builds (go build,
// npm, make -j: a few hundred processes and threads).
var DefaultLimits = Limits{Memory: 4 << 30, Pids: 1024}

// Options describe one run.
type Options struct {
	// Args is the program and its arguments. A program without a slash is
	// looked up in the sandbox's PATH.
	Args []string
	// Workspace is a host directory (normally a computerfs mount) that
	// appears read-write at /workspace. Empty: no workspace.
	Workspace string
	// Env is added to the default environment: PATH=DefaultPath,
	// HOME=/workspace (/tmp without a workspace) and the caches'
	// variables (GOCACHE, GOMODCACHE, GOPATH, npm_config_cache,
	// PIP_CACHE_DIR, CARGO_HOME, XDG_CACHE_HOME, XDG_CONFIG_HOME,
	// XDG_DATA_HOME, XDG_STATE_HOME: under CacheDir with a Cache, else in
	// /tmp); nothing of the host's (not even TERM). A
	// KEY=VALUE here replaces the default of the same KEY.
	Env []string
	// Cwd is the working directory inside the sandbox: /workspace by
	// default (/ without a workspace); a relative path is relative to it.
	Cwd string
	// Stdin, Stdout and Stderr are the program's standard streams; nil
	// means /dev/null. An *os.File is passed to the program as it is
	// (unless OutputBytes is set); anything else goes through a pipe.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Rootfs is an unpacked root file system to use (read-only) instead of
	// the host's userland. It must contain the directories /proc, /dev,
	// /tmp and, with a workspace, /workspace, and be readable by host uid
	// 100000 and up.
	Rootfs string
	// User is who runs the program inside; nil means DefaultUser.
	User *User
	// HostUser, if set, is the host uid and gid that User is: the
	// workspace's agent identity, so that what the program writes
	// belongs to it. The user namespace then maps User's ids to these
	// alone, and every other inside id as IDs says (inside root is a
	// host id that owns nothing of a workspace). nil: every inside id is
	// as IDs says. Never host root.
	HostUser *User
	// IDs is the block of host ids the sandbox's other users are; the
	// zero value is SharedIDs, which every sandbox without one of its own
	// shares. A workspace's sandboxes get a block of their own.
	IDs IDs
	// Cache is a host directory that appears read-write at CacheDir,
	// where the caches' variables point (see Env): build and package
	// caches that outlive the sandbox. Empty: none, and the caches are
	// in the sandbox's /tmp. It must belong to the host user that User
	// is, and is the caller's to bound (see package cache).
	Cache string
	// Network is NetworkNone (the default, for "") or NetworkHost.
	Network Network
	Limits  Limits
	// Hostname inside the sandbox; "sandbox" by default.
	Hostname string
	// NoSeccomp runs without the seccomp filter. Without it, a binary
	// built without the seccomp tag refuses to run anything.
	NoSeccomp bool
	// Signals received on this channel are passed to the program (through
	// the sandbox's pid 1) while it runs.
	Signals <-chan os.Signal
	// StateDir holds container state and the host root skeleton;
	// DefaultStateDir by default. GC must be given the same directory.
	StateDir string
	// GitConfig, if set, is git configuration (such as the workspace's
	// commit identity, "[user]\n\tname = ...") that git in the sandbox
	// reads as its system configuration: GIT_CONFIG_SYSTEM names a
	// read-only copy, GitConfigDir/config, which includes the host's
	// /etc/gitconfig first. The user's and the repository's own settings
	// and the environment still win, as over any system configuration.
	GitConfig string
	// GitConfigIncludes are files beside it, by name, that it may
	// include ("path = NAME", as in an includeIf). At most 64; 64 KiB
	// with GitConfig.
	GitConfigIncludes map[string]string
}

// DefaultStateDir is where containers keep their state unless
// Options.StateDir says otherwise.
const DefaultStateDir = "/run/computerfs-sandbox"

// Result is how a run ended and what it used.
type Result struct {
	// ExitCode is the program's exit status, 128+N if signal N killed it,
	// 127 if the program was not found and 126 if it could not be
	// executed.
	ExitCode int
	// Signal is the signal that killed the program, 0 if it exited.
	Signal syscall.Signal
	// Duration is the wall-clock time from the start of the container to
	// the end of its last process.
	Duration time.Duration
	// PeakMemory is the most memory the sandbox's cgroup used, in bytes.
	PeakMemory int64
	// CPUTime is the CPU time (user and system) of every process of the
	// sandbox.
	CPUTime time.Duration
	// OOMKilled: the kernel killed a process of the sandbox because the
	// memory limit was reached.
	OOMKilled bool
	// PidsLimited: a fork or clone failed because of the pids limit.
	PidsLimited bool
	// TimedOut: Limits.Timeout passed and the sandbox was killed.
	TimedOut bool
	// OutputLimited: the output passed Limits.OutputBytes, was cut there
	// and the sandbox was killed.
	OutputLimited bool
	// Warm: the program ran in a sandbox a Pool had started before it
	// was asked (Duration, PeakMemory and CPUTime then count from the
	// moment the sandbox was handed the command).
	Warm bool
}

// StartError is returned by Run when the program could not be started:
// Result.ExitCode is then 127 (not found) or 126 (not executable).
type StartError struct {
	Program string
	Err     error // an errno: ENOENT, EACCES, ENOEXEC...
}

func (e *StartError) Error() string {
	if errors.Is(e.Err, syscall.ENOENT) {
		return fmt.Sprintf("%s: program not found in the sandbox", e.Program)
	}
	return fmt.Sprintf("%s: cannot execute in the sandbox: %v", e.Program, e.Err)
}

func (e *StartError) Unwrap() error { return e.Err }

// Exec runs a shell command (`bash -c command`, or `/bin/sh -c command`
// where the root file system has no bash: see Shell) with opts;
// opts.Args is ignored. It is Run for callers that have a command line,
// like an exec backend.
func Exec(ctx context.Context, command string, opts Options) (Result, error) {
	opts.Args = []string{Shell(opts.Rootfs), "-c", command}
	return Run(ctx, opts)
}

// The shells Shell looks for, in this order, in the root file system.
var shells = []string{"/bin/bash", "/usr/bin/bash", "/bin/sh"}

var shellOf sync.Map // root file system ("" for the host's) -> string

// Shell is the program Exec runs commands with in a sandbox whose root
// file system is rootfs ("": the host's userland): bash, which the shell
// fast path speaks (<<<, <(...), [[ ]], PIPESTATUS), where rootfs has
// an executable /bin/bash or /usr/bin/bash, else /bin/sh. It is looked up
// once per root file system.
func Shell(rootfs string) string {
	if s, ok := shellOf.Load(rootfs); ok {
		return s.(string)
	}
	root := rootfs
	if root == "" {
		root = "/"
	}
	found := shells[len(shells)-1]
	for _, sh := range shells[:len(shells)-1] {
		if fi, err := os.Stat(filepath.Join(root, sh)); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o001 != 0 {
			found = sh
			break
		}
	}
	shellOf.Store(rootfs, found)
	return found
}

// Run runs opts.Args in a new sandbox and waits until every process of the
// sandbox has ended. An error means the sandbox could not be set up or the
// program could not be started (a *StartError) or ctx was cancelled (the
// sandbox is killed, the error is ctx.Err()); how the program itself ended
// is in the Result.
func Run(ctx context.Context, opts Options) (Result, error) {
	if len(opts.Args) == 0 || opts.Args[0] == "" {
		return Result{}, errors.New("sandbox: no program given")
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	r, err := newRun(&opts)
	if err != nil {
		return Result{}, err
	}
	defer r.cleanup()
	return r.run(ctx)
}

// run is the state of one Run.
type run struct {
	opts      *Options
	id        string
	container *libcontainer.Container
	process   *libcontainer.Process
	closers   []io.Closer // closed when Run returns
	childEnds []io.Closer // the container's ends, closed once it has them
	copies    sync.WaitGroup
	status    *os.File // read end of the init's status pipe

	mu      sync.Mutex
	written int64 // output bytes so far, under mu
	limited bool  // the output limit was passed
	killed  bool  // the sandbox was killed by us

	initCgroup string            // pid 1's own pids cgroup, under mu
	cgroups    map[string]string // see cgroupPaths, under mu
}

// initOutOfPids moves pid 1 (whose program now runs) to a pids cgroup of
// its own, so that the limit is the program's alone: pid 1 is a Go
// program, whose runtime makes threads when it wants and aborts when it
// cannot. The program stays in the sandbox's cgroup, whose limit then
// drops from the program's plus pid 1's allowance to the program's.
func (r *run) initOutOfPids(pid int) {
	cg := r.cgroupPaths()["pids"]
	if cg == "" {
		return
	}
	dir := cg + "-init"
	if err := os.Mkdir(dir, 0o755); err != nil {
		return
	}
	r.mu.Lock()
	r.initCgroup = dir
	r.mu.Unlock()
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		return
	}
	os.WriteFile(filepath.Join(cg, "pids.max"), []byte(strconv.FormatInt(r.opts.Limits.Pids, 10)), 0)
}

func newID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return "cfs-" + hex.EncodeToString(b)
}

func newRun(opts *Options) (*run, error) {
	if opts.StateDir == "" {
		opts.StateDir = DefaultStateDir
	}
	if opts.Network == "" {
		opts.Network = NetworkNone
	}
	if opts.Network != NetworkNone && opts.Network != NetworkHost {
		return nil, fmt.Errorf("sandbox: network %q: want %q or %q", opts.Network, NetworkNone, NetworkHost)
	}
	if opts.Workspace != "" {
		abs, err := filepath.Abs(opts.Workspace)
		if err != nil {
			return nil, err
		}
		fi, err := os.Stat(abs)
		if err != nil {
			return nil, fmt.Errorf("sandbox: workspace: %w", err)
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("sandbox: workspace %s is not a directory", abs)
		}
		opts.Workspace = abs
	}
	if opts.Cache != "" {
		if !filepath.IsAbs(opts.Cache) {
			return nil, fmt.Errorf("sandbox: cache %s: not an absolute path", opts.Cache)
		}
		if fi, err := os.Stat(opts.Cache); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("sandbox: cache %s: not a directory (%v)", opts.Cache, err)
		}
	}
	if opts.Workspace != "" && opts.Cwd != "" {
		// libcontainer would make a missing working directory; in the
		// workspace that is a surprise, so it must exist.
		cwd := opts.Cwd
		if !filepath.IsAbs(cwd) {
			cwd = filepath.Join("/workspace", cwd)
		}
		if rel, ok := strings.CutPrefix(filepath.Clean(cwd), "/workspace"); ok && (rel == "" || rel[0] == '/') {
			if fi, err := os.Stat(filepath.Join(opts.Workspace, rel)); err != nil || !fi.IsDir() {
				return nil, fmt.Errorf("sandbox: working directory %s does not exist in the workspace", cwd)
			}
		}
	}
	if err := opts.Limits.check(); err != nil {
		return nil, err
	}
	r := &run{opts: opts, id: newID()}
	if err := r.checkHostUser(); err != nil {
		return nil, err
	}
	return r, nil
}

func (l Limits) check() error {
	switch {
	case l.Memory < 0, l.Pids < 0, l.CPU < 0, l.Timeout < 0, l.OutputBytes < 0:
		return errors.New("sandbox: limits must not be negative")
	case l.Memory > 0 && l.Memory < 4<<20:
		return fmt.Errorf("sandbox: memory limit %d bytes is below 4 MiB", l.Memory)
	}
	return nil
}

func (r *run) run(ctx context.Context) (Result, error) {
	var res Result
	config, err := r.config()
	if err != nil {
		return res, err
	}
	filter, err := r.filterFile()
	if err != nil {
		return res, err
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return res, err
	}
	r.status = statusR
	r.closers = append(r.closers, statusR)
	r.childEnds = append(r.childEnds, statusW)
	// The lifeline: pid 1 ends the sandbox when it reads EOF, that is when
	// this process is gone (only it holds the write end).
	lifeR, lifeW, err := os.Pipe()
	if err != nil {
		return res, err
	}
	r.closers = append(r.closers, lifeW)
	r.childEnds = append(r.childEnds, lifeR)

	p := &libcontainer.Process{
		// The container's init execs its own binary again (the sealed copy
		// libcontainer made of it): that is our pid 1 (see Init).
		Args:       append([]string{"/proc/self/exe", initArg}, r.opts.Args...),
		Env:        r.env(),
		Cwd:        r.cwd(),
		UID:        int(r.user().UID),
		GID:        int(r.user().GID),
		ExtraFiles: []*os.File{filter, statusW, lifeR}, // fds 3, 4 and 5
		Init:       true,
	}
	if err := r.stdio(p); err != nil {
		r.closeChildEnds()
		return res, err
	}
	r.process = p

	start := time.Now()
	c, err := libcontainer.Create(filepath.Join(r.opts.StateDir, "containers"), r.id, config)
	if err != nil {
		r.closeChildEnds()
		return res, fmt.Errorf("sandbox: create container: %w", err)
	}
	r.container = c
	err = c.Run(p)
	r.closeChildEnds()
	if err != nil {
		return res, fmt.Errorf("sandbox: start: %w", startErr(err))
	}
	return r.supervise(ctx, start, counters{})
}

// supervise follows the sandbox whose pid 1 (r.process) has been told
// what to run at start: it kills the sandbox on timeout or cancellation,
// passes signals on, waits for the end of every process and returns the
// Result, with what the cgroups counted since base.
func (r *run) supervise(ctx context.Context, start time.Time, base counters) (Result, error) {
	var res Result
	p := r.process
	// Kill the sandbox on timeout or cancellation.
	done := make(chan struct{})
	var timedOut, cancelled bool
	var timeout <-chan time.Time
	if t := r.opts.Limits.Timeout; t > 0 {
		timer := time.NewTimer(t - time.Since(start))
		defer timer.Stop()
		timeout = timer.C
	}
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		select {
		case <-done:
			return
		case <-timeout:
			timedOut = true
		case <-ctx.Done():
			cancelled = true
		}
		r.kill()
	}()
	// What pid 1 says: "ready" once it passes signals on and the program
	// runs, then maybe how the program ended.
	ready := make(chan struct{})
	statusDone := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(io.TeeReader(r.status, readyWriter{ready: ready}))
		statusDone <- string(b)
	}()
	if r.opts.Limits.Pids > 0 {
		go func() {
			select {
			case <-ready:
				if pid, err := p.Pid(); err == nil {
					r.initOutOfPids(pid)
				}
			case <-done:
			}
		}()
	}
	if r.opts.Signals != nil {
		go func() {
			select {
			case <-ready:
			case <-done:
				return
			}
			for {
				select {
				case <-done:
					return
				case s := <-r.opts.Signals:
					if sig, ok := s.(syscall.Signal); ok {
						if pid, err := p.Pid(); err == nil {
							unix.Kill(pid, sig)
						}
					}
				}
			}
		}()
	}

	ps, waitErr := p.Wait()
	res.Duration = time.Since(start)
	r.copies.Wait()
	close(done)
	<-killed

	r.stats(&res, base)
	status := <-statusDone
	res.TimedOut = timedOut
	r.mu.Lock()
	res.OutputLimited = r.limited
	r.mu.Unlock()
	if ps == nil {
		return res, fmt.Errorf("sandbox: wait: %w", waitErr)
	}
	ws := ps.Sys().(syscall.WaitStatus)
	switch {
	case ws.Signaled():
		// Our init itself was killed: by us, the OOM killer or the kernel.
		res.Signal = ws.Signal()
		res.ExitCode = 128 + int(res.Signal)
	default:
		res.ExitCode = ws.ExitStatus()
	}
	var startErr error
	if s, ok := parseStatus(status); ok {
		switch {
		case s.cwdErrno != 0:
			startErr = fmt.Errorf("sandbox: working directory %s in the sandbox: %w", r.cwd(), s.cwdErrno)
		case s.errno != 0:
			startErr = &StartError{Program: r.opts.Args[0], Err: s.errno}
		case s.signal != 0 && !ws.Signaled():
			res.Signal = s.signal
			res.ExitCode = 128 + int(s.signal)
		}
	}
	if cancelled {
		return res, ctx.Err()
	}
	return res, startErr
}

// readyWriter closes ready when "ready\n" has been written to it.
type readyWriter struct{ ready chan struct{} }

func (w readyWriter) Write(b []byte) (int, error) {
	select {
	case <-w.ready:
	default:
		if bytes.Contains(b, []byte("ready\n")) {
			close(w.ready)
		}
	}
	return len(b), nil
}

// kill ends every process of the sandbox: pid 1 dies, and with it the pid
// namespace.
func (r *run) kill() {
	r.mu.Lock()
	r.killed = true
	r.mu.Unlock()
	if r.process != nil {
		if pid, err := r.process.Pid(); err == nil {
			unix.Kill(pid, unix.SIGKILL)
			return
		}
	}
	if r.container != nil {
		r.container.Signal(unix.SIGKILL)
	}
}

func (r *run) closeChildEnds() {
	for _, c := range r.childEnds {
		c.Close()
	}
	r.childEnds = nil
}

func (r *run) cleanup() {
	r.closeChildEnds()
	if r.container != nil {
		// Destroy kills what may still run, removes the cgroups and the
		// state directory.
		destroyContainer(r.container)
	}
	r.mu.Lock()
	initCgroup := r.initCgroup
	r.mu.Unlock()
	if initCgroup != "" {
		removeCgroup(initCgroup)
	}
	for _, c := range r.closers {
		c.Close()
	}
}

// checkHostUser refuses an id block or a host user the user namespace
// cannot map as asked: root, or an id of the block other than the one
// User has there anyway.
func (r *run) checkHostUser() error {
	b := r.opts.IDs
	if err := b.check(); err != nil {
		return err
	}
	h := r.opts.HostUser
	if h == nil {
		return nil
	}
	u := r.user()
	if u.UID >= SharedIDs.Count || u.GID >= SharedIDs.Count {
		return fmt.Errorf("sandbox: user %d:%d: inside ids go up to %d", u.UID, u.GID, SharedIDs.Count-1)
	}
	for _, c := range []struct {
		what         string
		inside, host uint32
	}{{"uid", u.UID, h.UID}, {"gid", u.GID, h.GID}} {
		if c.host == 0 {
			return fmt.Errorf("sandbox: host %s 0: the sandbox never runs as host root", c.what)
		}
		if in, ok := b.Inside(c.host); ok && in != c.inside {
			return fmt.Errorf("sandbox: host %s %d is inside id %d of the sandbox's id block (host ids %v): it cannot be inside id %d too", c.what, c.host, in, b, c.inside)
		}
	}
	return nil
}

func (r *run) user() User {
	if r.opts.User != nil {
		return *r.opts.User
	}
	return DefaultUser
}

// DefaultPath is the PATH programs get unless Options.Env sets one: the
// shell fast path's (backend.DefaultPath).
const DefaultPath = backend.DefaultPath

// env is the program's environment: PATH, HOME (the workspace, as on the
// shell fast path; /tmp without a workspace), LANG and TMPDIR as on the
// fast path, the caches' variables (see
// cacheEnv), then Options.Env.
func (r *run) env() []string {
	home := "/tmp"
	if r.opts.Workspace != "" {
		home = backend.Home
	}
	env := append([]string{"PATH=" + DefaultPath, "HOME=" + home, "LANG=" + backend.Lang, "TMPDIR=" + backend.TmpDir}, cacheEnv(r.opts.Cache != "")...)
	if r.opts.GitConfig != "" {
		env = append(env, "GIT_CONFIG_SYSTEM="+GitConfigDir+"/config")
	}
	for _, kv := range r.opts.Env {
		k, _, _ := strings.Cut(kv, "=")
		replaced := false
		for i, old := range env {
			if ok, _, _ := strings.Cut(old, "="); ok == k {
				env[i] = kv
				replaced = true
			}
		}
		if !replaced {
			env = append(env, kv)
		}
	}
	return env
}

func (r *run) cwd() string {
	base := "/"
	if r.opts.Workspace != "" {
		base = "/workspace"
	}
	if r.opts.Cwd == "" {
		return base
	}
	if filepath.IsAbs(r.opts.Cwd) {
		return filepath.Clean(r.opts.Cwd)
	}
	return filepath.Join(base, r.opts.Cwd)
}

// startErr makes libcontainer's start errors shorter where they say
// something we know better.
func startErr(err error) error {
	msg := err.Error()
	if strings.Contains(msg, "chdir to cwd") {
		return fmt.Errorf("working directory does not exist in the sandbox: %w", err)
	}
	return err
}

// CacheDir is where a sandbox sees Options.Cache.
const CacheDir = "/cache"

// cacheEnv points the build and package caches of Go, npm, pip and cargo,
// and the XDG cache, config, data and state directories, into CacheDir,
// or, without a cache, into the sandbox's /tmp, which goes with it: never
// into the workspace (HOME), where they would be journaled, synced back
// and seen by the agent.
func cacheEnv(cache bool) []string {
	root := "/tmp/.cache"
	if cache {
		root = CacheDir
	}
	return []string{
		"GOCACHE=" + root + "/go-build",
		"GOPATH=" + root + "/go",
		"GOMODCACHE=" + root + "/go/pkg/mod",
		"npm_config_cache=" + root + "/npm",
		"PIP_CACHE_DIR=" + root + "/pip",
		"CARGO_HOME=" + root + "/cargo",
		"XDG_CACHE_HOME=" + root,
		// What tools keep of their own under HOME otherwise (go's
		// telemetry in ~/.config/go, for one).
		"XDG_CONFIG_HOME=" + root + "/config",
		"XDG_DATA_HOME=" + root + "/share",
		"XDG_STATE_HOME=" + root + "/state",
	}
}
