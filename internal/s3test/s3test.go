// Package s3test runs a real S3 server for tests: versitygw with its posix
// backend, listening on 127.0.0.1 and storing objects in a test's temporary
// directory.
//
// The versitygw binary is built once per machine with `go install` into
// $XDG_CACHE_HOME/computerfs-test (or ~/.cache/computerfs-test) and reused
// afterwards; a lock file there keeps test binaries that run at the same
// time from building it twice. A server starts in about 0.1 s, so every
// test that needs one calls Start and gets its own.
package s3test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Version is the versitygw release the tests run.
const Version = "v1.8.0"

// The root credentials every server is started with.
const (
	AccessKey = "computerfs-test-access"
	SecretKey = "computerfs-test-secret-0123456789"
	Region    = "us-east-1"
)

// Server is a running versitygw. Its fields must not be changed.
type Server struct {
	Endpoint  string // "http://127.0.0.1:PORT"
	AccessKey string
	SecretKey string
	Region    string
	Root      string // the posix backend's directory: one subdirectory per bucket

	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	log  string        // file with the server's stdout and stderr
	bin  string
}

// Stop kills the server (SIGKILL), as a crash or an outage would, and
// waits for it to exit. Restart brings it back.
func (s *Server) Stop() { s.stop() }

// Restart starts the server again after Stop, on the same address and
// with the same objects. It must not run concurrently with the Server's
// other methods.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(s.Endpoint, "http://"))
	p, _ := strconv.Atoi(port)
	var n2 *Server
	var err error
	for range 50 { // the port may linger for a moment
		if n2, err = start(s.bin, s.Root, s.log+".restart", p); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("s3test: restart versitygw: %v", err)
	}
	s.cmd, s.done = n2.cmd, n2.done
}

var build struct {
	once sync.Once
	path string
	err  error
}

// Binary returns the path of the versitygw binary, building it first if
// this machine has none yet. It fails the test if the binary cannot be
// built or does not run.
func Binary(t testing.TB) string {
	t.Helper()
	build.once.Do(func() { build.path, build.err = ensureBinary() })
	if build.err != nil {
		t.Fatalf("s3test: versitygw %s: %v", Version, build.err)
	}
	return build.path
}

func cacheDir() (string, error) {
	dir, err := os.UserCacheDir() // $XDG_CACHE_HOME or ~/.cache
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "computerfs-test"), nil
}

func ensureBinary() (string, error) {
	cache, err := cacheDir()
	if err != nil {
		return "", err
	}
	bindir := filepath.Join(cache, "versitygw-"+Version)
	bin := filepath.Join(bindir, "versitygw")
	if runs(bin) == nil {
		return bin, nil
	}
	if err := os.MkdirAll(bindir, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(cache, "versitygw-"+Version+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	// Another test binary may have built it while this one waited.
	if runs(bin) == nil {
		return bin, nil
	}
	gocmd, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("no go command to build it with: %w", err)
	}
	cmd := exec.Command(gocmd, "install", "github.com/versity/versitygw/cmd/versitygw@"+Version)
	cmd.Dir = cache // outside any module: pkg@version ignores it anyway
	cmd.Env = append(os.Environ(), "GOBIN="+bindir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install: %v\n%s", err, out)
	}
	if err := runs(bin); err != nil {
		return "", fmt.Errorf("built, but it does not run: %w", err)
	}
	return bin, nil
}

// runs checks that bin exists and answers --version.
func runs(bin string) error {
	if _, err := os.Stat(bin); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s --version: %v\n%s", bin, err, out)
	}
	return nil
}

// Start starts a versitygw server with an empty posix backend in a
// temporary directory and stops it when the test ends. It fails the test
// if the server cannot be built or started.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Binary(t)
	root := t.TempDir()
	logdir := t.TempDir()
	var lastErr error
	for attempt := range 5 {
		s, err := start(bin, root, filepath.Join(logdir, fmt.Sprintf("versitygw-%d.log", attempt)), 0)
		if err == nil {
			s.bin = bin
			t.Cleanup(func() {
				s.stop()
				if t.Failed() {
					if b, err := os.ReadFile(s.log); err == nil && len(b) > 0 {
						t.Logf("versitygw output:\n%s", tail(b, 4096))
					}
				}
			})
			return s
		}
		lastErr = err
		if !errors.Is(err, errPortTaken) {
			break
		}
	}
	t.Fatalf("s3test: start versitygw: %v", lastErr)
	return nil
}

var errPortTaken = errors.New("port already in use")

func start(bin, root, logPath string, port int) (*Server, error) {
	var err error
	if port == 0 {
		if port, err = freePort(); err != nil {
			return nil, err
		}
	}
	// A health path of our own: if another server grabbed the port between
	// freePort and the listen, polling it cannot mistake that server for ours.
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	health := "/s3test-health-" + hex.EncodeToString(nonce[:])
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))

	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin,
		"--port", addr,
		"--access", AccessKey,
		"--secret", SecretKey,
		"--region", Region,
		"--health", health,
		"--keep-alive",
		"--quiet",
		"posix", root)
	// versitygw reads many settings from the environment (ROOT_*, VGW_*,
	// LOGFILE): give it only what a process needs.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir()}
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &Server{
		Endpoint:  "http://" + addr,
		AccessKey: AccessKey,
		SecretKey: SecretKey,
		Region:    Region,
		Root:      root,
		cmd:       cmd,
		done:      make(chan struct{}),
		log:       logPath,
	}
	go func() {
		_ = cmd.Wait()
		close(s.done)
	}()

	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-s.done:
			out, _ := os.ReadFile(logPath)
			if bytes.Contains(out, []byte("address already in use")) {
				return nil, fmt.Errorf("%w: %s", errPortTaken, addr)
			}
			return nil, fmt.Errorf("versitygw exited: %v\n%s", cmd.ProcessState, tail(out, 4096))
		default:
		}
		resp, err := client.Get(s.Endpoint + health)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			// Another versitygw on this port would answer 404 to our path;
			// another kind of server would not say it is versitygw.
			if resp.StatusCode == http.StatusOK && resp.Header.Get("Server") == "VERSITYGW" {
				return s, nil
			}
		}
		if time.Now().After(deadline) {
			s.stop()
			out, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("no answer on %s after 30s (last error %v)\n%s", addr, err, tail(out, 4096))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// stop kills the server's process group and waits for the server to exit.
func (s *Server) stop() {
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.done
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// Client returns an S3 client for the server with its root credentials and
// path-style addressing. opts adjust the client's options, for example to
// set an HTTPClient that injects faults.
func (s *Server) Client(t testing.TB, opts ...func(*s3.Options)) *s3.Client {
	t.Helper()
	o := s3.Options{
		Region:       s.Region,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
	}
	for _, f := range opts {
		f(&o)
	}
	return s3.New(o)
}

func (s *Server) ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// CreateBucket creates a bucket or fails the test.
func (s *Server) CreateBucket(t testing.TB, name string) {
	t.Helper()
	_, err := s.Client(t).CreateBucket(s.ctx(t), &s3.CreateBucketInput{Bucket: aws.String(name)})
	if err != nil {
		t.Fatalf("s3test: create bucket %q: %v", name, err)
	}
}

var bucketSeq atomic.Int64

var notBucketChars = regexp.MustCompile(`[^a-z0-9]+`)

// NewBucket creates a bucket whose name, derived from the test's name, is
// unique within the test binary, and returns the name.
func (s *Server) NewBucket(t testing.TB) string {
	t.Helper()
	base := strings.Trim(notBucketChars.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(base) > 40 {
		base = strings.TrimRight(base[:40], "-")
	}
	name := fmt.Sprintf("t-%s-%d", base, bucketSeq.Add(1))
	s.CreateBucket(t, name)
	return name
}

// Put stores data under bucket/key or fails the test.
func (s *Server) Put(t testing.TB, bucket, key string, data []byte) {
	t.Helper()
	_, err := s.Client(t).PutObject(s.ctx(t), &s3.PutObjectInput{
		Bucket: aws.String(bucket),
		Key:    aws.String(key),
		Body:   bytes.NewReader(data),
	})
	if err != nil {
		t.Fatalf("s3test: put %s/%s: %v", bucket, key, err)
	}
}

// Get returns the object bucket/key or fails the test.
func (s *Server) Get(t testing.TB, bucket, key string) []byte {
	t.Helper()
	out, err := s.Client(t).GetObject(s.ctx(t), &s3.GetObjectInput{
		Bucket: aws.String(bucket),
		Key:    aws.String(key),
	})
	if err != nil {
		t.Fatalf("s3test: get %s/%s: %v", bucket, key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatalf("s3test: read %s/%s: %v", bucket, key, err)
	}
	return b
}

// Env returns environment entries that give a child process the server's
// credentials and region: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_REGION, and an empty AWS_SESSION_TOKEN so that one inherited from
// the test's environment is not sent along. The endpoint is not included;
// pass s.Endpoint explicitly.
func (s *Server) Env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + s.AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + s.SecretKey,
		"AWS_REGION=" + s.Region,
		"AWS_SESSION_TOKEN=",
	}
}

// SetEnv sets the variables of Env in the test process for the duration
// of the test (with t.Setenv, so not in parallel tests).
func (s *Server) SetEnv(t testing.TB) {
	t.Helper()
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}
