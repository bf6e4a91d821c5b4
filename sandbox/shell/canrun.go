package shell

import (
	"fmt"
	"path"
	"strings"

	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"
)

// Interpreter builtins that mvdan.cc/sh does not implement (it fails them
// at run time): a script using one must run in the sandbox.
var unimplemented = map[string]bool{
	"bind": true, "bg": true, "fg": true, "jobs": true, "kill": true, "disown": true, "suspend": true,
	"compgen": true, "complete": true, "compopt": true, "enable": true, "fc": true, "history": true,
	"logout": true, "newgrp": true, "ulimit": true, "caller": true, "help": true,
}

// CanRun reports whether every command of the script is built into the
// fast path, so that the whole script can run here (the auto backend
// routes it to the sandbox otherwise, and never half-runs it in one
// place). reason says why not. It looks at the script only: a command
// name computed at run time ($CMD, eval of a variable), source of a file
// and process substitution are refused.
func CanRun(command string) (ok bool, reason string) {
	f, err := parse(command)
	if err != nil {
		return false, fmt.Sprintf("syntax error: %v", err)
	}
	if what := misplaced(f); what != "" {
		return false, what + " is not supported"
	}
	return canRunFile(f, newRouter(nil, wsRoot))
}

func canRunFile(f *syntax.File, rt *router) (bool, string) {
	rt = rt.enter(f)
	if what := unsupported(f); what != "" {
		return false, what + " is not supported"
	}
	funcs := map[string]bool{}
	syntax.Walk(f, func(n syntax.Node) bool {
		if fd, ok := n.(*syntax.FuncDecl); ok && fd.Name != nil {
			funcs[fd.Name.Value] = true
		}
		return true
	})
	reason := ""
	syntax.Walk(f, func(n syntax.Node) bool {
		if reason != "" {
			return false
		}
		if rd, ok := n.(*syntax.Redirect); ok && rd.Word != nil {
			if w, ok := literal(rd.Word); ok && (sandboxPath(w) || outsidePath(w)) {
				reason = fmt.Sprintf("%s is the sandbox's", w)
				return false
			}
			return true
		}
		call, ok := n.(*syntax.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		words := make([]string, len(call.Args))
		lits := make([]bool, len(call.Args))
		for i, w := range call.Args {
			words[i], lits[i] = literal(w)
			if i > 0 && lits[i] && sandboxPath(words[i]) {
				reason = fmt.Sprintf("%s is the sandbox's", words[i])
				return false
			}
		}
		reason = checkCommand(words, lits, funcs, rt)
		return reason == ""
	})
	if reason != "" {
		return false, reason
	}
	return true, ""
}

// literal returns the value of a word with no expansion in it (quotes
// removed), and whether it is one.
func literal(w *syntax.Word) (string, bool) {
	var b strings.Builder
	for _, p := range w.Parts {
		switch x := p.(type) {
		case *syntax.Lit:
			b.WriteString(unescapeLit(x.Value))
		case *syntax.SglQuoted:
			b.WriteString(x.Value)
		case *syntax.DblQuoted:
			for _, q := range x.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok {
					return "", false
				}
				b.WriteString(l.Value)
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}

// unescapeLit removes the backslashes of an unquoted word as the shell
// does: each quotes the character after it; a last one stays.
func unescapeLit(v string) string {
	if !strings.Contains(v, `\`) {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' && i+1 < len(v) {
			i++
		}
		b.WriteByte(v[i])
	}
	return b.String()
}

func checkCommand(words []string, lits []bool, funcs map[string]bool, rt *router) string {
	if len(words) == 0 {
		return ""
	}
	if !lits[0] {
		return "a command name is computed at run time"
	}
	name := commandName(words[0])
	switch {
	case funcs[name]:
		return ""
	case unimplemented[name]:
		return fmt.Sprintf("%s is not built in", name)
	case name == "source" || name == ".":
		if len(words) < 2 || !lits[1] {
			return "source of a file computed at run time"
		}
		return rt.scriptFile(words[1], false, funcs)
	case name == "sh" || name == "bash" || name == "dash":
		return rt.shell(words, lits, funcs)
	case strings.Contains(name, "/") && !IsBuiltin(name):
		return rt.scriptFile(words[0], true, nil)
	case name == "eval":
		src := strings.Join(words[1:], " ")
		for _, l := range lits[1:] {
			if !l {
				return "eval of a string computed at run time"
			}
		}
		if rt.depth >= maxRouteDepth {
			return "eval nested too deep"
		}
		f, err := parse(src)
		if err != nil {
			return fmt.Sprintf("eval: syntax error: %v", err)
		}
		if ok, why := canRunFile(f, rt.nest()); !ok {
			return why
		}
		return ""
	case name == "set":
		// The fast path's xtrace shows what it runs, and that is not
		// bash's script: its expansion guards (expguard.go) among it.
		for i, w := range words[1:] {
			if w == "--" {
				break
			}
			if strings.HasPrefix(w, "-") && strings.ContainsRune(w[1:], 'x') && !strings.HasPrefix(w, "--") ||
				(w == "-o" || w == "+o") && i+2 < len(words) && words[i+2] == "xtrace" {
				return "set -x: xtrace output is bash's only in the sandbox"
			}
		}
		return ""
	case name == "command" || name == "exec" || name == "builtin":
		i := 1
		for i < len(words) && strings.HasPrefix(words[i], "-") {
			if words[i] == "-v" || words[i] == "-V" {
				return ""
			}
			i++
		}
		return checkCommand(words[i:], lits[i:], funcs, rt)
	case name == "env":
		n, why := envOpts(words[1:])
		if why != "" {
			return why
		}
		return checkCommand(words[1+n:], lits[1+n:], funcs, rt)
	case name == "timeout":
		return timeoutCanRun(words, lits, rt)
	case name == "xargs":
		n, why := xargsOpts(words[1:])
		if why != "" {
			return why
		}
		if 1+n >= len(words) {
			return ""
		}
		return checkCommand(words[1+n:], lits[1+n:], funcs, rt)
	case name == "git":
		if ok, why := gitCanRun(words, lits); !ok {
			return why
		}
		return rt.gitNoRepo(words) // staticrisk.go
	case name == "type":
		return typeCheck(words[1:]) // staticrisk.go
	case name == "find":
		for i := 1; i < len(words); i++ {
			if words[i] == "-exec" || words[i] == "-execdir" || words[i] == "-ok" {
				end := i + 1
				for end < len(words) && words[end] != ";" && words[end] != "+" {
					end++
				}
				if i+1 < len(words) {
					if why := checkCommand(words[i+1:end], lits[i+1:end], funcs, rt); why != "" {
						return why
					}
				}
			}
		}
	case name == "printf":
		return printfCheck(words[1:])
	case name == "jq":
		return jqCanRun(words, lits)
	}
	// the table the commands run from (see command)
	if d := builtins[name]; d != nil {
		return d.route(name, words[1:])
	}
	if interp.IsBuiltin(name) {
		return ""
	}
	return fmt.Sprintf("%s is not built in", words[0])
}

// sandboxRoots are the top directories of the sandbox's root file system
// that the fast path's namespace does not have (its world is /workspace,
// /tmp and a few devices): the host's userland, /proc, the other devices.
var sandboxRoots = map[string]bool{"usr": true, "bin": true, "sbin": true, "lib": true, "lib32": true, "lib64": true,
	"libx32": true, "etc": true, "opt": true, "proc": true, "dev": true, "sys": true, "cache": true}

// outsidePath reports whether a redirection's file is outside the fast
// path's world (/workspace, /tmp, its devices), as in > /nodir/out: the
// sandbox says what its root file system has there. (Only redirections:
// an argument such as grep's "/api" is seldom a path.)
func outsidePath(w string) bool {
	if len(w) < 2 || w[0] != '/' {
		return false
	}
	clean := path.Clean(w)
	top, _, _ := strings.Cut(clean[1:], "/")
	return top != "workspace" && top != "tmp" && top != "dev"
}

// sandboxPath reports whether an argument (or the value of an --opt=PATH)
// names a path there: a command that reads /etc/os-release, lists
// /usr/local/go/bin or reads /dev/urandom gets the sandbox's answer, not
// the fast path's "No such file or directory".
func sandboxPath(w string) bool {
	if i := strings.IndexByte(w, '='); i >= 0 && strings.HasPrefix(w, "-") {
		w = w[i+1:]
	}
	if len(w) < 2 || w[0] != '/' || strings.ContainsAny(w, " \t\n") {
		return false
	}
	clean := path.Clean(w)
	top, _, _ := strings.Cut(clean[1:], "/")
	if !sandboxRoots[top] {
		return false
	}
	if top == "dev" {
		for _, d := range devFiles {
			if clean == "/dev/"+d {
				return false
			}
		}
		return clean != "/dev"
	}
	return true
}
