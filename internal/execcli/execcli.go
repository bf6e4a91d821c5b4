// Package execcli is the exec command of the command line: its flags, and
// running a command through the workspace's control socket. Both
// `computerfs exec` and the thin client `computerfs-exec` (the same
// command in a binary of a few megabytes that starts in a few
// milliseconds) are this package, so they take the same flags and answer
// alike. It imports nothing of the daemon.
package execcli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"golang.org/x/term"

	"github.com/computerfs/computerfs/internal/execwire"
	"github.com/computerfs/computerfs/internal/textsafe"
)

// The command's help, as `computerfs help exec` shows it.
const (
	Args    = "-w MOUNTPOINT [flags] -- 'COMMAND'"
	Summary = "run a shell command in the workspace's daemon, on the store (or in its sandbox)"
	Example = "computerfs exec -w /mnt/ws -- 'cd /workspace/repo && go test ./...'"
	Details = "The exit status is the command's. Standard input is passed on when it is not a terminal."
)

// Flags are the command's flags.
type Flags struct {
	mount, backend, cwd, network, timeout *string
	verbose                               *bool
	env                                   listFlag
}

// listFlag collects a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// Define defines the command's flags in fset.
func Define(fset *flag.FlagSet) *Flags {
	f := &Flags{
		mount:   fset.String("w", "", "the workspace's mount point"),
		backend: fset.String("backend", "auto", "shell (in the daemon, on the store), sandbox, or auto (shell when every command is built in)"),
		cwd:     fset.String("cwd", "", "working directory (default /workspace)"),
		network: fset.String("network", "", "the sandbox's network: none (default) or host (if the daemon allows it)"),
		timeout: fset.String("timeout", "", "stop the command after this long (e.g. 30s)"),
		verbose: fset.Bool("v", false, "say on stderr which backend ran the command, why, and how it ended"),
	}
	fset.Var(&f.env, "env", "KEY=VALUE for the command's environment (repeatable)")
	return f
}

// UsageError is a missing flag or argument (exit 2).
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// ExitStatus is a command's exit status other than 0: the program ends
// with it, saying nothing (the command said what it had to).
type ExitStatus int

func (e ExitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// Run runs the command that the flags and the positional arguments (pos)
// give. Its output goes to stdout and stderr as it comes; stdin is passed
// on unless it is a terminal. SIGINT and SIGTERM stop the command.
// MaxStdin is how much standard input a command may be given: it travels
// in the request. More is refused, never cut.
const MaxStdin = 16 << 20

func Run(f *Flags, pos []string, stdin *os.File, stdout, stderr io.Writer) error {
	if *f.mount == "" {
		return &UsageError{"missing -w MOUNTPOINT"}
	}
	if len(pos) == 0 {
		return &UsageError{fmt.Sprintf("missing COMMAND, as in: computerfs exec -w %s -- 'ls -l'", *f.mount)}
	}
	req := execwire.Request{Command: strings.Join(pos, " "), Backend: *f.backend, Cwd: *f.cwd, Env: f.env, Timeout: *f.timeout, Network: *f.network}
	if !term.IsTerminal(int(stdin.Fd())) {
		var err error
		if req.Stdin, err = io.ReadAll(io.LimitReader(stdin, MaxStdin+1)); err != nil {
			return err
		}
		if len(req.Stdin) > MaxStdin { // never a command that reads part of it as if whole
			return fmt.Errorf("standard input is over %d MiB: write it to a file in the workspace and redirect from it", MaxStdin>>20)
		}
	}
	c, err := execwire.Dial(*f.mount)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	res, err := c.Exec(ctx, req, stdout, stderr)
	if err != nil {
		return err
	}
	if *f.verbose {
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
		return ExitStatus(res.ExitCode)
	}
	return nil
}

// ParseInterleaved parses flags that may come before or after positional
// arguments ("mount MNT --store DIR" as well as "mount --store DIR MNT");
// "--" ends the flags: what follows is positional even if it looks like a
// flag (`exec -w MNT -- grep -v x` runs `grep -v x`).
func ParseInterleaved(fset *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		// Parse only the flags up to the first positional argument or
		// "--": fset.Parse would take a "--" as the end of the flags and
		// drop it, and the next round would parse flags after it.
		n := leadingFlags(fset, args)
		if err := fset.Parse(args[:n]); err != nil {
			return nil, err
		}
		args = args[n:]
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// leadingFlags returns how many of args are flags (with their values)
// before the first positional argument or "--", as fset.Parse reads
// them; an undefined flag ends them (Parse fails on it).
func leadingFlags(fset *flag.FlagSet, args []string) int {
	i := 0
	for i < len(args) {
		s := args[i]
		if s == "--" || len(s) < 2 || s[0] != '-' {
			return i
		}
		i++
		name := strings.TrimPrefix(s[1:], "-")
		if strings.Contains(name, "=") {
			continue
		}
		f := fset.Lookup(name)
		if f == nil {
			return i
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			continue
		}
		if i < len(args) {
			i++ // the flag's value
		}
	}
	return i
}

// Main is the thin client's program: `computerfs-exec ARGS` is
// `computerfs exec ARGS`, with the same output, messages and exit status.
// It returns the exit status.
func Main(args []string, stdin *os.File, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("exec", flag.ContinueOnError)
	fset.SetOutput(io.Discard)
	fset.Usage = func() {}
	f := Define(fset)
	pos, err := ParseInterleaved(fset, args)
	if errors.Is(err, flag.ErrHelp) {
		help(stdout, fset)
		return 0
	}
	if err != nil {
		err = &UsageError{err.Error()}
	} else {
		err = Run(f, pos, stdin, stdout, stderr)
	}
	var ue *UsageError
	var es ExitStatus
	switch {
	case err == nil:
		return 0
	case errors.As(err, &es):
		return int(es)
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "computerfs exec: %s; see 'computerfs exec -h'\n", textsafe.Text(err.Error()))
		return 2
	}
	fmt.Fprintf(stderr, "computerfs exec: %s\n", textsafe.Text(err.Error()))
	return 1
}

// help prints the thin client's help: the command's, under its own name.
func help(w io.Writer, fset *flag.FlagSet) {
	fmt.Fprintf(w, "computerfs-exec: %s\n\nExample:\n  %s\n\nUsage:\n  computerfs-exec %s\n\n%s\n"+
		"computerfs-exec is computerfs exec in a small binary that starts faster.\n\nFlags:\n",
		Summary, strings.Replace(Example, "computerfs exec", "computerfs-exec", 1), Args, Details)
	fset.SetOutput(w)
	fset.PrintDefaults()
}
