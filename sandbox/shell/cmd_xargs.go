package shell

import (
	"bytes"
	"io"
	"strconv"
	"strings"
)

func init() {
	register(&command{names: []string{"xargs"}, run: cmdXargs, opts: opts("0rtn:L:I:i?d:P:s:xp", "null", "no-run-if-empty", "verbose", "max-args=", "delimiter=", "max-procs="),
		ownArgs: true, check: func(args []string) string { _, why := xargsOpts(args); return why }})
}

// xargsOpts returns how many of xargs's arguments are its options (the
// command follows them), as cmdXargs's loop reads them, or why the fast
// path cannot run them.
func xargsOpts(args []string) (int, string) {
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") && args[i] != "-" {
		a := args[i]
		// the value of an option: in the word, after "=", or the next word
		val := func() {
			if len(a) > 2 && !strings.HasPrefix(a, "--") || strings.IndexByte(a, '=') > 0 {
				return
			}
			i++
		}
		switch {
		case a == "--":
			return i + 1, ""
		case a == "-0" || a == "--null", a == "-r" || a == "--no-run-if-empty", a == "-t" || a == "--verbose":
		case strings.HasPrefix(a, "-n") || strings.HasPrefix(a, "--max-args"), strings.HasPrefix(a, "-L"), strings.HasPrefix(a, "-I"):
			val()
		case strings.HasPrefix(a, "-i"):
		case strings.HasPrefix(a, "-d") || strings.HasPrefix(a, "--delimiter"):
			val()
		case strings.HasPrefix(a, "-P") || strings.HasPrefix(a, "--max-procs"), strings.HasPrefix(a, "-s"):
			val()
		case a == "-x" || a == "-p":
		default:
			return 0, "xargs " + a + " is not built in"
		}
		i++
	}
	return min(i, len(args)), ""
}

func cmdXargs(c *cmd) int {
	// options stop at the first operand (the command)
	args := c.args[1:]
	maxArgs, replace, delim, nullSep, noRunEmpty, maxProcs, trace := 0, "", "", false, false, 1, false
	_ = maxProcs
	for len(args) > 0 && strings.HasPrefix(args[0], "-") && args[0] != "-" {
		a := args[0]
		val := func() (string, bool) {
			if len(a) > 2 && !strings.HasPrefix(a, "--") {
				return a[2:], true
			}
			if i := strings.IndexByte(a, '='); i > 0 {
				return a[i+1:], true
			}
			if len(args) < 2 {
				c.errorf("option requires an argument -- '%s'", strings.TrimLeft(a, "-"))
				return "", false
			}
			args = args[1:]
			return args[0], true
		}
		switch {
		case a == "--":
			args = args[1:]
			goto run
		case a == "-0" || a == "--null":
			nullSep = true
		case a == "-r" || a == "--no-run-if-empty":
			noRunEmpty = true
		case a == "-t" || a == "--verbose":
			trace = true
		case strings.HasPrefix(a, "-n") || strings.HasPrefix(a, "--max-args"):
			v, ok := val()
			if !ok {
				return 1
			}
			maxArgs, _ = strconv.Atoi(v)
		case strings.HasPrefix(a, "-L"):
			v, ok := val()
			if !ok {
				return 1
			}
			maxArgs, _ = strconv.Atoi(v)
		case a == "-I" || strings.HasPrefix(a, "-I"):
			v, ok := val()
			if !ok {
				return 1
			}
			replace = v
		case strings.HasPrefix(a, "-i"):
			replace = "{}"
			if len(a) > 2 {
				replace = a[2:]
			}
		case strings.HasPrefix(a, "-d") || strings.HasPrefix(a, "--delimiter"):
			v, ok := val()
			if !ok {
				return 1
			}
			delim, _ = unescape(v, false)
		case strings.HasPrefix(a, "-P") || strings.HasPrefix(a, "--max-procs"):
			if _, ok := val(); !ok {
				return 1
			}
		case strings.HasPrefix(a, "-s"):
			if _, ok := val(); !ok {
				return 1
			}
		case a == "-x" || a == "-p":
		default:
			c.errorf("invalid option -- '%s'", strings.TrimLeft(a, "-"))
			return 1
		}
		args = args[1:]
	}
run:
	if len(args) == 0 {
		args = []string{"echo"}
	}
	data, err := c.readAll(c.stdin)
	if err != nil {
		return 1
	}
	// the input as a string (a copy) and the items are charged before
	// they are made: a string header each (and, split by blanks, a copy
	// of its bytes); 60 MB of "a\0" made 2 GiB that the call's budget
	// never saw
	count, size := 0, int64(len(data))
	switch {
	case nullSep:
		count = bytes.Count(data, []byte{0}) + 1
	case delim != "":
		count = bytes.Count(data, []byte(delim)) + 1
	case replace != "":
		count = bytes.Count(data, []byte{'\n'}) + 1
	default:
		count = xargsMaxItems(data)
		size += 8*int64(count) + int64(len(data))
	}
	if !c.grow(16*int64(count) + size) {
		return 1
	}
	text := string(data)
	data = nil
	items := make([]string, 0, count)
	switch {
	case nullSep:
		for rest, more := text, true; more; {
			var s string
			s, rest, more = strings.Cut(rest, "\x00")
			if s != "" {
				items = append(items, s)
			}
		}
	case delim != "":
		for rest, more := text, true; more; {
			var s string
			s, rest, more = strings.Cut(rest, delim)
			items = append(items, s)
		}
		if n := len(items); n > 0 && items[n-1] == "" {
			items = items[:n-1]
		}
	case replace != "":
		for rest, more := text, true; more; {
			var l string
			l, rest, more = strings.Cut(rest, "\n")
			l = strings.TrimLeft(l, " \t")
			if l != "" {
				items = append(items, l)
			}
		}
	default:
		items = xargsSplit(text, items)
	}
	if len(items) == 0 && (noRunEmpty || replace != "") {
		return 0
	}
	status := 0
	runOne := func(argv []string) bool {
		if trace {
			c.out.Flush()
			io.WriteString(c.stderr, strings.Join(argv, " ")+"\n")
		}
		code := c.run(argv, strings.NewReader(""), c.out)
		if code == 255 {
			status = 124
			return false
		}
		if code == 127 || code == 126 {
			status = code
			return false
		}
		if code != 0 {
			status = 123
		}
		return !c.canceled()
	}
	if replace != "" {
		for _, it := range items {
			argv := make([]string, len(args))
			for i, a := range args {
				argv[i] = strings.ReplaceAll(a, replace, it)
			}
			if !runOne(argv) {
				break
			}
		}
		return status
	}
	if maxArgs <= 0 {
		maxArgs = 5000
	}
	if len(items) == 0 {
		runOne(append([]string(nil), args...))
		return status
	}
	for i := 0; i < len(items); i += maxArgs {
		end := min(i+maxArgs, len(items))
		argv := append(append([]string(nil), args...), items[i:end]...)
		if !runOne(argv) {
			break
		}
	}
	return status
}

// xargsMaxItems is at most how many items xargsSplit makes of data: an
// item starts only where a blank is followed by something else.
func xargsMaxItems(data []byte) int {
	n, blank := 0, true
	for _, ch := range data {
		b := ch == ' ' || ch == '\t' || ch == '\n'
		if blank && !b {
			n++
		}
		blank = b
	}
	return n
}

// xargsSplit splits xargs input: blanks and newlines separate, quotes
// and backslashes escape.
func xargsSplit(s string, out []string) []string {
	var cur strings.Builder
	in := false
	quote := byte(0)
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case quote != 0:
			if ch == quote {
				quote = 0
			} else {
				cur.WriteByte(ch)
			}
		case ch == '\'' || ch == '"':
			quote, in = ch, true
		case ch == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			in = true
		case ch == ' ' || ch == '\t' || ch == '\n':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(ch)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}
