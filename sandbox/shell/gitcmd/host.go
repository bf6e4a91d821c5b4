// Package gitcmd is git on the shell fast path: the common read and write
// subcommands of the git CLI, run in-process with go-git's object storage
// on the workspace's checkout. Output follows the git CLI (2.39) byte for
// byte for the forms that CanRun accepts; anything else is a usage error
// here (status 129) and is routed to the sandbox, where the real git runs.
//
// The package knows nothing of the interpreter that runs it: the shell
// (sandbox/shell, cmd_git.go) hands each run a Call, with its streams and
// the workspace's file system, and a Host for the rest of its glue (the
// namespace outside the workspace, the call's memory budget, the daemon's
// default identity, and the shell's regular expressions and line diff, so
// that git grep and git diff behave and are bounded as grep and diff are).
package gitcmd

import (
	"bufio"
	"context"
	"io"
	"regexp"
	"time"

	"github.com/computerfs/computerfs/wsfs"
)

// Root is where the workspace is in the shell's namespace; the store path
// of /workspace/a is /a.
const Root = "/workspace"

// Call is one run of git: its command line, streams and environment.
type Call struct {
	Ctx    context.Context
	Args   []string // Args[0] is "git"
	Dir    string   // the working directory in the namespace
	Stdin  io.Reader
	Out    *bufio.Writer // stdout; flushed before anything goes to Stderr
	Stderr io.Writer
	Getenv func(name string) string
	Now    func() time.Time
	FS     *wsfs.FS // the workspace (Root in the namespace)
	Host   Host
}

// Host is the shell's side of a run of git.
type Host interface {
	// Abs makes p absolute against dir and cleans it lexically, as the
	// shell's cd does.
	Abs(dir, p string) string
	// Stat reports whether a path of the namespace is a directory.
	Stat(path string) (isDir bool, err error)
	// Open opens a file of the namespace for reading (a patch: it may
	// be in /tmp or a pipe).
	Open(path string) (io.ReadCloser, error)
	// ReadFile reads a file named as on the shell's command line
	// (relative to Call.Dir, "-" is stdin) whole, through the call's
	// memory budget.
	ReadFile(name string) ([]byte, error)
	// ErrText is strerror(3) of err, as GNU tools print it.
	ErrText(err error) string

	// Grow charges n bytes to the call's memory budget; false (and the
	// call is being stopped, the shell has said why) when that crosses it.
	Grow(n int64) bool
	// ReadAll reads r to its end through the budget.
	ReadAll(r io.Reader) ([]byte, error)
	// MemoryLimit is the error of a call over its memory budget
	// (ReadAll's).
	MemoryLimit() error
	// OutputStopped reports whether err, from a write to Out, is the
	// call's output limit or a closed pipe: the command ends quietly.
	OutputStopped(err error) bool

	// Identity is the daemon's default identity for commits in the
	// repository at root (a namespace path), as git's system
	// configuration is in the sandbox; "" when there is none.
	Identity(root string) (name, email string)

	Regexps
	// MatchTooCostly reports whether matching re on n bytes may cost too
	// much (the shell has said so on stderr).
	MatchTooCostly(re *regexp.Regexp, n int) bool

	// LineDiff is a shortest edit script from a to b, charged to the
	// budget (nil when the call is being stopped); Hunks groups one into
	// unified hunks with ctx lines of context, as diff -u does.
	LineDiff(a, b []string) []Edit
	Hunks(ops []Edit, ctx int) []Hunk
}

// Regexps are the shell's regular expressions, grep's, with which git's
// patterns are read when a command line is routed and when it runs.
type Regexps interface {
	// TranslateRE turns a POSIX regular expression into Go's syntax.
	TranslateRE(re string, extended bool) (string, error)
	// CompileRE compiles a POSIX regular expression.
	CompileRE(re string, extended, fold bool) (*regexp.Regexp, error)
	// CompileGo compiles a Go expression within the shell's bound on its
	// size.
	CompileGo(expr string) (*regexp.Regexp, error)
}

// Edit is one line of an edit script: ' ' kept, '-' removed, '+' added;
// A and B are its line indexes in a and b.
type Edit struct {
	Kind byte
	A, B int
}

// Hunk is one hunk of a unified diff; Ranges is its header without the
// "@@": "-a,n +b,m".
type Hunk struct {
	Ops    []Edit
	AStart int
	Ranges string
}
