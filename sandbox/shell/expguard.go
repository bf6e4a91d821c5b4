package shell

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"
)

// Expansion guards.
//
// The interpreter expands a command's words in one step, with no command
// of ours in between: x=$x$x$x$x$x$x$x$x$x$x, ${x//a/<a long string>},
// echo {1..16000}$x or a word list of a million $x make gigabytes out of
// a few megabytes before any built-in runs, faster than the watchdog
// (limits.go) can look, and a single allocation that large ends the
// daemon. So every statement that expands a variable gets a guard before
// its first expansion: the rewrite puts $('__computerfs_guard' N) in
// front of it (a word of its own where words are split into fields,
// where it adds no field; the first part of the word elsewhere, where it
// adds an empty string). The guard runs as a command inside the
// substitution, before the words that follow it are expanded. It takes
// the sizes of the variables the statement reads (what the interpreter
// holds now, and what the statement's own assignments make before the
// next word reads them), works out an upper bound of what expanding the
// statement can allocate, and stops the call for its memory if that
// bound and what the call holds already pass its budget. A guard that
// fails is a fatal error of the substitution, so the expansion stops
// before it allocates.
//
// The bound is the size of the result with its worst case: a pattern
// replacement that matches every byte, case conversions that grow each
// character to three bytes, @Q quoting every byte as \xNN, an unquoted
// expansion split into a field every two bytes (each field costs a
// string), brace expansion multiplying the word; twice all that, for the
// builders' growth. What a $(...) inside the statement captures is not
// in it: that is charged as it is written (captureWriter), and a
// substitution runs commands, where the call is looked at again.
// Positional parameters are bounded by the biggest argument list a
// command of the call was given, as they all come from one.
//
// The interpreter also parses scripts it is handed at run time: eval and
// source go through the same rewrite (handlers.go), and so do trap
// actions; aliases, whose words the interpreter would expand without a
// guard, are not turned on (shopt -s expand_aliases is refused).

// guardCmd is the guard's command name. It is quoted where the rewrite
// puts it, and answered in the call handler before the interpreter looks
// for a function of that name: a script cannot stand in for it.
const guardCmd = "__computerfs_guard"

// guardsOff turns the rewrite off, for benchmarks to compare.
var guardsOff bool

// guardTable holds the statements the rewrite guarded in one call, for
// their guards to look at, and what the call knows of its positional
// parameters.
type guardTable struct {
	mu    sync.Mutex
	sites []*guardSite
	// rewritten scripts (eval, trap) by their source, so that a loop of
	// eval does not add the same statements again
	done map[string]string
	// the biggest argument list (bytes, and count) a command got, and
	// the most extglob openings in one (patguard.go)
	argBytes, argCount, argGroups atomic.Int64
	// the captures of $(...) whose output is split into fields, and
	// of those in patterns (patguard.go)
	splitMu sync.Mutex
	split   map[weak.Pointer[strings.Builder]]*splitCapture
	pats    map[weak.Pointer[strings.Builder]]*patCapture
}

// splitCapture is what is known of a capture that is split into fields:
// the separators written to it so far (each one makes a field).
type splitCapture struct {
	seps atomic.Int64
}

// splitMark is the guard's argument that marks the capture of the
// substitution it runs in as one that is split into fields.
const splitMark = "-split"

func (g *guardTable) markSplit(sb *strings.Builder) {
	g.splitMu.Lock()
	defer g.splitMu.Unlock()
	if g.split == nil {
		g.split = map[weak.Pointer[strings.Builder]]*splitCapture{}
	}
	prune(g.split)
	k := weak.Make(sb)
	if g.split[k] == nil {
		g.split[k] = &splitCapture{}
	}
}

// markPattern marks the capture sb as part of a pattern (patguard.go).
func (g *guardTable) markPattern(sb *strings.Builder, glob bool) {
	g.splitMu.Lock()
	defer g.splitMu.Unlock()
	if g.pats == nil {
		g.pats = map[weak.Pointer[strings.Builder]]*patCapture{}
	}
	prune(g.pats)
	k := weak.Make(sb)
	if g.pats[k] == nil {
		g.pats[k] = &patCapture{glob: glob}
	}
}

// patOf is the capture's record if it is part of a pattern, or nil.
func (g *guardTable) patOf(sb *strings.Builder) *patCapture {
	g.splitMu.Lock()
	defer g.splitMu.Unlock()
	return g.pats[weak.Make(sb)]
}

// prune keeps a table of captures small: the captures that are gone
// leave it, and if too many are still there, all do (a capture that is
// not found is not charged for its fields, nor bounded as a pattern,
// which only a call with 256 captures running at once can make).
func prune[V any](m map[weak.Pointer[strings.Builder]]V) {
	if len(m) < 256 {
		return
	}
	for k := range m {
		if k.Value() == nil {
			delete(m, k)
		}
	}
	if len(m) >= 256 {
		clear(m)
	}
}

// splitOf is the capture's record if it is split into fields, or nil.
func (g *guardTable) splitOf(sb *strings.Builder) *splitCapture {
	g.splitMu.Lock()
	defer g.splitMu.Unlock()
	return g.split[weak.Make(sb)]
}

// ifsTable is the field separators of IFS (unset: space, tab, newline).
func ifsTable(env expand.Environ) *[256]bool {
	ifs := " \t\n"
	if vr := env.Get("IFS"); vr.IsSet() {
		ifs = vr.String()
	}
	var t [256]bool
	for i := 0; i < len(ifs); i++ {
		t[ifs[i]] = true
	}
	return &t
}

// separators counts the bytes of s that split it into fields.
func separators(s []byte, ifs *[256]bool) int64 {
	n := int64(0)
	for _, c := range s {
		if ifs[c] {
			n++
		}
	}
	return n
}

// guardSite is one guarded statement: the words it expands, in order.
type guardSite struct {
	items []guardItem
}

// guardItem is one word a statement expands, or an arithmetic expression
// whose words it expands.
type guardItem struct {
	word   *syntax.Word
	fields bool // split into fields: an argument, a for list, an array element
	mult   int64
	assign string // the variable it is assigned to, if any
	add    bool   // +=
	arith  syntax.ArithmExpr
	pat    patKind // how the word is matched as a pattern (patguard.go)
	// the string a pattern (the word: right of [[ == ]] or =~, a case
	// pattern) is matched against, whose length bounds the match
	// (patguard.go)
	subject *syntax.Word
}

func (g *guardTable) add(s *guardSite) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sites = append(g.sites, s)
	return len(g.sites) - 1
}

func (g *guardTable) site(id string) *guardSite {
	n, err := strconv.Atoi(id)
	if err != nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if n < 0 || n >= len(g.sites) {
		return nil
	}
	return g.sites[n]
}

// sawArgs records a command's argument list (a bound of the positional
// parameters a function or set -- makes of it).
func (g *guardTable) sawArgs(args []string) {
	n, groups := int64(0), int64(0)
	for _, a := range args {
		n += int64(len(a)) + 1
		if strings.IndexByte(a, '(') > 0 {
			groups += textStats(a, nil).groups
		}
	}
	for {
		old := g.argGroups.Load()
		if groups <= old || g.argGroups.CompareAndSwap(old, groups) {
			break
		}
	}
	for {
		old := g.argBytes.Load()
		if n <= old || g.argBytes.CompareAndSwap(old, n) {
			break
		}
	}
	for c := int64(len(args)); ; {
		old := g.argCount.Load()
		if c <= old || g.argCount.CompareAndSwap(old, c) {
			break
		}
	}
}

// guardWord is the word $('__computerfs_guard' id).
func guardWord(id int) *syntax.Word {
	return &syntax.Word{Parts: []syntax.WordPart{guardPart(id)}}
}

func guardPart(id int) *syntax.CmdSubst {
	call := &syntax.CallExpr{Args: []*syntax.Word{
		{Parts: []syntax.WordPart{&syntax.SglQuoted{Value: guardCmd}}},
		{Parts: []syntax.WordPart{&syntax.Lit{Value: strconv.Itoa(id)}}},
	}}
	return &syntax.CmdSubst{Stmts: []*syntax.Stmt{{Cmd: call}}}
}

// guardStatements puts a guard in front of every statement of f that
// expands a variable (or a brace expansion), recording what each one
// expands in g.
//
// It returns the ids of the sites it added, from first to end.
func (g *guardTable) guardStatements(f syntax.Node) (first, end int) {
	g.mu.Lock()
	first = len(g.sites)
	g.mu.Unlock()
	if guardsOff {
		return first, first
	}
	type pending struct {
		items  []guardItem
		insert []func(*syntax.Word) // one per item: puts the guard in front of it
		// each item is expanded on its own (the elements of an array),
		// and a guard that fails stops only its own: every item gets
		// one, for what the items up to it may allocate
		each bool
	}
	var all []pending
	site := func(p pending) {
		if len(p.items) > 0 {
			all = append(all, p)
		}
	}
	prefix := func(w *syntax.Word) func(*syntax.Word) {
		return func(gw *syntax.Word) { w.Parts = append([]syntax.WordPart{gw.Parts[0]}, w.Parts...) }
	}
	assigns := func(p *pending, as []*syntax.Assign, setList func([]*syntax.Assign)) {
		for i, a := range as {
			name := ""
			if a.Name != nil {
				name = a.Name.Value
			}
			switch {
			case a.Array != nil:
				// The interpreter expands each element on its own and
				// goes on to the next when one fails: the guard goes
				// into the element's word, in front, so that a guard
				// that stops the call stops that element's expansion
				// too (a word that starts with ~ keeps it first: the
				// guard is an element of its own before it).
				arr := a.Array
				p.each = true
				for _, el := range arr.Elems {
					if el.Index != nil {
						p.items = append(p.items, guardItem{arith: el.Index})
						p.insert = append(p.insert, nil)
					}
					if el.Value == nil {
						continue
					}
					el := el
					markSplitSubst(el.Value)
					p.items = append(p.items, guardItem{word: el.Value, fields: true, mult: braceMult(el.Value), assign: name, add: true, pat: patGlob})
					if !startsWithTilde(el.Value) {
						p.insert = append(p.insert, prefix(el.Value))
						continue
					}
					p.insert = append(p.insert, func(gw *syntax.Word) {
						j := slices.Index(arr.Elems, el)
						arr.Elems = append(arr.Elems[:j:j], append([]*syntax.ArrayElem{{Value: gw}}, arr.Elems[j:]...)...)
					})
				}
			case a.Naked && a.Name == nil && a.Value != nil: // declare "$x"
				i := i
				p.items = append(p.items, guardItem{word: a.Value, fields: true, mult: braceMult(a.Value), pat: patGlob})
				p.insert = append(p.insert, func(gw *syntax.Word) {
					setList(append(as[:i:i], append([]*syntax.Assign{{Naked: true, Value: gw}}, as[i:]...)...))
				})
			case a.Value != nil:
				if a.Index != nil {
					p.items = append(p.items, guardItem{arith: a.Index})
					p.insert = append(p.insert, nil)
					name = "" // one element: the whole variable is not replaced
				}
				p.items = append(p.items, guardItem{word: a.Value, assign: name, add: a.Append || a.Index != nil})
				p.insert = append(p.insert, prefix(a.Value))
			}
		}
	}
	words := func(p *pending, ws []*syntax.Word, fields bool, setList func([]*syntax.Word)) {
		for i, w := range ws {
			it := guardItem{word: w, fields: fields}
			if fields {
				it.pat = patGlob
				markSplitSubst(w)
				it.mult = braceMult(w)
				i := i
				p.items = append(p.items, it)
				p.insert = append(p.insert, func(gw *syntax.Word) {
					setList(append(ws[:i:i], append([]*syntax.Word{gw}, ws[i:]...)...))
				})
				continue
			}
			p.items = append(p.items, it)
			p.insert = append(p.insert, prefix(w))
		}
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		switch x := n.(type) {
		case *syntax.Stmt:
			for _, rd := range x.Redirs {
				var p pending
				for _, w := range []*syntax.Word{rd.Word, rd.Hdoc} {
					if w != nil {
						p.items = append(p.items, guardItem{word: w})
						p.insert = append(p.insert, prefix(w))
					}
				}
				site(p)
			}
		case *syntax.CallExpr:
			var p pending
			if len(x.Args) > 0 {
				// the arguments are expanded first, then the
				// assignments for the command's environment
				words(&p, x.Args, true, func(ws []*syntax.Word) { x.Args = ws })
			}
			assigns(&p, x.Assigns, func(as []*syntax.Assign) { x.Assigns = as })
			site(p)
		case *syntax.DeclClause:
			var p pending
			assigns(&p, x.Args, func(as []*syntax.Assign) { x.Args = as })
			site(p)
		case *syntax.ForClause:
			if it, ok := x.Loop.(*syntax.WordIter); ok {
				var p pending
				words(&p, it.Items, true, func(ws []*syntax.Word) { it.Items = ws })
				site(p)
			}
		case *syntax.CaseClause:
			// the word and each pattern are expanded on their own, and
			// the interpreter goes on past one that fails
			p := pending{each: true}
			p.items = append(p.items, guardItem{word: x.Word})
			p.insert = append(p.insert, prefix(x.Word))
			for _, ci := range x.Items {
				for _, pat := range ci.Patterns {
					p.items = append(p.items, guardItem{word: pat, pat: patMatch, subject: x.Word})
					p.insert = append(p.insert, prefix(pat))
				}
			}
			site(p)
		case *syntax.TestClause:
			p := pending{each: true}
			patterns := map[*syntax.Word]bool{}
			subjects := map[*syntax.Word]*syntax.Word{}
			syntax.Walk(x.X, func(m syntax.Node) bool {
				if b, ok := m.(*syntax.BinaryTest); ok {
					switch b.Op {
					case syntax.TsMatch, syntax.TsMatchShort, syntax.TsNoMatch, syntax.TsReMatch:
						if w, ok := b.Y.(*syntax.Word); ok {
							patterns[w] = true
							if l, ok := b.X.(*syntax.Word); ok {
								subjects[w] = l
							}
						}
					}
				}
				if w, ok := m.(*syntax.Word); ok {
					it := guardItem{word: w}
					if patterns[w] {
						it.pat = patMatch
						it.subject = subjects[w]
					}
					p.items = append(p.items, it)
					p.insert = append(p.insert, prefix(w))
					return false
				}
				return true
			})
			site(p)
		case *syntax.ArithmCmd:
			site(pending{items: []guardItem{{arith: x.X}}, insert: []func(*syntax.Word){arithInsert(x.X)}})
		case *syntax.LetClause:
			for _, e := range x.Exprs {
				site(pending{items: []guardItem{{arith: e}}, insert: []func(*syntax.Word){arithInsert(e)}})
			}
		}
		return true
	})
	for _, p := range all {
		// the guard goes in front of the first item that expands
		// anything; the literal words before it cost what they say
		// A statement that at most copies one variable once is not
		// guarded: it can no more than double what the call holds, and
		// the next command looks at that (x=$i; echo "$dir/$f"),
		// unless it makes a pattern from an expansion (patguard.go).
		at := -1
		copies, alloc, risk := 0, false, false
		risky := make([]bool, len(p.items))
		for i, it := range p.items {
			risky[i] = itemPatternRisk(it)
			if (!itemLiteral(it) || risky[i]) && at < 0 && p.insert[i] != nil {
				at = i
			}
			if at >= 0 {
				c, a := itemCost(it)
				copies, alloc, risk = copies+c, alloc || a, risk || risky[i]
			}
		}
		memory := alloc || copies >= 2
		if at < 0 || !memory && !risk {
			continue
		}
		if !memory {
			// only its patterns need a guard: from the first of them
			at = slices.Index(risky, true)
		}
		for i, it := range p.items {
			if risky[i] {
				markPatternSubst(it.word, it.pat)
				paramPatterns(it.word, func(w *syntax.Word) { markPatternSubst(w, patMatch) })
			}
		}
		// One guard in front of the first item, for all; where the
		// interpreter expands each item on its own and goes on past one
		// that failed (p.each), one in front of each that expands
		// anything, for the items up to the next (their assignments are
		// made by then, and what they may take is in mem.assigned).
		starts := []int{at}
		if p.each {
			for i := at + 1; i < len(p.items); i++ {
				if p.insert[i] != nil && (risky[i] || memory && !itemLiteral(p.items[i])) {
					starts = append(starts, i)
				}
			}
		}
		for k := len(starts) - 1; k >= 0; k-- {
			end := len(p.items)
			if k+1 < len(starts) {
				end = starts[k+1]
			}
			id := g.add(&guardSite{items: p.items[starts[k]:end]})
			p.insert[starts[k]](guardWord(id))
		}
	}
	g.mu.Lock()
	end = len(g.sites)
	g.mu.Unlock()
	return
}

// startsWithTilde reports whether w begins with a literal ~ (a tilde
// expansion, which only happens at the start of a word).
func startsWithTilde(w *syntax.Word) bool {
	if len(w.Parts) == 0 {
		return false
	}
	l, ok := w.Parts[0].(*syntax.Lit)
	return ok && strings.HasPrefix(l.Value, "~")
}

// forget lets the sites of a script that has ended go (a nested script:
// nothing of it runs again).
func (g *guardTable) forget(first, end int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := first; i < end && i < len(g.sites); i++ {
		g.sites[i] = nil
	}
	if end == len(g.sites) {
		g.sites = g.sites[:first]
	}
}

// markSplitSubst makes each unquoted $(...) of w, whose output is split
// into fields, tell its capture so as its first command: a field costs
// a string, and a capture of a few bytes per line becomes many times its
// size once split (md5sum $(yes /dev/null | head -n 10000000)).
func markSplitSubst(w *syntax.Word) {
	for _, p := range w.Parts {
		// The mark is a command, and sets $? to 0: not where the first
		// statement reads the status it starts with.
		if cs, ok := p.(*syntax.CmdSubst); ok && len(cs.Stmts) > 0 && !readsStatus(cs.Stmts[0]) {
			mark := &syntax.Stmt{Cmd: &syntax.CallExpr{Args: []*syntax.Word{
				{Parts: []syntax.WordPart{&syntax.SglQuoted{Value: guardCmd}}},
				{Parts: []syntax.WordPart{&syntax.Lit{Value: splitMark}}},
			}}}
			cs.Stmts = append([]*syntax.Stmt{mark}, cs.Stmts...)
		}
	}
}

func readsStatus(st *syntax.Stmt) bool {
	reads := false
	syntax.Walk(st, func(n syntax.Node) bool {
		if pe, ok := n.(*syntax.ParamExp); ok && pe.Param != nil && (pe.Param.Value == "?" || pe.Param.Value == "PIPESTATUS") {
			reads = true
		}
		return !reads
	})
	return reads
}

// arithInsert puts the guard in front of the first word of an arithmetic
// expression that has more than a literal, if any.
func arithInsert(e syntax.ArithmExpr) func(*syntax.Word) {
	var target *syntax.Word
	syntax.Walk(e, func(n syntax.Node) bool {
		if w, ok := n.(*syntax.Word); ok && target == nil && !wordLiteral(w) {
			target = w
		}
		return target == nil
	})
	if target == nil {
		return nil
	}
	return func(gw *syntax.Word) { target.Parts = append([]syntax.WordPart{gw.Parts[0]}, target.Parts...) }
}

// wordLiteral reports whether w expands to its own text (quotes aside).
func wordLiteral(w *syntax.Word) bool {
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit, *syntax.SglQuoted:
		case *syntax.DblQuoted:
			if !wordLiteral(&syntax.Word{Parts: p.Parts}) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func itemLiteral(it guardItem) bool {
	if it.arith != nil {
		lit := true
		syntax.Walk(it.arith, func(n syntax.Node) bool {
			if w, ok := n.(*syntax.Word); ok && !wordLiteral(w) {
				lit = false
			}
			return lit
		})
		return lit
	}
	return wordLiteral(it.word) && it.mult <= 1
}

// itemCost is what expanding the item costs beyond the variables it
// reads, as far as the text tells: the number of variables it copies
// (a word of one part is the variable's own string; a word of several
// is a new one), and whether it may allocate more than a copy (a
// replacement, a case conversion, quoting, a split into fields, brace
// expansion).
func itemCost(it guardItem) (copies int, alloc bool) {
	if it.arith != nil {
		syntax.Walk(it.arith, func(n syntax.Node) bool {
			if w, ok := n.(*syntax.Word); ok {
				c, a := wordCost(w.Parts, false)
				copies, alloc = copies+c, alloc || a
				return false
			}
			return true
		})
		return copies, alloc
	}
	copies, alloc = wordCost(it.word.Parts, it.fields)
	return copies, alloc || it.mult > 1
}

func wordCost(parts []syntax.WordPart, split bool) (copies int, alloc bool) {
	n, dyn := 0, 0
	var walk func(parts []syntax.WordPart, quoted bool)
	walk = func(parts []syntax.WordPart, quoted bool) {
		for _, p := range parts {
			switch p := p.(type) {
			case *syntax.DblQuoted:
				walk(p.Parts, true)
				continue
			case *syntax.ParamExp:
				if smallParam(p) {
					break
				}
				dyn++
				switch {
				case split && !quoted, p.Repl != nil, p.Names != 0,
					p.Excl && p.Index != nil,
					p.Exp != nil && p.Exp.Op >= syntax.UpperFirst:
					alloc = true
				case p.Exp != nil && p.Exp.Word != nil:
					if c, a := wordCost(p.Exp.Word.Parts, false); c > 0 || a || !wordLiteral(p.Exp.Word) {
						alloc = true
					}
				}
			}
			n++
		}
	}
	walk(parts, false)
	if n >= 2 {
		copies = dyn
	}
	return copies, alloc
}

// smallParam reports whether a parameter expansion is a few bytes
// whatever the variables hold: $?, $#, ${#x}...
func smallParam(p *syntax.ParamExp) bool {
	if p.Length || p.Width {
		return p.Index == nil && p.Slice == nil && p.Repl == nil && p.Exp == nil
	}
	if p.Param == nil || p.Excl || p.Slice != nil || p.Repl != nil || p.Exp != nil || p.Names != 0 {
		return false
	}
	switch p.Param.Value {
	case "?", "#", "!", "-", pidVar, ppidVar, "RANDOM", "SECONDS", "LINENO", "UID", "EUID", "GID":
		return p.Index == nil
	}
	return false
}

// braceMult is how many words brace expansion makes of w (where words
// are split into fields); at most what the interpreter allows.
func braceMult(w *syntax.Word) int64 {
	c := &syntax.Word{Parts: append([]syntax.WordPart(nil), w.Parts...)}
	if !syntax.SplitBraces(c) {
		return 1
	}
	return min(bracesCount(c.Parts), maxBraceWords)
}

// maxBraceWords is the interpreter's bound of one word's brace expansion
// (expand.BracesSeq).
const maxBraceWords = 16 << 10

func bracesCount(parts []syntax.WordPart) int64 {
	n := int64(1)
	for _, p := range parts {
		br, ok := p.(*syntax.BraceExp)
		if !ok {
			continue
		}
		k := int64(0)
		if br.Sequence {
			k = seqCount(br)
		} else {
			for _, e := range br.Elems {
				k += bracesCount(e.Parts)
			}
		}
		n *= max(k, 1)
		if n > maxBraceWords {
			return maxBraceWords + 1
		}
	}
	return n
}

func seqCount(br *syntax.BraceExp) int64 {
	if len(br.Elems) < 2 {
		return 1
	}
	from, to := br.Elems[0].Lit(), br.Elems[1].Lit()
	step := int64(1)
	if len(br.Elems) > 2 {
		if s, err := strconv.ParseInt(br.Elems[2].Lit(), 10, 64); err == nil && s != 0 {
			step = max(s, -s)
		}
	}
	a, err1 := strconv.ParseInt(from, 10, 64)
	b, err2 := strconv.ParseInt(to, 10, 64)
	if err1 != nil || err2 != nil {
		if len(from) == 1 && len(to) == 1 { // {a..z}
			a, b = int64(from[0]), int64(to[0])
		} else {
			return maxBraceWords + 1 // too big to tell: the interpreter refuses past its bound
		}
	}
	d := b - a
	if d < 0 {
		d = -d
	}
	if d/step >= maxBraceWords {
		return maxBraceWords + 1
	}
	return d/step + 1
}

// fieldCost is what one field of a split expansion costs the
// interpreter beyond its bytes, garbage included (measured: 130 to 175
// bytes for a million one-byte fields).
const fieldCost = 160

// bound is an upper bound of the bytes expanding the site allocates,
// given the variables in env, and of the bytes its assignments add.
func (s *guardSite) bound(env expand.Environ, g *guardTable) (total, assigned int64) {
	z := &sizer{env: env, params: g.argBytes.Load(), paramCount: g.argCount.Load()}
	for _, it := range s.items {
		var b, f int64
		if it.arith != nil {
			b = z.arith(it.arith)
		} else {
			b, f = z.word(it.word.Parts, it.fields, false)
			mult := max(it.mult, 1)
			b, f = sat(b, mult), sat(f+1, mult)
		}
		total = satAdd(total, satAdd(sat(b, 2), sat(f, fieldCost)))
		if it.assign != "" {
			assigned = satAdd(assigned, b)
			if it.fields {
				// an array's elements are held, with what splitting
				// them costs, until the whole assignment is made: the
				// guards of the elements after see them (p.each)
				assigned = satAdd(assigned, sat(f, fieldCost))
			}
			if it.add {
				z.set(it.assign, satAdd(z.varSize(it.assign), b))
			} else {
				z.set(it.assign, b)
			}
		}
	}
	return total, assigned
}

// sizer works out the sizes of expansions.
type sizer struct {
	env                expand.Environ
	pending            map[string]int64 // what the site's assignments made
	params, paramCount int64
	biggest            int64 // the biggest variable, once asked
	table              *guardTable
	ifs                *[256]bool
}

// fields is a bound of the fields an unquoted parameter expansion of b
// bytes is split into.
func (z *sizer) fields(p *syntax.ParamExp, b int64) int64 {
	switch {
	case p.Param == nil || p.Length || p.Width:
		return 1
	case p.Repl != nil || p.Excl || p.Names != 0 || p.Exp != nil && p.Exp.Op == syntax.OtherParamOps:
		return b/2 + 1
	}
	f := z.varFields(p.Param.Value)
	if p.Exp != nil && p.Exp.Word != nil {
		wb, wf := z.word(p.Exp.Word.Parts, true, false)
		f = satAdd(f, max(wf, wb/2+1))
	}
	return f
}

// varFields is a bound of the fields a variable's unquoted expansion is
// split into: one more than its separators, in each element.
func (z *sizer) varFields(name string) int64 {
	if n, ok := z.pending[name]; ok {
		return n/2 + 1
	}
	switch name {
	case "@", "*":
		return z.params/2 + z.paramCount + 1
	case "?", "#", "!", "-", "0":
		return 1
	}
	if name != "" && name[0] >= '0' && name[0] <= '9' {
		return z.params/2 + 1
	}
	if z.ifs == nil {
		z.ifs = ifsTable(z.env)
	}
	vr := z.lookup(name)
	n := separators([]byte(vr.Str), z.ifs) + 1
	for _, e := range vr.List {
		n += separators([]byte(e), z.ifs) + 1
	}
	for _, e := range vr.Map {
		n += separators([]byte(e), z.ifs) + 1
	}
	return n
}

func (z *sizer) set(name string, n int64) {
	if z.pending == nil {
		z.pending = map[string]int64{}
	}
	z.pending[name] = n
}

func (z *sizer) lookup(name string) expand.Variable {
	vr := z.env.Get(name)
	for i := 0; i < 8 && vr.Kind == expand.NameRef; i++ {
		vr = z.env.Get(vr.Str)
	}
	return vr
}

// varSize is the bytes of a variable, all its elements together.
func (z *sizer) varSize(name string) int64 {
	if n, ok := z.pending[name]; ok {
		return n
	}
	switch name {
	case "@", "*":
		return z.params
	case "?", "#", "!", "-", "0":
		return 32
	}
	if name != "" && name[0] >= '0' && name[0] <= '9' {
		return z.params
	}
	return valueSize(z.lookup(name))
}

func valueSize(vr expand.Variable) int64 {
	n := int64(len(vr.Str))
	for _, s := range vr.List {
		n += int64(len(s)) + 1
	}
	for k, v := range vr.Map {
		n += int64(len(k)+len(v)) + 2
	}
	return n
}

// count is the number of elements of a variable.
func (z *sizer) count(name string) int64 {
	switch name {
	case "@", "*":
		return z.paramCount
	}
	vr := z.lookup(name)
	return int64(len(vr.List)+len(vr.Map)) + 1
}

func (z *sizer) biggestVar() int64 {
	if z.biggest == 0 {
		z.env.Each(func(_ string, vr expand.Variable) bool {
			z.biggest = max(z.biggest, valueSize(vr))
			return true
		})
		for _, n := range z.pending {
			z.biggest = max(z.biggest, n)
		}
		z.biggest = max(z.biggest, z.params, 1)
	}
	return z.biggest
}

// word is a bound of the bytes of parts expanded, and of the fields
// they are split into if split is set and they are not quoted.
func (z *sizer) word(parts []syntax.WordPart, split, quoted bool) (b, f int64) {
	for _, p := range parts {
		pb, pf := z.part(p, split, quoted)
		b, f = satAdd(b, pb), satAdd(f, pf)
	}
	return b, f
}

func (z *sizer) part(p syntax.WordPart, split, quoted bool) (int64, int64) {
	switch p := p.(type) {
	case *syntax.Lit:
		return int64(len(p.Value)), 0
	case *syntax.SglQuoted:
		return int64(len(p.Value)), 0
	case *syntax.DblQuoted:
		return z.word(p.Parts, split, true)
	case *syntax.ParamExp:
		b := z.param(p)
		switch {
		case split && !quoted:
			return b, z.fields(p, b)
		case split && p.Param != nil && (p.Param.Value == "@" || isAllIndex(p.Index)):
			return b, z.count(p.Param.Value) // "$@", "${a[@]}": one field each
		}
		return b, 0
	case *syntax.ArithmExp:
		return satAdd(24, z.arith(p.X)), 0
	case *syntax.ProcSubst:
		return 64, 0
	case *syntax.ExtGlob:
		return int64(len(p.Pattern.Value)) + 3, 0
	case *syntax.BraceExp:
		b, f := int64(0), int64(0)
		for _, e := range p.Elems {
			eb, ef := z.word(e.Parts, split, quoted)
			b, f = satAdd(b, eb), satAdd(f, ef)
		}
		return b, f
	}
	// $(...): charged as it is captured; its statements are guarded
	return 0, 0
}

func isAllIndex(e syntax.ArithmExpr) bool {
	w, ok := e.(*syntax.Word)
	if !ok {
		return false
	}
	l := w.Lit()
	return l == "@" || l == "*"
}

// arith is the bytes the words of an arithmetic expression make (each
// is expanded to a string, and read as a number).
func (z *sizer) arith(e syntax.ArithmExpr) int64 {
	n := int64(0)
	syntax.Walk(e, func(m syntax.Node) bool {
		if w, ok := m.(*syntax.Word); ok {
			b, _ := z.word(w.Parts, false, true)
			n = satAdd(n, b)
			return false
		}
		return true
	})
	return n
}

// param is a bound of the bytes of one parameter expansion.
func (z *sizer) param(p *syntax.ParamExp) int64 {
	if p.Param == nil {
		return 0
	}
	name := p.Param.Value
	if p.Length || p.Width {
		return 24
	}
	if p.Names != 0 { // ${!prefix*}: names
		return z.biggestVar() + 1<<16
	}
	size := z.varSize(name)
	if p.Excl {
		if p.Index != nil && isAllIndex(p.Index) { // ${!a[@]}: the keys
			return size + z.count(name)*24
		}
		size = z.biggestVar() // ${!ref}: any variable
	}
	if p.Index != nil && !isAllIndex(p.Index) {
		size = satAdd(size, z.arith(p.Index))
	}
	switch {
	case p.Slice != nil:
		return size
	case p.Repl != nil:
		var with int64
		if p.Repl.With != nil {
			with, _ = z.word(p.Repl.With.Parts, false, true)
		}
		if !p.Repl.All {
			return satAdd(size, with)
		}
		// every byte (and the end) may match
		return satAdd(size, sat(size+1, with))
	case p.Exp != nil:
		var w int64
		if p.Exp.Word != nil {
			w, _ = z.word(p.Exp.Word.Parts, false, true)
		}
		switch p.Exp.Op {
		case syntax.RemSmallSuffix, syntax.RemLargeSuffix, syntax.RemSmallPrefix, syntax.RemLargePrefix:
			return size
		case syntax.UpperFirst, syntax.UpperAll, syntax.LowerFirst, syntax.LowerAll:
			return sat(size, 3)
		case syntax.OtherParamOps:
			// @Q and @A quote every byte as \xNN at worst; @K and @k
			// quote keys and values
			return satAdd(sat(size, 5), satAdd(sat(z.count(name), 8), int64(len(name))+32))
		case syntax.AssignUnset, syntax.AssignUnsetOrNull:
			z.set(name, max(size, w))
		}
		return satAdd(size, w)
	}
	return size
}

// sat multiplies without overflowing.
func sat(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > (1<<62)/b {
		return 1 << 62
	}
	return a * b
}

func satAdd(a, b int64) int64 {
	if a+b < a || a+b > 1<<62 {
		return 1 << 62
	}
	return a + b
}

// guard answers the guard of site id: nil if the statement may be
// expanded, errMemoryLimit (and the call is being stopped) if not.
func (r *run) guard(env expand.Environ, id string) error {
	b := r.mem
	s := b.guards.site(id)
	if s == nil {
		return nil
	}
	if what := s.patterns(env, &b.guards); what != "" {
		return r.stopPattern(what)
	}
	if b.limit <= 0 {
		return nil
	}
	// What the variables hold is what they held at the last command,
	// and what the guarded statements since have assigned at most.
	need, assigned := s.bound(env, &b.guards)
	if b.total()+b.assigned.Load()+need > b.limit {
		b.exceed("an expansion of about " + sizeText(need))
		return errMemoryLimit
	}
	b.assigned.Add(assigned)
	return nil
}

// prepareScript parses a script given at run time (eval's argument, a
// sourced file, a trap's action) and gives it back rewritten as a script
// that Exec would run, or ok false if it does not parse (the
// interpreter then reports it as it would). what is set if the script
// has what the fast path does not support; err if the call has no
// memory left for it.
func (r *run) prepareScript(src string) (out, what string, ok bool, err error) {
	g := &r.mem.guards
	g.mu.Lock()
	out, ok = g.done[src]
	g.mu.Unlock()
	if ok {
		return out, "", true, nil
	}
	f, perr := parse(src)
	if perr != nil {
		return "", "", false, nil
	}
	if what := unsupported(f); what != "" {
		return "", what, true, nil
	}
	rewriteSpecial(f)
	rewriteProcSubst(f)
	// Its statements may run until the call ends (a function it
	// defines, a trap): their sites stay, and count in the call's
	// memory, as what a parse holds (some 50 times the source).
	cost := int64(len(src))*64 + 1024
	if r.mem.over(cost) {
		r.mem.exceed("eval")
		return "", "", false, errMemoryLimit
	}
	r.mem.used.Add(cost)
	g.guardStatements(f)
	var buf bytes.Buffer
	syntax.NewPrinter().Print(&buf, f)
	out = buf.String()
	g.mu.Lock()
	if g.done == nil {
		g.done = map[string]string{}
	}
	if len(g.done) < 1024 {
		g.done[src] = out
	}
	g.mu.Unlock()
	return out, "", true, nil
}

// aliasesOn reports whether a shopt command turns on alias expansion.
func aliasesOn(args []string) bool {
	set := false
	for _, a := range args[1:] {
		switch {
		case a == "-s":
			set = true
		case a == "-u":
			set = false
		case strings.HasPrefix(a, "-"):
		case a == "expand_aliases" && set:
			return true
		}
	}
	return false
}

// listsVars reports whether a declaration builtin is asked to print
// variables (set, declare -p, export...) rather than to set them.
func listsVars(args []string) bool {
	if args[0] == "set" {
		return len(args) == 1
	}
	for _, a := range args[1:] {
		if !strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "+") {
			return false // names: one variable each
		}
	}
	return true
}

// printfBound is an upper bound of the length of what printf makes of
// format and args, reusing the format while arguments remain.
func printfBound(format string, args []string) int64 {
	total := int64(0)
	for pass := 0; ; pass++ {
		used := 0
		next := func() string {
			if used < len(args) {
				used++
				return args[used-1]
			}
			return ""
		}
		num := func(s string) int64 {
			n, _ := strconv.ParseInt(strings.TrimLeft(s, "-+"), 10, 64)
			return min(max(n, 0), 1<<40)
		}
		for i := 0; i < len(format); i++ {
			if format[i] != '%' {
				total = satAdd(total, 1)
				continue
			}
			i++
			for i < len(format) && strings.IndexByte("-+ #0'", format[i]) >= 0 {
				i++
			}
			var width, prec int64
			if i < len(format) && format[i] == '*' {
				width = num(next())
				i++
			}
			j := i
			for i < len(format) && format[i] >= '0' && format[i] <= '9' {
				i++
			}
			width = max(width, num(format[j:i]))
			if i < len(format) && format[i] == '.' {
				i++
				if i < len(format) && format[i] == '*' {
					prec = num(next())
					i++
				}
				j := i
				for i < len(format) && format[i] >= '0' && format[i] <= '9' {
					i++
				}
				prec = max(prec, num(format[j:i]))
			}
			if i >= len(format) {
				break
			}
			cost := int64(0)
			switch format[i] {
			case '%':
				cost = 1
			case 's', 'b':
				cost = int64(len(next()))
			case 'q':
				cost = int64(4*len(next())) + 3
			default:
				next()
				cost = satAdd(prec, 32)
			}
			total = satAdd(total, max(width, cost))
		}
		if used == 0 || used >= len(args) || pass > len(args) {
			return total
		}
		args = args[used:]
	}
}

// readArrayCmd is read -a: the interpreter's reads a line and splits it
// into fields in one step, and a line of a few megabytes of "a a a ..."
// makes millions of fields. This one reads the line as the
// interpreter's does, charging its bytes and the fields it will make,
// and once it fits hands it to the interpreter's read -a as a here-string
// (through eval, so that the array is set in the script's shell).
const readArrayCmd = "\x00read-a"

func (r *run) readArray(c *cmd) int {
	c.name = "read"
	var flags, names []string
	raw, prompt := false, ""
	args := c.args[1:]
	for len(args) > 0 && strings.HasPrefix(args[0], "-") && len(args[0]) > 1 {
		a := args[0]
		args = args[1:]
		if a == "--" {
			break
		}
		for _, f := range a[1:] {
			switch f {
			case 'r':
				raw = true
			case 'a', 's':
			case 'p':
				if len(args) == 0 {
					fmt.Fprintln(c.stderr, c.bashWhere()+": read: -p: option requires an argument")
					return 2
				}
				prompt, args = args[0], args[1:]
			default:
				fmt.Fprintf(c.stderr, "%s: read: -%c: invalid option\n", c.bashWhere(), f)
				return 2
			}
		}
	}
	names = args
	if raw {
		flags = append(flags, "-r")
	}
	name := "REPLY"
	if len(names) > 0 {
		name = names[0]
	}
	if !syntax.ValidName(name) {
		fmt.Fprintf(c.stderr, "%s: read: `%s': not a valid identifier\n", c.bashWhere(), name)
		return 1
	}
	if prompt != "" {
		io.WriteString(c.stdout, prompt)
	}
	if f, ok := c.hc.Stdin.(*os.File); ok {
		// a read blocked on a pipe ends with the call
		stop := context.AfterFunc(c.ctx, func() { f.SetReadDeadline(time.Now()) })
		defer func() {
			if !stop() {
				f.SetReadDeadline(time.Time{})
			}
		}()
	}
	ifs := ifsTable(c.env)
	var line []byte
	esc, eof := false, false
	charged := int64(0)
	var buf [1]byte
	for {
		n, err := c.stdin.Read(buf[:])
		if n > 0 {
			b := buf[0]
			switch {
			case !raw && b == '\\':
				line = append(line, b)
				esc = !esc
			case !raw && b == '\n' && esc:
				line = line[:len(line)-1]
				esc = false
			case b == '\n':
				err = io.EOF
				n = -1
			default:
				line = append(line, b)
				esc = false
				if ifs[b] {
					// a field to come, and its share of eval's parse
					if !c.grow(fieldCost + 8) {
						return ExitLimit
					}
				}
			}
			if int64(len(line))-charged >= 4096 {
				// the line, its quoted copy and their parse
				if !c.grow(64 * (int64(len(line)) - charged)) {
					return ExitLimit
				}
				charged = int64(len(line))
			}
		}
		if err != nil {
			eof = n != -1
			if c.canceled() {
				return 1
			}
			break
		}
	}
	if bytes.IndexByte(line, 0) >= 0 {
		line = bytes.ReplaceAll(line, []byte{0}, nil) // bash drops them too
	}
	q, err := syntax.Quote(string(line), syntax.LangBash)
	if err != nil {
		fmt.Fprintf(c.stderr, "bash: read: %v\n", err)
		return 1
	}
	// builtin: not this command again
	src := "builtin read " + strings.Join(append(flags, "-a", name), " ") + " <<< " + q
	if err := c.hc.Builtin(c.ctx, []string{"eval", src}); err != nil {
		if code, ok := interp.IsExitStatus(err); ok {
			return int(code)
		}
		return 1
	}
	if eof {
		return 1
	}
	return 0
}
