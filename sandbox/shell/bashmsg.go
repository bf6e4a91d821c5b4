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
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/interp"
)

// bashWhere is the prefix bash puts before its own errors: its $0 ("bash"
// under bash -c, the script's path in a script) and the line.
func bashWhere(hc interp.HandlerContext) string {
	name := hc.Env.Get("0").String()
	if name == "" {
		name = "bash"
	}
	line := uint(1)
	if hc.Pos.IsValid() && hc.Pos.Line() > 0 {
		line = hc.Pos.Line()
	}
	return fmt.Sprintf("%s: line %d", name, line)
}

// bashFail is the command that prints msg after bash's prefix and fails
// with status code.
func bashFail(hc interp.HandlerContext, code int, msg string) []string {
	return []string{errorCmd, strconv.Itoa(code), bashWhere(hc) + ": " + msg}
}

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
		return bashFail(hc, 1, "cd: too many arguments")
	case len(ops) == 0 || ops[0] == "-" || ops[0] == "":
		return nil
	}
	fi, err := r.sh.ns.stat(absPath(hc.Dir, ops[0]))
	switch {
	case err != nil:
		return bashFail(hc, 1, "cd: "+ops[0]+": "+errText(err))
	case !fi.IsDir():
		return bashFail(hc, 1, "cd: "+ops[0]+": Not a directory")
	}
	return nil
}

// checkShift: shift past the last positional parameter fails silently
// with status 1 in bash; the interpreter's succeeds.
func checkShift(ctx context.Context, args []string) []string {
	hc := interp.HandlerCtx(ctx)
	if len(args) > 2 {
		return nil
	}
	n := 1
	if len(args) == 2 {
		v, err := strconv.Atoi(args[1])
		if err != nil || v < 0 {
			return nil
		}
		n = v
	}
	have, err := strconv.Atoi(hc.Env.Get("#").String())
	if err != nil {
		return nil
	}
	if n > have {
		return []string{"false"}
	}
	return nil
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
func checkTest(ctx context.Context, args []string) []string {
	hc := interp.HandlerCtx(ctx)
	name, ops := args[0], args[1:]
	if name == "[" {
		if len(ops) == 0 || ops[len(ops)-1] != "]" {
			return bashFail(hc, 2, "[: missing `]'")
		}
		ops = ops[:len(ops)-1]
	}
	if msg := testShape(ops); msg != "" {
		return bashFail(hc, 2, name+": "+msg)
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
