package gittest

import (
	"bytes"
	"crypto/subtle"
	"io"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
)

// ServeHTTP serves repositories over git's smart HTTP protocol, for fetch
// and push, with git http-backend behind an HTTP server on 127.0.0.1 that
// stops when the test ends.
//
// If dir is a bare repository, ServeHTTP serves it and returns its URL,
// ready for git clone. Otherwise dir is a directory of repositories and
// ServeHTTP returns the server's base URL: the repository dir/a/b.git is
// at baseURL + "/a/b.git". Pushes to non-bare repositories are refused
// for their checked-out branch, as usual.
func ServeHTTP(t testing.TB, dir string) string {
	t.Helper()
	return serve(t, dir, "", "")
}

// ServeHTTPAuth is ServeHTTP with HTTP basic authentication: requests
// without user and token are answered 401 Unauthorized. Give git the
// credentials in the URL (http://user:token@host/...) or with a credential
// helper.
func ServeHTTPAuth(t testing.TB, dir, user, token string) string {
	t.Helper()
	if user == "" || token == "" {
		t.Fatal("gittest: ServeHTTPAuth needs a user and a token")
	}
	return serve(t, dir, user, token)
}

func serve(t testing.TB, dir, user, token string) string {
	t.Helper()
	dir, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	root, repo := dir, ""
	if isBare(dir) {
		root, repo = filepath.Dir(dir), filepath.Base(dir)
	}
	execPath := Git(t, "", "--exec-path")
	backend := filepath.Join(execPath, "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		t.Fatalf("gittest: no git http-backend: %v", err)
	}

	stderr := &lockedBuffer{}
	env := append(Env(),
		"GIT_PROJECT_ROOT="+root,
		"GIT_HTTP_EXPORT_ALL=1",
		// Enable push without touching the repositories' configuration.
		"GIT_CONFIG_COUNT=2",
		"GIT_CONFIG_KEY_0=http.receivepack",
		"GIT_CONFIG_VALUE_0=true",
		// Repositories made by tests may belong to another user than the
		// server (it runs as the test's user, but be safe).
		"GIT_CONFIG_KEY_1=safe.directory",
		"GIT_CONFIG_VALUE_1=*",
	)
	backendHandler := &cgi.Handler{
		Path:   backend,
		Dir:    root,
		Env:    env,
		Stderr: stderr,
	}
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if user != "" {
			u, p, ok := r.BasicAuth()
			if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(user)) != 1 ||
				subtle.ConstantTimeCompare([]byte(p), []byte(token)) != 1 {
				w.Header().Set("WWW-Authenticate", `Basic realm="gittest"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			r.Header.Del("Authorization")
		}
		// net/http/cgi refuses chunked request bodies, which git sends
		// for pushes and fetch negotiations over http.postBuffer (1 MiB).
		// Buffer them and pass a length.
		if r.ContentLength < 0 && r.Body != nil {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
			r.TransferEncoding = nil
			r.Header.Set("Content-Length", strconv.Itoa(len(body)))
		}
		backendHandler.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		if t.Failed() && stderr.Len() > 0 {
			t.Logf("git http-backend stderr:\n%s", stderr.String())
		}
	})
	if repo != "" {
		return srv.URL + "/" + repo
	}
	return srv.URL
}

// isBare reports whether dir is a bare repository.
func isBare(dir string) bool {
	cmd := exec.Command("git", "rev-parse", "--is-bare-repository")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), Env()...)
	cmd.Env = append(cmd.Env, "GIT_CEILING_DIRECTORIES="+filepath.Dir(dir))
	out, err := cmd.Output()
	return err == nil && bytes.Equal(bytes.TrimSpace(out), []byte("true"))
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
