package shell

import (
	"path"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Two run-time errors the interpreter answers in its own words and goes
// on after, where bash prints its message and ends the command or the
// script: arithmetic division by zero, and assignment to a read-only
// variable. Neither can be caught at run time, so a script in which
// either is knowable from the text is sent to the sandbox:
//   - a / or % (or /=, %=) whose right operand is not a literal number
//     other than zero ($((1/0)), $((a/b)): b may be zero at run time);
//   - a name declared read-only (readonly r, declare -r r, local -r r)
//     and assigned anywhere else in the script (r=2, for r in, read r,
//     unset r, printf -v r, (( r++ )), a second readonly r=...).
//
//   - an assignment to one of bash's own read-only variables (UID=0).

// staticRisk names what of the above the script holds, or "".
func staticRisk(f *syntax.File) string {
	if zeroDivision(f) {
		return "arithmetic division by zero or by a value known only at run time"
	}
	if n := readonlyAssigned(f); n != "" {
		return "an assignment to " + n + ", declared read-only"
	}
	return ""
}

// zeroDivision reports a / or % in the script's arithmetic by anything
// but a literal number other than zero.
func zeroDivision(f *syntax.File) bool {
	found := false
	syntax.Walk(f, func(n syntax.Node) bool {
		if found {
			return false
		}
		if b, ok := n.(*syntax.BinaryArithm); ok {
			switch b.Op {
			case syntax.Quo, syntax.Rem, syntax.QuoAssgn, syntax.RemAssgn:
				found = true
				if w, ok := b.Y.(*syntax.Word); ok {
					if v, ok := literal(w); ok && isNonZeroNumber(v) {
						found = false
					}
				}
			}
		}
		return !found
	})
	return found
}

// isNonZeroNumber reports a decimal constant other than zero (2, 100;
// not 0, 00, 08, 0x10 or a name).
func isNonZeroNumber(v string) bool {
	return v != "" && v[0] >= '1' && v[0] <= '9' && strings.Trim(v, "0123456789") == ""
}

// readonlyAssigned is a name the script declares read-only and assigns
// in another place, or "". It is conservative: the order is not looked
// at (r=1; readonly r counts too), which only sends more to the sandbox.
func readonlyAssigned(f *syntax.File) string {
	ro := map[string]bool{}
	// bash's own, read-only from the start: one assignment is one too many
	own := map[string]bool{"UID": true, "EUID": true, "PPID": true, "SHELLOPTS": true, "BASHOPTS": true, "BASH_VERSINFO": true}
	for n := range own {
		ro[n] = true
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		d, ok := n.(*syntax.DeclClause)
		if !ok {
			return true
		}
		readonly := d.Variant.Value == "readonly"
		for _, a := range d.Args {
			if a.Name == nil && a.Value != nil {
				if v, ok := literal(a.Value); ok && strings.HasPrefix(v, "-") && strings.Contains(v, "r") {
					readonly = true
				}
			}
		}
		if readonly {
			for _, a := range d.Args {
				if a.Name != nil {
					ro[a.Name.Value] = true
				}
			}
		}
		return true
	})
	count := map[string]int{}
	target := func(name string) {
		if ro[name] {
			count[name]++
		}
	}
	arithTarget := func(x syntax.ArithmExpr) {
		if w, ok := x.(*syntax.Word); ok {
			if v, ok := literal(w); ok {
				target(v)
			}
		}
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		switch x := n.(type) {
		case *syntax.Assign:
			if x.Name != nil {
				target(x.Name.Value)
			}
		case *syntax.WordIter:
			if x.Name != nil {
				target(x.Name.Value)
			}
		case *syntax.BinaryArithm:
			switch x.Op {
			case syntax.Assgn, syntax.AddAssgn, syntax.SubAssgn, syntax.MulAssgn, syntax.QuoAssgn,
				syntax.RemAssgn, syntax.AndAssgn, syntax.OrAssgn, syntax.XorAssgn, syntax.ShlAssgn, syntax.ShrAssgn:
				arithTarget(x.X)
			}
		case *syntax.UnaryArithm:
			if x.Op == syntax.Inc || x.Op == syntax.Dec {
				arithTarget(x.X)
			}
		case *syntax.CallExpr:
			if len(x.Args) == 0 {
				break
			}
			switch name, _ := literal(x.Args[0]); name {
			case "read", "unset", "printf", "getopts", "mapfile", "readarray", "let", "eval":
				for _, w := range x.Args[1:] {
					if v, ok := literal(w); ok {
						for _, part := range strings.FieldsFunc(v, func(r rune) bool {
							return !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
						}) {
							target(part)
						}
					}
				}
			}
		}
		return true
	})
	for name, k := range count {
		if k > 1 || own[name] {
			return name
		}
	}
	return ""
}

// gitNoRepo says why a git command goes to the sandbox when no
// repository is found from the directory it runs in, or "". Outside a
// repository git's message names the mount point at which its search
// stopped ("or any parent up to mount point ..., Stopping at file
// system boundary"): that is the sandbox's mount table, which the fast
// path does not know. init, clone, --version and help need no
// repository and stay.
func (rt *router) gitNoRepo(words []string) string {
	if rt.sh == nil {
		return ""
	}
	for _, w := range words[1:] {
		switch w {
		case "init", "clone", "--version", "version", "help", "--help", "-h":
			return ""
		}
		if w == "-C" || strings.HasPrefix(w, "--git-dir") || strings.HasPrefix(w, "--work-tree") {
			return "" // another directory: the interpreter's git looks there itself
		}
		if !strings.HasPrefix(w, "-") {
			break
		}
	}
	dir := rt.cwd
	if rt.cd {
		dir = wsRoot // unknown after a cd: the workspace's repository, if any
	}
	for {
		if _, err := rt.sh.ns.stat(strings.TrimSuffix(dir, "/") + "/.git"); err == nil {
			return ""
		}
		if dir == "/" || dir == "" || dir == "." {
			break
		}
		dir = path.Dir(dir)
	}
	return "git outside a repository (its message names the sandbox's mounts)"
}

// typeCheck routes the options of type that the fast path's lacks
// (-a lists every match on PATH, -f skips functions).
func typeCheck(args []string) string {
	for _, a := range args {
		if a == "--" || !strings.HasPrefix(a, "-") {
			break
		}
		if a != "-t" && a != "-p" && a != "-P" {
			return "type " + a + " is not built in"
		}
	}
	return ""
}
