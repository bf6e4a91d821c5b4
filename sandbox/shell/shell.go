// Package shell is the shell fast path: an in-process interpreter
// (mvdan.cc/sh) whose commands run directly on the workspace store.
//
// The interpreter sees one namespace, the same as the sandbox shows: the
// workspace at /workspace (the default working directory), a private /tmp
// and the special files /dev/null, /dev/zero, /dev/stdin, /dev/stdout and
// /dev/stderr. Its open, stat, readdir, access and exec handlers work on
// that namespace only: no host file, binary, environment variable or
// process id reaches a script, and a command that is not built in fails
// with status 127 instead of running a host program.
//
// /tmp lives in memory, one per Shell, bounded by Options.TmpLimit. It
// is never written to the store, so it is not on the mount, not journaled
// and leaves nothing behind after a crash; like the sandbox's tmpfs it
// keeps its files from one Exec to the next for as long as the Shell lives.
package shell

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"

	api "github.com/computerfs/computerfs/sandbox/backend"
	"github.com/computerfs/computerfs/wsfs"
)

// Open flags, as os.OpenFile takes them.
const (
	O_RDONLY = os.O_RDONLY
	O_WRONLY = os.O_WRONLY
	O_RDWR   = os.O_RDWR
	O_APPEND = os.O_APPEND
	O_CREATE = os.O_CREATE
	O_EXCL   = os.O_EXCL
	O_TRUNC  = os.O_TRUNC
)

// DefaultPath is $PATH in a clean environment, the sandbox's too
// (api.DefaultPath). The built-in commands claim to live in /usr/bin
// (what which and command -v say).
const DefaultPath = api.DefaultPath

// Options configure a Shell.
type Options struct {
	// UID and GID are what $UID, $EUID and $GID say (default 0).
	UID, GID uint32
	// TmpLimit bounds the bytes held in /tmp (default 256 MiB).
	TmpLimit int64
	// MaxMemory is the memory budget of each call whose
	// ExecOptions.MaxMemory is 0 (default DefaultMaxMemory; negative: no
	// limit). See ExecOptions.MaxMemory.
	MaxMemory int64
	// Now, if set, replaces the clock for date (tests).
	Now func() time.Time
	// GitName and GitEmail are the identity of git's commits and reflog
	// entries when neither the environment (GIT_AUTHOR_NAME...), -c nor
	// the repository's configuration names one, as git's system
	// configuration is in the sandbox (sandbox.Options.GitConfig).
	GitName, GitEmail string
	// GitDirs replace that identity for the repositories at or under a
	// directory (the longest that holds the repository wins), as an
	// includeIf "gitdir:DIR/" of the system configuration does.
	GitDirs []GitIdentity
	// SandboxProgram, if set, reports whether the sandbox's root file
	// system has an executable file at path (absolute, outside /workspace
	// and /tmp): which, command -v and type answer for the programs that
	// are not built in as the sandbox would, where the next command finds
	// them. nil: only the built-ins and the workspace's are found.
	SandboxProgram func(path string) bool
}

// GitIdentity is the identity of git's commits in the repositories at or
// under Dir (in the namespace: /workspace/repo).
type GitIdentity struct {
	Dir, Name, Email string
}

// ExecOptions configure one Exec.
type ExecOptions struct {
	// Cwd is the working directory: absolute in the namespace, or relative
	// to /workspace. Default /workspace.
	Cwd string
	// Env holds KEY=VALUE pairs added to the clean environment, which has
	// only HOME=/workspace, PATH=DefaultPath, LANG=C.UTF-8 and
	// TMPDIR=/tmp.
	Env []string
	// Stdin, Stdout and Stderr are the script's standard streams; nil is
	// empty input and discarded output.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Timeout ends the script (status 124) when it has run that long; 0
	// means no limit but the context's.
	Timeout time.Duration
	// MaxOutput bounds the bytes written to Stdout and Stderr together;
	// past it output is cut, Result.Truncated is set and the script is
	// stopped (status 125). 0 means DefaultMaxOutput, negative no limit.
	MaxOutput int64
	// MaxCommands bounds how many simple commands the script may run
	// (then it is stopped with status 125). 0 means DefaultMaxCommands,
	// negative no limit.
	MaxCommands int64
	// MaxMemory is the call's memory budget: what its built-ins,
	// variables and engines hold (see limits.go); past it the call is
	// stopped (status 125, "memory limit") with a message on stderr, and
	// the calls that run at the same time go on. 0 means
	// Options.MaxMemory, negative no limit.
	MaxMemory int64
}

// Defaults of ExecOptions.
const (
	DefaultMaxOutput   = 64 << 20
	DefaultMaxCommands = 1_000_000
)

// Exit statuses of scripts that were stopped.
const (
	ExitTimeout = 124
	ExitLimit   = 125
)

// Result is how a script ended.
type Result struct {
	ExitCode int
	Duration time.Duration
	// Truncated reports that output went past MaxOutput and was cut.
	Truncated bool
	// Stopped says why the script was stopped early: "timeout", "output
	// limit", "command limit", "memory limit", "nesting limit" (a
	// runaway recursion), "canceled", or "" if it ran to its end.
	Stopped string
}

// Shell runs scripts on one workspace.
type Shell struct {
	fs   *wsfs.FS
	opts Options
	ns   *namespace
	pid  atomic.Int64
}

// New returns a Shell on the workspace fs.
func New(fs *wsfs.FS, opts Options) *Shell {
	if opts.TmpLimit <= 0 {
		opts.TmpLimit = 256 << 20
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Shell{fs: fs, opts: opts, ns: &namespace{ws: wsBackend{fs}, tmp: newMemFS(opts.TmpLimit)}}
	s.pid.Store(100)
	return s
}

// noFifoDir is what the interpreter takes for its temporary directory,
// where it would make named pipes on the host: a path under /dev/null
// can never exist, and the namespace never routes there either.
const noFifoDir = "/dev/null/computerfs"

// Variables that stand in for $$ and $PPID, which the interpreter would
// take from the daemon.
const (
	pidVar  = "COMPUTERFS_SHELL_PID_"
	ppidVar = "COMPUTERFS_SHELL_PPID_"
)

var (
	errOutputLimit  = errors.New("output limit reached")
	errCommandLimit = errors.New("command limit reached")
	errNesting      = errors.New("maximum function nesting level exceeded")
	errCallEnded    = errors.New("the call has ended")
)

// run is the state of one Exec.
type run struct {
	sh       *Shell
	runner   *interp.Runner
	cancel   context.CancelCauseFunc
	commands *atomic.Int64 // shared with the scripts the run starts
	maxCmds  int64
	out      *limitWriter
	depth    int          // of nested scripts (sh x.sh, ./x.sh)
	pipes    *pipeTable   // of process substitutions, shared with nested scripts
	mem      *memBudget   // shared with nested scripts
	globbed  atomic.Int64 // bytes listed by globs since the last command
	inflight *flight      // built-ins running, of this call and its nested scripts
	name0    string       // $0 in bash's own errors: "bash", or the script file's name
	where    *scriptLines // where the script is, for bash's own errors
}

// Exec runs the script command. The error is for a failure of the shell
// itself; a script that fails, does not parse or is stopped gives a Result
// with its status.
func (s *Shell) Exec(ctx context.Context, command string, opts ExecOptions) (Result, error) {
	start := time.Now()
	res := Result{}
	stdout, stderr := opts.Stdout, opts.Stderr
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	max := opts.MaxOutput
	if max == 0 {
		max = DefaultMaxOutput
	}
	lw := &limitWriter{max: max}
	outW, errW := lw.writer(stdout), &limitedStream{lw: lw, w: stderr, stderr: true}

	maxMem := opts.MaxMemory
	if maxMem == 0 {
		maxMem = s.opts.MaxMemory
	}
	if maxMem == 0 {
		maxMem = DefaultMaxMemory
	}
	if msg := scriptTooBig(command, maxMem); msg != "" {
		fmt.Fprintf(errW, "bash: %s\n", msg)
		res.ExitCode, res.Duration = ExitLimit, time.Since(start)
		res.Stopped = "memory limit"
		return res, nil
	}
	file, err := parse(command)
	if err != nil {
		fmt.Fprintf(errW, "bash: %v\n", err)
		res.ExitCode, res.Duration = 2, time.Since(start)
		return res, nil
	}
	what := unsupported(file)
	if what == "" {
		what = misplaced(file)
	}
	if what != "" {
		fmt.Fprintf(errW, "bash: %s is not supported by the shell fast path\n", what)
		res.ExitCode, res.Duration = 2, time.Since(start)
		return res, nil
	}
	rewriteSpecial(file)
	rewriteProcSubst(file)
	file.Name = "bash" // $0, as bash -c gives it

	cwd := wsRoot
	if opts.Cwd != "" {
		cwd = absPath(wsRoot, opts.Cwd)
		if len(cwd) > 1 {
			cwd = strings.TrimSuffix(cwd, "/")
		}
	}
	if fi, err := s.ns.stat(cwd); err != nil || !fi.IsDir() {
		if err == nil {
			err = errors.New("not a directory")
		}
		return res, fmt.Errorf("working directory %s: %v", cwd, err)
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if opts.Timeout > 0 {
		var c2 context.CancelFunc
		ctx, c2 = context.WithTimeoutCause(ctx, opts.Timeout, context.DeadlineExceeded)
		defer c2()
	}
	lw.onFull = func() { cancel(errOutputLimit) }
	lw.stopped = func() bool { return ctx.Err() != nil }
	mem := newBudget(maxMem, func() { cancel(errMemoryLimit) })
	if maxMem > 0 {
		mem.guards.guardStatements(file)
	}

	r := &run{sh: s, cancel: cancel, maxCmds: opts.MaxCommands, out: lw, commands: new(atomic.Int64), pipes: &pipeTable{}, mem: mem, inflight: &flight{},
		name0: "bash", where: newScriptLines(file)}
	mem.flight = r.inflight
	if maxMem > 0 {
		defer watch.add(mem)()
	}
	if r.maxCmds == 0 {
		r.maxCmds = DefaultMaxCommands
	}
	pid := s.pid.Add(1)
	env := &startEnv{Environ: expand.ListEnviron(s.environ(opts.Env, pid)...), resetting: true}
	var stdin io.Reader = strings.NewReader("")
	if opts.Stdin != nil {
		stdin = &callerStdin{r: opts.Stdin, ctx: ctx}
	} else if null, err := os.Open(os.DevNull); err == nil {
		// no input is /dev/null, as for a program started without
		// one: rg tells it from a pipe (it then searches the working
		// directory), and the interpreter reads it without a pipe
		defer null.Close()
		stdin = null
	}
	runner, err := r.newRunner(env, stdin, outW, errW)
	if err != nil {
		return res, err
	}
	runner.Dir = cwd
	runner.Reset()
	env.resetting = false

	err = runner.Run(ctx, file)
	cause := context.Cause(ctx)
	// Background jobs (cmd &) end with the call, as the sandbox's do
	// when its exec ends: none may go on running, or writing, after
	// the call has returned.
	r.pipes.finish(5 * time.Second)
	cancel(errCallEnded)
	r.inflight.wait(5 * time.Second)
	lw.close()
	res.Duration = time.Since(start)
	res.Truncated = lw.truncated()
	switch {
	case errors.Is(cause, errOutputLimit):
		res.ExitCode, res.Stopped = ExitLimit, "output limit"
	case errors.Is(cause, errMemoryLimit):
		fmt.Fprintf(stderr, "bash: %s\n", mem.message()) // errW is closed by now
		res.ExitCode, res.Stopped = ExitLimit, "memory limit"
	case errors.Is(cause, errPatternLimit):
		fmt.Fprintf(stderr, "bash: %s\n", mem.patternMessage()) // errW is closed by now
		res.ExitCode, res.Stopped = ExitLimit, "pattern limit"
	case errors.Is(cause, errCommandLimit) || errors.Is(err, errCommandLimit):
		res.ExitCode, res.Stopped = ExitLimit, "command limit"
	case errors.Is(cause, errNesting) || errors.Is(err, errNesting):
		fmt.Fprintf(stderr, "bash: %v\n", errNesting) // errW is closed by now
		res.ExitCode, res.Stopped = ExitLimit, "nesting limit"
	case errors.Is(cause, context.DeadlineExceeded):
		res.ExitCode, res.Stopped = ExitTimeout, "timeout"
	case errors.Is(cause, context.Canceled):
		res.ExitCode, res.Stopped = 130, "canceled"
	case err == nil:
		res.ExitCode = 0
	default:
		if code, ok := interp.IsExitStatus(err); ok {
			res.ExitCode = int(code)
		} else {
			fmt.Fprintf(errW, "bash: %v\n", err)
			res.ExitCode = 1
		}
	}
	return res, nil
}

// newRunner makes an interpreter bound to the namespace, for the script
// of an Exec or a script it starts.
func (r *run) newRunner(env expand.Environ, stdin io.Reader, stdout, stderr io.Writer, opts ...interp.RunnerOption) (*interp.Runner, error) {
	if f := nullStdin(stdin); f != nil {
		stdin = f // a nested script's stdin stays /dev/null, not a pipe
	}
	runner, err := interp.New(append([]interp.RunnerOption{
		interp.Env(env),
		interp.StdIO(stdin, stdout, stderr),
		interp.OpenHandler(r.openHandler),
		interp.StatHandler(r.statHandler),
		interp.ReadDirHandler2(r.readDirHandler),
		interp.AccessHandler(r.accessHandler),
		interp.CallHandler(r.callHandler),
		interp.ExecHandlers(r.execMiddleware),
	}, opts...)...)
	if err != nil {
		return nil, err
	}
	r.runner = runner
	return runner, nil
}

// environ is the clean environment of a script.
func (s *Shell) environ(extra []string, pid int64) []string {
	env := []string{
		"HOME=" + api.Home,
		"PATH=" + DefaultPath,
		"LANG=" + api.Lang,
		"TMPDIR=" + tmpRoot,
		"SHELL=/bin/bash",
		"USER=" + userName(s.opts.UID),
		"UID=" + strconv.FormatUint(uint64(s.opts.UID), 10),
		"EUID=" + strconv.FormatUint(uint64(s.opts.UID), 10),
		"GID=" + strconv.FormatUint(uint64(s.opts.GID), 10),
		"HOSTNAME=sandbox",
	}
	env = append(env, extra...)
	// Not exported (no "export" attribute is possible in a list
	// environment), but set: see rewriteSpecial.
	env = append(env, pidVar+"="+strconv.FormatInt(pid, 10), ppidVar+"=1")
	return env
}

func userName(uid uint32) string {
	if uid == 0 {
		return "root"
	}
	return "user"
}

// startEnv is the environment; while the runner resets, it tells the
// interpreter a TMPDIR that can never exist (see noFifoDir), so that the
// interpreter's own host temporary files are out of reach.
type startEnv struct {
	expand.Environ
	resetting bool
}

func (e *startEnv) Get(name string) expand.Variable {
	if name == "TMPDIR" && e.resetting {
		return expand.Variable{Set: true, Exported: true, Kind: expand.String, Str: noFifoDir}
	}
	if user, ok := strings.CutPrefix(name, "HOME "); ok {
		return e.home(user)
	}
	vr := e.Environ.Get(name)
	if e.resetting && !vr.IsSet() {
		// The interpreter would fill these in from the daemon's
		// process (its home, its uid): a nested script whose caller
		// unset them gets them empty instead.
		switch name {
		case "HOME", "UID", "EUID", "GID":
			return expand.Variable{Set: true, Kind: expand.String}
		}
	}
	return vr
}

// home answers ~user, which the interpreter would look up in the host's
// user database: the workspace's user (whoami) has the workspace as its
// home; any other name is no user, and ~name stays as it is, as bash
// leaves the tilde of an unknown user.
func (e *startEnv) home(user string) expand.Variable {
	if user == e.Environ.Get("USER").String() {
		return expand.Variable{Set: true, Kind: expand.String, Str: wsRoot}
	}
	return expand.Variable{Set: true, Kind: expand.String, Str: "~" + user}
}

func (e *startEnv) Each(fn func(string, expand.Variable) bool) {
	e.Environ.Each(func(name string, vr expand.Variable) bool {
		if name == pidVar || name == ppidVar || name == "BASH_SOURCE" {
			vr.Exported = false
		}
		return fn(name, vr)
	})
}

// scriptTooBig says why a script cannot be parsed on a call with the
// given memory budget, or "".
func scriptTooBig(src string, limit int64) string {
	if max := maxScriptBytes(limit); int64(len(src)) > max {
		return fmt.Sprintf("script of %d bytes is over the fast path's limit of %d bytes for a call's memory budget of %s", len(src), max, sizeText(limit))
	}
	if scriptTooDeep(src) {
		return errTooDeep.Error()
	}
	return ""
}

func parse(command string) (*syntax.File, error) { return parseNamed(command, "") }

// parseNamed parses a script (name is the file it came from, for the
// errors). Every parse of the shell goes through it: the parser and
// syntax.Walk recurse on the script's nesting, so a script that nests too
// deep (scriptTooDeep) is refused before it is parsed, wherever it comes from
// (a command routed, eval, sh -c, a script file).
func parseNamed(src, name string) (*syntax.File, error) {
	if scriptTooDeep(src) {
		return nil, errTooDeep
	}
	return syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), name)
}

// unsupported names a construct the fast path refuses, or "".
func unsupported(f *syntax.File) string {
	what := ""
	syntax.Walk(f, func(n syntax.Node) bool {
		if what != "" {
			return false
		}
		switch x := n.(type) {
		case *syntax.ProcSubst:
			if x.Op == syntax.CmdInTemp {
				what = "=(...) substitution"
			}
		case *syntax.CoprocClause:
			what = "coproc"
		case *syntax.FuncDecl:
			// the fast path's own commands have names with a NUL
			if x.Name != nil && strings.IndexByte(x.Name.Value, 0) >= 0 {
				what = "a function name with a NUL byte"
			}
		default:
			what = divergent(n)
		}
		return what == ""
	})
	if what == "" {
		what = unboundRisk(f)
	}
	if what == "" {
		what = staticRisk(f) // staticrisk.go
	}
	return what
}

// divergent names what the interpreter would answer differently from
// bash (checked against bash in TestDivergentRouted), so that such a
// script runs in the sandbox instead of telling the agent something false:
//   - time writes its report to stdout, not stderr;
//   - ${x@Q} and the other @ transformations quote as Go does;
//   - ${x/#pat/to} and ${x/%pat/to} take # and % as part of the pattern;
//   - $PIPESTATUS is never set, nor $BASH_VERSION;
//   - ${x:?message} fails with status 1, bash with 127 and its prefix;
//   - redirections of descriptors other than 0, 1 and 2 (exec 3<f);
//   - declare -i, -l, -u, -p, -f and the other options it lacks, and
//     export or readonly with no names (the listings);
//   - an IFS with a character other than space, tab and newline drops
//     empty fields (a,,b splits in two, read a b c of 1::3 gives 1|3|);
//   - let of a quoted expression with spaces ("i += 2") does nothing.
func divergent(n syntax.Node) string {
	switch x := n.(type) {
	case *syntax.TimeClause:
		return "time (its report)"
	case *syntax.ParamExp:
		switch {
		case x.Exp != nil && x.Exp.Op == syntax.OtherParamOps:
			return "${var@...}"
		case x.Repl != nil && x.Repl.Orig != nil && len(x.Repl.Orig.Parts) > 0:
			if l, ok := x.Repl.Orig.Parts[0].(*syntax.Lit); ok && (strings.HasPrefix(l.Value, "#") || strings.HasPrefix(l.Value, "%")) {
				return "${var/#pattern/string}"
			}
		case x.Param != nil && x.Param.Value == "PIPESTATUS":
			return "$PIPESTATUS"
		case x.Param != nil && (x.Param.Value == "BASH_VERSION" || x.Param.Value == "BASH_VERSINFO"):
			return "$" + x.Param.Value
		case x.Exp != nil && (x.Exp.Op == syntax.ErrorUnset || x.Exp.Op == syntax.ErrorUnsetOrNull):
			return "${var:?message}"
		}
	case *syntax.Redirect:
		if x.N != nil && x.N.Value != "0" && x.N.Value != "1" && x.N.Value != "2" {
			return "a redirection of fd " + x.N.Value
		}
	case *syntax.DeclClause:
		// the interpreter's declare takes -x -r -a -A -n -g; -i, -l,
		// -u, -t, -F and the listings (-p, export alone) it answers
		// otherwise
		if len(x.Args) == 0 && x.Variant.Value != "local" {
			return x.Variant.Value + " with no names"
		}
		for _, a := range x.Args {
			if a.Name != nil || a.Value == nil {
				continue
			}
			v, ok := literal(a.Value)
			if !ok {
				return x.Variant.Value + " of a word computed at run time"
			}
			if (strings.HasPrefix(v, "-") || strings.HasPrefix(v, "+")) && strings.Trim(v[1:], "xranAg") != "" {
				return x.Variant.Value + " " + v
			}
		}
	case *syntax.Assign:
		if x.Name != nil && x.Name.Value == "IFS" && x.Value != nil {
			v, ok := ansiLiteral(x.Value)
			if !ok {
				v, ok = literal(x.Value)
			}
			if !ok || strings.Trim(v, " \t\n") != "" {
				return "an IFS other than blanks"
			}
		}
	case *syntax.LetClause:
		for _, e := range x.Exprs {
			if w, ok := e.(*syntax.Word); ok {
				for _, p := range w.Parts {
					switch p.(type) {
					case *syntax.DblQuoted, *syntax.SglQuoted:
						return "let of a quoted expression"
					}
				}
			}
		}
	}
	return ""
}

// ansiLiteral is the value of a word that is one $'...' string.
func ansiLiteral(w *syntax.Word) (string, bool) {
	if len(w.Parts) != 1 {
		return "", false
	}
	q, ok := w.Parts[0].(*syntax.SglQuoted)
	if !ok || !q.Dollar {
		return "", false
	}
	v, _, err := expand.Format(nil, q.Value, nil)
	if err != nil {
		return "", false
	}
	return v, true
}

// rewriteSpecial makes $$ and $PPID read the stand-in variables, and
// $(<file) run /bin/cat (the built-in, whatever functions say): the interpreter would copy the file into memory
// itself, with no bound (x=$(</dev/zero)); cat's output in $(...) counts
// against the call's memory budget.
func rewriteSpecial(f syntax.Node) {
	syntax.Walk(f, func(n syntax.Node) bool {
		if cs, ok := n.(*syntax.CmdSubst); ok && len(cs.Stmts) == 1 {
			st := cs.Stmts[0]
			if st.Cmd == nil && !st.Negated && !st.Background && !st.Coprocess && !st.Disown &&
				len(st.Redirs) == 1 && st.Redirs[0].Op == syntax.RdrIn {
				st.Cmd = &syntax.CallExpr{Args: []*syntax.Word{{Parts: []syntax.WordPart{&syntax.Lit{Value: "/bin/cat"}}}}}
			}
		}
		if ce, ok := n.(*syntax.CallExpr); ok && len(ce.Args) > 0 && len(ce.Args) <= 2 {
			// shift [n] gets $# to know when bash would fail (bashmsg.go)
			if l, ok := literal(ce.Args[0]); ok && l == "shift" {
				ce.Args[0] = &syntax.Word{Parts: []syntax.WordPart{&syntax.Lit{ValuePos: ce.Args[0].Pos(), Value: shiftCmd}}}
				ce.Args = append(ce.Args, &syntax.Word{Parts: []syntax.WordPart{&syntax.ParamExp{Short: true, Param: &syntax.Lit{Value: "#"}}}})
			}
		}
		if pe, ok := n.(*syntax.ParamExp); ok && pe.Param != nil {
			switch pe.Param.Value {
			case "$":
				pe.Param.Value = pidVar
			case "PPID":
				pe.Param.Value = ppidVar
			}
		}
		return true
	})
}

// limitWriter counts what the script writes to stdout and stderr
// together, and cuts it at max bytes.
type limitWriter struct {
	mu      sync.Mutex
	max     int64
	n       int64
	cut     bool
	closed  bool
	onFull  func()
	stopped func() bool // whether the call is being stopped
}

type limitedStream struct {
	lw     *limitWriter
	w      io.Writer
	stderr bool
}

// stopNoise are the lines that the interpreter prints for the error that
// stops a call (an expansion's or a handler's) in every statement the stop
// reaches: once the call is being stopped, stderr drops them, and the
// call's own message says what stopped it.
var stopNoise = func() map[string]bool {
	m := map[string]bool{}
	for _, err := range []error{errOutputLimit, errMemoryLimit, errPatternLimit, errCommandLimit, errNesting, errCallEnded, context.Canceled, context.DeadlineExceeded} {
		m[err.Error()+"\n"] = true
	}
	return m
}()

func (lw *limitWriter) writer(w io.Writer) io.Writer { return &limitedStream{lw: lw, w: w} }

func (lw *limitWriter) truncated() bool {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.cut
}

func (lw *limitWriter) close() {
	lw.mu.Lock()
	lw.closed = true
	lw.mu.Unlock()
}

func (s *limitedStream) Write(p []byte) (int, error) {
	lw := s.lw
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.closed || lw.cut {
		return 0, errOutputLimit
	}
	if s.stderr && lw.stopped != nil && len(p) < 128 && stopNoise[string(p)] && lw.stopped() {
		return len(p), nil
	}
	if lw.max > 0 && lw.n+int64(len(p)) > lw.max {
		keep := lw.max - lw.n
		n, _ := s.w.Write(p[:keep])
		lw.n += int64(n)
		lw.cut = true
		if lw.onFull != nil {
			lw.onFull()
		}
		return n, errOutputLimit
	}
	n, err := s.w.Write(p)
	lw.n += int64(n)
	return n, err
}

// flight counts the built-ins that run for a call.
type flight struct{ n atomic.Int64 }

func (f *flight) add()  { f.n.Add(1) }
func (f *flight) done() { f.n.Add(-1) }

// wait waits until none runs, at most max.
func (f *flight) wait(max time.Duration) {
	deadline := time.Now().Add(max)
	for f.n.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
}
