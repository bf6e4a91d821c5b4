package gittest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// SSHServer serves the repositories under a directory over SSH on
// 127.0.0.1, as a git host does: a client that presents an authorized key
// may run git-upload-pack or git-receive-pack (the real ones) on a
// repository path; nothing else runs.
type SSHServer struct {
	Addr string // host:port
	// KnownHosts is a known_hosts file that names the server's host key
	// (for SSH_KNOWN_HOSTS).
	KnownHosts string

	root       string
	authorized [][]byte
	ln         net.Listener
	wg         sync.WaitGroup
	mu         sync.Mutex
	conns      []net.Conn
	stderr     lockedBuffer
}

// ServeSSH starts an SSH server for the repositories under root that
// accepts the given public keys, and stops it when the test ends.
func ServeSSH(t testing.TB, root string, authorized ...ssh.PublicKey) *SSHServer {
	t.Helper()
	_, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	host, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		t.Fatal(err)
	}
	s := &SSHServer{root: root}
	for _, k := range authorized {
		s.authorized = append(s.authorized, k.Marshal())
	}
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
		for _, a := range s.authorized {
			if bytes.Equal(a, k.Marshal()) {
				return nil, nil
			}
		}
		return nil, errors.New("key not authorized")
	}}
	cfg.AddHostKey(host)
	if s.ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	s.Addr = s.ln.Addr().String()
	s.KnownHosts = filepath.Join(t.TempDir(), "known_hosts")
	line := knownhosts.Line([]string{knownhosts.Normalize(s.Addr)}, host.PublicKey())
	if err := os.WriteFile(s.KnownHosts, []byte(line+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := s.ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.serveConn(c, cfg)
			}()
		}
	}()
	t.Cleanup(func() {
		s.ln.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
		if t.Failed() && s.stderr.Len() > 0 {
			t.Logf("ssh server's git:\n%s", s.stderr.String())
		}
	})
	return s
}

// URL is the ssh:// URL of the repository at rel under the root.
func (s *SSHServer) URL(rel string) string {
	return "ssh://git@" + s.Addr + "/" + strings.TrimPrefix(rel, "/")
}

func (s *SSHServer) serveConn(c net.Conn, cfg *ssh.ServerConfig) {
	defer c.Close()
	_, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		return
	}
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.UnknownChannelType, "only sessions")
			continue
		}
		ch, chReqs, err := nc.Accept()
		if err != nil {
			continue
		}
		go s.serveSession(ch, chReqs)
	}
}

func (s *SSHServer) serveSession(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	for req := range reqs {
		switch req.Type {
		case "env":
			req.Reply(true, nil) // GIT_PROTOCOL and the like: git ignores what it does not know
		case "exec":
			var p struct{ Command string }
			if err := ssh.Unmarshal(req.Payload, &p); err != nil {
				req.Reply(false, nil)
				return
			}
			cmd, err := s.command(p.Command)
			if err != nil {
				fmt.Fprintf(ch.Stderr(), "%v\n", err)
				req.Reply(true, nil)
				exit(ch, 128)
				return
			}
			req.Reply(true, nil)
			cmd.Stdin, cmd.Stdout, cmd.Stderr = ch, ch, io.MultiWriter(ch.Stderr(), &s.stderr)
			code := 0
			if err := cmd.Run(); err != nil {
				code = 1
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					code = ee.ExitCode()
				}
			}
			ch.CloseWrite()
			exit(ch, code)
			return
		default:
			req.Reply(false, nil)
		}
	}
}

func exit(ch ssh.Channel, code int) {
	ch.SendRequest("exit-status", false, binary.BigEndian.AppendUint32(nil, uint32(code)))
}

// command maps "git-receive-pack '/a/b.git'" to the real program on the
// repository under the root.
func (s *SSHServer) command(line string) (*exec.Cmd, error) {
	prog, arg, _ := strings.Cut(line, " ")
	if prog != "git-upload-pack" && prog != "git-receive-pack" {
		return nil, fmt.Errorf("gittest ssh: %q is not a git command this server runs", prog)
	}
	arg = strings.Trim(arg, "'")
	if arg == "" || strings.Contains(arg, "'") {
		return nil, fmt.Errorf("gittest ssh: bad repository %q", arg)
	}
	dir := filepath.Join(s.root, filepath.Clean("/"+arg))
	if !isBare(dir) {
		return nil, fmt.Errorf("gittest ssh: %s: not a repository", arg)
	}
	cmd := exec.Command(prog, dir)
	cmd.Env = append(os.Environ(), Env()...)
	return cmd, nil
}

// NewSSHKey makes an ed25519 key pair, writes the private key in
// OpenSSH's format to a file (mode 0600) and returns the file, the private
// key (for an agent) and the public key (for the server).
func NewSSHKey(t testing.TB) (string, ed25519.PrivateKey, ssh.PublicKey) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "gittest")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	return file, priv, signer.PublicKey()
}
