package computerfs_test

import (
	"bytes"
	"context"
	"fmt"
	"github.com/computerfs/computerfs/internal/benchtab"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/computerfs/computerfs"
	"github.com/computerfs/computerfs/internal/testmount"
)

// benchPolicyRules are the ten path rules of the benchmarks (the fast
// path's benchRules in sandbox/shell): globs of the kinds policies use.
const benchPolicyRules = `policy:
  deny: ["/secrets", "**/*.pem", "**/.env", "/private/**", "*.key"]
  read_only_paths: ["/vendor", "**/go.sum", "/.github", "/ro/**", "Makefile"]
`

// BenchmarkPolicyMount measures what the agent identity and the path
// rules cost on the mount: two daemons (`computerfs mount --spec`, as a
// workspace is served) of the same workspace, one without path rules and
// one with ten, each running the same workloads (cat of 1,000 small files
// in 20 directories three levels down, grep -rn over them, find, ls -lR, a
// shell loop writing 500 files) in a child process that runs as the
// workspace's agent (bound by the rules) or as root (never bound: on the
// mount with rules, the figure of no checks). The four variants alternate
// within every round, in an order that turns each round, so that the
// machine's noise falls on all of them alike. It prints two tables: of
// CPU time (the child's and the daemon's: the measure, since on a loaded
// machine wall time is mostly other processes') and of wall time, each
// with the median of every variant and the median of the ratios of runs
// next to each other in time, with their interquartile range (the noise).
// Two daemons differ a little whatever their rules (their stores' state,
// where the scheduler puts them: root's figures show it), so the last
// column divides the agent's ratio on the mount with rules by its ratio on
// the other: the cost of the checks net of that. BENCH_POLICY_ROUNDS sets
// the rounds (default 31).
//
//	go test -run '^$' -bench PolicyMount -benchtime 1x .
func BenchmarkPolicyMount(b *testing.B) {
	if os.Getuid() != 0 {
		b.Fatal("this benchmark mounts FUSE file systems and runs programs as the agent: it needs root")
	}
	dir := b.TempDir()
	base := "sources:\n  - path: /README\n    content: bench\n"
	start := func(name, yaml string) (*testmount.Mount, computerfs.Agent) {
		m, c := benchMountSpec(b, dir, name, yaml)
		st, err := c.Status(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		return m, st.Agent
	}
	plain, plainAgent := start("none", base)
	ruled, ruledAgent := start("rules", base+benchPolicyRules)
	// The workspace's files are its agent's, as an import makes them.
	const tree = `for d in $(seq -w 0 19); do mkdir -p src/pkg$d/sub; for f in $(seq -w 0 49); do printf 'package sub\n\nfunc F() {}\n' > src/pkg$d/sub/f$f.go; done; done`
	root := computerfs.Agent{}
	for _, w := range []struct {
		m *testmount.Mount
		a computerfs.Agent
	}{{plain, plainAgent}, {ruled, ruledAgent}} {
		if w.a.UID == 0 {
			b.Fatalf("%s: the workspace has no agent identity", w.m.Dir)
		}
		if out, _, err := runAs(w.m, w.a, tree); err != nil {
			b.Fatalf("making the tree: %v %s", err, out)
		}
	}
	type variant struct {
		name string
		m    *testmount.Mount
		who  computerfs.Agent
	}
	variants := []variant{
		{"agent", plain, plainAgent},
		{"agent+rules", ruled, ruledAgent},
		{"root", plain, root},
		{"root+rules", ruled, root},
	}
	names := make([]string, len(variants))
	for i, v := range variants {
		names[i] = v.name
	}
	workloads := []struct{ name, script, want, cleanup string }{
		{"cat 1,000 files", `cat src/*/*/*.go | wc -l`, "3000\n", ""},
		{"grep -rn", `grep -rn func src | wc -l`, "1000\n", ""},
		{"find", `find src | wc -l`, "1041\n", ""},
		{"ls -lR", `ls -lR src | wc -l`, "1162\n", ""},
		{"write 500 files", `mkdir w && for i in $(seq 500); do echo x > w/f$i; done; echo ok`, "ok\n", "rm -rf w"},
	}
	rounds := 31
	if n, err := strconv.Atoi(os.Getenv("BENCH_POLICY_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	for b.Loop() {
		var rows []benchtab.Row[mountSample]
		for _, w := range workloads {
			run := func(i int) mountSample {
				v := variants[i]
				runtime.GC()
				d0 := daemonCPU(b, v.m.Pid)
				t0 := time.Now()
				out, child, err := runAs(v.m, v.who, w.script)
				s := mountSample{wall: time.Since(t0), cpu: child + daemonCPU(b, v.m.Pid) - d0}
				if err != nil || out != w.want {
					b.Fatalf("%s, %s: %v %q", v.name, w.name, err, out)
				}
				if w.cleanup != "" {
					if out, _, err := runAs(v.m, v.who, w.cleanup); err != nil {
						b.Fatalf("%s: %v %s", w.cleanup, err, out)
					}
				}
				return s
			}
			rows = append(rows, benchtab.Row[mountSample]{Name: w.name, Runs: benchtab.Interleave(len(variants), rounds, run)})
		}
		// The last ratio, (agent+rules / root+rules) / (agent / root),
		// is the first net of what makes one daemon faster than the other
		// (the state of its store, where the scheduler put it): the cost
		// of the checks that bind the agent (LOOKUP's, which bind no one
		// but keep every caller's denied names out of the kernel's cache,
		// are left out).
		ratios := []benchtab.Pair{benchtab.Of(1, 0), benchtab.Of(1, 3), benchtab.Of(3, 2), benchtab.Of(0, 2), {A: 1, B: 3, C: 0, D: 2}}
		title := fmt.Sprintf("mount (computerfs mount --spec; a child as the agent or as root), %d rounds", rounds)
		fmt.Println("\n" + benchtab.Table(title+", CPU time of the child and the daemon", names, rows, ratios, func(s mountSample) time.Duration { return s.cpu }))
		fmt.Println(benchtab.Table(title+", wall time", names, rows, ratios, func(s mountSample) time.Duration { return s.wall }))
		for i, r := range rows {
			q := benchtab.Ratios(r.Runs, benchtab.Of(1, 0), func(s mountSample) time.Duration { return s.cpu })
			b.ReportMetric(q[len(q)/2], fmt.Sprintf("rules/none-cpu-%d", i))
		}
	}
}

// runAs runs script with sh in m's mount point as who (root if its UID is
// 0) and returns its output and the CPU time it used.
func runAs(m *testmount.Mount, who computerfs.Agent, script string) (string, time.Duration, error) {
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = m.Dir
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C"}
	if who.UID != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: who.UID, Gid: who.GID, Groups: []uint32{}}}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var cpu time.Duration
	if cmd.ProcessState != nil {
		cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	return out.String(), cpu, err
}

// daemonCPU is the CPU time the process pid has used, all its threads
// (its process CPU-time clock: nanoseconds, where /proc counts ticks).
func daemonCPU(b *testing.B, pid int) time.Duration {
	clock := int32(^uint32(pid)<<3) | 2 // MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)
	var ts unix.Timespec
	if err := unix.ClockGettime(clock, &ts); err != nil {
		b.Fatalf("the CPU clock of the daemon %d: %v", pid, err)
	}
	return time.Duration(ts.Nano())
}

// mountSample is one timed run.
type mountSample struct{ wall, cpu time.Duration }

// benchMountSpec mounts a new workspace of the spec yaml (written to
// dir/name.yaml, its store dir/name), without a sandbox, and dials it.
func benchMountSpec(b *testing.B, dir, name, yaml string) (*testmount.Mount, *computerfs.Client) {
	b.Helper()
	file := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		b.Fatal(err)
	}
	m := testmount.StartPlain(b, filepath.Join(dir, name), "--spec", file, "--no-sandbox")
	c, err := computerfs.Dial(m.Dir)
	if err != nil {
		b.Fatal(err)
	}
	return m, c
}
