package shell

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/benhoyt/goawk/lexer"
	"github.com/benhoyt/goawk/parser"
)

// goawk looks at its context only every 1000 instructions, and one awk
// statement can allocate without bound: s = s s s s s s s s s s makes ten
// times s, gsub(/x/, "<a thousand bytes>", s) a thousand times, NF = 1e6
// with a long OFS a million times OFS. No watchdog that looks between
// statements can stop that in time. So the program is rewritten before it
// runs (guardAwk): it is parsed, and printed again from goawk's syntax
// tree with every operation that can allocate in proportion to its
// operands handed to a native function that first knows the sizes (the
// operands' values, at run time) and charges an upper bound of what the
// operation makes to the call's budget, refusing it (and stopping the
// call for its memory) if that passes the budget:
//
//	a b c                 -> __computerfs_cat(a, b, c)        exact: the native concatenates
//	a[i, j], (i, j) in a  -> a[__computerfs_cat(i, SUBSEP, j)]
//	sub/gsub(re, r, t)    -> gsub(re, __computerfs_sub(re, r, t, 1), t)
//	                         out <= len(t) + matches*len(r) + &s*len(t), matches counted when it matters
//	sprintf/printf(f, a)  -> sprintf(__computerfs_fmt(f, a), a)  literal text, widths, precisions, operands
//	split(s, a, fs)       -> split(__computerfs_split(s, fs), a, fs)   pieces times an element's size
//	NF = n, $n = v        -> NF = __computerfs_nf(n, OFS, $0)   fields and the rebuilt record
//	$0 = v, getline       -> the fields v splits into (__computerfs_rec)
//	toupper/tolower(s)    -> toupper(__computerfs_case(s))
//	x ~ dynamic regex     -> x ~ __computerfs_re(r)            the compiled program's size
//	every input record    -> its fields, before any pattern splits it
//	loops, functions      -> __computerfs_step() every 64th turn and call
//
// Operands a check needs and the operation uses again are evaluated once:
// one without side effects is written twice, any other is kept in a
// temporary (a global, or an extra local of the function it is in).
// What a call already holds is the accounting's plus the watchdog's
// estimate plus what the checks allowed since the watchdog's last look
// (memBudget.pending); an operation that would pass the budget first
// makes the collector and the watchdog look again, so that garbage is
// not counted as held.
//
// What goawk still allocates without a check is at most a small multiple
// of what the program already holds, made over many statements, which
// the watchdog sees: arrays growing one element a statement, caches of
// up to 100 compiled regexes and formats, records of at most 10 MB read
// from the input, the keys of a for-in.

// awkStep is the step of a loop turn or function call: the native call
// costs a microsecond, so it is made every 64th (goawk itself looks at
// its context every 1000 instructions, and every check looks too).
const awkStep = "if (" + awkTemp + "step++ % 64 == 0) " + awkStepFunc + "()\n"

// Native functions of the rewrite.
const (
	awkStepFunc  = "__computerfs_step"
	awkCatFunc   = "__computerfs_cat"
	awkSubFunc   = "__computerfs_sub"
	awkFmtFunc   = "__computerfs_fmt"
	awkSplitFunc = "__computerfs_split"
	awkNFFunc    = "__computerfs_nf"
	awkFieldFunc = "__computerfs_field"
	awkRecFunc   = "__computerfs_rec"
	awkLineFunc  = "__computerfs_line"
	awkCaseFunc  = "__computerfs_case"
	awkReFunc    = "__computerfs_re"
	awkMatchFunc = "__computerfs_match" // (s, re): re, once a match of re on s is known to be bounded
	awkLenFunc   = "__computerfs_len"   // (s, n): s, once a match of a literal of n bytes on s is
	awkTemp      = "__computerfs_t"
)

// Sizes the checks charge: what goawk holds per element, field or
// compiled regex byte, and how much more than a result a Go builder
// allocates on the way (append doubles, then the string is copied).
const (
	awkElemBytes  = 128 // an array element made by split: key, value, map slot, piece
	awkFieldBytes = 24  // a field: its string header, flag, slice growth
	awkMatchBytes = 40  // a regex match's index pair, when FS is a regex
	awkReBytes    = 200 // a compiled regex per byte of the pattern
	awkBuild      = 3   // a result built by appending, then copied
	awkMaxFields  = 1000000
	awkMaxWidth   = 1000000  // Go's fmt prints %!(BADWIDTH) for a * above
	awkMaxDigits  = 10000000 // and reads no longer number in a format
)

// awkGuard holds what the natives of one awk command need.
type awkGuard struct {
	step  func() error
	alloc func(n int64) error // charges n bytes about to be allocated, or refuses
	room  func() int64        // bytes the call may still allocate
	mu    sync.Mutex
	res   map[string]*regexp.Regexp
}

// awkFuncs returns the native functions for a command's awk program, and
// a func that gives back, when the program ends, what its checks charged.
func (c *cmd) awkFuncs() (map[string]any, func()) {
	var charged atomic.Int64
	done := func() {
		b := c.r.mem
		for {
			p, n := b.pending.Load(), charged.Load()
			if b.pending.CompareAndSwap(p, p-min(p, n)) {
				return
			}
		}
	}
	return awkNatives(&awkGuard{
		step: func() error {
			c.r.mem.steps.Add(1)
			if c.ctx.Err() != nil {
				return context.Cause(c.ctx)
			}
			return nil
		},
		alloc: func(n int64) error {
			err := c.awkAlloc(n)
			if err == nil && n > 0 {
				charged.Add(n)
			}
			return err
		},
		room: func() int64 {
			b := c.r.mem
			if b.limit <= 0 {
				return math.MaxInt64
			}
			return b.limit - b.total()
		},
	}), done
}

// awkVars charges what the assignments of -v and of the operands make:
// NF (with OFS) makes fields and a record. vars are name, value pairs.
func (c *cmd) awkVars(vars []string) error {
	ofs, nf := " ", ""
	for i := 0; i+1 < len(vars); i += 2 {
		switch vars[i] {
		case "OFS":
			ofs = vars[i+1]
		case "NF":
			nf = vars[i+1]
		}
	}
	if nf == "" {
		return nil
	}
	n, err := strconv.ParseFloat(strings.TrimSpace(nf), 64)
	if err != nil {
		return nil // awk takes it as 0
	}
	return c.awkAlloc(nfBound(n, ofs, ""))
}

// awkAlloc charges n bytes an awk operation is about to allocate; it
// refuses, stopping the call, if they do not fit in the budget even once
// garbage is collected and the watchdog has looked again.
func (c *cmd) awkAlloc(n int64) error {
	b := c.r.mem
	if c.ctx.Err() != nil {
		return context.Cause(c.ctx)
	}
	if b.limit <= 0 || n <= 0 {
		return nil
	}
	if !b.over(n) {
		b.pending.Add(n)
		return nil
	}
	if n <= b.limit {
		watch.collect()
		if !b.over(n) {
			b.pending.Add(n)
			return nil
		}
	}
	b.exceed("awk")
	return errMemoryLimit
}

func awkNatives(g *awkGuard) map[string]any {
	return map[string]any{
		awkStepFunc: func() (int, error) {
			if err := g.step(); err != nil {
				return 0, err
			}
			return 1, nil
		},
		awkCatFunc: func(parts ...string) (string, error) {
			n := int64(0)
			for _, p := range parts {
				n += int64(len(p))
			}
			if err := g.alloc(n); err != nil {
				return "", err
			}
			var sb strings.Builder
			sb.Grow(int(n))
			for _, p := range parts {
				sb.WriteString(p)
			}
			return sb.String(), nil
		},
		awkMatchFunc: func(s, re string) (string, error) {
			if len(re) > maxRegex {
				return re, fmt.Errorf("%v: %d bytes, over the fast path's limit of %d", errRegexTooBig, len(re), maxRegex)
			}
			if err := g.alloc(awkReBytes * int64(len(re))); err != nil {
				return re, err
			}
			return re, matchBound(len(re), len(s), func() bool {
				r := g.regex(re)
				if r == nil {
					return false
				}
				_, complete := r.LiteralPrefix()
				return complete
			})
		},
		awkLenFunc: func(s string, n int) (string, error) {
			return s, matchBound(n, len(s), func() bool { return false })
		},
		awkSubFunc: func(re, repl, in string, global bool) (string, error) {
			return repl, g.sub(re, repl, in, global)
		},
		awkFmtFunc: func(format string, args ...string) (string, error) {
			return format, g.alloc(awkBuild * fmtBound(format, args))
		},
		awkSplitFunc: func(s, fs string) (string, error) {
			if len(fs) > maxRegex {
				return "", fmt.Errorf("%v: %d bytes, over the fast path's limit of %d", errRegexTooBig, len(fs), maxRegex)
			}
			if utf8.RuneCountInString(fs) > 1 {
				if err := g.alloc(awkReBytes * int64(len(fs))); err != nil {
					return "", err
				}
			}
			return s, g.pieces(s, fs, awkElemBytes)
		},
		awkNFFunc: func(n float64, ofs, line string) (float64, error) {
			return n, g.alloc(nfBound(n, ofs, line))
		},
		awkFieldFunc: func(k, nf float64, ofs, line string) (float64, error) {
			return k, g.alloc(nfBound(max(k, nf), ofs, line))
		},
		awkRecFunc: func(line, fs string) (string, error) {
			return line, g.pieces(line, fs, awkFieldBytes)
		},
		awkLineFunc: func(status float64, line, fs string) (float64, error) {
			return status, g.pieces(line, fs, awkFieldBytes)
		},
		awkCaseFunc: func(s string) (string, error) {
			return s, g.alloc(awkBuild * int64(len(s)))
		},
		awkReFunc: func(re string) (string, error) {
			if len(re) > maxRegex {
				return re, fmt.Errorf("%v: %d bytes, over the fast path's limit of %d", errRegexTooBig, len(re), maxRegex)
			}
			return re, g.alloc(awkReBytes * int64(len(re)))
		},
	}
}

// regex compiles re as goawk does, for counting; nil if it does not
// compile (goawk then reports it).
func (g *awkGuard) regex(re string) *regexp.Regexp {
	g.mu.Lock()
	defer g.mu.Unlock()
	if r, ok := g.res[re]; ok {
		return r
	}
	r, err := regexp.Compile("(?s:" + re + ")")
	if err != nil {
		r = nil
	}
	if g.res == nil {
		g.res = map[string]*regexp.Regexp{}
	}
	if len(g.res) < 16 {
		g.res[re] = r
	}
	return r
}

// countMatches returns the matches of re in s and their total length;
// it stops early (early: n and total count only the matches so far) once
// enough(n, total), and when the call is stopped. It builds the unmatched
// rest of s (at most len(s)), which is charged. ok is false if re does
// not compile.
func (g *awkGuard) countMatches(re, s string, enough func(n, total int64) bool) (n, total int64, early, ok bool) {
	r := g.regex(re)
	if r == nil {
		return 0, 0, false, false
	}
	if lit, complete := r.LiteralPrefix(); complete && lit != "" {
		// a plain string: counted as the regex finds it, leftmost
		// and without overlap, without building anything
		n = int64(strings.Count(s, lit))
		return n, n * int64(len(lit)), false, true
	}
	if g.alloc(int64(len(s))) != nil {
		return 0, 0, false, false
	}
	type stop struct{}
	defer func() {
		if v := recover(); v != nil {
			if _, is := v.(stop); !is {
				panic(v)
			}
			early, ok = true, true
		}
	}()
	r.ReplaceAllStringFunc(s, func(m string) string {
		n++
		total += int64(len(m))
		if enough(n, total) || n%65536 == 0 && g.step() != nil {
			panic(stop{})
		}
		return ""
	})
	return n, total, false, true
}

// sub charges what sub or gsub makes of in: the unmatched text, the
// literal replacement for each match and the match for each & in it.
func (g *awkGuard) sub(re, repl, in string, global bool) error {
	if len(re) > maxRegex {
		return fmt.Errorf("%v: %d bytes, over the fast path's limit of %d", errRegexTooBig, len(re), maxRegex)
	}
	if err := matchBound(len(re), len(in), func() bool { return false }); err != nil {
		return err
	}
	amps := int64(strings.Count(repl, "&"))
	lit := int64(len(repl)) - amps
	l := int64(len(in))
	matches := l + 1
	if !global {
		matches = 1
	}
	bound := awkBuild*(l+matches*lit+amps*l) + awkReBytes*int64(len(re))
	if room := g.room(); bound > room {
		// Worth counting: few matches are the common case. The
		// count stops once what the matches so far make alone does
		// not fit.
		enough := func(n, total int64) bool { return awkBuild*(n*lit+amps*total) > room }
		if !global {
			enough = func(n, _ int64) bool { return n >= 1 } // sub replaces the first
		}
		// stopped early, the count says only that the cheap bound
		// stands (sub: that the first match is found)
		if n, total, early, ok := g.countMatches(re, in, enough); ok && (!early || !global) {
			if !global && n > 1 { // a plain string's matches are all counted
				n, total = 1, total/n
			}
			bound = awkBuild*(l-total+n*lit+amps*total) + awkReBytes*int64(len(re))
		}
	}
	return g.alloc(bound)
}

// pieces charges what splitting s by fs (awk's FS rules) makes, per
// piece.
func (g *awkGuard) pieces(s, fs string, per int64) error {
	l := int64(len(s))
	bound := (l + 1) * per
	regex := utf8.RuneCountInString(fs) > 1
	if regex {
		bound += (l + 1) * awkMatchBytes
	}
	if bound <= g.room() {
		return g.alloc(bound)
	}
	var n int64
	switch {
	case fs == " ":
		n = int64(wordCount(s))
	case !regex:
		n = int64(strings.Count(s, "\n")) + 1
		if fs != "" && fs != "\n" {
			n += int64(strings.Count(s, fs))
		} else if fs == "" {
			n = l + 1
		}
	default:
		room := g.room()
		m, _, early, ok := g.countMatches(fs, s, func(n, _ int64) bool { return n*(per+awkMatchBytes) > room })
		if !ok || early {
			return g.alloc(bound)
		}
		return g.alloc((m+1)*(per+awkMatchBytes) + int64(strings.Count(s, "\n"))*per)
	}
	return g.alloc(n * per)
}

// wordCount bounds the fields of s split on white space: every start of
// a run of bytes that are not ASCII white space (a non-ASCII space may
// split more, so a run is also cut at every non-ASCII byte).
func wordCount(s string) int {
	n := 1
	space := true
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f':
			space = true
		case c >= 0x80:
			n++
			space = true
		default:
			if space {
				n++
			}
			space = false
		}
	}
	return n
}

// nfBound is what setting NF (or field n) to n makes: the fields and the
// record rebuilt with OFS between them.
func nfBound(n float64, ofs, line string) int64 {
	if !(n > 0) {
		return int64(len(line))
	}
	if n > awkMaxFields {
		return 0 // goawk refuses it
	}
	k := int64(n)
	return k*(awkBuild*awkFieldBytes+int64(len(ofs))) + awkBuild*int64(len(line))
}

// fmtBound is an upper bound of the length of sprintf(format, args):
// the format's literal text, and for each conversion its width and
// precision (Go's fmt takes none over a million from *, none of more
// than 7 digits from the format) and its operand.
func fmtBound(format string, args []string) int64 {
	n := int64(len(format))
	arg := 0
	next := func() string {
		if arg < len(args) {
			arg++
			return args[arg-1]
		}
		return ""
	}
	num := func(s string) int64 {
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			// awk takes a leading number; a bound must not
			// guess, so take the most fmt prints
			return awkMaxWidth
		}
		return int64(min(math.Abs(f), awkMaxWidth))
	}
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		i++
		if i < len(format) && format[i] == '%' {
			continue
		}
		width, prec := int64(0), int64(0)
		cur := &width
		for ; i < len(format) && strings.IndexByte(" .-+*#0123456789", format[i]) >= 0; i++ {
			switch c := format[i]; {
			case c == '.':
				cur = &prec
			case c == '*':
				*cur = num(next())
			case c >= '0' && c <= '9':
				*cur = min(*cur*10+int64(c-'0'), awkMaxDigits)
			}
		}
		n += width + prec + 350 + int64(len(next()))
	}
	return n
}

// guardAwk returns src rewritten as the top of this file says. src must
// parse (the caller reports its errors as written).
func guardAwk(src string) (guarded string, err error) {
	prog, err := parser.ParseProgram([]byte(src), nil)
	if err != nil {
		return "", err
	}
	w := &awkWriter{}
	defer func() {
		if r := recover(); r != nil {
			guarded, err = "", fmt.Errorf("awk program not supported by the shell fast path: %v", r)
		}
	}()
	w.program(reflect.ValueOf(&prog.ResolvedProgram.Program).Elem())
	return w.b.String(), nil
}

// awkWriter prints goawk's syntax tree (read by reflection: its types are
// internal to goawk) as awk source, fully parenthesized, with the checks
// put in.
type awkWriter struct {
	b     strings.Builder
	temps []string // of the function being written
	inFn  bool
	ntemp int
	// matchOn is the subject of the match being written, for regex to
	// hand to its check (see matched)
	matchOn string
}

func (w *awkWriter) temp() string {
	w.ntemp++
	t := awkTemp + strconv.Itoa(w.ntemp)
	if w.inFn {
		w.temps = append(w.temps, t)
	}
	return t
}

func (w *awkWriter) program(p reflect.Value) {
	hasActions := p.FieldByName("Actions").Len() > 0
	begins := p.FieldByName("Begin")
	for i := 0; i < begins.Len(); i++ {
		w.b.WriteString("BEGIN {\n")
		w.stmts(begins.Index(i))
		w.b.WriteString("}\n")
	}
	if hasActions {
		// every record's fields are charged before any pattern splits it
		w.b.WriteString("substr($0, " + strconv.Itoa(awkSmallChars+1) + ") != \"\" && " + awkRecFunc + "($0, FS) && 0 { }\n")
	}
	actions := p.FieldByName("Actions")
	for i := 0; i < actions.Len(); i++ {
		a := actions.Index(i).Elem()
		pats := a.FieldByName("Pattern")
		for j := 0; j < pats.Len(); j++ {
			if j > 0 {
				w.b.WriteString(", ")
			}
			w.b.WriteString(w.expr(pats.Index(j)))
		}
		body := a.FieldByName("Stmts")
		w.b.WriteString(" {\n")
		if body.IsNil() {
			w.b.WriteString("print\n")
		} else {
			w.stmts(body)
		}
		w.b.WriteString("}\n")
	}
	ends := p.FieldByName("End")
	for i := 0; i < ends.Len(); i++ {
		w.b.WriteString("END {\n")
		w.stmts(ends.Index(i))
		w.b.WriteString("}\n")
	}
	fns := p.FieldByName("Functions")
	for i := 0; i < fns.Len(); i++ {
		f := fns.Index(i).Elem()
		outer := w.b
		w.b = strings.Builder{}
		w.inFn, w.temps = true, nil
		w.b.WriteString(awkStep)
		w.stmts(f.FieldByName("Body"))
		body := w.b.String()
		w.b = outer
		w.inFn = false
		params := f.FieldByName("Params").Interface().([]string)
		params = append(append([]string(nil), params...), w.temps...)
		w.b.WriteString("function " + f.FieldByName("Name").String() + "(" + strings.Join(params, ", ") + ") {\n")
		w.b.WriteString(body)
		w.b.WriteString("}\n")
	}
}

// node returns the struct a syntax tree interface value points to and
// its type's name; ok is false for a nil one.
func node(v reflect.Value) (reflect.Value, string, bool) {
	for v.Kind() == reflect.Interface {
		if v.IsNil() {
			return v, "", false
		}
		v = v.Elem()
	}
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return v, "", false
		}
		v = v.Elem()
	}
	return v, v.Type().Name(), true
}

func (w *awkWriter) stmts(ss reflect.Value) {
	for i := 0; i < ss.Len(); i++ {
		w.stmt(ss.Index(i))
		w.b.WriteString("\n")
	}
}

func (w *awkWriter) block(ss reflect.Value, first string) {
	w.b.WriteString("{\n" + first)
	w.stmts(ss)
	w.b.WriteString("}")
}

func (w *awkWriter) stmt(sv reflect.Value) {
	s, kind, ok := node(sv)
	if !ok {
		return
	}
	f := s.FieldByName
	step := awkStep
	switch kind {
	case "PrintStmt", "PrintfStmt":
		args := f("Args")
		var parts []string
		if kind == "PrintfStmt" {
			fast, cond, slow := w.format(args)
			if cond != "" {
				// written as an if, the fast path first
				w.b.WriteString("if (" + cond + ") ")
				w.printf(fast, f)
				w.b.WriteString("\nelse ")
				w.printf(slow, f)
				return
			}
			w.printf(slow, f)
			return
		} else {
			for i := 0; i < args.Len(); i++ {
				parts = append(parts, w.expr(args.Index(i)))
			}
			w.b.WriteString("print ")
		}
		for i := range parts {
			parts[i] = "(" + parts[i] + ")" // a > in one is no redirection
		}
		w.b.WriteString(strings.Join(parts, ", "))
		if _, _, ok := node(f("Dest")); ok {
			w.b.WriteString(" " + lexer.Token(f("Redirect").Int()).String() + " " + w.expr(f("Dest")))
		}
	case "ExprStmt":
		w.b.WriteString(w.expr(f("Expr")))
	case "IfStmt":
		w.b.WriteString("if (" + w.expr(f("Cond")) + ") ")
		w.block(f("Body"), "")
		if f("Else").Len() > 0 {
			w.b.WriteString(" else ")
			w.block(f("Else"), "")
		}
	case "ForStmt":
		w.b.WriteString("for (")
		w.stmt(f("Pre"))
		w.b.WriteString("; ")
		if _, _, ok := node(f("Cond")); ok {
			w.b.WriteString(w.expr(f("Cond")))
		}
		w.b.WriteString("; ")
		w.stmt(f("Post"))
		w.b.WriteString(") ")
		w.block(f("Body"), step)
	case "ForInStmt":
		if f("Var").String() == "NF" {
			panic("NF as the variable of a for-in loop")
		}
		w.b.WriteString("for (" + f("Var").String() + " in " + f("Array").String() + ") ")
		w.block(f("Body"), step)
	case "WhileStmt":
		w.b.WriteString("while (" + w.expr(f("Cond")) + ") ")
		w.block(f("Body"), step)
	case "DoWhileStmt":
		w.b.WriteString("do ")
		w.block(f("Body"), step)
		w.b.WriteString(" while (" + w.expr(f("Cond")) + ")")
	case "BreakStmt":
		w.b.WriteString("break")
	case "ContinueStmt":
		w.b.WriteString("continue")
	case "NextStmt":
		w.b.WriteString("next")
	case "NextfileStmt":
		w.b.WriteString("nextfile")
	case "ExitStmt":
		w.b.WriteString("exit")
		if _, _, ok := node(f("Status")); ok {
			w.b.WriteString(" " + w.expr(f("Status")))
		}
	case "DeleteStmt":
		w.b.WriteString("delete " + f("Array").String())
		if f("Index").Len() > 0 {
			w.b.WriteString("[" + w.index(f("Index")) + "]")
		}
	case "ReturnStmt":
		w.b.WriteString("return")
		if _, _, ok := node(f("Value")); ok {
			w.b.WriteString(" " + w.expr(f("Value")))
		}
	case "BlockStmt":
		w.block(f("Body"), "")
	default:
		panic("statement " + kind)
	}
}

// printf writes a printf statement of the given arguments.
func (w *awkWriter) printf(parts []string, f func(string) reflect.Value) {
	w.b.WriteString("printf " + strings.Join(parenthesized(parts), ", "))
	if _, _, ok := node(f("Dest")); ok {
		w.b.WriteString(" " + lexer.Token(f("Redirect").Int()).String() + " " + w.expr(f("Dest")))
	}
}

// format returns the arguments of sprintf or printf with the format
// checked (slow), and if the format is a literal whose own output is
// short and the operands may be short, the arguments as written (fast)
// and the test that the operands are short (cond; "" if there is no
// fast path, "1" if it needs no test).
func (w *awkWriter) format(args reflect.Value) (fast []string, cond string, slow []string) {
	if args.Len() == 0 {
		return nil, "", nil
	}
	var check, use, texts []string
	var nodes []reflect.Value
	for i := 1; i < args.Len(); i++ {
		c, u := w.twice(args.Index(i))
		check, use = append(check, c), append(use, u)
		texts, nodes = append(texts, w.expr(args.Index(i))), append(nodes, args.Index(i))
	}
	f := w.expr(args.Index(0))
	slow = append([]string{awkFmtFunc + "(" + strings.Join(append([]string{f}, check...), ", ") + ")"}, use...)
	if e, kind, _ := node(args.Index(0)); kind == "StrExpr" {
		format := e.FieldByName("Value").String()
		if !strings.Contains(format, "*") && fmtBound(format, nil) <= 64<<10 {
			if c, ok := smallOperands(nodes, texts); ok {
				if c == "" {
					c = "1"
				}
				return append([]string{f}, texts...), c, slow
			}
		}
	}
	return nil, "", slow
}

// twice returns an expression to evaluate first and one to use after it
// for the same value: the expression itself twice if it has no side
// effects, else an assignment to a temporary and the temporary.
func (w *awkWriter) twice(e reflect.Value) (string, string) {
	s := w.expr(e)
	if pure(e) {
		return s, s
	}
	t := w.temp()
	return "(" + t + " = " + s + ")", t
}

// pure reports whether evaluating e twice is the same as once.
func pure(ev reflect.Value) bool {
	e, kind, ok := node(ev)
	if !ok {
		return true
	}
	f := e.FieldByName
	all := func(list reflect.Value) bool {
		for i := 0; i < list.Len(); i++ {
			if !pure(list.Index(i)) {
				return false
			}
		}
		return true
	}
	switch kind {
	case "NumExpr", "StrExpr", "RegExpr", "VarExpr":
		return true
	case "FieldExpr":
		return pure(f("Index"))
	case "IndexExpr", "InExpr":
		return all(f("Index"))
	case "GroupingExpr":
		return pure(f("Expr"))
	case "UnaryExpr":
		return pure(f("Value"))
	case "BinaryExpr":
		return pure(f("Left")) && pure(f("Right"))
	case "CondExpr":
		return pure(f("Cond")) && pure(f("True")) && pure(f("False"))
	case "CallExpr":
		switch lexer.Token(f("Func").Int()) {
		case lexer.F_LENGTH, lexer.F_SUBSTR, lexer.F_INDEX, lexer.F_INT:
			return all(f("Args"))
		}
	}
	return false
}

// index returns the subscript of a[...]: several are joined by SUBSEP,
// as goawk does, through the checked concatenation.
func (w *awkWriter) index(list reflect.Value) string {
	if list.Len() == 1 {
		return w.expr(list.Index(0))
	}
	var parts []string
	for i := 0; i < list.Len(); i++ {
		if i > 0 {
			parts = append(parts, "SUBSEP")
		}
		parts = append(parts, w.expr(list.Index(i)))
	}
	return awkCatFunc + "(" + strings.Join(parts, ", ") + ")"
}

// regex returns e where a regex is expected (after ~, in sub, match,
// split): a literal as it is, anything else with its compilation
// checked (and, after ~ and in match, its match: see matched).
func (w *awkWriter) regex(ev reflect.Value) string {
	if e, kind, ok := node(ev); ok && kind == "StrExpr" && e.FieldByName("Regex").Bool() {
		return awkRegexText(e.FieldByName("Value").String())
	}
	if w.isLiteral(ev) {
		return w.expr(ev)
	}
	if w.matchOn != "" {
		on := w.matchOn
		w.matchOn = ""
		return awkMatchFunc + "(" + on + ", " + w.expr(ev) + ")"
	}
	return awkReFunc + "(" + w.expr(ev) + ")"
}

// matched returns the subject of a match (the left of ~, match's first
// argument), made so that the match that follows is bounded (see
// matchBound): a literal expression of matchCheckFrom bytes or more
// checks the subject's length itself; any other expression leaves the
// subject's value to regex (in w.matchOn), which hands it to the check of
// the expression. Short literals need no check.
func (w *awkWriter) matched(subject, re reflect.Value) string {
	if e, kind, ok := node(re); ok && kind == "StrExpr" {
		if n := len(e.FieldByName("Value").String()); n >= matchCheckFrom {
			return awkLenFunc + "(" + w.expr(subject) + ", " + strconv.Itoa(n) + ")"
		}
		return "(" + w.expr(subject) + ")"
	}
	if _, _, ok := node(re); ok && w.isLiteral(re) {
		return "(" + w.expr(subject) + ")"
	}
	first, again := w.twice(subject)
	w.matchOn = again
	return "(" + first + ")"
}

// regexString returns a regex argument as a string for a check, and the
// argument to give the operation after it.
func (w *awkWriter) regexString(ev reflect.Value) (string, string) {
	if e, kind, ok := node(ev); ok && kind == "StrExpr" && e.FieldByName("Regex").Bool() {
		v := e.FieldByName("Value").String()
		return awkQuote(v), awkRegexText(v)
	}
	check, re := w.twice(ev)
	return check, awkReFunc + "(" + re + ")"
}

// lvalue returns an lvalue that evaluates its subscript (goawk
// evaluates an lvalue's subscript before the rest of the operation), and
// the same lvalue to read after it without evaluating the subscript
// again. A field's index is checked (see checkedLvalue).
func (w *awkWriter) lvalue(ev reflect.Value) (string, string) {
	e, kind, _ := node(ev)
	switch kind {
	case "VarExpr":
		return e.FieldByName("Name").String(), e.FieldByName("Name").String()
	case "IndexExpr":
		arr := e.FieldByName("Array").String()
		idx := w.index(e.FieldByName("Index"))
		if pure(ev) {
			return arr + "[" + idx + "]", arr + "[" + idx + "]"
		}
		t := w.temp()
		return arr + "[(" + t + " = " + idx + ")]", arr + "[" + t + "]"
	case "FieldExpr":
		first, again := w.twice(e.FieldByName("Index"))
		return "$(" + awkFieldFunc + "(" + first + ", NF, OFS, $0))", "$(" + again + ")"
	}
	panic("lvalue " + kind)
}

// checkedLvalue is the first form of lvalue, for getline and sub or
// gsub, which cannot set NF here: what NF is set to makes fields and
// the record rebuilt, and there is no place to check it first.
func (w *awkWriter) checkedLvalue(ev reflect.Value) string {
	if e, kind, _ := node(ev); kind == "VarExpr" && e.FieldByName("Name").String() == "NF" {
		panic("NF set by getline, sub or gsub")
	}
	first, _ := w.lvalue(ev)
	return first
}

func (w *awkWriter) expr(ev reflect.Value) string {
	e, kind, ok := node(ev)
	if !ok {
		return ""
	}
	f := e.FieldByName
	switch kind {
	case "NumExpr":
		return awkNumber(f("Value").Float())
	case "StrExpr":
		if f("Regex").Bool() {
			return awkRegexText(f("Value").String())
		}
		return awkQuote(f("Value").String())
	case "RegExpr":
		return awkRegexText(f("Regex").String())
	case "VarExpr":
		return f("Name").String()
	case "FieldExpr":
		return "$(" + w.expr(f("Index")) + ")"
	case "NamedFieldExpr":
		return "@(" + w.expr(f("Field")) + ")"
	case "GroupingExpr":
		return "(" + w.expr(f("Expr")) + ")"
	case "UnaryExpr":
		return "(" + lexer.Token(f("Op").Int()).String() + "(" + w.expr(f("Value")) + "))"
	case "CondExpr":
		return "((" + w.expr(f("Cond")) + ") ? (" + w.expr(f("True")) + ") : (" + w.expr(f("False")) + "))"
	case "IndexExpr":
		return f("Array").String() + "[" + w.index(f("Index")) + "]"
	case "InExpr":
		return "((" + w.index(f("Index")) + ") in " + f("Array").String() + ")"
	case "BinaryExpr":
		op := lexer.Token(f("Op").Int())
		switch op {
		case lexer.CONCAT:
			var parts []string
			var nodes []reflect.Value
			w.concat(e, &parts, &nodes)
			cat := awkCatFunc + "(" + strings.Join(parts, ", ") + ")"
			if cond, ok := smallOperands(nodes, parts); ok {
				if cond == "" {
					return "(" + strings.Join(parenthesized(parts), " ") + ")"
				}
				return "((" + cond + ") ? (" + strings.Join(parenthesized(parts), " ") + ") : " + cat + ")"
			}
			return cat
		case lexer.MATCH, lexer.NOT_MATCH:
			return "(" + w.matched(f("Left"), f("Right")) + " " + op.String() + " " + w.regex(f("Right")) + ")"
		}
		return "((" + w.expr(f("Left")) + ") " + op.String() + " (" + w.expr(f("Right")) + "))"
	case "AssignExpr":
		return "(" + w.assign(f("Left"), "", f("Right")) + ")"
	case "AugAssignExpr":
		return "(" + w.assign(f("Left"), lexer.Token(f("Op").Int()).String(), f("Right")) + ")"
	case "IncrExpr":
		left, _ := w.lvalue(f("Expr")) // NF++ adds one field
		op := lexer.Token(f("Op").Int()).String()
		if f("Pre").Bool() {
			return "(" + op + left + ")"
		}
		return "(" + left + op + ")"
	case "CallExpr":
		return w.call(lexer.Token(f("Func").Int()), f("Args"))
	case "UserCallExpr":
		var args []string
		for i := 0; i < f("Args").Len(); i++ {
			args = append(args, w.expr(f("Args").Index(i)))
		}
		return f("Name").String() + "(" + strings.Join(args, ", ") + ")"
	case "GetlineExpr":
		s := ""
		if _, _, ok := node(f("Command")); ok {
			s += "(" + w.expr(f("Command")) + ") | "
		}
		s += "getline"
		_, _, target := node(f("Target"))
		if target {
			s += " " + w.checkedLvalue(f("Target"))
		}
		_, _, file := node(f("File"))
		if file {
			s += " < (" + w.expr(f("File")) + ")"
		}
		if !target {
			// a new $0, split into fields when a field is read
			return awkLineFunc + "((" + s + "), $0, FS)"
		}
		return "(" + s + ")"
	case "MultiExpr":
		var parts []string
		for i := 0; i < f("Exprs").Len(); i++ {
			parts = append(parts, w.expr(f("Exprs").Index(i)))
		}
		return "(" + strings.Join(parts, ", ") + ")"
	}
	panic("expression " + kind)
}

// concat flattens a chain of concatenations into its operands.
func (w *awkWriter) concat(e reflect.Value, parts *[]string, nodes *[]reflect.Value) {
	for _, side := range []string{"Left", "Right"} {
		o, kind, _ := node(e.FieldByName(side))
		if kind == "BinaryExpr" && lexer.Token(o.FieldByName("Op").Int()) == lexer.CONCAT {
			w.concat(o, parts, nodes)
			continue
		}
		*parts = append(*parts, w.expr(e.FieldByName(side)))
		*nodes = append(*nodes, e.FieldByName(side))
	}
}

// The fast path: an operation on a few short operands runs as written,
// unchecked, after a test that each is short (substr(x, 257) looks at
// 256 characters at most and copies nothing; goawk counts characters, not
// bytes, at some nanoseconds each); what it makes is then at most some
// tens of kilobytes. Only operands without side effects, and of short
// text (the operation is written twice), take it.
const (
	awkSmallChars = 256 // characters of a short operand: 1 KiB at most
	awkSmallOps   = 8   // operands of an operation that takes the fast path
	awkSmallText  = 128 // bytes of an operand's text that is written twice
)

// smallOperands returns the test that the operands are short (empty if
// all are short literals), or false if the operation cannot take the
// fast path.
func smallOperands(nodes []reflect.Value, texts []string) (string, bool) {
	if len(nodes) > awkSmallOps {
		return "", false
	}
	var conds []string
	for i, n := range nodes {
		e, kind, _ := node(n)
		switch {
		case kind == "NumExpr":
			continue
		case kind == "StrExpr" && !e.FieldByName("Regex").Bool() && utf8.RuneCountInString(e.FieldByName("Value").String()) <= awkSmallChars:
			continue
		case !pure(n) || len(texts[i]) > awkSmallText:
			return "", false
		}
		conds = append(conds, awkShort(texts[i], awkSmallChars))
	}
	return strings.Join(conds, " && "), true
}

// awkShort is a test that x has at most n characters.
func awkShort(x string, n int) string {
	return "substr(" + x + ", " + strconv.Itoa(n+1) + ") == \"\""
}

func parenthesized(parts []string) []string {
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = "(" + p + ")"
	}
	return out
}

// assign returns an assignment (op "" or an arithmetic operator) with
// its checks.
func (w *awkWriter) assign(lv reflect.Value, op string, rv reflect.Value) string {
	l, kind, _ := node(lv)
	right := w.expr(rv)
	if kind == "VarExpr" && op == "" {
		switch l.FieldByName("Name").String() {
		case "NF":
			return "NF = " + awkNFFunc + "(" + right + ", OFS, $0)"
		case "FS":
			if w.isLiteral(rv) {
				break
			}
			return "FS = " + awkReFunc + "(" + right + ")"
		}
	}
	if kind == "VarExpr" && l.FieldByName("Name").String() == "NF" {
		return "NF = " + awkNFFunc + "(NF " + op + " (" + right + "), OFS, $0)"
	}
	if kind == "FieldExpr" {
		idx, ik, _ := node(l.FieldByName("Index"))
		if ik == "NumExpr" && idx.FieldByName("Value").Float() == 0 && op == "" {
			return "$0 = " + awkRecFunc + "(" + right + ", FS)"
		}
	}
	return w.checkedLvalue(lv) + " " + op + "= (" + right + ")"
}

func (w *awkWriter) isLiteral(ev reflect.Value) bool {
	_, kind, _ := node(ev)
	return kind == "StrExpr" || kind == "NumExpr"
}

func (w *awkWriter) call(fn lexer.Token, args reflect.Value) string {
	arg := func(i int) string { return w.expr(args.Index(i)) }
	name := fn.String()
	switch fn {
	case lexer.F_SUB, lexer.F_GSUB:
		global := "0"
		if fn == lexer.F_GSUB {
			global = "1"
		}
		reCheck, re := w.regexString(args.Index(0))
		repl := arg(1)
		// the fast path: a short target, a replacement of 64 characters
		// at most: some 70 KB at most
		fast := ""
		if pure(args.Index(0)) && pure(args.Index(1)) && len(re) <= awkSmallText && len(repl) <= awkSmallText {
			fast = awkShort(repl, 64)
		}
		if args.Len() < 3 {
			call := name + "(" + re + ", " + awkSubFunc + "(" + reCheck + ", " + repl + ", $0, " + global + "))"
			if fast != "" {
				return "((" + fast + " && " + awkShort("$0", awkSmallChars) + ") ? " + name + "(" + re + ", " + repl + ") : " + call + ")"
			}
			return call
		}
		w.checkedLvalue(args.Index(2)) // not NF
		target, value := w.lvalue(args.Index(2))
		call := name + "(" + re + ", " + awkSubFunc + "(" + reCheck + ", " + repl + ", " + value + ", " + global + "), " + target + ")"
		if fast != "" && pure(args.Index(2)) && len(value) <= awkSmallText {
			return "((" + fast + " && " + awkShort(value, awkSmallChars) + ") ? " + name + "(" + re + ", " + repl + ", " + target + ") : " + call + ")"
		}
		return call
	case lexer.F_SPRINTF:
		fast, cond, slow := w.format(args)
		call := name + "(" + strings.Join(slow, ", ") + ")"
		if cond != "" {
			return "((" + cond + ") ? " + name + "(" + strings.Join(fast, ", ") + ") : " + call + ")"
		}
		return call
	case lexer.F_SPLIT:
		s := arg(0)
		arr := arg(1)
		if args.Len() < 3 {
			return name + "(" + awkSplitFunc + "(" + s + ", FS), " + arr + ")"
		}
		fsCheck, fs := w.regexString(args.Index(2))
		return name + "(" + awkSplitFunc + "(" + s + ", " + fsCheck + "), " + arr + ", " + fs + ")"
	case lexer.F_TOUPPER, lexer.F_TOLOWER:
		return name + "(" + awkCaseFunc + "(" + arg(0) + "))"
	case lexer.F_MATCH:
		return name + "(" + w.matched(args.Index(0), args.Index(1)) + ", " + w.regex(args.Index(1)) + ")"
	}
	var parts []string
	for i := 0; i < args.Len(); i++ {
		parts = append(parts, arg(i))
	}
	return name + "(" + strings.Join(parts, ", ") + ")"
}

func awkNumber(f float64) string {
	if math.IsInf(f, 1) {
		return "(1e999)"
	}
	return "(" + strconv.FormatFloat(f, 'g', -1, 64) + ")"
}

// awkQuote writes s as an awk string literal.
func awkQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// awkRegexText writes a regex literal as goawk's lexer reads it back.
func awkRegexText(re string) string {
	return "/" + strings.ReplaceAll(re, "/", `\/`) + "/"
}
