package fstest

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The helper process.
//
// Checks that need another user, or another process (POSIX record locks are
// per process), re-execute the running test binary with the environment
// variable helperEnv holding a JSON helperJob. The child notices the
// variable before the testing package starts (in this package's init, or in
// MaybeRunHelper when a TestMain calls it first), drops to the job's
// credentials with setgroups/setresgid/setresuid, runs the job's operations
// in order and prints one JSON hres line per operation on stdout. The child
// starts as root and changes identity itself, so the test binary need not
// be readable by the other user.
//
// An operation "wait" prints its line and then blocks until the parent
// writes a line to the child's stdin (or closes it); that is how a child
// holds a lock while the parent looks at it.

const helperEnv = "FSTEST_HELPER_JOB"

// Ident is a user identity for the helper process.
type Ident struct {
	UID, GID uint32
	// Groups are the supplementary groups; none when empty.
	Groups []uint32
}

type helperJob struct {
	Cred *Ident `json:"cred,omitempty"`
	Ops  []hop  `json:"ops"`
}

// hop is one operation run by the helper.
type hop struct {
	Op    string  `json:"op"`
	Path  string  `json:"p,omitempty"`
	Path2 string  `json:"p2,omitempty"`
	Flags int     `json:"f,omitempty"`
	Mode  uint32  `json:"m,omitempty"`
	UID   int     `json:"u"`
	GID   int     `json:"g"`
	Data  []byte  `json:"d,omitempty"`
	Off   int64   `json:"off,omitempty"`
	Len   int64   `json:"len,omitempty"`
	Times []int64 `json:"t,omitempty"` // atime sec, nsec, mtime sec, nsec
	Slot  int     `json:"s,omitempty"` // fd slot for openkeep/setlk/getlk/close
	Seed  int64   `json:"seed,omitempty"`
}

// hres is the result of one hop.
type hres struct {
	Op    string   `json:"op"`
	Errno int      `json:"errno"`
	Data  []byte   `json:"d,omitempty"`
	Names []string `json:"names,omitempty"`
	Stat  *hstat   `json:"stat,omitempty"`
	Lock  *hlock   `json:"lock,omitempty"`
	Pid   int      `json:"pid,omitempty"`
	Msg   string   `json:"msg,omitempty"`
}

type hstat struct {
	Mode  uint32 `json:"mode"`
	UID   uint32 `json:"uid"`
	GID   uint32 `json:"gid"`
	Size  int64  `json:"size"`
	Nlink uint64 `json:"nlink"`
	Ino   uint64 `json:"ino"`
}

type hlock struct {
	Type  int16 `json:"type"`
	Start int64 `json:"start"`
	Len   int64 `json:"len"`
	Pid   int32 `json:"pid"`
}

// err returns the operation's outcome as an error (nil or a unix.Errno).
func (r hres) err() error {
	if r.Errno == 0 {
		return nil
	}
	return unix.Errno(r.Errno)
}

func init() {
	MaybeRunHelper()
}

var helperOnce sync.Once

// MaybeRunHelper runs the helper job and exits the process if this process
// is a helper child started by the suite; otherwise it returns at once.
// This package calls it from its init function, so a test binary that
// imports fstest needs nothing more; a TestMain may still call it first
// thing, which documents the mechanism and is harmless.
func MaybeRunHelper() {
	job := os.Getenv(helperEnv)
	if job == "" {
		return
	}
	helperOnce.Do(func() {
		os.Exit(helperMain(job))
	})
}

// guardHelper stops a helper child that somehow reached the tests.
func guardHelper() {
	if os.Getenv(helperEnv) != "" {
		fmt.Fprintln(os.Stderr, "fstest: helper child reached the tests; call fstest.MaybeRunHelper from TestMain")
		os.Exit(3)
	}
}

func helperMain(jobText string) int {
	var job helperJob
	if err := json.Unmarshal([]byte(jobText), &job); err != nil {
		fmt.Fprintf(os.Stderr, "fstest helper: bad job: %v\n", err)
		return 2
	}
	if job.Cred != nil {
		if err := dropCred(job.Cred); err != nil {
			fmt.Fprintf(os.Stderr, "fstest helper: changing identity: %v\n", err)
			return 2
		}
	}
	h := &helperState{fds: map[int]int{}, in: bufio.NewReader(os.Stdin)}
	enc := json.NewEncoder(os.Stdout)
	for _, op := range job.Ops {
		r := h.do(op)
		r.Op = op.Op
		if err := enc.Encode(r); err != nil {
			return 2
		}
		if op.Op == "wait" {
			h.in.ReadString('\n')
		}
	}
	return 0
}

func dropCred(id *Ident) error {
	groups := make([]int, len(id.Groups))
	for i, g := range id.Groups {
		groups[i] = int(g)
	}
	if err := syscall.Setgroups(groups); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setresgid(int(id.GID), int(id.GID), int(id.GID)); err != nil {
		return fmt.Errorf("setresgid: %w", err)
	}
	if err := syscall.Setresuid(int(id.UID), int(id.UID), int(id.UID)); err != nil {
		return fmt.Errorf("setresuid: %w", err)
	}
	return nil
}

type helperState struct {
	fds map[int]int // slot -> fd
	in  *bufio.Reader
}

func errnoOf(err error) int {
	if err == nil {
		return 0
	}
	var e unix.Errno
	if errors.As(err, &e) {
		return int(e)
	}
	return int(unix.EIO)
}

func statRes(st *unix.Stat_t) *hstat {
	return &hstat{Mode: st.Mode, UID: st.Uid, GID: st.Gid, Size: st.Size, Nlink: uint64(st.Nlink), Ino: st.Ino}
}

// do runs one operation in the helper child.
func (h *helperState) do(op hop) hres {
	var r hres
	e := func(err error) hres { r.Errno = errnoOf(err); return r }
	switch op.Op {
	case "wait":
		r.Pid = os.Getpid()
		return r
	case "stat", "lstat":
		var st unix.Stat_t
		var err error
		if op.Op == "stat" {
			err = xStat(op.Path, &st)
		} else {
			err = xLstat(op.Path, &st)
		}
		if err == nil {
			r.Stat = statRes(&st)
		}
		return e(err)
	case "open": // open and close again
		fd, err := xOpen(op.Path, op.Flags, op.Mode)
		if err == nil {
			unix.Close(fd)
		}
		return e(err)
	case "openkeep": // open and keep the fd in slot
		fd, err := xOpen(op.Path, op.Flags, op.Mode)
		if err == nil {
			h.fds[op.Slot] = fd
		}
		return e(err)
	case "close":
		fd, ok := h.fds[op.Slot]
		if !ok {
			return e(unix.EBADF)
		}
		delete(h.fds, op.Slot)
		return e(unix.Close(fd))
	case "write": // open O_WRONLY|Flags, pwrite Data at Off, close
		fd, err := xOpen(op.Path, unix.O_WRONLY|op.Flags, op.Mode)
		if err != nil {
			return e(err)
		}
		defer unix.Close(fd)
		return e(writeFull(fd, op.Data, op.Off))
	case "read":
		b, err := readFile(op.Path)
		r.Data = b
		return e(err)
	case "readdir":
		names, err := listNames(op.Path)
		r.Names = names
		return e(err)
	case "mkdir":
		return e(xMkdir(op.Path, op.Mode))
	case "rmdir":
		return e(xRmdir(op.Path))
	case "unlink":
		return e(xUnlink(op.Path))
	case "rename":
		return e(xRename(op.Path, op.Path2))
	case "link":
		return e(xLink(op.Path, op.Path2))
	case "symlink":
		return e(xSymlink(op.Path2, op.Path))
	case "chmod":
		return e(xChmod(op.Path, op.Mode))
	case "chown":
		return e(xChown(op.Path, op.UID, op.GID))
	case "lchown":
		return e(xLchown(op.Path, op.UID, op.GID))
	case "truncate":
		return e(xTruncate(op.Path, op.Len))
	case "mknod":
		return e(xMknod(op.Path, op.Mode, int(op.Len)))
	case "utimens_now":
		return e(xUtimens(op.Path, []unix.Timespec{{Nsec: unix.UTIME_NOW}, {Nsec: unix.UTIME_NOW}}, 0))
	case "utimens":
		t := op.Times
		return e(xUtimens(op.Path, []unix.Timespec{{Sec: t[0], Nsec: t[1]}, {Sec: t[2], Nsec: t[3]}}, 0))
	case "access":
		return e(xFaccessat(op.Path, op.Mode, op.Flags))
	case "setxattr":
		return e(xSetxattr(op.Path, op.Path2, op.Data, op.Flags))
	case "getxattr":
		buf := make([]byte, 64<<10)
		n, err := xGetxattr(op.Path, op.Path2, buf)
		if err == nil {
			r.Data = buf[:n]
		}
		return e(err)
	case "listxattr":
		buf := make([]byte, 64<<10)
		n, err := xListxattr(op.Path, buf)
		if err == nil {
			r.Names = splitXattrList(buf[:n])
		}
		return e(err)
	case "setlk", "setlkw", "getlk":
		fd, ok := h.fds[op.Slot]
		if !ok {
			return e(unix.EBADF)
		}
		lk := unix.Flock_t{Type: int16(op.Flags), Whence: 0, Start: op.Off, Len: op.Len}
		cmd := map[string]int{"setlk": unix.F_SETLK, "setlkw": unix.F_SETLKW, "getlk": unix.F_GETLK}[op.Op]
		err := xFcntlLock(fd, cmd, &lk)
		if err == nil && op.Op == "getlk" {
			r.Lock = &hlock{Type: lk.Type, Start: lk.Start, Len: lk.Len, Pid: lk.Pid}
		}
		return e(err)
	case "flock":
		fd, ok := h.fds[op.Slot]
		if !ok {
			return e(unix.EBADF)
		}
		return e(xFlock(fd, op.Flags))
	case "stress":
		n, errs := stressWorker(op.Path, op.Seed, time.Duration(op.Len), int(op.Off))
		r.Pid = n
		for _, err := range errs {
			r.Names = append(r.Names, err.Error())
		}
		return r
	}
	r.Errno = int(unix.ENOSYS)
	r.Msg = "unknown helper op " + op.Op
	return r
}

// helperProc is a running helper child.
type helperProc struct {
	cmd   *exec.Cmd
	out   *bufio.Scanner
	stdin io.WriteCloser
	err   *lockedBuffer
	n     int // results read
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.buf) < 64<<10 {
		b.buf = append(b.buf, p...)
	}
	return len(p), nil
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// startHelper starts a helper child running ops as cred (as root when
// cred is nil).
func startHelper(cred *Ident, ops []hop) (*helperProc, error) {
	job, err := json.Marshal(helperJob{Cred: cred, Ops: ops})
	if err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	// -test.run=^$ makes a test binary that did not run the helper (which
	// cannot happen while it imports this package) run no tests.
	cmd := exec.Command(exe, "-test.run=^$")
	// A binary built with -race sleeps a second at exit unless told not
	// to; the suite starts many short helpers.
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	cmd.Env = append(os.Environ(), helperEnv+"="+string(job), "GORACE="+gorace)
	cmd.Dir = "/"
	p := &helperProc{cmd: cmd, err: &lockedBuffer{}}
	cmd.Stderr = p.err
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p.stdin, err = cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p.out = bufio.NewScanner(stdout)
	p.out.Buffer(make([]byte, 1<<20), 16<<20)
	return p, nil
}

// next reads the result of the next operation.
func (p *helperProc) next() (hres, error) {
	if !p.out.Scan() {
		err := p.out.Err()
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return hres{}, fmt.Errorf("helper result %d: %v (stderr: %q)", p.n, err, p.err.String())
	}
	p.n++
	var r hres
	if err := json.Unmarshal(p.out.Bytes(), &r); err != nil {
		return r, fmt.Errorf("helper result %d: %v in %q", p.n, err, p.out.Text())
	}
	return r, nil
}

// release lets a child blocked in "wait" go on.
func (p *helperProc) release() { io.WriteString(p.stdin, "\n") }

// wait closes stdin and waits for the child to exit.
func (p *helperProc) wait() error {
	p.stdin.Close()
	for p.out.Scan() {
	}
	if err := p.cmd.Wait(); err != nil {
		return fmt.Errorf("helper: %v (stderr: %q)", err, p.err.String())
	}
	return nil
}

// kill ends the child (used on failure paths).
func (p *helperProc) kill() {
	p.stdin.Close()
	p.cmd.Process.Kill()
	p.cmd.Wait()
}

// runHelper runs ops in a child as cred and returns all results.
func runHelper(cred *Ident, ops []hop) ([]hres, error) {
	p, err := startHelper(cred, ops)
	if err != nil {
		return nil, err
	}
	res := make([]hres, 0, len(ops))
	for range ops {
		r, err := p.next()
		if err != nil {
			p.kill()
			return res, err
		}
		res = append(res, r)
	}
	return res, p.wait()
}

// as runs ops as id (root when id is nil) and returns their results; it
// fails the check if the helper itself breaks.
func (c *C) as(id *Ident, ops ...hop) []hres {
	c.Helper()
	res, err := runHelper(id, ops)
	if err != nil {
		c.Fatalf("helper process: %v", err)
	}
	for _, r := range res {
		if r.Msg != "" {
			c.Fatalf("helper: %s", r.Msg)
		}
	}
	return res
}

// as1 runs one operation as id and returns its outcome as an error.
func (c *C) as1(id *Ident, op hop) error {
	c.Helper()
	return c.as(id, op)[0].err()
}

// start runs ops as id in the background; the caller reads results with
// next, releases "wait" operations and must call wait.
func (c *C) start(id *Ident, ops ...hop) *helperProc {
	c.Helper()
	p, err := startHelper(id, ops)
	if err != nil {
		c.Fatalf("helper process: %v", err)
	}
	c.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.kill()
		}
	})
	return p
}

func (c *C) next(p *helperProc) hres {
	c.Helper()
	r, err := p.next()
	if err != nil {
		c.Fatalf("%v", err)
	}
	if r.Msg != "" {
		c.Fatalf("helper: %s", r.Msg)
	}
	return r
}

func splitXattrList(b []byte) []string {
	var names []string
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != 0 {
			i++
		}
		if i > 0 {
			names = append(names, string(b[:i]))
		}
		if i < len(b) {
			i++
		}
		b = b[i:]
	}
	return names
}
