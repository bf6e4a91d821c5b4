package execwire

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Client runs commands through the control socket of one workspace's
// daemon. It speaks just enough HTTP for the exec call, over a connection
// of its own, without net/http: that package and its dependencies (TLS,
// x509, HTTP/2) took about a millisecond of start-up and of CPU per run of
// the thin client, whose whole point is to start fast. The connection is
// a blocking socket read by plain system calls (see sockConn).
type Client struct {
	mp, store, sock string
	pid             int       // the daemon's, when Dial found it
	conn            *sockConn // opened by Dial, used by the first Exec
}

// Dial finds the daemon serving the computerfs mount at mountpoint and
// connects to it, so that a command says that nobody answers before it
// does anything else. If the mount's daemon is gone, the error is a
// *DaemonGoneError.
func Dial(mountpoint string) (*Client, error) {
	mp, err := filepath.Abs(mountpoint)
	if err != nil {
		return nil, err
	}
	store, err := MountedStore(mp)
	if err != nil {
		return nil, err
	}
	c := &Client{mp: mp, store: store, sock: filepath.Join(store, SocketName)}
	if _, err := os.Stat(c.sock); err != nil {
		if g := Gone(mp, store, err); g != nil {
			return nil, g
		}
		return nil, fmt.Errorf("workspace at %s: no control socket (%w)", mp, err)
	}
	c.pid = StorePid(store)
	if c.conn, err = c.dial(); err != nil {
		return nil, err
	}
	return c, nil
}

// dial connects to the control socket.
func (c *Client) dial() (conn *sockConn, err error) {
	err = WithSocketAddr(c.sock, func(addr string) (err error) {
		conn, err = dialUnix(addr)
		return err
	})
	if err == nil {
		return conn, nil
	}
	if g := Gone(c.mp, c.store, err); g != nil {
		return nil, g
	}
	return nil, Lost(c.mp, c.store, c.pid, fmt.Errorf("control socket: %w", err))
}

// Close closes the connection Dial opened, if no Exec used it.
func (c *Client) Close() error {
	if c.conn == nil {
		return nil
	}
	err := c.conn.Close()
	c.conn = nil
	return err
}

// Exec asks the daemon to run a command, copying its output to stdout and
// stderr as it comes. Cancelling ctx closes the connection, which stops
// the command in the daemon.
func (c *Client) Exec(ctx context.Context, req Request, stdout, stderr io.Writer) (Result, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return Result{}, err
	}
	conn := c.conn
	c.conn = nil
	if conn == nil {
		if conn, err = c.dial(); err != nil {
			return Result{}, err
		}
	}
	defer conn.Close()
	// Shutting the connection down unblocks the reads below and tells
	// the daemon to stop the command.
	stop := context.AfterFunc(ctx, conn.shutdown)
	defer stop()
	res, err := c.exec(conn, body, stdout, stderr)
	if err != nil && ctx.Err() != nil {
		return Result{}, ctx.Err()
	}
	return res, err
}

// exec sends one request on conn and reads its answer. HTTP/1.0, so that
// the answer is neither chunked nor kept alive: its body ends when the
// daemon closes the connection.
func (c *Client) exec(conn *sockConn, body []byte, stdout, stderr io.Writer) (Result, error) {
	req := fmt.Appendf(nil, "POST %s HTTP/1.0\r\nHost: computerfs\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", Path, len(body))
	if _, err := conn.Write(append(req, body...)); err != nil {
		return Result{}, c.lost(fmt.Errorf("control socket: %w", err))
	}
	br := bufio.NewReaderSize(conn, 64<<10)
	status, err := readHead(br)
	if err != nil {
		return Result{}, c.lost(fmt.Errorf("control socket: %w", err))
	}
	if status != 200 {
		msg, _ := io.ReadAll(io.LimitReader(br, 64<<10))
		return Result{}, errors.New(strings.TrimSpace(string(msg)))
	}
	res, transport, err := ReadAnswer(br, stdout, stderr)
	if transport {
		return Result{}, c.lost(err)
	}
	return res, err
}

// ReadAnswer reads the daemon's streamed answer to an exec call (one JSON
// event a line), copying output to stdout and stderr as it comes, up to
// the result. transport says that the error is the answer's being cut
// short or unreadable (the daemon or its connection gone), not one the
// daemon sent.
func ReadAnswer(r io.Reader, stdout, stderr io.Writer) (res Result, transport bool, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4<<10), MaxRequest)
	for sc.Scan() {
		var ev Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return Result{}, false, fmt.Errorf("exec answer: %w", err)
		}
		switch {
		case ev.Out != nil:
			stdout.Write(ev.Out)
		case ev.Err != nil:
			stderr.Write(ev.Err)
		case ev.Error != "":
			return Result{}, false, errors.New(ev.Error)
		case ev.Result != nil:
			return *ev.Result, false, nil
		}
	}
	if err := sc.Err(); err != nil {
		return Result{}, true, err
	}
	return Result{}, true, fmt.Errorf("exec: %w", ErrNoResult)
}

func (c *Client) lost(err error) error { return Lost(c.mp, c.store, c.pid, err) }

// readHead reads an HTTP response's status line and headers and returns
// its status code. The exec call's answer needs nothing from its headers:
// its body runs to the end of the connection.
func readHead(br *bufio.Reader) (int, error) {
	line, err := readLine(br)
	if err != nil {
		return 0, err
	}
	proto, rest, _ := strings.Cut(line, " ")
	code, _, _ := strings.Cut(rest, " ")
	status, err := strconv.Atoi(code)
	if !strings.HasPrefix(proto, "HTTP/1.") || err != nil || len(code) != 3 {
		return 0, fmt.Errorf("malformed answer %q", line)
	}
	for n := 0; ; n++ {
		line, err := readLine(br)
		if err != nil {
			return 0, err
		}
		if line == "" {
			return status, nil
		}
		if n == 100 {
			return 0, errors.New("malformed answer: too many header lines")
		}
	}
}

// readLine reads a line of the answer's head, without its CRLF; an end of
// the connection before it is io.ErrUnexpectedEOF.
func readLine(br *bufio.Reader) (string, error) {
	line, err := br.ReadSlice('\n')
	if errors.Is(err, io.EOF) {
		return "", io.ErrUnexpectedEOF
	}
	if err != nil { // bufio.ErrBufferFull: a line over 64 KiB
		return "", err
	}
	return strings.TrimRight(string(line), "\r\n"), nil
}

// sockConn is a connected unix socket in blocking mode, read and written
// with plain system calls: the thread that waits for the daemon's answer
// sleeps in read(2) and is woken by it, where the net package's poller
// would park the goroutine and hand the wake-up through another thread.
type sockConn struct {
	mu sync.Mutex // held to shut the socket down or close it
	fd int        // -1 once closed
}

// dialUnix connects to the unix socket at addr, with net.Dial's errors.
func dialUnix(addr string) (*sockConn, error) {
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	for {
		err = syscall.Connect(fd, &syscall.SockaddrUnix{Name: addr})
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("dial unix %s: %w", addr, os.NewSyscallError("connect", err))
	}
	return &sockConn{fd: fd}, nil
}

func (c *sockConn) Read(p []byte) (int, error) {
	for {
		n, err := syscall.Read(c.fd, p)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return 0, os.NewSyscallError("read", err)
		case n == 0 && len(p) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

func (c *sockConn) Write(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		n, err := syscall.Write(c.fd, p[done:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return done, os.NewSyscallError("write", err)
		}
		done += n
	}
	return done, nil
}

// shutdown ends the connection both ways: a read waiting in another
// goroutine returns, and the daemon sees its client gone.
func (c *sockConn) shutdown() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd >= 0 {
		syscall.Shutdown(c.fd, syscall.SHUT_RDWR)
	}
}

func (c *sockConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd < 0 {
		return nil
	}
	err := syscall.Close(c.fd)
	c.fd = -1
	return err
}
