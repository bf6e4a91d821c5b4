package shell_test

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/computerfs/computerfs"
	"github.com/computerfs/computerfs/internal/testmount"
)

// BenchmarkRg times whole-tree searches of this repository (git archive
// of HEAD, with a .git made by git init) with rg on the shell fast path,
// through a daemon's control socket, and with the real rg on that
// daemon's FUSE mount (and on a tmpfs copy, for reference), alternating.
// It reports each command's median wall time and CPU: for the fast path
// the daemon's; for rg on the mount rg's own plus the daemon's serving
// it; on tmpfs rg's.
//
//	go test -tags seccomp -run '^$' -bench Rg -benchtime 1x ./sandbox/shell
func BenchmarkRg(b *testing.B) {
	if _, err := exec.LookPath("rg"); err != nil {
		b.Fatal("ripgrep (rg) is needed for this benchmark")
	}
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		b.Fatal(err)
	}
	m := testmount.StartPlain(b, filepath.Join(b.TempDir(), "ws"))
	tmpfs, err := os.MkdirTemp("/dev/shm", "rgbench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(tmpfs)
	for _, dir := range []string{m.Dir, tmpfs} {
		sh := "git -C " + strings.TrimSpace(string(top)) + " archive HEAD | tar -x -C " + dir + " && git -C " + dir + " init -q"
		if out, err := exec.Command("bash", "-c", sh).CombinedOutput(); err != nil {
			b.Fatalf("%s: %v %s", sh, err, out)
		}
	}
	c, err := computerfs.Dial(m.Dir)
	if err != nil {
		b.Fatal(err)
	}
	daemonCPU := func() float64 {
		data, err := os.ReadFile("/proc/" + strconv.Itoa(m.Pid) + "/stat")
		if err != nil {
			b.Fatal(err)
		}
		f := strings.Fields(string(data)[strings.LastIndexByte(string(data), ')')+2:])
		ut, _ := strconv.ParseFloat(f[11], 64)
		st, _ := strconv.ParseFloat(f[12], 64)
		return (ut + st) / 100 // clock ticks
	}
	cmds := []string{"rg -n TODO", "rg -l func", "rg -c -i error -t go", "rg --files", "rg -n -w Exec -g '*.go'"}
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		for _, command := range cmds {
			const runs = 7
			var fw, fc, mw, mc, tw, tc []float64
			for r := 0; r < runs; r++ {
				start, c0 := time.Now(), daemonCPU()
				if _, err := c.Exec(ctx, computerfs.ExecRequest{Command: command, Backend: "shell", Timeout: "60s"}, io.Discard, io.Discard); err != nil {
					b.Fatalf("%q: %v", command, err)
				}
				fw = append(fw, time.Since(start).Seconds())
				fc = append(fc, daemonCPU()-c0)
				for _, dir := range []string{m.Dir, tmpfs} {
					cmd := exec.Command("bash", "-c", "exec "+command)
					cmd.Dir = dir
					start, c0 = time.Now(), daemonCPU()
					cmd.Run()
					w := time.Since(start).Seconds()
					cpu := (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
					if dir == m.Dir {
						mw, mc = append(mw, w), append(mc, cpu+daemonCPU()-c0)
					} else {
						tw, tc = append(tw, w), append(tc, cpu)
					}
				}
			}
			b.Logf("%-26s fast path %6.1f ms (CPU %6.1f ms)  rg on the mount %6.1f ms (CPU %6.1f ms)  rg on tmpfs %6.1f ms (CPU %6.1f ms)",
				command, 1000*median(fw), 1000*median(fc), 1000*median(mw), 1000*median(mc), 1000*median(tw), 1000*median(tc))
		}
	}
}
