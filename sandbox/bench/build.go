package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/computerfs/computerfs/sandbox"
)

// The build benchmark: `go build -o out/ ./cmd/...` of mvdan.cc/sh (shfmt
// and gosh: the shell parser, interpreter and formatter, and vendored
// dependencies: golang.org/x/sys, x/term, editorconfig, renameio...).
// Every build starts from the same build cache: the standard library the
// module uses already compiled, the module and its dependencies not. The
// module source, the cache and the output are in the build's directory,
// so on the mount for the sandbox on the mount.
const (
	buildModule = "mvdan.cc/sh/v3"
	hostUser    = 101000 // the sandbox's default user on the host
)

// buildEnv is the environment of every build, with or without a sandbox:
// no network, no toolchain switch, no cgo (the same compiler work on each
// side), no user configuration.
func buildEnv(dir, home string) []string {
	return []string{
		"GOTOOLCHAIN=local", "CGO_ENABLED=0", "GOFLAGS=-mod=vendor -buildvcs=false",
		"GOPROXY=off", "GOENV=off", "GOCACHE=" + filepath.Join(dir, "gocache"),
		"HOME=" + home, "GOPATH=" + filepath.Join(home, "gopath"),
	}
}

type buildTarget struct {
	name    string
	dir     string // holds src, gocache and out
	sandbox bool
	times   []time.Duration
	cpu     []time.Duration
}

func buildBench(runs int, cfsBin string) error {
	work, err := os.MkdirTemp("", "sandbox-build-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	if err := os.Chmod(work, 0o755); err != nil {
		return err
	}
	src, err := buildProject(work)
	if err != nil {
		return err
	}
	tpl := filepath.Join(work, "gocache-primed")
	if err := primeCache(src, tpl); err != nil {
		return err
	}

	// The mount.
	mnt := filepath.Join(work, "mount")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		return err
	}
	if out, err := exec.Command(cfsBin, "mount", "--background", "--store", filepath.Join(work, "mount.store"), mnt).CombinedOutput(); err != nil {
		return fmt.Errorf("%s mount: %v: %s", cfsBin, err, out)
	}
	defer func() {
		if out, err := exec.Command(cfsBin, "unmount", mnt).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "bench: unmount: %v: %s\n", err, out)
			exec.Command("fusermount", "-u", "-z", mnt).Run()
		}
	}()
	targets := []*buildTarget{
		{name: "disk, no sandbox", dir: filepath.Join(work, "disk")},
		{name: "sandbox on disk", dir: filepath.Join(work, "sandbox-disk"), sandbox: true},
		{name: "sandbox on the mount", dir: mnt, sandbox: true},
	}
	for _, t := range targets {
		if err := os.MkdirAll(t.dir, 0o755); err != nil {
			return err
		}
		if err := sh("cp", "-a", src, filepath.Join(t.dir, "src")); err != nil {
			return err
		}
		if t.sandbox {
			if err := sh("chown", "-R", fmt.Sprintf("%d:%d", hostUser, hostUser), t.dir); err != nil {
				return err
			}
		}
	}
	state := filepath.Join(work, "state")
	if err := os.Mkdir(state, 0o755); err != nil {
		return err
	}
	home := filepath.Join(work, "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		return err
	}

	for i := range runs {
		// Each round in another order: load that comes and goes hits
		// every target alike.
		for j := range targets {
			t := targets[(i+j)%len(targets)]
			if err := t.prepare(tpl); err != nil {
				return err
			}
			d, cpu, err := t.build(state, home)
			if err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			t.times = append(t.times, d)
			t.cpu = append(t.cpu, cpu)
		}
	}

	med := func(ds []time.Duration) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[len(s)/2]
	}
	base := med(targets[0].times)
	fmt.Printf("go build of %s's cmd/shfmt and cmd/gosh (vendored dependencies, standard library in the build cache), %d runs each\n\n", buildModule, runs)
	fmt.Printf("| %-22s | %9s | %9s | %14s |\n", "where", "median", "CPU", "÷ disk, no sandbox")
	fmt.Printf("|%s|%s|%s|%s|\n", strings.Repeat("-", 24), strings.Repeat("-", 10)+":", strings.Repeat("-", 10)+":", strings.Repeat("-", 19)+":")
	for _, t := range targets {
		fmt.Printf("| %-22s | %8.2fs | %8.2fs | %18.2f |\n", t.name, med(t.times).Seconds(), med(t.cpu).Seconds(), float64(med(t.times))/float64(base))
	}
	fmt.Printf("\nsandbox on the mount ÷ sandbox on disk (the mount's cost): %.2f\n",
		float64(med(targets[2].times))/float64(med(targets[1].times)))
	return nil
}

// prepare gives t the primed build cache and no output.
func (t *buildTarget) prepare(tpl string) error {
	for _, d := range []string{"gocache", "out"} {
		if err := os.RemoveAll(filepath.Join(t.dir, d)); err != nil {
			return err
		}
	}
	if err := sh("cp", "-a", tpl, filepath.Join(t.dir, "gocache")); err != nil {
		return err
	}
	if t.sandbox {
		return sh("chown", "-R", fmt.Sprintf("%d:%d", hostUser, hostUser), filepath.Join(t.dir, "gocache"))
	}
	return nil
}

// build runs the build and returns its wall-clock and CPU time.
func (t *buildTarget) build(state, home string) (time.Duration, time.Duration, error) {
	args := []string{"go", "build", "-o", "../out/", "./cmd/..."}
	var stderr bytes.Buffer
	if t.sandbox {
		start := time.Now()
		res, err := sandbox.Run(context.Background(), sandbox.Options{
			Args:      args,
			Workspace: t.dir,
			Cwd:       "src",
			Env:       buildEnv("/workspace", "/tmp"),
			Stderr:    &stderr,
			StateDir:  state,
		})
		d := time.Since(start)
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("exit %d: %s", res.ExitCode, stderr.String())
		}
		if err == nil {
			err = checkBuilt(t.dir)
		}
		return d, res.CPUTime, err
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = filepath.Join(t.dir, "src")
	cmd.Env = append(os.Environ(), buildEnv(t.dir, home)...)
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		return d, 0, fmt.Errorf("%v: %s", err, stderr.String())
	}
	cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return d, cpu, checkBuilt(t.dir)
}

func checkBuilt(dir string) error {
	for _, b := range []string{"shfmt", "gosh"} {
		if fi, err := os.Stat(filepath.Join(dir, "out", b)); err != nil || fi.Size() == 0 {
			return fmt.Errorf("no %s built: %v", b, err)
		}
	}
	return nil
}

// buildProject copies the module (of the version this repository uses,
// from the module cache or the module proxy) into work and vendors its
// dependencies there.
func buildProject(work string) (string, error) {
	out, err := exec.Command("go", "mod", "download", "-json", buildModule).Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %w", buildModule, err)
	}
	var m struct{ Dir, Version string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		return "", fmt.Errorf("go mod download %s: %q", buildModule, out)
	}
	src := filepath.Join(work, "src")
	if err := sh("cp", "-r", m.Dir, src); err != nil {
		return "", err
	}
	if err := sh("chmod", "-R", "u+w,a+rX", src); err != nil {
		return "", err
	}
	cmd := exec.Command("go", "mod", "vendor")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go mod vendor: %v: %s", err, out)
	}
	return src, nil
}

// primeCache compiles into a new build cache tpl the packages of the
// standard library the build uses.
func primeCache(src, tpl string) error {
	env := append(os.Environ(), buildEnv(filepath.Dir(tpl), os.TempDir())...)
	env = append(env, "GOCACHE="+tpl)
	list := exec.Command("go", "list", "-deps", "-f", "{{if .Standard}}{{.ImportPath}}{{end}}", "./cmd/...")
	list.Dir, list.Env = src, env
	out, err := list.Output()
	if err != nil {
		return fmt.Errorf("go list: %w", err)
	}
	build := exec.Command("go", append([]string{"build"}, strings.Fields(string(out))...)...)
	build.Dir, build.Env = src, env
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("priming the build cache: %v: %s", err, out)
	}
	return nil
}

func sh(name string, args ...string) error {
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return nil
}
