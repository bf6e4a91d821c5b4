package shell

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"syscall"
)

const joinShorts = "a:e:ij:o:t:v:1:2:"

var joinLongs = []string{"ignore-case", "check-order", "nocheck-order", "header"}

func init() {
	register(&command{names: []string{"join"}, run: cmdJoin, opts: opts(joinShorts, joinLongs...), check: joinCheck})
}

// joinCheck routes what the fast path leaves to GNU join: the obsolete
// -j1 FIELD, more than two operands (the obsolete -o list), both inputs
// standard input, and field numbers too large to be ones.
func joinCheck(args []string) string {
	opts, operands, err := parseOptsIn(args, true, joinShorts, joinLongs...)
	if err != nil {
		return "join: " + err.Error()
	}
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-j1" || a == "-j2" {
			return "join " + a + " (obsolete) is not built in"
		}
	}
	for _, o := range opts {
		if strings.Contains("12jav", o.name) && len(o.val) > 9 {
			return "join: a field number of " + o.val + " is not built in"
		}
	}
	switch {
	case len(operands) > 2:
		return "join with more than two operands is not built in"
	case len(operands) == 2 && operands[0] == "-" && operands[1] == "-":
		return "join - - is not built in"
	}
	return ""
}

// joinLine is a line of an input and its fields.
type joinLine struct {
	text   []byte
	fields [][]byte
	held   int64 // charged to the call while it is held
}

// joinOut is one field of -o: file 0 for the join field.
type joinOut struct{ file, field int }

type joinCmd struct {
	c        *cmd
	tab      int // -1: blanks; '\n': the whole line is the field
	field    [2]int
	ignCase  bool
	out      []joinOut
	auto     bool
	autoN    [2]int
	empty    *string
	unpaired [2]bool
	pairs    bool
	check    int // -1 off, 0 default, 1 on
	header   bool

	in       [2]*bufio.Reader
	names    [2]string
	lineNo   [2]int
	prev     [2]*joinLine
	warned   [2]bool
	unpair   bool // seen an unpairable line
	fatal    bool
	readFail error
}

func cmdJoin(c *cmd) int {
	opts, files, ok := c.flags()
	if !ok {
		return 1
	}
	j := &joinCmd{c: c, tab: -1, pairs: true}
	bad := func(format string, v string) int {
		c.errorf(format, v)
		return 1
	}
	num := func(s string) (int, bool) {
		n, err := strconv.Atoi(s)
		return n, err == nil && n >= 1 && !strings.HasPrefix(s, "+")
	}
	for _, o := range opts {
		switch o.name {
		case "a", "v":
			n, ok := num(o.val)
			if !ok || n > 2 {
				return bad("invalid field number: ‘%s’", o.val)
			}
			j.unpaired[n-1] = true
			if o.name == "v" {
				j.pairs = false
			}
		case "e":
			v := o.val
			j.empty = &v
		case "i", "ignore-case":
			j.ignCase = true
		case "j", "1", "2":
			n, ok := num(o.val)
			if !ok {
				return bad("invalid field number: ‘%s’", o.val)
			}
			if o.name != "2" {
				j.field[0] = n - 1
			}
			if o.name != "1" {
				j.field[1] = n - 1
			}
		case "o":
			if o.val == "auto" {
				j.auto = true
				break
			}
			for _, spec := range strings.FieldsFunc(o.val, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
				if spec == "0" {
					j.out = append(j.out, joinOut{0, 0})
					continue
				}
				f, n, dot := strings.Cut(spec, ".")
				if !dot {
					return bad("invalid field specifier: ‘%s’", spec)
				}
				if f != "1" && f != "2" {
					return bad("invalid file number in field spec: ‘%s’", spec)
				}
				k, ok := num(n)
				if !ok {
					return bad("invalid field number: ‘%s’", n)
				}
				j.out = append(j.out, joinOut{int(f[0] - '0'), k - 1})
			}
		case "t":
			switch {
			case o.val == "":
				j.tab = '\n'
			case len(o.val) > 1:
				return bad("multi-character tab ‘%s’", o.val)
			default:
				j.tab = int(o.val[0])
			}
		case "check-order":
			j.check = 1
		case "nocheck-order":
			j.check = -1
		case "header":
			j.header = true
		}
	}
	switch len(files) {
	case 0:
		c.errorf("missing operand")
		fmt.Fprintln(c.stderr, "Try 'join --help' for more information.")
		return 1
	case 1:
		c.errorf("missing operand after ‘%s’", files[0])
		fmt.Fprintln(c.stderr, "Try 'join --help' for more information.")
		return 1
	}
	for i, f := range files[:2] {
		j.names[i] = f
		if f == "-" {
			j.in[i] = bufio.NewReader(c.stdin)
			continue
		}
		file, err := c.open(f)
		if err == nil {
			if fi, serr := c.stat(f); serr == nil && fi.IsDir() {
				file.Close()
				j.in[i] = bufio.NewReader(errReader{syscall.EISDIR})
				continue
			}
		}
		if err != nil {
			c.fail(f, err)
			return 1
		}
		defer file.Close()
		j.in[i] = bufio.NewReader(file)
	}
	j.run()
	if j.readFail != nil {
		if j.readFail != errMemoryLimit && !c.canceled() {
			c.errorf("read error: %s", errText(j.readFail))
		}
		return 1
	}
	if j.fatal {
		return 1
	}
	if j.warned[0] || j.warned[1] {
		c.errorf("input is not in sorted order")
		return 1
	}
	return 0
}

// key is the join field of a line of file w (0 or 1).
func (j *joinCmd) key(l *joinLine, w int) []byte {
	if f := j.field[w]; f < len(l.fields) {
		return l.fields[f]
	}
	return nil
}

func (j *joinCmd) cmp(a []byte, b []byte) int {
	if len(a) == 0 {
		if len(b) == 0 {
			return 0
		}
		return -1
	}
	if len(b) == 0 {
		return 1
	}
	if j.ignCase {
		n := min(len(a), len(b))
		for i := 0; i < n; i++ {
			x, y := upperASCII(a[i]), upperASCII(b[i])
			if x != y {
				return int(x) - int(y)
			}
		}
		return len(a) - len(b)
	}
	return bytes.Compare(a, b)
}

func upperASCII(b byte) byte {
	if b >= 'a' && b <= 'z' {
		return b - 32
	}
	return b
}

// get reads the next line of file w, checking its order as GNU does:
// against the line read before it, once unpairable lines were seen (or
// always with --check-order).
func (j *joinCmd) get(w int) *joinLine {
	if j.fatal || j.readFail != nil || j.c.canceled() {
		return nil
	}
	text, err := j.c.readLine(j.in[w])
	if text == "" {
		if err != io.EOF && err != nil {
			j.readFail = err
		}
		return nil
	}
	// the line, its fields' headers
	held := 2*int64(len(text)) + 64
	if !j.c.grow(held) {
		j.readFail = errMemoryLimit
		return nil
	}
	j.lineNo[w]++
	body := []byte(strings.TrimSuffix(text, "\n"))
	l := &joinLine{text: body, fields: j.split(body), held: held}
	if p := j.prev[w]; p != nil && !j.warned[w] && (j.check == 1 || j.check == 0 && j.unpair) {
		if j.cmp(j.key(p, w), j.key(l, w)) > 0 {
			j.c.errorf("%s:%d: is not sorted: %s", j.names[w], j.lineNo[w], body)
			if j.check == 1 {
				j.fatal = true
				return nil
			}
			j.warned[w] = true
		}
	}
	j.prev[w] = l
	return l
}

func (j *joinCmd) split(b []byte) [][]byte {
	var f [][]byte
	if len(b) == 0 {
		return nil
	}
	switch {
	case j.tab == '\n':
		return [][]byte{b}
	case j.tab >= 0:
		return bytes.Split(b, []byte{byte(j.tab)})
	}
	blank := func(c byte) bool { return c == ' ' || c == '\t' }
	i := 0
	for i < len(b) && blank(b[i]) {
		i++
	}
	if i == len(b) {
		return nil
	}
	for {
		s := i
		for i < len(b) && !blank(b[i]) {
			i++
		}
		f = append(f, b[s:i])
		if i == len(b) {
			return f
		}
		for i < len(b) && blank(b[i]) {
			i++
		}
		if i == len(b) {
			return append(f, b[i:])
		}
	}
}

func (j *joinCmd) sep() byte {
	if j.tab < 0 || j.tab == '\n' {
		return ' '
	}
	return byte(j.tab)
}

func (j *joinCmd) field1(b []byte, l *joinLine, n int) []byte {
	if n < len(l.fields) && len(l.fields[n]) > 0 {
		return append(b, l.fields[n]...)
	}
	if j.empty != nil {
		return append(b, *j.empty...)
	}
	return b
}

// print writes a joined line; a nil line is the blank one of an
// unpairable line.
func (j *joinCmd) print(l1, l2 *joinLine) {
	if j.fatal { // --check-order found a line out of order: GNU exits there
		return
	}
	blank := &joinLine{}
	if l1 == nil {
		l1 = blank
	}
	if l2 == nil {
		l2 = blank
	}
	key, kf := l1, j.field[0]
	if l1 == blank {
		key, kf = l2, j.field[1]
	}
	var b []byte
	if len(j.out) > 0 {
		for i, o := range j.out {
			if i > 0 {
				b = append(b, j.sep())
			}
			switch o.file {
			case 0:
				b = j.field1(b, key, kf)
			case 1:
				b = j.field1(b, l1, o.field)
			default:
				b = j.field1(b, l2, o.field)
			}
		}
	} else {
		b = j.field1(b, key, kf)
		for w, l := range []*joinLine{l1, l2} {
			n := len(l.fields)
			if j.auto {
				n = j.autoN[w]
			}
			for i := 0; i < n; i++ {
				if i != j.field[w] {
					b = append(b, j.sep())
					b = j.field1(b, l, i)
				}
			}
		}
	}
	j.c.out.Write(append(b, '\n'))
}

func (j *joinCmd) run() {
	// seq[w] holds the lines of file w whose keys are equal
	var seq [2][]*joinLine
	for w := range seq {
		if l := j.get(w); l != nil {
			seq[w] = append(seq[w], l)
		}
	}
	if j.auto {
		for w := range seq {
			if len(seq[w]) > 0 {
				j.autoN[w] = len(seq[w][0].fields)
			}
		}
	}
	first := func(w int) *joinLine {
		if len(seq[w]) > 0 {
			return seq[w][0]
		}
		return nil
	}
	// drop gives back what lines held
	drop := func(ls []*joinLine) {
		for _, l := range ls {
			j.c.grow(-l.held)
			l.held = 0
		}
	}
	// advance drops the lines of file w and reads the next
	advance := func(w int) {
		drop(seq[w])
		seq[w] = seq[w][:0]
		if l := j.get(w); l != nil {
			seq[w] = append(seq[w], l)
		}
	}
	if j.header && (len(seq[0]) > 0 || len(seq[1]) > 0) {
		j.print(first(0), first(1))
		j.prev = [2]*joinLine{}
		for w := range seq {
			if len(seq[w]) > 0 {
				advance(w)
			}
		}
	}
	for len(seq[0]) > 0 && len(seq[1]) > 0 {
		d := j.cmp(j.key(seq[0][0], 0), j.key(seq[1][0], 1))
		if d < 0 {
			if j.unpaired[0] {
				j.print(seq[0][0], nil)
			}
			advance(0)
			j.unpair = true
			continue
		}
		if d > 0 {
			if j.unpaired[1] {
				j.print(nil, seq[1][0])
			}
			advance(1)
			j.unpair = true
			continue
		}
		// the lines of each file that match the other's first
		var eof [2]bool
		for w := range seq {
			for {
				l := j.get(w)
				if l == nil {
					eof[w] = true
					break
				}
				seq[w] = append(seq[w], l)
				other := seq[1-w][0]
				var d int
				if w == 0 {
					d = j.cmp(j.key(l, 0), j.key(other, 1))
				} else {
					d = j.cmp(j.key(other, 0), j.key(l, 1))
				}
				if d != 0 {
					break
				}
			}
		}
		if j.pairs {
			n0, n1 := len(seq[0]), len(seq[1])
			if !eof[0] {
				n0--
			}
			if !eof[1] {
				n1--
			}
			for _, a := range seq[0][:n0] {
				for _, b := range seq[1][:n1] {
					if j.c.canceled() {
						return
					}
					j.print(a, b)
				}
			}
		}
		for w := range seq {
			if eof[w] {
				drop(seq[w])
				seq[w] = seq[w][:0]
			} else {
				last := seq[w][len(seq[w])-1]
				drop(seq[w][:len(seq[w])-1])
				seq[w] = append(seq[w][:0], last)
			}
		}
	}
	// the tails: printed when asked for, read for their order
	for w := range seq {
		if len(seq[w]) == 0 || !(j.unpaired[w] || j.check != -1) {
			continue
		}
		print := func(l *joinLine) {
			if !j.unpaired[w] {
				return
			}
			if w == 0 {
				j.print(l, nil)
			} else {
				j.print(nil, l)
			}
		}
		print(seq[w][0])
		j.unpair = true
		for {
			if j.warned[w] && !j.unpaired[w] {
				break
			}
			l := j.get(w)
			if l == nil {
				break
			}
			print(l)
			drop([]*joinLine{l})
		}
	}
}
