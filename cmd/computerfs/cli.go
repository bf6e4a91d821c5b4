package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/computerfs/computerfs"
	"github.com/computerfs/computerfs/internal/execcli"
	"github.com/computerfs/computerfs/internal/textsafe"
)

// A command of the CLI: its help starts with the summary and the example.
type command struct {
	name    string
	args    string // after "computerfs NAME"
	summary string // one line, lower case, no period
	example string // one or more lines, each a command
	details string // optional paragraphs after the usage line
	run     func(args []string, stdout, stderr io.Writer) error
}

// commands in the order the overall help lists them (set in init: the
// help command refers to the list).
var commands []*command

func init() {
	commands = []*command{
		{name: "mount", args: "[flags] --store DIR [--spec FILE] MOUNTPOINT", run: cmdMount,
			summary: "mount the workspace kept in a store (importing a spec's sources into a new store first)",
			example: "computerfs mount --background --spec ws.yaml --store /var/lib/computerfs/ws /mnt/ws",
			details: "With --spec, a new store is populated from the spec's sources first; a store imported already\n" +
				"is mounted as it is. With --background, the daemon detaches and its pid is printed once the\n" +
				"mount answers. A MOUNTPOINT that is not empty is mounted over (its files are hidden, not\n" +
				"touched, until the unmount), with a warning."},
		{name: "import", args: "--spec FILE --store DIR", run: cmdImport,
			summary: "populate a new store from a spec, without mounting it",
			example: "computerfs import --spec ws.yaml --store /var/lib/computerfs/ws"},
		{name: "status", args: "-w MOUNTPOINT | --store DIR", run: cmdStatus,
			summary: "show a workspace's daemon, agent, usage and sources (and their sync state)",
			example: "computerfs status -w /mnt/ws\ncomputerfs status --store /var/lib/computerfs/ws",
			details: "--store works on a store that is not mounted too (it is opened here; not while an import\n" +
				"or fsck holds it); a mounted one is asked through its daemon."},
		{name: "sync", args: "-w MOUNTPOINT", run: cmdSync,
			summary: "write back everything pending now (exit 1 on errors or conflicts)",
			example: "computerfs sync -w /mnt/ws"},
		{name: "refresh", args: "-w MOUNTPOINT | --store DIR", run: cmdRefresh,
			summary: "bring upstream changes into untouched paths (exit 3: some paths kept for their local edits)",
			example: "computerfs refresh -w /mnt/ws"},
		{name: "log", args: "-w MOUNTPOINT | --store DIR [--since S] [--path P] [--json] [--follow] [--tools]", run: cmdLog,
			summary: "print the journal of changes, or with --tools the audit of agent tool calls",
			example: "computerfs log -w /mnt/ws --since 10m --path /repo\ncomputerfs log -w /mnt/ws --tools --follow"},
		{name: "exec", args: execcli.Args, run: cmdExec, summary: execcli.Summary, example: execcli.Example, details: execcli.Details},
		{name: "mcp", args: "-w MOUNTPOINT [--listen ADDR]", run: cmdMCP,
			summary: "serve the agent tools over MCP (stdio, or streamable HTTP with a bearer token)",
			example: "computerfs mcp -w /mnt/ws\ncomputerfs mcp -w /mnt/ws --listen 127.0.0.1:8765",
			details: "Plain HTTP is served on loopback addresses only, unless --insecure-http; elsewhere give\n" +
				"--tls-cert and --tls-key."},
		{name: "snapshot", args: "-w MOUNTPOINT | --store DIR [--delete] [NAME]", run: cmdSnapshot,
			summary: "take a consistent snapshot of a mounted workspace (no NAME: list them; --delete NAME)",
			example: "computerfs snapshot -w /mnt/ws before-refactor\ncomputerfs snapshot -w /mnt/ws",
			details: "A snapshot is a point in the sequence of the workspace's operations, files being written\n" +
				"included, kept in the store; it costs the disk of what changes after it. --store works on\n" +
				"a store that is not mounted (opened here to take or delete one)."},
		{name: "fork", args: "-w MOUNTPOINT | --src STORE [--from NAME] --store DIR", run: cmdFork,
			summary: "make a new independent store from a workspace's snapshot or current state",
			example: "computerfs fork -w /mnt/ws --from before-refactor --store /var/lib/computerfs/ws-try1",
			details: "The fork shares unchanged data with its parent (copy-on-write), has an agent identity of its\n" +
				"own, and is mounted with computerfs mount --store DIR."},
		{name: "rollback", args: "(-w MOUNTPOINT | --store DIR) NAME", run: cmdRollback,
			summary: "put a workspace back to one of its snapshots",
			example: "computerfs rollback -w /mnt/ws before-refactor",
			details: "The files become the snapshot's; the journal goes on with a rollback record (sync back then\n" +
				"compares every file with the remote), and the audit, spec, sync state and snapshots stay.\n" +
				"Mounted (-w): files programs still have open fail with EIO; new opens see the snapshot."},
		{name: "undo", args: "-w MOUNTPOINT [--list] [CALL | @SEQ]", run: cmdUndo,
			summary: "go back to before an agent's call (the policy's checkpoint: each-call)",
			example: "computerfs undo -w /mnt/ws\ncomputerfs undo -w /mnt/ws 42\ncomputerfs undo -w /mnt/ws --list",
			details: "With no argument: before the last call that changed something (again: one call further).\n" +
				"CALL is a tool call's id as computerfs log --tools shows it; @SEQ a checkpoint from --list.\n" +
				"It is a rollback to that checkpoint: newer checkpoints stay, so an undo can be undone."},
		{name: "unmount", args: "[--timeout D] MOUNTPOINT", run: cmdUnmount,
			summary: "unmount a workspace and wait for its daemon to close the store (also: umount)",
			example: "computerfs unmount /mnt/ws"},
		{name: "hibernate", args: "-w MOUNTPOINT | --store DIR [--to s3://BUCKET/PREFIX] [--keep-local]", run: cmdHibernate,
			summary: "unmount a workspace, write it to S3 (incrementally) and free it locally",
			example: "computerfs hibernate -w /mnt/ws --to s3://workspaces/ws1 --endpoint http://10.0.0.5:7070",
			details: "Only what the image in S3 lacks is uploaded; its manifest is written last, so an image is whole\n" +
				"or the previous one stands. Refused while another host holds the workspace's lease."},
		{name: "resume", args: "s3://BUCKET/PREFIX --store DIR [mount flags] MOUNTPOINT", run: cmdResume,
			summary: "take a hibernated workspace's lease, download and verify it into a new store, and mount it (its blobs follow in the background; --eager: before the mount)",
			example: "computerfs resume s3://workspaces/ws1 --store /var/lib/computerfs/ws1 --background /mnt/ws",
			details: "Takes every flag of computerfs mount too. Refused while another host holds the lease (until it\n" +
				"hibernates, or the lease expires); an image that is incomplete, corrupt or of another format is\n" +
				"refused and nothing is left at DIR."},
		{name: "fsck", args: "--store DIR [--max N]", run: cmdFsck,
			summary: "check a store's consistency (not while it is mounted)",
			example: "computerfs fsck --store /var/lib/computerfs/ws"},
		{name: "bench", args: "[flags] NAME=DIR...", run: cmdBenchMain,
			summary: "benchmark directories against each other (file system workloads)",
			example: "computerfs bench --quick disk=/var/tmp/b computerfs=/mnt/ws/b"},
		{name: "version", args: "", run: cmdVersion,
			summary: "print the version of this build (module version, commit, Go version)",
			example: "computerfs version"},
		{name: "help", args: "[COMMAND]", run: cmdHelp,
			summary: "list the commands, or show one command's help",
			example: "computerfs help mount"},
	}
}

// aliases are other names of commands.
var aliases = map[string]string{"umount": "unmount"}

func lookup(name string) *command {
	if a, ok := aliases[name]; ok {
		name = a
	}
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// overview is the help of computerfs itself: one line per command.
func overview(w io.Writer) {
	fmt.Fprint(w, "computerfs: a durable workspace file system for agents\n\nUsage:\n  computerfs COMMAND [flags] [arguments]\n\nCommands:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, "\nRun 'computerfs help COMMAND' or 'computerfs COMMAND -h' for a command's usage, example and flags.\n")
}

// help prints a command's help: its summary, its example, its usage, the
// details and its flags (fset may be nil).
func (c *command) help(w io.Writer, fset *flag.FlagSet) {
	fmt.Fprintf(w, "computerfs %s: %s\n\nExample:\n", c.name, c.summary)
	for _, l := range strings.Split(c.example, "\n") {
		fmt.Fprintf(w, "  %s\n", l)
	}
	fmt.Fprintf(w, "\nUsage:\n  %s\n", strings.TrimSpace("computerfs "+c.name+" "+c.args))
	if c.details != "" {
		fmt.Fprintf(w, "\n%s\n", c.details)
	}
	if fset == nil {
		return
	}
	// The flags but the internal ones (as --ready-fd, between the
	// command and itself).
	shown := flag.NewFlagSet(fset.Name(), flag.ContinueOnError)
	fset.VisitAll(func(f *flag.Flag) {
		if !strings.HasPrefix(f.Usage, "internal:") {
			shown.Var(f.Value, f.Name, f.Usage)
			shown.Lookup(f.Name).DefValue = f.DefValue
		}
	})
	n := 0
	shown.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprint(w, "\nFlags:\n")
		shown.SetOutput(w)
		shown.PrintDefaults()
	}
}

// newFlags returns a flag set for command name that prints nothing
// itself: parse reports its errors, once, and prints its help on -h.
func newFlags(name string) *flag.FlagSet {
	fset := flag.NewFlagSet(name, flag.ContinueOnError)
	fset.SetOutput(io.Discard)
	fset.Usage = func() {}
	return fset
}

// errHelpShown: the command's help was printed, as asked (exit 0).
var errHelpShown = errors.New("help shown")

// parse parses a command's flags, which may come before or after its
// positional arguments. On -h or --help it prints the command's help on
// stdout and returns errHelpShown; a bad flag is a usage error.
func parse(fset *flag.FlagSet, args []string, stdout io.Writer) ([]string, error) {
	pos, err := parseInterleaved(fset, args)
	if errors.Is(err, flag.ErrHelp) {
		lookup(fset.Name()).help(stdout, fset)
		return nil, errHelpShown
	}
	if err != nil {
		return nil, usageErr("%s", err.Error())
	}
	return pos, nil
}

// usageError is a bad flag, a missing or extra argument: exit 2, with a
// pointer to the command's help.
type usageError struct {
	msg string
	see string // the help to point to, if not the command's
}

func (e *usageError) Error() string { return e.msg }

func usageErr(format string, a ...any) error { return &usageError{msg: fmt.Sprintf(format, a...)} }

// needArgs checks the positional arguments against what a command takes.
func needArgs(pos []string, names ...string) error {
	if len(pos) < len(names) {
		return usageErr("missing %s", names[len(pos)])
	}
	if len(pos) > len(names) {
		return usageErr("unexpected argument %q", pos[len(names)])
	}
	return nil
}

// cmdError is an error of command name.
type cmdError struct {
	name string
	err  error
}

func (e *cmdError) Error() string { return e.err.Error() }
func (e *cmdError) Unwrap() error { return e.err }

// run runs the command that args name, with its arguments.
func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		overview(stderr)
		return &exitError{2, errSilent}
	}
	switch args[0] {
	case "-h", "-help", "--help":
		overview(stdout)
		return nil
	}
	c := lookup(args[0])
	if c == nil {
		return unknownCommand(args[0])
	}
	if err := c.run(args[1:], stdout, stderr); err != nil {
		if errors.Is(err, errHelpShown) {
			return nil
		}
		return &cmdError{c.name, err}
	}
	return nil
}

func unknownCommand(name string) error {
	msg := fmt.Sprintf("unknown command %q", textsafe.Text(name))
	if s := suggest(name); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return &usageError{msg: msg, see: "computerfs help"}
}

func cmdHelp(args []string, stdout, stderr io.Writer) error {
	pos, err := parse(newFlags("help"), args, stdout)
	if err != nil {
		return err
	}
	switch len(pos) {
	case 0:
		overview(stdout)
		return nil
	case 1:
		c := lookup(pos[0])
		if c == nil {
			return unknownCommand(pos[0])
		}
		// The command prints its own help, flags included.
		err := c.run([]string{"-h"}, stdout, stderr)
		if errors.Is(err, errHelpShown) {
			return nil
		}
		return err
	}
	return usageErr("unexpected argument %q", pos[1])
}

// cmdBenchMain runs bench, whose package has flags and help of its own:
// its help follows the summary and example every command's starts with.
func cmdBenchMain(args []string, stdout, _ io.Writer) error {
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-h" || a == "-help" || a == "--help" {
			c := lookup("bench")
			fmt.Fprintf(stdout, "computerfs bench: %s\n\nExample:\n  %s\n\n", c.summary, c.example)
			cmdBench([]string{"-h"}, stdout)
			return errHelpShown
		}
	}
	return cmdBench(args, stdout)
}

// report turns run's error into the message printed on stderr (empty:
// none) and the exit status.
func report(err error) (string, int) {
	if err == nil {
		return "", 0
	}
	prefix, help := "computerfs", "computerfs help"
	var ce *cmdError
	if errors.As(err, &ce) {
		prefix, help = "computerfs "+ce.name, "computerfs "+ce.name+" -h"
	}
	code := 1
	var ee *exitError
	var ue *usageError
	switch {
	case errors.As(err, &ue):
		code = 2
	case errors.As(err, &ee):
		code = ee.code
	}
	if errors.Is(err, errSilent) {
		return "", code
	}
	msg := prefix + ": " + textsafe.Text(err.Error())
	if ue != nil && ue.see != "" {
		help = ue.see
	}
	if ue != nil || (ee != nil && ee.code == 2) {
		msg += "; see '" + help + "'"
	}
	return msg, code
}

// suggest returns the command nearest to a mistyped name, if one is near
// enough: at most two edits (a swap of two neighbours is one), and fewer
// than the name has letters.
func suggest(name string) string {
	best, bestD := "", 3
	for _, c := range commands {
		for _, n := range append([]string{c.name}, aliasesOf(c.name)...) {
			if d := editDistance(name, n); d < bestD && d < len(name) {
				best, bestD = c.name, d
			}
		}
	}
	return best
}

func aliasesOf(name string) []string {
	var out []string
	for a, n := range aliases {
		if n == name {
			out = append(out, a)
		}
	}
	return out
}

// editDistance is the optimal string alignment distance of a and b:
// insertions, deletions, substitutions and swaps of adjacent bytes. The
// names compared are short (a mistyped name is cut at 64 bytes).
func editDistance(a, b string) int {
	if len(a) > 64 {
		a = a[:64]
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// oneOf checks that exactly one of -w MOUNTPOINT and --store DIR is given.
func oneOf(mount, store string) error {
	switch {
	case mount == "" && store == "":
		return usageErr("missing -w MOUNTPOINT or --store DIR")
	case mount != "" && store != "":
		return usageErr("give -w MOUNTPOINT or --store DIR, not both")
	}
	return nil
}

// mountedAdvice adds what to do to an error that says the store is
// mounted: advice(mountpoint).
func mountedAdvice(err error, advice func(mp string) string) error {
	var me *computerfs.StoreMountedError
	if errors.As(err, &me) {
		return fmt.Errorf("%w: %s", err, advice(me.Mountpoint))
	}
	return err
}

func useW(mp string) string { return "use -w " + mp }
