// Package attacker is a test helper: a TCP listener on 127.0.0.1 standing
// for a server an agent would like the daemon to reach. It answers HTTP
// with 401 asking for basic credentials, and records every connection and
// every Authorization header it receives.
package attacker

import (
	"bufio"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// Server is a listening attacker.
type Server struct {
	URL  string // http://127.0.0.1:PORT
	Host string // 127.0.0.1:PORT

	ln    net.Listener
	mu    sync.Mutex
	conns int
	auths []string
	paths []string
}

// Listen starts a Server that stops when the test ends.
func Listen(t testing.TB) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{ln: ln, Host: ln.Addr().String(), URL: "http://" + ln.Addr().String()}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns++
			s.mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.serve(c)
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return s
}

func (s *Server) serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(r)
		if err != nil {
			return
		}
		s.mu.Lock()
		s.paths = append(s.paths, req.URL.String())
		if a := req.Header.Get("Authorization"); a != "" {
			s.auths = append(s.auths, a)
		}
		s.mu.Unlock()
		req.Body.Close()
		resp := "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"x\"\r\nContent-Length: 0\r\n\r\n"
		if _, err := c.Write([]byte(resp)); err != nil {
			return
		}
	}
}

// Conns is how many connections the server accepted.
func (s *Server) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns
}

// Auths are the Authorization headers received.
func (s *Server) Auths() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.auths...)
}

// Check fails the test if anything reached the server.
func (s *Server) Check(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns > 0 {
		t.Errorf("the attacker's server got %d connection(s), requests %s, Authorization headers %q", s.conns, strings.Join(s.paths, " "), s.auths)
	}
}
