package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
)

const usage = `usage: computerfs bench [flags] NAME=DIR...

Runs computerfs's benchmarks in each DIR (fresh subdirectories of it,
removed afterwards) and prints, per benchmark, the median of a few runs for
each target and its ratio to the target named "disk", as a Markdown table
(or JSON with --json). Progress goes to stderr. Needs root to drop the page
cache before cold reads, and gcc for the syscall-level benchmarks.

Example:
  computerfs bench --pid computerfs=1234 --ratio computerfs/loopback \
      tmpfs=/mnt/tmpfs disk=/var/tmp/b loopback=/mnt/lb computerfs=/mnt/cfs

Flags (anywhere among the targets):
`

// Main is the `computerfs bench` command: it parses args (flags and
// NAME=DIR targets, in any order), runs the benchmarks and writes the
// report to stdout. Progress goes to stderr. It returns an error if the
// run could not be done or if some benchmark failed on some target (the
// report is written all the same).
func Main(args []string, stdout io.Writer) error {
	fset := flag.NewFlagSet("bench", flag.ContinueOnError)
	fset.SetOutput(io.Discard)
	reps := fset.Int("reps", 5, "repetitions per benchmark and target (slow benchmarks do at most 3)")
	quick := fset.Bool("quick", false, "small sizes, to check the harness in seconds")
	asJSON := fset.Bool("json", false, "print JSON instead of Markdown")
	jsonFile := fset.String("json-file", "", "also write the JSON report to this file")
	baseline := fset.String("baseline", "disk", "name of the target the others are compared to")
	run := fset.String("run", "", "run only the benchmarks whose name matches this regexp")
	timeout := fset.Duration("timeout", 0, "limit for one run of one benchmark on one target (default 10m)")
	budget := fset.Duration("budget", 0, "skip a benchmark's remaining runs on a target once it took this long there (default 2m)")
	workDir := fset.String("workdir", "", "where to make fixtures, on a disk outside the targets (default /var/tmp)")
	list := fset.Bool("list", false, "list the benchmarks and exit")
	quiet := fset.Bool("q", false, "no progress on stderr")
	var compare []Pair
	fset.Func("ratio", "also report the ratio `A/B` of two targets (repeatable), e.g. computerfs/loopback", func(s string) error {
		a, b, ok := strings.Cut(s, "/")
		if !ok || a == "" || b == "" {
			return fmt.Errorf("want A/B, got %q", s)
		}
		compare = append(compare, Pair{Target: a, Base: b})
		return nil
	})
	pids := map[string]int{}
	fset.Func("pid", "`NAME=PID` of the process serving target NAME, for its peak RSS (repeatable)", func(s string) error {
		name, v, ok := strings.Cut(s, "=")
		pid, err := strconv.Atoi(v)
		if !ok || name == "" || err != nil || pid <= 0 {
			return fmt.Errorf("want NAME=PID, got %q", s)
		}
		pids[name] = pid
		return nil
	})

	// Flags and targets may come in any order.
	var positional []string
	for {
		if err := fset.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				printUsage(stdout, fset)
				return nil
			}
			return &UsageError{err.Error()}
		}
		if fset.NArg() == 0 {
			break
		}
		positional = append(positional, fset.Arg(0))
		args = fset.Args()[1:]
	}

	if *list {
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		for _, b := range Benchmarks(SizesFor(*quick)) {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", b.Name, b.Unit, b.Desc)
		}
		return tw.Flush()
	}

	var targets []Target
	for _, p := range positional {
		name, dir, ok := strings.Cut(p, "=")
		if !ok || name == "" || dir == "" {
			return &UsageError{fmt.Sprintf("want NAME=DIR, got %q", p)}
		}
		targets = append(targets, Target{Name: name, Dir: dir, PID: pids[name]})
		delete(pids, name)
	}
	if len(targets) == 0 {
		return &UsageError{"missing NAME=DIR..."}
	}
	for name := range pids {
		return &UsageError{fmt.Sprintf("--pid %s: no such target", name)}
	}

	opts := Options{
		Reps:     *reps,
		Quick:    *quick,
		Baseline: *baseline,
		Compare:  compare,
		Timeout:  *timeout,
		Budget:   *budget,
		WorkDir:  *workDir,
		Log:      os.Stderr,
	}
	if *quiet {
		opts.Log = nil
	}
	if *run != "" {
		re, err := regexp.Compile(*run)
		if err != nil {
			return &UsageError{fmt.Sprintf("--run: %v", err)}
		}
		opts.Run = re
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, runErr := Run(ctx, targets, opts)
	if len(rep.Results) == 0 {
		if runErr == nil {
			runErr = errors.New("bench: no results")
		}
		return runErr
	}
	if *jsonFile != "" {
		f, err := os.Create(*jsonFile)
		if err != nil {
			return err
		}
		err = rep.WriteJSON(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	var err error
	if *asJSON {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteMarkdown(stdout)
	}
	if runErr != nil {
		return runErr
	}
	if err != nil {
		return err
	}
	if failed := rep.Failed(); len(failed) > 0 {
		return fmt.Errorf("bench: %d benchmark runs failed:\n  %s", len(failed), strings.Join(failed, "\n  "))
	}
	return nil
}

// UsageError is a bad flag or argument of Main.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

func printUsage(w io.Writer, fset *flag.FlagSet) {
	fmt.Fprint(w, usage)
	fset.SetOutput(w)
	fset.PrintDefaults()
	fset.SetOutput(io.Discard)
}
