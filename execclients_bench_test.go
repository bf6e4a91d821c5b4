package computerfs

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/computerfs/computerfs/internal/benchtab"
	"github.com/computerfs/computerfs/internal/testmount"
)

// agentCommands are what coding agents run most while they read, search
// and inspect a Go repository, in the forms their logs show (Codex CLI,
// Claude Code, SWE-agent: cat and sed -n for reading, grep -rn and find for
// searching, git for the state of the work), run in a checkout of this
// repository. Some are not built into the fast path, so auto sends them to
// the sandbox, as it would for an agent.
var agentCommands = []string{
	"ls",
	"ls -la",
	"ls internal",
	"pwd",
	"cat go.mod",
	"head -n 40 exec.go",
	"sed -n '1,80p' control.go",
	"sed -n '100,160p' workspace.go",
	"nl -ba exec.go | sed -n '20,60p'",
	"tail -n 20 Makefile",
	"wc -l *.go",
	"grep -n 'func ' control.go",
	"grep -rn 'DaemonGoneError' --include='*.go' .",
	"grep -rl 'context.Context' internal",
	"grep -rn 'TODO' . | head -20",
	"grep -c '' go.sum",
	"find . -name '*.go' -path '*internal*' | head -20",
	"find . -type f -name '*_test.go' | wc -l",
	"find docs -name '*.md'",
	"ls -R docs | head",
	"cat README.md | head -30",
	"awk '/^func /{print $2}' control.go | head",
	"cut -d' ' -f1 go.sum | sort -u | wc -l",
	"grep -E '^\\s+github.com' go.mod | head",
	"test -f go.mod && echo yes",
	"echo \"$PWD\"",
	"stat -c %s go.mod",
	"git status",
	"git status --short",
	"git log --oneline -10",
	"git log -3 --stat",
	"git show --stat HEAD",
	"git diff HEAD~1 --stat",
	"git branch",
	"git log -1 --format=%H",
	"git rev-parse HEAD",
	"git ls-files | wc -l",
	"git grep -n 'func Dial'",
	"od -c go.mod | head -3",
	"python3 -c 'print(1)'",
}

// execSample is one run of one command by one client.
type execSample struct {
	wall time.Duration
	cpu  time.Duration // of every process involved: see BenchmarkExecClients
}

// BenchmarkExecClients times agentCommands from every entry point a
// harness has, interleaved round by round (internal/benchtab): the thin
// client computerfs-exec, the same in C (computerfs-exec-c), `computerfs
// exec`, the control socket (the Go client in this process), the MCP exec
// tool over stdio (`computerfs mcp`), all with backend auto, against `bash -c` in a checkout on the
// mount and in one on tmpfs. Each command is timed as its caller sees it
// (a process started and waited for, or a call that returns), and its CPU
// is that of every process involved: this one, the client process it
// started (rusage, with its children), the daemon and the MCP server
// (their threads' run time from /proc). BENCH_EXEC_ROUNDS sets the rounds
// (default 9).
//
//	go test -tags seccomp -run '^$' -bench ExecClients -benchtime 1x .
func BenchmarkExecClients(b *testing.B) {
	rounds := 9
	if n, err := strconv.Atoi(os.Getenv("BENCH_EXEC_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	m := testmount.StartPlain(b, filepath.Join(b.TempDir(), "store"))
	thin, full := testmount.Command(b, "computerfs-exec", false), testmount.PlainBinary(b)
	cthin := testmount.CClient(b, false)
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		b.Fatal(err)
	}
	shm, err := os.MkdirTemp("/dev/shm", "execclients-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(shm)
	for _, dir := range []string{m.Dir, shm} {
		if out, err := exec.Command("git", "clone", "-q", "--no-local", strings.TrimSpace(string(top)), filepath.Join(dir, "repo")).CombinedOutput(); err != nil {
			b.Fatalf("git clone: %v\n%s", err, out)
		}
	}
	// The agent owns its checkout, as it would its workspace (git refuses
	// a repository of another owner).
	c, err := Dial(m.Dir)
	if err != nil {
		b.Fatal(err)
	}
	st, err := c.Status(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	if out, err := exec.Command("chown", "-R", st.Agent.String(), filepath.Join(m.Dir, "repo")).CombinedOutput(); err != nil {
		b.Fatalf("chown: %v %s", err, out)
	}
	mcpCmd := exec.Command(full, "mcp", "-w", m.Dir)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: mcpCmd}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	others := []int{m.Pid, mcpCmd.Process.Pid}

	const cwd = "/workspace/repo"
	// bash on the mount runs as the agent, as the sandbox does; on tmpfs
	// as root, who owns that checkout.
	asAgent := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: st.Agent.UID, Gid: st.Agent.GID}}
	spawn := func(dir string, attr *syscall.SysProcAttr, argv ...string) func() *os.ProcessState {
		return func() *os.ProcessState {
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Dir, cmd.SysProcAttr = dir, attr
			cmd.Env = []string{"HOME=" + dir, "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "TZ=UTC"}
			cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
			if err := cmd.Run(); err != nil {
				if _, ok := err.(*exec.ExitError); !ok {
					b.Fatalf("%v: %v", argv, err)
				}
			}
			return cmd.ProcessState
		}
	}
	type variant struct {
		name string
		run  func(command string) *os.ProcessState // a process it started and waited for, or nil
	}
	variants := []variant{
		{"computerfs-exec", func(command string) *os.ProcessState {
			return spawn(shm, nil, thin, "-w", m.Dir, "--cwd", cwd, "--", command)()
		}},
		{"computerfs-exec-c", func(command string) *os.ProcessState {
			return spawn(shm, nil, cthin, "-w", m.Dir, "--cwd", cwd, "--", command)()
		}},
		{"computerfs exec", func(command string) *os.ProcessState {
			return spawn(shm, nil, full, "exec", "-w", m.Dir, "--cwd", cwd, "--", command)()
		}},
		{"control socket", func(command string) *os.ProcessState {
			if _, err := c.Exec(context.Background(), ExecRequest{Command: command, Cwd: cwd}, io.Discard, io.Discard); err != nil {
				b.Fatalf("control socket: %q: %v", command, err)
			}
			return nil
		}},
		{"MCP exec", func(command string) *os.ProcessState {
			_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"command": command, "cwd": cwd}})
			if err != nil { // res.IsError: the command failed, which some do
				b.Fatalf("MCP exec: %q: %v", command, err)
			}
			return nil
		}},
		{"bash -c, mount", func(command string) *os.ProcessState {
			return spawn(filepath.Join(m.Dir, "repo"), asAgent, "bash", "-c", command)()
		}},
		{"bash -c, tmpfs", func(command string) *os.ProcessState {
			return spawn(filepath.Join(shm, "repo"), nil, "bash", "-c", command)()
		}},
	}
	const bashMount, bashTmpfs = 5, 6
	names := make([]string, len(variants))
	for i, v := range variants {
		names[i] = v.name
	}
	measure := func(v variant, command string) execSample {
		before := threadsCPU(others)
		self0 := selfCPU()
		start := time.Now()
		ps := v.run(command)
		wall := time.Since(start)
		cpu := selfCPU() - self0
		if ps != nil {
			cpu += ps.UserTime() + ps.SystemTime()
		}
		return execSample{wall, cpu + threadsCPU(others) - before}
	}
	for b.Loop() {
		var rows []benchtab.Row[execSample]
		for _, command := range agentCommands {
			runs := benchtab.Interleave(len(variants), rounds, func(v int) execSample { return measure(variants[v], command) })
			rows = append(rows, benchtab.Row[execSample]{Name: "`" + strings.ReplaceAll(command, "|", `\|`) + "`", Runs: runs})
		}
		var pairs []benchtab.Pair
		for v := range variants {
			if v != bashMount {
				pairs = append(pairs, benchtab.Of(v, bashMount))
			}
		}
		wall := func(s execSample) time.Duration { return s.wall }
		cpu := func(s execSample) time.Duration { return s.cpu }
		fmt.Printf("\n%s\n%s\n%s", execSummary(names, rows, bashMount, bashTmpfs), benchtab.Table("Latency", names, rows, pairs, wall),
			benchtab.Table("CPU of every process involved", names, rows, pairs, cpu))
		for v, key := range []string{"thin", "thin-c", "cli", "socket", "mcp", "bash-mount", "bash-tmpfs"} {
			b.ReportMetric(float64(medianOfMedians(rows, v, wall).Microseconds()), key+"-µs")
		}
	}
}

// execSummary is one line per variant: the median over commands of each
// command's median latency, the p99 of every run's, the median CPU, and
// the median over commands of the ratio of the same round to variants
// bases' latency and CPU.
func execSummary(names []string, rows []benchtab.Row[execSample], bases ...int) string {
	var t strings.Builder
	fmt.Fprintf(&t, "%d commands, %d rounds: median over commands of each command's median; p99 over every run; ratio: median over commands of the median ratio in the same round\n\n", len(rows), len(rows[0].Runs))
	fmt.Fprint(&t, "| client | median latency | p99 latency | median CPU |")
	for _, base := range bases {
		fmt.Fprintf(&t, " latency ÷ %s | CPU ÷ %s |", names[base], names[base])
	}
	t.WriteString("\n|---|---:|---:|---:|" + strings.Repeat("---:|---:|", len(bases)) + "\n")
	wall := func(s execSample) time.Duration { return s.wall }
	cpu := func(s execSample) time.Duration { return s.cpu }
	// ratio is the median over commands of the median ratio of v's metric
	// to base's in the same round.
	ratio := func(v, base int, metric func(execSample) time.Duration) float64 {
		var m []float64
		for _, r := range rows {
			q := benchtab.Ratios(r.Runs, benchtab.Of(v, base), metric)
			m = append(m, q[len(q)/2])
		}
		slices.Sort(m)
		return m[len(m)/2]
	}
	for v, name := range names {
		var all []time.Duration
		for _, r := range rows {
			for _, round := range r.Runs {
				all = append(all, round[v].wall)
			}
		}
		slices.Sort(all)
		fmt.Fprintf(&t, "| %s | %v | %v | %v |", name, medianOfMedians(rows, v, wall).Round(10*time.Microsecond),
			all[len(all)*99/100].Round(10*time.Microsecond), medianOfMedians(rows, v, cpu).Round(10*time.Microsecond))
		for _, base := range bases {
			fmt.Fprintf(&t, " %.2f | %.2f |", ratio(v, base, wall), ratio(v, base, cpu))
		}
		t.WriteString("\n")
	}
	return t.String()
}

// medianOfMedians is the median over rows of each row's median of variant
// v's metric.
func medianOfMedians(rows []benchtab.Row[execSample], v int, metric func(execSample) time.Duration) time.Duration {
	var m []time.Duration
	for _, r := range rows {
		m = append(m, benchtab.Median(r.Runs, v, metric))
	}
	slices.Sort(m)
	return m[len(m)/2]
}

// selfCPU is this process's user and system time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// threadsCPU is the time the threads of processes pids have run, from
// /proc/PID/task/TID/schedstat (nanoseconds, where /proc/PID/stat counts
// in ticks of 10 ms).
func threadsCPU(pids []int) time.Duration {
	var sum time.Duration
	for _, pid := range pids {
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		for _, task := range tasks {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, task.Name()))
			if err != nil {
				continue
			}
			f := strings.Fields(string(b))
			if len(f) > 0 {
				ns, _ := strconv.ParseInt(f[0], 10, 64)
				sum += time.Duration(ns)
			}
		}
	}
	return sum
}
