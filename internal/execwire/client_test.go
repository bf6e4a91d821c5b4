package execwire

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// serve runs handler on a unix socket, as the daemon's control socket
// (net/http's server), and returns a client of it.
func serve(t *testing.T, handler http.HandlerFunc) *Client {
	t.Helper()
	dir := t.TempDir()
	sock := filepath.Join(dir, SocketName)
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return &Client{mp: "/mnt/ws", store: dir, sock: sock}
}

// TestExecStreams: output events go to stdout and stderr in order, the
// result ends the call, and the request arrives whole.
func TestExecStreams(t *testing.T) {
	var got Request
	c := serve(t, func(rw http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != Path {
			http.Error(rw, "wrong call "+r.Method+" "+r.URL.Path, http.StatusNotFound)
			return
		}
		json.NewDecoder(r.Body).Decode(&got)
		enc := json.NewEncoder(rw)
		enc.Encode(Event{Out: []byte("one\n")})
		rw.(http.Flusher).Flush()
		enc.Encode(Event{Err: []byte("warn\n")})
		enc.Encode(Event{Out: []byte(strings.Repeat("x", 200<<10))}) // a line longer than the reader's buffer
		enc.Encode(Event{Result: &Result{ExitCode: 3, Backend: "shell", Request: "7"}})
	})
	req := Request{Command: "echo hi", Backend: "shell", Cwd: "/workspace/d", Env: []string{"A=1"}, Timeout: "5s", Stdin: []byte("in\x00put")}
	var out, errb strings.Builder
	res, err := c.Exec(context.Background(), req, &out, &errb)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 || res.Backend != "shell" || res.Request != "7" {
		t.Errorf("result %+v", res)
	}
	if out.String() != "one\n"+strings.Repeat("x", 200<<10) || errb.String() != "warn\n" {
		t.Errorf("stdout %.40q (%d bytes), stderr %q", out.String(), out.Len(), errb.String())
	}
	if got.Command != req.Command || got.Cwd != req.Cwd || string(got.Stdin) != string(req.Stdin) || got.Timeout != "5s" || len(got.Env) != 1 {
		t.Errorf("the daemon got %+v", got)
	}
}

// TestExecErrors: a refused request says what the daemon said; an error
// event is the call's error; an answer that ends without a result says so.
func TestExecErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		want    string
	}{
		{"refused", func(rw http.ResponseWriter, r *http.Request) {
			http.Error(rw, `timeout "soon": want a duration such as 30s`, http.StatusBadRequest)
		}, `timeout "soon": want a duration such as 30s`},
		{"error event", func(rw http.ResponseWriter, r *http.Request) {
			json.NewEncoder(rw).Encode(Event{Out: []byte("partial")})
			json.NewEncoder(rw).Encode(Event{Error: "the workspace was shut down while the command ran"})
		}, "the workspace was shut down while the command ran"},
		{"no result", func(rw http.ResponseWriter, r *http.Request) {
			json.NewEncoder(rw).Encode(Event{Out: []byte("partial")})
		}, "exec: " + ErrNoResult.Error()},
		{"not JSON", func(rw http.ResponseWriter, r *http.Request) {
			io.WriteString(rw, "<html>\n")
		}, "exec answer: invalid character '<' looking for beginning of value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := serve(t, tc.handler)
			_, err := c.Exec(context.Background(), Request{Command: "true"}, io.Discard, io.Discard)
			if err == nil || err.Error() != tc.want {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// TestExecCancel: cancelling the call ends it with the context's error,
// and the daemon's request context ends with it (so that the daemon stops
// the command).
func TestExecCancel(t *testing.T) {
	started, stopped := make(chan struct{}), make(chan struct{})
	c := serve(t, func(rw http.ResponseWriter, r *http.Request) {
		// Read as the daemon does: the server watches the connection
		// once the body is read.
		var req Request
		json.NewDecoder(r.Body).Decode(&req)
		json.NewEncoder(rw).Encode(Event{Out: []byte("started\n")})
		rw.(http.Flusher).Flush()
		close(started)
		select {
		case <-r.Context().Done():
			close(stopped)
		case <-time.After(time.Minute):
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	_, err := c.Exec(ctx, Request{Command: "sleep 60"}, io.Discard, io.Discard)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	select {
	case <-stopped:
	case <-time.After(time.Minute):
		t.Fatal("the daemon's request went on after the client's cancel")
	}
}

// TestGone: a refused or missing socket means the daemon is gone.
func TestGone(t *testing.T) {
	c := &Client{mp: "/mnt/ws", store: t.TempDir()}
	c.sock = filepath.Join(c.store, SocketName)
	_, err := c.Exec(context.Background(), Request{Command: "true"}, io.Discard, io.Discard)
	var g *DaemonGoneError
	if !errors.As(err, &g) || g.Mountpoint != "/mnt/ws" || g.Store != c.store {
		t.Fatalf("error %v, want a DaemonGoneError", err)
	}
	want := "the daemon for /mnt/ws is gone: run computerfs mount --store " + c.store + " /mnt/ws"
	if err.Error() != want {
		t.Errorf("message %q, want %q", err.Error(), want)
	}
}
