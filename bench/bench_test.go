package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// diskDir returns a fresh directory that is not on tmpfs.
func diskDir(t *testing.T) string {
	t.Helper()
	for _, parent := range []string{os.TempDir(), "/var/tmp"} {
		if fsType(parent) == "tmpfs" {
			continue
		}
		dir, err := os.MkdirTemp(parent, "bench-test-disk-")
		if err != nil {
			continue
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		return dir
	}
	t.Skip("no directory off tmpfs")
	return ""
}

// tmpfsDir mounts a tmpfs for the test (needs root).
func tmpfsDir(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount tmpfs and drop caches")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=512m"); err != nil {
		t.Skipf("cannot mount tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	if got := fsType(dir); got != "tmpfs" {
		t.Fatalf("fsType(%s) = %q after mounting tmpfs", dir, got)
	}
	return dir
}

func assertEmpty(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("left behind in %s: %s", dir, e.Name())
	}
}

// TestQuick runs the whole suite with small sizes on tmpfs and on disk.
func TestQuick(t *testing.T) {
	for _, tool := range []string{"gcc", "git", "tar", "awk", "dd", "xargs", "seq", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the benchmarks need %s: %v", tool, err)
		}
	}
	tmp := tmpfsDir(t)
	disk := diskDir(t)
	work := t.TempDir()
	targets := []Target{{Name: "tmpfs", Dir: tmp}, {Name: "disk", Dir: disk, PID: os.Getpid()}}
	const reps = 2
	var log bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	rep, err := Run(ctx, targets, Options{
		Reps:    reps,
		Quick:   true,
		Compare: []Pair{{Target: "tmpfs", Base: "disk"}},
		WorkDir: work,
		Log:     &log,
	})
	t.Logf("quick run took %v", time.Since(start))
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, log.String())
	}
	if f := rep.Failed(); len(f) > 0 {
		t.Fatalf("failures:\n%s\nlog:\n%s", strings.Join(f, "\n"), log.String())
	}

	want := Benchmarks(SizesFor(true))
	if len(rep.Results) != len(want) {
		t.Fatalf("%d results, want %d", len(rep.Results), len(want))
	}
	for i, b := range want {
		res := rep.Results[i]
		if res.Name != b.Name || res.Unit != b.Unit || res.Better != b.Better {
			t.Errorf("result %d is %s (%s, %v), want %s (%s, %v)", i, res.Name, res.Unit, res.Better, b.Name, b.Unit, b.Better)
		}
		if len(res.Targets) != len(targets) {
			t.Fatalf("%s: %d target results", res.Name, len(res.Targets))
		}
		for j, tr := range res.Targets {
			if tr.Target != targets[j].Name {
				t.Errorf("%s: target %d is %s", res.Name, j, tr.Target)
			}
			if len(tr.Samples) != reps {
				t.Errorf("%s on %s: %d samples, want %d", res.Name, tr.Target, len(tr.Samples), reps)
			}
			for _, s := range tr.Samples {
				if !(s > 0) || math.IsInf(s, 0) {
					t.Errorf("%s on %s: sample %v", res.Name, tr.Target, s)
				}
			}
			if tr.Median < slices.Min(tr.Samples) || tr.Median > slices.Max(tr.Samples) {
				t.Errorf("%s on %s: median %v outside samples %v", res.Name, tr.Target, tr.Median, tr.Samples)
			}
			// Any file system within a factor 1000 of ext4, either way.
			if !(tr.Ratio > 1e-3 && tr.Ratio < 1e3) {
				t.Errorf("%s on %s: ratio to disk %v", res.Name, tr.Target, tr.Ratio)
			}
			if got, want := tr.Ratio, tr.Median/res.Median("disk"); math.Abs(got-want) > 1e-9*want {
				t.Errorf("%s on %s: ratio %v, want %v", res.Name, tr.Target, got, want)
			}
		}
		if d := res.Targets[1]; d.Ratio != 1 {
			t.Errorf("%s: disk's ratio to itself is %v", res.Name, d.Ratio)
		}
		if len(res.Ratios) != 1 || res.Ratios[0].Ratio != res.Targets[0].Ratio {
			t.Errorf("%s: ratios %+v, want tmpfs/disk = %v", res.Name, res.Ratios, res.Targets[0].Ratio)
		}
	}
	if rep.Targets[0].FSType != "tmpfs" || rep.Targets[1].FSType == "tmpfs" {
		t.Errorf("file system types %q, %q", rep.Targets[0].FSType, rep.Targets[1].FSType)
	}
	if rep.Targets[1].PeakRSSKiB <= 0 {
		t.Errorf("no peak RSS for the test process: notes %q", rep.Notes)
	}

	// Everything cleaned up: target dirs and fixtures.
	assertEmpty(t, tmp)
	assertEmpty(t, disk)
	assertEmpty(t, work)

	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", md.String())
	for _, s := range []string{"| tmpfs |", "| disk |", "tmpfs ÷ disk", "s ↓", "ops/s ↑", "MiB/s ↑"} {
		if !strings.Contains(md.String(), s) {
			t.Errorf("Markdown lacks %q", s)
		}
	}
	for _, b := range want {
		if !strings.Contains(md.String(), "| "+b.Name+" |") {
			t.Errorf("Markdown lacks a row for %s", b.Name)
		}
	}

	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Results) != len(rep.Results) || back.Results[0].Targets[0].Median != rep.Results[0].Targets[0].Median ||
		back.Results[len(back.Results)-1].Better != HigherIsBetter {
		t.Errorf("JSON does not round-trip:\n%s", js.String())
	}
}

// TestFailures checks that a failing benchmark is recorded, stops its
// repetitions on that target only, and is cleaned up after.
func TestFailures(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	calls := map[string]int{}
	benches := []Benchmark{{
		Name: "fake/fails-on-b", Unit: "s", Better: LowerIsBetter,
		Func: func(ctx context.Context, e *Env) (float64, error) {
			calls[e.Target.Name]++
			if err := os.WriteFile(filepath.Join(e.Dir, "junk"), nil, 0o644); err != nil {
				return 0, err
			}
			if e.Target.Name == "b" {
				return 0, errors.New("boom")
			}
			return 2, nil
		},
	}, {
		Name: "fake/zero", Unit: "ops/s", Better: HigherIsBetter, Reps: 1,
		Func: func(ctx context.Context, e *Env) (float64, error) {
			calls["zero"]++
			return 0, nil
		},
	}}
	rep, err := Run(context.Background(), []Target{{Name: "a", Dir: a}, {Name: "b", Dir: b}},
		Options{Reps: 3, Benchmarks: benches, Baseline: "a", WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if calls["a"] != 3 || calls["b"] != 1 || calls["zero"] != 2 {
		t.Errorf("calls %v, want a:3 b:1 zero:2", calls)
	}
	res := rep.Results[0]
	if res.Targets[0].Median != 2 || res.Targets[0].Ratio != 1 || res.Targets[1].Error != "boom" {
		t.Errorf("result %+v", res)
	}
	if f := rep.Failed(); len(f) != 3 {
		t.Errorf("Failed() = %q, want 3", f)
	}
	var md bytes.Buffer
	rep.WriteMarkdown(&md)
	if !strings.Contains(md.String(), "| 2.00 | error |") || !strings.Contains(md.String(), "Failed: fake/fails-on-b on b: boom") {
		t.Errorf("Markdown:\n%s", md.String())
	}
	assertEmpty(t, a)
	assertEmpty(t, b)
}

// TestMain runs Main end to end on one cheap benchmark.
func TestMainJSON(t *testing.T) {
	a, b := t.TempDir(), diskDir(t)
	var out bytes.Buffer
	err := Main([]string{"--quick", "-q", "--json", "x=" + a, "--run", "^files/create$", "--reps", "1",
		"--ratio", "x/disk", "disk=" + b, "--pid", "x=1", "--workdir", t.TempDir()}, &out)
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, out.String())
	}
	if len(rep.Results) != 1 || rep.Results[0].Name != "files/create" || len(rep.Targets) != 2 ||
		rep.Targets[0].PID != 1 || rep.Results[0].Ratios[0].Ratio <= 0 || rep.Results[0].Targets[0].Ratio <= 0 {
		t.Errorf("report:\n%s", out.String())
	}
}

func TestMainArgs(t *testing.T) {
	var out bytes.Buffer
	if err := Main([]string{"--help"}, &out); err != nil || !strings.Contains(out.String(), "NAME=DIR") {
		t.Errorf("--help: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := Main([]string{"--list"}, &out); err != nil || !strings.Contains(out.String(), "sys/randread") {
		t.Errorf("--list: %v\n%s", err, out.String())
	}
	for _, args := range [][]string{
		{},
		{"nodir"},
		{"--reps"},
		{"--ratio", "x", "a=/"},
		{"--pid", "b=1", "a=/"},
		{"--run", "(", "a=/"},
		{"a=/", "a=/"},
		{"a=/nonexistent/dir"},
		{"--run", "^nothing$", "a=/"},
	} {
		if err := Main(args, &out); err == nil {
			t.Errorf("Main(%q) succeeded", args)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	if v := formatValue(0.012345); v != "0.0123" {
		t.Errorf("formatValue = %q", v)
	}
	if r := regexp.MustCompile(`^\d+$`); !r.MatchString(formatValue(123456.7)) {
		t.Errorf("formatValue(123456.7) = %q", formatValue(123456.7))
	}
}

// TestBudget checks that a benchmark stops repeating on a target once it
// has used its time budget there, after at least one run.
func TestBudget(t *testing.T) {
	a := t.TempDir()
	runs := 0
	benches := []Benchmark{{
		Name: "fake/slow", Unit: "s", Better: LowerIsBetter,
		Func: func(ctx context.Context, e *Env) (float64, error) {
			runs++
			time.Sleep(2 * time.Millisecond)
			return 1, nil
		},
	}}
	rep, err := Run(context.Background(), []Target{{Name: "a", Dir: a}},
		Options{Reps: 5, Budget: time.Millisecond, Benchmarks: benches, WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	tr := rep.Results[0].Targets[0]
	if runs != 1 || !tr.OverBudget || tr.Median != 1 || len(rep.Failed()) != 0 {
		t.Errorf("runs %d, result %+v", runs, tr)
	}
	var md bytes.Buffer
	rep.WriteMarkdown(&md)
	if !strings.Contains(md.String(), "| 1.00 * |") || !strings.Contains(md.String(), "only 1 run(s)") {
		t.Errorf("Markdown:\n%s", md.String())
	}
}

// TestMarkdownCPUIdle: the report says how idle CPUs wait, and warns when
// they halt without polling.
func TestMarkdownCPUIdle(t *testing.T) {
	const warning = "Idle CPUs halt at once here"
	for _, tc := range []struct {
		idle string
		warn bool
	}{
		{"cpuidle haltpoll, guest_halt_poll_ns 0", true},
		{"cpuidle haltpoll, guest_halt_poll_ns 200000", false},
		{"cpuidle intel_idle", false},
		{"", false},
	} {
		rep := &Report{Host: HostInfo{CPUs: 2, CPUIdle: tc.idle}}
		var md bytes.Buffer
		if err := rep.WriteMarkdown(&md); err != nil {
			t.Fatal(err)
		}
		out := md.String()
		if tc.idle != "" && !strings.Contains(out, "2 CPUs, "+tc.idle+",") {
			t.Errorf("%q: the header does not say it:\n%s", tc.idle, out)
		}
		if got := strings.Contains(out, warning); got != tc.warn {
			t.Errorf("%q: warning %v, want %v:\n%s", tc.idle, got, tc.warn, out)
		}
	}
}
