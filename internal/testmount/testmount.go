// Package testmount runs the computerfs daemon for tests: it builds
// cmd/computerfs once per test binary (Run removes it when the tests end)
// and mounts stores with it in a child process, never in the test process
// itself (a process that serves a FUSE mount must not use it: a page fault
// on the mount during a stop-the-world garbage collection would deadlock).
package testmount

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/computerfs/computerfs/internal/proc"
)

type build struct {
	once sync.Once
	path string
	err  error
}

type buildKey struct {
	cmd  string // under cmd/
	race bool
}

var (
	buildsMu sync.Mutex
	builds   = map[buildKey]*build{}
	// running is set by Run: binaries are built only under it, so that
	// they are removed when the test binary ends.
	running bool
)

// Run runs the tests (m.Run) and then removes the binaries they built
// and the registry of agent identities they used (a temporary one). A
// package whose tests use this package calls it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(testmount.Run(m)) }
func Run(m *testing.M) int {
	running = true
	// The daemons and imports of the tests register their agent
	// identities here, not in the host's registry.
	if os.Getenv("COMPUTERFS_AGENTS_DIR") == "" {
		if dir, err := os.MkdirTemp("", "computerfs-agents-"); err == nil {
			os.Setenv("COMPUTERFS_AGENTS_DIR", dir)
			defer os.RemoveAll(dir)
		}
	}
	// The image key that hibernate makes and resume needs: the tests'
	// own, one for every "host" of a test binary.
	if os.Getenv("COMPUTERFS_IMAGE_KEY") == "" {
		if dir, err := os.MkdirTemp("", "computerfs-imagekey-"); err == nil {
			os.Setenv("COMPUTERFS_IMAGE_KEY", filepath.Join(dir, "image-key"))
			defer os.RemoveAll(dir)
		}
	}
	defer func() {
		buildsMu.Lock()
		defer buildsMu.Unlock()
		for _, b := range builds {
			if b.path != "" {
				os.RemoveAll(filepath.Dir(b.path))
			}
		}
	}()
	return m.Run()
}

// Binary returns the path of a computerfs binary built from this checkout,
// with the race detector when the test binary has it.
func Binary(t testing.TB) string { return Command(t, "computerfs", raceEnabled) }

// PlainBinary returns a computerfs binary without the race detector, for
// tests that measure memory or time.
func PlainBinary(t testing.TB) string { return Command(t, "computerfs", false) }

// Command returns the path of cmd/<name> built from this checkout (with the
// seccomp tag, and the race detector if race), once per test binary.
func Command(t testing.TB, name string, race bool) string {
	t.Helper()
	if !running {
		t.Fatal("testmount: call testmount.Run from TestMain, so that the binaries it builds are removed")
	}
	buildsMu.Lock()
	b := builds[buildKey{name, race}]
	if b == nil {
		b = &build{}
		builds[buildKey{name, race}] = b
	}
	buildsMu.Unlock()
	b.once.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		dir, err := os.MkdirTemp("", name+"-bin-")
		if err != nil {
			b.err = err
			return
		}
		path := filepath.Join(dir, name)
		args := []string{"build", "-tags", "seccomp", "-o", path}
		if race {
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args, "./cmd/"+name)...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		// Set under buildsMu: Run's removal may read it from another
		// goroutine if a test is still building when m.Run returns.
		buildsMu.Lock()
		b.path = path
		buildsMu.Unlock()
		if err != nil {
			b.err = fmt.Errorf("go build ./cmd/%s: %v\n%s", name, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// Mount is a running daemon serving a store.
type Mount struct {
	Dir   string // the mount point
	Store string
	Pid   int
	bin   string
	done  bool
}

// PublicDir makes a directory that every user can reach (t.TempDir's
// parents are private), removed when the test ends.
func PublicDir(t testing.TB, pattern string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// Start mounts store (created if missing) on a fresh mount point with
// `computerfs mount --background` and unmounts it when the test ends. The
// daemon has the race detector if the test has it.
func Start(t testing.TB, store string, args ...string) *Mount {
	t.Helper()
	return start(t, Binary(t), store, args...)
}

// StartPlain is Start with a daemon built without the race detector, for
// tests that measure its memory or speed.
func StartPlain(t testing.TB, store string, args ...string) *Mount {
	t.Helper()
	return start(t, PlainBinary(t), store, args...)
}

func start(t testing.TB, bin, store string, args ...string) *Mount {
	t.Helper()
	m := &Mount{Dir: PublicDir(t, "computerfs-mnt-"), Store: store, bin: bin}
	m.start(t, args...)
	t.Cleanup(func() { m.Unmount(t) })
	return m
}

func (m *Mount) start(t testing.TB, args ...string) {
	t.Helper()
	all := append([]string{"mount", "--background", "--store", m.Store}, args...)
	cmd := exec.Command(m.bin, append(all, m.Dir)...)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		log, _ := os.ReadFile(filepath.Join(m.Store, "daemon.log"))
		t.Fatalf("computerfs mount: %v\n%s\ndaemon log:\n%s", err, stderr, log)
	}
	m.Pid, err = strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("computerfs mount printed %q, want a pid", out)
	}
	m.done = false
}

// Remount mounts the same store again after Unmount or Kill.
func (m *Mount) Remount(t testing.TB, args ...string) {
	t.Helper()
	m.start(t, args...)
}

// Unmount unmounts with `computerfs unmount` and waits for the daemon.
func (m *Mount) Unmount(t testing.TB) {
	t.Helper()
	if m.done {
		return
	}
	m.done = true
	out, err := exec.Command(m.bin, "unmount", m.Dir).CombinedOutput()
	if err != nil {
		// Leave nothing mounted behind, whatever happened.
		syscall.Unmount(m.Dir, syscall.MNT_DETACH)
		t.Errorf("computerfs unmount: %v\n%s", err, out)
	}
}

// Kill ends the daemon with SIGKILL, as a crash would, and removes the dead
// mount. The store is left as the crash left it.
func (m *Mount) Kill(t testing.TB) {
	t.Helper()
	if m.done {
		return
	}
	m.done = true
	if err := syscall.Kill(m.Pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill daemon %d: %v", m.Pid, err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		if !proc.Running(m.Pid) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon %d survived SIGKILL", m.Pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := syscall.Unmount(m.Dir, syscall.MNT_DETACH); err != nil {
		t.Fatalf("unmount after kill: %v", err)
	}
}

// Log returns the daemon's log so far.
func (m *Mount) Log() string {
	b, _ := os.ReadFile(filepath.Join(m.Store, "daemon.log"))
	return string(bytes.TrimSpace(b))
}

// Tool returns the path of cmd/<name> built from this checkout, with the
// race detector when the test binary has it.
func Tool(t testing.TB, name string) string { return Command(t, name, raceEnabled) }
