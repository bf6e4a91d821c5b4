package shell

import (
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"strings"
	"unicode/utf8"
)

func init() {
	register(&command{names: []string{"expr"}, run: cmdExpr, opts: opts(""), ownArgs: true, check: exprCheck})
}

// exprCheck routes what the fast path's expr would not answer as GNU's:
// --help and --version (and any word like an option first, as the table
// test asks, though GNU takes -x as a string), and a regular expression
// (after ":" or match's second operand) that is computed at run time or
// that the fast path's translation to Go's syntax does not take: GNU's
// regex reports its own errors ("Unmatched ( or \(") and takes what Go
// does not (back-references, empty ranges).
func exprCheck(args []string) string {
	if len(args) > 0 && strings.HasPrefix(args[0], "-") && args[0] != "--" && args[0] != "-" &&
		strings.Trim(args[0][1:], "0123456789") != "" {
		return "expr " + args[0] + ": an option is not built in"
	}
	for i, a := range args {
		re := -1
		switch {
		case a == ":" && i > 0:
			re = i + 1
		case a == "match":
			re = i + 2
		}
		if re < 0 || re >= len(args) {
			continue
		}
		if args[re] == "" {
			return "expr: a regular expression computed at run time"
		}
		if _, err := exprRegexp(args[re]); err != nil {
			return "expr: the regular expression " + args[re] + " is GNU regex's only: " + err.Error()
		}
	}
	return ""
}

// exprRegexp compiles a BRE for expr's ":": anchored at the start, the
// longest match.
func exprRegexp(pat string) (*regexp.Regexp, error) {
	for rest := pat; ; {
		i := strings.Index(rest, `\{`)
		if i < 0 {
			break
		}
		body, _, ok := strings.Cut(rest[i+2:], `\}`)
		if !ok || !exprInterval.MatchString(body) {
			return nil, errors.New("Invalid content of \\{\\}")
		}
		rest = rest[i+2:]
	}
	t, err := translateRE(pat, false)
	if err != nil {
		return nil, err
	}
	re, err := regexp.Compile(`\A(?:` + t + `)`)
	if err != nil {
		return nil, err
	}
	re.Longest()
	return re, nil
}

var exprInterval = regexp.MustCompile(`^[0-9]+(,[0-9]*)?$`)

// exprVal is a value of expr: an integer (arbitrary precision, as GNU's
// with GMP) or a string.
type exprVal struct {
	n *big.Int // nil for a string
	s string
}

func (v exprVal) String() string {
	if v.n != nil {
		return v.n.String()
	}
	return v.s
}

// null is GNU's: 0, or a string that is empty or of zeros ("00", "-0").
func (v exprVal) null() bool {
	if v.n != nil {
		return v.n.Sign() == 0
	}
	s := strings.TrimPrefix(v.s, "-")
	return v.s == "" || strings.Trim(s, "0") == "" && s != ""
}

// exprInt reads a string that looks like an integer: an optional minus
// and digits.
func exprInt(s string) (*big.Int, bool) {
	d := strings.TrimPrefix(s, "-")
	if d == "" || strings.Trim(d, "0123456789") != "" {
		return nil, false
	}
	n, ok := new(big.Int).SetString(s, 10)
	return n, ok
}

func (v exprVal) toInt() (*big.Int, bool) {
	if v.n != nil {
		return v.n, true
	}
	return exprInt(v.s)
}

// exprFail ends an evaluation with a message and a status.
type exprFail struct {
	msg  string
	code int
}

type exprParser struct {
	c     *cmd
	all   []string // the arguments
	i     int      // the next one
	depth int      // unary's recursion: every nesting passes through it
}

// errExprMemory: the call's budget is spent.
var errExprMemory = errors.New("memory")

func (p *exprParser) fail(code int, format string, a ...any) {
	panic(exprFail{fmt.Sprintf(format, a...), code})
}

func (p *exprParser) more() bool { return p.i < len(p.all) }

// next takes the next argument if it is s.
func (p *exprParser) next(s string) bool {
	if p.more() && p.all[p.i] == s {
		p.i++
		return true
	}
	return false
}

// take takes the next argument as a string.
func (p *exprParser) take() exprVal {
	v := exprVal{s: p.all[p.i]}
	p.i++
	return v
}

// last is the argument taken last.
func (p *exprParser) last() string { return p.all[p.i-1] }

func (p *exprParser) requireMore() {
	if !p.more() {
		p.fail(2, "syntax error: missing argument after ‘%s’", p.last())
	}
}

// charge accounts a new value's bytes to the call's budget.
func (p *exprParser) charge(v exprVal) exprVal {
	n := int64(len(v.s))
	if v.n != nil {
		n = int64(v.n.BitLen() / 8)
	}
	if n > 4096 && !p.c.grow(n) {
		panic(errExprMemory)
	}
	if p.c.canceled() {
		panic(errExprMemory)
	}
	return v
}

func exprInteger(n int64) exprVal { return exprVal{n: big.NewInt(n)} }

func cmdExpr(c *cmd) int {
	args := c.args[1:]
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		c.errorf("missing operand")
		fmt.Fprintf(c.stderr, "Try 'expr --help' for more information.\n")
		return 2
	}
	p := &exprParser{c: c, all: args}
	code := 0
	func() {
		defer func() {
			switch e := recover().(type) {
			case nil:
			case exprFail:
				c.errorf("%s", e.msg)
				code = e.code
			default:
				if e == errExprMemory {
					code = 3
					return
				}
				panic(e)
			}
		}()
		v := p.or(true)
		if p.more() {
			p.fail(2, "syntax error: unexpected argument ‘%s’", p.all[p.i])
		}
		c.out.WriteString(v.String())
		c.out.WriteByte('\n')
		if v.null() {
			code = 1
		}
	}()
	return code
}

// The grammar is GNU expr's, an evaluator per level of precedence (eval
// to eval7 in expr.c); ev false parses without evaluating (the right of
// a | whose left is not null, of a & whose left is).

func (p *exprParser) or(ev bool) exprVal {
	l := p.and(ev)
	for p.next("|") {
		r := p.and(ev && l.null())
		if l.null() {
			l = r
			if l.null() {
				l = exprInteger(0)
			}
		}
	}
	return l
}

func (p *exprParser) and(ev bool) exprVal {
	l := p.compare(ev)
	for p.next("&") {
		r := p.compare(ev && !l.null())
		if l.null() || r.null() {
			l = exprInteger(0)
		}
	}
	return l
}

func (p *exprParser) compare(ev bool) exprVal {
	l := p.sum(ev)
	for {
		op := ""
		for _, o := range []string{"<", "<=", "=", "==", "!=", ">=", ">"} {
			if p.next(o) {
				op = o
				break
			}
		}
		if op == "" {
			return l
		}
		r := p.sum(ev)
		if !ev {
			continue
		}
		var cmp int
		a, okA := exprInt(l.String())
		b, okB := exprInt(r.String())
		if okA && okB {
			cmp = a.Cmp(b)
		} else {
			cmp = strings.Compare(l.String(), r.String()) // C.UTF-8 collates by code point
		}
		res := false
		switch op {
		case "<":
			res = cmp < 0
		case "<=":
			res = cmp <= 0
		case "=", "==":
			res = cmp == 0
		case "!=":
			res = cmp != 0
		case ">=":
			res = cmp >= 0
		case ">":
			res = cmp > 0
		}
		l = exprInteger(int64(boolInt(res)))
	}
}

// arith applies + - * / % to two values as integers.
func (p *exprParser) arith(op string, l, r exprVal) exprVal {
	a, okA := l.toInt()
	b, okB := r.toInt()
	if !okA || !okB {
		p.fail(2, "non-integer argument")
	}
	if (op == "/" || op == "%") && b.Sign() == 0 {
		p.fail(2, "division by zero")
	}
	n := new(big.Int)
	switch op {
	case "+":
		n.Add(a, b)
	case "-":
		n.Sub(a, b)
	case "*":
		if a.BitLen()+b.BitLen() > 8*4096 && !p.c.grow(int64(a.BitLen()+b.BitLen())/8) {
			panic(errExprMemory)
		}
		n.Mul(a, b)
	case "/":
		n.Quo(a, b) // truncated, as C and GMP's tdiv
	case "%":
		n.Rem(a, b)
	}
	return p.charge(exprVal{n: n})
}

func (p *exprParser) sum(ev bool) exprVal {
	l := p.product(ev)
	for {
		op := ""
		if p.next("+") {
			op = "+"
		} else if p.next("-") {
			op = "-"
		} else {
			return l
		}
		r := p.product(ev)
		if ev {
			l = p.arith(op, l, r)
		}
	}
}

func (p *exprParser) product(ev bool) exprVal {
	l := p.match(ev)
	for {
		op := ""
		for _, o := range []string{"*", "/", "%"} {
			if p.next(o) {
				op = o
				break
			}
		}
		if op == "" {
			return l
		}
		r := p.match(ev)
		if ev {
			l = p.arith(op, l, r)
		}
	}
}

func (p *exprParser) match(ev bool) exprVal {
	l := p.unary(ev)
	for p.next(":") {
		r := p.unary(ev)
		if ev {
			l = p.colon(l, r)
		}
	}
	return l
}

// colon is STRING : REGEXP.
func (p *exprParser) colon(sv, pv exprVal) exprVal {
	re, err := exprRegexp(pv.String())
	if err != nil {
		p.fail(2, "Invalid regular expression")
	}
	s := sv.String()
	m := re.FindStringSubmatchIndex(s)
	if re.NumSubexp() > 0 {
		if m == nil || m[2] < 0 {
			return exprVal{}
		}
		return p.charge(exprVal{s: s[m[2]:m[3]]})
	}
	if m == nil {
		return exprInteger(0)
	}
	return exprInteger(int64(utf8.RuneCountInString(s[:m[1]])))
}

func (p *exprParser) unary(ev bool) exprVal {
	// ( ( ( ... or length length ... recurse here: a Go stack that
	// overflows ends the daemon (the arguments can be a million words)
	if p.depth++; p.depth > maxNesting {
		p.fail(2, "the expression nests deeper than the fast path's limit of %d levels", maxNesting)
	}
	defer func() { p.depth-- }()
	switch {
	case p.next("+"):
		p.requireMore()
		return p.take()
	case p.next("length"):
		p.requireMore()
		v := p.unary(ev)
		return exprInteger(int64(utf8.RuneCountInString(v.String())))
	case p.next("match"):
		p.requireMore()
		l := p.unary(ev)
		p.requireMore()
		r := p.unary(ev)
		if ev {
			return p.colon(l, r)
		}
		return exprInteger(0)
	case p.next("index"):
		p.requireMore()
		l := p.unary(ev)
		p.requireMore()
		r := p.unary(ev)
		pos := 0
		for i, ch := range []rune(l.String()) {
			if strings.ContainsRune(r.String(), ch) {
				pos = i + 1
				break
			}
		}
		return exprInteger(int64(pos))
	case p.next("substr"):
		p.requireMore()
		l := p.unary(ev)
		p.requireMore()
		i1 := p.unary(ev)
		p.requireMore()
		i2 := p.unary(ev)
		pos, ok1 := i1.toInt()
		n, ok2 := i2.toInt()
		rs := []rune(l.String())
		if !ok1 || !ok2 || pos.Sign() <= 0 || n.Sign() <= 0 || pos.Cmp(big.NewInt(int64(len(rs)))) > 0 {
			return exprVal{}
		}
		start := int(pos.Int64()) - 1
		end := len(rs)
		if n.IsInt64() && int64(start)+n.Int64() < int64(end) {
			end = start + int(n.Int64())
		}
		return p.charge(exprVal{s: string(rs[start:end])})
	}
	return p.primary(ev)
}

func (p *exprParser) primary(ev bool) exprVal {
	p.requireMore()
	if p.next("(") {
		p.requireMore()
		v := p.or(ev)
		if !p.more() {
			p.fail(2, "syntax error: expecting ')' after ‘%s’", p.last())
		}
		if !p.next(")") {
			p.fail(2, "syntax error: expecting ')' instead of ‘%s’", p.all[p.i])
		}
		return v
	}
	if p.next(")") {
		p.fail(2, "syntax error: unexpected ')'")
	}
	return p.take()
}
