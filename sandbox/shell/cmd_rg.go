package shell

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
)

// rg is ripgrep 13 as agents call it, writing what it writes when its
// output is not a terminal (no heading, no line numbers unless -n, no
// colours), in `rg --sort path` order (see rg_walk.go). What it does not
// implement goes to the sandbox (rgCheck).
func init() {
	register(&command{names: []string{"rg"}, run: cmdRg, check: rgCheck,
		opts: opts("nNiSslcC:A:B:g:t:T:Fwxvm:oe:f:0uHIqLj:",
			"line-number", "no-line-number", "ignore-case", "smart-case", "case-sensitive", "files-with-matches",
			"files-without-match", "count", "count-matches", "context=", "after-context=", "before-context=", "glob=",
			"type=", "type-not=", "fixed-strings", "word-regexp", "line-regexp", "invert-match", "max-count=",
			"only-matching", "regexp=", "file=", "files", "null", "hidden", "no-hidden", "no-ignore", "no-ignore-vcs",
			"no-require-git", "unrestricted", "no-heading", "heading", "color=", "with-filename", "no-filename",
			"quiet", "max-depth=", "follow", "no-follow", "sort=", "threads=", "column", "no-column", "no-messages",
			"no-config")})
}

type rgType struct {
	name string
	not  bool
}

type rgOpts struct {
	patterns                                    []string
	fold, smart, fixed, word, line, invert      bool
	lineNum, column, heading, withName, noName  bool
	listFiles, listMissing, count, countMatches bool
	onlyMatch, quiet, null, silent, files       bool
	hidden, noIgnore, noVCS, noRequireGit       bool
	follow                                      bool
	after, before, maxCount, maxDepth           int
	globs                                       []gitignore.Pattern
	anyWhite                                    bool
	types                                       []rgType
	paths                                       []string
	re                                          *regexp.Regexp
	pre                                         *regexp.Regexp // re in multi-line mode, to skip a whole file
	foldLits                                    [][]byte       // or, under -i, literals a match holds
	lowBuf                                      []byte
	lit                                         []string // -F without -i, -w, -x: plain substrings

	sorted   bool // --sort path: ripgrep then walks even a missing path
	errs     bool // an error was reported
	printed  bool // a line or heading was printed (for separators)
	patFiles []string
}

// rgParse parses rg's arguments; why says what the fast path does not
// implement ("" words, computed at run time, are taken as they come).
func rgParse(args []string) (o *rgOpts, why string) {
	opts, rest, err := parseOptsIn(args, true, builtins["rg"].opts.shorts, builtins["rg"].opts.longs...)
	if err != nil {
		return nil, fmt.Sprintf("rg: %v: the option is not built in", err)
	}
	o = &rgOpts{maxCount: -1, maxDepth: -1}
	havePattern, unrestricted := false, 0
	num := func(v string) (int, bool) {
		n, err := strconv.Atoi(v)
		return n, err == nil && n >= 0
	}
	for _, op := range opts {
		ok := true
		switch op.name {
		case "n", "line-number":
			o.lineNum = true
		case "N", "no-line-number":
			o.lineNum = false
		case "i", "ignore-case":
			o.fold, o.smart = true, false
		case "S", "smart-case":
			o.smart, o.fold = true, false
		case "s", "case-sensitive":
			o.fold, o.smart = false, false
		case "l", "files-with-matches":
			o.listFiles = true
		case "files-without-match":
			o.listMissing = true
		case "c", "count":
			o.count = true
		case "count-matches":
			o.countMatches = true
		case "C", "context":
			o.after, ok = num(op.val)
			o.before = o.after
		case "A", "after-context":
			o.after, ok = num(op.val)
		case "B", "before-context":
			o.before, ok = num(op.val)
		case "g", "glob":
			if op.val != "" && op.val[0] != '!' {
				o.anyWhite = true
			}
			globs, ok := expandBraces(op.val)
			if !ok {
				return nil, "rg -g " + op.val + ": nested braces are not built in"
			}
			for _, g := range globs {
				o.globs = append(o.globs, gitignore.ParsePattern(rgGlob(g), nil))
			}
		case "t", "type", "T", "type-not":
			if rgTypes[op.val] == nil {
				return nil, "rg: the file type " + strconv.Quote(op.val) + " is not built in"
			}
			o.types = append(o.types, rgType{op.val, op.name == "T" || op.name == "type-not"})
		case "F", "fixed-strings":
			o.fixed = true
		case "w", "word-regexp":
			o.word = true
		case "x", "line-regexp":
			o.line = true
		case "v", "invert-match":
			o.invert = true
		case "m", "max-count":
			o.maxCount, ok = num(op.val)
		case "o", "only-matching":
			o.onlyMatch = true
		case "e", "regexp":
			o.patterns = append(o.patterns, op.val)
			havePattern = true
		case "f", "file":
			o.patFiles = append(o.patFiles, op.val)
			havePattern = true
		case "files":
			o.files = true
		case "0", "null":
			o.null = true
		case "hidden":
			o.hidden = true
		case "no-hidden":
			o.hidden = false
		case "no-ignore":
			o.noIgnore = true
		case "no-ignore-vcs":
			o.noVCS = true
		case "no-require-git":
			o.noRequireGit = true
		case "u", "unrestricted":
			unrestricted++
			if unrestricted > 2 {
				return nil, "rg -uuu (binary files) is not built in"
			}
			o.noIgnore = true
			o.hidden = o.hidden || unrestricted == 2
		case "heading":
			o.heading = true
		case "no-heading":
			o.heading = false
		case "H", "with-filename":
			o.withName, o.noName = true, false
		case "I", "no-filename":
			o.noName, o.withName = true, false
		case "q", "quiet":
			o.quiet = true
		case "max-depth":
			o.maxDepth, ok = num(op.val)
		case "L", "follow":
			o.follow = true
		case "no-follow":
			o.follow = false
		case "sort":
			if op.val != "path" && op.val != "none" {
				return nil, "rg --sort " + op.val + " is not built in"
			}
			o.sorted = op.val == "path"
		case "j", "threads":
			_, ok = num(op.val)
		case "column":
			o.column = true
		case "no-column":
			o.column = false
		case "no-messages":
			o.silent = true
		case "color":
			// routing sends colours to the sandbox
		}
		if !ok && op.val != "" {
			return nil, fmt.Sprintf("rg -%s %s: not a number the fast path takes", op.name, op.val)
		}
	}
	if o.column {
		o.lineNum = true
	}
	if !havePattern && !o.files {
		if len(rest) == 0 {
			return nil, "rg without a pattern (its usage message) is not built in"
		}
		o.patterns, rest = []string{rest[0]}, rest[1:]
	}
	o.paths = rest
	switch {
	case o.onlyMatch && o.invert:
		return nil, "rg -o -v is not built in"
	case len(o.patFiles) > 0 && (o.files || len(o.patterns) > 0):
		return nil, "rg -f with other patterns is not built in"
	}
	if len(o.patFiles) == 0 && !o.files {
		if why := o.compile(); why != "" {
			return nil, why
		}
	}
	return o, ""
}

// compile builds the matcher of the patterns, or says why not.
func (o *rgOpts) compile() string {
	fold := o.fold
	if o.smart {
		fold = true
		for _, p := range o.patterns {
			if hasUpperLiteral(p, o.fixed) {
				fold = false
			}
		}
	}
	if o.fixed && !fold && !o.word && !o.line {
		o.lit = o.patterns
		return ""
	}
	var alts []string
	for _, p := range o.patterns {
		if o.fixed {
			if strings.Contains(p, "\n") {
				return "rg: a newline in a pattern is not built in"
			}
			alts = append(alts, regexp.QuoteMeta(p))
			continue
		}
		t, err := rustRE(p)
		if err != nil {
			return fmt.Sprintf("rg: %v in the pattern is not built in", err)
		}
		alts = append(alts, t)
	}
	expr := "(?:" + strings.Join(alts, ")|(?:") + ")"
	if len(alts) == 1 {
		expr = alts[0]
	}
	inner := expr // what a match of any form holds
	if fold {
		inner = "(?i)" + inner
		o.foldLits = asciiLits(o.patterns, o.fixed)
	}
	switch {
	case o.line:
		expr = "^(?:" + expr + ")$"
	case o.word:
		expr = "(?:^|[^" + rgWordClass + "])(" + expr + ")(?:$|[^" + rgWordClass + "])"
	}
	if fold {
		expr = "(?i)" + expr
	}
	re, err := compileGo(expr)
	if err != nil {
		return "rg: the pattern does not compile as Go's: " + err.Error()
	}
	o.re = re
	if !o.invert && !strings.Contains(expr, `\A`) && !strings.Contains(expr, `\z`) {
		// a line's match is one of the whole file's in multi-line mode
		// (\A and \z would mean the file's ends there)
		o.pre, _ = compileGo("(?m)" + inner)
	}
	return ""
}

// candidates returns the spans of data (a whole file that noMatch did not
// rule out) where a match may be: every line that holds a match crosses
// one of them, so the lines that cross none need no search. nil: all.
func (o *rgOpts) candidates(data []byte) [][]int {
	switch {
	case o.invert || o.listMissing:
		return nil
	case o.foldLits != nil:
		var out [][]int
		low := o.lowBuf[:len(data)] // lowered by noMatch
		for _, l := range o.foldLits {
			for i := 0; ; {
				j := bytes.Index(low[i:], l)
				if j < 0 {
					break
				}
				out = append(out, []int{i + j, i + j + len(l)})
				i += j + 1
			}
		}
		slices.SortFunc(out, func(a, b []int) int { return a[0] - b[0] })
		return out
	case o.pre != nil && o.lit == nil:
		if l := int64(len(o.pre.String())); l >= matchCheckFrom && l*int64(len(data)) > maxMatchWork {
			return nil
		}
		return o.pre.FindAllIndex(data, -1)
	}
	return nil
}

// asciiLits returns the patterns lower-cased if all are ASCII literals
// without k or s (the letters that a non-ASCII one folds to: U+212A, U+017F),
// so that a file whose ASCII letters lowered holds none of them cannot
// match them under -i; or nil.
func asciiLits(ps []string, fixed bool) [][]byte {
	var out [][]byte
	for _, p := range ps {
		if p == "" || !fixed && regexp.QuoteMeta(p) != p || strings.ContainsAny(p, "kKsS") {
			return nil
		}
		for i := 0; i < len(p); i++ {
			if p[i] >= 0x80 {
				return nil
			}
		}
		out = append(out, []byte(strings.ToLower(p)))
	}
	return out
}

// rgWhole is the size up to which rg reads a file whole, to look for a
// match in it with one search before going through its lines.
const rgWhole = 4 << 20

// noMatch reports whether data, a whole file, cannot hold a match.
func (o *rgOpts) noMatch(data []byte) bool {
	if o.invert || o.listMissing {
		return false
	}
	if o.lit != nil {
		for _, l := range o.lit {
			if bytes.Contains(data, []byte(l)) {
				return false
			}
		}
		return true
	}
	if o.foldLits != nil {
		if cap(o.lowBuf) < len(data) {
			o.lowBuf = make([]byte, len(data))
		}
		low := o.lowBuf[:len(data)]
		for i, b := range data {
			if 'A' <= b && b <= 'Z' {
				b += 'a' - 'A'
			}
			low[i] = b
		}
		for _, l := range o.foldLits {
			if bytes.Contains(low, l) {
				return false
			}
		}
		return true
	}
	if o.pre == nil {
		return false
	}
	if l := int64(len(o.pre.String())); l >= matchCheckFrom && l*int64(len(data)) > maxMatchWork {
		return false // too costly at once (reguard.go): the lines are searched one by one
	}
	return !o.pre.Match(data)
}

func rgCheck(args []string) string {
	_, why := rgParse(args)
	return why
}

func cmdRg(c *cmd) int {
	o, why := rgParse(c.args[1:])
	if why != "" {
		c.errorf("%s (not supported by the shell fast path)", why)
		return 2
	}
	for _, f := range o.patFiles {
		data, err := c.readFile(f)
		if err != nil {
			c.rgError("%s: %s", f, rustErr(err))
			return 2
		}
		s := strings.TrimSuffix(string(data), "\n")
		if s != "" {
			o.patterns = append(o.patterns, strings.Split(s, "\n")...)
		}
	}
	if len(o.patFiles) > 0 {
		if len(o.patterns) == 0 {
			return 1 // no pattern matches nothing
		}
		if why := o.compile(); why != "" {
			c.errorf("%s (not supported by the shell fast path)", why)
			return 2
		}
	}
	paths := o.paths
	implicit := len(paths) == 0
	if implicit {
		if !o.files && rgReadableStdin(c.hc.Stdin) {
			paths = []string{"-"}
		} else {
			paths = []string{"./"}
		}
	}
	if !o.noName && !o.withName && !o.files {
		o.withName = len(paths) > 1
		if len(paths) == 1 && paths[0] != "-" {
			if fi, err := c.stat(paths[0]); err == nil && fi.IsDir() {
				o.withName = true
			}
		}
	}
	w := &rgWalker{c: c, o: o, levels: map[string]*rgLevel{}}
	matched := false
	visit := func(p string, explicit bool) bool {
		if o.files {
			c.out.WriteString(p)
			if o.null {
				c.out.WriteByte(0)
			} else {
				c.out.WriteByte('\n')
			}
			matched = true
			return true
		}
		m := c.rgFile(o, p, explicit)
		matched = matched || m
		return !(m && o.quiet) && !c.canceled()
	}
	for _, p := range paths {
		if p == "-" {
			if !visit("<stdin>", true) {
				break
			}
			continue
		}
		fi, err := c.stat(p)
		if err != nil {
			o.errs = true
			if o.sorted {
				c.rgError("%s: IO error for operation on %s: %s", p, p, rustErr(err))
			} else {
				c.rgError("%s: %s", p, rustErr(err))
			}
			continue
		}
		if !fi.IsDir() {
			if !visit(p, true) {
				break
			}
			continue
		}
		disp := p
		if implicit {
			disp = ""
		}
		up := []uint64{fi.ino}
		if !w.walk(disp, c.abs(p), 0, up, func(fp string) bool { return visit(fp, false) }) {
			break
		}
	}
	switch {
	case o.quiet && matched:
		return 0
	case o.errs:
		return 2
	case matched:
		return 0
	}
	return 1
}

// rgReadableStdin reports whether rg, given no path, reads its standard
// input: ripgrep does when it is a file or a pipe, and searches the
// working directory when it is a terminal or /dev/null. The fast path's
// stdin is empty (a call without input) or a pipe, a file or a string.
func rgReadableStdin(r io.Reader) bool {
	if s, ok := r.(stoppableReader); ok {
		r = s.Reader
	}
	switch f := r.(type) {
	case nil:
		return false
	case *os.File:
		fi, err := f.Stat()
		return err == nil && (fi.Mode().IsRegular() || fi.Mode()&(fs.ModeNamedPipe|fs.ModeSocket) != 0)
	}
	return true
}

// nullStdin returns the host's /dev/null if r is it (the stdin of a call
// without input, as a command's stdin sees it), or nil.
func nullStdin(r io.Reader) *os.File {
	if s, ok := r.(stoppableReader); ok {
		r = s.Reader
	}
	f, ok := r.(*os.File)
	if !ok || f.Name() != os.DevNull {
		return nil
	}
	return f
}

// rgError reports an error as ripgrep does (no "rg:" before it).
func (c *cmd) rgError(format string, a ...any) {
	c.out.Flush()
	fmt.Fprintf(c.stderr, format+"\n", a...)
}

// rustErr is an error as Rust's std::io::Error prints it.
func rustErr(err error) string {
	e := errno(err)
	if e == 0 {
		return err.Error()
	}
	return fmt.Sprintf("%s (os error %d)", errText(err), int(e))
}

// rgFile searches one file (p is its display path; "<stdin>" is the
// standard input) and prints what it finds.
func (c *cmd) rgFile(o *rgOpts, p string, explicit bool) bool {
	var r io.Reader
	var cands [][]int
	bufSize := 64 << 10
	if p == "<stdin>" {
		r = c.stdin
	} else {
		f, err := c.open(p)
		if err != nil {
			o.errs = true
			if !o.silent {
				c.rgError("%s: %s", p, rustErr(err))
			}
			return false
		}
		defer f.Close()
		r = f
		if fi, err := c.stat(p); err == nil && fi.mode.IsRegular() && fi.size <= rgWhole {
			data, err := c.readSized(f, fi.size)
			if err != nil {
				o.errs = true
				if !o.silent {
					c.rgError("%s: %s", p, rustErr(err))
				}
				return false
			}
			defer c.release()
			nul := bytes.IndexByte(data[:min(len(data), 64<<10)], 0)
			if nul >= 0 && !explicit || o.noMatch(data) {
				return false
			}
			cands = o.candidates(data)
			r = bytes.NewReader(data)
			bufSize = max(len(data)+1, 16)
		}
	}
	br := bufio.NewReaderSize(r, min(bufSize, 64<<10))
	head, _ := br.Peek(min(bufSize, 64<<10))
	nul := bytes.IndexByte(head, 0)
	if nul >= 0 && !explicit {
		return false // ripgrep skips a binary file it finds in a walk
	}
	s := rgSearch{c: c, o: o, name: p, binaryAt: nul, cands: cands}
	m, err := s.run(br)
	if err != nil && err != io.EOF {
		if err == errPatternLimit || c.canceled() {
			return m
		}
		o.errs = true
		if !o.silent {
			c.rgError("%s: %s", p, rustErr(err))
		}
	}
	return m
}

type rgSearch struct {
	c        *cmd
	o        *rgOpts
	name     string
	binaryAt int // offset of a NUL in the first block, or -1
	cands    [][]int
}

// prefix is what a printed line starts with.
func (s *rgSearch) prefix(b *strings.Builder, no, col int, sep byte) {
	o := s.o
	if o.withName && !o.heading {
		b.WriteString(s.name)
		if o.null {
			b.WriteByte(0)
		} else {
			b.WriteByte(sep)
		}
	}
	if o.lineNum {
		b.WriteString(strconv.Itoa(no))
		b.WriteByte(sep)
	}
	if o.column && col > 0 {
		b.WriteString(strconv.Itoa(col))
		b.WriteByte(sep)
	}
}

// find returns the first match in line at or after from: its start and
// end, or -1.
func (s *rgSearch) find(line string, from int) (int, int) {
	return s.findPos(line, from, true)
}

// findPos is find; without pos, a match's place may be given as 0.
func (s *rgSearch) findPos(line string, from int, pos bool) (int, int) {
	o := s.o
	if !pos && o.lit == nil {
		if o.re.MatchString(line[from:]) {
			return 0, 0
		}
		return -1, -1
	}
	if o.lit != nil {
		best, end := -1, -1
		for _, l := range o.lit {
			if i := strings.Index(line[from:], l); i >= 0 && (best < 0 || from+i < best) {
				best, end = from+i, from+i+len(l)
			}
		}
		return best, end
	}
	m := o.re.FindStringSubmatchIndex(line[from:])
	if m == nil {
		return -1, -1
	}
	if o.word {
		return from + m[2], from + m[3]
	}
	return from + m[0], from + m[1]
}

func (s *rgSearch) run(br *bufio.Reader) (bool, error) {
	c, o := s.c, s.o
	count, matches, lineNo := 0, 0, 0
	lastPrinted := 0
	afterLeft := 0
	type held struct {
		no   int
		text string
	}
	var before []held
	printing := !o.count && !o.countMatches && !o.listFiles && !o.listMissing && !o.quiet
	ctx := o.after > 0 || o.before > 0
	pos := o.column || o.onlyMatch || o.countMatches || o.count && o.onlyMatch // a match's place is needed
	off, ci := 0, 0
	headed := false
	var b strings.Builder
	emit := func(no int, text string, col int, sep byte) {
		if !headed && o.heading && o.withName {
			if o.printed {
				c.out.WriteByte('\n')
			}
			c.out.WriteString(s.name + "\n")
			headed = true
		}
		if ctx && o.printed && (lastPrinted == 0 && !headed || lastPrinted > 0 && no > lastPrinted+1) {
			c.out.WriteString("--\n")
		}
		b.Reset()
		s.prefix(&b, no, col, sep)
		b.WriteString(text)
		b.WriteByte('\n')
		c.out.WriteString(b.String())
		lastPrinted = no
		o.printed = true
	}
	for {
		if o.maxCount >= 0 && count >= o.maxCount && afterLeft == 0 {
			break
		}
		line, err := c.readLine(br)
		if line == "" && err != nil {
			if err == io.EOF {
				break
			}
			return count > 0, err
		}
		lineNo++
		text := strings.TrimSuffix(line, "\n")
		if c.matchTooCostly(o.re, len(text)) {
			return count > 0, errPatternLimit
		}
		start, end := -1, -1
		for ci < len(s.cands) && s.cands[ci][1] < off {
			ci++
		}
		if s.cands == nil || ci < len(s.cands) && s.cands[ci][0] <= off+len(text) {
			start, end = s.findPos(text, 0, pos)
		}
		off += len(line)
		hit := (start >= 0) != o.invert
		if o.maxCount >= 0 && count >= o.maxCount {
			hit = false
		}
		if hit {
			count++
			if o.quiet {
				return true, nil
			}
			if o.listFiles || o.listMissing {
				break
			}
			if o.countMatches || o.count && o.onlyMatch {
				for st, en := start, end; st >= 0; st, en = s.find(text, max(en, st+1)) {
					if en > st || !o.onlyMatch {
						matches++
					}
					if en >= len(text) {
						break
					}
				}
			}
			if !printing {
				continue
			}
			if s.binaryAt >= 0 {
				if o.withName {
					c.out.WriteString(s.name + ": ")
				}
				fmt.Fprintf(c.out, "binary file matches (found \"\\0\" byte around offset %d)\n", s.binaryAt)
				return true, nil
			}
			for _, h := range before {
				emit(h.no, h.text, 0, '-')
			}
			before = before[:0]
			switch {
			case o.onlyMatch:
				for st, en := start, end; st >= 0; st, en = s.find(text, max(en, st+1)) {
					if en > st {
						emit(lineNo, text[st:en], st+1, ':')
					}
					if en >= len(text) {
						break
					}
				}
			default:
				emit(lineNo, text, start+1, ':')
			}
			afterLeft = o.after
		} else if printing {
			if afterLeft > 0 {
				emit(lineNo, text, 0, '-')
				afterLeft--
			} else if o.before > 0 {
				before = append(before, held{lineNo, text})
				if len(before) > o.before {
					before = before[1:]
				}
			}
		}
		if err != nil {
			break
		}
	}
	end := byte('\n')
	if o.null {
		end = 0
	}
	switch {
	case o.count || o.countMatches:
		n := count
		if o.countMatches || o.onlyMatch {
			n = matches
		}
		if n > 0 {
			if o.withName {
				c.out.WriteString(s.name)
				if o.null {
					c.out.WriteByte(0)
				} else {
					c.out.WriteByte(':')
				}
			}
			c.out.WriteString(strconv.Itoa(n) + "\n")
		}
	case o.listFiles && count > 0, o.listMissing && count == 0:
		c.out.WriteString(s.name)
		c.out.WriteByte(end)
	}
	if o.listMissing {
		return count == 0, nil
	}
	return count > 0, nil
}

// expandBraces expands one level of {a,b} in a glob, as ripgrep's globs
// take it (go-git's patterns do not); nested braces are not.
func expandBraces(g string) ([]string, bool) {
	i := strings.IndexByte(g, '{')
	if i < 0 {
		return []string{g}, !strings.Contains(g, "}")
	}
	j := strings.IndexByte(g[i:], '}')
	if j < 0 || strings.ContainsAny(g[i+1:i+j], "{") {
		return nil, false
	}
	var out []string
	for _, alt := range strings.Split(g[i+1:i+j], ",") {
		rest, ok := expandBraces(g[i+j+1:])
		if !ok {
			return nil, false
		}
		for _, r := range rest {
			out = append(out, g[:i]+alt+r)
		}
	}
	return out, true
}

// rgGlob turns a glob's [!x] into [^x], which go-git's patterns
// (filepath.Match) take.
func rgGlob(g string) string { return strings.ReplaceAll(g, "[!", "[^") }

// readSized reads a file of about size bytes whole, charged to the call.
func (c *cmd) readSized(f io.Reader, size int64) ([]byte, error) {
	if !c.grow(size + 1) {
		return nil, errMemoryLimit
	}
	buf := make([]byte, 0, size+1)
	for {
		if len(buf) == cap(buf) {
			return c.readAll(io.MultiReader(bytes.NewReader(buf), f)) // it grew meanwhile
		}
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}
