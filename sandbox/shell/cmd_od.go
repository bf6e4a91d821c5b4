package shell

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"syscall"
)

func init() {
	register(&command{names: []string{"od"}, run: cmdOd,
		opts: opts("A:j:N:t:vw:abcdilosx",
			"address-radix=", "skip-bytes=", "read-bytes=", "format=", "output-duplicates", "width?"),
		check: odCheck})
}

// odCheck routes the forms of od the fast path does not have: floating
// point types, the traditional offset operands (od file +10) and
// numbers with suffixes it does not parse.
func odCheck(args []string) string {
	opts, operands, err := parseOptsIn(odWidthAlone(args), true, "A:j:N:t:vw:abcdilosx", builtins["od"].opts.longs...)
	if err != nil {
		return "od: " + err.Error()
	}
	modern := false
	for _, o := range opts {
		switch o.name {
		case "t", "format":
			if _, msg := odTypes(o.val); msg == "" {
				break
			} else if !strings.HasPrefix(msg, "invalid character") {
				return "od -t " + o.val + " is not built in"
			}
			modern = true
		case "j", "skip-bytes", "N", "read-bytes", "w", "width":
			if o.val == "" && (o.name == "width") {
				break
			}
			if _, ok := odNumber(o.val); !ok {
				return "od: the number " + o.val + " is not built in"
			}
			modern = true
		case "A", "address-radix", "v", "output-duplicates":
			modern = true
		}
	}
	for _, f := range operands {
		if strings.HasPrefix(f, "+") || (!modern && len(operands) > 1 && f != "" && isDigit(f[0])) {
			return "od with an offset operand is not built in"
		}
	}
	return ""
}

// odWidthAlone gives -w its value when the word ends with it: GNU od
// takes "-w" alone as -w32, and the next word as an operand.
func odWidthAlone(args []string) []string {
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if len(a) > 1 && a[0] == '-' && a[1] != '-' {
			if j := strings.IndexAny(a, "AjNtw"); j >= 0 && a[j] == 'w' && j == len(a)-1 {
				a += "32"
			}
		}
		out = append(out, a)
	}
	return out
}

// odNumber parses a byte count as od does (strtoumax base 0 and a
// multiplier suffix), for the suffixes the fast path knows.
func odNumber(s string) (int64, bool) {
	mult := int64(1)
	if s != "" {
		switch s[len(s)-1] {
		case 'b':
			mult = 512
		case 'k', 'K':
			mult = 1 << 10
		case 'm', 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		}
		if mult != 1 {
			s = s[:len(s)-1]
		}
	}
	if s == "" || !isDigit(s[0]) {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 0, 64)
	if err != nil || n > (1<<62)/mult {
		return 0, false
	}
	return n * mult, true
}

// odSpec is one output type of od.
type odSpec struct {
	kind  byte // a c d o u x
	size  int  // bytes per field
	width int  // a field's width, its leading space included
	pad   int  // the spaces the line spreads between its fields
	z     bool // the >...< trailer
}

// odTypes parses od's TYPE string; the message is GNU's for a letter od
// does not know, or says what the fast path does not build in.
func odTypes(s string) ([]odSpec, string) {
	var specs []odSpec
	orig := s
	for s != "" {
		k := s[0]
		s = s[1:]
		sp := odSpec{kind: k, size: 1}
		switch k {
		case 'a', 'c':
		case 'd', 'o', 'u', 'x':
			sp.size = 4
			if s != "" {
				switch s[0] {
				case 'C':
					sp.size, s = 1, s[1:]
				case 'S':
					sp.size, s = 2, s[1:]
				case 'I':
					sp.size, s = 4, s[1:]
				case 'L':
					sp.size, s = 8, s[1:]
				case '1', '2', '4', '8':
					if len(s) > 1 && isDigit(s[1]) {
						return nil, "a size of more than one digit"
					}
					sp.size, s = int(s[0]-'0'), s[1:]
				default:
					if isDigit(s[0]) {
						return nil, "a size od has no type for"
					}
				}
			}
		case 'f':
			return nil, "floating point"
		default:
			return nil, fmt.Sprintf("invalid character '%c' in type string ‘%s’", k, orig)
		}
		if s != "" && s[0] == 'z' {
			sp.z, s = true, s[1:]
		}
		sp.width = 1 + odDigits(sp.kind, sp.size)
		specs = append(specs, sp)
	}
	return specs, ""
}

func odDigits(kind byte, size int) int {
	switch kind {
	case 'a', 'c':
		return 3
	case 'o':
		return map[int]int{1: 3, 2: 6, 4: 11, 8: 22}[size]
	case 'u':
		return map[int]int{1: 3, 2: 5, 4: 10, 8: 20}[size]
	case 'd':
		return map[int]int{1: 4, 2: 6, 4: 11, 8: 20}[size]
	}
	return 2 * size // x
}

var odNames = [...]string{"nul", "soh", "stx", "etx", "eot", "enq", "ack", "bel", "bs", "ht", "nl", "vt", "ff",
	"cr", "so", "si", "dle", "dc1", "dc2", "dc3", "dc4", "nak", "syn", "etb", "can", "em", "sub", "esc",
	"fs", "gs", "rs", "us", "sp"}

// odChars are the fields of -t c, and odNamed those of -t a.
var odChars, odNamed [256]string

func init() {
	for i := range odChars {
		c := byte(i)
		switch j := strings.IndexByte("\x00\a\b\f\n\r\t\v", c); {
		case j >= 0:
			odChars[i] = []string{`\0`, `\a`, `\b`, `\f`, `\n`, `\r`, `\t`, `\v`}[j]
		case c >= 0x20 && c < 0x7f:
			odChars[i] = string(rune(c))
		default:
			odChars[i] = fmt.Sprintf("%03o", c)
		}
		switch a := c & 0x7f; {
		case int(a) < len(odNames):
			odNamed[i] = odNames[a]
		case a == 0x7f:
			odNamed[i] = "del"
		default:
			odNamed[i] = string(rune(a))
		}
	}
}

// field appends one field of a block as od prints it, right-aligned in
// w columns; scratch is room to format it in.
func (sp *odSpec) field(out, scratch []byte, w int, b []byte) ([]byte, []byte) {
	var v uint64
	switch sp.size {
	case 1:
		v = uint64(b[0])
	case 2:
		v = uint64(binary.LittleEndian.Uint16(b))
	case 4:
		v = uint64(binary.LittleEndian.Uint32(b))
	case 8:
		v = binary.LittleEndian.Uint64(b)
	}
	f := scratch[:0]
	switch sp.kind {
	case 'a':
		f = append(f, odNamed[b[0]]...)
	case 'c':
		f = append(f, odChars[b[0]]...)
	case 'o', 'x':
		base := 8
		if sp.kind == 'x' {
			base = 16
		}
		digits := strconv.AppendUint(scratch[32:32], v, base)
		for k := len(digits); k < sp.width-1; k++ {
			f = append(f, '0')
		}
		f = append(f, digits...)
	case 'u':
		f = strconv.AppendUint(f, v, 10)
	default:
		shift := 64 - 8*sp.size
		f = strconv.AppendInt(f, int64(v<<shift)>>shift, 10)
	}
	for k := len(f); k < w; k++ {
		out = append(out, ' ')
	}
	return append(out, f...), scratch
}

type odCmd struct {
	c        *cmd
	specs    []odSpec
	radix    byte
	bpb      int // bytes per line
	scratch  []byte
	files    []string
	cur      io.Reader
	closer   io.Closer
	failed   bool
	readErr  error
	inputEnd bool
}

func cmdOd(c *cmd) int {
	c.args = append(c.args[:1:1], odWidthAlone(c.args[1:])...)
	opts, files, ok := c.flags()
	if !ok {
		return 1
	}
	o := &odCmd{c: c, radix: 'o', files: files, scratch: make([]byte, 64)}
	if len(o.files) == 0 {
		o.files = []string{"-"}
	}
	var skip, limit int64 = 0, -1
	width, widthSet, verbose := int64(16), false, false
	add := func(t string) bool {
		specs, msg := odTypes(t)
		if msg != "" {
			c.errorf("%s", msg)
			return false
		}
		o.specs = append(o.specs, specs...)
		return true
	}
	for _, op := range opts {
		switch op.name {
		case "A", "address-radix":
			if len(op.val) != 1 || strings.IndexByte("doxn", op.val[0]) < 0 {
				c.errorf("invalid output address radix '%s'; it must be one character from [doxn]", op.val)
				return 1
			}
			o.radix = op.val[0]
		case "j", "skip-bytes":
			skip, _ = odNumber(op.val)
		case "N", "read-bytes":
			limit, _ = odNumber(op.val)
		case "w", "width":
			width, widthSet = 32, true
			if op.val != "" {
				width, _ = odNumber(op.val)
			}
		case "v", "output-duplicates":
			verbose = true
		case "t", "format":
			if !add(op.val) {
				return 1
			}
		default:
			if !add(map[string]string{"a": "a", "b": "o1", "c": "c", "d": "u2", "i": "dI", "l": "dL", "o": "o2", "s": "d2", "x": "x2"}[op.name]) {
				return 1
			}
		}
	}
	if len(o.specs) == 0 {
		o.specs, _ = odTypes("o2")
	}
	lcm := 1
	for _, sp := range o.specs {
		for lcm%sp.size != 0 {
			lcm *= 2 // the sizes are powers of two
		}
	}
	if widthSet && (width <= 0 || width%int64(lcm) != 0) {
		c.errorf("warning: invalid width %d; using %d instead", width, lcm)
		width = int64(lcm)
	}
	// two blocks: the line and the one before it (for the "*" lines)
	if !c.grow(2 * width) {
		return 1
	}
	o.bpb = int(width)
	perBlock := 0
	for _, sp := range o.specs {
		perBlock = max(perBlock, sp.width*(o.bpb/sp.size))
	}
	// and a line
	if !c.grow(int64(perBlock) + width + 64) {
		return 1
	}
	for i := range o.specs {
		o.specs[i].pad = perBlock - o.specs[i].width*(o.bpb/o.specs[i].size)
	}
	return o.dump(skip, limit, verbose)
}

// next opens the next input; false at the end of them all.
func (o *odCmd) next() bool {
	if o.closer != nil {
		o.closer.Close()
		o.closer = nil
	}
	for len(o.files) > 0 {
		f := o.files[0]
		o.files = o.files[1:]
		if f == "-" {
			o.cur = bufio.NewReaderSize(o.c.stdin, 64<<10)
			return true
		}
		file, err := o.c.open(f)
		if err != nil {
			o.c.fail(f, err)
			o.failed = true
			continue
		}
		o.cur, o.closer = file, file
		if fi, err := o.c.stat(f); err == nil && fi.IsDir() {
			o.readErr = syscall.EISDIR
		}
		o.cur = odFile{bufio.NewReaderSize(file, 64<<10), f, o}
		return true
	}
	o.cur = nil
	return false
}

// odFile is an input that reports a read error as od does.
type odFile struct {
	r    io.Reader
	name string
	o    *odCmd
}

func (f odFile) Read(p []byte) (int, error) {
	if f.o.readErr != nil {
		err := f.o.readErr
		f.o.readErr = nil
		return 0, &odReadError{f.name, err}
	}
	n, err := f.r.Read(p)
	if err != nil && err != io.EOF {
		return n, &odReadError{f.name, err}
	}
	return n, err
}

type odReadError struct {
	name string
	err  error
}

func (e *odReadError) Error() string { return e.name + ": " + errText(e.err) }

// read fills p from the inputs in turn; fewer bytes only at their end.
func (o *odCmd) read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if o.cur == nil && !o.next() {
			return n, nil
		}
		m, err := o.cur.Read(p[n:])
		n += m
		if err == io.EOF {
			o.cur = nil
			continue
		}
		var re *odReadError
		if errors.As(err, &re) {
			o.c.errorf("%s", re.Error())
			o.failed = true
			o.cur = nil
			continue
		}
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func (o *odCmd) address(a int64) string {
	switch o.radix {
	case 'o':
		return fmt.Sprintf("%07o", a)
	case 'd':
		return fmt.Sprintf("%07d", a)
	case 'x':
		return fmt.Sprintf("%06x", a)
	}
	return ""
}

func (o *odCmd) dump(skip, limit int64, verbose bool) int {
	c := o.c
	if !o.next() {
		return 1 // no input opened: od prints nothing
	}
	buf := make([]byte, 64<<10)
	for left := skip; left > 0; {
		n, err := o.read(buf[:min(int64(len(buf)), left)])
		if err != nil {
			return 1
		}
		if n == 0 {
			c.errorf("cannot skip past end of combined input")
			return 1
		}
		left -= int64(n)
	}
	addr := skip
	cur, prev := make([]byte, o.bpb), make([]byte, o.bpb)
	first, star := true, false
	var line []byte
	for limit != 0 {
		want := o.bpb
		if limit > 0 && limit < int64(want) {
			want = int(limit)
		}
		n, err := o.read(cur[:want])
		if err != nil || c.canceled() {
			return 1
		}
		if n == 0 {
			break
		}
		if limit > 0 {
			limit -= int64(n)
		}
		clear(cur[n:])
		if !verbose && !first && n == o.bpb && bytes.Equal(cur, prev) {
			if !star {
				c.out.WriteString("*\n")
				star = true
			}
		} else {
			star = false
			for i := range o.specs {
				line = o.line(line[:0], &o.specs[i], i == 0, addr, cur, n)
				if _, err := c.out.Write(line); err != nil {
					return 1
				}
			}
		}
		first = false
		cur, prev = prev, cur
		addr += int64(n)
		if n < want {
			break
		}
	}
	if o.radix != 'n' {
		c.out.WriteString(o.address(addr) + "\n")
	}
	if o.failed {
		return 1
	}
	return 0
}

// line formats the line of one type for a block of n bytes.
func (o *odCmd) line(b []byte, sp *odSpec, first bool, addr int64, block []byte, n int) []byte {
	if first {
		b = append(b, o.address(addr)...)
	} else if o.radix != 'n' {
		b = append(b, "       "[:len(o.address(0))]...)
	}
	fields := o.bpb / sp.size
	used := (n + sp.size - 1) / sp.size
	blank := fields - used
	rest := sp.pad
	for i := fields; i > blank; i-- {
		next := sp.pad * (i - 1) / fields
		w := rest - next + sp.width
		b, o.scratch = sp.field(b, o.scratch, w, block[(fields-i)*sp.size:])
		rest = next
	}
	if sp.z {
		for k := blank * sp.width; k > 0; k-- {
			b = append(b, ' ')
		}
		b = append(b, "  >"...)
		for _, ch := range block[:n] {
			if ch < 0x20 || ch >= 0x7f {
				ch = '.'
			}
			b = append(b, ch)
		}
		b = append(b, '<')
	}
	return append(b, '\n')
}
