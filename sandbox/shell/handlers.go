package shell

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"

	"github.com/computerfs/computerfs/kv"
)

// Namespace operations on absolute, cleaned paths.

func (n *namespace) stat(abs string) (*fileInfo, error) {
	b, rel, virt, err := n.route(abs)
	if err != nil {
		return nil, err
	}
	if virt {
		return virtInfo(rel), nil
	}
	fi, err := b.stat(rel)
	if err == nil && (rel == "" || rel == "/") {
		fi.name = path.Base(abs)
	}
	return fi, err
}

func (n *namespace) lstat(abs string) (*fileInfo, error) {
	b, rel, virt, err := n.route(abs)
	if err != nil {
		return nil, err
	}
	if virt {
		return virtInfo(rel), nil
	}
	return b.lstat(rel)
}

// lstatEntry is lstat of the entry e of a listing of the directory dir
// (readDir): for the workspace, the attributes of the entry's inode, with
// no walk of the path from the root (a listing made through the guarded
// FS has no denied name in it, and its directory was reached through the
// rules: what lstat of the path would check). It is what a walk of a tree
// asks of each entry, as fstatat(2) on the directory's descriptor.
func (n *namespace) lstatEntry(dir string, e dirEntry) (*fileInfo, error) {
	if b, _, virt, err := n.route(dir); err == nil && !virt && e.ino != 0 {
		if w, ok := b.(wsBackend); ok {
			if a, err := w.fs.Store().GetAttr(e.ino); err == nil {
				return attrInfo(e.name, a), nil
			}
			// Gone since the listing (the path may name another file
			// now), or an error: the path says.
		}
	}
	return n.lstat(strings.TrimSuffix(dir, "/") + "/" + e.name)
}

func (n *namespace) readDir(abs string) ([]dirEntry, error) {
	b, rel, virt, err := n.route(abs)
	if err != nil {
		return nil, err
	}
	if virt {
		if !strings.HasSuffix(rel, "/") {
			return nil, syscall.ENOTDIR
		}
		return virtDir(rel), nil
	}
	return b.readDir(rel)
}

// devNull reads nothing and swallows writes.
type devNull struct{}

func (devNull) Read([]byte) (int, error)          { return 0, io.EOF }
func (devNull) Write(p []byte) (int, error)       { return len(p), nil }
func (devNull) Close() error                      { return nil }
func (devNull) Seek(int64, int) (int64, error)    { return 0, nil }
func (devNull) ReadAt([]byte, int64) (int, error) { return 0, io.EOF }
func (devNull) Truncate(int64) error              { return nil }

type devZero struct{ devNull }

func (devZero) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// stdStream is /dev/stdin, /dev/stdout or /dev/stderr of a command.
type stdStream struct {
	r io.Reader
	w io.Writer
}

func (s stdStream) Read(p []byte) (int, error) {
	if s.r == nil {
		return 0, syscall.EBADF
	}
	return s.r.Read(p)
}

func (s stdStream) Write(p []byte) (int, error) {
	if s.w == nil {
		return 0, syscall.EBADF
	}
	return s.w.Write(p)
}

func (stdStream) Close() error                      { return nil }
func (stdStream) Seek(int64, int) (int64, error)    { return 0, syscall.ESPIPE }
func (stdStream) ReadAt([]byte, int64) (int, error) { return 0, syscall.ESPIPE }
func (stdStream) Truncate(int64) error              { return syscall.EINVAL }

// open opens a path of the namespace; stdio gives /dev/std*.
func (n *namespace) open(abs string, flag int, perm uint32, in io.Reader, out, errw io.Writer) (vfile, error) {
	b, rel, virt, err := n.route(abs)
	if err != nil {
		if flag&O_CREATE != 0 && err == syscall.ENOENT {
			err = syscall.EACCES // outside the namespace nothing can be made
		}
		return nil, err
	}
	if virt {
		switch rel {
		case "/dev/null":
			return devNull{}, nil
		case "/dev/zero":
			return devZero{}, nil
		case "/dev/stdin":
			return stdStream{r: in}, nil
		case "/dev/stdout":
			return stdStream{w: out}, nil
		case "/dev/stderr":
			return stdStream{w: errw}, nil
		}
		if flag&(O_WRONLY|O_RDWR) != 0 {
			return nil, syscall.EISDIR
		}
		return nil, syscall.EISDIR
	}
	return b.open(rel, flag, perm&^noSetID)
}

// noSetID are the mode bits the fast path never sets on a file: the
// agent's files must never be setuid or setgid programs (of root, on the
// mount), and sticky means nothing on a file. As an unprivileged user on
// a nosuid mount would see it, chmod, cp -p, install and tar succeed and
// the bits are not kept. A directory keeps setgid and sticky.
const noSetID = kv.S_ISUID | kv.S_ISGID | kv.S_ISVTX

// two paths on one backend, or EXDEV.
func (n *namespace) pair(a, b string) (backend, string, string, error) {
	ba, ra, va, err := n.route(a)
	if err != nil {
		return nil, "", "", err
	}
	bb, rb, vb, err := n.route(b)
	if err != nil {
		if err == syscall.ENOENT {
			err = syscall.EACCES
		}
		return nil, "", "", err
	}
	if va || vb {
		return nil, "", "", syscall.EACCES
	}
	if ba != bb {
		return nil, "", "", syscall.EXDEV
	}
	return ba, ra, rb, nil
}

// one path that is to be changed: virtual paths are read-only.
func (n *namespace) writable(abs string) (backend, string, error) {
	b, rel, virt, err := n.route(abs)
	if err != nil {
		if err == syscall.ENOENT {
			err = syscall.EACCES
		}
		return nil, "", err
	}
	if virt || rel == "" || rel == "/" {
		return nil, "", syscall.EACCES
	}
	return b, rel, nil
}

func (n *namespace) mkdir(abs string, perm uint32) error {
	if _, _, virt, err := n.route(abs); err == nil && (virt || abs == wsRoot || abs == tmpRoot) {
		return syscall.EEXIST
	}
	b, rel, err := n.writable(abs)
	if err != nil {
		return err
	}
	return b.mkdir(rel, perm&^kv.S_ISUID)
}

func (n *namespace) remove(abs string) error {
	b, rel, err := n.writable(abs)
	if err != nil {
		if _, _, _, err2 := n.route(abs); err2 == nil {
			return syscall.EBUSY
		}
		return err
	}
	return b.remove(rel)
}

func (n *namespace) rename(a, b string) error {
	be, ra, rb, err := n.pair(a, b)
	if err != nil {
		return err
	}
	if ra == "" || rb == "" || ra == "/" || rb == "/" {
		return syscall.EBUSY
	}
	return be.rename(ra, rb)
}

func (n *namespace) link(a, b string) error {
	be, ra, rb, err := n.pair(a, b)
	if err != nil {
		return err
	}
	return be.link(ra, rb)
}

func (n *namespace) symlink(target, abs string) error {
	b, rel, err := n.writable(abs)
	if err != nil {
		return err
	}
	return b.symlink(target, rel)
}

func (n *namespace) readlink(abs string) (string, error) {
	b, rel, virt, err := n.route(abs)
	if err != nil {
		return "", err
	}
	if virt {
		return "", syscall.EINVAL
	}
	return b.readlink(rel)
}

func (n *namespace) chmod(abs string, mode uint32) error {
	b, rel, virt, err := n.route(abs)
	if err != nil {
		return err
	}
	if virt {
		return syscall.EPERM
	}
	if mode&noSetID != 0 {
		fi, err := b.stat(rel)
		if err != nil {
			return err
		}
		if fi.IsDir() {
			mode &^= kv.S_ISUID
		} else {
			mode &^= noSetID
		}
	}
	return b.chmod(rel, mode)
}

func (n *namespace) chtimes(abs string, a, m time.Time) error {
	b, rel, virt, err := n.route(abs)
	if err != nil {
		return err
	}
	if virt {
		return syscall.EPERM
	}
	return b.chtimes(rel, a, m)
}

// The interpreter's handlers.

func (r *run) openHandler(ctx context.Context, p string, flag int, perm os.FileMode) (io.ReadWriteCloser, error) {
	hc := interp.HandlerCtx(ctx)
	abs := absPath(hc.Dir, p)
	if f, ok := r.openPipe(abs, flag); ok {
		return f, nil
	}
	f, err := r.sh.ns.open(abs, flag, uint32(perm.Perm()), hc.Stdin, hc.Stdout, hc.Stderr)
	if err != nil {
		// a redirection's: bash's words
		return nil, &os.PathError{Op: r.bashWhere(r.where.redirLine()) + ":", Path: p, Err: bashErrno{errno(err)}}
	}
	return stoppable{f, ctx}, nil
}

func (r *run) statHandler(ctx context.Context, p string, follow bool) (fs.FileInfo, error) {
	hc := interp.HandlerCtx(ctx)
	abs := absPath(hc.Dir, p)
	if fi, ok := r.pipeInfo(abs); ok {
		return fi, nil
	}
	var fi *fileInfo
	var err error
	if follow {
		fi, err = r.sh.ns.stat(abs)
	} else {
		fi, err = r.sh.ns.lstat(abs)
	}
	if err != nil {
		return nil, &os.PathError{Op: "stat", Path: p, Err: errno(err)}
	}
	return fi, nil
}

func (r *run) readDirHandler(ctx context.Context, p string) ([]fs.DirEntry, error) {
	hc := interp.HandlerCtx(ctx)
	abs := absPath(hc.Dir, p)
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	ents, err := r.sh.ns.readDir(abs)
	if err != nil {
		return nil, &os.PathError{Op: "readdir", Path: p, Err: errno(err)}
	}
	// A glob like loop/*/*/*/*/*/* through links that loop lists the
	// same directories without end: what one expansion lists is the
	// call's memory until the command it makes has run.
	if r.mem.limit > 0 {
		n := r.globbed.Add(int64(len(ents)) * int64(len(abs)+48))
		if r.mem.over(n) {
			r.mem.exceed("glob")
			return nil, errMemoryLimit
		}
	}
	out := make([]fs.DirEntry, len(ents))
	for i, e := range ents {
		out[i] = entryInfo{e}
	}
	return out, nil
}

type entryInfo struct{ e dirEntry }

func (d entryInfo) Name() string               { return d.e.name }
func (d entryInfo) IsDir() bool                { return d.e.typ.IsDir() }
func (d entryInfo) Type() fs.FileMode          { return d.e.typ }
func (d entryInfo) Info() (fs.FileInfo, error) { return &fileInfo{name: d.e.name, mode: d.e.typ}, nil }

// accessHandler answers test -r/-w/-x as root would: read and write are
// allowed, execute needs an x bit (or a directory).
func (r *run) accessHandler(ctx context.Context, p string, mode interp.AccessMode) error {
	hc := interp.HandlerCtx(ctx)
	fi, err := r.sh.ns.stat(absPath(hc.Dir, p))
	if err != nil {
		return &os.PathError{Op: "access", Path: p, Err: errno(err)}
	}
	if mode&interp.AccessExec != 0 && !fi.IsDir() && fi.mode.Perm()&0o111 == 0 {
		return &os.PathError{Op: "access", Path: p, Err: syscall.EACCES}
	}
	return nil
}

// callHandler counts commands and steers the builtins that would look at
// the host (type, command -v, source) to the namespace.
func (r *run) callHandler(ctx context.Context, args []string) ([]string, error) {
	if args[0] == guardCmd && len(args) == 3 && args[1] == patMark {
		if sb, ok := interp.HandlerCtx(ctx).Stdout.(*strings.Builder); ok {
			r.mem.guards.markPattern(sb, args[2] == "glob")
		}
		return []string{noopCmd}, nil
	}
	if args[0] == guardCmd && len(args) == 2 {
		hc := interp.HandlerCtx(ctx)
		if args[1] == splitMark {
			if sb, ok := hc.Stdout.(*strings.Builder); ok {
				r.mem.guards.markSplit(sb)
			}
			return []string{noopCmd}, nil
		}
		if err := r.guard(hc.Env, args[1]); err != nil {
			return nil, err
		}
		return []string{noopCmd}, nil
	}
	r.mem.guards.sawArgs(args)
	n := r.commands.Add(1)
	if r.maxCmds > 0 && n > r.maxCmds {
		r.cancel(errCommandLimit)
		return nil, errCommandLimit
	}
	if n%256 == 0 && tooDeep() {
		r.cancel(errNesting)
		return nil, errNesting
	}
	hc := interp.HandlerCtx(ctx)
	r.where.called(hc.Pos)
	r.globbed.Store(0)
	if r.mem.limit > 0 {
		// what the interpreter holds: its variables, and the output
		// of $(...) being captured
		v := varsSize(hc.Env)
		r.mem.vars.Store(v)
		r.mem.assigned.Store(0)
		if sb, ok := hc.Stdout.(*strings.Builder); ok {
			v += int64(sb.Len())
			if sc := r.mem.guards.splitOf(sb); sc != nil {
				v += sc.seps.Load() * fieldCost
			}
		}
		for _, a := range args {
			v += int64(len(a))
		}
		if r.mem.used.Load()+r.mem.est.Load()+v > r.mem.limit {
			r.mem.exceed(args[0])
			return nil, errMemoryLimit
		}
	}
	switch args[0] {
	case "cd":
		if fail := r.checkCd(ctx, args); fail != nil {
			return fail, nil
		}
	case shiftCmd:
		return checkShift(args), nil
	case "test", "[":
		if fail := r.checkTest(ctx, args); fail != nil {
			return fail, nil
		}
	case "type":
		return append([]string{typeCmd, "type"}, args[1:]...), nil
	case "command":
		if len(args) > 1 && (args[1] == "-v" || args[1] == "-V") {
			return append([]string{typeCmd, "command" + args[1]}, args[2:]...), nil
		}
	case "hash":
		return []string{"true"}, nil
	case "printf":
		if len(args) > 1 && args[1] == "-v" {
			// the interpreter's printf makes the whole string at once
			if len(args) > 3 && r.mem.limit > 0 {
				if need := printfBound(args[3], args[4:]); r.mem.over(sat(need, 2)) {
					r.mem.exceed("printf -v of about " + sizeText(need))
					return nil, errMemoryLimit
				}
			}
			return args, nil
		}
		return append([]string{printfCmd}, args[1:]...), nil
	case "set", "declare", "typeset", "export", "readonly", "local":
		// with no names these print every variable, quoted, at once
		if r.mem.limit > 0 && listsVars(args) && r.mem.over(sat(r.mem.vars.Load(), 5)) {
			r.mem.exceed(args[0])
			return nil, errMemoryLimit
		}
	case "eval":
		src := strings.Join(args[1:], " ")
		if msg := scriptTooBig(src, r.mem.limit); msg != "" {
			return []string{errorCmd, "2", "bash: eval: " + msg}, nil
		}
		out, what, ok, err := r.prepareScript(src)
		switch {
		case err != nil:
			return nil, err
		case !ok:
			return args, nil // the builtin reports it
		case what != "":
			return []string{unsupportedCmd, what}, nil
		}
		return []string{"eval", out}, nil
	case "trap":
		// trap ACTION SIGNAL...: the interpreter parses the action
		// when the signal comes; it runs as eval's argument would
		if len(args) < 3 || args[1] == "-" || strings.HasPrefix(args[1], "-") {
			return args, nil
		}
		if msg := scriptTooBig(args[1], r.mem.limit); msg != "" {
			return []string{errorCmd, "2", "bash: trap: " + msg}, nil
		}
		out, what, ok, err := r.prepareScript(args[1])
		switch {
		case err != nil:
			return nil, err
		case !ok:
			return args, nil
		case what != "":
			return []string{unsupportedCmd, what}, nil
		}
		return append([]string{"trap", out}, args[2:]...), nil
	case "read":
		for i := 1; i < len(args); i++ {
			a := args[i]
			if a == "--" || len(a) < 2 || a[0] != '-' {
				break
			}
			if strings.ContainsRune(a, 'a') {
				return append([]string{readArrayCmd}, args[1:]...), nil
			}
			if strings.HasSuffix(a, "p") {
				i++ // its value
			}
		}
	case "shopt":
		if aliasesOn(args) {
			return []string{errorCmd, "1", "bash: shopt: expand_aliases: aliases are not supported by the shell fast path"}, nil
		}
	case "source", ".":
		if len(args) < 2 {
			return args, nil
		}
		f, err := r.sh.ns.open(absPath(hc.Dir, args[1]), O_RDONLY, 0, nil, nil, nil)
		if err != nil {
			return r.bashFail(hc, 1, args[1]+": "+errText(err)), nil
		}
		max := maxScriptBytes(r.mem.limit)
		data, err := io.ReadAll(io.LimitReader(stoppableReader{f, ctx}, max+1))
		f.Close()
		if err != nil {
			return r.bashFail(hc, 1, args[1]+": "+errText(err)), nil
		}
		if int64(len(data)) > max {
			return []string{errorCmd, "2", fmt.Sprintf("bash: %s: file is over the fast path's limit of %d bytes for a sourced script", args[1], max)}, nil
		}
		return r.callHandler(ctx, []string{"eval", string(data)})
	}
	return args, nil
}

// maxStackFrames bounds the Go stack of the goroutine running a script:
// each level of a recursive shell function takes a few dozen frames, and
// a runaway recursion would otherwise grow the stack until the Go runtime
// ends the whole daemon.
const maxStackFrames = 50_000

var framePool = sync.Pool{New: func() any { return make([]uintptr, maxStackFrames) }}

// tooDeep reports whether the calling goroutine's stack is past
// maxStackFrames (checked now and then: it costs one walk of the stack).
func tooDeep() bool {
	pcs := framePool.Get().([]uintptr)
	n := runtime.Callers(0, pcs)
	framePool.Put(pcs)
	return n >= len(pcs)
}

// Internal commands the call handler rewrites to.
const (
	typeCmd        = "\x00type"
	noopCmd        = "\x00noop"
	errorCmd       = "\x00error"
	shiftCmd       = "\x00shift"
	unsupportedCmd = "\x00unsupported"
)

// builtinPath is where a command claims to be.
func builtinPath(name string) (string, bool) {
	if _, ok := builtins[name]; ok {
		return "/usr/bin/" + name, true
	}
	switch name {
	case "echo", "printf", "test", "[", "true", "false", "pwd", "kill":
		return "/usr/bin/" + name, true
	}
	return "", false
}

// programPath is where a command name is found, as the sandbox's PATH
// search would find it: a built-in's /usr/bin/NAME; else the first
// directory of $PATH that has an executable file of that name, in the
// workspace (the namespace's files) or in the sandbox's root file system
// (Options.SandboxProgram). A name with a slash is itself, if it is
// executable.
func (r *run) programPath(c *cmd, name string) (string, bool) {
	if name == "" {
		return "", false
	}
	if p, ok := builtinPath(name); ok && !strings.Contains(name, "/") {
		return p, true
	}
	exe := func(p string) bool {
		if p == wsRoot || strings.HasPrefix(p, wsRoot+"/") || p == tmpRoot || strings.HasPrefix(p, tmpRoot+"/") {
			fi, err := c.stat(p)
			return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
		}
		return r.sh.opts.SandboxProgram != nil && r.sh.opts.SandboxProgram(p)
	}
	if strings.Contains(name, "/") {
		if exe(c.abs(name)) {
			return name, true
		}
		return "", false
	}
	for _, dir := range strings.Split(c.getenv("PATH"), ":") {
		if dir == "" {
			dir = "."
		}
		p := path.Join(c.abs(dir), name)
		if exe(p) {
			if !strings.HasPrefix(dir, "/") {
				return path.Join(dir, name), true
			}
			return p, true
		}
	}
	return "", false
}

func (r *run) typeBuiltin(c *cmd) int {
	mode := c.args[1]
	names := c.args[2:]
	if mode == "type" {
		for len(names) > 0 && strings.HasPrefix(names[0], "-") {
			switch names[0] {
			case "-t":
				mode = "type-t"
			case "-p", "-P":
				mode = "type-p"
			case "--":
			default:
				c.errorf("%s: invalid option", names[0])
				return 2
			}
			names = names[1:]
		}
	}
	status := 0
	for _, name := range names {
		_, isFunc := r.runner.Funcs[name]
		var kind, where string
		switch {
		case syntax.IsKeyword(name):
			kind = "keyword"
		case isFunc:
			kind = "function"
		case interp.IsBuiltin(name) && !slices.Contains([]string{"kill"}, name):
			kind = "builtin"
		default:
			if p, ok := r.programPath(c, name); ok {
				kind, where = "file", p
			}
		}
		if mode == "type-p" && kind != "file" {
			if kind == "" {
				status = 1
			}
			continue
		}
		switch {
		case kind == "":
			status = 1
			if mode == "type" {
				fmt.Fprintf(c.stderr, "%s: type: %s: not found\n", c.bashWhere(), name)
			} else if mode == "command-V" {
				fmt.Fprintf(c.stderr, "%s: command: %s: not found\n", c.bashWhere(), name)
			}
		case mode == "type-t":
			fmt.Fprintln(c.out, kind)
		case mode == "type-p":
			fmt.Fprintln(c.out, where)
		case mode == "command-v":
			if where != "" {
				fmt.Fprintln(c.out, where)
			} else {
				fmt.Fprintln(c.out, name)
			}
		default:
			switch kind {
			case "keyword":
				fmt.Fprintf(c.out, "%s is a shell keyword\n", name)
			case "function":
				fmt.Fprintf(c.out, "%s is a function\n", name)
			case "builtin":
				fmt.Fprintf(c.out, "%s is a shell builtin\n", name)
			default:
				fmt.Fprintf(c.out, "%s is %s\n", name, where)
			}
		}
	}
	return status
}
