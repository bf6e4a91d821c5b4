package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"golang.org/x/term"

	"github.com/computerfs/computerfs"
)

// listFlag collects a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func cmdExec(args []string, stdout, stderr io.Writer) error {
	fset := newFlags("exec")
	mount := fset.String("w", "", "the workspace's mount point")
	backend := fset.String("backend", "auto", "shell (in the daemon, on the store), sandbox, or auto (shell when every command is built in)")
	cwd := fset.String("cwd", "", "working directory (default /workspace)")
	network := fset.String("network", "", "the sandbox's network: none (default) or host (if the daemon allows it)")
	timeout := fset.String("timeout", "", "stop the command after this long (e.g. 30s)")
	verbose := fset.Bool("v", false, "say on stderr which backend ran the command, why, and how it ended")
	var env listFlag
	fset.Var(&env, "env", "KEY=VALUE for the command's environment (repeatable)")
	pos, err := parse(fset, args, stdout)
	if err != nil {
		return err
	}
	if *mount == "" {
		return usageErr("missing -w MOUNTPOINT")
	}
	if len(pos) == 0 {
		return usageErr("missing COMMAND, as in: computerfs exec -w %s -- 'ls -l'", *mount)
	}
	req := computerfs.ExecRequest{Command: strings.Join(pos, " "), Backend: *backend, Cwd: *cwd, Env: env, Timeout: *timeout, Network: *network}
	if !term.IsTerminal(int(os.Stdin.Fd())) {
		if req.Stdin, err = io.ReadAll(io.LimitReader(os.Stdin, 16<<20)); err != nil {
			return err
		}
	}
	c, err := computerfs.Dial(*mount)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	res, err := c.Exec(ctx, req, stdout, stderr)
	if err != nil {
		return err
	}
	if *verbose {
		fmt.Fprintf(stderr, "computerfs exec: backend %s (%s), exit %d, %d ms", res.Backend, res.Why, res.ExitCode, res.DurationMs)
		if res.Warm {
			fmt.Fprint(stderr, ", warm")
		}
		if res.PeakMemory > 0 {
			fmt.Fprintf(stderr, ", peak memory %d KiB, CPU %d ms", res.PeakMemory>>10, res.CPUTimeMs)
		}
		fmt.Fprintf(stderr, ", request %s\n", res.Request)
	}
	if res.Stopped != "" {
		fmt.Fprintf(stderr, "computerfs exec: stopped: %s\n", res.Stopped)
	}
	if res.ExitCode != 0 {
		return &exitError{res.ExitCode, errSilent}
	}
	return nil
}

// errSilent ends the program with a status and no message (the command
// said what it had to).
var errSilent = errors.New("")
