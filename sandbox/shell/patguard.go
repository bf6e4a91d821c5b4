package shell

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// The interpreter matches patterns (case patterns, the right side of
// [[ == ]], the patterns of ${x#pat}, ${x/pat/to} and ${x^^pat}, and
// every field of an unquoted word that it globs) by translating them to a
// Go regexp and compiling it with regexp.MustCompile. Two inputs end or
// wedge the daemon there:
//   - a pattern over regexp's size limit (some 3.3 million instructions,
//     a 4 MB variable of '?') panics, and in a pipeline's goroutine no
//     one recovers it: echo $x | cat ended the process;
//   - extglob groups left open (@(@(@(... from a variable) take the
//     translation time exponential in their number, with no look at the
//     call's end: thirty of them run for minutes.
//
// So the patterns that come from expansions are bounded before they are
// made, by the statement's guard (expguard.go): a pattern, or a glob
// field, of more than maxPattern bytes, or with more than maxExtGroups
// extglob openings, stops the call with errPatternLimit. What a pattern
// is made of is known from the variables it reads; a $(...) in it is
// marked (patMark) so that its capture is bounded as it is written
// (capturePattern), to capBytes and capGroups.

const (
	// maxPattern is the longest pattern the fast path matches: at most
	// two regexp instructions a byte, well below regexp's limit.
	maxPattern = 1 << 20
	// maxExtGroups bounds the extglob openings of one pattern: the
	// translation of open groups doubles its time every two (16: a few
	// milliseconds).
	maxExtGroups = 16
	// capBytes and capGroups bound what one $(...) in a pattern adds.
	capBytes  = maxPattern / 4
	capGroups = maxExtGroups / 4
)

// errPatternLimit is the cause of a call stopped for a pattern too big
// for the fast path.
var errPatternLimit = errors.New("pattern too big for the shell fast path")

// patKind says how a word is matched.
type patKind uint8

const (
	patNone  patKind = iota
	patGlob          // split into fields, each globbed: an unquoted argument, a for list, an array element
	patMatch         // one pattern: a case pattern, the right side of [[ == ]]
)

// patMark is the guard's argument that marks the capture of the
// substitution it runs in as part of a pattern ("-pat glob" or "-pat match").
const patMark = "-pat"

// patStats is what a pattern (or the biggest glob field) is at most.
type patStats struct {
	bytes, groups int64
	meta          bool // a glob character: without one, a field is not globbed
}

func (a patStats) plus(b patStats) patStats {
	return patStats{satAdd(a.bytes, b.bytes), satAdd(a.groups, b.groups), a.meta || b.meta}
}

func (a patStats) over() bool { return a.bytes > maxPattern || a.groups > maxExtGroups }

// isExtOp reports whether c opens an extglob group when ( follows it.
func isExtOp(c byte) bool { return c == '?' || c == '*' || c == '+' || c == '@' || c == '!' }

func isGlobMeta(c byte) bool { return c == '*' || c == '?' || c == '[' }

// textStats is what text contributes unquoted to a pattern; for a glob
// word (ifs set), the most of any one field of it.
func textStats(s string, ifs *[256]bool) patStats {
	var field, most patStats
	for i := 0; i < len(s); i++ {
		c := s[i]
		if ifs != nil && ifs[c] {
			most = maxStats(most, field)
			field = patStats{}
			continue
		}
		field.bytes++
		if isGlobMeta(c) {
			field.meta = true
		}
		if c == '(' && i > 0 && isExtOp(s[i-1]) {
			field.groups++
		}
	}
	if ifs == nil {
		return field
	}
	return maxStats(most, field)
}

func maxStats(a, b patStats) patStats {
	return patStats{max(a.bytes, b.bytes), max(a.groups, b.groups), a.meta || b.meta}
}

// patternRisk reports whether the word w, matched as kind, can make a
// pattern from an expansion (then its statement needs a guard), or is
// made of literals over the limits.
func patternRisk(w *syntax.Word, kind patKind) bool {
	if kind == patNone || w == nil {
		return false
	}
	dynamic, unquoted, lit := false, false, int64(0)
	var walk func(parts []syntax.WordPart, quoted bool)
	walk = func(parts []syntax.WordPart, quoted bool) {
		for _, p := range parts {
			switch p := p.(type) {
			case *syntax.Lit:
				lit += int64(len(p.Value))
				if !quoted && strings.ContainsAny(p.Value, "*?[") {
					unquoted = true
				}
			case *syntax.SglQuoted:
				lit += int64(len(p.Value))
			case *syntax.DblQuoted:
				walk(p.Parts, true)
			case *syntax.ExtGlob:
				lit += int64(len(p.Pattern.Value))
				unquoted = true
			case *syntax.ParamExp, *syntax.CmdSubst:
				dynamic = true
				if !quoted {
					unquoted = true
				}
			}
		}
	}
	walk(w.Parts, false)
	if lit > maxPattern {
		return true
	}
	if kind == patGlob {
		// a word is globbed only if an unquoted part can hold a glob
		// character
		return dynamic && unquoted
	}
	return dynamic
}

// paramPatterns calls f with each pattern word of the parameter
// expansions in w (${x#pat}, ${x/pat/...}, ${x^^pat}), at any depth.
func paramPatterns(w *syntax.Word, f func(*syntax.Word)) {
	paramPatternsOn(w, func(p *syntax.Word, _ *syntax.ParamExp) { f(p) })
}

// paramPatternsOn is paramPatterns, with the expansion each pattern is
// matched in (its parameter is the subject).
func paramPatternsOn(w *syntax.Word, f func(*syntax.Word, *syntax.ParamExp)) {
	syntax.Walk(w, func(n syntax.Node) bool {
		pe, ok := n.(*syntax.ParamExp)
		if !ok {
			return true
		}
		if pe.Repl != nil && pe.Repl.Orig != nil {
			f(pe.Repl.Orig, pe)
		}
		if pe.Exp != nil && pe.Exp.Word != nil {
			switch pe.Exp.Op {
			case syntax.RemSmallSuffix, syntax.RemLargeSuffix, syntax.RemSmallPrefix, syntax.RemLargePrefix,
				syntax.UpperFirst, syntax.UpperAll, syntax.LowerFirst, syntax.LowerAll:
				f(pe.Exp.Word, pe)
			}
		}
		return true
	})
}

// itemPatternRisk reports whether a guard must look at the patterns of
// item it.
func itemPatternRisk(it guardItem) bool {
	if it.word == nil {
		return false
	}
	risk := patternRisk(it.word, it.pat)
	paramPatterns(it.word, func(p *syntax.Word) { risk = risk || patternRisk(p, patMatch) })
	return risk
}

// markPatternSubst marks each $(...) of w (quoted or not) as part of a
// pattern of kind, so that its capture is bounded as it is written.
func markPatternSubst(w *syntax.Word, kind patKind) {
	arg := "glob"
	if kind == patMatch {
		arg = "match"
	}
	var walk func(parts []syntax.WordPart)
	walk = func(parts []syntax.WordPart) {
		for _, p := range parts {
			switch p := p.(type) {
			case *syntax.DblQuoted:
				walk(p.Parts)
			case *syntax.CmdSubst:
				if isGuard(p) || isMarked(p) {
					continue
				}
				first := 0
				for first < len(p.Stmts) && isMarkStmt(p.Stmts[first]) {
					first++
				}
				if first == len(p.Stmts) || readsStatus(p.Stmts[first]) {
					continue // an unmarked capture: the guard refuses it
				}
				mark := &syntax.Stmt{Cmd: &syntax.CallExpr{Args: []*syntax.Word{
					{Parts: []syntax.WordPart{&syntax.SglQuoted{Value: guardCmd}}},
					{Parts: []syntax.WordPart{&syntax.Lit{Value: patMark}}},
					{Parts: []syntax.WordPart{&syntax.Lit{Value: arg}}},
				}}}
				p.Stmts = append([]*syntax.Stmt{mark}, p.Stmts...)
			}
		}
	}
	walk(w.Parts)
}

// isGuard reports whether cs is a guard the rewrite put in.
func isGuard(cs *syntax.CmdSubst) bool {
	if len(cs.Stmts) != 1 {
		return false
	}
	call, ok := cs.Stmts[0].Cmd.(*syntax.CallExpr)
	if !ok || len(call.Args) != 2 || len(call.Args[0].Parts) != 1 {
		return false
	}
	q, ok := call.Args[0].Parts[0].(*syntax.SglQuoted)
	return ok && q.Value == guardCmd
}

// isMarkStmt reports whether st is a mark the rewrite put in.
func isMarkStmt(st *syntax.Stmt) bool {
	call, ok := st.Cmd.(*syntax.CallExpr)
	if !ok || len(call.Args) < 2 || len(call.Args[0].Parts) != 1 || len(st.Redirs) > 0 {
		return false
	}
	q, ok := call.Args[0].Parts[0].(*syntax.SglQuoted)
	return ok && q.Value == guardCmd
}

// isMarked reports whether cs starts with a pattern mark.
func isMarked(cs *syntax.CmdSubst) bool {
	for _, st := range cs.Stmts {
		if !isMarkStmt(st) {
			return false
		}
		if st.Cmd.(*syntax.CallExpr).Args[1].Lit() == patMark {
			return true
		}
	}
	return false
}

// patternStats is the most the pattern made of parts can be, given the
// variables; ifs is set for a glob word (the most of one field).
func (z *sizer) patternStats(parts []syntax.WordPart, quoted bool, ifs *[256]bool) patStats {
	var st patStats
	for _, p := range parts {
		switch p := p.(type) {
		case *syntax.Lit:
			if quoted {
				st = st.plus(patStats{bytes: int64(len(p.Value))})
			} else {
				st = st.plus(textStats(p.Value, nil))
			}
		case *syntax.SglQuoted:
			st = st.plus(patStats{bytes: int64(len(p.Value))})
		case *syntax.DblQuoted:
			st = st.plus(z.patternStats(p.Parts, true, ifs))
		case *syntax.ExtGlob:
			st = st.plus(textStats(p.Op.String()+p.Pattern.Value+")", nil))
		case *syntax.ParamExp:
			st = st.plus(z.paramPattern(p, quoted, ifs))
		case *syntax.CmdSubst:
			switch {
			case isGuard(p):
			case isMarked(p):
				st = st.plus(patStats{bytes: capBytes, groups: capGroups, meta: true})
			default:
				st = st.plus(patStats{bytes: 1 << 62}) // not bounded: refused
			}
		case *syntax.ArithmExp:
			st = st.plus(patStats{bytes: 24})
		case *syntax.ProcSubst:
			st = st.plus(patStats{bytes: 64})
		case *syntax.BraceExp:
			var most patStats
			for _, e := range p.Elems {
				most = maxStats(most, z.patternStats(e.Parts, quoted, ifs))
			}
			st = st.plus(most)
		}
	}
	return st
}

// paramPattern is what a parameter expansion adds to a pattern: quoted,
// its bytes (escaped, literal); unquoted, what its text holds.
func (z *sizer) paramPattern(p *syntax.ParamExp, quoted bool, ifs *[256]bool) patStats {
	b := z.param(p)
	if quoted || p.Param == nil || p.Length || p.Width {
		return patStats{bytes: b}
	}
	var texts []string
	name := p.Param.Value
	switch {
	case name == "@" || name == "*" || name != "" && name[0] >= '0' && name[0] <= '9':
		// the arguments: as much as the most any command was given
		return patStats{bytes: b, groups: z.table.argGroups.Load(), meta: true}
	case p.Excl || p.Names != 0:
		// any variable: as much as the most of any
		var st patStats
		z.env.Each(func(_ string, vr expand.Variable) bool {
			for _, t := range append([]string{vr.Str}, vr.List...) {
				st = maxStats(st, textStats(t, ifs))
			}
			return true
		})
		st.bytes = b
		return st
	default:
		vr := z.lookup(name)
		texts = append(texts, vr.Str)
		texts = append(texts, vr.List...)
		for _, v := range vr.Map {
			texts = append(texts, v)
		}
	}
	var st patStats
	for _, t := range texts {
		st = maxStats(st, textStats(t, ifs))
	}
	if ifs == nil {
		// all elements of ${a[*]} in one pattern
		st.bytes, st.groups = b, 0
		for _, t := range texts {
			st.groups = satAdd(st.groups, textStats(t, nil).groups)
		}
	}
	// what an operation adds (the replacement, a default word)
	if p.Repl != nil && p.Repl.With != nil {
		w := z.patternStats(p.Repl.With.Parts, false, nil)
		st = st.plus(patStats{bytes: max(0, b-st.bytes), groups: sat(w.groups, max(1, b)), meta: w.meta})
	}
	if p.Exp != nil && p.Exp.Word != nil {
		st = maxStats(st, z.patternStats(p.Exp.Word.Parts, false, ifs))
	}
	return st
}

// patterns reports what of the site's patterns is over the limits, or "".
func (s *guardSite) patterns(env expand.Environ, g *guardTable) string {
	z := &sizer{env: env, params: g.argBytes.Load(), paramCount: g.argCount.Load(), table: g}
	var ifs *[256]bool
	check := func(w *syntax.Word, kind patKind) string {
		if !patternRisk(w, kind) {
			return ""
		}
		var st patStats
		if kind == patGlob {
			if ifs == nil {
				ifs = ifsTable(env)
			}
			st = z.patternStats(w.Parts, false, ifs)
			if !st.meta {
				return ""
			}
		} else {
			st = z.patternStats(w.Parts, false, nil)
		}
		if st.over() {
			return patternText(st)
		}
		return ""
	}
	for _, it := range s.items {
		if it.word == nil {
			continue
		}
		if msg := check(it.word, it.pat); msg != "" {
			return msg
		}
		if it.subject != nil {
			// a pattern of [[ ]] or case: regexp's match (a glob is
			// matched as one too) costs up to its length times the
			// subject's (reguard.go)
			re := z.patternStats(it.word.Parts, false, nil).bytes
			if msg := matchCost(re, z.patternStats(it.subject.Parts, false, nil).bytes); msg != "" {
				return msg
			}
		}
		var msg string
		paramPatternsOn(it.word, func(p *syntax.Word, pe *syntax.ParamExp) {
			if msg == "" {
				msg = check(p, patMatch)
			}
			if msg == "" && pe.Param != nil {
				// the expansion matches the pattern on the variable's
				// value (each element's, of an array: at most all)
				msg = matchCost(z.patternStats(p.Parts, false, nil).bytes, z.varSize(pe.Param.Value))
			}
		})
		if msg != "" {
			return msg
		}
	}
	return ""
}

func patternText(st patStats) string {
	if st.bytes > maxPattern {
		if st.bytes >= 1<<62 {
			return "a pattern made by a $(...) that reads $? first"
		}
		return "a pattern of about " + sizeText(st.bytes)
	}
	return "a pattern with " + strconv.FormatInt(st.groups, 10) + " extglob groups"
}

// patCapture bounds a capture that is part of a pattern, as it is written.
type patCapture struct {
	mu            sync.Mutex // two commands of one $(...) may write at once
	glob          bool
	bytes, groups int64 // so far: the whole (match) or the current field (glob)
	meta          bool
	last          byte
}

// add takes p into the capture and reports what is over the limits, or "".
func (pc *patCapture) add(p []byte, ifs *[256]bool) string {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	for _, c := range p {
		if pc.glob && ifs[c] {
			pc.bytes, pc.groups, pc.meta = 0, 0, false
			pc.last = c
			continue
		}
		pc.bytes++
		if isGlobMeta(c) {
			pc.meta = true
		}
		if c == '(' && isExtOp(pc.last) {
			pc.groups++
		}
		pc.last = c
		if pc.groups > capGroups || pc.bytes > capBytes && (pc.meta || !pc.glob) {
			return fmt.Sprintf("a $(...) in a pattern, over %s or %d extglob groups", sizeText(capBytes), capGroups)
		}
	}
	return ""
}

// stopPattern stops the call for a pattern too big for the fast path.
func (r *run) stopPattern(what string) error {
	if r.mem.patWhat.CompareAndSwap(nil, what) {
		r.cancel(errPatternLimit)
	}
	return errPatternLimit
}

// patternMessage is what a call stopped for a pattern prints.
func (b *memBudget) patternMessage() string {
	what, _ := b.patWhat.Load().(string)
	if strings.HasPrefix(what, "a regular expression of ") {
		return fmt.Sprintf("%s: more than the shell fast path matches in one step; run it in the sandbox", what)
	}
	return fmt.Sprintf("%s: more than the shell fast path matches (%s, %d extglob groups); run it in the sandbox", what, sizeText(maxPattern), maxExtGroups)
}
