package shell

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
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
	if c.getenv("RIPGREP_CONFIG_PATH") != "" {
		c.errorf("a configuration file (RIPGREP_CONFIG_PATH) is not supported by the shell fast path")
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
