// Package execwire is the exec call of a workspace's control socket: the
// messages of POST /v1/exec, how a client finds the socket from a mount
// point, what it says when the daemon is gone, and a client of the call
// that needs nothing but the standard library. The daemon (the root
// package) serves these messages and `computerfs exec` and the thin client
// cmd/computerfs-exec send them, so the two sides cannot drift apart; and
// since this package pulls in neither net/http nor the daemon, a program
// built on it starts in a few milliseconds (see docs/performance.md).
package execwire

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/computerfs/computerfs/internal/mountinfo"
	"github.com/computerfs/computerfs/internal/proc"
	"golang.org/x/sys/unix"
)

// SocketName is the control socket's name in the store directory.
const SocketName = "control.sock"

// Path is the exec call's URL path.
const Path = "/v1/exec"

// MaxRequest bounds an exec request's JSON, and one line of the answer.
const MaxRequest = 32 << 20

// Request is a command to run on the workspace.
type Request struct {
	Command string   `json:"command"`
	Backend string   `json:"backend,omitempty"` // "shell", "sandbox" or "auto" (default)
	Cwd     string   `json:"cwd,omitempty"`     // default /workspace
	Env     []string `json:"env,omitempty"`
	Timeout string   `json:"timeout,omitempty"` // a Go duration
	Stdin   []byte   `json:"stdin,omitempty"`
	// Network is "none" (default) or "host": the sandbox's network. The
	// daemon refuses "host" unless it was started allowing it.
	Network string `json:"network,omitempty"`
}

// Result is how a command ended.
type Result struct {
	ExitCode   int    `json:"exit_code"`
	Backend    string `json:"backend"`
	Why        string `json:"why"` // why that backend
	DurationMs int64  `json:"duration_ms"`
	Truncated  bool   `json:"truncated,omitempty"`
	Stopped    string `json:"stopped,omitempty"`
	Request    string `json:"request"` // the id the journal names the shell's changes by
	// Sandbox only: peak memory of the sandbox and CPU time of its
	// processes.
	PeakMemory int64 `json:"peak_memory,omitempty"`
	CPUTimeMs  int64 `json:"cpu_time_ms,omitempty"`
	Warm       bool  `json:"warm,omitempty"` // a pre-started sandbox ran it
}

// Event is one line of the streamed answer: output, or the end.
type Event struct {
	Out    []byte  `json:"out,omitempty"`
	Err    []byte  `json:"err,omitempty"`
	Result *Result `json:"result,omitempty"`
	Error  string  `json:"error,omitempty"`
}

// MountedStore returns the store directory of the computerfs mount at mp,
// an absolute path.
func MountedStore(mp string) (string, error) {
	m, ok, err := mountinfo.Find(mp)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("%s is not mounted", mp)
	}
	if !strings.HasPrefix(m.FSType, "fuse") || !strings.HasPrefix(m.Source, "computerfs:") {
		return "", fmt.Errorf("%s is not a computerfs mount (%s from %s)", mp, m.FSType, m.Source)
	}
	return strings.TrimPrefix(m.Source, "computerfs:"), nil
}

// StorePid returns the pid recorded in the store's lock file, or 0.
func StorePid(store string) int {
	b, err := os.ReadFile(filepath.Join(store, "lock"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// maxSocketPath is the longest path a unix socket address holds (sun_path
// is 108 bytes with its NUL).
const maxSocketPath = 107

// WithSocketAddr calls f with an address for the unix socket at path (to
// bind or dial): path itself, or if it is too long for a socket address, a
// /proc/self/fd path through its directory, open while f runs.
func WithSocketAddr(path string, f func(addr string) error) error {
	if len(path) <= maxSocketPath {
		return f(path)
	}
	fd, err := unix.Open(filepath.Dir(path), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: filepath.Dir(path), Err: err}
	}
	defer unix.Close(fd)
	addr := fmt.Sprintf("/proc/self/fd/%d/%s", fd, filepath.Base(path))
	if len(addr) > maxSocketPath {
		return fmt.Errorf("socket path %s: name too long", path)
	}
	return f(addr)
}

// DaemonGoneError is what a client's calls return when the computerfs
// mount at Mountpoint has no daemon answering for it any more (killed,
// crashed): its control socket is refused or missing. Mounting the store
// again replaces the dead mount.
type DaemonGoneError struct {
	Mountpoint string
	Store      string
	Pid        int // the pid the store's lock file last recorded; 0 if none
	// Running: a process of that pid still runs (a daemon that is ending,
	// or an unrelated process that was given the pid).
	Running bool
}

func (e *DaemonGoneError) Error() string {
	who := "the daemon for " + e.Mountpoint
	if e.Pid > 0 {
		who += fmt.Sprintf(", pid %d,", e.Pid)
	}
	remedy := "run computerfs mount --store " + ShellQuote(e.Store) + " " + ShellQuote(e.Mountpoint)
	if e.Running {
		return who + " does not answer on its control socket: if it is not ending, unmount the workspace and " + remedy
	}
	return who + " is gone: " + remedy
}

// ShellQuote quotes s for a shell if it needs it.
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+:@%=,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Gone tells whether a failure to reach the control socket (err) means
// that the daemon is gone, and if so returns the error that says so.
func Gone(mp, store string, err error) error {
	if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, os.ErrNotExist) {
		return nil
	}
	pid := StorePid(store)
	return &DaemonGoneError{Mountpoint: mp, Store: store, Pid: pid, Running: pid > 0 && !Ended(pid)}
}

// ErrNoResult: the daemon's answer ended before it was complete.
var ErrNoResult = errors.New("the daemon's answer ended without a result")

// BrokenConn tells whether err is a connection to the daemon that broke
// off (not a cancellation, not an answer that could not be read).
func BrokenConn(err error) bool {
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, ErrNoResult) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// Lost is the error of a call whose connection broke off (err): a
// *DaemonGoneError if the daemon that was asked, pid, has ended.
func Lost(mp, store string, pid int, err error) error {
	if pid <= 0 || !BrokenConn(err) || !Ended(pid) {
		return err
	}
	return &DaemonGoneError{Mountpoint: mp, Store: store, Pid: pid}
}

// Ended tells whether process pid has ended, or does within a second: a
// killed daemon's connections close while it exits.
func Ended(pid int) bool {
	for deadline := time.Now().Add(time.Second); proc.Running(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}
