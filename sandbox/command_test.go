package sandbox

import (
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// socketPair is a pair of connected stream sockets as a Pool makes them:
// ours (non-blocking, an *os.File) and pid 1's (blocking).
func socketPair(t *testing.T) (*os.File, int) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	unix.SetNonblock(fds[0], true)
	ours := os.NewFile(uintptr(fds[0]), "ours")
	t.Cleanup(func() { ours.Close(); unix.Close(fds[1]) })
	return ours, fds[1]
}

func sameFile(t *testing.T, fd int, f *os.File) bool {
	t.Helper()
	var a, b unix.Stat_t
	if err := unix.Fstat(fd, &a); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fstat(int(f.Fd()), &b); err != nil {
		t.Fatal(err)
	}
	return a.Dev == b.Dev && a.Ino == b.Ino
}

// TestCommandSocket: a command (one larger than the socket's buffer too)
// and its three files go over the socket and come out the same.
func TestCommandSocket(t *testing.T) {
	dir := t.TempDir()
	var stdio [3]*os.File
	for i := range stdio {
		f, err := os.Create(dir + "/" + string(rune('a'+i)))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		stdio[i] = f
	}
	for _, c := range []command{
		{cwd: "/workspace", args: []string{"true"}},
		{cwd: "/tmp/a b", args: []string{"sh", "-c", "echo 'x'\n", ""}, env: []string{"PATH=/bin", "EMPTY=", "X=a=b"}},
		{cwd: "/", args: []string{"echo", strings.Repeat("long argument ", 100000)}, env: []string{"BIG=" + strings.Repeat("v", 300000)}},
	} {
		ours, theirs := socketPair(t)
		sent := make(chan error, 1)
		go func() { sent <- sendCommand(ours, c, stdio) }()
		got, fds, err := receiveCommand(theirs)
		if err != nil {
			t.Fatal(err)
		}
		if err := <-sent; err != nil {
			t.Fatal(err)
		}
		if got.cwd != c.cwd || !slices.Equal(got.args, c.args) || !slices.Equal(got.env, c.env) {
			t.Errorf("sent %.80q, received %.80q", c, got)
		}
		for i, fd := range fds {
			if !sameFile(t, fd, stdio[i]) {
				t.Errorf("descriptor %d is not the file sent", i)
			}
			if flags, _ := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); flags&unix.FD_CLOEXEC == 0 {
				t.Errorf("descriptor %d received without close-on-exec", i)
			}
			unix.Close(fd)
		}
	}

	// The pool gone before a command: EOF.
	ours, theirs := socketPair(t)
	ours.Close()
	if _, _, err := receiveCommand(theirs); !errors.Is(err, io.EOF) {
		t.Errorf("closed socket: %v", err)
	}
	// Bad commands are refused before they are sent.
	ours, _ = socketPair(t)
	if err := sendCommand(ours, command{cwd: "/", args: []string{"a\x00b"}}, stdio); err == nil || !strings.Contains(err.Error(), "NUL") {
		t.Errorf("NUL in an argument: %v", err)
	}
	// A command without its files is refused by the receiver.
	ours, theirs = socketPair(t)
	body, _ := command{cwd: "/", args: []string{"true"}}.encode()
	ours.Write(append([]byte{0, 0, 0, byte(len(body))}, body...))
	if _, _, err := receiveCommand(theirs); err == nil || !strings.Contains(err.Error(), "descriptors") {
		t.Errorf("no descriptors: %v", err)
	}
}

// FuzzCommand: decoding takes any bytes without panicking, and what
// decodes encodes to bytes that decode to the same command.
func FuzzCommand(f *testing.F) {
	for _, c := range []command{
		{cwd: "/workspace", args: []string{"true"}},
		{cwd: "/", args: []string{"sh", "-c", "x"}, env: []string{"A=1", "B="}},
	} {
		b, _ := c.encode()
		f.Add(b)
	}
	f.Add([]byte("/\x000"))
	f.Add([]byte("/\x00-1\x00x"))
	f.Add([]byte("/\x0099\x00x"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeCommand(b)
		if err != nil {
			return
		}
		if len(c.args) == 0 {
			t.Fatalf("%q: decoded without arguments", b)
		}
		again, err := c.encode()
		if err != nil {
			t.Fatalf("%q: decoded %q, which does not encode: %v", b, c, err)
		}
		c2, err := decodeCommand(again)
		if err != nil || c2.cwd != c.cwd || !slices.Equal(c2.args, c.args) || !slices.Equal(c2.env, c.env) {
			t.Fatalf("%q: %q encodes to %q, which decodes to %q %v", b, c, again, c2, err)
		}
	})
}
