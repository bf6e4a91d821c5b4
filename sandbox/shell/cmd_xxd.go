package shell

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
)

func init() {
	register(&command{names: []string{"xxd"}, run: cmdXxd, opts: opts("c:g:l:s:ipru"), ownArgs: true, check: xxdCheck})
}

// xxdArgs is a command line of xxd as vim's xxd reads it: each option
// is a word of its own, known by its first letter ("-ps", "-plain" and
// "-p" are one option; "-pu" is -p), its value in the same word or the
// next ("-c8", "-c 8", "-cols 8").
type xxdArgs struct {
	cols, group, length, seek int64
	colsSet, groupSet         bool
	seekSet, relSeek, negSeek bool
	mode                      byte // 0 (the hex dump), 'p' or 'i'
	revert, upper             bool
	files                     []string
	why                       string // what the fast path does not build in, or ""
}

func parseXxd(args []string) *xxdArgs {
	x := &xxdArgs{length: -1}
	i := 0
	value := func(w, long string) (string, bool) {
		if len(w) > 2 && !strings.HasPrefix(w[2:], long) {
			return w[2:], true
		}
		if i+1 >= len(args) {
			return "", false
		}
		i++
		return args[i], true
	}
	for ; i < len(args); i++ {
		w := args[i]
		if strings.HasPrefix(w, "--") && len(w) > 2 {
			w = w[1:]
		}
		if w == "--" {
			i++
			break
		}
		if len(w) < 2 || w[0] != '-' {
			break
		}
		switch w[1] {
		case 'u':
			x.upper = true
		case 'p':
			x.mode = 'p'
		case 'i':
			x.mode = 'i'
		case 'r':
			x.revert = true
		case 'c', 'g', 'l', 's':
			long := map[byte]string{'c': "ols", 'g': "roup", 'l': "en", 's': "eek"}[w[1]]
			if w[1] == 'c' && strings.HasPrefix(w[2:], "apitalize") || w[1] == 's' && strings.HasPrefix(w[2:], "kip") {
				x.why = "xxd " + w + " is not built in"
				return x
			}
			v, ok := value(w, long)
			if !ok {
				x.why = "xxd " + w + " with no value is not built in (xxd prints its usage)"
				return x
			}
			switch w[1] {
			case 'c':
				x.cols, x.colsSet = cStrtol(v), true
			case 'g':
				x.group, x.groupSet = cStrtol(v), true
			case 'l':
				x.length = cStrtol(v)
			case 's':
				x.seekSet, x.relSeek, x.negSeek = true, false, false
				if strings.HasPrefix(v, "+") {
					x.relSeek, v = true, v[1:]
				}
				if strings.HasPrefix(v, "-") {
					x.negSeek, v = true, v[1:]
				}
				x.seek = cStrtol(v)
			}
		default:
			x.why = "xxd " + w + " is not built in"
			return x
		}
	}
	x.files = args[i:]
	switch {
	case len(x.files) > 1:
		x.why = "xxd with an output file is not built in"
	case x.revert && x.mode == 'i':
		x.why = "xxd -r -i is not built in"
	case x.revert && x.seekSet:
		x.why = "xxd -r -s is not built in"
	case x.seekSet && (len(x.files) == 0 || x.files[0] == "-"):
		x.why = "xxd -s on standard input is not built in"
	}
	return x
}

// cStrtol is C's strtol(s, NULL, 0): leading blanks, a sign, a base
// prefix, digits up to the first that is not one; 0 for none; clamped.
func cStrtol(s string) int64 {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg, s = s[0] == '-', s[1:]
	}
	base := int64(10)
	switch {
	case len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && isHex(s[2]):
		base, s = 16, s[2:]
	case len(s) > 0 && s[0] == '0':
		base = 8
	}
	var n int64
	for i := 0; i < len(s); i++ {
		d := int64(-1)
		switch {
		case isDigit(s[i]):
			d = int64(s[i] - '0')
		case isHex(s[i]):
			d = int64(hexVal(s[i]))
		}
		if d < 0 || d >= base {
			break
		}
		if n > (1<<63-1-d)/base {
			n = 1<<63 - 1
			continue
		}
		n = n*base + d
	}
	if neg {
		return -n
	}
	return n
}

func xxdCheck(args []string) string { return parseXxd(args).why }

func cmdXxd(c *cmd) int {
	x := parseXxd(c.args[1:])
	if x.why != "" { // CanRun routes these; a computed word may get here
		c.errorf("%s", x.why)
		return 1
	}
	oneLine := x.mode == 'p' && x.colsSet && x.cols == 0 // -p -c 0: all on one line
	if x.cols == 0 || !x.colsSet {
		x.cols = map[byte]int64{0: 16, 'p': 30, 'i': 12}[x.mode]
	}
	if x.cols < 1 || x.mode == 0 && x.cols > 256 {
		fmt.Fprintln(c.stderr, "xxd: invalid number of columns (max. 256).")
		return 1
	}
	if !x.groupSet || x.group < 0 {
		x.group = 2
	}
	if x.group == 0 || x.group > x.cols {
		x.group = x.cols
	}
	in := c.stdin
	name := ""
	if len(x.files) == 1 && x.files[0] != "-" {
		name = x.files[0]
		f, err := c.open(name)
		in = f
		if err == nil {
			var fi *fileInfo
			if fi, err = c.stat(name); err == nil && fi.IsDir() {
				// xxd opens it and fails at its first read
				f.Close()
				f, err = nil, nil
				in = errReader{syscall.EISDIR}
			}
		}
		if err != nil {
			fmt.Fprintf(c.stderr, "xxd: %s: %s\n", name, errText(err))
			return 2
		}
	}
	if f, ok := in.(vfile); ok && in != c.stdin {
		defer f.Close()
		if x.seekSet {
			off := x.seek
			if x.negSeek {
				size, err := f.Seek(0, io.SeekEnd)
				if err != nil {
					fmt.Fprintln(c.stderr, "xxd: Sorry, cannot seek.")
					return 4
				}
				if off = size - x.seek; off < 0 {
					fmt.Fprintln(c.stderr, "xxd: Sorry, cannot seek.")
					return 4
				}
			}
			if _, err := f.Seek(off, io.SeekStart); err != nil {
				fmt.Fprintln(c.stderr, "xxd: Sorry, cannot seek.")
				return 4
			}
			x.seek = off
		}
	}
	if x.length >= 0 {
		in = io.LimitReader(in, x.length)
	}
	br := bufio.NewReaderSize(in, 64<<10)
	hex := "0123456789abcdef"
	if x.upper {
		hex = "0123456789ABCDEF"
	}
	var err error
	switch {
	case x.revert && x.mode == 'p':
		err = xxdRevertPlain(c, br)
	case x.revert:
		cols := x.cols
		if !x.colsSet || cols == 0 {
			cols = 16
		}
		if err = xxdRevert(c, br, int(cols)); err == errSeekBack {
			c.out.Flush()
			fmt.Fprintln(c.stderr, "xxd: Sorry, cannot seek backwards.")
			return 5
		}
	case x.mode == 'p':
		err = xxdPlain(c, br, hex, x.cols, oneLine)
	case x.mode == 'i':
		err = xxdInclude(c, br, x, name)
	default:
		err = xxdDump(c, br, hex, x)
	}
	if err != nil {
		if err == errOutputLimit || errno(err) == syscall.EPIPE || c.canceled() {
			return 1
		}
		fmt.Fprintf(c.stderr, "xxd: %s\n", errText(err))
		return 2
	}
	return 0
}

// xxdDump is the default hex dump: the address, the bytes in groups,
// the text.
func xxdDump(c *cmd, br *bufio.Reader, hex string, x *xxdArgs) error {
	cols, group := int(x.cols), int(x.group)
	glen := 2*group + 1
	textAt := 3 + (glen*cols-1)/group // after the address
	line := make([]byte, 0, 32+textAt+cols)
	buf := make([]byte, cols)
	addr := x.seek
	for {
		n, err := io.ReadFull(br, buf)
		if n > 0 {
			line = append(line[:0], fmt.Sprintf("%08x:", addr)...)
			al := len(line)
			for k := al; k < al+textAt+cols; k++ {
				line = append(line, ' ')
			}
			for p := 0; p < n; p++ {
				at := al + 1 + (glen*p)/group
				line[at], line[at+1] = hex[buf[p]>>4], hex[buf[p]&15]
				ch := buf[p]
				if ch < 32 || ch > 126 {
					ch = '.'
				}
				line[al+textAt+p] = ch
			}
			line = append(line[:al+textAt+n], '\n')
			if _, werr := c.out.Write(line); werr != nil {
				return werr
			}
			addr += int64(n)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// xxdPlain is -p: the bytes in hex, cols of them a line.
func xxdPlain(c *cmd, br *bufio.Reader, hex string, cols int64, oneLine bool) error {
	var p int64
	for {
		b, err := br.ReadByte()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		c.out.WriteByte(hex[b>>4])
		if err := c.out.WriteByte(hex[b&15]); err != nil {
			return err
		}
		if p++; p == cols && !oneLine {
			c.out.WriteByte('\n')
			p = 0
		}
	}
	if p > 0 || oneLine {
		return c.out.WriteByte('\n')
	}
	return nil
}

// xxdInclude is -i: a C array, named after the file when there is one.
func xxdInclude(c *cmd, br *bufio.Reader, x *xxdArgs, name string) error {
	ident := func() string {
		var b strings.Builder
		if name != "" && isDigit(name[0]) {
			b.WriteString("__")
		}
		for i := 0; i < len(name); i++ {
			ch := name[i]
			if !(isDigit(ch) || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z') {
				ch = '_'
			}
			b.WriteByte(ch)
		}
		return b.String()
	}
	if name != "" {
		fmt.Fprintf(c.out, "unsigned char %s[] = {\n", ident())
	}
	format := "%s0x%02x"
	if x.upper {
		format = "%s0X%02X"
	}
	var p int64
	for {
		b, err := br.ReadByte()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		sep := ", "
		switch {
		case p == 0:
			sep = "  "
		case p%x.cols == 0:
			sep = ",\n  "
		}
		if _, err := fmt.Fprintf(c.out, format, sep, b); err != nil {
			return err
		}
		p++
	}
	if p > 0 {
		c.out.WriteByte('\n')
	}
	if name != "" {
		fmt.Fprintf(c.out, "};\nunsigned int %s_len = %d;\n", ident(), p)
	}
	return nil
}

// xxdRevertPlain is -r -p: hex digits in pairs to bytes; blanks are
// skipped, an odd digit before other text is dropped, and three
// characters that are not digits in a row end the line's reading.
func xxdRevertPlain(c *cmd, br *bufio.Reader) error {
	n1, n2, n3 := -1, 0, 0
	garbage := true
	for {
		ch, err := br.ReadByte()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if ch == '\r' || ch == ' ' || ch == '\n' || ch == '\t' {
			continue
		}
		n3, n2 = n2, n1
		n1 = -1
		if isHex(ch) {
			n1 = hexVal(ch)
		}
		if n1 < 0 && garbage {
			continue
		}
		garbage = false
		switch {
		case n2 >= 0 && n1 >= 0:
			if err := c.out.WriteByte(byte(n2<<4 | n1)); err != nil {
				return err
			}
			n1 = -1
		case n1 < 0 && n2 < 0 && n3 < 0:
			for ch != '\n' {
				if ch, err = br.ReadByte(); err == io.EOF {
					return nil
				} else if err != nil {
					return err
				}
			}
		}
	}
}

// errReader is an input whose reads fail with err.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// errSeekBack: a hex dump went back to an offset already written.
var errSeekBack = errors.New("cannot seek backwards")

// xxdRevert is -r: a hex dump back to bytes. Each line is an address up
// to the first character that is not a hex digit, then pairs of digits
// (blanks between them); three characters in a row that are not digits,
// or cols bytes, end what is read of the line (so the text column is not
// read). A line's address ahead of what was written is reached with
// zeros; one behind it cannot be: stdout is a stream here (xxd seeks back
// in an output file; the fast path stops, as xxd does on a pipe).
func xxdRevert(c *cmd, br *bufio.Reader, cols int) error {
	n1, n2, n3 := -1, 0, 0
	p, ignore := cols, true
	var want, have int64
	skipLine := func() (byte, error) {
		for {
			ch, err := br.ReadByte()
			if err != nil || ch == '\n' {
				return '\n', err
			}
		}
	}
	for {
		ch, err := br.ReadByte()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if ch == '\r' {
			continue
		}
		n3, n2 = n2, n1
		n1 = -1
		if isHex(ch) {
			n1 = hexVal(ch)
		}
		if n1 < 0 && ignore {
			continue
		}
		ignore = false
		if p >= cols { // the address
			if n1 < 0 {
				p = 0
				continue
			}
			want = want<<4 | int64(n1)
			continue
		}
		if want != have {
			if want < have {
				return errSeekBack
			}
			for ; have < want; have++ {
				if err := c.out.WriteByte(0); err != nil {
					return err
				}
				if have%(64<<10) == 0 && c.canceled() {
					return context.Cause(c.ctx)
				}
			}
		}
		end := error(nil)
		switch {
		case n2 >= 0 && n1 >= 0:
			if err := c.out.WriteByte(byte(n2<<4 | n1)); err != nil {
				return err
			}
			have++
			want++
			n1 = -1
			if p++; p >= cols {
				ch, end = skipLine()
			}
		case n1 < 0 && n2 < 0 && n3 < 0:
			ch, end = skipLine()
		}
		if end == io.EOF {
			return nil
		} else if end != nil {
			return end
		}
		if ch == '\n' {
			want, p, ignore = 0, cols, true
		}
	}
}
