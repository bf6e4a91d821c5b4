package sandbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A pre-started sandbox gets its command over a Unix stream socket: a
// 4-byte big-endian length that carries the program's stdin, stdout and
// stderr as SCM_RIGHTS, then that many bytes of NUL-separated fields:
// the working directory, the number of arguments, the arguments, the
// environment. (NUL cannot be in any of them: execve takes C strings.)

// maxCommand bounds a command's encoding (args and environment).
const maxCommand = 16 << 20

type command struct {
	cwd       string
	args, env []string
}

func (c command) encode() ([]byte, error) {
	fields := append([]string{c.cwd, strconv.Itoa(len(c.args))}, c.args...)
	fields = append(fields, c.env...)
	for _, f := range fields {
		if strings.IndexByte(f, 0) >= 0 {
			return nil, fmt.Errorf("sandbox: NUL byte in %q", f)
		}
	}
	b := []byte(strings.Join(fields, "\x00"))
	if len(b) > maxCommand {
		return nil, fmt.Errorf("sandbox: command and environment of %d bytes, more than %d", len(b), maxCommand)
	}
	return b, nil
}

func decodeCommand(b []byte) (command, error) {
	f := strings.Split(string(b), "\x00")
	if len(f) < 2 {
		return command{}, errors.New("short command")
	}
	n, err := strconv.Atoi(f[1])
	if err != nil || n < 1 || n > len(f)-2 {
		return command{}, fmt.Errorf("bad argument count %q", f[1])
	}
	c := command{cwd: f[0], args: f[2 : 2+n]}
	if rest := f[2+n:]; len(rest) > 0 {
		c.env = rest
	}
	return c, nil
}

// sendCommand writes c to the socket sock with the three files of stdio.
func sendCommand(sock *os.File, c command, stdio [3]*os.File) error {
	body, err := c.encode()
	if err != nil {
		return err
	}
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(body)))
	fds := []int{int(stdio[0].Fd()), int(stdio[1].Fd()), int(stdio[2].Fd())}
	rc, err := sock.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Write(func(fd uintptr) bool {
		serr = unix.Sendmsg(int(fd), hdr[:], unix.UnixRights(fds...), nil, 0)
		return serr != unix.EAGAIN
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("sandbox: hand the command to the sandbox: %w", err)
	}
	if _, err := sock.Write(body); err != nil {
		return fmt.Errorf("sandbox: hand the command to the sandbox: %w", err)
	}
	return nil
}

// receiveCommand reads a command from fd, a blocking socket, and returns
// it with the descriptors of the stdin, stdout and stderr that came with
// it (close-on-exec). io.EOF: the socket was closed before a command came.
func receiveCommand(fd int) (command, [3]int, error) {
	var stdio [3]int
	c, fds, err := receive(fd)
	if len(fds) == 3 && err == nil {
		copy(stdio[:], fds)
		return c, stdio, nil
	}
	for _, f := range fds {
		unix.Close(f)
	}
	if err == nil {
		err = fmt.Errorf("want 3 descriptors with the command, got %d", len(fds))
	}
	return command{}, stdio, err
}

func receive(fd int) (command, []int, error) {
	var hdr [4]byte
	oob := make([]byte, unix.CmsgSpace(3*4))
	var n, oobn int
	var err error
	for {
		n, oobn, _, _, err = unix.Recvmsg(fd, hdr[:], oob, unix.MSG_CMSG_CLOEXEC)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return command{}, nil, err
	}
	if n == 0 {
		return command{}, nil, io.EOF
	}
	var fds []int
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return command{}, nil, err
	}
	for i := range msgs {
		f, err := unix.ParseUnixRights(&msgs[i])
		if err != nil {
			return command{}, fds, err
		}
		fds = append(fds, f...)
	}
	if err := readFull(fd, hdr[n:]); err != nil {
		return command{}, fds, err
	}
	size := binary.BigEndian.Uint32(hdr[:])
	if size > maxCommand {
		return command{}, fds, fmt.Errorf("command of %d bytes", size)
	}
	body := make([]byte, size)
	if err := readFull(fd, body); err != nil {
		return command{}, fds, err
	}
	c, err := decodeCommand(body)
	return c, fds, err
}

func readFull(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Read(fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrUnexpectedEOF
		}
		b = b[n:]
	}
	return nil
}
