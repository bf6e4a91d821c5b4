package shell

import (
	"fmt"
	"io"
	"math/big"
	"strings"
)

func init() {
	register(&command{names: []string{"bc"}, run: cmdBc, opts: opts("lq", "mathlib", "quiet")})
}

// The fast path's bc is GNU bc's arithmetic: decimal numbers of any
// length, scale, + - * / % ^ and unary minus, parentheses, variables and
// the assignments = += -= *= /= %= ^=, sqrt(), strings, comments, quit;
// -l sets scale to 20. The program is read (files, then stdin) and
// parsed whole before anything runs: what it does not implement (ibase,
// obase, relations, if/while/for, define, the -l library's s c a l e j,
// ++ and --) fails the command with status 2 and a message saying so,
// before any output, as does a syntax error (GNU reports those and
// goes on).

// bcMaxDigits bounds a number the fast path computes (2^1000000000 would
// take GNU bc hours): past it the command fails.
const bcMaxDigits = 1 << 20

// bcNum is n / 10^scale.
type bcNum struct {
	n     *big.Int
	scale int
}

var bigTen = big.NewInt(10)

func pow10(n int) *big.Int { return new(big.Int).Exp(bigTen, big.NewInt(int64(n)), nil) }

// rescale truncates or extends x to s digits after the point.
func (x bcNum) rescale(s int) bcNum {
	switch {
	case s < x.scale:
		return bcNum{new(big.Int).Quo(x.n, pow10(x.scale-s)), s}
	case s > x.scale:
		return bcNum{new(big.Int).Mul(x.n, pow10(s-x.scale)), s}
	}
	return x
}

func (x bcNum) digits() int { return len(x.n.Text(10)) } // cheap enough under bcMaxDigits

// String prints x as bc does: no leading zero before the point, every
// digit of its scale, lines of 68 digits and a backslash (GNU's
// BC_LINE_LENGTH of 70 counts the newline).
func (x bcNum) String() string {
	var b strings.Builder
	if x.n.Sign() < 0 {
		b.WriteByte('-')
	}
	d := new(big.Int).Abs(x.n).Text(10)
	if x.n.Sign() == 0 {
		d = "0"
		b.Reset()
	}
	if x.scale > 0 && x.n.Sign() != 0 {
		if len(d) <= x.scale {
			d = strings.Repeat("0", x.scale-len(d)+1) + d
		}
		ip, fp := d[:len(d)-x.scale], d[len(d)-x.scale:]
		if ip == "0" {
			ip = ""
		}
		d = ip + "." + fp
	}
	b.WriteString(d)
	s := b.String()
	var out strings.Builder
	for len(s) > 69 {
		out.WriteString(s[:68])
		out.WriteString("\\\n")
		s = s[68:]
	}
	out.WriteString(s)
	return out.String()
}

// A bcNode is an expression or a statement of the program.
type bcNode struct {
	op    string // "num", "var", "str", "scale", "neg", "sqrt", an operator, or an assignment ("=", "+=")
	num   bcNum
	name  string
	l, r  *bcNode
	depth int // of the tree below: eval recurses on it
	line  int
	print bool // a statement whose value is printed
}

type bcParser struct {
	toks []bcTok
	i    int
	// depth is the parse's recursion (parentheses, unary minus, ^ and
	// assignments, right to left); the nodes' depth bounds eval's
	deep int
}

// bcMaxDepth bounds an expression's tree (eval recurses on it): a sum of
// ten thousand terms (seq 10000 | paste -sd+ | bc) is built in, a
// deeper one is the sandbox's; the parse's own recursion (parentheses,
// unary minus, ^, assignments) is bounded by maxNesting. A Go stack that
// overflows ends the daemon.
const bcMaxDepth = 10000

var errBcDeep = errBc(fmt.Sprintf("an expression nested more than %d levels deep", maxNesting))

// nest enters one level of the parse's recursion; the caller defers
// p.deep--.
func (p *bcParser) nest() error {
	if p.deep++; p.deep > maxNesting {
		return errBcDeep
	}
	return nil
}

// node makes an operator's node, refused past bcMaxDepth.
func (p *bcParser) node(n *bcNode) (*bcNode, error) {
	for _, k := range []*bcNode{n.l, n.r} {
		if k != nil && k.depth+1 > n.depth {
			n.depth = k.depth + 1
		}
	}
	if n.depth > bcMaxDepth {
		return nil, errBc(fmt.Sprintf("an expression of more than %d levels", bcMaxDepth))
	}
	return n, nil
}

type bcTok struct {
	kind string // "num", "id", "str", "op", "nl", "eof"
	text string
	line int
}

// errBc is a program the fast path's bc refuses.
type errBc string

func (e errBc) Error() string { return string(e) }

func bcLex(src string) ([]bcTok, error) {
	var toks []bcTok
	line := 1
	for i := 0; i < len(src); {
		ch := src[i]
		switch {
		case ch == '\\' && i+1 < len(src) && src[i+1] == '\n':
			i += 2
			line++
		case ch == ' ' || ch == '\t' || ch == '\r':
			i++
		case ch == '\n' || ch == ';':
			toks = append(toks, bcTok{"nl", string(ch), line})
			if ch == '\n' {
				line++
			}
			i++
		case ch == '#':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case ch == '/' && i+1 < len(src) && src[i+1] == '*':
			end := strings.Index(src[i+2:], "*/")
			if end < 0 {
				return nil, errBc("an unterminated comment")
			}
			line += strings.Count(src[i:i+2+end], "\n")
			i += end + 4
		case ch == '"':
			end := strings.IndexByte(src[i+1:], '"')
			if end < 0 {
				return nil, errBc("an unterminated string")
			}
			toks = append(toks, bcTok{"str", src[i+1 : i+1+end], line})
			line += strings.Count(src[i+1:i+1+end], "\n")
			i += end + 2
		case ch >= '0' && ch <= '9' || ch == '.':
			j := i
			for j < len(src) && (src[j] >= '0' && src[j] <= '9' || src[j] == '.') {
				j++
			}
			if j < len(src) && src[j] >= 'A' && src[j] <= 'F' {
				return nil, errBc("a number with digits above 9 (ibase)")
			}
			t := src[i:j]
			if strings.Count(t, ".") > 1 || t == "." {
				return nil, errBc("the number " + t)
			}
			toks = append(toks, bcTok{"num", t, line})
			i = j
		case ch >= 'a' && ch <= 'z':
			j := i
			for j < len(src) && (src[j] >= 'a' && src[j] <= 'z' || src[j] >= '0' && src[j] <= '9' || src[j] == '_') {
				j++
			}
			toks = append(toks, bcTok{"id", src[i:j], line})
			i = j
		default:
			op := string(ch)
			if i+1 < len(src) && src[i+1] == '=' && strings.IndexByte("+-*/%^", ch) >= 0 {
				op += "="
			}
			if strings.IndexByte("+-*/%^=()", ch) < 0 || i+1 < len(src) && (op == "+" && src[i+1] == '+' || op == "-" && src[i+1] == '-' || op == "=" && src[i+1] == '=') {
				return nil, errBc(fmt.Sprintf("%q", src[i:min(i+2, len(src))]))
			}
			toks = append(toks, bcTok{"op", op, line})
			i += len(op)
		}
	}
	return append(toks, bcTok{"eof", "", line}), nil
}

func (p *bcParser) peek() bcTok { return p.toks[p.i] }

func (p *bcParser) isOp(s string) bool { t := p.peek(); return t.kind == "op" && t.text == s }

var bcKeywords = map[string]bool{"ibase": true, "obase": true, "last": true, "define": true, "auto": true, "if": true, "else": true,
	"while": true, "for": true, "return": true, "break": true, "continue": true, "halt": true, "length": true, "read": true,
	"print": true, "limits": true, "warranty": true}

// statements parses the program; quit drops the line it is on and all
// after (GNU bc quits when it reads it, before that line runs).
func (p *bcParser) statements() ([]*bcNode, error) {
	var out []*bcNode
	for {
		t := p.peek()
		switch {
		case t.kind == "eof":
			return out, nil
		case t.kind == "nl":
			p.i++
			continue
		case t.kind == "id" && t.text == "quit":
			for len(out) > 0 && out[len(out)-1].line == t.line {
				out = out[:len(out)-1]
			}
			return out, nil
		case t.kind == "str":
			p.i++
			out = append(out, &bcNode{op: "str", name: t.text, line: t.line})
		default:
			n, err := p.assign()
			if err != nil {
				return nil, err
			}
			n.line = t.line
			n.print = !strings.HasSuffix(n.op, "=")
			out = append(out, n)
		}
		if t := p.peek(); t.kind != "nl" && t.kind != "eof" {
			return nil, errBc(fmt.Sprintf("a syntax error on line %d", t.line))
		}
	}
}

func (p *bcParser) assign() (*bcNode, error) {
	t := p.peek()
	if t.kind == "id" && p.i+1 < len(p.toks) {
		next := p.toks[p.i+1]
		if next.kind == "op" && strings.HasSuffix(next.text, "=") {
			if bcKeywords[t.text] || t.text == "sqrt" || t.text == "quit" {
				return nil, errBc(t.text)
			}
			p.i += 2
			if err := p.nest(); err != nil {
				return nil, err
			}
			r, err := p.assign()
			p.deep--
			if err != nil {
				return nil, err
			}
			return p.node(&bcNode{op: next.text, name: t.text, r: r})
		}
	}
	return p.binary(0)
}

var bcLevels = [][]string{{"+", "-"}, {"*", "/", "%"}}

func (p *bcParser) binary(level int) (*bcNode, error) {
	if level == len(bcLevels) {
		return p.power()
	}
	l, err := p.binary(level + 1)
	if err != nil {
		return nil, err
	}
	for {
		op := ""
		for _, o := range bcLevels[level] {
			if p.isOp(o) {
				op = o
			}
		}
		if op == "" {
			return l, nil
		}
		p.i++
		r, err := p.binary(level + 1)
		if err != nil {
			return nil, err
		}
		if l, err = p.node(&bcNode{op: op, l: l, r: r}); err != nil {
			return nil, err
		}
	}
}

// power is ^ (right to left) over unary minus, which binds tighter in
// bc: -2^2 is 4.
func (p *bcParser) power() (*bcNode, error) {
	l, err := p.unary()
	if err != nil {
		return nil, err
	}
	if p.isOp("^") {
		p.i++
		if err := p.nest(); err != nil {
			return nil, err
		}
		r, err := p.power()
		p.deep--
		if err != nil {
			return nil, err
		}
		return p.node(&bcNode{op: "^", l: l, r: r})
	}
	return l, nil
}

func (p *bcParser) unary() (*bcNode, error) {
	if p.isOp("-") {
		p.i++
		if err := p.nest(); err != nil {
			return nil, err
		}
		x, err := p.unary()
		p.deep--
		if err != nil {
			return nil, err
		}
		return p.node(&bcNode{op: "neg", l: x})
	}
	return p.primary()
}

func (p *bcParser) primary() (*bcNode, error) {
	t := p.peek()
	p.i++
	switch {
	case t.kind == "num":
		ip, fp, _ := strings.Cut(t.text, ".")
		n, _ := new(big.Int).SetString(ip+fp, 10)
		if n == nil {
			n = new(big.Int)
		}
		return &bcNode{op: "num", num: bcNum{n, len(fp)}}, nil
	case t.kind == "op" && t.text == "(":
		if err := p.nest(); err != nil {
			return nil, err
		}
		x, err := p.binary(0)
		p.deep--
		if err != nil {
			return nil, err
		}
		if !p.isOp(")") {
			return nil, errBc(fmt.Sprintf("a syntax error on line %d", t.line))
		}
		p.i++
		return x, nil
	case t.kind == "id" && t.text == "scale" && !p.isOp("("):
		return &bcNode{op: "scale"}, nil
	case t.kind == "id" && t.text == "sqrt" && p.isOp("("):
		p.i++
		if err := p.nest(); err != nil {
			return nil, err
		}
		x, err := p.binary(0)
		p.deep--
		if err != nil {
			return nil, err
		}
		if !p.isOp(")") {
			return nil, errBc(fmt.Sprintf("a syntax error on line %d", t.line))
		}
		p.i++
		return p.node(&bcNode{op: "sqrt", l: x})
	case t.kind == "id" && !bcKeywords[t.text] && t.text != "quit" && t.text != "sqrt" && !p.isOp("("):
		return &bcNode{op: "var", name: t.text}, nil
	case t.kind == "id":
		return nil, errBc(t.text)
	}
	return nil, errBc(fmt.Sprintf("a syntax error on line %d", t.line))
}

// bcRun is a running program: its variables and scale.
type bcRun struct {
	c     *cmd
	vars  map[string]bcNum
	scale int
}

// bcRuntime is a runtime error of bc (divide by zero): the rest of the
// line is not run.
type bcRuntime string

func (r *bcRun) check(digits int) {
	if digits > bcMaxDigits {
		panic(errBc(fmt.Sprintf("a number of more than %d digits", bcMaxDigits)))
	}
	if digits > 4096 && !r.c.grow(int64(digits)) {
		panic(errMemoryLimit)
	}
	if r.c.canceled() {
		panic(errMemoryLimit)
	}
}

func (r *bcRun) eval(n *bcNode) bcNum {
	switch n.op {
	case "num":
		return n.num
	case "var":
		if v, ok := r.vars[n.name]; ok {
			return v
		}
		return bcNum{new(big.Int), 0}
	case "scale":
		return bcNum{big.NewInt(int64(r.scale)), 0}
	case "neg":
		x := r.eval(n.l)
		return bcNum{new(big.Int).Neg(x.n), x.scale}
	case "sqrt":
		x := r.eval(n.l)
		if x.n.Sign() < 0 {
			panic(bcRuntime("Square root of a negative number"))
		}
		s := max(r.scale, x.scale)
		r.check(x.digits() + s)
		v := x.rescale(2 * s)
		return bcNum{new(big.Int).Sqrt(v.n), s}
	}
	if strings.HasSuffix(n.op, "=") {
		v := r.eval(n.r)
		if n.op != "=" {
			old := r.eval(&bcNode{op: "var", name: n.name})
			v = r.arith(strings.TrimSuffix(n.op, "="), old, v)
		}
		if n.name == "scale" {
			s := v.rescale(0).n
			if s.Sign() < 0 || s.Cmp(big.NewInt(bcMaxDigits)) > 0 {
				panic(errBc("scale=" + s.String()))
			}
			r.scale = int(s.Int64())
		} else {
			r.vars[n.name] = v
		}
		return v
	}
	return r.arith(n.op, r.eval(n.l), r.eval(n.r))
}

func (r *bcRun) arith(op string, a, b bcNum) bcNum {
	switch op {
	case "+", "-":
		s := max(a.scale, b.scale)
		a, b = a.rescale(s), b.rescale(s)
		if op == "+" {
			return bcNum{new(big.Int).Add(a.n, b.n), s}
		}
		return bcNum{new(big.Int).Sub(a.n, b.n), s}
	case "*":
		r.check(a.digits() + b.digits())
		p := bcNum{new(big.Int).Mul(a.n, b.n), a.scale + b.scale}
		return p.rescale(min(a.scale+b.scale, max(r.scale, a.scale, b.scale)))
	case "/":
		return r.div(a, b, r.scale)
	case "%":
		q := r.div(a, b, r.scale)
		t := bcNum{new(big.Int).Mul(q.n, b.n), q.scale + b.scale}
		s := max(r.scale+b.scale, a.scale)
		x, y := a.rescale(max(s, t.scale)), t.rescale(max(s, t.scale))
		return bcNum{new(big.Int).Sub(x.n, y.n), max(s, t.scale)}.rescale(s)
	case "^":
		if b.scale > 0 && new(big.Int).Rem(b.n, pow10(b.scale)).Sign() != 0 {
			panic(errBc("a non-integer exponent"))
		}
		e := b.rescale(0).n
		if !e.IsInt64() || a.digits()*int(min(absInt64(e.Int64()), bcMaxDigits+1)) > bcMaxDigits && a.n.CmpAbs(pow10(a.scale)) != 0 && a.n.Sign() != 0 {
			panic(errBc(fmt.Sprintf("a number of more than %d digits", bcMaxDigits)))
		}
		k := e.Int64()
		if k > 0 && (a.n.Sign() == 0 || a.n.CmpAbs(pow10(a.scale)) == 0) {
			// 0 or ±1: no growth, whatever the exponent
			sign := int64(a.n.Sign())
			if k%2 == 0 {
				sign *= sign
			}
			s := int(min(int64(a.scale)*k, int64(max(r.scale, a.scale))))
			return bcNum{new(big.Int).Mul(big.NewInt(sign), pow10(s)), s}
		}
		if k == 0 {
			return bcNum{big.NewInt(1), 0}
		}
		ak := absInt64(k)
		r.check(a.digits() * int(ak))
		p := bcNum{new(big.Int).Exp(a.n, big.NewInt(ak), nil), a.scale * int(ak)}
		if k < 0 {
			return r.div(bcNum{big.NewInt(1), 0}, p, r.scale)
		}
		return p.rescale(min(a.scale*int(ak), max(r.scale, a.scale)))
	}
	panic("bc: unknown operator " + op)
}

func absInt64(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// div is a / b truncated to s digits after the point.
func (r *bcRun) div(a, b bcNum, s int) bcNum {
	if b.n.Sign() == 0 {
		panic(bcRuntime("Divide by zero"))
	}
	r.check(a.digits() + s + b.scale)
	num := new(big.Int).Set(a.n)
	den := new(big.Int).Set(b.n)
	// a.n/10^as / (b.n/10^bs) * 10^s = a.n * 10^(s+bs-as) / b.n
	if e := s + b.scale - a.scale; e >= 0 {
		num.Mul(num, pow10(e))
	} else {
		den.Mul(den, pow10(-e))
	}
	return bcNum{num.Quo(num, den), s}
}

func cmdBc(c *cmd) int {
	opts, files, ok := c.flags()
	if !ok {
		return 1
	}
	r := &bcRun{c: c, vars: map[string]bcNum{}}
	for _, o := range opts {
		if o.name == "l" || o.name == "mathlib" {
			r.scale = 20
		}
	}
	var src strings.Builder
	for _, f := range append(files, "-") {
		var data []byte
		var err error
		if f == "-" {
			data, err = c.readAll(c.stdin)
		} else {
			data, err = c.readFile(f)
		}
		if err != nil {
			if err != errMemoryLimit && !c.canceled() {
				fmt.Fprintf(c.stderr, "File %s is unavailable.\n", f)
			}
			return 1
		}
		src.Write(data)
		if len(data) > 0 && data[len(data)-1] != '\n' {
			src.WriteByte('\n')
		}
	}
	toks, err := bcLex(src.String())
	var prog []*bcNode
	if err == nil {
		if !c.grow(int64(len(toks)) * 64) {
			return 1
		}
		prog, err = (&bcParser{toks: toks}).statements()
	}
	if err != nil {
		fmt.Fprintf(c.stderr, "bc: %v is not built into the fast path's bc (the sandbox's bc runs it)\n", err)
		return 2
	}
	skipLine := -1
	for _, n := range prog {
		if n.line == skipLine {
			continue
		}
		code := func() (code int) {
			defer func() {
				switch e := recover().(type) {
				case nil:
				case bcRuntime:
					c.out.Flush()
					fmt.Fprintf(c.stderr, "Runtime error (func=(main)): %s\n", string(e))
					skipLine = n.line
				case errBc:
					c.out.Flush()
					fmt.Fprintf(c.stderr, "bc: %v is not built into the fast path's bc (the sandbox's bc runs it)\n", e)
					code = 2
				default:
					if e == errMemoryLimit {
						code = 1
						return
					}
					panic(e)
				}
			}()
			if n.op == "str" {
				io.WriteString(c.out, n.name)
				return 0
			}
			v := r.eval(n)
			if n.print {
				c.out.WriteString(v.String())
				c.out.WriteByte('\n')
			}
			return 0
		}()
		if code != 0 {
			return code
		}
	}
	return 0
}
