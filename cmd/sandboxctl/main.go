// Command sandboxctl runs programs in a sandbox on a workspace mount (see
// package sandbox).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/computerfs/computerfs/internal/agentid"
	"github.com/computerfs/computerfs/sandbox"
)

const usage = `sandboxctl: run programs in a sandbox on a workspace

Usage:
  sandboxctl run -w MOUNTPOINT [flags] -- PROGRAM ARGS...   run PROGRAM with the workspace at /workspace
  sandboxctl gc                                            remove what killed sandboxes left behind
  sandboxctl help                                          this text

Run 'sandboxctl run -h' for the flags.
`

func main() {
	sandbox.Init()
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin *os.File, stdout, stderr *os.File) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "run":
		return cmdRun(args[1:], stdin, stdout, stderr)
	case "gc":
		return cmdGC(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprint(stderr, usage)
	fmt.Fprintf(stderr, "sandboxctl: unknown command %q\n", args[0])
	return 2
}

type envFlag []string

func (e *envFlag) String() string { return strings.Join(*e, ",") }
func (e *envFlag) Set(v string) error {
	if k, _, ok := strings.Cut(v, "="); !ok || k == "" {
		return errors.New("want KEY=VALUE")
	}
	*e = append(*e, v)
	return nil
}

// sizeFlag is a byte count with an optional K, M, G or T suffix (powers
// of 1024; "KiB", "MB" and the like are taken the same way).
type sizeFlag int64

func (s *sizeFlag) String() string { return strconv.FormatInt(int64(*s), 10) }
func (s *sizeFlag) Set(v string) error {
	n, err := parseSize(v)
	if err != nil {
		return err
	}
	*s = sizeFlag(n)
	return nil
}

func parseSize(v string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(v))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "IB"), "B")
	mult := int64(1)
	if t != "" {
		switch t[len(t)-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult > 1 {
			t = t[:len(t)-1]
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("%q is not a size (like 512M or 2G)", v)
	}
	return int64(f * float64(mult)), nil
}

func cmdRun(args []string, stdin *os.File, stdout, stderr *os.File) int {
	fs := flag.NewFlagSet("sandboxctl run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		opts    sandbox.Options
		env     envFlag
		memory  sizeFlag
		output  sizeFlag
		network = fs.String("network", "none", "none (loopback only) or host")
		uid     = fs.Int("uid", int(sandbox.DefaultUser.UID), "user id inside the sandbox (host id 100000+N, unless it is the agent's)")
		gid     = fs.Int("gid", int(sandbox.DefaultUser.GID), "group id inside the sandbox (host id 100000+N, unless it is the agent's)")
		agent   = fs.String("agent", "", "`UID:GID` on the host that --uid and --gid are (\"none\": host id 100000+N; default: the owner of the workspace directory, a computerfs workspace's agent, unless that is root or of 100000-165535)")
	)
	fs.StringVar(&opts.Workspace, "w", "", "the workspace `MOUNTPOINT`, at /workspace in the sandbox")
	fs.StringVar(&opts.Rootfs, "rootfs", "", "an unpacked root file system `DIR` (default: the host's userland, read-only)")
	memory = sizeFlag(sandbox.DefaultLimits.Memory)
	fs.Var(&memory, "memory", "memory limit, like 512M (0: none)")
	fs.Int64Var(&opts.Limits.Pids, "pids", sandbox.DefaultLimits.Pids, "limit of processes and threads (0: none)")
	fs.Float64Var(&opts.Limits.CPU, "cpu", 0, "CPU limit in cores, like 0.5 (default: none)")
	fs.DurationVar(&opts.Limits.Timeout, "timeout", 0, "wall-clock limit, like 30s; then everything is killed (default: none)")
	fs.Var(&output, "output-limit", "limit of stdout and stderr together, like 10M; then everything is killed (default: none)")
	fs.Var(&env, "env", "`KEY=VALUE` in the program's environment (repeatable)")
	fs.StringVar(&opts.Cwd, "cwd", "", "working directory in the sandbox (default /workspace)")
	fs.BoolVar(&opts.NoSeccomp, "no-seccomp", false, "run without the seccomp filter")
	fs.StringVar(&opts.StateDir, "state-dir", sandbox.DefaultStateDir, "where containers keep their state")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: sandboxctl run -w MOUNTPOINT [flags] -- PROGRAM ARGS...")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "sandboxctl run: no program given")
		fs.Usage()
		return 2
	}
	if opts.Workspace == "" {
		fmt.Fprintln(stderr, "sandboxctl run: -w MOUNTPOINT is required")
		return 2
	}
	if *uid < 0 || *uid > 65535 || *gid < 0 || *gid > 65535 {
		fmt.Fprintln(stderr, "sandboxctl run: --uid and --gid must be from 0 to 65535")
		return 2
	}
	opts.Args = fs.Args()
	opts.Env = env
	opts.Network = sandbox.Network(*network)
	opts.User = &sandbox.User{UID: uint32(*uid), GID: uint32(*gid)}
	host, err := hostUser(*agent, opts.Workspace)
	if err != nil {
		fmt.Fprintln(stderr, "sandboxctl run:", err)
		return 2
	}
	opts.HostUser = host
	if host != nil {
		// A computerfs agent's sandboxes have an id block of their own.
		if base, n, ok := agentid.SandboxBlock(host.UID); ok {
			opts.IDs = sandbox.IDs{Base: base, Count: n}
		} else if base, n, ok := agentid.RegisteredBlock("", host.UID); ok {
			opts.IDs = sandbox.IDs{Base: base, Count: n} // a named agent's
		}
	}
	if opts.Limits.Pids < 0 {
		fmt.Fprintln(stderr, "sandboxctl run: --pids must not be negative")
		return 2
	}
	opts.Limits.Memory = int64(memory)
	opts.Limits.OutputBytes = int64(output)
	opts.Stdin, opts.Stdout, opts.Stderr = stdin, stdout, stderr

	// The sandbox gets the signals that would end sandboxctl; sandboxctl
	// ends when the sandbox does.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	opts.Signals = sigs

	res, err := sandbox.Run(context.Background(), opts)
	var se *sandbox.StartError
	switch {
	case errors.As(err, &se):
		fmt.Fprintln(stderr, "sandboxctl:", err)
		return res.ExitCode
	case err != nil:
		fmt.Fprintln(stderr, "sandboxctl:", err)
		return 125
	}
	switch {
	case res.TimedOut:
		fmt.Fprintf(stderr, "sandboxctl: timed out after %v: killed\n", opts.Limits.Timeout)
	case res.OOMKilled:
		fmt.Fprintf(stderr, "sandboxctl: out of memory (limit %d bytes): killed\n", opts.Limits.Memory)
	case res.OutputLimited:
		fmt.Fprintf(stderr, "sandboxctl: output passed %d bytes: cut and killed\n", opts.Limits.OutputBytes)
	}
	if os.Getenv("SANDBOXCTL_STATS") != "" {
		printStats(stderr, res)
	}
	return res.ExitCode
}

// hostUser is who the sandbox's user is on the host: --agent, or the
// owner of the workspace directory (a computerfs workspace's root is its
// agent's, mode 0700: nobody else could write it), unless that owner is
// root or one of the sandbox's shared ids.
func hostUser(flag, workspace string) (*sandbox.User, error) {
	switch flag {
	case "none":
		return nil, nil
	case "":
		var st syscall.Stat_t
		if err := syscall.Stat(workspace, &st); err != nil {
			return nil, nil // the sandbox says what is wrong with it
		}
		if _, shared := sandbox.InsideID(st.Uid); st.Uid == 0 || st.Gid == 0 || shared {
			return nil, nil
		}
		return &sandbox.User{UID: st.Uid, GID: st.Gid}, nil
	}
	u, g, _ := strings.Cut(flag, ":")
	uid, err1 := strconv.ParseUint(u, 10, 32)
	gid, err2 := strconv.ParseUint(g, 10, 32)
	if err1 != nil || err2 != nil || uid == 0 || gid == 0 {
		return nil, fmt.Errorf("--agent %q: want UID:GID (numbers, not root), or none", flag)
	}
	return &sandbox.User{UID: uint32(uid), GID: uint32(gid)}, nil
}

func printStats(w io.Writer, r sandbox.Result) {
	fmt.Fprintf(w, "sandboxctl: exit %d signal %d duration %v cpu %v peak-memory %d oom %v pids-limited %v\n",
		r.ExitCode, int(r.Signal), r.Duration.Round(time.Microsecond), r.CPUTime.Round(time.Microsecond),
		r.PeakMemory, r.OOMKilled, r.PidsLimited)
}

func cmdGC(args []string, stdout, stderr *os.File) int {
	fs := flag.NewFlagSet("sandboxctl gc", flag.ContinueOnError)
	fs.SetOutput(stderr)
	stateDir := fs.String("state-dir", sandbox.DefaultStateDir, "where containers keep their state")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	removed, err := sandbox.GC(*stateDir)
	for _, id := range removed {
		fmt.Fprintln(stdout, "removed", id)
	}
	if err != nil {
		fmt.Fprintln(stderr, "sandboxctl gc:", err)
		return 1
	}
	return 0
}
