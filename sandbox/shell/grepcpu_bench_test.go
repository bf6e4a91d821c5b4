package shell_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/computerfs/computerfs"
	"github.com/computerfs/computerfs/internal/benchtab"
	"github.com/computerfs/computerfs/internal/testmount"
)

// BenchmarkGrepCPU compares the CPU that whole-tree searches cost on the
// shell fast path with what the same commands cost run by GNU grep and
// find (and the real rg) on the daemon's FUSE mount: a checkout of this
// repository (git archive of HEAD, about 540 files, with a .git made by
// git init) in a workspace mounted with ten path rules, as a workspace
// is served. For the fast path the measure is the daemon's CPU over the
// exec call (through the control socket); for the programs on the mount
// it is the program's own CPU (user and system) plus the daemon's CPU
// serving it. The two alternate within every round, in an order that
// turns each round. The output of both is kept in a pipe (GNU grep
// writing to /dev/null stops at the first match) and compared. It prints
// a table of CPU time and one of wall time with the medians and the
// median of the ratios of runs next to each other. BENCH_GREP_ROUNDS sets
// the rounds (default 15), BENCH_GREP_CMDS the commands (one a line) and
// BENCH_GREP_PPROF an address where the daemon serves net/http/pprof.
//
//	go test -tags seccomp -run '^$' -bench GrepCPU -benchtime 1x ./sandbox/shell
func BenchmarkGrepCPU(b *testing.B) {
	if _, err := exec.LookPath("rg"); err != nil {
		b.Fatal("ripgrep (rg) is needed for this benchmark")
	}
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	spec := filepath.Join(dir, "ws.yaml")
	const rules = "sources:\n  - path: /README\n    content: bench\n" + `policy:
  deny: ["/secrets", "**/*.pem", "**/.env", "/private/**", "*.key"]
  read_only_paths: ["/vendor", "**/go.sum", "/.github", "/ro/**", "Makefile"]
`
	if err := os.WriteFile(spec, []byte(rules), 0o644); err != nil {
		b.Fatal(err)
	}
	args := []string{"--spec", spec, "--no-sandbox"}
	if addr := os.Getenv("BENCH_GREP_PPROF"); addr != "" {
		args = append(args, "--pprof", addr)
	}
	m := testmount.StartPlain(b, filepath.Join(dir, "ws"), args...)
	sh := "git -C " + strings.TrimSpace(string(top)) + " archive HEAD | tar -x -C " + m.Dir + " && git -C " + m.Dir + " init -q"
	if out, err := exec.Command("bash", "-c", sh).CombinedOutput(); err != nil {
		b.Fatalf("%s: %v %s", sh, err, out)
	}
	c, err := computerfs.Dial(m.Dir)
	if err != nil {
		b.Fatal(err)
	}
	daemon := func() time.Duration {
		clock := int32(^uint32(m.Pid)<<3) | 2 // MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)
		var ts unix.Timespec
		if err := unix.ClockGettime(clock, &ts); err != nil {
			b.Fatalf("the CPU clock of the daemon %d: %v", m.Pid, err)
		}
		return time.Duration(ts.Nano())
	}
	cmds := []string{
		"grep -rn func .",
		"grep -rn --include='*.go' func .",
		"grep -rni 'error' .",
		"grep -rl TODO .",
		"rg -n func",
		"find . -name '*.go'",
		"find . -type f | wc -l",
	}
	if env := os.Getenv("BENCH_GREP_CMDS"); env != "" {
		cmds = strings.Split(strings.TrimSpace(env), "\n")
	}
	rounds := 15
	if n, err := strconv.Atoi(os.Getenv("BENCH_GREP_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	ctx := context.Background()
	names := []string{"fast path", "on the mount"}
	for b.Loop() {
		var rows []benchtab.Row[grepSample]
		for _, command := range cmds {
			var outs [2]string
			run := func(v int) grepSample {
				runtime.GC()
				var out, errOut bytes.Buffer
				start, d0 := time.Now(), daemon()
				var s grepSample
				if v == 0 {
					res, err := c.Exec(ctx, computerfs.ExecRequest{Command: command, Backend: "shell", Timeout: "60s"}, &out, &errOut)
					s = grepSample{wall: time.Since(start), cpu: daemon() - d0}
					s.daemon = s.cpu
					if err != nil || res.Backend != "shell" || res.Truncated || res.ExitCode > 1 {
						b.Fatalf("%q: %v %+v %s", command, err, res, errOut.Bytes())
					}
				} else {
					cmd := exec.Command("bash", "-c", command)
					cmd.Dir, cmd.Stdout, cmd.Stderr = m.Dir, &out, &errOut
					cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
					err := cmd.Run()
					s.wall = time.Since(start)
					if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() > 1 {
						b.Fatalf("%q on the mount: %v %s", command, err, errOut.Bytes())
					}
					s.daemon = daemon() - d0
					s.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime() + s.daemon
				}
				outs[v] = out.String()
				return s
			}
			runs := benchtab.Interleave(len(names), rounds, run)
			if outs[0] != outs[1] && sortedLines(outs[0]) != sortedLines(outs[1]) { // rg prints in the order its threads finish
				b.Fatalf("%q: the fast path printed %d bytes, the programs on the mount %d, not the same", command, len(outs[0]), len(outs[1]))
			}
			rows = append(rows, benchtab.Row[grepSample]{Name: fmt.Sprintf("`%s` (%d lines)", command, strings.Count(outs[0], "\n")), Runs: runs})
		}
		title := fmt.Sprintf("whole-tree searches of a %s-file checkout, %d rounds", strings.TrimSpace(mustOutput(b, "bash", "-c", "find "+m.Dir+" -type f | wc -l")), rounds)
		ratio := []benchtab.Pair{benchtab.Of(0, 1)}
		fmt.Println("\n" + benchtab.Table(title+", CPU time (fast path: the daemon's; on the mount: the program's and the daemon's)", names, rows, ratio, grepCPU))
		fmt.Println(benchtab.Table(title+", the daemon's CPU time", names, rows, ratio, func(s grepSample) time.Duration { return s.daemon }))
		fmt.Println(benchtab.Table(title+", wall time", names, rows, ratio, grepWall))
		for i, r := range rows {
			q := benchtab.Ratios(r.Runs, benchtab.Of(0, 1), grepCPU)
			b.ReportMetric(q[len(q)/2], fmt.Sprintf("fast/mount-cpu-%d", i))
		}
	}
}

func mustOutput(b *testing.B, name string, args ...string) string {
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		b.Fatalf("%s %v: %v", name, args, err)
	}
	return string(out)
}

// grepSample is one timed run.
type grepSample struct{ wall, cpu, daemon time.Duration }

func grepCPU(s grepSample) time.Duration  { return s.cpu }
func grepWall(s grepSample) time.Duration { return s.wall }

func sortedLines(s string) string {
	l := strings.Split(s, "\n")
	slices.Sort(l)
	return strings.Join(l, "\n")
}
