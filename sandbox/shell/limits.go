package shell

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/metrics"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"mvdan.cc/sh/v3/expand"
)

// Scripts on the fast path run inside the daemon: an endless input
// (/dev/zero, a pipe from `yes`) must stop when the script is stopped, and
// a script that holds too much (`sort /dev/zero`, `x=$(cat /dev/zero)`,
// `jq -n '[range(1e9)]'`) must be stopped before it takes the daemon's
// memory, without stopping the other scripts that run at the same time.
//
// Memory is bounded per call (ExecOptions.MaxMemory, DefaultMaxMemory):
//
//   - what the built-ins hold (whole files read by sort, tac, diff, jq's
//     input, a line without end read by grep or sed, the output captured
//     by $(...)) is charged to the call's budget as it grows and released
//     when the built-in ends: exact;
//   - the shell's variables are summed before every command, and scripts
//     (the command itself, eval, source, sh -c) are bounded in size before
//     they are parsed, as a parse takes some 50 times its input;
//   - what the engines that cannot be instrumented (gojq, goawk, the
//     interpreter's own expansions between two commands) allocate is
//     estimated by a watchdog that samples the process heap every few
//     milliseconds and attributes its growth to the calls that were
//     running such an engine then (weighted by how many steps each made);
//     a call whose estimate passes its budget is stopped, biggest first.
//     The Go runtime has no accounting per goroutine, so this part is an
//     estimate: a guard for the daemon that stops the call that grows.
//
// goawk looks at its context only every 1000 instructions, and an awk
// program that doubles a string in a loop with no input or output
// (BEGIN{while(1) s=s s}) allocates past any bound within them: awk
// programs are rewritten to step in every loop turn and function call
// (awkguard.go), so that such a program is stopped within a doubling or
// two once the watchdog sees it. Not yet a bound: a doubling from 1 GiB
// to 2 GiB can come before the watchdog's next tick, and such a program
// can still take a daemon with little memory to spare.

// errMemoryLimit is the cause of a call stopped for its memory; it is an
// ENOMEM, which built-ins report as "Cannot allocate memory".
var errMemoryLimit = fmt.Errorf("memory limit reached: %w", syscall.ENOMEM)

// stoppable makes reads fail with the script's stop cause once ctx ends,
// so that a built-in reading an endless input ends with the script.
type stoppable struct {
	vfile
	ctx context.Context
}

func (s stoppable) Read(p []byte) (int, error) { return stoppableReader{s.vfile, s.ctx}.Read(p) }

func (s stoppable) Write(p []byte) (int, error) {
	if s.ctx.Err() != nil {
		return 0, context.Cause(s.ctx)
	}
	return s.vfile.Write(p)
}

func (s stoppable) ReadAt(p []byte, off int64) (int, error) {
	if s.ctx.Err() != nil {
		return 0, context.Cause(s.ctx)
	}
	return s.vfile.ReadAt(p, off)
}

type stoppableReader struct {
	io.Reader
	ctx context.Context
}

func (s stoppableReader) Read(p []byte) (int, error) {
	if s.ctx.Err() != nil {
		return 0, context.Cause(s.ctx)
	}
	return s.Reader.Read(p)
}

// DefaultMaxMemory is the memory budget of one call (ExecOptions.MaxMemory).
const DefaultMaxMemory = 256 << 20

// memBudget is the memory budget of one call, shared by the scripts it
// runs (sh -c, process substitutions).
type memBudget struct {
	limit int64        // bytes; <= 0: no limit
	used  atomic.Int64 // held by running built-ins now
	vars  atomic.Int64 // size of the variables at the last command
	// bytes the statements guarded since the last command may have
	// assigned (expguard.go)
	assigned atomic.Int64
	est      atomic.Int64 // the watchdog's estimate of what engines hold
	steps    atomic.Int64 // steps of the engines (see engineCtx) since the last tick
	eng      atomic.Int32 // engines running now
	once     sync.Once
	what     atomic.Value // string: what crossed the limit
	stop     func()
	// what awk's checks allowed (awkguard.go) and the heap may still
	// hold: accounted memory to the watchdog, shrunk to what the heap
	// holds after a collection (settle)
	pending atomic.Int64
	// what stopped the call for a pattern (patguard.go), a string
	patWhat atomic.Value
	// the watchdog's, under its lock: what the accounting knew at this
	// tick and the last
	acc, lastAcc int64
	flight       *flight // the call's built-ins running
	guards       guardTable
}

func newBudget(limit int64, stop func()) *memBudget {
	return &memBudget{limit: limit, stop: stop}
}

// total is the call's memory as far as it is known.
func (b *memBudget) total() int64 {
	return b.used.Load() + b.vars.Load() + b.est.Load() + b.pending.Load()
}

// exceed stops the call, naming what crossed the limit.
func (b *memBudget) exceed(what string) {
	b.once.Do(func() {
		b.what.Store(what)
		b.stop()
	})
}

// over reports whether n more bytes would cross the limit.
func (b *memBudget) over(n int64) bool {
	return b.limit > 0 && b.total()+n > b.limit
}

// message is what the call prints when it was stopped for its memory.
func (b *memBudget) message() string {
	what, _ := b.what.Load().(string)
	msg := fmt.Sprintf("memory limit of %s per call exceeded", sizeText(b.limit))
	if what != "" {
		msg += " (in " + what + ")"
	}
	return msg
}

func sizeText(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// grow charges n bytes held by the command; false (and the call is being
// stopped) if that crosses the call's budget.
func (c *cmd) grow(n int64) bool {
	b := c.r.mem
	c.held += n
	if b.used.Add(n)+b.vars.Load()+b.est.Load() > b.limit && b.limit > 0 {
		b.exceed(c.name)
		return false
	}
	return true
}

// release gives back what the command held (when it ends).
func (c *cmd) release() {
	if c.held != 0 {
		c.r.mem.used.Add(-c.held)
		c.held = 0
	}
}

// readChunk is what readAll reads at a time.
const readChunk = 64 << 10

// readAll reads r to its end, charging what it holds to the call.
func (c *cmd) readAll(r io.Reader) ([]byte, error) {
	buf := make([]byte, 0, 4096)
	charged := int64(0)
	for {
		if len(buf) == cap(buf) {
			want := int64(cap(buf)) * 2
			if !c.grow(want - charged) {
				return nil, errMemoryLimit
			}
			charged = want
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// readLines reads all lines, each with its newline (the last may lack it).
func (c *cmd) readLines(r io.Reader) ([]string, error) {
	data, err := c.readAll(r)
	if err != nil {
		return nil, err
	}
	// the lines are a copy, and a header each
	if !c.grow(int64(len(data)) + 16*int64(strings.Count(string(data), "\n"))) {
		return nil, errMemoryLimit
	}
	return splitLines(string(data)), nil
}

// readLine reads a line with its newline, charging a long one (a line
// without end, as in /dev/zero, must not grow past the budget).
func (c *cmd) readLine(br *bufio.Reader) (string, error) {
	line, err := br.ReadSlice('\n')
	if err != bufio.ErrBufferFull {
		return string(line), err
	}
	buf := append([]byte(nil), line...)
	charged := int64(0)
	for err == bufio.ErrBufferFull {
		if c.canceled() {
			return "", context.Cause(c.ctx)
		}
		if int64(cap(buf)) > charged {
			if !c.grow(int64(cap(buf)) - charged) {
				return "", errMemoryLimit
			}
			charged = int64(cap(buf))
		}
		line, err = br.ReadSlice('\n')
		buf = append(buf, line...)
	}
	if err != nil && c.canceled() {
		return "", err // not a line to work on: the call is being stopped
	}
	return string(buf), err
}

// captureWriter is the stdout of a built-in inside $(...): what it
// captures stays in memory until the substitution ends.
type captureWriter struct {
	sb    *strings.Builder
	c     *cmd
	split *splitCapture // its output is split into fields
	pat   *patCapture   // its output is part of a pattern
}

func (w captureWriter) Write(p []byte) (int, error) {
	// held (twice: the builder grows by doubling) while the command
	// runs; the interpreter's copy is counted with the variables. A
	// capture that is split into fields costs a string for every field
	// it will make, a field every two bytes at worst (expguard.go).
	n := 2 * int64(len(p))
	if w.split != nil {
		seps := separators(p, ifsTable(w.c.env))
		w.split.seps.Add(seps)
		n += seps * fieldCost
	}
	if !w.c.grow(n) {
		return 0, errMemoryLimit
	}
	if w.pat != nil {
		if what := w.pat.add(p, ifsTable(w.c.env)); what != "" {
			return 0, w.c.r.stopPattern(what)
		}
	}
	return w.sb.Write(p)
}

// varsSize is the size of the shell's variables, as far as it matters.
func varsSize(env expand.Environ) int64 {
	n := int64(0)
	env.Each(func(name string, vr expand.Variable) bool {
		n += int64(len(name) + len(vr.Str) + 32)
		for _, s := range vr.List {
			n += int64(len(s) + 16)
		}
		for k, v := range vr.Map {
			n += int64(len(k) + len(v) + 32)
		}
		return true
	})
	return n
}

// maxScriptBytes is the size of script (a command, eval's argument, a
// sourced file, sh -c's string) that a call with budget limit may parse.
func maxScriptBytes(limit int64) int64 {
	if limit <= 0 {
		return 64 << 20
	}
	return max(limit/64, 64<<10)
}

// maxNesting bounds the nesting of a script's parentheses, braces,
// substitutions and compound commands: the parser and the interpreter
// recurse on it, and a Go stack that overflows ends the whole daemon.
const maxNesting = 500

// tooNested reports whether src nests deeper than maxNesting, counting
// every opening bracket, backquote and compound keyword (an
// overestimate: quotes are not taken out).
func tooNested(src string) bool {
	if len(src) < maxNesting {
		return false
	}
	depth, words := 0, 0
	word := 0
	for i := 0; i < len(src); i++ {
		switch ch := src[i]; ch {
		case '(', '{', '[', '`':
			depth++
		case ')', '}', ']':
			depth--
		}
		if isWordByte(src[i]) {
			word++
			continue
		}
		if word > 0 {
			switch src[i-word : i] {
			case "if", "while", "until", "for", "case", "select", "function":
				words++
			case "fi", "done", "esac":
				words--
			}
			word = 0
		}
		if depth+words > maxNesting {
			return true
		}
	}
	return false
}

func isWordByte(b byte) bool { return b >= 'a' && b <= 'z' }

// maxOperators bounds the operators of a script the fast path parses.
// Operators nest without brackets: the parser recurses on each ! of a
// [[ ]] and on each = or ?: of an arithmetic expression, and builds
// 1+1+1... or a && b && c... as a tree as deep as the chain that
// syntax.Walk and the interpreter recurse on (about a kilobyte of Go
// stack a level: a million of them, two bytes each, overflowed the stack
// and ended the daemon). A script cannot nest deeper than it has
// operators and brackets, so counting every operator character, in
// quotes or not (a count that quotes could fool would have to know them
// as the parser does), bounds its depth; a script with more is the
// sandbox's (tens of kilobytes of shell code, or a long heredoc).
const maxOperators = 1 << 15

var errTooDeep = fmt.Errorf("script nests deeper than the fast path's limit of %d levels, or has more than %d operators", maxNesting, maxOperators)

// scriptTooDeep reports whether the parser could recurse too deep on the
// script src: it nests too deep (tooNested) or has too many operators.
func scriptTooDeep(src string) bool {
	if len(src) < maxNesting {
		return false
	}
	if tooNested(src) {
		return true
	}
	return tooManyOperators(src, maxOperators)
}

// tooManyOperators reports whether src has more than max operator
// characters (see maxOperators).
func tooManyOperators(src string, max int) bool {
	n := 0
	for i := 0; i < len(src); i++ {
		switch src[i] {
		case '!', '+', '-', '*', '/', '%', '&', '|', '^', '<', '>', '=', '~', '?', ',':
			if n++; n > max {
				return true
			}
		}
	}
	return false
}

// The watchdog.

// memWatch is the watchdog of the calls that run (see the top of this
// file).
type memWatch struct {
	mu      sync.Mutex
	calls   map[*memBudget]struct{}
	base    uint64 // heap when the first of the calls started
	last    uint64 // heap at the last tick
	lastAcc int64  // what the calls' accounting knew at the last tick
	victim  *memBudget
	since   time.Time
	lastGC  time.Time
	running bool // the loop runs
}

var watch = &memWatch{calls: map[*memBudget]struct{}{}}

const memTick = 5 * time.Millisecond

// memSlack is heap growth the watchdog leaves to the rest of the daemon.
const memSlack = 32 << 20

// staleHeap: above this live heap at a call's start, the watchdog
// collects garbage first to know where the calls start from. An idle
// daemon's heap is well below it.
const staleHeap = 96 << 20

// add watches a call's budget; the returned func ends the watch.
func (w *memWatch) add(b *memBudget) func() {
	w.mu.Lock()
	if len(w.calls) == 0 {
		w.mu.Unlock()
		base := heapLive()
		if base > staleHeap {
			// The last collection may have counted what an earlier
			// call held: collect now, or the base would be that much
			// higher.
			runtime.GC()
			base = heapLive()
		}
		w.mu.Lock()
		if len(w.calls) == 0 {
			w.base, w.last, w.lastAcc = base, heapObjects(), 0
		}
		if !w.running {
			w.running = true
			go w.loop()
		}
	}
	w.calls[b] = struct{}{}
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		delete(w.calls, b)
		if w.victim == b {
			w.victim = nil
		}
		w.mu.Unlock()
	}
}

func (w *memWatch) loop() {
	t := time.NewTicker(memTick)
	defer t.Stop()
	for range t.C {
		if !w.tick() {
			return
		}
	}
}

// tick attributes the heap's growth since the last tick to the calls
// that run engines and stops a call over its budget; false once no call
// is left.
func (w *memWatch) tick() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.calls) == 0 {
		w.running = false
		return false
	}
	heap := heapObjects()
	acc := int64(0)
	for b := range w.calls {
		b.lastAcc, b.acc = b.acc, b.used.Load()+b.vars.Load()+b.pending.Load()
		acc += b.acc
	}
	// growth not explained by the accounting
	delta := int64(heap) - int64(w.last) - (acc - w.lastAcc)
	w.last, w.lastAcc = heap, acc
	if delta > 0 {
		w.attribute(delta)
	} else if delta < 0 {
		// something was freed (or collected): the estimates shrink
		// to what the heap still holds beyond the accounting
		unacc := int64(heap) - int64(w.base) - acc
		sum := int64(0)
		for b := range w.calls {
			sum += b.est.Load()
		}
		if sum > 0 && unacc < sum {
			for b := range w.calls {
				e := b.est.Load()
				b.est.Store(max(0, e*max(unacc, 0)/sum))
			}
		}
	}
	for b := range w.calls {
		b.steps.Store(0)
	}
	if w.victim != nil && time.Since(w.since) < time.Second {
		return true // let the last one stopped end first
	}
	var over []*memBudget
	for b := range w.calls {
		if b.limit > 0 && b.total() > b.limit {
			over = append(over, b)
		}
	}
	if len(over) == 0 {
		return true
	}
	// Garbage counts until it is collected: look again after a
	// collection before stopping anything; but not more often than
	// every few ticks, or a call that makes garbage fast would keep the
	// whole daemon collecting.
	far := false
	for _, b := range over {
		far = far || b.total() > 2*b.limit
	}
	if !far && time.Since(w.lastGC) < 20*memTick {
		return true
	}
	w.mu.Unlock()
	runtime.GC()
	w.mu.Lock()
	w.settle()
	sort.Slice(over, func(i, j int) bool { return over[i].total() > over[j].total() })
	for _, b := range over {
		if _, ok := w.calls[b]; ok && b.total() > b.limit {
			w.victim, w.since = b, time.Now()
			b.exceed("")
			return true
		}
	}
	return true
}

// settle, after a collection, shrinks what the calls are charged beyond
// their accounting to what the heap still holds: first what awk's checks
// allowed, then the watchdog's estimates. Under w.mu.
func (w *memWatch) settle() {
	w.lastGC = time.Now()
	heap := heapObjects()
	fixed, pend, sum := int64(0), int64(0), int64(0)
	for b := range w.calls {
		fixed += b.used.Load() + b.vars.Load()
		pend += b.pending.Load()
		sum += b.est.Load()
	}
	live := max(int64(heap)-int64(w.base)-fixed, 0)
	if pend > live {
		for b := range w.calls {
			b.pending.Store(b.pending.Load() * live / pend)
		}
		pend = live
	}
	unacc := live - pend - memSlack
	if unacc < sum {
		for b := range w.calls {
			if sum > 0 {
				b.est.Store(max(0, b.est.Load()*max(unacc, 0)/sum))
			}
		}
	}
	acc := int64(0)
	for b := range w.calls {
		b.acc = b.used.Load() + b.vars.Load() + b.pending.Load()
		b.lastAcc = b.acc
		acc += b.acc
	}
	w.last, w.lastAcc = heap, acc
}

// collect collects garbage and settles the calls' charges (for awk's
// checks, before they refuse an operation).
func (w *memWatch) collect() {
	runtime.GC()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.settle()
}

// attribute gives heap growth not explained by the accounting to the
// calls that made it, as far as can be told: the calls whose accounted
// memory grew in the last tick (what they hold makes garbage as it
// grows), else those whose engines ran, by their steps, else those
// whose interpreter is busy (no built-in of theirs running: an
// expansion), else all.
func (w *memWatch) attribute(delta int64) {
	pick := func(weight func(b *memBudget) int64) bool {
		total := int64(0)
		for b := range w.calls {
			total += weight(b)
		}
		if total <= 0 {
			return false
		}
		for b := range w.calls {
			if wt := weight(b); wt > 0 {
				b.est.Add(delta * wt / total)
			}
		}
		return true
	}
	switch {
	case pick(func(b *memBudget) int64 { return max(0, b.acc-b.lastAcc) }):
	case pick(func(b *memBudget) int64 {
		if b.eng.Load() == 0 {
			return 0
		}
		return 1 + b.steps.Load()
	}):
	case pick(func(b *memBudget) int64 {
		if b.flight != nil && b.flight.n.Load() == 0 {
			return 1
		}
		return 0
	}):
	default:
		pick(func(*memBudget) int64 { return 1 })
	}
}

// engineCtx is the context given to an engine (gojq): it stops with the
// call and counts the engine's steps for the watchdog.
type engineCtx struct {
	context.Context
	b *memBudget
}

func (e engineCtx) Done() <-chan struct{} {
	e.b.steps.Add(1)
	return e.Context.Done()
}

// engine marks an engine running in the command; the returned func ends it.
func (c *cmd) engine() func() {
	c.r.mem.eng.Add(1)
	return func() { c.r.mem.eng.Add(-1) }
}

var heapSamples = []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/live:bytes"}}
var sampleMu sync.Mutex

// heapObjects is the bytes of heap objects, live or not yet collected.
func heapObjects() uint64 { return readHeap(0) }

// heapLive is the heap marked live by the last collection.
func heapLive() uint64 { return readHeap(1) }

func readHeap(i int) uint64 {
	sampleMu.Lock()
	defer sampleMu.Unlock()
	metrics.Read(heapSamples)
	if heapSamples[i].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return heapSamples[i].Value.Uint64()
}

// callerStdin is the stdin a call was given: a read from it that blocks
// (a pipe from a client that never writes) returns when the call is
// stopped; the read itself goes on in the background until the reader
// gives something or ends, and what it gives then is kept for no one.
type callerStdin struct {
	r       io.Reader
	ctx     context.Context
	pending chan readResult // a read started and not yet taken
	buf     []byte
}

type readResult struct {
	data []byte
	err  error
}

func (s *callerStdin) Read(p []byte) (int, error) {
	if s.ctx.Err() != nil {
		return 0, context.Cause(s.ctx)
	}
	if s.pending == nil {
		ch := make(chan readResult, 1)
		s.pending = ch
		n := min(len(p), 64<<10)
		go func(r io.Reader) {
			buf := make([]byte, n)
			k, err := r.Read(buf)
			ch <- readResult{buf[:k], err}
		}(s.r)
	}
	select {
	case res := <-s.pending:
		s.pending = nil
		n := copy(p, res.data)
		if n < len(res.data) {
			// p was smaller than the read: keep the rest
			s.r = io.MultiReader(bytes.NewReader(res.data[n:]), s.r)
		}
		if res.err != nil && n == len(res.data) {
			return n, res.err
		}
		return n, nil
	case <-s.ctx.Done():
		return 0, context.Cause(s.ctx)
	}
}
