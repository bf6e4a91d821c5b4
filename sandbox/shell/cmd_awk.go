package shell

import (
	"fmt"
	"io"
	"strings"

	"github.com/benhoyt/goawk/interp"
	"github.com/benhoyt/goawk/parser"
	"mvdan.cc/sh/v3/expand"
)

func init() {
	register(&command{names: []string{"awk", "gawk", "mawk", "nawk"}, run: cmdAwk, opts: opts("F:v:f:"), ownArgs: true, check: awkCheck})
}

// awkCheck routes the options that cmdAwk's loop does not take.
func awkCheck(args []string) string {
	progFile := false
opts:
	for len(args) > 0 && strings.HasPrefix(args[0], "-") && args[0] != "-" {
		a := args[0]
		args = args[1:]
		switch {
		case a == "--":
			break opts
		case a == "-F" || a == "-v" || a == "-f":
			progFile = progFile || a == "-f"
			if len(args) > 0 {
				args = args[1:]
			}
		case strings.HasPrefix(a, "-F"), strings.HasPrefix(a, "-v"):
		default:
			return "awk " + a + " is not built in"
		}
	}
	// cmdAwk gives the files to the program as one stream: FNR,
	// FILENAME and nextfile over several files it refuses at run time,
	// so such a command goes to the sandbox's awk
	prog := ""
	if !progFile && len(args) > 0 {
		prog, args = args[0], args[1:]
	}
	files := 0
	for _, a := range args {
		if a == "" { // computed at run time, a glob: maybe several
			files += 2
		} else if k, _, ok := strings.Cut(a, "="); !ok || !isIdent(k) || files > 0 {
			files++
		}
	}
	if files > 1 && (progFile || prog == "" || strings.Contains(prog, "FNR") || strings.Contains(prog, "FILENAME") || strings.Contains(prog, "nextfile")) {
		return "awk with FNR, FILENAME or nextfile over several files"
	}
	return ""
}

// cmdAwk runs goawk with no access to the host: no system(), no
// command pipes and no file writes; input files are read here, through
// the namespace, and given to the program as its standard input.
// maxAwkOperators bounds the operators of an awk program: goawk's parser
// recurses on each (1+1+1...), about 10 KiB of Go stack a level, and a
// Go stack that overflows ends the daemon (a 200 KB program did).
const maxAwkOperators = 4096

// maxJqOperators bounds the operator characters of a jq filter (see
// tooManyOperators): a filter agents write has tens.
const maxJqOperators = 2048

func cmdAwk(c *cmd) int {
	args := c.args[1:]
	var vars []string
	fs, progSrc := "", ""
	haveProg := false
	for len(args) > 0 && strings.HasPrefix(args[0], "-") && args[0] != "-" {
		a := args[0]
		args = args[1:]
		switch {
		case a == "--":
			goto operands
		case a == "-F":
			if len(args) == 0 {
				c.errorf("option requires an argument -- F")
				return 2
			}
			fs, args = args[0], args[1:]
		case strings.HasPrefix(a, "-F"):
			fs = a[2:]
		case a == "-v":
			if len(args) == 0 {
				c.errorf("option requires an argument -- v")
				return 2
			}
			vars, args = append(vars, args[0]), args[1:]
		case strings.HasPrefix(a, "-v"):
			vars = append(vars, a[2:])
		case a == "-f":
			if len(args) == 0 {
				c.errorf("option requires an argument -- f")
				return 2
			}
			data, err := c.readFile(args[0])
			if err != nil {
				c.errorf("can't open file %s", args[0])
				return 2
			}
			progSrc += string(data) + "\n"
			haveProg = true
			args = args[1:]
		default:
			c.errorf("not an option: %s", a)
			return 2
		}
	}
operands:
	if !haveProg {
		if len(args) == 0 {
			fmt.Fprintf(c.stderr, "usage: awk [-F fs][-v var=value][prog | -f progfile][file ...]\n")
			return 2
		}
		progSrc, args = args[0], args[1:]
	}
	// FS and RS are regular expressions that goawk compiles as it starts.
	for _, v := range append(append([]string{"FS=" + fs}, vars...), args...) {
		if k, val, ok := strings.Cut(v, "="); ok && (k == "FS" || k == "RS") && len(val) > maxRegex {
			c.errorf("%v: %s of %d bytes, over the fast path's limit of %d", errRegexTooBig, k, len(val), maxRegex)
			return 2
		}
	}
	if len(progSrc) > maxRegex {
		// its regular expressions are compiled at the parse, which
		// cannot be stopped (see maxRegex)
		c.errorf("program of %d bytes: over the fast path's limit of %d", len(progSrc), maxRegex)
		return 2
	}
	if tooNested(progSrc) {
		c.errorf("program nests deeper than the fast path's limit of %d levels", maxNesting)
		return 2
	}
	if tooManyOperators(progSrc, maxAwkOperators) {
		c.errorf("program of more than %d operators: over the fast path's limit", maxAwkOperators)
		return 2
	}
	if _, err := parser.ParseProgram([]byte(progSrc), nil); err != nil {
		c.errorf("%v", err) // positions in the program as written
		return 2
	}
	guarded, err := guardAwk(progSrc)
	if err != nil {
		c.errorf("%v", err)
		return 2
	}
	funcs, done := c.awkFuncs()
	defer done()
	prog, err := parser.ParseProgram([]byte(guarded), &parser.ParserConfig{Funcs: funcs})
	if err != nil {
		c.errorf("%v", err)
		return 2
	}
	var files []string
	for _, a := range args {
		if k, v, ok := strings.Cut(a, "="); ok && isIdent(k) && len(files) == 0 {
			vars = append(vars, k+"="+v)
			continue
		}
		files = append(files, a)
	}
	if len(files) > 1 && (strings.Contains(progSrc, "FNR") || strings.Contains(progSrc, "FILENAME") || strings.Contains(progSrc, "nextfile")) {
		c.errorf("FNR, FILENAME and nextfile over several files are not supported by the shell fast path")
		return 2
	}
	var in io.Reader = c.stdin
	if len(files) > 0 {
		var readers []io.Reader
		for _, f := range files {
			if f == "-" {
				readers = append(readers, c.stdin)
				continue
			}
			r, err := c.open(f)
			if err != nil {
				c.errorf("cannot open \"%s\" (%s)", f, errText(err))
				return 2
			}
			defer r.Close()
			readers = append(readers, r)
		}
		in = io.MultiReader(readers...)
	}
	config := &interp.Config{
		Stdin:        in,
		Output:       c.out,
		Error:        c.stderr,
		NoArgVars:    true,
		NoExec:       true,
		NoFileWrites: true,
		NoFileReads:  true,
		Environ:      exportedPairs(c.env),
		Funcs:        funcs,
	}
	if fs != "" {
		if fs == "t" {
			fs = "\t"
		}
		config.Vars = append(config.Vars, "FS", fs)
	}
	for _, v := range vars {
		k, val, _ := strings.Cut(v, "=")
		val, _ = unescape(val, false)
		config.Vars = append(config.Vars, k, val)
	}
	if len(files) == 1 {
		config.Vars = append(config.Vars, "FILENAME", files[0])
	}
	if err := c.awkVars(config.Vars); err != nil {
		return 2
	}
	awk, err := interp.New(prog)
	if err != nil {
		c.errorf("%v", err)
		return 2
	}
	// goawk checks the context every 1000 instructions: an endless
	// BEGIN{while(1);} ends with the call
	defer c.engine()()
	status, err := awk.ExecuteContext(c.ctx, config)
	if err != nil {
		if c.ctx.Err() == nil {
			c.errorf("%v", err)
		}
		return 2
	}
	return status
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

func exportedPairs(env expand.Environ) []string { return exported(env) }
