package shell

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

func init() {
	register(&command{names: []string{"grep", "egrep", "fgrep"}, run: cmdGrep, opts: opts("EFGPe:f:iyvwxcLlnhHoqsrRA:B:C:m:abIZz0123456789",
		"extended-regexp", "fixed-strings", "basic-regexp", "perl-regexp", "regexp=", "file=", "ignore-case", "no-ignore-case",
		"invert-match", "word-regexp", "line-regexp", "count", "files-without-match", "files-with-matches", "line-number",
		"no-filename", "with-filename", "only-matching", "quiet", "silent", "no-messages", "recursive", "dereference-recursive",
		"after-context=", "before-context=", "context=", "max-count=", "include=", "exclude=", "exclude-dir=", "color?", "colour?",
		"text", "byte-offset", "binary-files=", "null", "label=", "line-buffered"), ignored: []string{"z", "Z", "null", "label"}})
}

// translateRE turns a POSIX basic or extended regular expression (with
// GNU's extensions) into Go's syntax.
func translateRE(re string, extended bool) (string, error) {
	var b strings.Builder
	inBracket := false
	for i := 0; i < len(re); i++ {
		ch := re[i]
		if inBracket {
			switch {
			case ch == ']' && !strings.HasSuffix(b.String(), "[") && !strings.HasSuffix(b.String(), "[^"):
				inBracket = false
				b.WriteByte(']')
			case ch == '[' && i+1 < len(re) && (re[i+1] == ':' || re[i+1] == '.' || re[i+1] == '='):
				end := strings.Index(re[i+2:], string(re[i+1])+"]")
				if end < 0 {
					return "", fmt.Errorf("unmatched [")
				}
				b.WriteString(re[i : i+2+end+2])
				i += 2 + end + 1
			case ch == '\\':
				b.WriteString(`\\`)
			case ch == '[':
				b.WriteString(`\[`)
			default:
				b.WriteByte(ch)
			}
			continue
		}
		switch ch {
		case '[':
			inBracket = true
			b.WriteByte('[')
			if i+1 < len(re) && re[i+1] == '^' {
				b.WriteByte('^')
				i++
			}
			if i+1 < len(re) && re[i+1] == ']' {
				b.WriteString(`\]`)
				i++
			}
		case '\\':
			if i+1 >= len(re) {
				return "", fmt.Errorf("trailing backslash (\\)")
			}
			i++
			c := re[i]
			switch {
			case !extended && strings.IndexByte("(){}|+?", c) >= 0:
				b.WriteByte(c)
			case c == '<' || c == '>':
				b.WriteString(`\b`)
			case c >= '1' && c <= '9':
				return "", fmt.Errorf("back-references are not supported")
			case strings.IndexByte("wWsSbB", c) >= 0:
				b.WriteByte('\\')
				b.WriteByte(c)
			case c == '`':
				b.WriteString(`\A`)
			case c == '\'':
				b.WriteString(`\z`)
			default:
				b.WriteString(regexp.QuoteMeta(string(c)))
			}
		case '(', ')', '{', '}', '|', '+', '?':
			if extended {
				if ch == '{' && (i+1 >= len(re) || !isDigit(re[i+1]) && re[i+1] != ',') {
					b.WriteString(`\{`)
				} else {
					b.WriteByte(ch)
				}
			} else {
				b.WriteByte('\\')
				b.WriteByte(ch)
			}
		case '*':
			// a leading star is literal
			s := b.String()
			if s == "" || strings.HasSuffix(s, "^") && len(s) == 1 || strings.HasSuffix(s, "(") || strings.HasSuffix(s, "|") {
				b.WriteString(`\*`)
			} else {
				b.WriteByte('*')
			}
		case '^':
			if !extended && b.Len() > 0 && !strings.HasSuffix(b.String(), "(") && !strings.HasSuffix(b.String(), "|") {
				b.WriteString(`\^`)
			} else {
				b.WriteByte('^')
			}
		case '$':
			if !extended && i+1 < len(re) && !(re[i+1] == '\\' && i+2 < len(re) && (re[i+2] == ')' || re[i+2] == '|')) {
				b.WriteString(`\$`)
			} else {
				b.WriteByte('$')
			}
		case '.':
			b.WriteByte('.')
		default:
			b.WriteString(regexp.QuoteMeta(string(ch)))
		}
	}
	if inBracket {
		return "", fmt.Errorf("Unmatched [, [^, [:, [., or [=")
	}
	return b.String(), nil
}

// compileRE compiles a POSIX regular expression for grep, sed and find.
func compileRE(re string, extended, fold bool) (*regexp.Regexp, error) {
	t, err := translateRE(re, extended)
	if err != nil {
		return nil, err
	}
	if fold {
		t = "(?i)" + t
	}
	r, err := compileGo(t)
	if err != nil {
		return nil, err
	}
	r.Longest()
	return r, nil
}

type grepOpts struct {
	invert, count, listFiles, listMissing, lineNum, noName, withName, onlyMatch, quiet, silent bool
	recursive, deref, byteOff                                                                  bool
	after, before, maxCount                                                                    int
	include, exclude, excludeDir                                                               []string
	re                                                                                         *regexp.Regexp
	fixed                                                                                      []string
	fold, word, line, implicitDot                                                              bool
	lits                                                                                       []grepLit // one is in every matching line
	scan                                                                                       lineScanner
}

func cmdGrep(c *cmd) int {
	opts, args, ok := c.flags()
	if !ok {
		return 2
	}
	g := grepOpts{maxCount: -1}
	mode := byte('G')
	if c.name == "egrep" {
		mode = 'E'
	} else if c.name == "fgrep" {
		mode = 'F'
	}
	var patterns []string
	havePattern := false
	ctxNum := ""
	for _, o := range opts {
		switch o.name {
		case "E", "extended-regexp", "P", "perl-regexp":
			mode = 'E'
		case "F", "fixed-strings":
			mode = 'F'
		case "G", "basic-regexp":
			mode = 'G'
		case "e", "regexp":
			patterns = append(patterns, strings.Split(o.val, "\n")...)
			havePattern = true
		case "f", "file":
			data, err := c.readFile(o.val)
			if err != nil {
				c.fail(o.val, err)
				return 2
			}
			s := strings.TrimSuffix(string(data), "\n")
			if s != "" {
				patterns = append(patterns, strings.Split(s, "\n")...)
			}
			havePattern = true
		case "i", "y", "ignore-case":
			g.fold = true
		case "no-ignore-case":
			g.fold = false
		case "v", "invert-match":
			g.invert = true
		case "w", "word-regexp":
			g.word = true
		case "x", "line-regexp":
			g.line = true
		case "c", "count":
			g.count = true
		case "L", "files-without-match":
			g.listMissing = true
		case "l", "files-with-matches":
			g.listFiles = true
		case "n", "line-number":
			g.lineNum = true
		case "h", "no-filename":
			g.noName, g.withName = true, false
		case "H", "with-filename":
			g.withName, g.noName = true, false
		case "o", "only-matching":
			g.onlyMatch = true
		case "q", "quiet", "silent":
			g.quiet = true
		case "s", "no-messages":
			g.silent = true
		case "r", "recursive":
			g.recursive = true
		case "R", "dereference-recursive":
			g.recursive, g.deref = true, true
		case "A", "after-context":
			g.after = atoiOr(o.val, -1)
		case "B", "before-context":
			g.before = atoiOr(o.val, -1)
		case "C", "context":
			g.after, g.before = atoiOr(o.val, -1), atoiOr(o.val, -1)
		case "m", "max-count":
			g.maxCount = atoiOr(o.val, -1)
		case "include":
			g.include = append(g.include, o.val)
		case "exclude":
			g.exclude = append(g.exclude, o.val)
		case "exclude-dir":
			g.excludeDir = append(g.excludeDir, o.val)
		case "b", "byte-offset":
			g.byteOff = true
		default:
			if len(o.name) == 1 && isDigit(o.name[0]) {
				ctxNum += o.name
				n, _ := strconv.Atoi(ctxNum)
				g.after, g.before = n, n
			}
		}
		if g.after < 0 || g.before < 0 {
			c.errorf("%s: invalid context length argument", o.val)
			return 2
		}
	}
	if !havePattern {
		if len(args) == 0 {
			fmt.Fprintf(c.stderr, "Usage: grep [OPTION]... PATTERNS [FILE]...\nTry 'grep --help' for more information.\n")
			return 2
		}
		patterns = strings.Split(args[0], "\n")
		args = args[1:]
	}
	if mode == 'F' && !g.word && !g.line {
		g.fixed = patterns
		if g.fold {
			for i, p := range g.fixed {
				g.fixed[i] = strings.ToLower(p)
			}
		}
		g.lits = fixedLits(g.fixed, g.fold)
	} else {
		var alts []string
		for _, p := range patterns {
			var t string
			if mode == 'F' {
				t = regexp.QuoteMeta(p)
			} else {
				var err error
				t, err = translateRE(p, mode == 'E')
				if err != nil {
					c.errorf("%v", err)
					return 2
				}
			}
			alts = append(alts, t)
		}
		expr := "(?:" + strings.Join(alts, ")|(?:") + ")"
		if g.line {
			expr = "^(?:" + expr + ")$"
		} else if g.word {
			expr = `(?:^|\b)(?:` + expr + `)(?:\b|$)`
		}
		if g.fold {
			expr = "(?i)" + expr
		}
		re, err := compileGo(expr)
		if err != nil {
			c.errorf("%v", err)
			return 2
		}
		re.Longest()
		g.re = re
		g.lits = grepLits(expr)
	}
	if len(args) == 0 {
		if g.recursive {
			args = []string{"."}
			g.implicitDot = true
		} else {
			args = []string{"-"}
		}
	}
	// GNU grep: names are printed for several operands, or, under -r
	// with one operand, for the files found in a directory (not for
	// a single file operand: grep -r pat main.go prints no name)
	multi := len(args) > 1
	treeMulti := multi || g.recursive
	if g.withName {
		multi, treeMulti = true, true
	}
	if g.noName {
		multi, treeMulti = false, false
	}
	matched, errs := false, false
	for _, a := range args {
		if c.canceled() {
			return 2
		}
		if a == "-" {
			name := "(standard input)"
			if m, err := c.grepReader(&g, c.stdin, name, multi); err != nil {
				return 2
			} else if m {
				matched = true
			}
			continue
		}
		fi, err := c.stat(a)
		if err != nil {
			if !g.silent {
				c.fail(a, err)
			}
			errs = true
			continue
		}
		if fi.IsDir() {
			if !g.recursive {
				if !g.silent {
					c.errorf("%s: Is a directory", a)
				}
				continue
			}
			m, e := c.grepTree(&g, a, treeMulti, []uint64{fi.ino})
			matched = matched || m
			errs = errs || e
			if g.quiet && matched {
				return 0
			}
			continue
		}
		m, e := c.grepFile(&g, a, a, multi)
		matched = matched || m
		errs = errs || e
		if g.quiet && matched {
			return 0
		}
	}
	switch {
	case errs && !(g.quiet && matched):
		return 2
	case matched:
		return 0
	}
	return 1
}

// grepSkips is whether grep skips lines by their required strings (the
// tests compare with grep without).
var grepSkips = true

func atoiOr(s string, def int) int {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return def
	}
	return n
}

func globMatch(pats []string, name string) bool {
	for _, p := range pats {
		if m, _ := path.Match(p, name); m {
			return true
		}
	}
	return false
}

// grepTree greps the files under dir; up are the inodes of the
// directories it is in (with -R, a link back to one is a loop).
func (c *cmd) grepTree(g *grepOpts, dir string, multi bool, up []uint64) (bool, bool) {
	matched, errs := false, false
	ents, err := c.readDir(dir)
	if err != nil {
		if !g.silent {
			c.fail(dir, err)
		}
		return false, true
	}
	for _, e := range ents {
		if c.canceled() {
			return matched, true
		}
		var p string
		if g.implicitDot && dir == "." {
			p = e.name
		} else {
			p = strings.TrimSuffix(dir, "/") + "/" + e.name
		}
		isDir := e.typ.IsDir()
		var ino uint64
		if e.typ&fs.ModeSymlink != 0 {
			if !g.deref {
				continue // grep -r skips links found while recursing
			}
			fi, err := c.stat(p)
			if err != nil {
				continue
			}
			isDir, ino = fi.IsDir(), fi.ino
			if !isDir && !fi.mode.IsRegular() {
				continue // devices are skipped when recursing
			}
		} else if e.typ&(fs.ModeDevice|fs.ModeNamedPipe|fs.ModeSocket) != 0 {
			continue
		} else if isDir {
			fi, err := c.lstat(p)
			if err != nil {
				continue
			}
			ino = fi.ino
		}
		if isDir {
			if globMatch(g.excludeDir, e.name) {
				continue
			}
			if slices.Contains(up, ino) || len(up) >= maxTreeDepth {
				if !g.silent {
					c.errorf("%s: warning: recursive directory loop", p)
				}
				continue
			}
			m, er := c.grepTree(g, p, multi, append(up[:len(up):len(up)], ino))
			matched, errs = matched || m, errs || er
			continue
		}
		if len(g.include) > 0 && !globMatch(g.include, e.name) || globMatch(g.exclude, e.name) {
			continue
		}
		m, er := c.grepFile(g, p, p, multi)
		matched, errs = matched || m, errs || er
		if g.quiet && matched {
			return true, errs
		}
	}
	return matched, errs
}

func (c *cmd) grepFile(g *grepOpts, p, name string, multi bool) (bool, bool) {
	f, err := c.open(p)
	if err != nil {
		if !g.silent {
			c.fail(p, err)
		}
		return false, true
	}
	defer f.Close()
	m, err := c.grepReader(g, f, name, multi)
	if err != nil {
		if !g.silent {
			c.fail(p, err)
		}
		return m, true
	}
	return m, false
}

func (g *grepOpts) match(line string) bool {
	if g.fixed != nil {
		if g.fold {
			line = strings.ToLower(line)
		}
		for _, p := range g.fixed {
			if strings.Contains(line, p) {
				return true
			}
		}
		return false
	}
	return g.re.MatchString(line)
}

// matches returns the matched parts of line, for -o.
func (g *grepOpts) matches(line string) []string {
	if g.fixed != nil {
		var out []string
		l := line
		if g.fold {
			l = strings.ToLower(line)
		}
		for i := 0; i < len(l); {
			best, bi := -1, 0
			for _, p := range g.fixed {
				if p == "" {
					continue
				}
				if j := strings.Index(l[i:], p); j >= 0 && (best < 0 || j < best || j == best && len(p) > bi) {
					best, bi = j, len(p)
				}
			}
			if best < 0 {
				break
			}
			out = append(out, line[i+best:i+best+bi])
			i += best + bi
		}
		return out
	}
	var out []string
	for _, m := range g.re.FindAllString(line, -1) {
		if m != "" {
			out = append(out, m)
		}
	}
	return out
}

func (c *cmd) grepReader(g *grepOpts, r io.Reader, name string, multi bool) (bool, error) {
	sc := &g.scan
	sc.reset(r, g.lits)
	defer sc.reset(nil, nil)
	// Lines without a required string cannot match: skip them, unless
	// they may be printed (-v, context) or there are none.
	skip := g.lits != nil && !g.invert && g.before == 0 && grepSkips
	count := 0
	lineNo := 0
	var offset int64
	lastPrinted := 0 // line number of the last line printed
	afterLeft := 0
	type held struct {
		no   int
		off  int64
		text string
	}
	var before []held
	anyPrinted := false
	binary := false
	prefix := func(no int, off int64, sep byte) string {
		var b strings.Builder
		if multi {
			b.WriteString(name)
			b.WriteByte(sep)
		}
		if g.lineNum {
			b.WriteString(strconv.Itoa(no))
			b.WriteByte(sep)
		}
		if g.byteOff {
			b.WriteString(strconv.FormatInt(off, 10))
			b.WriteByte(sep)
		}
		return b.String()
	}
	printing := !g.count && !g.listFiles && !g.listMissing && !g.quiet
	ctx := g.after > 0 || g.before > 0
	for {
		if g.maxCount >= 0 && count >= g.maxCount && afterLeft == 0 {
			break
		}
		if skip && afterLeft == 0 {
			n, off, nul := sc.skip(c.ctx)
			lineNo, offset, binary = lineNo+n, offset+off, binary || nul
		}
		line, err := sc.readLine(c)
		if line == "" && err != nil {
			if err == io.EOF {
				break
			}
			return count > 0, err
		}
		lineNo++
		text := strings.TrimSuffix(line, "\n")
		if !binary && strings.IndexByte(text, 0) >= 0 {
			binary = true
		}
		if c.matchTooCostly(g.re, len(text)) {
			return count > 0, errPatternLimit
		}
		hit := g.match(text) != g.invert
		if g.maxCount >= 0 && count >= g.maxCount {
			hit = false
			if afterLeft == 0 {
				break
			}
		}
		if hit {
			count++
			if g.quiet {
				return true, nil
			}
			if (g.listFiles) && !g.count {
				break
			}
			if printing && !binary {
				if ctx && anyPrinted && lineNo-len(before) > lastPrinted+1 {
					c.out.WriteString("--\n")
				}
				for _, h := range before {
					c.out.WriteString(prefix(h.no, h.off, '-') + h.text + "\n")
				}
				before = before[:0]
				if g.onlyMatch {
					if !g.invert {
						for _, m := range g.matches(text) {
							c.out.WriteString(prefix(lineNo, offset, ':') + m + "\n")
						}
					}
				} else {
					c.out.WriteString(prefix(lineNo, offset, ':') + text + "\n")
				}
				lastPrinted = lineNo
				anyPrinted = true
				afterLeft = g.after
			}
		} else if printing && !binary {
			if afterLeft > 0 {
				c.out.WriteString(prefix(lineNo, offset, '-') + text + "\n")
				lastPrinted = lineNo
				afterLeft--
			} else if g.before > 0 {
				before = append(before, held{lineNo, offset, text})
				if len(before) > g.before {
					before = before[1:]
				}
			}
		}
		offset += int64(len(line))
		if err != nil {
			break
		}
	}
	if binary && count > 0 && printing {
		c.out.WriteString("Binary file " + name + " matches\n")
	}
	switch {
	case g.count:
		if multi {
			c.out.WriteString(name + ":")
		}
		c.out.WriteString(strconv.Itoa(count) + "\n")
		if g.listFiles && count > 0 {
			c.out.WriteString(name + "\n")
		}
	case g.listFiles && count > 0:
		c.out.WriteString(name + "\n")
	case g.listMissing && count == 0:
		c.out.WriteString(name + "\n")
	}
	return count > 0, nil
}

var _ = bytes.MinRead
