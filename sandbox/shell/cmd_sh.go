package shell

import (
	"bytes"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"
)

func init() {
	register(&command{names: []string{"sh", "bash", "dash"}, run: cmdShell, opts: opts(shellShorts), ownArgs: true}) // routed by router.shell
}

// Scripts in the workspace (sh x.sh, bash -c '...', ./x.sh with a shell
// shebang) run in a nested interpreter on the same namespace, with their
// own positional parameters, options and exit status, and only the
// exported variables of their caller, as a child bash would have.

// maxScriptDepth bounds scripts running scripts.
const maxScriptDepth = 64

// maxScriptSize bounds what is read of a script file.
const maxScriptSize = 16 << 20

// isPOSIXShell reports whether name runs as dash does on Debian (sh).
func isPOSIXShell(name string) bool { return name == "sh" || name == "dash" }

func cmdShell(c *cmd) int {
	args := c.args[1:]
	var flags []string
	cmdString, fromStdin := false, false
	i := 0
	bad := func(opt string) int {
		if isPOSIXShell(c.name) {
			fmt.Fprintf(c.stderr, "%s: 0: Illegal option %s\n", c.name, opt)
		} else {
			fmt.Fprintf(c.stderr, "bash: %s: invalid option\n", opt)
		}
		return 2
	}
loop:
	for ; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--" || a == "-":
			i++
			break loop
		case strings.HasPrefix(a, "--") && !isPOSIXShell(c.name):
			switch a {
			case "--norc", "--noprofile", "--login", "--posix", "--noediting":
				continue
			}
			return bad(a)
		case len(a) < 2 || a[0] != '-' && a[0] != '+':
			break loop
		}
		for j := 1; j < len(a); j++ {
			switch l := a[j]; l {
			case 'c':
				cmdString = true
			case 's':
				fromStdin = true
			case 'l':
			case 'o':
				if i+1 >= len(args) {
					return bad(a[:1] + "o")
				}
				i++
				flags = append(flags, a[:1]+"o", args[i])
			case 'e', 'u', 'x', 'f', 'n', 'a', 'v':
				if l != 'v' {
					flags = append(flags, a[:1]+string(l))
				}
			default:
				return bad(a[:1] + string(l))
			}
		}
	}
	rest := args[i:]
	c.out.Flush()
	switch {
	case cmdString:
		if len(rest) == 0 {
			if isPOSIXShell(c.name) {
				fmt.Fprintf(c.stderr, "%s: 0: -c requires an argument\n", c.name)
			} else {
				fmt.Fprintln(c.stderr, "bash: -c: option requires an argument")
			}
			return 2
		}
		name := c.name
		params := rest[1:]
		if len(params) > 0 {
			name, params = params[0], params[1:]
		}
		return c.runScript([]byte(rest[0]), name, false, flags, params, c.stdin)
	case len(rest) == 0 || fromStdin:
		data, err := io.ReadAll(io.LimitReader(c.stdin, maxScriptSize))
		if err != nil {
			fmt.Fprintf(c.stderr, "%s: %s\n", c.name, errText(err))
			return 2
		}
		return c.runScript(data, c.name, false, flags, rest, strings.NewReader(""))
	}
	data, code := c.readScript(rest[0], false)
	if code != 0 {
		return code
	}
	return c.runScript(data, rest[0], true, flags, rest[1:], c.stdin)
}

// readScript reads a script file as the shell that runs it would: exec
// set for ./x.sh (which needs an x bit), unset for sh x.sh and bash x.sh.
func (c *cmd) readScript(p string, exec bool) ([]byte, int) {
	who := "bash"
	if !exec {
		who = c.name
	}
	fail := func(msg string, code int) ([]byte, int) {
		if !exec && isPOSIXShell(who) {
			fmt.Fprintf(c.stderr, "%s: 0: cannot open %s: %s\n", who, p, strings.TrimSuffix(msg, " or directory"))
			return nil, 2
		}
		if exec {
			fmt.Fprintf(c.stderr, "%s: %s: %s\n", c.bashWhere(), p, msg)
		} else {
			fmt.Fprintf(c.stderr, "%s: %s: %s\n", who, p, msg)
		}
		return nil, code
	}
	fi, err := c.stat(p)
	if err != nil {
		return fail(errText(err), 127)
	}
	if fi.IsDir() {
		if !exec && isPOSIXShell(who) {
			return nil, 0 // dash reads nothing from a directory
		}
		return fail("Is a directory", 126)
	}
	if exec && fi.mode.Perm()&0o111 == 0 {
		return fail("Permission denied", 126)
	}
	f, err := c.open(p)
	if err != nil {
		return fail(errText(err), 126)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxScriptSize))
	if err != nil {
		return fail(errText(err), 126)
	}
	return data, 0
}

// shellPaths are the shells a shebang may name.
var shellPaths = map[string]bool{
	"/bin/sh": true, "/bin/bash": true, "/bin/dash": true, "/usr/bin/sh": true,
	"/usr/bin/bash": true, "/usr/bin/dash": true, "/usr/local/bin/bash": true,
}

// shebang reads the first line of a script: the options of the shell it
// asks for, or the program it names (ok false) if that is not a shell.
func shebang(data []byte) (flags []string, prog string, ok bool) {
	if !bytes.HasPrefix(data, []byte("#!")) {
		return nil, "", true // bash runs a file without one itself
	}
	line, _, _ := bytes.Cut(data[2:], []byte("\n"))
	fields := strings.Fields(strings.TrimSuffix(string(line), "\r"))
	if len(fields) == 0 {
		return nil, "", true
	}
	prog, args := fields[0], fields[1:]
	switch {
	case shellPaths[prog]:
	case (prog == "/usr/bin/env" || prog == "/bin/env") && len(args) > 0:
		if args[0] == "-S" {
			args = args[1:]
		}
		if len(args) == 0 || args[0] != "sh" && args[0] != "bash" && args[0] != "dash" {
			if len(args) > 0 {
				prog = args[0]
			}
			return nil, prog, false
		}
		prog, args = args[0], args[1:]
	default:
		return nil, prog, false
	}
	for _, a := range args {
		if len(a) < 2 || a[0] != '-' && a[0] != '+' {
			return nil, prog + " " + a, false
		}
		for _, l := range a[1:] {
			if !strings.ContainsRune("euxfna", l) {
				return nil, prog + " " + a, false
			}
			flags = append(flags, a[:1]+string(l))
		}
	}
	return flags, "", true
}

// execPath runs ./x.sh and other paths: a shell script runs in a nested
// interpreter; anything else cannot run here.
func (c *cmd) execPath(args []string) int {
	p := args[0]
	data, code := c.readScript(p, true)
	if code != 0 {
		return code
	}
	flags, prog, ok := shebang(data)
	if !ok {
		fmt.Fprintf(c.stderr, "%s: %s: cannot execute: %s does not run on the shell fast path\n", c.bashWhere(), p, prog)
		return 126
	}
	if i := bytes.IndexByte(data[:min(len(data), 256)], 0); i >= 0 && !bytes.HasPrefix(data, []byte("#!")) {
		fmt.Fprintf(c.stderr, "%s: %s: cannot execute binary file: Exec format error\n", c.bashWhere(), p)
		return 126
	}
	return c.runScript(data, p, true, flags, args[1:], c.stdin)
}

// runScript runs a script in a nested interpreter.
// file is set for a script file (then $BASH_SOURCE is its name).
func (c *cmd) runScript(src []byte, name string, file bool, flags, params []string, stdin io.Reader) int {
	r := c.r
	if r.depth >= maxScriptDepth {
		fmt.Fprintf(c.stderr, "bash: %s: maximum script nesting level exceeded (%d)\n", name, maxScriptDepth)
		return 126
	}
	if msg := scriptTooBig(string(src), r.mem.limit); msg != "" {
		fmt.Fprintf(c.stderr, "%s: %s\n", name, msg)
		return 2
	}
	f, err := parseNamed(string(src), name)
	if err != nil {
		fmt.Fprintf(c.stderr, "%s: %v\n", name, strings.TrimPrefix(err.Error(), name+":"))
		return 2
	}
	if what := unsupported(f); what != "" {
		fmt.Fprintf(c.stderr, "%s: %s is not supported by the shell fast path\n", name, what)
		return 2
	}
	rewriteSpecial(f)
	rewriteProcSubst(f)
	if r.mem.limit > 0 {
		defer r.mem.guards.forget(r.mem.guards.guardStatements(f))
	}
	pid := r.sh.pid.Add(1)
	vars := exported(c.env)
	vars = append(vars, pidVar+"="+strconv.FormatInt(pid, 10), ppidVar+"="+c.env.Get(pidVar).String())
	if file {
		vars = append(vars, "BASH_SOURCE="+name)
	}
	env := &startEnv{Environ: expand.ListEnviron(vars...), resetting: true}
	child := &run{sh: r.sh, cancel: r.cancel, commands: r.commands, maxCmds: r.maxCmds, out: r.out, depth: r.depth + 1, pipes: r.pipes, mem: r.mem, inflight: r.inflight,
		name0: "bash", where: newScriptLines(f)}
	if file {
		child.name0 = name
	}
	stdout := c.stdout
	if stdout == nil {
		stdout = c.out
	}
	runner, err := child.newRunner(env, stdin, stdout, c.stderr, interp.Params(append(append([]string{}, flags...), append([]string{"--"}, params...)...)...))
	if err != nil {
		fmt.Fprintf(c.stderr, "%s: %v\n", c.name, err)
		return 2
	}
	runner.Dir = c.dir
	runner.Reset()
	env.resetting = false
	err = runner.Run(c.ctx, f)
	if err == nil {
		return 0
	}
	if code, ok := interp.IsExitStatus(err); ok {
		return int(code)
	}
	if c.ctx.Err() == nil {
		fmt.Fprintf(c.stderr, "%s: %v\n", name, err)
	}
	return 1
}

// Routing of scripts (see CanRun and Shell.CanRunIn).

// maxRouteDepth bounds how deep routing follows eval, bash -c and script
// files.
const maxRouteDepth = 8

// router is what routing knows while it walks a script.
type router struct {
	depth int
	// cd is set once the directory may have changed (cd, pushd, popd,
	// eval, source): relative script paths are then unknown.
	cd  bool
	sh  *Shell // nil: script files are not read (CanRun)
	cwd string
	st  *routeState
}

// routeState is shared by the routers of one check.
type routeState struct {
	scripts map[string]bool // base names of the script files the check read
	abs     []string        // and their absolute paths
	files   []*syntax.File  // every script walked, the command included
}

func newRouter(sh *Shell, cwd string) *router {
	return &router{sh: sh, cwd: cwd, st: &routeState{scripts: map[string]bool{}}}
}

// nest is the router of a script run or evaluated from this one.
func (rt *router) nest() *router {
	n := *rt
	n.depth++
	return &n
}

// enter is called for each file walked: it records it, and notes a
// possible change of directory anywhere in it (in a loop, a cd after a
// script may still run before it).
func (rt *router) enter(f *syntax.File) *router {
	rt.st.files = append(rt.st.files, f)
	n := *rt
	if !n.cd && rt.changesDir(f) {
		n.cd = true
	}
	return &n
}

// mayCd reports whether a script text might change directory.
func mayCd(s string) bool {
	return strings.Contains(s, "cd") || strings.Contains(s, "pushd") || strings.Contains(s, "popd")
}

// changesDir reports whether f may change the directory of the shell
// running it: cd, pushd, popd, or an eval or source that may hold one.
func (rt *router) changesDir(f *syntax.File) bool {
	changes := false
	syntax.Walk(f, func(n syntax.Node) bool {
		call, ok := n.(*syntax.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		switch name, _ := literal(call.Args[0]); name {
		case "cd", "pushd", "popd":
			changes = true
		case "eval":
			for _, w := range call.Args[1:] {
				if l, ok := literal(w); !ok || mayCd(l) {
					changes = true
				}
			}
		case "source", ".":
			if len(call.Args) > 1 && rt.sh != nil {
				if p, ok := literal(call.Args[1]); ok {
					// a file that is not there is refused anyway
					if data, err := rt.read(p); err != nil || !mayCd(string(data)) {
						return true
					}
				}
			}
			changes = true
		}
		return !changes
	})
	return changes
}

// read reads a file of the namespace for routing.
func (rt *router) read(p string) ([]byte, error) {
	abs := absPath(rt.cwd, p)
	fi, err := rt.sh.ns.stat(abs)
	if err != nil {
		return nil, err
	}
	if !fi.mode.IsRegular() {
		return nil, syscall.EINVAL
	}
	f, err := rt.sh.ns.open(abs, O_RDONLY, 0, nil, nil, nil)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxScriptSize))
}

// shellShorts and shellLongs are the options of sh and bash that cmdShell
// takes and CanRun lets run here (-x and -v, which it takes, are routed:
// the trace would be the fast path's, not bash's).
const shellShorts = "csloeufna"

var shellLongs = []string{"--norc", "--noprofile", "--login", "--posix", "--noediting"}

// shell checks sh/bash/dash: a literal -c string is checked like eval;
// a script file is read (CanRunIn only); a script from stdin is unknown.
func (rt *router) shell(words []string, lits []bool, funcs map[string]bool) string {
	name := words[0]
	i := 1
	cmdString := false
	for ; i < len(words); i++ {
		a := words[i]
		if !lits[i] {
			return name + " with an option computed at run time"
		}
		if a == "--" || a == "-" {
			i++
			break
		}
		if strings.HasPrefix(a, "--") {
			if isPOSIXShell(name) || !slices.Contains(shellLongs, a) {
				return name + " " + a + " is not built in"
			}
			continue
		}
		if len(a) < 2 || a[0] != '-' && a[0] != '+' {
			break
		}
		for _, l := range a[1:] {
			switch {
			case l == 'x' || l == 'v':
				return fmt.Sprintf("%s -%c: the trace of the script is bash's only in the sandbox (as set -x's xtrace)", name, l)
			case !strings.ContainsRune(shellShorts, l):
				return fmt.Sprintf("%s -%c is not built in", name, l)
			}
		}
		if strings.ContainsRune(a, 's') && a[0] == '-' {
			return name + " -s reads its script from stdin"
		}
		if strings.ContainsRune(a, 'c') && a[0] == '-' {
			cmdString = true
		}
		if strings.HasSuffix(a, "o") {
			i++
			if i < len(words) && (words[i] == "xtrace" || words[i] == "verbose") {
				return fmt.Sprintf("%s -o %s: the trace of the script is bash's only in the sandbox (as set -x's xtrace)", name, words[i])
			}
		}
	}
	if i >= len(words) {
		if cmdString {
			return "" // fails the same way everywhere
		}
		return name + " reads its script from stdin"
	}
	if !lits[i] {
		if cmdString {
			return name + " -c of a string computed at run time"
		}
		return name + " runs a script whose name is computed at run time"
	}
	if cmdString {
		if rt.depth >= maxRouteDepth {
			return name + " -c nested too deep"
		}
		f, err := parse(words[i])
		if err != nil {
			return fmt.Sprintf("%s -c: syntax error: %v", name, err)
		}
		if ok, why := canRunFile(f, rt.nest()); !ok {
			return why
		}
		return ""
	}
	return rt.scriptFile(words[i], false, nil)
}

// scriptFile checks a script file run as ./x.sh (exec) or sh x.sh, or
// sourced (funcs, the caller's functions, then learns those it defines):
// it must exist now, be a shell script, and pass the check itself.
func (rt *router) scriptFile(p string, exec bool, funcs map[string]bool) string {
	if rt.sh == nil {
		return p + " is a script file (Shell.CanRunIn can read it; CanRun cannot)"
	}
	if !strings.HasPrefix(p, "/") && rt.cd {
		return p + " runs after a change of directory, so which file it is is only known at run time"
	}
	if rt.depth >= maxRouteDepth {
		return p + ": scripts nested too deep"
	}
	abs := absPath(rt.cwd, p)
	data, err := rt.read(p)
	if errno(err) == syscall.EINVAL {
		return fmt.Sprintf("script %s is not a regular file", p)
	}
	if err != nil {
		return fmt.Sprintf("script %s: %s", p, errText(err))
	}
	if exec {
		if _, prog, ok := shebang(data); !ok {
			return fmt.Sprintf("%s runs %s, which is not built in", p, prog)
		}
	}
	file, err := parseNamed(string(data), p)
	if err != nil {
		return fmt.Sprintf("script %s: syntax error: %v", p, err)
	}
	rt.st.scripts[path.Base(abs)] = true
	rt.st.abs = append(rt.st.abs, abs)
	if ok, why := canRunFile(file, rt.nest()); !ok {
		return p + ": " + why
	}
	if funcs != nil {
		syntax.Walk(file, func(n syntax.Node) bool {
			if fd, ok := n.(*syntax.FuncDecl); ok && fd.Name != nil {
				funcs[fd.Name.Value] = true
			}
			return true
		})
	}
	return ""
}

// writers are the built-in commands that may change a file named in
// their arguments. tar -x and git may change any file.
var writers = map[string]bool{
	"cp": true, "mv": true, "ln": true, "sed": true, "tee": true, "gzip": true, "gunzip": true,
	"install": true, "patch": true, "truncate": true, "dd": true, "rsync": true,
}

// scriptsStable reports why a script file the check read might be changed
// by the command before it runs, or "": then what routing read is what
// will run. A write to a path computed at run time, a write to a file
// with a script's name, into a directory above a script, tar -x and git
// all count.
func (rt *router) scriptsStable() string {
	st := rt.st
	if len(st.abs) == 0 {
		return ""
	}
	hits := func(arg string) bool {
		a := strings.TrimSuffix(arg, "/")
		if a == "" || a == "." || a == ".." || strings.HasPrefix(a, "../") || strings.ContainsAny(a, "*?[") {
			return true
		}
		base := path.Base(a)
		for s := range st.scripts {
			if base == s || strings.HasPrefix(base, s) {
				return true
			}
		}
		abs := absPath(rt.cwd, a)
		for _, s := range st.abs {
			if strings.HasPrefix(s, abs+"/") {
				return true
			}
		}
		return false
	}
	why := ""
	for _, f := range st.files {
		syntax.Walk(f, func(n syntax.Node) bool {
			switch x := n.(type) {
			case *syntax.Redirect:
				switch x.Op {
				case syntax.RdrOut, syntax.AppOut, syntax.RdrAll, syntax.AppAll, syntax.RdrInOut, syntax.ClbOut:
					if x.Word == nil {
						return true
					}
					target, ok := literal(x.Word)
					if !ok {
						why = "a redirection to a path computed at run time could change a script before it runs"
					} else if target != "/dev/null" && hits(target) {
						why = "the command writes " + target + " and runs a script file it may change"
					}
				}
			case *syntax.CallExpr:
				if len(x.Args) == 0 {
					return true
				}
				name, _ := literal(x.Args[0])
				name = commandName(name)
				args := x.Args[1:]
				switch name {
				case "git":
					why = "git may change a script file before it runs"
				case "tar":
					for _, a := range args {
						if l, ok := literal(a); !ok || !strings.HasPrefix(l, "--") && strings.ContainsRune(l, 'x') || strings.HasPrefix(l, "--ext") || l == "--get" {
							why = "tar may extract over a script file before it runs"
						}
					}
				case "xargs", "find":
					for _, a := range args {
						if l, _ := literal(a); writers[l] {
							why = name + " runs " + l + ", which may change a script file before it runs"
						}
					}
				}
				if writers[name] {
					for _, a := range args {
						l, ok := literal(a)
						if !ok || !strings.HasPrefix(l, "-") && hits(l) {
							why = fmt.Sprintf("%s may change a script file before it runs", name)
						}
					}
				}
			}
			return why == ""
		})
		if why != "" {
			return why
		}
	}
	return ""
}

// CanRunIn is CanRun for a script to be run in this Shell in the
// directory cwd (as ExecOptions.Cwd): it also reads the script files the
// command runs (./x.sh, sh x.sh, bash x.sh; source x.sh) and accepts them
// when they are there now, are shell scripts whose commands pass the check
// in turn, and nothing in the command may change them before they run.
func (s *Shell) CanRunIn(cwd, command string) (ok bool, reason string) {
	f, err := parse(command)
	if err != nil {
		return false, fmt.Sprintf("syntax error: %v", err)
	}
	if what := misplaced(f); what != "" {
		return false, what + " is not supported"
	}
	abs := wsRoot
	if cwd != "" {
		abs = strings.TrimSuffix(absPath(wsRoot, cwd), "/")
	}
	rt := newRouter(s, abs)
	if ok, why := canRunFile(f, rt); !ok {
		return false, why
	}
	if why := rt.scriptsStable(); why != "" {
		return false, why
	}
	return true, ""
}
