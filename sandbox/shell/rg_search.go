package shell

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The search of one file by rg: a file of up to rgWhole bytes is read
// whole and searched once (noMatch) before its lines are, and then only
// the lines that a match may cross (candidates) meet the expression.

// rgWhole is the size up to which rg reads a file whole, to look for a
// match in it with one search before going through its lines.
const rgWhole = 4 << 20

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
