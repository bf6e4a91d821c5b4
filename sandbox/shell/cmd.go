package shell

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
)

// cmd is one run of a built-in command.
type cmd struct {
	ctx    context.Context
	r      *run
	hc     interp.HandlerContext
	name   string
	args   []string // args[0] is the name
	dir    string
	env    expand.Environ
	stdin  io.Reader
	out    *bufio.Writer // buffered stdout of a built-in
	stdout io.Writer     // what out writes to
	stderr io.Writer
	held   int64 // bytes charged to the call's memory budget (see grow)
}

type cmdFunc func(c *cmd) int

// A command is one built-in program of the fast path, as its file
// (cmd_<name>.go) registers it. The same descriptor runs it and routes it:
// CanRun sends a command line that run would not take as the real tool
// does to the sandbox, and a test walks the table to check that every
// option a command does not implement is routed so.
type command struct {
	names []string // the name and its aliases (grep, egrep, fgrep)
	run   cmdFunc
	// opts are the options run implements, in parseOpts' notation:
	// shorts like "n:c:qv" and longs like "lines=", "follow?" or
	// "quiet". c.flags parses with them; CanRun routes a command line
	// with any other option, or that they do not parse, to the sandbox.
	// A command that parses its own arguments lists what it takes here
	// too (for the test) and says how in check.
	opts optSpec
	// ignored are options of opts (a letter or a long name) that run
	// takes and does not implement (sort -M, ls -C): CanRun routes them
	// to the sandbox, which has them. (--color is routed unless its value
	// makes no colours, for every command.)
	ignored []string
	// ownArgs: run parses its arguments itself (seq's negative numbers,
	// find's expression, awk's program...), so CanRun does not parse
	// them with opts, and check must route every option that run does
	// not take.
	ownArgs bool
	// check, if set, says why the fast path cannot run this form of the
	// command, or "", after opts found its options good (a word
	// computed at run time is "" in args).
	check func(args []string) string
}

// optSpec is a command's options in parseOpts' notation.
type optSpec struct {
	shorts string
	longs  []string
}

func opts(shorts string, longs ...string) optSpec { return optSpec{shorts, longs} }

// parse parses args under s as CanRun does (long names in full only: an
// abbreviation unique among the fast path's options may be ambiguous, or
// another option, among the real tool's), and says why the fast path
// cannot run them: an option that s does not have, that does not parse
// (a value missing), or that is among ignored, is the real tool's.
func (s optSpec) parse(name string, args []string, ignored []string) ([]opt, string) {
	opts, _, err := parseOptsIn(args, true, s.shorts, s.longs...)
	if err != nil {
		return nil, fmt.Sprintf("%s: %v: the option is not built in", name, err)
	}
	for _, o := range opts {
		dash := "-"
		if len(o.name) > 1 {
			dash = "--"
		}
		if slices.Contains(ignored, o.name) {
			return nil, fmt.Sprintf("%s %s%s is not built in (the fast path would ignore it)", name, dash, o.name)
		}
		if (o.name == "color" || o.name == "colour") && !noColor(o.val) {
			return nil, fmt.Sprintf("%s --%s=%s: colours are not built in", name, o.name, o.val)
		}
	}
	return opts, ""
}

// noColor reports whether the value of a --color option makes no colours
// when the output is not a terminal, as it never is here.
func noColor(v string) bool {
	switch v {
	case "never", "no", "none", "auto", "tty", "if-tty":
		return true
	}
	return false
}

// route says why the fast path cannot run the command with args, or "".
func (d *command) route(name string, args []string) string {
	if !d.ownArgs {
		if _, why := d.opts.parse(name, args, d.ignored); why != "" {
			return why
		}
	}
	if d.check != nil {
		return d.check(args)
	}
	return ""
}

// builtins are the commands of the fast path by name, besides the
// interpreter's own (echo, printf, test, cd, pwd, true, false, read...).
var builtins map[string]*command

func register(d *command) {
	if builtins == nil {
		builtins = map[string]*command{}
	}
	for _, n := range d.names {
		if builtins[n] != nil {
			panic("shell: command registered twice: " + n)
		}
		builtins[n] = d
	}
}

// IsBuiltin reports whether name is a command the fast path runs: one of
// its built-in programs or a builtin of the interpreter.
func IsBuiltin(name string) bool {
	_, ok := builtins[name]
	return ok || interp.IsBuiltin(name)
}

// Builtins lists the fast path's own commands.
func Builtins() []string {
	out := make([]string, 0, len(builtins))
	for n := range builtins {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// commandName maps /usr/bin/ls and friends to ls.
func commandName(arg string) string {
	for _, dir := range []string{"/usr/local/sbin/", "/usr/local/bin/", "/usr/sbin/", "/usr/bin/", "/sbin/", "/bin/"} {
		if n, ok := strings.CutPrefix(arg, dir); ok && !strings.Contains(n, "/") {
			if _, ok := builtinPath(n); ok {
				return n
			}
		}
	}
	return arg
}

func (r *run) execMiddleware(next interp.ExecHandlerFunc) interp.ExecHandlerFunc {
	return func(ctx context.Context, args []string) (err error) {
		if args[0] == noopCmd { // a guard that let its statement be
			return nil
		}
		hc := interp.HandlerCtx(ctx)
		if err := context.Cause(ctx); err != nil && ctx.Err() != nil {
			return err
		}
		r.inflight.add()
		defer r.inflight.done()
		if ctx.Err() != nil { // ended meanwhile: Exec may be waiting already
			return context.Cause(ctx)
		}
		name := commandName(args[0])
		c := &cmd{ctx: ctx, r: r, hc: hc, name: name, args: append([]string{name}, args[1:]...),
			dir: hc.Dir, env: hc.Env, stdin: hc.Stdin, stdout: hc.Stdout, stderr: hc.Stderr}
		if c.stdin == nil {
			c.stdin = strings.NewReader("")
		}
		c.stdin = stoppableReader{c.stdin, ctx}
		var stdout io.Writer = hc.Stdout
		if sb, ok := stdout.(*strings.Builder); ok {
			// inside $(...): what is written stays in memory
			stdout = captureWriter{sb, c, r.mem.guards.splitOf(sb), r.mem.guards.patOf(sb)}
			c.stdout = stdout
		}
		c.out = bufio.NewWriterSize(stdout, 32<<10)
		defer c.release()
		var code int
		defer func() {
			// A bug in a built-in that an agent can trigger must fail
			// the command, not end the daemon.
			if p := recover(); p != nil {
				fmt.Fprintf(c.stderr, "%s: internal error: %v\n", name, p)
				err = interp.NewExitStatus(2)
			}
		}()
		switch name {
		case typeCmd:
			code = r.typeBuiltin(c)
		case errorCmd:
			fmt.Fprintln(c.stderr, c.args[2])
			code = 1
			fmt.Sscan(c.args[1], &code)
		case mkpipeCmd:
			code = r.mkpipe(c)
		case printfCmd:
			code = cmdPrintf(c)
		case readArrayCmd:
			code = r.readArray(c)
		case unsupportedCmd:
			fmt.Fprintf(c.stderr, "bash: %s is not supported by the shell fast path\n", c.args[1])
			code = 2
		default:
			d, ok := builtins[name]
			if !ok {
				if strings.Contains(args[0], "/") {
					code = c.execPath(args)
					break
				}
				code = c.notFound(args[0])
				break
			}
			code = d.run(c)
		}
		if err := c.out.Flush(); err != nil && code == 0 {
			if err != errOutputLimit && errno(err) != syscall.EPIPE {
				fmt.Fprintf(c.stderr, "%s: write error: %s\n", name, errText(err))
			}
			code = 1
		}
		if code != 0 {
			return interp.NewExitStatus(uint8(code))
		}
		return nil
	}
}

// notFound is what running a command that is not built in gives.
func (c *cmd) notFound(arg string) int {
	if !strings.Contains(arg, "/") {
		fmt.Fprintf(c.stderr, "%s: %s: command not found\n", c.bashWhere(), arg)
		return 127
	}
	fi, err := c.stat(arg)
	switch {
	case err != nil:
		fmt.Fprintf(c.stderr, "%s: %s: %s\n", c.bashWhere(), arg, errText(err))
		return 127
	case fi.IsDir():
		fmt.Fprintf(c.stderr, "%s: %s: Is a directory\n", c.bashWhere(), arg)
		return 126
	default:
		fmt.Fprintf(c.stderr, "bash: %s: cannot execute: programs and scripts do not run on the shell fast path\n", arg)
		return 126
	}
}

// run runs another command (xargs, find -exec) with the given streams.
func (c *cmd) run(args []string, stdin io.Reader, stdout io.Writer) int {
	name := commandName(args[0])
	if d, ok := builtins[name]; ok {
		sub := &cmd{ctx: c.ctx, r: c.r, hc: c.hc, name: name, args: append([]string{name}, args[1:]...),
			dir: c.dir, env: c.env, stdin: stdin, stdout: stdout, stderr: c.stderr}
		sub.out = bufio.NewWriterSize(stdout, 32<<10)
		code := d.run(sub)
		sub.out.Flush()
		sub.release()
		return code
	}
	if c.ctx.Err() != nil {
		return 1
	}
	switch name {
	case "echo", "printf", "true", "false", "test", "[", "pwd", ":":
		sub := &cmd{ctx: c.ctx, r: c.r, hc: c.hc, name: name, args: args, dir: c.dir, env: c.env,
			stdin: stdin, stderr: c.stderr, out: bufio.NewWriter(stdout)}
		code := simpleBuiltin(sub)
		sub.out.Flush()
		return code
	}
	if strings.Contains(args[0], "/") {
		sub := &cmd{ctx: c.ctx, r: c.r, hc: c.hc, name: name, args: args, dir: c.dir, env: c.env,
			stdin: stdin, stdout: stdout, stderr: c.stderr, out: bufio.NewWriter(stdout)}
		return sub.execPath(args)
	}
	return c.notFound(args[0])
}

// errorf prints "name: message" to stderr.
func (c *cmd) errorf(format string, a ...any) {
	c.out.Flush()
	fmt.Fprintf(c.stderr, "%s: %s\n", c.name, fmt.Sprintf(format, a...))
}

// usage is errorf for a wrong command line: GNU adds a line that
// points to --help.
func (c *cmd) usage(format string, a ...any) {
	c.errorf(format, a...)
	fmt.Fprintf(c.stderr, "Try '%s --help' for more information.\n", c.name)
}

// fail reports an error about a file: "name: file: No such file or directory".
func (c *cmd) fail(file string, err error) {
	c.errorf("%s: %s", file, errText(err))
}

// canceled reports whether the script is being stopped.
func (c *cmd) canceled() bool { return c.ctx.Err() != nil }

func (c *cmd) abs(p string) string { return absPath(c.dir, p) }

func (c *cmd) stat(p string) (*fileInfo, error) {
	if fi, ok := c.r.pipeInfo(c.abs(p)); ok {
		return fi, nil
	}
	return c.r.sh.ns.stat(c.abs(p))
}

func (c *cmd) lstat(p string) (*fileInfo, error) {
	if fi, ok := c.r.pipeInfo(c.abs(p)); ok {
		return fi, nil
	}
	return c.r.sh.ns.lstat(c.abs(p))
}

// readDir lists a directory; once the call is being stopped it fails,
// so that every walk of a tree ends with the call.
func (c *cmd) readDir(p string) ([]dirEntry, error) {
	if c.canceled() {
		return nil, context.Cause(c.ctx)
	}
	return c.r.sh.ns.readDir(c.abs(p))
}

func (c *cmd) open(p string) (vfile, error) { return c.openFlags(p, O_RDONLY, 0) }

func (c *cmd) openFlags(p string, flag int, perm uint32) (vfile, error) {
	if p == "-" && flag == O_RDONLY {
		return stdStream{r: c.stdin}, nil
	}
	if f, ok := c.r.openPipe(c.abs(p), flag); ok {
		return stoppable{f, c.ctx}, nil
	}
	f, err := c.r.sh.ns.open(c.abs(p), flag, perm, c.stdin, c.out, c.stderr)
	if err != nil {
		return nil, err
	}
	return stoppable{f, c.ctx}, nil
}

func (c *cmd) create(p string) (vfile, error) {
	return c.openFlags(p, O_WRONLY|O_CREATE|O_TRUNC, 0o666)
}

// readFile reads all of p ("-" is stdin).
func (c *cmd) readFile(p string) ([]byte, error) {
	f, err := c.open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := c.stat(p); err == nil && fi.IsDir() && p != "-" {
		return nil, syscall.EISDIR
	}
	if fi, err := f.Seek(0, io.SeekEnd); err == nil && fi > 0 {
		// a file that cannot fit fails before it is read
		if c.r.mem.over(fi) {
			c.r.mem.exceed(c.name)
			return nil, errMemoryLimit
		}
		f.Seek(0, io.SeekStart)
	}
	return c.readAll(f)
}

func (c *cmd) now() time.Time { return c.r.sh.opts.Now() }

func (c *cmd) getenv(name string) string { return c.env.Get(name).String() }

// sortEntries sorts a listing by name.
func sortEntries(e []dirEntry) {
	sort.Slice(e, func(i, j int) bool { return e[i].name < e[j].name })
}

// isDirErr reports whether a file info is a directory.
func isDir(fi fs.FileInfo) bool { return fi != nil && fi.IsDir() }
