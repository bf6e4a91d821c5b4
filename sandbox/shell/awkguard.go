package shell

import (
	"context"
	"sort"
	"strings"

	"github.com/benhoyt/goawk/lexer"
)

// goawk looks at its context only every 1000 instructions, and an awk
// program can allocate without bound well within them: a loop that
// doubles a string (BEGIN{while(1) s = s s}) reaches gigabytes in some
// thirty turns, with no input or output for the call's stop to act on.
// So the program is rewritten before it runs, so that every turn of every
// loop and every call of a user function first calls awkStepFunc, a
// native function that fails (and so ends the program) once the call is
// stopped, and counts the step for the memory watchdog:
//
//	while (COND)             -> while (STEP() && (COND))      (also do ... while)
//	for (INIT; COND; NEXT)   -> for (INIT; STEP() && (COND); NEXT)
//	for (INIT; ; NEXT)       -> for (INIT; STEP(); NEXT)
//	for (K in A) BODY        -> for (K in A) if (STEP()) BODY
//	function F(...) {        -> function F(...) { STEP();
//
// Each turn between two steps then makes one allocation at most, which
// the watchdog sees before the next. The one construct whose meaning the
// rewrite would change is an else after an unbraced for-in body inside an
// unbraced if (`if (c) for (k in a) x; else y`); a program with a for-in
// followed anywhere by else runs as it is written, unguarded in its
// for-in loops.

// awkStepFunc is the name of the native function the rewrite calls.
const awkStepFunc = "__computerfs_step"

// awkStep returns the native function for a command's awk program.
func (c *cmd) awkStep() func() (int, error) {
	return func() (int, error) {
		c.r.mem.steps.Add(1)
		if c.ctx.Err() != nil {
			return 0, context.Cause(c.ctx)
		}
		return 1, nil
	}
}

// guardAwk returns src with the step calls put in, or src itself if it
// cannot be read as tokens (the parser then reports why).
func guardAwk(src string) string {
	type tok struct {
		off int
		t   lexer.Token
	}
	at := offsets{src: src, line: 1, col: 1}
	var toks []tok
	lx := lexer.NewLexer([]byte(src))
	prev := lexer.ILLEGAL
	for {
		pos, t, _ := lx.Scan()
		if (t == lexer.DIV || t == lexer.DIV_ASSIGN) && !endsOperand(prev) {
			pos, t, _ = lx.ScanRegex()
		}
		if t == lexer.EOF {
			break
		}
		if t == lexer.ILLEGAL {
			return src
		}
		off, ok := at.of(pos.Line, pos.Column)
		if !ok {
			return src
		}
		toks = append(toks, tok{off, t})
		prev = t
	}
	type ins struct {
		off  int
		text string
	}
	var adds []ins
	// matching returns the index of the token that closes the
	// parenthesis at toks[i], and the indexes of the semicolons directly
	// inside it.
	matching := func(i int) (int, []int) {
		depth := 0
		var semis []int
		for j := i; j < len(toks); j++ {
			switch toks[j].t {
			case lexer.LPAREN:
				depth++
			case lexer.RPAREN:
				depth--
				if depth == 0 {
					return j, semis
				}
			case lexer.SEMICOLON:
				if depth == 1 {
					semis = append(semis, j)
				}
			}
		}
		return -1, nil
	}
	hasElse := false
	for _, t := range toks {
		if t.t == lexer.ELSE {
			hasElse = true
		}
	}
	step := awkStepFunc + "()"
	for i := 0; i < len(toks); i++ {
		next := func(k int) lexer.Token {
			if i+k < len(toks) {
				return toks[i+k].t
			}
			return lexer.EOF
		}
		switch toks[i].t {
		case lexer.WHILE:
			if next(1) != lexer.LPAREN {
				continue
			}
			end, _ := matching(i + 1)
			if end < 0 {
				return src
			}
			adds = append(adds, ins{toks[i+1].off + 1, step + " && ("}, ins{toks[end].off, ")"})
		case lexer.FOR:
			if next(1) != lexer.LPAREN {
				continue
			}
			end, semis := matching(i + 1)
			if end < 0 {
				return src
			}
			switch len(semis) {
			case 2:
				if semis[1] == semis[0]+1 { // no condition
					adds = append(adds, ins{toks[semis[0]].off + 1, " " + step})
				} else {
					adds = append(adds, ins{toks[semis[0]].off + 1, " " + step + " && ("}, ins{toks[semis[1]].off, ")"})
				}
			case 0: // for (k in a)
				if !hasElse {
					adds = append(adds, ins{toks[end].off + 1, " if (" + step + ")"})
				}
			}
		case lexer.FUNCTION:
			for j := i + 1; j < len(toks); j++ {
				if toks[j].t == lexer.LBRACE {
					adds = append(adds, ins{toks[j].off + 1, " " + step + ";"})
					break
				}
			}
		}
	}
	if len(adds) == 0 {
		return src
	}
	sort.SliceStable(adds, func(a, b int) bool { return adds[a].off < adds[b].off })
	var b strings.Builder
	last := 0
	for _, a := range adds {
		b.WriteString(src[last:a.off])
		b.WriteString(a.text)
		last = a.off
	}
	b.WriteString(src[last:])
	return b.String()
}

// offsets turns the lexer's positions (a line and a byte column, carriage
// returns not counted, as goawk's lexer counts them) into byte offsets in
// src. Tokens come in order, so it walks src forward once: no table of
// every byte's position, which a 4 MiB program would make big.
type offsets struct {
	src       string
	off       int
	line, col int
}

func (o *offsets) of(line, col int) (int, bool) {
	for o.off < len(o.src) && (o.line < line || o.line == line && o.col < col || o.src[o.off] == '\r') {
		switch o.src[o.off] {
		case '\n':
			o.line, o.col = o.line+1, 1
		case '\r':
		default:
			o.col++
		}
		o.off++
	}
	return o.off, o.off < len(o.src) && o.line == line && o.col == col
}

// endsOperand reports whether a token can end an operand, after which a
// slash divides; anywhere else it starts a regular expression.
func endsOperand(t lexer.Token) bool {
	switch t {
	case lexer.NAME, lexer.NUMBER, lexer.STRING, lexer.RPAREN, lexer.RBRACKET,
		lexer.INCR, lexer.DECR, lexer.REGEX:
		return true
	}
	return false
}
