package shell

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"syscall"
)

var cmpOpts = opts("bi:ln:s", "print-bytes", "ignore-initial=", "verbose", "bytes=", "quiet", "silent")

func init() {
	register(&command{names: []string{"cmp"}, run: cmdCmp, opts: cmpOpts, check: cmpCheck})
}

// cmpNumber reads a byte count of cmp (-n, -i, the SKIP operands) as the
// fast path takes it: plain decimal digits. GNU also takes suffixes (2k,
// 1MiB) and hexadecimal or octal; cmpCheck routes those.
func cmpNumber(s string) (int64, bool) {
	if s == "" || len(s) > 18 || strings.Trim(s, "0123456789") != "" || len(s) > 1 && s[0] == '0' {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

func cmpCheck(args []string) string {
	opts, operands, _ := parseOptsIn(args, true, cmpOpts.shorts, cmpOpts.longs...)
	for _, o := range opts {
		vals := []string{o.val}
		switch o.name {
		case "i", "ignore-initial":
			a, b, _ := strings.Cut(o.val, ":")
			vals = []string{a, b}
			if !strings.Contains(o.val, ":") {
				vals = vals[:1]
			}
		case "n", "bytes":
		default:
			continue
		}
		for _, v := range vals {
			if _, ok := cmpNumber(v); !ok {
				return "cmp: the count " + o.val + " is not plain decimal (the fast path reads no suffix or base)"
			}
		}
	}
	if len(operands) > 2 {
		for _, v := range operands[2:min(len(operands), 4)] {
			if _, ok := cmpNumber(v); !ok {
				return "cmp: the skip " + v + " is not plain decimal (the fast path reads no suffix or base)"
			}
		}
	}
	return ""
}

func cmdCmp(c *cmd) int {
	usage := func(format string, a ...any) int {
		c.errorf(format, a...)
		fmt.Fprintf(c.stderr, "cmp: Try 'cmp --help' for more information.\n")
		return 2
	}
	s := builtins["cmp"].opts
	opts, operands, err := parseOpts(c.args[1:], s.shorts, s.longs...)
	if err != nil {
		return usage("%v", err)
	}
	printBytes, verbose, silent := false, false, false
	limit := int64(math.MaxInt64)
	var skip [2]int64
	for _, o := range opts {
		switch o.name {
		case "b", "print-bytes":
			printBytes = true
		case "l", "verbose":
			verbose = true
		case "s", "quiet", "silent":
			silent = true
		case "n", "bytes":
			n, ok := cmpNumber(o.val)
			if !ok {
				return usage("invalid --bytes value '%s'", o.val)
			}
			limit = n
		case "i", "ignore-initial":
			a, b, two := strings.Cut(o.val, ":")
			n1, ok1 := cmpNumber(a)
			n2, ok2 := cmpNumber(b)
			if !ok1 || two && !ok2 {
				return usage("invalid --ignore-initial value '%s'", o.val)
			}
			if !two {
				n2 = n1
			}
			skip = [2]int64{n1, n2}
		}
	}
	if verbose && silent {
		return usage("options -l and -s are incompatible")
	}
	switch {
	case len(operands) == 0:
		return usage("missing operand after 'cmp'")
	case len(operands) > 4:
		return usage("extra operand '%s'", operands[4])
	}
	for i := 2; i < len(operands); i++ {
		n, ok := cmpNumber(operands[i])
		if !ok {
			return usage("invalid --ignore-initial value '%s'", operands[i])
		}
		skip[i-2] = n
	}
	if len(operands) == 1 {
		operands = append(operands, "-")
	}
	names := operands[:2]
	if names[0] == names[1] && skip[0] == skip[1] {
		return 0 // one file, as GNU finds before it reads
	}
	var in [2]*bufio.Reader
	maxOffset := limit // the widest offset -l prints (GNU sizes its column so)
	for i, name := range names {
		if name == "-" {
			in[i] = bufio.NewReaderSize(c.stdin, 64<<10)
			continue
		}
		fi, err := c.stat(name)
		if err == nil && fi.IsDir() {
			err = syscall.EISDIR
		}
		var f vfile
		if err == nil {
			f, err = c.open(name)
		}
		if err != nil {
			if !silent {
				c.fail(name, err)
			}
			return 2
		}
		defer f.Close()
		if fi.Mode().IsRegular() {
			maxOffset = min(maxOffset, max(fi.Size()-skip[i], 0))
		}
		in[i] = bufio.NewReaderSize(f, 64<<10)
	}
	for i := range in {
		if _, err := io.CopyN(io.Discard, in[i], skip[i]); err != nil && err != io.EOF {
			if !silent {
				c.fail(names[i], err)
			}
			return 2
		}
	}
	width := len(strconv.FormatInt(maxOffset, 10))
	status := 0
	line, lastNL := int64(1), false
	for off := int64(0); off < limit; off++ {
		if off&0xffff == 0 && c.canceled() {
			return 2
		}
		// equal runs in what both have buffered go at once (they print
		// nothing, -l or not)
		for {
			n := int(min(int64(min(in[0].Buffered(), in[1].Buffered())), limit-off))
			a, _ := in[0].Peek(n)
			b, _ := in[1].Peek(n)
			k := cmpPrefix(a, b)
			if k == 0 {
				break
			}
			if nl := bytes.Count(a[:k], []byte{'\n'}); nl > 0 {
				line += int64(nl)
			}
			lastNL = a[k-1] == '\n'
			in[0].Discard(k)
			in[1].Discard(k)
			off += int64(k)
			if c.canceled() {
				return 2
			}
		}
		if off >= limit {
			break
		}
		a, errA := in[0].ReadByte()
		b, errB := in[1].ReadByte()
		for i, err := range []error{errA, errB} {
			if err != nil && err != io.EOF {
				c.fail(names[i], err)
				return 2
			}
		}
		if errA != nil || errB != nil {
			if errA != nil && errB != nil {
				return status
			}
			if silent {
				return 1
			}
			short := names[0]
			if errA == nil {
				short = names[1]
			}
			c.out.Flush()
			switch {
			case off == 0:
				fmt.Fprintf(c.stderr, "cmp: EOF on %s which is empty\n", short)
			case verbose:
				fmt.Fprintf(c.stderr, "cmp: EOF on %s after byte %d\n", short, off)
			case lastNL:
				fmt.Fprintf(c.stderr, "cmp: EOF on %s after byte %d, line %d\n", short, off, line-1)
			default:
				fmt.Fprintf(c.stderr, "cmp: EOF on %s after byte %d, in line %d\n", short, off, line)
			}
			return 1
		}
		if a != b {
			switch {
			case silent:
				return 1
			case verbose && printBytes:
				fmt.Fprintf(c.out, "%*d %3o %-4s %3o %s\n", width, off+1, a, cmpChar(a), b, cmpChar(b))
			case verbose:
				fmt.Fprintf(c.out, "%*d %3o %3o\n", width, off+1, a, b)
			case printBytes:
				fmt.Fprintf(c.out, "%s %s differ: byte %d, line %d is %3o %s %3o %s\n", names[0], names[1], off+1, line, a, cmpChar(a), b, cmpChar(b))
				return 1
			default:
				fmt.Fprintf(c.out, "%s %s differ: byte %d, line %d\n", names[0], names[1], off+1, line)
				return 1
			}
			status = 1
		}
		if a == '\n' {
			line++
		}
		lastNL = a == '\n'
	}
	return status
}

// cmpChar shows a byte as cmp -b does (cat -v's notation): ^A, M-a, M-^?.
func cmpChar(b byte) string {
	var s []byte
	if b < 32 || b >= 127 {
		if b >= 128 {
			s = append(s, 'M', '-')
			b -= 128
		}
		if b < 32 {
			s = append(s, '^')
			b += 64
		} else if b == 127 {
			s = append(s, '^')
			b = '?'
		}
	}
	return string(append(s, b))
}

// cmpPrefix is how many leading bytes a and b share.
func cmpPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	k := 0
	for k+512 <= n && bytes.Equal(a[k:k+512], b[k:k+512]) {
		k += 512
	}
	for k < n && a[k] == b[k] {
		k++
	}
	return k
}
