package shell

import (
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

func init() {
	register(&command{names: []string{"find"}, run: cmdFind, opts: opts("HLP"), ownArgs: true, check: findCheck})
}

type findCtx struct {
	c        *cmd
	up       []uint64 // inodes of the directories being walked
	upPath   []string // and their paths as printed
	status   int
	batches  map[*findNode][]string
	now      time.Time
	actioned bool
	depth    bool
}

type findItem struct {
	path  string // as printed
	abs   string
	fi    *fileInfo
	depth int
}

// findNode is one node of find's expression.
type findNode struct {
	op    string // "and", "or", "not", or a primary
	kids  []*findNode
	arg   string
	re    *regexp.Regexp
	num   int64
	cmp   byte // '+', '-', 0
	unit  int64
	argv  []string
	batch bool
	t     time.Time
}

// findPrimaries are the tests, actions and options of find's expression
// that findParser.primary takes, with how many words follow them (-1:
// a command, to ";" or "+"). -ok (which asks) and -fprintf (which
// writes a file) are not among them.
var findPrimaries = map[string]int{
	"-name": 1, "-iname": 1, "-path": 1, "-ipath": 1, "-wholename": 1, "-type": 1, "-regex": 1, "-iregex": 1,
	"-maxdepth": 1, "-mindepth": 1, "-depth": 0, "-xdev": 0, "-mount": 0, "-noleaf": 0, "-ignore_readdir_race": 0,
	"-follow": 0, "-empty": 0, "-true": 0, "-false": 0, "-prune": 0, "-quit": 0, "-print": 0, "-print0": 0,
	"-delete": 0, "-printf": 1, "-size": 1, "-mtime": 1, "-mmin": 1, "-perm": 1, "-newer": 1, "-exec": -1, "-execdir": -1,
	"!": 0, "(": 0, ")": 0, "-not": 0, "-o": 0, "-or": 0, "-a": 0, "-and": 0,
}

// findCheck routes a find command line with an option or a part of the
// expression that cmdFind does not take. (The commands of -exec are
// checked in checkCommand.)
func findCheck(args []string) string {
	i := 0
	for i < len(args) && !strings.HasPrefix(args[i], "-") && args[i] != "!" && args[i] != "(" {
		i++
	}
	for i < len(args) && (args[i] == "-L" || args[i] == "-P" || args[i] == "-H") {
		i++
		for i < len(args) && !strings.HasPrefix(args[i], "-") && args[i] != "!" && args[i] != "(" {
			i++
		}
	}
	operand := false // the expression so far ends with an operand
	for ; i < len(args); i++ {
		a := args[i]
		n, ok := findPrimaries[a]
		if !ok {
			return "find " + a + " is not built in"
		}
		switch a {
		case "-o", "-or", "-a", "-and":
			if !operand || i == len(args)-1 {
				return "find " + a + " with nothing before or after it"
			}
			operand = false
			continue
		case "!", "-not", "(":
			operand = false
			continue
		}
		operand = true
		switch {
		case n < 0:
			for i+1 < len(args) && args[i+1] != ";" && args[i+1] != "+" {
				i++
			}
			i++
		default:
			i += n
		}
	}
	return ""
}

func cmdFind(c *cmd) int {
	args := c.args[1:]
	var roots []string
	for len(args) > 0 && !strings.HasPrefix(args[0], "-") && args[0] != "!" && args[0] != "(" {
		roots = append(roots, args[0])
		args = args[1:]
	}
	// leading options
	follow := false
	for len(roots) == 0 && len(args) > 0 && (args[0] == "-L" || args[0] == "-P" || args[0] == "-H") {
		follow = args[0] == "-L"
		args = args[1:]
		for len(args) > 0 && !strings.HasPrefix(args[0], "-") && args[0] != "!" && args[0] != "(" {
			roots = append(roots, args[0])
			args = args[1:]
		}
	}
	_ = follow
	if len(roots) == 0 {
		roots = []string{"."}
	}
	fc := &findCtx{c: c, batches: map[*findNode][]string{}, now: c.now()}
	minDepth, maxDepth := 0, -1
	p := &findParser{args: args, fc: fc}
	expr, err := p.parseOr()
	if err == nil && p.i < len(p.args) {
		err = fmt.Errorf("paths must precede expression: `%s'", p.args[p.i])
	}
	if err != nil {
		c.errorf("%v", err)
		return 1
	}
	minDepth, maxDepth = p.minDepth, p.maxDepth
	fc.depth = p.depthFirst
	if expr == nil {
		expr = &findNode{op: "true"}
	}
	if !fc.actioned {
		expr = &findNode{op: "and", kids: []*findNode{expr, {op: "print"}}}
	}
	for _, root := range roots {
		abs := c.abs(root)
		fi, err := c.r.sh.ns.lstat(abs)
		if err == nil && fi.mode&fs.ModeSymlink != 0 && (follow || strings.HasSuffix(root, "/")) {
			fi, err = c.r.sh.ns.stat(abs)
		}
		if err != nil {
			c.errorf("‘%s’: %s", root, errText(err))
			fc.status = 1
			continue
		}
		fc.walk(expr, findItem{path: root, abs: abs, fi: fi}, minDepth, maxDepth, follow)
		if c.canceled() {
			return 1
		}
	}
	for n, items := range fc.batches {
		if len(items) > 0 {
			argv := []string{}
			for _, a := range n.argv {
				if a == "{}" {
					argv = append(argv, items...)
				} else {
					argv = append(argv, a)
				}
			}
			if c.run(argv, strings.NewReader(""), c.out) != 0 {
				fc.status = 1
			}
		}
	}
	return fc.status
}

func (fc *findCtx) walk(expr *findNode, it findItem, minD, maxD int, follow bool) {
	if fc.c.canceled() {
		return
	}
	if it.fi.IsDir() {
		// as GNU find (fts): a directory that is one of its ancestors
		// is reported, neither tested nor entered
		if i := slices.Index(fc.up, it.fi.ino); i >= 0 {
			fc.c.errorf("File system loop detected; ‘%s’ is part of the same file system loop as ‘%s’.", it.path, fc.upPath[i])
			fc.status = 1
			return
		}
	}
	prune := false
	if !fc.depth && it.depth >= minD {
		prune = fc.eval(expr, it) == pruneResult
	}
	if it.fi.IsDir() && !prune && (maxD < 0 || it.depth < maxD) {
		if len(fc.up) >= maxTreeDepth {
			fc.c.errorf("‘%s’: File name too long", it.path)
			fc.status = 1
			if fc.depth && it.depth >= minD {
				fc.eval(expr, it)
			}
			return
		}
		fc.up = append(fc.up, it.fi.ino)
		fc.upPath = append(fc.upPath, it.path)
		defer func() { fc.up, fc.upPath = fc.up[:len(fc.up)-1], fc.upPath[:len(fc.upPath)-1] }()
		ents, err := fc.c.readDir(it.abs)
		if err != nil {
			fc.c.errorf("‘%s’: %s", it.path, errText(err))
			fc.status = 1
		}
		for _, e := range ents {
			child := strings.TrimSuffix(it.path, "/") + "/" + e.name
			if it.path == "/" {
				child = "/" + e.name
			}
			cabs := strings.TrimSuffix(it.abs, "/") + "/" + e.name
			fi, err := fc.c.r.sh.ns.lstatEntry(it.abs, e)
			if err == nil && follow && fi.mode&fs.ModeSymlink != 0 {
				if f2, err2 := fc.c.r.sh.ns.stat(cabs); err2 == nil {
					fi = f2
				}
			}
			if err != nil {
				continue
			}
			fc.walk(expr, findItem{path: child, abs: cabs, fi: fi, depth: it.depth + 1}, minD, maxD, follow)
		}
	}
	if fc.depth && it.depth >= minD {
		fc.eval(expr, it)
	}
}

type findResult int

const (
	falseResult findResult = iota
	trueResult
	pruneResult // true, and do not descend
)

func (fc *findCtx) eval(n *findNode, it findItem) findResult {
	b := func(v bool) findResult {
		if v {
			return trueResult
		}
		return falseResult
	}
	switch n.op {
	case "and":
		res := trueResult
		for _, k := range n.kids {
			r := fc.eval(k, it)
			if r == falseResult {
				if res == pruneResult {
					return pruneResult
				}
				return falseResult
			}
			if r == pruneResult {
				res = pruneResult
			}
		}
		return res
	case "or":
		for _, k := range n.kids {
			if r := fc.eval(k, it); r != falseResult {
				return r
			}
		}
		return falseResult
	case "not":
		return b(fc.eval(n.kids[0], it) == falseResult)
	case "true":
		return trueResult
	case "false":
		return falseResult
	case "name", "iname":
		name := path.Base(it.path)
		if it.depth == 0 {
			name = baseName(it.path)
		}
		pat := n.arg
		if n.op == "iname" {
			name, pat = strings.ToLower(name), strings.ToLower(pat)
		}
		m, _ := path.Match(pat, name)
		return b(m)
	case "path", "ipath", "wholename":
		p, pat := it.path, n.arg
		if n.op == "ipath" {
			p, pat = strings.ToLower(p), strings.ToLower(pat)
		}
		return b(pathGlob(pat, p))
	case "regex":
		return b(n.re.FindString(it.path) == it.path)
	case "type":
		m := it.fi.mode
		var t byte
		switch {
		case m.IsDir():
			t = 'd'
		case m&fs.ModeSymlink != 0:
			t = 'l'
		case m&fs.ModeNamedPipe != 0:
			t = 'p'
		case m&fs.ModeSocket != 0:
			t = 's'
		case m&fs.ModeCharDevice != 0:
			t = 'c'
		case m&fs.ModeDevice != 0:
			t = 'b'
		default:
			t = 'f'
		}
		return b(strings.IndexByte(n.arg, t) >= 0)
	case "empty":
		if it.fi.IsDir() {
			ents, _ := fc.c.readDir(it.abs)
			return b(len(ents) == 0)
		}
		return b(it.fi.mode.IsRegular() && it.fi.size == 0)
	case "size":
		var v int64
		if n.unit == 512 {
			v = (it.fi.size + 511) / 512
		} else {
			v = (it.fi.size + n.unit - 1) / n.unit
		}
		return b(cmpNum(v, n.num, n.cmp))
	case "mtime", "mmin":
		age := fc.now.Sub(it.fi.mtime)
		unit := 24 * time.Hour
		if n.op == "mmin" {
			unit = time.Minute
		}
		v := int64(age / unit)
		if n.op == "mmin" {
			v = int64((age + unit - 1) / unit)
		}
		return b(cmpNum(v, n.num, n.cmp))
	case "newer":
		return b(it.fi.mtime.After(n.t))
	case "perm":
		perm := int64(unixMode(it.fi.mode) & 0o7777)
		switch n.cmp {
		case '-':
			return b(perm&n.num == n.num)
		case '/':
			return b(perm&n.num != 0 || n.num == 0)
		}
		return b(perm == n.num)
	case "print":
		fc.c.out.WriteString(it.path + "\n")
		return trueResult
	case "print0":
		fc.c.out.WriteString(it.path + "\x00")
		return trueResult
	case "printf":
		fc.c.out.WriteString(fc.printf(n.arg, it))
		return trueResult
	case "prune":
		return pruneResult
	case "quit":
		return falseResult
	case "delete":
		var err error
		if it.fi.IsDir() {
			err = fc.c.r.sh.ns.remove(it.abs)
		} else {
			err = fc.c.r.sh.ns.remove(it.abs)
		}
		if err != nil {
			fc.c.errorf("cannot delete ‘%s’: %s", it.path, errText(err))
			fc.status = 1
			return falseResult
		}
		return trueResult
	case "exec":
		if n.batch {
			fc.batches[n] = append(fc.batches[n], it.path)
			return trueResult
		}
		argv := make([]string, len(n.argv))
		for i, a := range n.argv {
			argv[i] = strings.ReplaceAll(a, "{}", it.path)
		}
		return b(fc.c.run(argv, strings.NewReader(""), fc.c.out) == 0)
	}
	return falseResult
}

func cmpNum(v, n int64, cmp byte) bool {
	switch cmp {
	case '+':
		return v > n
	case '-':
		return v < n
	}
	return v == n
}

// pathGlob matches find -path patterns, where * also matches /.
func pathGlob(pat, s string) bool {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(pat); i++ {
		switch ch := pat[i]; ch {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		case '[':
			j := strings.IndexByte(pat[i:], ']')
			if j < 0 {
				b.WriteString(`\[`)
				continue
			}
			cls := pat[i+1 : i+j]
			if strings.HasPrefix(cls, "!") {
				cls = "^" + cls[1:]
			}
			b.WriteString("[" + cls + "]")
			i += j
		case '\\':
			if i+1 < len(pat) {
				i++
				b.WriteString(regexp.QuoteMeta(string(pat[i])))
			}
		default:
			b.WriteString(regexp.QuoteMeta(string(ch)))
		}
	}
	b.WriteString("$")
	re, err := compileGo(b.String())
	return err == nil && re.MatchString(s)
}

func (fc *findCtx) printf(f string, it findItem) string {
	f, _ = unescape(f, false)
	var b strings.Builder
	for i := 0; i < len(f); i++ {
		if f[i] != '%' || i+1 >= len(f) {
			b.WriteByte(f[i])
			continue
		}
		i++
		switch f[i] {
		case 'p':
			b.WriteString(it.path)
		case 'f':
			b.WriteString(baseName(it.path))
		case 'h':
			b.WriteString(dirName(it.path))
		case 's':
			b.WriteString(strconv.FormatInt(it.fi.size, 10))
		case 'd':
			b.WriteString(strconv.Itoa(it.depth))
		case 'm':
			b.WriteString(strconv.FormatUint(uint64(unixMode(it.fi.mode)&0o7777), 8))
		case 'y':
			b.WriteString(map[bool]string{true: "d", false: "f"}[it.fi.IsDir()])
		case 'P':
			rel := strings.TrimPrefix(it.abs, "")
			_ = rel
			b.WriteString(it.path)
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(f[i])
		}
	}
	return b.String()
}

type findParser struct {
	args               []string
	i                  int
	fc                 *findCtx
	minDepth, maxDepth int
	depthFirst         bool
	depth              int // unary's recursion
}

func (p *findParser) peek() string {
	if p.i < len(p.args) {
		return p.args[p.i]
	}
	return ""
}

func (p *findParser) parseOr() (*findNode, error) {
	p.maxDepth = -1
	return p.or()
}

// or is a flat node of every operand of a chain of -o (eval takes them
// in turn), not a tree as deep as the chain: eval recurses on the tree.
func (p *findParser) or() (*findNode, error) {
	left, err := p.and()
	if err != nil {
		return nil, err
	}
	kids := []*findNode{left}
	for p.peek() == "-o" || p.peek() == "-or" {
		p.i++
		right, err := p.and()
		if err != nil {
			return nil, err
		}
		if right == nil {
			return nil, fmt.Errorf("invalid expression; you have used a binary operator '-o' with nothing after it.")
		}
		kids = append(kids, right)
	}
	if len(kids) == 1 {
		return left, nil
	}
	return &findNode{op: "or", kids: kids}, nil
}

func (p *findParser) and() (*findNode, error) {
	var kids []*findNode
	for p.i < len(p.args) {
		t := p.peek()
		if t == "-o" || t == "-or" || t == ")" {
			break
		}
		if t == "-a" || t == "-and" {
			p.i++
			continue
		}
		n, err := p.unary()
		if err != nil {
			return nil, err
		}
		if n != nil {
			kids = append(kids, n)
		}
	}
	switch len(kids) {
	case 0:
		return nil, nil
	case 1:
		return kids[0], nil
	}
	return &findNode{op: "and", kids: kids}, nil
}

func (p *findParser) unary() (*findNode, error) {
	t := p.peek()
	// ! ! ! ... and ( ( ( ... recurse here: a Go stack that overflows
	// ends the daemon (the arguments can be a million words)
	if t == "!" || t == "-not" || t == "(" {
		if p.depth++; p.depth > maxNesting {
			return nil, fmt.Errorf("the expression nests deeper than the fast path's limit of %d levels", maxNesting)
		}
		defer func() { p.depth-- }()
	}
	switch t {
	case "!", "-not":
		p.i++
		n, err := p.unary()
		if err != nil {
			return nil, err
		}
		if n == nil {
			return nil, fmt.Errorf("invalid expression")
		}
		return &findNode{op: "not", kids: []*findNode{n}}, nil
	case "(":
		p.i++
		n, err := p.or()
		if err != nil {
			return nil, err
		}
		if p.peek() != ")" {
			return nil, fmt.Errorf("invalid expression; I was expecting to find a ')' somewhere but did not see one.")
		}
		p.i++
		if n == nil {
			return &findNode{op: "true"}, nil
		}
		return n, nil
	}
	return p.primary()
}

func (p *findParser) primary() (*findNode, error) {
	t := p.args[p.i]
	p.i++
	arg := func() (string, error) {
		if p.i >= len(p.args) {
			return "", fmt.Errorf("missing argument to `%s'", t)
		}
		p.i++
		return p.args[p.i-1], nil
	}
	name := strings.TrimPrefix(t, "-")
	switch name {
	case "name", "iname", "path", "ipath", "wholename", "type":
		a, err := arg()
		if err != nil {
			return nil, err
		}
		if name == "type" {
			a = strings.ReplaceAll(a, ",", "")
			if a == "" {
				return nil, fmt.Errorf("Arguments to -type should contain at least one letter")
			}
			for _, r := range a {
				if !strings.ContainsRune("bcdpflsD", r) {
					return nil, fmt.Errorf("Unknown argument to -type: %c", r)
				}
			}
		}
		return &findNode{op: name, arg: a}, nil
	case "regex", "iregex":
		a, err := arg()
		if err != nil {
			return nil, err
		}
		re, err := compileRE(a, false, name == "iregex")
		if err != nil {
			return nil, err
		}
		return &findNode{op: "regex", re: re}, nil
	case "maxdepth", "mindepth":
		a, err := arg()
		if err != nil {
			return nil, err
		}
		n, err := strconv.Atoi(a)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("Expected a positive decimal integer argument to -%s, but got ‘%s’", name, a)
		}
		if name == "maxdepth" {
			p.maxDepth = n
		} else {
			p.minDepth = n
		}
		return nil, nil
	case "depth":
		p.depthFirst = true
		return nil, nil
	case "xdev", "mount", "noleaf", "ignore_readdir_race", "follow":
		return nil, nil
	case "empty", "true", "false", "prune", "quit":
		return &findNode{op: name}, nil
	case "print", "print0", "delete":
		p.fc.actioned = true
		if name == "delete" {
			p.depthFirst = true
		}
		return &findNode{op: name}, nil
	case "printf", "fprintf":
		a, err := arg()
		if err != nil {
			return nil, err
		}
		p.fc.actioned = true
		return &findNode{op: "printf", arg: a}, nil
	case "size", "mtime", "mmin", "perm":
		a, err := arg()
		if err != nil {
			return nil, err
		}
		orig := a
		if name == "size" && a == "" {
			return nil, fmt.Errorf("invalid null argument to -size")
		}
		n := &findNode{op: name, unit: 512}
		if a != "" && (a[0] == '+' || a[0] == '-' || a[0] == '/' && name == "perm") {
			n.cmp, a = a[0], a[1:]
		}
		if name == "size" && a != "" {
			switch a[len(a)-1] {
			case 'c':
				n.unit, a = 1, a[:len(a)-1]
			case 'k':
				n.unit, a = 1024, a[:len(a)-1]
			case 'M':
				n.unit, a = 1<<20, a[:len(a)-1]
			case 'G':
				n.unit, a = 1<<30, a[:len(a)-1]
			case 'b':
				a = a[:len(a)-1]
			case 'w':
				n.unit, a = 2, a[:len(a)-1]
			default:
				if k := a[len(a)-1]; k < '0' || k > '9' {
					return nil, fmt.Errorf("invalid -size type `%c'", k)
				}
			}
		}
		base := 10
		if name == "perm" {
			base = 8
		}
		v, err := strconv.ParseInt(a, base, 64)
		if err != nil && name == "perm" {
			if m, ok := applyMode(a, 0, false); ok {
				v, err = int64(m), nil
			}
		}
		if err != nil {
			switch name {
			case "perm":
				return nil, fmt.Errorf("invalid mode ‘%s’", orig)
			case "size":
				return nil, fmt.Errorf("Invalid argument `%s' to -size", orig)
			}
			return nil, fmt.Errorf("invalid argument `%s' to `%s'", orig, t)
		}
		n.num = v
		return n, nil
	case "newer":
		a, err := arg()
		if err != nil {
			return nil, err
		}
		fi, err := p.fc.c.stat(a)
		if err != nil {
			return nil, fmt.Errorf("‘%s’: %s", a, errText(err))
		}
		return &findNode{op: "newer", t: fi.mtime}, nil
	case "exec", "execdir", "ok":
		var argv []string
		for p.i < len(p.args) && p.args[p.i] != ";" && p.args[p.i] != "+" {
			argv = append(argv, p.args[p.i])
			p.i++
		}
		if p.i >= len(p.args) {
			return nil, fmt.Errorf("missing argument to `%s'", t)
		}
		if len(argv) == 0 {
			return nil, fmt.Errorf("invalid argument `%s' to `%s'", p.args[p.i], t)
		}
		batch := p.args[p.i] == "+"
		p.i++
		p.fc.actioned = true
		return &findNode{op: "exec", argv: argv, batch: batch}, nil
	}
	return nil, fmt.Errorf("unknown predicate `%s'", t)
}
