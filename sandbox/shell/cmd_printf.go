package shell

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// printfCmd is bash's printf: the interpreter's own lacks precision,
// floating point, %X, %q, * widths and combined flags. The call handler
// sends printf here, but for printf -v (which sets a variable).
const printfCmd = "\x00printf"

// printfCheck routes printf, the one builtin of the interpreter that
// CanRun checks the arguments of: printf -v is the interpreter's, which
// does not have it.
func printfCheck(args []string) string {
	if len(args) > 0 && args[0] == "-v" {
		return "printf -v is not built in"
	}
	return ""
}

// cmdPrintf formats its arguments as bash's printf does, reusing the
// format while arguments remain.
func cmdPrintf(c *cmd) int {
	args := c.args[1:]
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(c.stderr, c.bashWhere()+": printf: usage: printf [-v var] format [arguments]")
		return 2
	}
	p := &printer{c: c, args: args[1:]}
	format := args[0]
	for {
		used := len(p.args)
		if c.canceled() {
			return 1 // the format is reused for every argument: stop with the call
		}
		if !p.format(format) {
			break
		}
		if len(p.args) == 0 || len(p.args) == used {
			break
		}
	}
	return p.status
}

type printer struct {
	c      *cmd
	args   []string
	status int
	stop   bool // \c in %b: no more output at all
}

func (p *printer) next() (string, bool) {
	if len(p.args) == 0 {
		return "", false
	}
	a := p.args[0]
	p.args = p.args[1:]
	return a, true
}

// number reads an integer argument as bash does: 0x hex, 0 octal, 'c for
// a character's code.
func (p *printer) number(s string) int64 {
	if s == "" {
		return 0
	}
	if s[0] == '\'' || s[0] == '"' {
		if len(s) == 1 {
			return 0
		}
		r, _ := utf8.DecodeRuneInString(s[1:])
		return int64(r)
	}
	t := strings.TrimSpace(s)
	n, err := strconv.ParseInt(t, 0, 64)
	if err != nil {
		if u, err2 := strconv.ParseUint(t, 0, 64); err2 == nil {
			return int64(u)
		}
		fmt.Fprintf(p.c.stderr, "%s: printf: %s: invalid number\n", p.c.bashWhere(), s)
		p.status = 1
		// the leading digits still count
		i := 0
		if i < len(t) && (t[i] == '-' || t[i] == '+') {
			i++
		}
		for i < len(t) && t[i] >= '0' && t[i] <= '9' {
			i++
		}
		n, _ = strconv.ParseInt(t[:i], 10, 64)
	}
	return n
}

func (p *printer) float(s string) float64 {
	if s == "" {
		return 0
	}
	if s[0] == '\'' || s[0] == '"' {
		return float64(p.number(s))
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		if n, err2 := strconv.ParseInt(strings.TrimSpace(s), 0, 64); err2 == nil {
			return float64(n)
		}
		fmt.Fprintf(p.c.stderr, "%s: printf: %s: invalid number\n", p.c.bashWhere(), s)
		p.status = 1
	}
	return f
}

// format prints the format once; false stops printf.
func (p *printer) format(f string) bool {
	out := p.c.out
	for i := 0; i < len(f); i++ {
		if p.stop {
			return false
		}
		ch := f[i]
		if ch == '\\' {
			s, n := escape(f[i:], false)
			out.WriteString(s)
			i += n - 1
			continue
		}
		if ch != '%' {
			out.WriteByte(ch)
			continue
		}
		if i+1 < len(f) && f[i+1] == '%' {
			out.WriteByte('%')
			i++
			continue
		}
		// %[flags][width][.precision]conv
		j := i + 1
		flags := ""
		for j < len(f) && strings.IndexByte("-+ #0'", f[j]) >= 0 {
			if f[j] != '\'' {
				flags += string(f[j])
			}
			j++
		}
		width := ""
		if j < len(f) && f[j] == '*' {
			a, _ := p.next()
			width = strconv.FormatInt(p.number(a), 10)
			j++
		} else {
			for j < len(f) && f[j] >= '0' && f[j] <= '9' {
				width += string(f[j])
				j++
			}
		}
		prec := ""
		if j < len(f) && f[j] == '.' {
			prec = "."
			j++
			if j < len(f) && f[j] == '*' {
				a, _ := p.next()
				prec += strconv.FormatInt(p.number(a), 10)
				j++
			} else {
				for j < len(f) && f[j] >= '0' && f[j] <= '9' {
					prec += string(f[j])
					j++
				}
			}
		}
		for j < len(f) && strings.IndexByte("hlLqjzt", f[j]) >= 0 && f[j] != 'q' {
			j++ // length modifiers mean nothing here
		}
		if j >= len(f) {
			fmt.Fprintf(p.c.stderr, "%s: printf: `%s': missing format character\n", p.c.bashWhere(), f[i:])
			p.status = 1
			return false
		}
		if strings.HasPrefix(width, "-") {
			flags += "-"
			width = width[1:]
		}
		spec := "%" + flags + width + prec
		conv := f[j]
		arg, _ := p.next()
		switch conv {
		case 'd', 'i':
			fmt.Fprintf(out, spec+"d", p.number(arg))
		case 'u':
			fmt.Fprintf(out, spec+"d", uint64(p.number(arg)))
		case 'o', 'x', 'X':
			fmt.Fprintf(out, spec+string(conv), uint64(p.number(arg)))
		case 'f', 'F', 'e', 'E', 'g', 'G':
			if prec == "" {
				spec += ".6"
			}
			v := p.float(arg)
			if conv == 'F' {
				conv = 'f'
			}
			s := fmt.Sprintf(spec+string(conv), v)
			if conv == 'g' || conv == 'G' {
				s = trimG(s, strings.Contains(flags, "#"))
			}
			out.WriteString(s)
		case 'c':
			if arg != "" {
				fmt.Fprintf(out, "%"+flags+width+"s", arg[:1])
			} else {
				fmt.Fprintf(out, "%"+flags+width+"s", "")
			}
		case 's':
			fmt.Fprintf(out, spec+"s", arg)
		case 'b':
			var b strings.Builder
			for k := 0; k < len(arg); k++ {
				if arg[k] != '\\' {
					b.WriteByte(arg[k])
					continue
				}
				if k+1 < len(arg) && arg[k+1] == 'c' {
					p.stop = true
					break
				}
				s, n := escape(arg[k:], true)
				b.WriteString(s)
				k += n - 1
			}
			fmt.Fprintf(out, spec+"s", b.String())
			if p.stop {
				return false
			}
		case 'q':
			fmt.Fprintf(out, "%"+flags+width+"s", shellQuote(arg))
		default:
			fmt.Fprintf(p.c.stderr, "%s: printf: `%c': invalid format character\n", p.c.bashWhere(), conv)
			p.status = 1
			return false
		}
		i = j
	}
	return true
}

// trimG makes Go's %g output what C's gives: Go keeps trailing zeros
// with an explicit precision, C drops them unless '#'.
func trimG(s string, keep bool) string {
	if keep {
		return s
	}
	lead := len(s) - len(strings.TrimLeft(s, " "))
	body := strings.TrimSpace(s)
	mant, exp, hasExp := strings.Cut(body, "e")
	if !hasExp {
		mant, exp, hasExp = strings.Cut(body, "E")
		if hasExp {
			exp = "E" + exp
		}
	} else {
		exp = "e" + exp
	}
	if strings.Contains(mant, ".") {
		mant = strings.TrimRight(strings.TrimRight(mant, "0"), ".")
	}
	t := mant + exp
	if pad := len(s) - len(t) - lead; lead > 0 || pad > 0 {
		return strings.Repeat(" ", len(s)-len(t)) + t
	}
	return t
}

// escape expands the backslash escape at the start of s; b is set for
// %b, where octal is \0NNN. It returns the text and the bytes used.
func escape(s string, b bool) (string, int) {
	if len(s) < 2 {
		return s, len(s)
	}
	switch c := s[1]; c {
	case 'n':
		return "\n", 2
	case 't':
		return "\t", 2
	case 'r':
		return "\r", 2
	case 'a':
		return "\a", 2
	case 'b':
		return "\b", 2
	case 'f':
		return "\f", 2
	case 'v':
		return "\v", 2
	case 'e', 'E':
		return "\x1b", 2
	case '\\':
		return "\\", 2
	case '"', '\'', '?':
		if b && c != '\'' && c != '"' {
			return s[:2], 2
		}
		return string(c), 2
	case 'x':
		n, v := 2, 0
		for n < 4 && n < len(s) && isHex(s[n]) {
			v = v*16 + hexVal(s[n])
			n++
		}
		if n == 2 {
			return s[:2], 2
		}
		return string([]byte{byte(v)}), n
	case 'u', 'U':
		max := 6
		if c == 'U' {
			max = 10
		}
		n, v := 2, 0
		for n < max && n < len(s) && isHex(s[n]) {
			v = v*16 + hexVal(s[n])
			n++
		}
		if n == 2 {
			return s[:2], 2
		}
		return string(rune(v)), n
	default:
		if c >= '0' && c <= '7' {
			start, max := 1, 4
			if b && c == '0' {
				start, max = 2, 5
			}
			n, v := start, 0
			for n < max && n < len(s) && s[n] >= '0' && s[n] <= '7' {
				v = v*8 + int(s[n]-'0')
				n++
			}
			return string([]byte{byte(v)}), n
		}
		return s[:2], 2
	}
}

// shellQuote is printf %q: the word quoted so the shell reads it back.
func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r < 0x20 || r == 0x7f:
			return "$'" + strings.NewReplacer("\\", "\\\\", "'", "\\'", "\n", "\\n", "\t", "\\t", "\r", "\\r").Replace(s) + "'"
		case strings.ContainsRune(" \t!\"#$&'()*,;<=>?[\\]^`{|}~", r):
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
