package shell

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"regexp/syntax"
	"strings"
	"unicode/utf8"
)

// How grep skips lines that cannot match. Matching a regular expression
// line by line costs a call of Go's regexp per line (and under -i a rune
// at a time with case folding), where GNU grep searches its buffer for a
// string every match must contain and looks at the lines around a hit
// only. grep here does the same: from the expression (or the -F strings)
// it takes such required strings (grepLits), the scanner looks for the
// first of them in its buffer with bytes.Index, and every whole line
// before the line it is in is skipped without a match (counted, for -n
// and -b, and looked at for a NUL, which makes a file binary). The line
// with the hit is matched as before, so what is printed does not change.

// grepLit is a string every match contains, byte for byte or, if fold,
// in ASCII letters of any case.
type grepLit struct {
	s    []byte // lower case if fold
	fold bool
}

// Letters that a non-ASCII character folds to in Go's regexp (U+017F
// to s, U+212A to k) or lowers to (U+0130 to i, U+212A to k), so that a
// match of them may not be an ASCII letter in the text: a required
// string under case folding leaves them out (TestGrepFoldUnsafe).
const foldUnsafe = "iIkKsS"

// maxGrepLits is the most required strings searched for: each is one
// search of the buffer.
const maxGrepLits = 4

// grepLits are strings of which every match of re contains one, or nil.
func grepLits(expr string) []grepLit {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil
	}
	lits := required(re.Simplify())
	if len(lits) > maxGrepLits {
		return nil
	}
	return lits
}

// required are strings one of which every match of re contains, or nil.
func required(re *syntax.Regexp) []grepLit {
	switch re.Op {
	case syntax.OpLiteral:
		if l, ok := safeRun(re.Rune, re.Flags&syntax.FoldCase != 0); ok {
			return []grepLit{l}
		}
	case syntax.OpCapture:
		return required(re.Sub[0])
	case syntax.OpPlus:
		return required(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return required(re.Sub[0])
		}
	case syntax.OpConcat:
		var best []grepLit
		for _, sub := range re.Sub {
			if l := required(sub); l != nil && (best == nil || litScore(l) > litScore(best)) {
				best = l
			}
		}
		return best
	case syntax.OpAlternate:
		var all []grepLit
		for _, sub := range re.Sub {
			l := required(sub)
			if l == nil {
				return nil
			}
			all = append(all, l...)
		}
		return all
	}
	return nil
}

// litScore ranks alternative sets of required strings: the longer the
// shortest, and then the fewer, the fewer false hits and searches.
func litScore(l []grepLit) int {
	short := len(l[0].s)
	for _, x := range l {
		short = min(short, len(x.s))
	}
	return short*16 - len(l)
}

// safeRun is the longest run of runes of lit that a match must hold as
// the same bytes: not U+FFFD (which matches any invalid byte), and under
// fold only ASCII outside foldUnsafe.
func safeRun(lit []rune, fold bool) (grepLit, bool) {
	var best, cur []byte
	for _, r := range lit {
		if r == utf8.RuneError || fold && (r >= utf8.RuneSelf || strings.ContainsRune(foldUnsafe, r)) {
			cur = nil
			continue
		}
		if fold {
			r = toLowerASCII(r)
		}
		cur = utf8.AppendRune(cur, r)
		if len(cur) > len(best) {
			best = cur
		}
	}
	return grepLit{s: bytes.Clone(best), fold: fold}, len(best) > 0
}

// lowerTab maps a byte to its ASCII lower case.
var lowerTab = func() (t [256]byte) {
	for i := range t {
		t[i] = toLowerASCII(byte(i))
	}
	return t
}()

// lowerASCII writes src in ASCII lower case to dst, as long.
func lowerASCII(dst, src []byte) {
	dst = dst[:len(src)]
	for i, c := range src {
		dst[i] = lowerTab[c]
	}
}

func toLowerASCII[T rune | byte](c T) T {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// fixedLits are the required strings of grep -F's patterns (lowered if
// fold), or nil if one of them has none (an empty pattern matches every
// line).
func fixedLits(pats []string, fold bool) []grepLit {
	if len(pats) > maxGrepLits {
		return nil
	}
	var out []grepLit
	for _, p := range pats {
		l, ok := safeRun([]rune(p), fold)
		if !ok {
			return nil
		}
		out = append(out, l)
	}
	return out
}

// lineScanner reads lines from r through a buffer that it can also search
// for required strings, skipping the lines that hold none. One scanner
// serves every file of a grep (reset).
type lineScanner struct {
	r      io.Reader
	buf    []byte
	low    []byte // buf in ASCII lower case, when a required string folds
	lower  bool
	rd, wr int   // unread bytes: buf[rd:wr]
	err    error // of the last read
	lits   []grepLit
	// Where lits[i] was found last, at[i] (-1: not in buf[from[i]:wr]),
	// and where its next search starts: every search of the buffer
	// starts where the last one ended, however many hits there are.
	at, from []int
}

const scanBuf = 64 << 10

func (s *lineScanner) reset(r io.Reader, lits []grepLit) {
	if s.buf == nil {
		s.buf = make([]byte, scanBuf)
	}
	s.r, s.rd, s.wr, s.err, s.lower, s.lits = r, 0, 0, nil, false, lits
	s.at, s.from = s.at[:0], s.from[:0]
	for _, l := range lits {
		s.lower = s.lower || l.fold
		s.at, s.from = append(s.at, -1), append(s.from, 0)
	}
	if s.lower && s.low == nil {
		s.low = make([]byte, scanBuf)
	}
}

// fill moves the unread bytes to the front and reads once more; false if
// there was no room or the reader had ended.
func (s *lineScanner) fill() bool {
	if s.err != nil {
		return false
	}
	if s.rd > 0 {
		copy(s.buf, s.buf[s.rd:s.wr])
		if s.lower {
			copy(s.low, s.low[s.rd:s.wr])
		}
		for i := range s.at {
			if s.at[i] >= 0 {
				s.at[i] -= s.rd
			}
			s.from[i] = max(s.from[i]-s.rd, 0)
		}
		s.wr -= s.rd
		s.rd = 0
	}
	if s.wr == len(s.buf) {
		return false
	}
	n, err := s.r.Read(s.buf[s.wr:])
	if s.lower {
		lowerASCII(s.low[s.wr:s.wr+n], s.buf[s.wr:s.wr+n])
	}
	s.wr += n
	if err != nil {
		s.err = err
	} else if n == 0 {
		s.err = io.ErrNoProgress
	}
	return true
}

// skip passes over the whole lines before the first that holds one of
// the scanner's strings, and returns how many lines and bytes it passed
// and whether they held a NUL. It stops early (at a line start) at a
// line longer than the buffer, which readLine then reads, or if ctx is
// done.
func (s *lineScanner) skip(ctx context.Context) (lines int, n int64, nul bool) {
	pass := func(k int) { // the k bytes at rd are whole lines without a hit
		b := s.buf[s.rd : s.rd+k]
		lines += bytes.Count(b, []byte{'\n'})
		n += int64(k)
		nul = nul || bytes.IndexByte(b, 0) >= 0
		s.rd += k
	}
	for {
		hit := -1
		for i, l := range s.lits {
			if s.at[i] < s.rd { // not searched since the last hit
				hay := s.buf
				if l.fold {
					hay = s.low
				}
				from := max(s.rd, s.from[i])
				if j := bytes.Index(hay[from:s.wr], l.s); j >= 0 {
					s.at[i], s.from[i] = from+j, from+j+1
				} else {
					s.at[i], s.from[i] = -1, max(from, s.wr-len(l.s)+1)
				}
			}
			if s.at[i] >= 0 && (hit < 0 || s.at[i] < hit) {
				hit = s.at[i]
			}
		}
		if hit >= 0 {
			pass(bytes.LastIndexByte(s.buf[s.rd:hit], '\n') + 1)
			return
		}
		if end := bytes.LastIndexByte(s.buf[s.rd:s.wr], '\n'); end >= 0 {
			pass(end + 1)
		} else if s.err != nil && s.rd < s.wr {
			pass(s.wr - s.rd) // the last line, without its newline
			lines++
		}
		if ctx.Err() != nil || !s.fill() {
			return
		}
	}
}

// readLine reads a line with its newline, as cmd.readLine does, charging
// a line longer than the buffer.
func (s *lineScanner) readLine(c *cmd) (string, error) {
	for {
		if i := bytes.IndexByte(s.buf[s.rd:s.wr], '\n'); i >= 0 {
			line := string(s.buf[s.rd : s.rd+i+1])
			s.rd += i + 1
			return line, nil
		}
		if !s.fill() {
			break
		}
	}
	if s.wr < len(s.buf) || s.err != nil { // the end of the input
		line := string(s.buf[s.rd:s.wr])
		s.rd = s.wr
		return line, s.err
	}
	// A line longer than the buffer: cmd.readLine reads it, charging it
	// as it grows, and what it read past it comes back to the buffer.
	br := bufio.NewReaderSize(io.MultiReader(bytes.NewReader(bytes.Clone(s.buf)), s.r), scanBuf)
	line, err := c.readLine(br)
	rest, _ := br.Peek(br.Buffered())
	s.rd, s.wr = 0, copy(s.buf, rest)
	if s.lower {
		lowerASCII(s.low[:s.wr], s.buf[:s.wr])
	}
	for i := range s.at {
		s.at[i], s.from[i] = -1, 0
	}
	if err != nil {
		if s.wr > 0 && err == io.EOF {
			s.err = err // after the rest
			err = nil
		} else {
			s.err = err
		}
	}
	return line, err
}
