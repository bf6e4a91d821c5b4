package shell

// Bash's own error texts for the builtins the interpreter words its own
// way. Agents read stderr (often merged with 2>&1) and match on it, so the
// fast path says what bash -c says: "bash: line N: cd: x: No such file or
// directory", with the status bash gives. callHandler checks the command
// before the interpreter's builtin runs; when bash would fail, the command
// becomes errorCmd with bash's text, otherwise it runs unchanged.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"
)

// bashWhere is the prefix bash puts before its own errors: its $0
// ("bash" under bash -c, the script's path in a script file) and the line.
func (r *run) bashWhere(line uint) string {
	return fmt.Sprintf("%s: line %d", r.name0, max(line, 1))
}

// bashFail is the command that prints msg after bash's prefix and fails
// with status code.
func (r *run) bashFail(hc interp.HandlerContext, code int, msg string) []string {
	var line uint
	if hc.Pos.IsValid() {
		line = hc.Pos.Line()
	}
	return []string{errorCmd, strconv.Itoa(code), r.bashWhere(line) + ": " + msg}
}

// bashWhere is bash's prefix for an error of the command c runs.
func (c *cmd) bashWhere() string {
	var line uint
	if c.hc.Pos.IsValid() {
		line = c.hc.Pos.Line()
	}
	return c.r.bashWhere(line)
}

// scriptLines knows where in its script a run is, for the errors whose
// handler is not told (a redirection's open): the lines that have a
// redirection to a file, and the line of the last command called.
type scriptLines struct {
	redirs []uint // sorted
	last   atomic.Uint64
}

func newScriptLines(f *syntax.File) *scriptLines {
	w := &scriptLines{}
	syntax.Walk(f, func(n syntax.Node) bool {
		if rd, ok := n.(*syntax.Redirect); ok {
			switch rd.Op {
			case syntax.RdrIn, syntax.RdrOut, syntax.AppOut, syntax.RdrAll, syntax.AppAll, syntax.ClbOut, syntax.RdrInOut:
				w.redirs = append(w.redirs, rd.Pos().Line())
			}
		}
		return true
	})
	slices.Sort(w.redirs)
	w.redirs = slices.Compact(w.redirs)
	return w
}

func (w *scriptLines) called(p syntax.Pos) {
	if p.IsValid() {
		w.last.Store(uint64(p.Line()))
	}
}

// redirLine is the line of the redirection being opened: the only one,
// or the first at or after the last command called (a redirection is
// opened before its own command is called).
func (w *scriptLines) redirLine() uint {
	if len(w.redirs) == 0 {
		return 1
	}
	last := uint(w.last.Load())
	for _, l := range w.redirs {
		if l >= last {
			return l
		}
	}
	return w.redirs[len(w.redirs)-1]
}

// bashErrno words an errno as bash does ("No such file or directory") and
// stays the errno for errors.Is.
type bashErrno struct{ syscall.Errno }

func (e bashErrno) Error() string { return errText(e.Errno) }
func (e bashErrno) Unwrap() error { return e.Errno }

// checkCd: cd with more than one operand, or to a directory that is not
// there or is not a directory. The rest (cd, cd -, cd to a directory) is
// the interpreter's.
func (r *run) checkCd(ctx context.Context, args []string) []string {
	hc := interp.HandlerCtx(ctx)
	ops := args[1:]
	if len(ops) > 0 && ops[0] == "--" {
		ops = ops[1:]
	}
	if len(ops) > 0 && strings.HasPrefix(ops[0], "-") && ops[0] != "-" {
		return nil // cd -L/-P/-e: the interpreter's
	}
	switch {
	case len(ops) > 1:
		return r.bashFail(hc, 1, "cd: too many arguments")
	case len(ops) == 1 && ops[0] == "":
		return []string{"true"} // bash stays where it is
	case len(ops) == 0 || ops[0] == "-":
		return nil
	}
	fi, err := r.sh.ns.stat(absPath(hc.Dir, ops[0]))
	switch {
	case err != nil:
		return r.bashFail(hc, 1, "cd: "+ops[0]+": "+errText(err))
	case !fi.IsDir():
		return r.bashFail(hc, 1, "cd: "+ops[0]+": Not a directory")
	}
	return nil
}

// checkShift runs shiftCmd, which rewriteSpecial makes of shift [n] with
// $# after it: past the last positional parameter bash fails silently
// with status 1, where the interpreter's shift succeeds.
func checkShift(args []string) []string {
	have, err := strconv.Atoi(args[len(args)-1])
	args = append([]string{"shift"}, args[1:len(args)-1]...)
	if err != nil {
		return args
	}
	n := 1
	if len(args) == 2 {
		if n, err = strconv.Atoi(args[1]); err != nil || n < 0 {
			return args
		}
	}
	if n > have {
		return []string{"false"}
	}
	return args
}

var testUnary = map[string]bool{
	"-a": true, "-b": true, "-c": true, "-d": true, "-e": true, "-f": true, "-g": true, "-h": true,
	"-k": true, "-p": true, "-r": true, "-s": true, "-t": true, "-u": true, "-w": true, "-x": true,
	"-G": true, "-L": true, "-N": true, "-O": true, "-S": true, "-z": true, "-n": true, "-o": true,
	"-v": true, "-R": true,
}

var testBinary = map[string]bool{
	"=": true, "==": true, "!=": true, "<": true, ">": true, "-nt": true, "-ot": true, "-ef": true,
	"-a": true, "-o": true, "-eq": true, "-ne": true, "-lt": true, "-le": true, "-gt": true, "-ge": true,
}

var testIntOps = map[string]bool{"-eq": true, "-ne": true, "-lt": true, "-le": true, "-gt": true, "-ge": true}

// checkTest: the malformed test and [ expressions of up to four
// arguments, which bash decides by their count (POSIX's rules), answered
// with bash's text and status 2: a missing ], an operand where an
// operator must be, an operand of -eq and the like that is not an
// integer. Well-formed ones run in the interpreter's builtin.
func (r *run) checkTest(ctx context.Context, args []string) []string {
	hc := interp.HandlerCtx(ctx)
	name, ops := args[0], args[1:]
	if name == "[" {
		if len(ops) == 0 || ops[len(ops)-1] != "]" {
			return r.bashFail(hc, 2, "[: missing `]'")
		}
		ops = ops[:len(ops)-1]
	}
	if msg := testShape(ops); msg != "" {
		return r.bashFail(hc, 2, name+": "+msg)
	}
	// The interpreter's test recurses on each !, ( and -a or -o: a Go
	// stack that overflows ends the daemon (the operands can be a
	// million words).
	n := 0
	for _, a := range ops {
		switch a {
		case "!", "(", "-a", "-o":
			if n++; n > maxNesting {
				return r.bashFail(hc, 2, fmt.Sprintf("%s: the expression nests deeper than the fast path's limit of %d levels", name, maxNesting))
			}
		}
	}
	return nil
}

// testShape is bash's complaint about test's operands, or "".
func testShape(a []string) string {
	switch len(a) {
	case 2:
		if a[0] == "!" || testUnary[a[0]] {
			return ""
		}
		return a[0] + ": unary operator expected"
	case 3:
		switch {
		case testIntOps[a[1]]:
			for _, v := range []string{a[0], a[2]} {
				if !testInteger(v) {
					return v + ": integer expression expected"
				}
			}
			return ""
		case testBinary[a[1]]:
			return ""
		case a[0] == "!":
			return testShape(a[1:])
		case a[0] == "(" && a[2] == ")":
			return ""
		}
		return a[1] + ": binary operator expected"
	case 4:
		if a[0] == "!" {
			return testShape(a[1:])
		}
	}
	return ""
}

// testInteger: what bash's test takes as an integer: blanks around an
// optional sign and decimal digits.
func testInteger(s string) bool {
	s = strings.Trim(s, " \t\n")
	if s != "" && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// misplaced names a builtin of the top-level script that bash refuses
// where it stands, with words the interpreter does not have: return or
// local outside a function, break or continue outside a loop. Only the
// top level is checked (a sourced file may return; eval and trap run
// where they are called).
func misplaced(f *syntax.File) string {
	what := ""
	var stack []syntax.Node
	funcs, loops := 0, 0
	syntax.Walk(f, func(n syntax.Node) bool {
		if n == nil {
			top := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			switch top.(type) {
			case *syntax.FuncDecl:
				funcs--
			case *syntax.ForClause, *syntax.WhileClause:
				loops--
			}
			return true
		}
		if what != "" {
			return false
		}
		stack = append(stack, n)
		switch x := n.(type) {
		case *syntax.FuncDecl:
			funcs++
		case *syntax.ForClause, *syntax.WhileClause:
			loops++
		case *syntax.DeclClause:
			if x.Variant.Value == "local" && funcs == 0 {
				what = "local outside a function"
			}
		case *syntax.CallExpr:
			if len(x.Args) > 0 {
				switch name, _ := literal(x.Args[0]); {
				case name == "return" && funcs == 0:
					what = "return outside a function"
				case (name == "break" || name == "continue") && loops == 0 && funcs == 0:
					what = name + " outside a loop"
				}
			}
		}
		if what != "" {
			// stop here: Walk calls f(nil) only after the children of
			// a node it went into
			stack = stack[:len(stack)-1]
			return false
		}
		return true
	})
	return what
}

// shellVars are the variables a script on the fast path starts with (see
// Shell.environ) or that the shell sets.
var shellVars = map[string]bool{"HOME": true, "PATH": true, "LANG": true, "TMPDIR": true, "SHELL": true, "USER": true,
	"UID": true, "EUID": true, "GID": true, "HOSTNAME": true, "PWD": true, "IFS": true, "PPID": true, "RANDOM": true,
	"LINENO": true, "SECONDS": true, "OPTIND": true, "PS4": true, "BASH_SOURCE": true, "FUNCNAME": true, "REPLY": true}

// unboundRisk: under set -u bash ends the script at an unset variable with
// "bash: line N: x: unbound variable" and status 127, the interpreter
// with its own words and 1. A script that sets -u and reads a variable
// it never assigns (nor the environment has) may get there: it goes to
// the sandbox. Reads with a default (${x:-d}, ${x+y}) and the special
// parameters but the positional ones are safe.
func unboundRisk(f *syntax.File) string {
	nounset := false
	assigned := map[string]bool{}
	syntax.Walk(f, func(n syntax.Node) bool {
		switch x := n.(type) {
		case *syntax.CallExpr:
			for _, a := range x.Assigns {
				if a.Name != nil {
					assigned[a.Name.Value] = true
				}
			}
			words := make([]string, len(x.Args))
			for i, w := range x.Args {
				words[i], _ = literal(w)
			}
			if len(words) > 0 {
				switch words[0] {
				case "set":
					for i, w := range words[1:] {
						if strings.HasPrefix(w, "-") && !strings.HasPrefix(w, "--") && strings.ContainsRune(w, 'u') ||
							w == "-o" && i+2 < len(words) && words[i+2] == "nounset" {
							nounset = true
						}
					}
				case "read", "getopts", "mapfile", "readarray", "printf", "export", "declare", "typeset", "local", "readonly":
					for _, w := range words[1:] {
						name, _, _ := strings.Cut(w, "=")
						assigned[name] = true
					}
				}
			}
		case *syntax.DeclClause:
			for _, a := range x.Args {
				if a.Name != nil {
					assigned[a.Name.Value] = true
				}
			}
		case *syntax.WordIter:
			assigned[x.Name.Value] = true
		case *syntax.BinaryArithm:
			if w, ok := x.X.(*syntax.Word); ok {
				if v, ok := literal(w); ok {
					assigned[v] = true
				}
			}
		case *syntax.UnaryArithm:
			if w, ok := x.X.(*syntax.Word); ok {
				if v, ok := literal(w); ok {
					assigned[v] = true
				}
			}
		}
		return true
	})
	if !nounset {
		return ""
	}
	what := ""
	syntax.Walk(f, func(n syntax.Node) bool {
		pe, ok := n.(*syntax.ParamExp)
		if !ok || what != "" || pe.Param == nil {
			return what == ""
		}
		name := pe.Param.Value
		switch {
		case pe.Exp != nil || pe.Length && pe.Index != nil:
			// ${x:-d} and the like; ${#arr[@]}
		case name == "@" || name == "*" || name == "#" || name == "?" || name == "$" || name == "0" || name == "-":
		case name == pidVar || name == ppidVar || shellVars[name] || assigned[name]:
		default:
			what = "set -u with $" + name + ", which may be unset"
		}
		return what == ""
	})
	return what
}
