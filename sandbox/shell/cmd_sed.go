package shell

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

func init() {
	d := &command{names: []string{"sed"}, run: cmdSed, opts: opts("ne:f:Ersuz", "quiet", "silent", "expression=", "file=", "in-place?", "regexp-extended", "separate", "posix", "debug", "null-data"), ownArgs: true, ignored: []string{"debug"}}
	d.check = func(args []string) string { _, why := d.opts.parse("sed", sedArgs(args), d.ignored); return why }
	register(d)
}

type sedAddr struct {
	kind  byte // 'n' line, '$' last, 'r' regex, '~' step, 0 none
	n, m  int
	re    *regexp.Regexp
	isRel bool // addr2 "+N"
}

type sedCmd struct {
	a1, a2   sedAddr
	neg      bool
	name     byte
	text     string
	re       *regexp.Regexp
	repl     []replPart
	global   bool
	nth      int
	print    bool
	from, to []rune
	label    string
	block    int // index of the matching } for {, or of the { for }
	// range state
	active bool
	end    int
}

type replPart struct {
	lit   string
	group int // -1 for a literal
	cse   byte
}

type sedParser struct {
	s   string
	i   int
	ere bool
}

func (p *sedParser) eof() bool { return p.i >= len(p.s) }

func (p *sedParser) skipSpace() {
	for !p.eof() && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// delimited reads up to the unescaped delimiter d, keeping escapes
// except \d, which becomes d (and \n, a newline).
func (p *sedParser) delimited(d byte, isRE bool) (string, error) {
	var b strings.Builder
	inBr := false
	for !p.eof() {
		ch := p.s[p.i]
		if isRE && ch == '[' && !inBr {
			inBr = true
			b.WriteByte(ch)
			p.i++
			if !p.eof() && p.s[p.i] == '^' {
				b.WriteByte('^')
				p.i++
			}
			if !p.eof() && p.s[p.i] == ']' {
				b.WriteByte(']')
				p.i++
			}
			continue
		}
		if inBr {
			if ch == ']' {
				inBr = false
			}
			b.WriteByte(ch)
			p.i++
			continue
		}
		if ch == '\\' && p.i+1 < len(p.s) {
			nx := p.s[p.i+1]
			p.i += 2
			switch {
			case nx == d:
				b.WriteByte(d)
			case nx == 'n':
				b.WriteByte('\n')
			case nx == 't' && isRE:
				b.WriteByte('\t')
			default:
				b.WriteByte('\\')
				b.WriteByte(nx)
			}
			continue
		}
		if ch == d {
			p.i++
			return b.String(), nil
		}
		if ch == '\n' && !isRE {
			// allowed in replacements
		}
		b.WriteByte(ch)
		p.i++
	}
	return "", fmt.Errorf("unterminated `s' command")
}

func (p *sedParser) regex(d byte) (*regexp.Regexp, error) {
	src, err := p.delimited(d, true)
	if err != nil {
		return nil, err
	}
	fold := false
	for !p.eof() && (p.s[p.i] == 'I') {
		fold = true
		p.i++
	}
	if src == "" {
		return nil, nil // the last regex
	}
	return compileRE(src, p.ere, fold)
}

func (p *sedParser) addr() (sedAddr, error) {
	var a sedAddr
	if p.eof() {
		return a, nil
	}
	ch := p.s[p.i]
	switch {
	case ch >= '0' && ch <= '9':
		j := p.i
		for j < len(p.s) && isDigit(p.s[j]) {
			j++
		}
		a.kind = 'n'
		a.n, _ = strconv.Atoi(p.s[p.i:j])
		p.i = j
		if !p.eof() && p.s[p.i] == '~' {
			p.i++
			j := p.i
			for j < len(p.s) && isDigit(p.s[j]) {
				j++
			}
			a.kind = '~'
			a.m, _ = strconv.Atoi(p.s[p.i:j])
			p.i = j
		}
	case ch == '$':
		a.kind = '$'
		p.i++
	case ch == '/' || ch == '\\':
		d := byte('/')
		p.i++
		if ch == '\\' {
			d = p.s[p.i]
			p.i++
		}
		re, err := p.regex(d)
		if err != nil {
			return a, err
		}
		a.kind, a.re = 'r', re
	}
	return a, nil
}

func parseSed(script string, ere bool) ([]*sedCmd, error) {
	p := &sedParser{s: script, ere: ere}
	var cmds []*sedCmd
	var stack []int
	for {
		for !p.eof() && strings.IndexByte(" \t\n;", p.s[p.i]) >= 0 {
			p.i++
		}
		if p.eof() {
			break
		}
		if p.s[p.i] == '#' {
			for !p.eof() && p.s[p.i] != '\n' {
				p.i++
			}
			continue
		}
		c := &sedCmd{}
		var err error
		if c.a1, err = p.addr(); err != nil {
			return nil, err
		}
		if c.a1.kind != 0 && !p.eof() && p.s[p.i] == ',' {
			p.i++
			p.skipSpace()
			if !p.eof() && (p.s[p.i] == '+' || p.s[p.i] == '~') {
				rel := p.s[p.i]
				p.i++
				j := p.i
				for j < len(p.s) && isDigit(p.s[j]) {
					j++
				}
				c.a2.kind = 'n'
				c.a2.n, _ = strconv.Atoi(p.s[p.i:j])
				c.a2.isRel = rel == '+'
				if rel == '~' {
					c.a2.kind = 'm'
				}
				p.i = j
			} else if c.a2, err = p.addr(); err != nil {
				return nil, err
			} else if c.a2.kind == 0 {
				return nil, fmt.Errorf("unexpected `,'")
			}
		}
		p.skipSpace()
		for !p.eof() && p.s[p.i] == '!' {
			c.neg = true
			p.i++
			p.skipSpace()
		}
		if p.eof() {
			return nil, fmt.Errorf("missing command")
		}
		c.name = p.s[p.i]
		p.i++
		switch c.name {
		case '{':
			stack = append(stack, len(cmds))
		case '}':
			if len(stack) == 0 {
				return nil, fmt.Errorf("unexpected `}'")
			}
			open := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			cmds[open].block = len(cmds)
			c.block = open
		case '=', 'd', 'D', 'p', 'P', 'n', 'N', 'h', 'H', 'g', 'G', 'x', 'l', 'z', 'F':
		case 'q', 'Q':
			p.skipSpace()
			j := p.i
			for j < len(p.s) && isDigit(p.s[j]) {
				j++
			}
			c.nth, _ = strconv.Atoi(p.s[p.i:j])
			p.i = j
		case 'a', 'i', 'c':
			p.skipSpace()
			if !p.eof() && p.s[p.i] == '\\' {
				p.i++
				if !p.eof() && p.s[p.i] == '\n' {
					p.i++
				}
			}
			var b strings.Builder
			for !p.eof() && p.s[p.i] != '\n' {
				if p.s[p.i] == '\\' && p.i+1 < len(p.s) {
					p.i++
					if p.s[p.i] == '\n' {
						b.WriteByte('\n')
						p.i++
						continue
					}
					if p.s[p.i] == 't' {
						b.WriteByte('\t')
						p.i++
						continue
					}
				}
				b.WriteByte(p.s[p.i])
				p.i++
			}
			c.text = b.String()
		case ':':
			p.skipSpace()
			j := p.i
			for j < len(p.s) && p.s[j] != '\n' && p.s[j] != ';' {
				j++
			}
			c.label = strings.TrimSpace(p.s[p.i:j])
			p.i = j
		case 'b', 't', 'T':
			p.skipSpace()
			j := p.i
			for j < len(p.s) && p.s[j] != '\n' && p.s[j] != ';' && p.s[j] != '}' {
				j++
			}
			c.label = strings.TrimSpace(p.s[p.i:j])
			p.i = j
		case 's':
			if p.eof() {
				return nil, fmt.Errorf("unterminated `s' command")
			}
			d := p.s[p.i]
			p.i++
			src, err := p.delimited(d, true)
			if err != nil {
				return nil, err
			}
			repl, err := p.delimited(d, false)
			if err != nil {
				return nil, err
			}
			fold := false
			for !p.eof() && strings.IndexByte("gpiIme0123456789", p.s[p.i]) >= 0 {
				switch f := p.s[p.i]; {
				case f == 'g':
					c.global = true
				case f == 'p':
					c.print = true
				case f == 'i' || f == 'I':
					fold = true
				case isDigit(f):
					c.nth = c.nth*10 + int(f-'0')
				}
				p.i++
			}
			if src != "" {
				if c.re, err = compileRE(src, ere, fold); err != nil {
					return nil, err
				}
			}
			c.repl = parseRepl(repl)
		case 'y':
			d := p.s[p.i]
			p.i++
			a, err := p.delimited(d, false)
			if err != nil {
				return nil, err
			}
			b, err := p.delimited(d, false)
			if err != nil {
				return nil, err
			}
			c.from, c.to = []rune(unescapeSimple(a)), []rune(unescapeSimple(b))
			if len(c.from) != len(c.to) {
				return nil, fmt.Errorf("strings for `y' command are different lengths")
			}
		default:
			return nil, fmt.Errorf("unknown command: `%c'", c.name)
		}
		cmds = append(cmds, c)
		p.skipSpace()
		if !p.eof() && p.s[p.i] == '}' {
			continue
		}
		if !p.eof() && p.s[p.i] != ';' && p.s[p.i] != '\n' && p.s[p.i] != '#' {
			return nil, fmt.Errorf("extra characters after command")
		}
	}
	if len(stack) > 0 {
		return nil, fmt.Errorf("unmatched `{'")
	}
	return cmds, nil
}

func unescapeSimple(s string) string {
	return strings.NewReplacer(`\\`, `\`, `\n`, "\n", `\t`, "\t").Replace(s)
}

func parseRepl(s string) []replPart {
	var parts []replPart
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			parts = append(parts, replPart{lit: lit.String(), group: -1})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == '&':
			flush()
			parts = append(parts, replPart{group: 0})
		case ch == '\\' && i+1 < len(s):
			i++
			switch n := s[i]; {
			case n >= '0' && n <= '9':
				flush()
				parts = append(parts, replPart{group: int(n - '0')})
			case n == 'n':
				lit.WriteByte('\n')
			case n == 't':
				lit.WriteByte('\t')
			case n == 'U' || n == 'L' || n == 'E' || n == 'u' || n == 'l':
				flush()
				parts = append(parts, replPart{group: -2, cse: n})
			default:
				lit.WriteByte(n)
			}
		default:
			lit.WriteByte(ch)
		}
	}
	flush()
	return parts
}

func expandRepl(parts []replPart, s string, m []int) string {
	var b strings.Builder
	mode, once := byte(0), byte(0)
	write := func(t string) {
		if once != 0 && t != "" {
			r := []rune(t)
			if once == 'u' {
				r[0] = []rune(strings.ToUpper(string(r[0])))[0]
			} else {
				r[0] = []rune(strings.ToLower(string(r[0])))[0]
			}
			t = string(r)
			once = 0
		}
		switch mode {
		case 'U':
			t = strings.ToUpper(t)
		case 'L':
			t = strings.ToLower(t)
		}
		b.WriteString(t)
	}
	for _, p := range parts {
		switch {
		case p.group == -1:
			write(p.lit)
		case p.group == -2:
			switch p.cse {
			case 'U', 'L':
				mode = p.cse
			case 'E':
				mode = 0
			default:
				once = p.cse
			}
		case 2*p.group+1 < len(m) && m[2*p.group] >= 0:
			write(s[m[2*p.group]:m[2*p.group+1]])
		}
	}
	return b.String()
}

type sedState struct {
	c        *cmd
	cmds     []*sedCmd
	quiet    bool
	out      io.Writer
	lineNo   int
	lastRE   *regexp.Regexp
	hold     string
	subbed   bool
	append   []string
	quit     bool
	exitCode int
}

// sedArgs rewrites -i[SUFFIX] as --in-place=SUFFIX, as sed reads it.
func sedArgs(args []string) []string {
	args = append([]string(nil), args...)
	for i, a := range args {
		if a == "--" {
			break
		}
		if strings.HasPrefix(a, "-i") {
			args[i] = "--in-place=" + a[2:]
		}
	}
	return args
}

func cmdSed(c *cmd) int {
	c.args = append(c.args[:1], sedArgs(c.args[1:])...)
	opts, args, ok := c.flags()
	if !ok {
		return 1
	}
	var scripts []string
	quiet, ere, inPlace, separate := false, false, false, false
	suffix := ""
	for _, o := range opts {
		switch o.name {
		case "n", "quiet", "silent":
			quiet = true
		case "e", "expression":
			scripts = append(scripts, o.val)
		case "f", "file":
			data, err := c.readFile(o.val)
			if err != nil {
				c.errorf("couldn't open file %s: %s", o.val, errText(err))
				return 1
			}
			scripts = append(scripts, strings.TrimSuffix(string(data), "\n"))
		case "i", "in-place":
			inPlace, separate, suffix = true, true, o.val
		case "E", "r", "regexp-extended":
			ere = true
		case "s", "separate":
			separate = true
		}
	}
	if len(scripts) == 0 {
		if len(args) == 0 {
			fmt.Fprintf(c.stderr, "Usage: sed [OPTION]... {script-only-if-no-other-script} [input-file]...\n")
			return 1
		}
		scripts, args = []string{args[0]}, args[1:]
	}
	cmds, err := parseSed(strings.Join(scripts, "\n"), ere)
	if err != nil {
		c.errorf("-e expression #1, char 0: %v", err)
		return 1
	}
	// labels
	for _, cm := range cmds {
		if (cm.name == 'b' || cm.name == 't' || cm.name == 'T') && cm.label != "" {
			found := false
			for _, l := range cmds {
				if l.name == ':' && l.label == cm.label {
					found = true
				}
			}
			if !found {
				c.errorf("-e expression #1, char 0: can't find label for jump to `%s'", cm.label)
				return 1
			}
		}
	}
	st := &sedState{c: c, cmds: cmds, quiet: quiet, out: c.out}
	if inPlace {
		if len(args) == 0 {
			c.errorf("no input files")
			return 1
		}
		status := 0
		for _, f := range args {
			fi, err := c.stat(f)
			if err != nil {
				c.errorf("can't read %s: %s", f, errText(err))
				status = 1
				continue
			}
			if !fi.mode.IsRegular() {
				c.errorf("couldn't edit %s: not a regular file", f)
				status = 4
				continue
			}
			data, err := c.readFile(f)
			if err != nil {
				c.errorf("can't read %s: %s", f, errText(err))
				status = 1
				continue
			}
			var buf strings.Builder
			st.out = &buf
			st.lineNo = 0
			for _, cm := range cmds {
				cm.active = false
			}
			st.run([]io.Reader{strings.NewReader(string(data))})
			if suffix != "" {
				bak := suffix
				if strings.Contains(suffix, "*") {
					bak = strings.ReplaceAll(suffix, "*", baseName(f))
				} else {
					bak = f + suffix
				}
				if w, err := c.create(bak); err == nil {
					w.Write(data)
					w.Close()
				}
			}
			w, err := c.create(f)
			if err != nil {
				c.errorf("couldn't open %s: %s", f, errText(err))
				status = 4
				continue
			}
			io.WriteString(w, buf.String())
			w.Close()
			if st.quit {
				break
			}
		}
		if status == 0 {
			status = st.exitCode
		}
		return status
	}
	if len(args) == 0 {
		args = []string{"-"}
	}
	var readers []io.Reader
	status := 0
	for _, f := range args {
		if f == "-" {
			readers = append(readers, c.stdin)
			continue
		}
		fi, err := c.stat(f)
		if err == nil && fi.IsDir() {
			c.errorf("couldn't edit %s: not a regular file", f)
			status = 2
			continue
		}
		r, err := c.open(f)
		if err != nil {
			c.errorf("can't read %s: %s", f, errText(err))
			status = 2
			continue
		}
		defer r.Close()
		readers = append(readers, r)
	}
	_ = separate
	st.run(readers)
	if st.exitCode != 0 {
		return st.exitCode
	}
	return status
}

// lineReader reads lines from several inputs as one stream, and knows
// whether a line is the last.
type lineReader struct {
	c       *cmd
	rs      []io.Reader
	br      *bufio.Reader
	next    string
	hasNext bool
	nextNL  bool
}

func (l *lineReader) fill() {
	for {
		if l.br == nil {
			if len(l.rs) == 0 {
				l.hasNext = false
				return
			}
			l.br = bufio.NewReaderSize(l.rs[0], 64<<10)
			l.rs = l.rs[1:]
		}
		s, err := l.c.readLine(l.br)
		if s != "" {
			l.next, l.hasNext = strings.TrimSuffix(s, "\n"), true
			l.nextNL = strings.HasSuffix(s, "\n")
			return
		}
		if err != nil {
			l.br = nil
		}
	}
}

func (l *lineReader) read() (string, bool, bool) {
	if !l.hasNext {
		return "", false, false
	}
	s, nl := l.next, l.nextNL
	l.fill()
	return s, nl, true
}

func (st *sedState) run(rs []io.Reader) {
	lr := &lineReader{c: st.c, rs: rs}
	lr.fill()
	for !st.quit {
		ps, nl, ok := lr.read()
		if !ok {
			break
		}
		st.lineNo++
		st.cycle(ps, nl, lr)
		if st.c.canceled() {
			return
		}
	}
}

func (st *sedState) matchAddr(a sedAddr, ps string, last bool) bool {
	switch a.kind {
	case 'n':
		return st.lineNo == a.n
	case '$':
		return last
	case '~':
		if a.m <= 0 {
			return st.lineNo == a.n
		}
		return st.lineNo >= a.n && (st.lineNo-a.n)%a.m == 0
	case 'r':
		re := a.re
		if re == nil {
			re = st.lastRE
		} else {
			st.lastRE = re
		}
		if st.c.matchTooCostly(re, len(ps)) {
			st.quit = true
			return false
		}
		return re != nil && re.MatchString(ps)
	}
	return true
}

func (st *sedState) selected(cm *sedCmd, ps string, last bool) bool {
	var hit bool
	switch {
	case cm.a1.kind == 0:
		hit = true
	case cm.a2.kind == 0:
		hit = st.matchAddr(cm.a1, ps, last)
	case cm.active:
		hit = true
		switch {
		case cm.a2.kind == 'n' && cm.a2.isRel:
			if st.lineNo >= cm.end {
				cm.active = false
			}
		case cm.a2.kind == 'n':
			if st.lineNo >= cm.a2.n {
				cm.active = false
			}
		case cm.a2.kind == 'm':
			if cm.a2.n <= 0 || st.lineNo%cm.a2.n == 0 {
				cm.active = false
			}
		default:
			if st.matchAddr(cm.a2, ps, last) {
				cm.active = false
			}
		}
	default:
		if st.matchAddr(cm.a1, ps, last) || cm.a1.kind == 'n' && cm.a1.n == 0 {
			hit = true
			cm.active = true
			switch {
			case cm.a2.kind == 'n' && cm.a2.isRel:
				cm.end = st.lineNo + cm.a2.n
				if cm.a2.n == 0 {
					cm.active = false
				}
			case cm.a2.kind == 'n':
				if cm.a2.n <= st.lineNo {
					cm.active = false
				}
			case cm.a2.kind == 'm':
				if cm.a2.n <= 0 || st.lineNo%cm.a2.n == 0 {
					cm.active = false
				}
			case cm.a2.kind == '$':
				if last {
					cm.active = false
				}
			case cm.a1.kind == 'n' && cm.a1.n == 0 && cm.a2.kind == 'r':
				if st.matchAddr(cm.a2, ps, last) {
					cm.active = false
				}
			}
		}
	}
	return hit != cm.neg
}

func (st *sedState) emit(s string, nl bool) {
	io.WriteString(st.out, s)
	if nl {
		io.WriteString(st.out, "\n")
	}
}

func (st *sedState) cycle(ps string, nl bool, lr *lineReader) {
	st.subbed = false
	deleted := false
	autoprint := !st.quiet
	pc := 0
	restart := false
	steps := 0
	for pc < len(st.cmds) {
		cm := st.cmds[pc]
		last := !lr.hasNext
		// a branch loop (:a;ba) must stop with the call, and the
		// pattern and hold spaces are the call's memory
		if steps++; steps&1023 == 0 && st.c.canceled() {
			st.quit = true
			return
		}
		if n := int64(len(ps) + len(st.hold)); n > 1<<20 && st.c.r.mem.over(2*n) {
			st.c.r.mem.exceed(st.c.name)
			st.quit = true
			return
		}
		if cm.name == '}' || cm.name == ':' {
			pc++
			continue
		}
		if !st.selected(cm, ps, last) {
			if cm.name == '{' {
				pc = cm.block + 1
				continue
			}
			pc++
			continue
		}
		switch cm.name {
		case '{':
		case '=':
			fmt.Fprintf(st.out, "%d\n", st.lineNo)
		case 'p':
			st.emit(ps, true)
		case 'P':
			first, _, _ := strings.Cut(ps, "\n")
			st.emit(first, true)
		case 'd':
			deleted = true
			pc = len(st.cmds)
			continue
		case 'D':
			if i := strings.IndexByte(ps, '\n'); i >= 0 {
				ps = ps[i+1:]
				st.flushAppend()
				pc = 0
				restart = true
				continue
			}
			deleted = true
			pc = len(st.cmds)
			continue
		case 'n':
			if !lr.hasNext {
				if autoprint {
					st.emit(ps, nl)
				}
				st.flushAppend()
				st.quit = true
				return
			}
			if autoprint {
				st.emit(ps, true)
			}
			st.flushAppend()
			ps, nl, _ = lr.read()
			st.lineNo++
		case 'N':
			if !lr.hasNext {
				if autoprint {
					st.emit(ps, nl)
				}
				st.flushAppend()
				st.quit = true
				return
			}
			var next string
			next, nl, _ = lr.read()
			st.lineNo++
			ps += "\n" + next
		case 'h':
			st.hold = ps
		case 'H':
			st.hold += "\n" + ps
		case 'g':
			ps = st.hold
		case 'G':
			ps += "\n" + st.hold
		case 'x':
			ps, st.hold = st.hold, ps
		case 'a':
			st.append = append(st.append, cm.text+"\n")
		case 'i':
			io.WriteString(st.out, cm.text+"\n")
		case 'c':
			if cm.a2.kind == 0 || !cm.active {
				io.WriteString(st.out, cm.text+"\n")
			}
			deleted = true
			pc = len(st.cmds)
			continue
		case 'z':
			ps = ""
		case 'F':
			io.WriteString(st.out, "-\n")
		case 'l':
			st.emit(strconv.Quote(ps)+"$", true)
		case 'q':
			if autoprint {
				st.emit(ps, nl)
			}
			st.flushAppend()
			st.quit, st.exitCode = true, cm.nth
			return
		case 'Q':
			st.quit, st.exitCode = true, cm.nth
			return
		case 'y':
			rs := []rune(ps)
			for i, r := range rs {
				for j, f := range cm.from {
					if r == f {
						rs[i] = cm.to[j]
						break
					}
				}
			}
			ps = string(rs)
		case 's':
			re := cm.re
			if re == nil {
				re = st.lastRE
			} else {
				st.lastRE = re
			}
			if re == nil {
				break
			}
			if st.c.matchTooCostly(re, len(ps)) {
				st.quit = true
				return
			}
			out, did := substitute(re, ps, cm)
			if did {
				ps = out
				st.subbed = true
				if cm.print {
					st.emit(ps, true)
				}
			}
		case 'b':
			if pc = st.jump(cm.label); pc < 0 {
				pc = len(st.cmds)
			}
			continue
		case 't', 'T':
			if st.subbed == (cm.name == 't') {
				st.subbed = false
				if pc = st.jump(cm.label); pc < 0 {
					pc = len(st.cmds)
				}
				continue
			}
		}
		pc++
	}
	_ = restart
	if !deleted && autoprint {
		st.emit(ps, nl || lr.hasNext)
	}
	st.flushAppend()
}

func (st *sedState) jump(label string) int {
	if label == "" {
		return -1
	}
	for i, c := range st.cmds {
		if c.name == ':' && c.label == label {
			return i
		}
	}
	return -1
}

func (st *sedState) flushAppend() {
	for _, a := range st.append {
		io.WriteString(st.out, a)
	}
	st.append = st.append[:0]
}

func substitute(re *regexp.Regexp, s string, cm *sedCmd) (string, bool) {
	var b strings.Builder
	pos, n, did := 0, 0, false
	for pos <= len(s) {
		m := re.FindStringSubmatchIndex(s[pos:])
		if m == nil {
			break
		}
		for i := range m {
			if m[i] >= 0 {
				m[i] += pos
			}
		}
		n++
		if cm.nth == 0 && (cm.global || n == 1) || cm.nth > 0 && (n == cm.nth || cm.global && n > cm.nth) {
			b.WriteString(s[pos:m[0]])
			b.WriteString(expandRepl(cm.repl, s, m))
			did = true
		} else {
			b.WriteString(s[pos:m[1]])
		}
		if m[1] == m[0] {
			if m[1] < len(s) {
				b.WriteString(s[m[1] : m[1]+1])
			}
			pos = m[1] + 1
		} else {
			pos = m[1]
		}
		if !cm.global && (cm.nth == 0 || n >= cm.nth) {
			break
		}
	}
	if pos < len(s) {
		b.WriteString(s[pos:])
	}
	return b.String(), did
}
