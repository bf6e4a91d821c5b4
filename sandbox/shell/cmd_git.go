package shell

// git is its own package, gitcmd (git's porcelain on go-git). This file
// is the glue: it registers git, routes it (gitCanRun, for CanRun) and
// gives each run the shell's side of it (gitHost).

import (
	"io"
	"regexp"
	"strings"
	"syscall"

	"github.com/computerfs/computerfs/sandbox/shell/gitcmd"
)

func init() {
	if gitcmd.Root != wsRoot {
		panic("shell: gitcmd.Root is not the workspace")
	}
	register(&command{names: []string{"git"}, run: cmdGit, ownArgs: true}) // routed by gitCanRun
}

func cmdGit(c *cmd) int {
	return gitcmd.Run(&gitcmd.Call{Ctx: c.ctx, Args: c.args, Dir: c.dir, Stdin: c.stdin, Out: c.out, Stderr: c.stderr,
		Getenv: c.getenv, Now: c.now, FS: c.r.sh.fs, Host: gitHost{c: c}})
}

// gitCanRun reports whether the fast path runs this git command line
// (see gitcmd.CanRun).
func gitCanRun(args []string, lits []bool) (bool, string) {
	return gitcmd.CanRun(args, lits, shellRegexps{})
}

// shellRegexps are grep's regular expressions, for git's patterns.
type shellRegexps struct{}

func (shellRegexps) TranslateRE(re string, extended bool) (string, error) {
	return translateRE(re, extended)
}

func (shellRegexps) CompileRE(re string, extended, fold bool) (*regexp.Regexp, error) {
	return compileRE(re, extended, fold)
}

func (shellRegexps) CompileGo(expr string) (*regexp.Regexp, error) { return compileGo(expr) }

// gitHost is a run of git's way to the shell.
type gitHost struct {
	shellRegexps
	c *cmd
}

var _ gitcmd.Host = gitHost{}

func (h gitHost) Abs(dir, p string) string { return absPath(dir, p) }

func (h gitHost) Stat(p string) (bool, error) {
	fi, err := h.c.r.sh.ns.stat(p)
	if err != nil {
		return false, err
	}
	return fi.IsDir(), nil
}

func (h gitHost) Open(p string) (io.ReadCloser, error) { return h.c.open(p) }

func (h gitHost) ReadFile(p string) ([]byte, error) { return h.c.readFile(p) }

func (h gitHost) ErrText(err error) string { return errText(err) }

func (h gitHost) Grow(n int64) bool { return h.c.grow(n) }

func (h gitHost) ReadAll(r io.Reader) ([]byte, error) { return h.c.readAll(r) }

func (h gitHost) MemoryLimit() error { return errMemoryLimit }

func (h gitHost) OutputStopped(err error) bool {
	return err == errOutputLimit || errno(err) == syscall.EPIPE
}

// Identity is the daemon's default identity (Options.GitName, GitEmail),
// or that of the longest of Options.GitDirs that holds root.
func (h gitHost) Identity(root string) (name, email string) {
	o := h.c.r.sh.opts
	name, email = o.GitName, o.GitEmail
	best := -1
	for _, d := range o.GitDirs {
		dir := strings.TrimSuffix(d.Dir, "/")
		if len(dir) > best && (root == dir || strings.HasPrefix(root, dir+"/")) {
			best, name, email = len(dir), d.Name, d.Email
		}
	}
	return name, email
}

func (h gitHost) MatchTooCostly(re *regexp.Regexp, n int) bool { return h.c.matchTooCostly(re, n) }

func (h gitHost) LineDiff(a, b []string) []gitcmd.Edit {
	ops := h.c.lineDiff(a, b)
	if ops == nil {
		return nil
	}
	out := make([]gitcmd.Edit, len(ops))
	for i, o := range ops {
		out[i] = gitcmd.Edit{Kind: o.kind, A: o.a, B: o.b}
	}
	return out
}

func (h gitHost) Hunks(ops []gitcmd.Edit, ctx int) []gitcmd.Hunk {
	in := make([]editOp, len(ops))
	for i, o := range ops {
		in[i] = editOp{kind: o.Kind, a: o.A, b: o.B}
	}
	var out []gitcmd.Hunk
	for _, hk := range hunks(in, ctx) {
		g := gitcmd.Hunk{AStart: hk.aStart, Ranges: hk.ranges(), Ops: make([]gitcmd.Edit, len(hk.ops))}
		for i, o := range hk.ops {
			g.Ops[i] = gitcmd.Edit{Kind: o.kind, A: o.a, B: o.b}
		}
		out = append(out, g)
	}
	return out
}
