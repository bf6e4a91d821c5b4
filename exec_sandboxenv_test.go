package computerfs_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/computerfs/computerfs"
	"github.com/computerfs/computerfs/internal/testmount"
	"github.com/computerfs/computerfs/sandbox"
	"github.com/computerfs/computerfs/sandbox/backend"
)

// A sandboxed command without stdin in the request reads /dev/null, cold
// and warm: a program that reads a piped stdin (rg PATTERN with no path)
// must not take an empty pipe for its input. With stdin, it is a pipe.
func TestSandboxStdinIsDevNull(t *testing.T) {
	m := testmount.Start(t, filepath.Join(t.TempDir(), "ws"))
	const probe = `if [ -p /dev/stdin ]; then echo pipe; elif [ -c /dev/stdin ]; then echo chardev; fi; readlink /proc/self/fd/0; cat`
	for i, warm := range []bool{false, true} {
		res, out, errOut, err := execOn(t, m.Dir, computerfs.ExecRequest{Backend: "sandbox", Command: probe})
		if err != nil || res.ExitCode != 0 || res.Warm != warm || out != "chardev\n/dev/null\n" {
			t.Fatalf("command %d (warm %v): %v %+v stdout %q stderr %q, want /dev/null", i, warm, err, res, out, errOut)
		}
	}
	res, out, _, err := execOn(t, m.Dir, computerfs.ExecRequest{Backend: "sandbox", Command: probe, Stdin: []byte("given\n")})
	if err != nil || res.ExitCode != 0 || !strings.HasPrefix(out, "pipe\npipe:[") || !strings.HasSuffix(out, "]\ngiven\n") {
		t.Fatalf("with stdin: %v %+v %q", err, res, out)
	}
}

// PATH, HOME and ~ are the same on both backends, through the same exec
// entry point; and the routed command speaks bash on both.
func TestExecEnvAgrees(t *testing.T) {
	m := testmount.Start(t, filepath.Join(t.TempDir(), "ws"))
	const probe = `echo "$PATH $HOME" ~; [[ x == x ]] && cat <<< bash`
	outs := map[string]string{}
	for _, b := range []string{"shell", "sandbox"} {
		res, out, errOut, err := execOn(t, m.Dir, computerfs.ExecRequest{Backend: b, Command: probe})
		if err != nil || res.ExitCode != 0 || res.Backend != b {
			t.Fatalf("%s: %v %+v %q %q", b, err, res, out, errOut)
		}
		outs[b] = out
	}
	want := backend.DefaultPath + " /workspace /workspace\nbash\n"
	if outs["shell"] != want || outs["sandbox"] != want {
		t.Fatalf("echo $PATH $HOME ~:\nshell   %q\nsandbox %q\nwant    %q", outs["shell"], outs["sandbox"], want)
	}
}

// goPackage writes a small Go module of two files (a function and its
// test) into dir.
func goPackage(t *testing.T, dir string) {
	t.Helper()
	files := map[string]string{
		"go.mod":      "module example.com/small\n\ngo 1.21\n",
		"add.go":      "package small\n\n// Add adds.\nfunc Add(a, b int) int { return a + b }\n",
		"add_test.go": "package small\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(Add(2, 3))\n\t}\n}\n",
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o666); err != nil {
			t.Fatal(err)
		}
	}
}

// The sandbox's build caches persist across commands in the workspace's
// cache volume: the second `go test ./...` of a small package is a cache
// hit, much faster than the first; the cache is the agent's, out of the
// workspace (its files, the journal) and in the store's image.
func TestSandboxCachePersists(t *testing.T) {
	m := testmount.Start(t, filepath.Join(t.TempDir(), "ws"), "--sandbox-cache", "512M")
	goPackage(t, filepath.Join(m.Dir, "small"))
	var took [2]time.Duration
	for i := range took {
		start := time.Now()
		res, out, errOut, err := execOn(t, m.Dir, computerfs.ExecRequest{Backend: "sandbox", Cwd: "small", Timeout: "10m", Command: "go test ./..."})
		took[i] = time.Since(start)
		if err != nil || res.ExitCode != 0 || !strings.HasPrefix(out, "ok  \texample.com/small") {
			t.Fatalf("go test %d: %v %+v stdout %q stderr %q", i+1, err, res, out, errOut)
		}
		if cached := strings.Contains(out, "(cached)"); cached != (i == 1) {
			t.Fatalf("go test %d: %q: want (cached) on the second run alone", i+1, out)
		}
	}
	t.Logf("go test ./... in the sandbox: first %v, second %v", took[0], took[1])
	if took[1]*3 > took[0] {
		t.Errorf("the second go test took %v, the first %v: not much faster", took[1], took[0])
	}

	// The cache: the agent's, at /cache, nothing of it in the workspace.
	res, out, _, err := execOn(t, m.Dir, computerfs.ExecRequest{Backend: "sandbox",
		Command: `stat -c '%u %a' /cache; ls "$GOCACHE" | wc -l; ls -A /workspace | tr '\n' ' '`})
	if err != nil || res.ExitCode != 0 {
		t.Fatal(err, res)
	}
	lines := strings.Split(out, "\n")
	if len(lines) != 3 || lines[0] != "1000 700" || lines[2] != "small " {
		t.Fatalf("cache and workspace seen in the sandbox:\n%s", out)
	}
	if n, _ := strconv.Atoi(lines[1]); n < 10 {
		t.Errorf("GOCACHE has %d entries", n)
	}
	if ents, err := os.ReadDir(m.Dir); err != nil || len(ents) != 1 {
		t.Errorf("the workspace holds %v (%v): want only small", ents, err)
	}
	var st syscall.Stat_t
	img := filepath.Join(m.Store, "sandbox-cache.img")
	if err := syscall.Stat(img, &st); err != nil || st.Uid != 0 || st.Mode&0o777 != 0o600 || st.Size != 512<<20 {
		t.Fatalf("image %s: %v uid %d mode %o size %d", img, err, st.Uid, st.Mode&0o777, st.Size)
	}
	logOut, err := exec.Command(testmount.Binary(t), "log", "-w", m.Dir, "--json").CombinedOutput()
	if err != nil || strings.Contains(string(logOut), "go-build") || strings.Contains(string(logOut), "/cache") {
		t.Fatalf("the journal: %v\n%s", err, logOut)
	}

	// A new daemon on the store: the same cache.
	m.Unmount(t)
	m.Remount(t, "--sandbox-cache", "512M")
	res, out, errOut, err := execOn(t, m.Dir, computerfs.ExecRequest{Backend: "sandbox", Cwd: "small", Timeout: "10m", Command: "go test ./..."})
	if err != nil || res.ExitCode != 0 || !strings.Contains(out, "(cached)") {
		log, _ := os.ReadFile(filepath.Join(m.Store, "daemon.log"))
		t.Fatalf("go test after a remount: %v %+v %q %q\ndaemon log:\n%s", err, res, out, errOut, log)
	}
}

// The cache volume holds no more than its size: a sandboxed command that
// writes past it gets ENOSPC, the host's disk gives the image nothing
// more, and the daemon is fine (the next commands, both backends, work).
func TestSandboxCacheBounded(t *testing.T) {
	m := testmount.Start(t, filepath.Join(t.TempDir(), "ws"), "--sandbox-cache", "64M")
	res, out, errOut, err := execOn(t, m.Dir, computerfs.ExecRequest{Backend: "sandbox", Timeout: "5m",
		Command: `dd if=/dev/zero of=/cache/fill bs=1M count=200; echo "dd $?"; for i in $(seq 1 50000); do : > /cache/n$i || break; done; echo done`})
	if err != nil || !strings.Contains(out, "dd 1") || !strings.Contains(errOut, "No space left on device") {
		t.Fatalf("write past the bound: %v %+v stdout %q stderr %q", err, res, out, errOut)
	}
	var st syscall.Stat_t
	img := filepath.Join(m.Store, "sandbox-cache.img")
	if err := syscall.Stat(img, &st); err != nil || st.Size != 64<<20 || st.Blocks*512 > 65<<20 {
		t.Fatalf("image: %v size %d, %d bytes on disk", err, st.Size, st.Blocks*512)
	}
	res, out, _, err = execOn(t, m.Dir, computerfs.ExecRequest{Backend: "sandbox", Command: `echo fine > f; cat f; df -k /cache | tail -1 | awk '{print $4}'`})
	if err != nil || res.ExitCode != 0 || !strings.HasPrefix(out, "fine\n") {
		t.Fatalf("after the fill: %v %+v %q", err, res, out)
	}
	if res, out, _, err = execOn(t, m.Dir, computerfs.ExecRequest{Backend: "shell", Command: `cat f`}); err != nil || out != "fine\n" {
		t.Fatalf("fast path after the fill: %v %+v %q", err, res, out)
	}
	statusOf(t, m.Dir)
}

// cacheMounted says whether the cache volume of the store is mounted
// (under the default state directory).
func cacheMounted(t *testing.T, store string) bool {
	t.Helper()
	h := sha256.Sum256([]byte(store))
	mp := filepath.Join(sandbox.DefaultStateDir, "caches", hex.EncodeToString(h[:8]))
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(b), " "+mp+" ext4 ")
}

// A daemon's cache volume is unmounted with it; one that a killed daemon
// left mounted goes when another daemon starts (sandbox.GC).
func TestSandboxCacheUnmounted(t *testing.T) {
	m := testmount.Start(t, filepath.Join(t.TempDir(), "ws"), "--sandbox-cache", "64M")
	if _, _, _, err := execOn(t, m.Dir, computerfs.ExecRequest{Backend: "sandbox", Command: "touch /cache/x"}); err != nil {
		t.Fatal(err)
	}
	if !cacheMounted(t, m.Store) {
		t.Fatal("the cache volume is not mounted after a sandboxed command")
	}
	m.Unmount(t)
	if cacheMounted(t, m.Store) {
		t.Fatal("the cache volume is still mounted after the unmount")
	}
	m.Remount(t, "--sandbox-cache", "64M")
	if _, _, _, err := execOn(t, m.Dir, computerfs.ExecRequest{Backend: "sandbox", Command: "ls /cache/x"}); err != nil || !cacheMounted(t, m.Store) {
		t.Fatalf("after a remount: %v", err)
	}
	m.Kill(t)
	testmount.Start(t, filepath.Join(t.TempDir(), "other"))
	deadline := time.Now().Add(time.Minute)
	for cacheMounted(t, m.Store) {
		if time.Now().After(deadline) {
			t.Fatal("the killed daemon's cache volume is still mounted a minute after another daemon started")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// --sandbox-cache 0: no volume (the caches in each sandbox's /tmp, no
// image); a size below the smallest is refused before anything starts.
func TestSandboxCacheFlag(t *testing.T) {
	m := testmount.Start(t, filepath.Join(t.TempDir(), "ws"), "--sandbox-cache", "0")
	res, out, _, err := execOn(t, m.Dir, computerfs.ExecRequest{Backend: "sandbox", Command: `echo $GOCACHE; ls -A /cache`})
	if err != nil || res.ExitCode != 0 || out != "/tmp/.cache/go-build\n" {
		t.Fatalf("without a volume: %v %+v %q", err, res, out)
	}
	if _, err := os.Stat(filepath.Join(m.Store, "sandbox-cache.img")); !os.IsNotExist(err) {
		t.Errorf("an image was made: %v", err)
	}
	if cacheMounted(t, m.Store) {
		t.Errorf("a volume is mounted")
	}
	cmd := exec.Command(testmount.Binary(t), "mount", "--store", filepath.Join(t.TempDir(), "ws2"), "--sandbox-cache", "1M", t.TempDir())
	b, err := cmd.CombinedOutput()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(b), "--sandbox-cache") {
		t.Fatalf("--sandbox-cache 1M: %v %s", err, b)
	}
}

// Questions about the machine get the sandbox's answer from both
// backends: which, command -v and type find the programs the sandbox has
// (go, gcc, make...), not only the fast path's built-ins, and a workspace
// program on $PATH; what neither has is missing in both.
func TestWhichAgrees(t *testing.T) {
	m := testmount.Start(t, filepath.Join(t.TempDir(), "ws"))
	mustExec(t, m, "shell", "mkdir -p bin && printf '#!/bin/sh\\necho tool\\n' > bin/tool && chmod +x bin/tool")
	const probe = `which go gcc make sh grep env no-such-tool; echo "which $?"; command -v node git cat; command -v no-such-tool; echo "cmd $?"; type -p make; type -t gcc cd; PATH=$PATH:/workspace/bin command -v tool; command -v ./bin/tool`
	outs := map[string]string{}
	for _, b := range []string{"shell", "sandbox"} {
		res, out, errOut, err := execOn(t, m.Dir, computerfs.ExecRequest{Backend: b, Command: probe})
		if err != nil || res.Backend != b {
			t.Fatalf("%s: %v %+v %q %q", b, err, res, out, errOut)
		}
		outs[b] = out + errOut
	}
	if outs["shell"] != outs["sandbox"] {
		t.Fatalf("the backends answer differently:\nshell:\n%s\nsandbox:\n%s", outs["shell"], outs["sandbox"])
	}
	if !strings.Contains(outs["shell"], "/usr/local/go/bin/go\n") && !strings.Contains(outs["shell"], "/usr/bin/gcc\n") {
		t.Fatalf("neither go nor gcc was found:\n%s", outs["shell"])
	}
	t.Logf("both:\n%s", outs["shell"])
}
