package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	// The blank imports libcontainer needs in the binary that runs
	// containers: the C code that sets up namespaces before the Go runtime
	// starts in "init", and the device cgroup rules.
	_ "github.com/opencontainers/cgroups/devices"
	"github.com/opencontainers/runc/libcontainer"
	_ "github.com/opencontainers/runc/libcontainer/nsenter"
	"golang.org/x/sys/unix"
)

func init() {
	// Keep the main thread to the main goroutine. libcontainer starts a
	// container from a goroutine that locks its thread, joins the
	// container's mount namespace and returns without unlocking, so that
	// Go ends the thread; but Go cannot end the main thread, it parks it
	// forever, still in the container's mount namespace, which keeps every
	// mount of the container (the workspace's FUSE mount among them)
	// alive. Locked here, the main thread never runs another goroutine.
	runtime.LockOSThread()
}

// initArg is the argument that makes the binary the sandbox's pid 1;
// warmArg makes it the pid 1 of a pre-started sandbox, which waits for its
// command (see Pool).
const (
	initArg = "computerfs-sandbox-init"
	warmArg = "computerfs-sandbox-warm"
)

// Init must be the first thing main (or TestMain) does in a program that
// uses Run. In the processes that Run starts, the program's own binary
// again, it does their work and never returns: libcontainer's "init" that
// sets up the container, then the sandbox's pid 1. Anywhere else it
// returns at once.
func Init() {
	if len(os.Args) < 2 {
		return
	}
	switch os.Args[1] {
	case "init":
		if os.Getenv("_LIBCONTAINER_INITPIPE") != "" {
			libcontainer.Init() // does not return
		}
	case initArg:
		if os.Getpid() == 1 {
			os.Exit(sandboxInit(os.Args[2:]))
		}
	case warmArg:
		if os.Getpid() == 1 {
			os.Exit(warmInit())
		}
	}
}

// The status pipe (fd 4 of pid 1) tells Run that the program runs
// ("ready", from then on signals are passed on) and what the exit code
// cannot: "errno N" when the program could not be started, "signal N"
// when a signal killed it (pid 1 cannot die of a signal it sends itself),
// "cwd N" when a pre-started sandbox could not enter the command's working
// directory.
type initStatus struct {
	errno    syscall.Errno
	signal   syscall.Signal
	cwdErrno syscall.Errno
}

func parseStatus(s string) (initStatus, bool) {
	var st initStatus
	s = strings.TrimSpace(strings.TrimPrefix(s, "ready\n"))
	word, arg, ok := strings.Cut(s, " ")
	if !ok {
		return st, false
	}
	n, err := strconv.Atoi(arg)
	if err != nil {
		return st, false
	}
	switch word {
	case "errno":
		st.errno = syscall.Errno(n)
	case "signal":
		st.signal = syscall.Signal(n)
	case "cwd":
		st.cwdErrno = syscall.Errno(n)
	default:
		return st, false
	}
	return st, true
}

// Signals pid 1 passes on to the program.
var forwarded = []os.Signal{
	unix.SIGHUP, unix.SIGINT, unix.SIGQUIT, unix.SIGTERM,
	unix.SIGUSR1, unix.SIGUSR2, unix.SIGWINCH, unix.SIGALRM,
}

// sandboxInit is pid 1 of a sandbox. Fd 3 holds the compiled seccomp
// filter (empty: none), fd 4 is the status pipe, fd 5 the lifeline. It
// loads the filter, starts args, forwards signals to it, reaps every
// orphan and returns the program's exit code once the program has ended;
// or ends at once when the process that runs the sandbox is gone (EOF on
// the lifeline), and with pid 1 the whole sandbox.
func sandboxInit(args []string) int {
	events := initSetup()
	lifeline := watchLifeline()
	status := os.NewFile(4, "status")
	syscall.CloseOnExec(4)
	filter, err := readFilter(3)
	syscall.Close(3)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandbox init:", err)
		return 125
	}
	if len(args) == 0 {
		return 125
	}
	return startProgram(args, filter, status, events, lifeline)
}

// warmInit is pid 1 of a sandbox a Pool starts before it has a command.
// Fds 3 and 4 are sandboxInit's, fd 5 a Unix socket to the pool: pid 1
// loads the filter, says it waits (one byte), receives its command (see
// sendCommand) with the program's stdin, stdout and stderr, and then does
// what sandboxInit does, the socket being its lifeline. EOF on the socket
// before a command: the pool is gone, and so is the sandbox.
func warmInit() int {
	events := initSetup()
	status := os.NewFile(4, "status")
	syscall.CloseOnExec(4)
	syscall.CloseOnExec(5)
	filter, err := readFilter(3)
	syscall.Close(3)
	if err != nil {
		return 125
	}
	// The filter now: the command comes sooner to a sandbox that has
	// nothing left to do but start it.
	if len(filter) > 0 {
		if err := loadFilter(filter); err != nil {
			return 125
		}
	}
	unix.SetNonblock(5, false)
	if _, err := unix.Write(5, []byte{'w'}); err != nil {
		return 125
	}
	cmd, stdio, err := receiveCommand(5)
	if err != nil {
		return 125
	}
	for i, fd := range stdio {
		if err := unix.Dup3(fd, i, 0); err != nil {
			return 125
		}
		unix.Close(fd)
	}
	os.Clearenv()
	for _, kv := range cmd.env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			os.Setenv(k, v)
		}
	}
	if err := enterDir(cmd.cwd); err != nil {
		errno := syscall.ENOENT
		errors.As(err, &errno)
		fmt.Fprintf(status, "cwd %d\n", int(errno))
		return 125
	}
	return startProgram(cmd.args, nil, status, events, watchLifeline())
}

// initSetup is what both inits do first; it returns the channel of the
// signals pid 1 handles.
func initSetup() chan os.Signal {
	// Few threads: each counts against the pids limit. Nothing here
	// blocks a thread once the program runs: the lifeline is read through
	// the poller, children are reaped on SIGCHLD.
	runtime.GOMAXPROCS(1)
	runtime.UnlockOSThread() // the lock of this package's init
	events := make(chan os.Signal, 32)
	signal.Notify(events, append(forwarded, unix.SIGCHLD)...)
	// Not dumpable: the program (same user) cannot ptrace pid 1 or open
	// its /proc files. The program itself is dumpable again after execve.
	unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	return events
}

// watchLifeline returns a channel closed when fd 5 (the lifeline, a pipe
// or a socket) reads EOF: the process that runs the sandbox is gone. A
// parent death signal would not do: it comes when the thread that started
// the container ends, and Go ends threads.
func watchLifeline() chan struct{} {
	syscall.CloseOnExec(5)
	syscall.SetNonblock(5, true)
	lifeline := make(chan struct{})
	go func() {
		f := os.NewFile(5, "lifeline")
		var b [1]byte
		f.Read(b[:]) // EOF, or an error: either way the starter is gone
		close(lifeline)
	}()
	return lifeline
}

// enterDir makes dir pid 1's working directory, and so the program's. A
// missing directory is made, as libcontainer makes it for a cold start
// (Run has checked those in the workspace).
func enterDir(dir string) error {
	err := unix.Chdir(dir)
	if err == unix.ENOENT {
		if os.MkdirAll(dir, 0o755) == nil {
			err = unix.Chdir(dir)
		}
	}
	return err
}

// startProgram loads filter (if not loaded yet), starts args with pid 1's
// stdio, forwards signals to it, reaps every orphan and returns the
// program's exit code once it has ended, or 137 when lifeline closes.
func startProgram(args []string, filter []byte, status *os.File, events chan os.Signal, lifeline chan struct{}) int {
	failed := func(err error) int {
		errno := syscall.ENOENT
		var e syscall.Errno
		switch {
		case errors.As(err, &e):
			errno = e
		case errors.Is(err, fs.ErrPermission):
			errno = syscall.EACCES
		}
		fmt.Fprintf(status, "errno %d\n", int(errno))
		if errno == syscall.ENOENT || errno == syscall.ENOTDIR {
			return 127
		}
		return 126
	}
	path, err := exec.LookPath(args[0])
	if err != nil && !errors.Is(err, exec.ErrDot) {
		return failed(err)
	}
	if len(filter) > 0 {
		if err := loadFilter(filter); err != nil {
			fmt.Fprintln(os.Stderr, "sandbox init: seccomp:", err)
			return 125
		}
	}
	pid, err := syscall.ForkExec(path, args, &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{0, 1, 2},
	})
	if err != nil {
		return failed(err)
	}
	fmt.Fprintf(status, "ready\n")
	for {
		select {
		case <-lifeline:
			return 137
		case s := <-events:
			if s != unix.SIGCHLD {
				syscall.Kill(pid, s.(syscall.Signal))
				continue
			}
		}
		// Reap every child that has ended: orphans, and the program.
		for {
			var ws syscall.WaitStatus
			wpid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if err == syscall.EINTR {
				continue
			}
			if err != nil || wpid <= 0 {
				break
			}
			if wpid != pid {
				continue // an orphan
			}
			if ws.Signaled() {
				fmt.Fprintf(status, "signal %d\n", int(ws.Signal()))
				return 128 + int(ws.Signal())
			}
			return ws.ExitStatus()
		}
	}
}

// readFilter reads the whole of fd with pread: the file is shared by every
// sandbox of the process that made it, and so is its offset.
func readFilter(fd int) ([]byte, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Size == 0 || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, nil
	}
	b := make([]byte, st.Size)
	for off := 0; off < len(b); {
		n, err := unix.Pread(fd, b[off:], int64(off))
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, errors.New("short seccomp filter")
		}
		off += n
	}
	return b, nil
}

// loadFilter installs a BPF program (struct sock_filter[] as the kernel
// takes it) on every thread of the process; its children inherit it. The
// no_new_privs bit is already set by libcontainer.
func loadFilter(b []byte) error {
	const insnSize = int(unsafe.Sizeof(unix.SockFilter{}))
	if len(b)%insnSize != 0 || len(b)/insnSize > 0xffff {
		return fmt.Errorf("bad filter of %d bytes", len(b))
	}
	insns := unsafe.Slice((*unix.SockFilter)(unsafe.Pointer(&b[0])), len(b)/insnSize)
	prog := unix.SockFprog{Len: uint16(len(insns)), Filter: &insns[0]}
	_, _, errno := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog)))
	if errno != 0 {
		return errno
	}
	return nil
}
