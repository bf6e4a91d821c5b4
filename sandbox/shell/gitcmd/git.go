package gitcmd

// The command line of git (its flag tables, the routing of CanRun) and a
// run's setup: the repository found above the working directory, opened
// with go-git on the workspace's store.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/wsfs"
)

// flagKind says how a flag takes its value.
type flagKind int

const (
	fBool     flagKind = iota // --stat
	fValue                    // -m MSG, -mMSG, --message=MSG, --message MSG
	fOptValue                 // --abbrev[=N]: a value only after "="
)

type flagDef struct {
	name string // canonical name
	kind flagKind
}

// gitSub is one supported subcommand.
type gitSub struct {
	run   func(g *gitCmd) int
	flags map[string]flagDef
	// numeric accepts -N as --max-count=N (log).
	numeric bool
	// noRepo: runs outside a repository (init).
	noRepo bool
}

// gitSubs is filled by the init functions of the git*.go files.
var gitSubs = map[string]*gitSub{}

// flags builds a flag table from "name|alias|alias" keys; a trailing "="
// on the first name means it takes a value, "=?" an optional one.
func flags(specs ...string) map[string]flagDef {
	m := map[string]flagDef{}
	for _, s := range specs {
		names := strings.Split(s, "|")
		kind := fBool
		switch {
		case strings.HasSuffix(names[0], "=?"):
			kind, names[0] = fOptValue, strings.TrimSuffix(names[0], "=?")
		case strings.HasSuffix(names[0], "="):
			kind, names[0] = fValue, strings.TrimSuffix(names[0], "=")
		}
		for _, n := range names {
			n = strings.TrimSuffix(strings.TrimSuffix(n, "?"), "=")
			m[n] = flagDef{name: names[0], kind: kind}
		}
	}
	return m
}

// gitArgs is a parsed command line of a subcommand.
type gitArgs struct {
	opts  map[string][]string // canonical flag → values ("" for bools)
	order []string            // flags in the order given
	args  []string            // the other arguments
	dash  bool                // "--" was given
	nDash int                 // index in args where the arguments after "--" start
	re    Regexps             // how its patterns are read
	raw   []string            // the command line after the subcommand
}

func (a *gitArgs) has(name string) bool { _, ok := a.opts[name]; return ok }

func (a *gitArgs) val(name string) string {
	v := a.opts[name]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// usageError is a command line the fast path does not take.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func parseGitArgs(sub string, s *gitSub, argv []string) (*gitArgs, error) {
	a := &gitArgs{opts: map[string][]string{}, raw: argv}
	set := func(name, v string) {
		a.opts[name] = append(a.opts[name], v)
		a.order = append(a.order, name)
	}
	for i := 0; i < len(argv); i++ {
		w := argv[i]
		switch {
		case a.dash || w == "-" || !strings.HasPrefix(w, "-"):
			a.args = append(a.args, w)
		case w == "--":
			a.dash = true
			a.nDash = len(a.args)
		case strings.HasPrefix(w, "--"):
			name, v, hasV := strings.Cut(w, "=")
			d, ok := s.flags[name]
			if !ok {
				return nil, &usageError{fmt.Sprintf("unknown option `%s'", strings.TrimPrefix(name, "--"))}
			}
			switch d.kind {
			case fBool:
				if hasV {
					return nil, &usageError{fmt.Sprintf("option `%s' takes no value", strings.TrimPrefix(name, "--"))}
				}
			case fValue:
				if !hasV {
					if i+1 >= len(argv) {
						return nil, &usageError{fmt.Sprintf("option `%s' requires a value", strings.TrimPrefix(name, "--"))}
					}
					i++
					v = argv[i]
				}
			}
			set(d.name, v)
		default:
			if s.numeric && len(w) > 1 && isDigits(w[1:]) {
				set("--max-count", w[1:])
				continue
			}
			// a cluster of short flags: -am MSG, -n5, -sb
			for j := 1; j < len(w); j++ {
				d, ok := s.flags["-"+w[j:j+1]]
				if !ok {
					return nil, &usageError{fmt.Sprintf("unknown switch `%s'", w[j:j+1])}
				}
				if d.kind == fBool {
					set(d.name, "")
					continue
				}
				v := w[j+1:]
				if v == "" && d.kind == fValue {
					if i+1 >= len(argv) {
						return nil, &usageError{fmt.Sprintf("switch `%s' requires a value", w[j:j+1])}
					}
					i++
					v = argv[i]
				}
				set(d.name, v)
				break
			}
		}
	}
	return a, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// gitGlobal parses the options before the subcommand: -C DIR, -c K=V,
// --no-pager and friends. It returns the index of the subcommand.
func gitGlobal(argv []string, each func(opt, val string)) (int, error) {
	i := 1
	for ; i < len(argv); i++ {
		w := argv[i]
		switch {
		case w == "--no-pager" || w == "-P" || w == "--no-optional-locks":
			each(w, "")
		case w == "-C" || w == "-c":
			if i+1 >= len(argv) {
				return 0, &usageError{fmt.Sprintf("no directory given for %s", w)}
			}
			i++
			each(w, argv[i])
		case strings.HasPrefix(w, "-"):
			return 0, &usageError{fmt.Sprintf("unknown option: %s", w)}
		default:
			return i, nil
		}
	}
	return i, nil
}

// gitConfigOK lists the -c settings the fast path honours.
var gitConfigOK = map[string]bool{"user.name": true, "user.email": true, "core.pager": true, "advice.detachedhead": true}

// gitConfigValueOK lists settings honoured with some values only.
var gitConfigValueOK = map[string]map[string]bool{
	"color.ui": {"never": true, "false": true, "auto": true}, "color.diff": {"never": true, "false": true, "auto": true},
	"color.status": {"never": true, "false": true, "auto": true}, "core.quotepath": {"true": true, "on": true, "1": true},
}

// gitUnsupported explains why the fast path will not run a git command
// line, or returns "" if it will.
func gitUnsupported(argv []string, re Regexps) string {
	var why string
	i, err := gitGlobal(argv, func(opt, val string) {
		if opt == "-c" {
			k, v, _ := strings.Cut(val, "=")
			k = strings.ToLower(k)
			if !gitConfigOK[k] && !gitConfigValueOK[k][strings.ToLower(v)] && why == "" {
				why = fmt.Sprintf("git -c %s is not supported on the fast path", k)
			}
		}
	})
	if err != nil {
		return "git: " + err.Error()
	}
	if why != "" {
		return why
	}
	if i >= len(argv) {
		return "git with no subcommand prints its help"
	}
	sub := argv[i]
	s, ok := gitSubs[sub]
	if !ok {
		return fmt.Sprintf("git %s is not supported on the fast path", sub)
	}
	if len(argv) == i+2 && argv[i+1] == "-h" {
		return fmt.Sprintf("git %s -h prints its usage", sub)
	}
	a, err := parseGitArgs(sub, s, argv[i+1:])
	if err != nil {
		return fmt.Sprintf("git %s: %v", sub, err)
	}
	a.re = re
	if c, ok := gitChecks[sub]; ok {
		if why := c(a); why != "" {
			return fmt.Sprintf("git %s: %s", sub, why)
		}
	}
	return ""
}

// gitChecks are extra checks of a subcommand's arguments that the flag
// table cannot say (which modes of a flag are supported).
var gitChecks = map[string]func(a *gitArgs) string{}

// CanRun reports whether the fast path runs this git command line, and
// why not. args[0] is "git". lits says which words are literal: a word
// computed at run time could be any flag, so only arguments after the
// subcommand that cannot be flags (after "--") may be computed.
func CanRun(args []string, lits []bool, re Regexps) (bool, string) {
	words := append([]string(nil), args...)
	var sub *gitSub
	for i := 1; i < len(words) && i < len(lits) && lits[i]; i++ {
		if words[i] == "-C" || words[i] == "-c" {
			i++
			continue
		}
		if !strings.HasPrefix(words[i], "-") {
			sub = gitSubs[words[i]]
			break
		}
	}
	for i := range words {
		if i < len(lits) && !lits[i] {
			if sawDashDash(args[:i], lits) {
				words[i] = "computed"
				continue
			}
			// the value of a flag (git commit -m "$MSG") is data
			if i > 0 && lits[i-1] && sub != nil && takesValue(sub, words[i-1]) {
				words[i] = "computed"
				continue
			}
			return false, "git with arguments computed at run time"
		}
	}
	if why := gitUnsupported(words, re); why != "" {
		return false, why
	}
	return true, ""
}

// takesValue reports whether the flag w is followed by its value: -m,
// --message, or a cluster of short flags ending in one (-am).
func takesValue(s *gitSub, w string) bool {
	if strings.HasPrefix(w, "--") {
		d, ok := s.flags[w]
		return ok && d.kind == fValue
	}
	if !strings.HasPrefix(w, "-") || len(w) < 2 {
		return false
	}
	for j := 1; j < len(w); j++ {
		d, ok := s.flags["-"+w[j:j+1]]
		if !ok {
			return false
		}
		if d.kind != fBool {
			return j == len(w)-1 && d.kind == fValue
		}
	}
	return false
}

func sawDashDash(args []string, lits []bool) bool {
	for i, w := range args {
		if w == "--" && lits[i] {
			return true
		}
	}
	return false
}

// gitCmd is one run of a git subcommand.
type gitCmd struct {
	ctx    context.Context
	args   []string // args[0] is "git"
	stdin  io.Reader
	out    *bufio.Writer
	stderr io.Writer
	call   *Call
	host   Host

	sub  string
	a    *gitArgs
	cfgs map[string]string // -c settings
	dir  string            // working directory (after -C)

	root   string // the work tree's path in the namespace (/workspace/repo)
	prefix string // the working directory relative to root, "" or "a/b/"
	wfs    *wsfs.FS
	st     *filesystem.Storage
	repo   *git.Repository
	// shallow holds the boundary commits of a shallow clone (.git/shallow),
	// whose parents are not in the repository: they count as roots.
	shallow map[plumbing.Hash]bool
	// dirs caches directory listings of the work tree for one command
	// (status reads each directory once for tracked and untracked files).
	dirs map[string]*dirInfo
	// track is the upstream (origin/x) of the branch being created.
	track string
}

// maxPathDepth is the deepest path the fast path's git takes, in work
// tree directories, index entries and tree objects alike: git's own
// core.maxTreeDepth (4096). maxPathLen bounds a path's length. The agent
// makes trees of any depth (a million directories through the mount, or
// tree objects made by the sandbox's git); the walks over them recurse a
// level deep on each and hold a path a level, so past these bounds a
// command stops with errTooDeep rather than take the daemon's stack to
// Go's fatal limit. The sandbox's git takes such a tree as git does.
const (
	maxPathDepth = 4096
	maxPathLen   = 64 << 10
)

var errTooDeep = fmt.Errorf("a path is deeper than %d levels (git's core.maxTreeDepth) or longer than %d bytes: run this git command in the sandbox", maxPathDepth, maxPathLen)

// tooDeep reports whether p, a work-tree path, is past maxPathDepth or
// maxPathLen.
func tooDeep(p string) bool {
	return len(p) > maxPathLen || strings.Count(p, "/") >= maxPathDepth
}

// dirInfo is a work-tree directory as the agent's programs meet it
// through the kernel, resolved once per command: wsfs's checks for the
// agent (the read bit to list it, the search bits to reach it and to stat
// its entries, the path rules' denied names left out), carried down the
// walk by inode rather than a path lookup per file.
type dirInfo struct {
	d      wsfs.Dir
	ents   map[string]kv.Dirent // nil: not a directory, or not listable (err)
	err    error                // EACCES: the agent may not list it
	warned bool
}

func (g *gitCmd) dirInfo(dir string) (*dirInfo, error) {
	if di, ok := g.dirs[dir]; ok {
		return di, nil
	}
	if tooDeep(dir) {
		return nil, errTooDeep // before the recursion to the parent below
	}
	if g.dirs == nil {
		g.dirs = map[string]*dirInfo{}
	}
	di := &dirInfo{}
	var err error
	if dir == "" {
		di.d, err = g.wfs.OpenDir(g.file(dir))
	} else {
		var parent *dirInfo
		if parent, err = g.dirInfo(parentDir(dir)); err == nil {
			e, ok := parent.ents[dir[strings.LastIndexByte(dir, '/')+1:]]
			switch {
			case parent.err != nil || !ok:
				// A parent it may search but not list (0711), or a name
				// not in its listing (gone, or one the rules leave out):
				// the path lookup answers.
				di.d, err = g.wfs.OpenDir(g.file(dir))
			case e.Type != kv.S_IFDIR:
				err = syscall.ENOTDIR
			default:
				di.d, err = g.wfs.Child(parent.d, e)
			}
		}
	}
	if err == nil {
		m := map[string]kv.Dirent{}
		err = g.wfs.List(di.d, func(d kv.Dirent) bool { m[d.Name] = d; return true })
		if err == nil {
			di.ents = m
		}
	}
	switch {
	case err == nil, isNotExist(err):
	case isDenied(err):
		di.err = err
	default:
		return nil, err
	}
	g.dirs[dir] = di
	return di, nil
}

// listDir lists a work-tree directory by name, cached; nil if it is not a
// directory. A directory the agent may not list lists as empty, with
// git's warning ("could not open directory"), once per command, as git
// run as the agent on the mount says it and goes on.
func (g *gitCmd) listDir(dir string) (map[string]kv.Dirent, error) {
	di, err := g.dirInfo(dir)
	if err != nil {
		return nil, err
	}
	if di.err != nil {
		if !di.warned {
			di.warned = true
			g.warnf("could not open directory '%s/': %s", dir, g.host.ErrText(syscall.EACCES))
		}
		return map[string]kv.Dirent{}, nil
	}
	return di.ents, nil
}

// isDenied reports whether err is the agent's lack of permission (the
// kernel's EACCES, or a path rule's refusal, which unwraps to it).
func isDenied(err error) bool {
	return errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM)
}

// warnf prints git's "warning: ..." on stderr, after what is on stdout.
func (g *gitCmd) warnf(format string, a ...any) {
	g.out.Flush()
	fmt.Fprintf(g.stderr, "warning: "+format+"\n", a...)
}

// lstatWork is Lstat of a work-tree file as the agent's lstat(2) answers
// it (EACCES without the search bit of a directory above it, or for a
// path the rules deny), through the cached listings.
func (g *gitCmd) lstatWork(p string) (kv.Attr, error) {
	di, err := g.dirInfo(parentDir(p))
	if err != nil {
		return kv.Attr{}, err
	}
	if di.ents == nil && di.err == nil {
		return kv.Attr{}, syscall.ENOENT
	}
	if err := di.d.Search(); err != nil {
		return kv.Attr{}, err
	}
	e, ok := di.ents[p[strings.LastIndexByte(p, '/')+1:]]
	if di.err != nil || !ok {
		// Not listed, or not in the listing (gone, or a name the rules
		// leave out): the path lookup says which.
		return g.wfs.Lstat(g.file(p))
	}
	return g.wfs.Store().GetAttr(e.Ino)
}

// Run runs a git command line for the shell and returns its exit status.
func Run(c *Call) int {
	g := &gitCmd{ctx: c.Ctx, args: c.Args, stdin: c.Stdin, out: c.Out, stderr: c.Stderr, call: c, host: c.Host,
		cfgs: map[string]string{}, dir: c.Dir}
	var derr error
	i, err := gitGlobal(g.args, func(opt, val string) {
		switch opt {
		case "-C":
			d := g.host.Abs(g.dir, val)
			if isDir, err := g.host.Stat(d); err != nil || !isDir {
				if derr == nil {
					derr = fmt.Errorf("cannot change to '%s': %s", val, g.host.ErrText(orNotDir(err)))
				}
			}
			g.dir = strings.TrimSuffix(d, "/")
		case "-c":
			k, v, _ := strings.Cut(val, "=")
			g.cfgs[strings.ToLower(k)] = v
		default:
			g.cfgs[opt] = "true"
		}
	})
	if err == nil && i >= len(g.args) {
		fmt.Fprint(g.stderr, "usage: git [--version] [--help] [-C <path>] [-c <name>=<value>] <command> [<args>]\n")
		return 1
	}
	if why := gitUnsupported(g.args, g.host); why != "" {
		if err == nil {
			if _, ok := gitSubs[g.args[i]]; !ok && !gitKnown[g.args[i]] {
				fmt.Fprintf(g.stderr, "git: '%s' is not a git command. See 'git --help'.\n", g.args[i])
				return 1
			}
		}
		fmt.Fprintf(g.stderr, "%s (the shell fast path runs only some forms of git; run it in the sandbox)\n", why)
		return 129
	}
	if derr != nil {
		fmt.Fprintf(g.stderr, "fatal: %v\n", derr)
		return 128
	}
	g.sub = g.args[i]
	s := gitSubs[g.sub]
	g.a, _ = parseGitArgs(g.sub, s, g.args[i+1:])
	g.a.re = g.host
	if !s.noRepo {
		if code, ok := g.open(); !ok {
			return code
		}
		defer g.st.Close()
		if !gitReadOnly[g.sub] {
			// One writer of the repository at a time in the daemon: the
			// syncer does not commit in the middle of this command.
			defer g.wfs.LockRepo(g.file(".git"))()
			for _, f := range []string{"MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD", "rebase-merge", "rebase-apply", "BISECT_LOG"} {
				if _, err := g.wfs.Lstat(g.file(".git/" + f)); err == nil {
					return g.usage("a merge, rebase, cherry-pick, revert or bisect is in progress")
				}
			}
		}
		if wordDiffMode(g.a) != "" {
			if why := g.wordRegexSet(); why != "" {
				return g.usage(why)
			}
		}
	}
	return s.run(g)
}

func orNotDir(err error) error {
	if err == nil {
		return syscall.ENOTDIR
	}
	return err
}

// gitReadOnly are the subcommands that read history only, the same during
// a merge or rebase.
var gitReadOnly = map[string]bool{"log": true, "show": true, "rev-parse": true, "blame": true}

// gitKnown are real git subcommands that the fast path does not run.
var gitKnown = map[string]bool{
	"push": true, "pull": true, "fetch": true, "clone": true, "rebase": true, "merge": true, "cherry-pick": true,
	"revert": true, "stash": true, "tag": true, "remote": true, "submodule": true, "worktree": true, "bisect": true,
	"clean": true, "config": true, "describe": true, "reflog": true, "gc": true, "fsck": true, "am": true,
	"apply": true, "format-patch": true, "shortlog": true, "cat-file": true, "ls-tree": true, "rev-list": true,
	"show-ref": true, "for-each-ref": true, "update-index": true, "write-tree": true, "commit-tree": true,
	"hash-object": true, "read-tree": true, "update-ref": true, "symbolic-ref": true, "notes": true,
	"archive": true, "restore": true, "grep": true, "blame": true, "sparse-checkout": true, "lfs": true,
	"difftool": true, "mergetool": true, "range-diff": true, "whatchanged": true, "version": true, "help": true,
	"count-objects": true, "verify-pack": true, "prune": true, "repack": true, "maintenance": true,
}

// errNotRepo is git's message outside a repository.
const errNotRepo = "fatal: not a git repository (or any of the parent directories): .git\n"

// open finds the repository above the working directory.
func (g *gitCmd) open() (int, bool) {
	d := g.dir
	if d != Root && !strings.HasPrefix(d, Root+"/") {
		fmt.Fprint(g.stderr, errNotRepo)
		return 128, false
	}
	g.wfs = g.call.FS
	for {
		a, err := g.wfs.Lstat(g.wsPath(d + "/.git"))
		if err == nil && a.IsDir() {
			break
		}
		if d == Root {
			fmt.Fprint(g.stderr, errNotRepo)
			return 128, false
		}
		d = path.Dir(d)
	}
	g.root = d
	if g.dir != d {
		g.prefix = strings.TrimPrefix(g.dir, d+"/") + "/"
	}
	dot := &memReadFS{Billy: g.wfs.Billy(g.wsPath(d + "/.git")), fs: g.wfs}
	g.st = filesystem.NewStorageWithOptions(dot, cache.NewObjectLRUDefault(), filesystem.Options{KeepDescriptors: true})
	repo, err := git.Open(g.st, g.wfs.Billy(g.wsPath(d)))
	if err != nil {
		g.st.Close()
		fmt.Fprintf(g.stderr, "fatal: %v\n", err)
		return 128, false
	}
	g.repo = repo
	return 0, true
}

// wsPath maps a namespace path under /workspace to its store path.
func (g *gitCmd) wsPath(p string) string {
	return "/" + strings.TrimPrefix(strings.TrimPrefix(p, Root), "/")
}

// file maps a repository path to its store path.
func (g *gitCmd) file(rel string) string { return g.wsPath(g.root + "/" + rel) }

// fatal prints "fatal: ..." and returns 128.
func (g *gitCmd) fatal(format string, a ...any) int {
	g.out.Flush()
	fmt.Fprintf(g.stderr, "fatal: "+format+"\n", a...)
	return 128
}

// rel shows a repository path relative to the working directory, as git
// status and diff --stat do.
func (g *gitCmd) rel(p string) string {
	if g.prefix == "" {
		return p
	}
	pre := g.prefix
	up := ""
	for pre != "" && !strings.HasPrefix(p, pre) {
		pre = pre[:strings.LastIndex(strings.TrimSuffix(pre, "/"), "/")+1]
		up += "../"
	}
	r := up + strings.TrimPrefix(p, pre)
	if r == "" {
		return "./"
	}
	return r
}

// quote quotes a path as git does with core.quotePath: in double quotes
// with C escapes if it has a control character, a quote, a backslash or
// a byte above 0x7f.
func quotePath(p string) string {
	need := false
	for i := 0; i < len(p); i++ {
		if b := p[i]; b < 0x20 || b == '"' || b == '\\' || b >= 0x7f {
			need = true
			break
		}
	}
	if !need {
		return p
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\a':
			b.WriteString(`\a`)
		case '\b':
			b.WriteString(`\b`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\v':
			b.WriteString(`\v`)
		case '\f':
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if c < 0x20 || c >= 0x7f {
				fmt.Fprintf(&b, `\%03o`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// pathspec turns command-line paths (relative to the working directory)
// into repository paths; "" is the whole tree. It fails for a path
// outside the repository.
func (g *gitCmd) pathspecs(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		p := g.host.Abs(g.dir, a)
		p = strings.TrimSuffix(p, "/")
		if p == g.root {
			out = append(out, "")
			continue
		}
		if !strings.HasPrefix(p, g.root+"/") {
			return nil, fmt.Errorf("%s: '%s' is outside repository at '%s'", a, a, g.root)
		}
		out = append(out, strings.TrimPrefix(p, g.root+"/"))
	}
	return out, nil
}

// matchSpec reports whether a repository path is named by the pathspecs
// (a path itself, a directory above it, or a glob). No pathspec matches
// everything.
func matchSpec(specs []string, p string) bool {
	if len(specs) == 0 {
		return true
	}
	for _, s := range specs {
		if s == "" || s == p || strings.HasPrefix(p, s+"/") {
			return true
		}
		if strings.ContainsAny(s, "*?[") {
			if ok, _ := path.Match(s, p); ok {
				return true
			}
			if globPrefixMatch(s, p) {
				return true
			}
		}
	}
	return false
}

// globPrefixMatch: git's wildcards match "/" too (fnmatch without
// FNM_PATHNAME), so "*.go" from the root matches a/b.go.
func globPrefixMatch(pat, p string) bool {
	ok, _ := matchNoPathname(pat, p)
	return ok
}

// matchNoPathname is fnmatch without FNM_PATHNAME: * and ? match "/".
func matchNoPathname(pat, s string) (bool, error) {
	// translate to path.Match on a string with "/" replaced by a byte
	// that cannot be in a pattern.
	const sep = "\x00"
	return path.Match(strings.ReplaceAll(pat, "/", sep), strings.ReplaceAll(s, "/", sep))
}

// readIndex reads .git/index (an empty index if there is none), with its
// modification time for the racy-clean check.
func (g *gitCmd) readIndex() (*index.Index, error) {
	p := g.file(".git/index")
	data, err := g.wfs.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOENT) {
		return &index.Index{Version: 2}, nil
	}
	if err != nil {
		return nil, err
	}
	idx := &index.Index{}
	if err := index.NewDecoder(bytes.NewReader(data)).Decode(idx); err != nil {
		return nil, fmt.Errorf("index file corrupt: %v", err)
	}
	if a, err := g.wfs.Lstat(p); err == nil {
		idx.ModTime = time.Unix(0, a.Mtime)
	}
	for _, e := range idx.Entries {
		if e.Stage != 0 {
			return nil, errors.New("the index has unmerged paths; resolve them in the sandbox")
		}
		if tooDeep(e.Name) {
			return nil, errTooDeep
		}
	}
	return idx, nil
}

// writeIndex writes the index back, sorted and without the cached trees
// (which no longer describe it), through a lock file as git does.
func (g *gitCmd) writeIndex(idx *index.Index) error {
	sort.SliceStable(idx.Entries, func(i, j int) bool {
		a, b := idx.Entries[i], idx.Entries[j]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Stage < b.Stage
	})
	idx.Cache = nil
	idx.ResolveUndo = nil
	if idx.Version == 0 || idx.Version > 3 {
		idx.Version = 2
	}
	var buf bytes.Buffer
	if err := index.NewEncoder(&buf).Encode(idx); err != nil {
		return err
	}
	lock := g.file(".git/index.lock")
	f, err := g.wfs.Open(lock, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		if errors.Is(err, syscall.EEXIST) {
			return fmt.Errorf("Unable to create '%s': File exists.\n\nAnother git process seems to be running in this repository", g.root+"/.git/index.lock")
		}
		return err
	}
	if _, err := f.Write(buf.Bytes()); err != nil {
		f.Close()
		g.wfs.Remove(lock)
		return err
	}
	if err := f.Close(); err != nil {
		g.wfs.Remove(lock)
		return err
	}
	return g.wfs.Rename(lock, g.file(".git/index"))
}

// statEntry fills an index entry's stat data from the store, as the
// importer does (so the git CLI on the mount trusts it).
func statEntry(e *index.Entry, a kv.Attr) {
	e.CreatedAt, e.ModifiedAt = time.Unix(0, a.Ctime), time.Unix(0, a.Mtime)
	e.Dev, e.Inode, e.UID, e.GID, e.Size = 0, uint32(a.Ino), a.Uid, a.Gid, uint32(a.Size)
}

// head returns HEAD's commit (nil before the first commit) and the branch
// it is on ("" when detached).
func (g *gitCmd) head() (*object.Commit, string, error) {
	ref, err := g.repo.Storer.Reference(plumbing.HEAD)
	if err != nil {
		return nil, "", err
	}
	branch := ""
	h := ref.Hash()
	if ref.Type() == plumbing.SymbolicReference {
		branch = ref.Target().Short()
		r, err := g.repo.Storer.Reference(ref.Target())
		if errors.Is(err, plumbing.ErrReferenceNotFound) {
			return nil, branch, nil
		}
		if err != nil {
			return nil, "", err
		}
		h = r.Hash()
	}
	c, err := g.commitObject(h)
	if err != nil {
		return nil, "", err
	}
	return c, branch, nil
}

// headRefName is what HEAD points to (refs/heads/main), "" when detached.
func (g *gitCmd) headRefName() plumbing.ReferenceName {
	ref, err := g.repo.Storer.Reference(plumbing.HEAD)
	if err != nil || ref.Type() != plumbing.SymbolicReference {
		return ""
	}
	return ref.Target()
}

// config reads the repository's configuration.
func (g *gitCmd) config() *config.Config {
	cfg, err := g.repo.Config()
	if err != nil {
		return config.NewConfig()
	}
	return cfg
}

// abbrev shortens a hash to 7 digits, longer if that is ambiguous.
func (g *gitCmd) abbrev(h plumbing.Hash) string {
	s := h.String()
	return s[:7]
}

// identity returns the author or committer ("AUTHOR", "COMMITTER") of a
// new commit from the environment, -c settings and the configuration.
func (g *gitCmd) identity(who string) (object.Signature, error) {
	cfg := g.config()
	name, email := g.getenv("GIT_"+who+"_NAME"), g.getenv("GIT_"+who+"_EMAIL")
	if name == "" {
		name = g.cfgs["user.name"]
	}
	if email == "" {
		email = g.cfgs["user.email"]
	}
	if name == "" {
		name = cfg.User.Name
	}
	if email == "" {
		email = cfg.User.Email
	}
	if name == "" {
		name = cfg.Raw.Section("user").Option("name")
	}
	// The daemon's default, as git's system configuration: under the
	// repository's settings, over $EMAIL.
	dn, de := g.host.Identity(g.root)
	if name == "" {
		name = dn
	}
	if email == "" {
		email = de
	}
	if email == "" {
		email = g.getenv("EMAIL")
	}
	if name == "" || email == "" {
		return object.Signature{}, errors.New(identityHelp)
	}
	when := g.now()
	if d := g.getenv("GIT_" + who + "_DATE"); d != "" {
		t, err := parseGitDate(d)
		if err != nil {
			return object.Signature{}, fmt.Errorf("invalid date format: %s", d)
		}
		when = t
	}
	return object.Signature{Name: name, Email: email, When: when}, nil
}

const identityHelp = `Author identity unknown

*** Please tell me who you are.

Run

  git config --global user.email "you@example.com"
  git config --global user.name "Your Name"

to set your account's default identity.
Omit --global to set the identity only in this repository.

fatal: unable to auto-detect email address`

// parseGitDate reads the date forms of GIT_AUTHOR_DATE: "@UNIX +ZZZZ",
// "UNIX +ZZZZ", RFC 2822 and ISO 8601.
func parseGitDate(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	f := strings.Fields(strings.TrimPrefix(s, "@"))
	if len(f) >= 1 && isDigits(f[0]) {
		sec, _ := strconv.ParseInt(f[0], 10, 64)
		loc := time.UTC
		if len(f) == 2 {
			l, err := parseZone(f[1])
			if err != nil {
				return time.Time{}, err
			}
			loc = l
		}
		return time.Unix(sec, 0).In(loc), nil
	}
	for _, layout := range []string{time.RFC1123Z, "Mon, 2 Jan 2006 15:04:05 -0700", time.RFC3339, "2006-01-02T15:04:05-0700", "2006-01-02 15:04:05 -0700", "2006-01-02 15:04:05"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("bad date %q", s)
}

func parseZone(z string) (*time.Location, error) {
	if len(z) != 5 || (z[0] != '+' && z[0] != '-') || !isDigits(z[1:]) {
		return nil, fmt.Errorf("bad zone %q", z)
	}
	h, _ := strconv.Atoi(z[1:3])
	m, _ := strconv.Atoi(z[3:5])
	off := h*3600 + m*60
	if z[0] == '-' {
		off = -off
	}
	return time.FixedZone("", off), nil
}

// gitDate formats a date as git log's default format does.
func gitDate(t time.Time) string {
	return t.Format("Mon Jan 2 15:04:05 2006 -0700")
}

// memReadFS is the .git directory for go-git: files opened for reading
// (pack indexes, packs, loose objects, refs) up to memReadMax bytes are
// read whole into memory at once, so go-git's many small reads do not
// each go to the store.
type memReadFS struct {
	*wsfs.Billy
	fs *wsfs.FS
}

const memReadMax = 64 << 20

func (m *memReadFS) Open(name string) (billy.File, error) { return m.OpenFile(name, os.O_RDONLY, 0) }

func (m *memReadFS) OpenFile(name string, flag int, perm os.FileMode) (billy.File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND) == 0 {
		p := path.Join(m.Root(), name)
		if a, err := m.fs.Stat(p); err == nil && !a.IsDir() && a.Size <= memReadMax {
			if a.Size > pagedMin {
				f, err := m.fs.Open(p, os.O_RDONLY, 0)
				if err != nil {
					return nil, err
				}
				pr := &pagedReader{f: f, size: int64(a.Size), pages: map[int64][]byte{}}
				return &gitMemFile{name: name, gitReader: io.NewSectionReader(pr, 0, pr.size), closer: f}, nil
			}
			data, err := m.fs.ReadFile(p)
			if err != nil {
				return nil, err
			}
			return &gitMemFile{name: name, gitReader: bytes.NewReader(data)}, nil
		}
	}
	return m.Billy.OpenFile(name, flag, perm)
}

func (m *memReadFS) Chroot(p string) (billy.Filesystem, error) {
	sub, err := m.Billy.Chroot(p)
	if err != nil {
		return nil, err
	}
	return &memReadFS{Billy: sub.(*wsfs.Billy), fs: m.fs}, nil
}

// gitMemFile is a file read into memory, or read through pages.
type gitMemFile struct {
	name string
	gitReader
	closer io.Closer
}

type gitReader interface {
	io.Reader
	io.ReaderAt
	io.Seeker
}

// pagedMin: files larger than this (packs) are read in pages on demand
// rather than whole.
const pagedMin = 1 << 20

// pagedReader reads a file of the store in 256 KiB pages, each read once.
type pagedReader struct {
	f     *wsfs.File
	size  int64
	pages map[int64][]byte
}

const pageSize = 256 << 10

func (r *pagedReader) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		if off >= r.size {
			return n, io.EOF
		}
		base := off / pageSize * pageSize
		pg, ok := r.pages[base]
		if !ok {
			pg = make([]byte, min(pageSize, r.size-base))
			if _, err := r.f.ReadAt(pg, base); err != nil && err != io.EOF {
				return n, err
			}
			r.pages[base] = pg
		}
		c := copy(p[n:], pg[off-base:])
		n += c
		off += int64(c)
	}
	return n, nil
}

func (f *gitMemFile) Name() string              { return f.name }
func (f *gitMemFile) Write([]byte) (int, error) { return 0, syscall.EBADF }
func (f *gitMemFile) Close() error              { return nil }
func (f *gitMemFile) Lock() error               { return nil }
func (f *gitMemFile) Unlock() error             { return nil }
func (f *gitMemFile) Truncate(int64) error      { return syscall.EBADF }

// commitObject reads a commit; a shallow clone's boundary commit has no
// parents, as git shows it.
func (g *gitCmd) commitObject(h plumbing.Hash) (*object.Commit, error) {
	c, err := g.repo.CommitObject(h)
	if err != nil {
		return nil, err
	}
	if g.shallow == nil {
		g.shallow = map[plumbing.Hash]bool{}
		if data, err := g.wfs.ReadFile(g.file(".git/shallow")); err == nil {
			for _, l := range strings.Fields(string(data)) {
				g.shallow[plumbing.NewHash(l)] = true
			}
		}
	}
	if g.shallow[h] {
		c.ParentHashes = nil
	}
	return c, nil
}

func (g *gitCmd) getenv(name string) string { return g.call.Getenv(name) }

func (g *gitCmd) now() time.Time { return g.call.Now() }

func (g *gitCmd) grow(n int64) bool { return g.host.Grow(n) }

func (g *gitCmd) readAll(r io.Reader) ([]byte, error) { return g.host.ReadAll(r) }

func (g *gitCmd) lineDiff(a, b []string) []Edit { return g.host.LineDiff(a, b) }
