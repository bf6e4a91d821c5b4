// Package bench is computerfs's benchmark harness.
//
// It runs the same set of benchmarks against several directories
// ("targets": tmpfs, a plain disk directory, go-fuse's loopback example,
// a computerfs mount, ...) and reports, per benchmark, the median over a
// few repetitions for each target and its ratio to a baseline target
// (by default the one named "disk").
//
// The benchmarks are done the way users' tools do them: workload scenarios
// run real commands (touch, stat, rm, mkdir, find, dd, cat, cp, git, tar)
// through `sh -c` and are timed by wall clock (scenarios.go); syscall-level
// benchmarks are done by a small C program compiled at run time
// (syscalls.go, csrc/cfsbench.c), not by Go code, because the Go runtime's
// preemption signals turn into FUSE interrupts and would disturb what is
// measured. The report is printed as Markdown or JSON (report.go).
//
// Every benchmark repetition works in a fresh subdirectory of the target
// directory and removes it afterwards.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Target is a directory to benchmark, on the file system under test.
type Target struct {
	// Name identifies the target in the report, e.g. "tmpfs", "disk",
	// "loopback", "computerfs".
	Name string `json:"name"`
	// Dir is an existing, writable directory. The harness works only in
	// fresh subdirectories of it and removes them again.
	Dir string `json:"dir"`
	// PID optionally names the process that serves the file system (the
	// computerfs daemon, the loopback process). Its peak RSS (VmHWM) is
	// read after the run and reported.
	PID int `json:"pid,omitempty"`
}

// Better tells which direction of a benchmark's value is better.
type Better int

const (
	// LowerIsBetter is for times.
	LowerIsBetter Better = iota
	// HigherIsBetter is for rates.
	HigherIsBetter
)

func (b Better) String() string {
	if b == HigherIsBetter {
		return "higher"
	}
	return "lower"
}

// MarshalText makes Better appear as "lower" or "higher" in JSON.
func (b Better) MarshalText() ([]byte, error) { return []byte(b.String()), nil }

// UnmarshalText is the inverse of MarshalText.
func (b *Better) UnmarshalText(text []byte) error {
	switch string(text) {
	case "lower":
		*b = LowerIsBetter
	case "higher":
		*b = HigherIsBetter
	default:
		return fmt.Errorf("bench: bad Better %q", text)
	}
	return nil
}

// Benchmark is one measurement, run a few times on each target.
type Benchmark struct {
	// Name is a short stable identifier, e.g. "files/create".
	Name string
	// Desc says in a few words what is measured, for the report.
	Desc string
	// Unit of the value Func returns: "s", "ops/s" or "MiB/s".
	Unit string
	// Better tells whether lower or higher values are better.
	Better Better
	// Reps, if positive, caps the number of repetitions for slow
	// benchmarks (Options.Reps is used if it is smaller).
	Reps int
	// Func does one repetition in env.Dir, a fresh empty directory in the
	// target, and returns the measured value in Unit. Any preparation it
	// does before starting its clock is not measured.
	Func func(ctx context.Context, env *Env) (float64, error)
}

// Pair names a ratio Target ÷ Base reported for every benchmark, besides
// the ratio of every target to the baseline.
type Pair struct {
	Target string `json:"target"`
	Base   string `json:"base"`
}

func (p Pair) String() string { return p.Target + "/" + p.Base }

// Options configure Run. The zero value is usable.
type Options struct {
	// Reps is the number of repetitions per benchmark and target
	// (default 5); a benchmark's own Reps may lower it.
	Reps int
	// Quick selects small sizes so that the whole suite runs in seconds.
	Quick bool
	// Baseline is the name of the target others are compared to
	// (default "disk").
	Baseline string
	// Compare lists extra ratios to report, e.g. computerfs/loopback.
	Compare []Pair
	// Run, if set, selects the benchmarks whose name it matches.
	Run *regexp.Regexp
	// Timeout bounds one repetition of one benchmark on one target
	// (default 10 minutes).
	Timeout time.Duration
	// Budget: once one benchmark has taken this long on one target
	// (setup and clean-up included), its remaining repetitions there are
	// skipped, so that a very slow target does not hold up the run; at
	// least one is always done (default 2 minutes).
	Budget time.Duration
	// WorkDir is where fixtures (a git repository to clone, a tarball of
	// Go's source tree, random data) are made; it should be on a disk,
	// outside the targets. Default: /var/tmp, else os.TempDir().
	WorkDir string
	// CacheDir keeps the compiled C benchmark program between runs.
	// Default: os.UserCacheDir()/computerfs-bench.
	CacheDir string
	// Log receives progress lines; nil means none.
	Log io.Writer
	// Benchmarks replaces the default suite (for tests); nil means
	// Benchmarks(SizesFor(Quick)).
	Benchmarks []Benchmark
}

// Env is what a Benchmark's Func gets for one repetition.
type Env struct {
	// Dir is a fresh, empty directory inside the target.
	Dir string
	// Target is the target being measured.
	Target Target
	// Sizes are the sizes in use (full or quick).
	Sizes Sizes

	fx *fixtures
	r  *runner
}

// Sh runs script with `sh -c` in env.Dir and returns its wall-clock time.
// Extra args are available to the script as $1, $2, ...
func (e *Env) Sh(ctx context.Context, script string, args ...string) (time.Duration, error) {
	cmd := e.command(ctx, "sh", append([]string{"-c", script, "sh"}, args...)...)
	var stderr strings.Builder
	cmd.Stdout = nil // /dev/null
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		return d, fmt.Errorf("sh -c %q: %v: %s", script, err, strings.TrimSpace(stderr.String()))
	}
	return d, nil
}

// Output runs name with args in env.Dir, untimed, and returns its stdout.
func (e *Env) Output(ctx context.Context, name string, args ...string) (string, error) {
	cmd := e.command(ctx, name, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

func (e *Env) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = e.Dir
	cmd.Env = commandEnv()
	// Kill the whole process group (sh and what it started) on cancel.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// commandEnv is the environment of the commands run by benchmarks: the
// caller's, with a fixed locale and git isolated from user configuration.
func commandEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "GIT_") || strings.HasPrefix(k, "LC_") || k == "LANG" {
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"LC_ALL=C",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=computerfs bench", "GIT_AUTHOR_EMAIL=bench@computerfs.invalid",
		"GIT_COMMITTER_NAME=computerfs bench", "GIT_COMMITTER_EMAIL=bench@computerfs.invalid",
		"GIT_AUTHOR_DATE=2025-01-01T00:00:00Z", "GIT_COMMITTER_DATE=2025-01-01T00:00:00Z",
		"GIT_CONFIG_COUNT=4",
		"GIT_CONFIG_KEY_0=init.defaultBranch", "GIT_CONFIG_VALUE_0=main",
		"GIT_CONFIG_KEY_1=gc.auto", "GIT_CONFIG_VALUE_1=0",
		"GIT_CONFIG_KEY_2=safe.directory", "GIT_CONFIG_VALUE_2=*",
		"GIT_CONFIG_KEY_3=advice.detachedHead", "GIT_CONFIG_VALUE_3=false",
	)
}

// DropCaches writes back dirty data and drops the kernel's page, dentry
// and inode caches (all file systems), so that the next read is cold. It
// needs root; without it the error says so and the read stays warm. The
// caches a FUSE daemon keeps in its own memory are not affected.
func (e *Env) DropCaches() error { return e.r.dropCaches() }

// Run runs the benchmarks on every target and returns the report. Failures
// of single benchmarks on single targets are recorded in the report (and
// the remaining repetitions of that benchmark on that target are skipped);
// the returned error is for problems that stop the whole run, such as a
// missing target directory, a fixture or the C program that cannot be
// made, or ctx being done.
func Run(ctx context.Context, targets []Target, opts Options) (Report, error) {
	if opts.Reps <= 0 {
		opts.Reps = 5
	}
	if opts.Baseline == "" {
		opts.Baseline = "disk"
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Minute
	}
	if opts.Budget <= 0 {
		opts.Budget = 2 * time.Minute
	}
	if len(targets) == 0 {
		return Report{}, errors.New("bench: no targets")
	}
	targets = append([]Target(nil), targets...) // Dirs are made absolute
	seen := map[string]bool{}
	for i, t := range targets {
		if t.Name == "" || strings.ContainsAny(t.Name, "/= \t|") {
			return Report{}, fmt.Errorf("bench: bad target name %q", t.Name)
		}
		if seen[t.Name] {
			return Report{}, fmt.Errorf("bench: target %q given twice", t.Name)
		}
		seen[t.Name] = true
		abs, err := filepath.Abs(t.Dir)
		if err != nil {
			return Report{}, err
		}
		if fi, err := os.Stat(abs); err != nil {
			return Report{}, fmt.Errorf("bench: target %s: %v", t.Name, err)
		} else if !fi.IsDir() {
			return Report{}, fmt.Errorf("bench: target %s: %s is not a directory", t.Name, abs)
		}
		targets[i].Dir = abs
	}
	sizes := SizesFor(opts.Quick)
	benches := opts.Benchmarks
	if benches == nil {
		benches = Benchmarks(sizes)
	}
	if opts.Run != nil {
		var sel []Benchmark
		for _, b := range benches {
			if opts.Run.MatchString(b.Name) {
				sel = append(sel, b)
			}
		}
		benches = sel
	}
	if len(benches) == 0 {
		return Report{}, errors.New("bench: no benchmarks selected")
	}

	r := &runner{opts: opts, log: opts.Log}
	if r.log == nil {
		r.log = io.Discard
	}
	rep := Report{
		Started:  time.Now().UTC(),
		Quick:    opts.Quick,
		Reps:     opts.Reps,
		Baseline: opts.Baseline,
		Compare:  opts.Compare,
		Host:     hostInfo(),
	}
	if !seen[opts.Baseline] {
		rep.Notes = append(rep.Notes, fmt.Sprintf("no target is named %q, so there are no ratios to a baseline", opts.Baseline))
	}
	for _, p := range opts.Compare {
		if !seen[p.Target] || !seen[p.Base] {
			rep.Notes = append(rep.Notes, fmt.Sprintf("ratio %s: no such target", p))
		}
	}
	for _, t := range targets {
		rep.Targets = append(rep.Targets, TargetInfo{Target: t, FSType: fsType(t.Dir)})
	}

	fx, err := makeFixtures(ctx, opts, sizes, r.log)
	if err != nil {
		return rep, err
	}
	defer fx.remove()

	start := time.Now()
	var runErr error
	for _, b := range benches {
		res, err := r.runBenchmark(ctx, b, targets, sizes, fx)
		rep.Results = append(rep.Results, res)
		if err != nil {
			runErr = err
			break
		}
	}
	rep.Seconds = time.Since(start).Seconds()

	for i, t := range targets {
		if t.PID > 0 {
			kib, err := peakRSSKiB(t.PID)
			if err != nil {
				rep.Notes = append(rep.Notes, fmt.Sprintf("peak RSS of %s (pid %d): %v", t.Name, t.PID, err))
				continue
			}
			rep.Targets[i].PeakRSSKiB = kib
		}
	}
	if r.dropErr != nil {
		rep.Notes = append(rep.Notes, fmt.Sprintf("could not drop the page cache (%v): cold reads were warm", r.dropErr))
	}
	rep.computeRatios()
	return rep, runErr
}

type runner struct {
	opts    Options
	log     io.Writer
	dropErr error // why the caches could not be dropped
}

func (r *runner) logf(format string, args ...any) {
	fmt.Fprintf(r.log, "bench: "+format+"\n", args...)
}

func (r *runner) runBenchmark(ctx context.Context, b Benchmark, targets []Target, sizes Sizes, fx *fixtures) (Result, error) {
	res := Result{Name: b.Name, Desc: b.Desc, Unit: b.Unit, Better: b.Better}
	reps := r.opts.Reps
	if b.Reps > 0 && b.Reps < reps {
		reps = b.Reps
	}
	res.Targets = make([]TargetResult, len(targets))
	for i, t := range targets {
		res.Targets[i].Target = t.Name
	}
	spent := make([]time.Duration, len(targets))
	for rep := 0; rep < reps; rep++ {
		// Rotate the order of targets from one repetition to the next,
		// so that none is always first after another's work.
		for k := range targets {
			i := (rep + k) % len(targets)
			tr := &res.Targets[i]
			if tr.Error != "" || tr.OverBudget {
				continue
			}
			if spent[i] >= r.opts.Budget {
				tr.OverBudget = true
				r.logf("%-18s %-12s over the time budget (%v) after %d runs", b.Name, targets[i].Name, r.opts.Budget, rep)
				continue
			}
			start := time.Now()
			v, err := r.runOnce(ctx, b, targets[i], sizes, fx, rep)
			spent[i] += time.Since(start)
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			if err == nil && (v <= 0 || math.IsInf(v, 0) || math.IsNaN(v)) {
				err = fmt.Errorf("bad value %v", v)
			}
			if err != nil {
				tr.Error = err.Error()
				r.logf("%-18s %-12s rep %d/%d: FAILED: %v", b.Name, targets[i].Name, rep+1, reps, err)
				continue
			}
			tr.Samples = append(tr.Samples, v)
			r.logf("%-18s %-12s rep %d/%d: %s %s", b.Name, targets[i].Name, rep+1, reps, formatValue(v), b.Unit)
		}
	}
	for i := range res.Targets {
		tr := &res.Targets[i]
		if tr.Error == "" && len(tr.Samples) > 0 {
			tr.Median = median(tr.Samples)
		}
	}
	return res, nil
}

// runOnce does one repetition in a fresh subdirectory of the target and
// removes the subdirectory afterwards.
func (r *runner) runOnce(ctx context.Context, b Benchmark, tg Target, sizes Sizes, fx *fixtures, rep int) (v float64, err error) {
	ctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	dir := filepath.Join(tg.Dir, fmt.Sprintf("computerfs-bench-%s-%d-%d", strings.ReplaceAll(b.Name, "/", "-"), os.Getpid(), rep))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return 0, err
	}
	defer func() {
		if rerr := os.RemoveAll(dir); rerr != nil && err == nil {
			err = fmt.Errorf("cleaning up: %v", rerr)
		}
	}()
	// Write back what earlier runs left dirty, so that it is not written
	// during this one.
	syscall.Sync()
	env := &Env{Dir: dir, Target: tg, Sizes: sizes, fx: fx, r: r}
	return b.Func(ctx, env)
}

func (r *runner) dropCaches() error {
	if r.dropErr != nil {
		return r.dropErr
	}
	syscall.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0); err != nil {
		r.dropErr = err
		r.logf("cannot drop caches (%v); cold reads will be warm", err)
	}
	return r.dropErr
}

// seconds turns a duration into the value of a time benchmark.
func seconds(d time.Duration) float64 { return d.Seconds() }

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// peakRSSKiB reads VmHWM, the peak resident set size, of process pid.
func peakRSSKiB(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				return strconv.ParseInt(f[0], 10, 64)
			}
		}
	}
	return 0, errors.New("no VmHWM in /proc/pid/status")
}

// fsType names the file system dir is on, as `stat -f` would.
func fsType(dir string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return "?"
	}
	switch uint32(st.Type) {
	case 0x01021994:
		return "tmpfs"
	case 0xEF53:
		return "ext4"
	case 0x65735546:
		return "fuse"
	case 0x58465342:
		return "xfs"
	case 0x9123683E:
		return "btrfs"
	case 0x794C7630:
		return "overlayfs"
	case 0x2FC12FC1:
		return "zfs"
	case 0x6969:
		return "nfs"
	}
	return fmt.Sprintf("0x%x", uint32(st.Type))
}

func hostInfo() HostInfo {
	h := HostInfo{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		h.Kernel = strings.TrimSpace(string(data))
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kib int64
		if _, err := fmt.Sscanf(string(data), "MemTotal: %d kB", &kib); err == nil {
			h.MemMiB = kib / 1024
		}
	}
	h.CPUIdle = cpuIdle()
	return h
}

// haltPollField names guest_halt_poll_ns in HostInfo.CPUIdle, followed by
// its value.
const haltPollField = "guest_halt_poll_ns "

// haltsAtOnce tells from HostInfo.CPUIdle whether idle CPUs halt without
// polling first.
func haltsAtOnce(cpuIdle string) bool { return strings.HasSuffix(cpuIdle, haltPollField+"0") }

// cpuIdle describes how an idle CPU waits: its cpuidle driver and, for
// the haltpoll driver of virtual machines, how long it polls before it
// halts. A FUSE request and its answer each wake a thread that may be
// waiting on another CPU; where that CPU halts at once (guest_halt_poll_ns
// 0), each wake-up goes through the hypervisor, and a round trip costs
// about three times what it costs with polling.
func cpuIdle() string {
	read := func(path string) string {
		data, err := os.ReadFile(path)
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(data))
	}
	driver := read("/sys/devices/system/cpu/cpuidle/current_driver")
	if driver == "" {
		return ""
	}
	if ns := read("/sys/module/haltpoll/parameters/guest_halt_poll_ns"); driver == "haltpoll" && ns != "" {
		return fmt.Sprintf("cpuidle %s, %s%s", driver, haltPollField, ns)
	}
	return "cpuidle " + driver
}
