// Command bench measures the start of `true` in a sandbox: a cold start
// with package sandbox in the process (the way a daemon would use it) and
// with the sandboxctl binary, a warm start (a sandbox.Pool's pre-started
// sandbox), `runc run` and `crun run` on the same container spec (the same
// root file system, mounts, namespaces and seccomp profile), and bwrap on
// the same root file system and mounts; runc also without seccomp. It
// prints the median and the 90th percentile of each, and their ratios to
// runc's and bwrap's medians.
//
// With -build it then times a Go build of a real module (mvdan.cc/sh's
// shfmt and gosh, dependencies vendored, the standard library in a primed
// build cache) on a plain disk directory without a sandbox, in a sandbox
// on a disk directory and in a sandbox on a computerfs mount (-computerfs
// names the binary that mounts it), and prints the ratios.
//
//	make build
//	go run -tags seccomp ./sandbox/bench -sandboxctl bin/sandboxctl -computerfs bin/computerfs -build
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/moby/profiles/seccomp"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/computerfs/computerfs/sandbox"
)

func main() {
	sandbox.Init()
	runs := flag.Int("n", 50, "runs of each")
	ctl := flag.String("sandboxctl", "", "a sandboxctl binary to measure too")
	ws := flag.String("w", "", "workspace directory (default: a temporary directory)")
	build := flag.Bool("build", false, "also time a Go build in the sandbox on a mount and on disk against one on disk without a sandbox")
	buildRuns := flag.Int("build-runs", 3, "runs of each build")
	cfs := flag.String("computerfs", "bin/computerfs", "the computerfs binary that mounts the workspace of the build benchmark")
	flag.Parse()
	if err := run(*runs, *ctl, *ws); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	if *build {
		if err := buildBench(*buildRuns, *cfs); err != nil {
			fmt.Fprintln(os.Stderr, "bench: build:", err)
			os.Exit(1)
		}
	}
}

type result struct {
	name        string
	median, p90 time.Duration
}

func measure(name string, n int, f func(i int) error) (result, error) {
	return measureWith(name, n, nil, f)
}

// measureWith measures f n times, calling before (if not nil) untimed
// before each.
func measureWith(name string, n int, before func(), f func(i int) error) (result, error) {
	// One run first: caches, the filter cache, the root skeleton.
	if err := f(-1); err != nil {
		return result{}, fmt.Errorf("%s: %w", name, err)
	}
	var ds []time.Duration
	for i := range n {
		if before != nil {
			before()
		}
		start := time.Now()
		if err := f(i); err != nil {
			return result{}, fmt.Errorf("%s: %w", name, err)
		}
		ds = append(ds, time.Since(start))
	}
	slices.Sort(ds)
	return result{name, ds[len(ds)/2], ds[len(ds)*9/10]}, nil
}

func command(name string, args ...string) func(int) error {
	return func(int) error {
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
}

func run(n int, ctl, ws string) error {
	state, err := os.MkdirTemp("", "sandbox-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(state)
	if err := os.Chmod(state, 0o755); err != nil {
		return err
	}
	if ws == "" {
		ws = filepath.Join(state, "workspace")
		if err := os.Mkdir(ws, 0o755); err != nil {
			return err
		}
		if err := os.Chown(ws, 101000, 101000); err != nil {
			return err
		}
	}
	opts := sandbox.Options{Workspace: ws, Args: []string{"true"}, StateDir: state}
	var results []result

	r, err := measure("sandbox.Run (in process)", n, func(int) error {
		res, err := sandbox.Run(context.Background(), opts)
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("exit %d", res.ExitCode)
		}
		return err
	})
	if err != nil {
		return err
	}
	results = append(results, r)

	// Warm: a pool of 2 pre-started sandboxes. Once with the pool full
	// before each command (a command that finds a sandbox waiting, as
	// commands that come at human or agent pace do), once back to back
	// (then the pool's refills, cold starts in the background, set the
	// pace).
	pool, err := sandbox.NewPool(sandbox.PoolOptions{Options: opts, Size: 2})
	if err != nil {
		return err
	}
	defer pool.Close()
	warmRun := func(int) error {
		res, err := pool.Run(context.Background(), opts)
		if err == nil && (res.ExitCode != 0 || !res.Warm) {
			err = fmt.Errorf("exit %d, warm %v", res.ExitCode, res.Warm)
		}
		return err
	}
	r, err = measureWith("Pool.Run (warm, a sandbox waits)", n, func() {
		for pool.Idle() < 2 {
			time.Sleep(time.Millisecond)
		}
	}, warmRun)
	if err != nil {
		return err
	}
	results = append(results, r)
	r, err = measure("Pool.Run back to back (2)", n, warmRun)
	if err != nil {
		return err
	}
	results = append(results, r)
	pool.Close()

	if ctl != "" {
		r, err := measure("sandboxctl run", n, command(ctl, "run", "--state-dir", state, "-w", ws, "--", "true"))
		if err != nil {
			return err
		}
		results = append(results, r)
	}

	// The same container for runc and crun: the sandbox's spec with the
	// default seccomp profile (the sandbox loads the same filter itself).
	rootfs := ""
	if entries, _ := filepath.Glob(filepath.Join(state, "rootfs-*")); len(entries) == 1 {
		rootfs = entries[0]
	} else {
		return fmt.Errorf("no root skeleton in %s", state)
	}
	spec, err := sandbox.Spec(opts, rootfs)
	if err != nil {
		return err
	}
	if spec.Linux.Seccomp, err = seccomp.GetDefaultProfile(&specs.Spec{
		Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{}},
	}); err != nil {
		return err
	}
	spec.Version = "1.0.2" // what Debian's crun knows
	bundle := filepath.Join(state, "bundle")
	if err := os.Mkdir(bundle, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(spec, "", "\t")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), b, 0o644); err != nil {
		return err
	}
	// And without seccomp: what runc costs besides compiling the profile
	// at every start.
	noSeccomp := filepath.Join(state, "bundle-no-seccomp")
	if err := os.Mkdir(noSeccomp, 0o755); err != nil {
		return err
	}
	spec.Linux.Seccomp = nil
	if b, err = json.MarshalIndent(spec, "", "\t"); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(noSeccomp, "config.json"), b, 0o644); err != nil {
		return err
	}
	for _, c := range []struct{ rt, name, bundle string }{
		{"runc", "runc run", bundle},
		{"runc", "runc run (no seccomp)", noSeccomp},
		{"crun", "crun run", bundle},
	} {
		path, err := exec.LookPath(c.rt)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: %s not found, skipped\n", c.rt)
			continue
		}
		root := filepath.Join(state, c.rt)
		id := strings.ReplaceAll(strings.ReplaceAll(c.name, " ", "-"), "(", "")
		id = strings.ReplaceAll(id, ")", "")
		r, err := measure(c.name, n, func(i int) error {
			return command(path, "--root", root, "run", "--bundle", c.bundle, fmt.Sprintf("%s-%d", id, i+1))(i)
		})
		if err != nil {
			// Debian 12's crun does not run on hybrid cgroups.
			fmt.Fprintf(os.Stderr, "bench: skipped: %v\n", err)
			continue
		}
		results = append(results, r)
	}

	if path, err := exec.LookPath("bwrap"); err == nil {
		args := []string{"--unshare-all", "--uid", "1000", "--gid", "1000", "--die-with-parent",
			"--ro-bind", rootfs, "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"}
		for _, m := range spec.Mounts {
			if m.Type == "bind" && m.Destination != "/workspace" {
				args = append(args, "--ro-bind", m.Source, m.Destination)
			}
		}
		args = append(args, "--bind", ws, "/workspace", "--chdir", "/workspace", "--", "true")
		r, err := measure("bwrap", n, command(path, args...))
		if err != nil {
			return err
		}
		results = append(results, r)
	} else {
		fmt.Fprintln(os.Stderr, "bench: bwrap not found, skipped")
	}

	var runc, bwrap time.Duration
	for _, r := range results {
		switch r.name {
		case "runc run":
			runc = r.median
		case "bwrap":
			bwrap = r.median
		}
	}
	ratio := func(a, b time.Duration) string {
		if b == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", float64(a)/float64(b))
	}
	fmt.Printf("start of `true`, %d runs each\n\n", n)
	fmt.Printf("| %-34s | %9s | %9s | %13s | %14s |\n", "how", "median", "p90", "median ÷ runc", "median ÷ bwrap")
	fmt.Printf("|%s|%s|%s|%s|%s|\n", strings.Repeat("-", 36), strings.Repeat("-", 10)+":", strings.Repeat("-", 10)+":", strings.Repeat("-", 14)+":", strings.Repeat("-", 15)+":")
	for _, r := range results {
		fmt.Printf("| %-34s | %7.2fms | %7.2fms | %13s | %14s |\n", r.name, ms(r.median), ms(r.p90), ratio(r.median, runc), ratio(r.median, bwrap))
	}
	fmt.Println()
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
