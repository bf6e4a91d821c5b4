package shell

import (
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"mvdan.cc/sh/v3/syntax"
)

// Process substitution, <(cmd) and >(cmd).
//
// mvdan.cc/sh makes a named pipe in the host's temporary directory and
// opens it with os.OpenFile, outside the handlers: that would reach the
// host, so the fast path never lets the interpreter see a ProcSubst node.
// Before a script runs, each statement that holds one is rewritten into a
// block that first makes an in-memory pipe, runs the substituted commands
// in the background with their output (or input) on it, then runs the
// statement with the pipe's path, /dev/fd/N, in place of the
// substitution:
//
//	diff <(sort a) b
//
// becomes, in effect,
//
//	{ P1=$(mkpipe); { sort a; } > "$P1" & diff "$P1" b; }
//
// The pipes live in the run's memory, hold at most pipeBuffer bytes
// unread, and are broken when the run ends, so a writer nobody reads
// never blocks for good.

// mkpipeCmd is the internal command that makes a pipe and prints its path.
const mkpipeCmd = "__computerfs_mkpipe"

// psubVar names the variable holding a pipe's path.
const psubVar = "COMPUTERFS_PSUB_"

// pipeBuffer is what a pipe holds unread before its writer waits, as a
// Linux pipe's 64 KiB.
const pipeBuffer = 64 << 10

// rewriteProcSubst replaces the process substitutions of f as described
// above. It returns f.
func rewriteProcSubst(f *syntax.File) *syntax.File {
	var stmts []*syntax.Stmt
	syntax.Walk(f, func(n syntax.Node) bool {
		if st, ok := n.(*syntax.Stmt); ok {
			stmts = append(stmts, st)
		}
		return true
	})
	k := 0
	for _, st := range stmts {
		var setup []*syntax.Stmt
		orig := *st
		orig.Background, orig.Disown, orig.Coprocess = false, false, false
		replace := func(w *syntax.Word) {
			for i, part := range w.Parts {
				ps, ok := part.(*syntax.ProcSubst)
				if !ok || ps.Op == syntax.CmdInTemp {
					continue
				}
				k++
				name := psubVar + strconv.Itoa(k)
				ref := func() *syntax.Word {
					return &syntax.Word{Parts: []syntax.WordPart{&syntax.DblQuoted{Parts: []syntax.WordPart{
						&syntax.ParamExp{Short: true, Param: &syntax.Lit{Value: name}}}}}}
				}
				op, dir := syntax.RdrOut, "in"
				if ps.Op == syntax.CmdOut {
					op, dir = syntax.RdrIn, "out"
				}
				lit := func(s string) *syntax.Word { return &syntax.Word{Parts: []syntax.WordPart{&syntax.Lit{Value: s}}} }
				mk := &syntax.CallExpr{Assigns: []*syntax.Assign{{Name: &syntax.Lit{Value: name},
					Value: &syntax.Word{Parts: []syntax.WordPart{&syntax.CmdSubst{Stmts: []*syntax.Stmt{
						{Cmd: &syntax.CallExpr{Args: []*syntax.Word{lit(mkpipeCmd), lit(dir)}}}}}}}}}}
				bg := &syntax.Stmt{Cmd: &syntax.Block{Stmts: ps.Stmts},
					Redirs: []*syntax.Redirect{{Op: op, Word: ref()}}, Background: true}
				setup = append(setup, &syntax.Stmt{Cmd: mk}, bg)
				w.Parts[i] = ref().Parts[0]
			}
		}
		// the words of this statement, not of the statements inside it
		syntax.Walk(&orig, func(n syntax.Node) bool {
			switch x := n.(type) {
			case *syntax.Stmt:
				return x == &orig
			case *syntax.Word:
				replace(x)
			case *syntax.ProcSubst, *syntax.CmdSubst:
				return false
			}
			return true
		})
		if len(setup) == 0 {
			continue
		}
		*st = syntax.Stmt{Position: orig.Position, Cmd: &syntax.Block{Stmts: append(setup, &orig)},
			Background: st.Background, Disown: st.Disown}
	}
	return f
}

// pipeTable holds the pipes of one run (and the scripts it starts).
type pipeTable struct {
	mu    sync.Mutex
	pipes map[int]*memPipe
	done  bool
	bg    sync.WaitGroup // substituted commands still running
}

// make allocates a pipe at the lowest free /dev/fd number from 63 down,
// as bash numbers them.
func (t *pipeTable) make(bgWrites bool) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return "", syscall.EPIPE
	}
	if t.pipes == nil {
		t.pipes = map[int]*memPipe{}
	}
	for n := 63; n > 9; n-- {
		if _, used := t.pipes[n]; !used {
			p := &memPipe{bgWrites: bgWrites, table: t}
			p.cond = sync.NewCond(&p.mu)
			t.pipes[n] = p
			t.bg.Add(1)
			return "/dev/fd/" + strconv.Itoa(n), nil
		}
	}
	return "", syscall.EMFILE
}

// get finds the pipe at a path.
func (t *pipeTable) get(abs string) (*memPipe, int) {
	s, ok := strings.CutPrefix(abs, "/dev/fd/")
	if !ok || t == nil {
		return nil, 0
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return nil, 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pipes[n], n
}

// release frees a pipe once both its ends have come and gone.
func (t *pipeTable) release(n int, p *memPipe) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pipes[n] == p {
		delete(t.pipes, n)
	}
}

// finish breaks every pipe (a writer nobody reads gets EPIPE, a reader
// gets what is left, then the end) and waits, at most for wait, for the
// substituted commands to end: their output belongs to the run.
func (t *pipeTable) finish(wait time.Duration) {
	t.mu.Lock()
	t.done = true
	pipes := make([]*memPipe, 0, len(t.pipes))
	for _, p := range t.pipes {
		pipes = append(pipes, p)
	}
	t.mu.Unlock()
	for _, p := range pipes {
		p.mu.Lock()
		p.broken = true
		p.cond.Broadcast()
		p.mu.Unlock()
	}
	ended := make(chan struct{})
	go func() { t.bg.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(wait):
	}
}

// memPipe is a named pipe in memory.
type memPipe struct {
	mu        sync.Mutex
	cond      *sync.Cond
	buf       []byte
	readers   int
	writers   int
	hadReader bool
	hadWriter bool
	broken    bool
	bgWrites  bool // the substituted commands write (<(...)), or read (>(...))
	bgDone    bool
	table     *pipeTable
}

// pipeEnd is one open end of a pipe.
type pipeEnd struct {
	p      *memPipe
	write  bool
	closed bool
	free   func()
}

func (p *memPipe) open(write bool, free func()) *pipeEnd {
	p.mu.Lock()
	defer p.mu.Unlock()
	if write {
		p.writers++
		p.hadWriter = true
	} else {
		p.readers++
		p.hadReader = true
	}
	p.cond.Broadcast()
	return &pipeEnd{p: p, write: write, free: free}
}

func (e *pipeEnd) Read(b []byte) (int, error) {
	if e.write {
		return 0, syscall.EBADF
	}
	p := e.p
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.buf) == 0 {
		if p.broken || p.hadWriter && p.writers == 0 {
			return 0, io.EOF
		}
		p.cond.Wait()
	}
	n := copy(b, p.buf)
	p.buf = p.buf[n:]
	p.cond.Broadcast()
	return n, nil
}

func (e *pipeEnd) Write(b []byte) (int, error) {
	if !e.write {
		return 0, syscall.EBADF
	}
	p := e.p
	p.mu.Lock()
	defer p.mu.Unlock()
	written := 0
	for len(b) > 0 {
		if p.broken || p.hadReader && p.readers == 0 {
			return written, syscall.EPIPE
		}
		room := pipeBuffer - len(p.buf)
		if room <= 0 {
			p.cond.Wait()
			continue
		}
		n := min(room, len(b))
		p.buf = append(p.buf, b[:n]...)
		b = b[n:]
		written += n
		p.cond.Broadcast()
	}
	return written, nil
}

func (e *pipeEnd) Close() error {
	p := e.p
	p.mu.Lock()
	if e.closed {
		p.mu.Unlock()
		return nil
	}
	e.closed = true
	if e.write {
		p.writers--
	} else {
		p.readers--
	}
	done := p.hadReader && p.hadWriter && p.readers == 0 && p.writers == 0
	bgEnded := !p.bgDone && e.write == p.bgWrites && (e.write && p.writers == 0 || !e.write && p.readers == 0)
	if bgEnded {
		p.bgDone = true
	}
	p.cond.Broadcast()
	p.mu.Unlock()
	if bgEnded {
		p.table.bg.Done()
	}
	if done && e.free != nil {
		e.free()
	}
	return nil
}

func (e *pipeEnd) Seek(int64, int) (int64, error)    { return 0, syscall.ESPIPE }
func (e *pipeEnd) ReadAt([]byte, int64) (int, error) { return 0, syscall.ESPIPE }
func (e *pipeEnd) Truncate(int64) error              { return nil }

// openPipe opens /dev/fd/N of this run, if abs names one.
func (r *run) openPipe(abs string, flag int) (vfile, bool) {
	p, n := r.pipes.get(abs)
	if p == nil {
		return nil, false
	}
	write := flag&(O_WRONLY|O_RDWR) != 0
	return p.open(write, func() { r.pipes.release(n, p) }), true
}

// pipeInfo is the stat of /dev/fd/N of this run, if abs names one.
func (r *run) pipeInfo(abs string) (*fileInfo, bool) {
	p, n := r.pipes.get(abs)
	if p == nil {
		return nil, false
	}
	return &fileInfo{name: strconv.Itoa(n), mode: fs.ModeNamedPipe | 0o600, nlink: 1}, true
}

// mkpipe is the internal command: it makes a pipe and prints its path.
func (r *run) mkpipe(c *cmd) int {
	p, err := r.pipes.make(len(c.args) > 1 && c.args[1] == "in")
	if err != nil {
		fmt.Fprintf(c.stderr, "bash: cannot make pipe for process substitution: %s\n", errText(err))
		return 1
	}
	c.out.WriteString(p)
	return 0
}
