package shell

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

func init() {
	d := &command{names: []string{"head"}, run: cmdHead, opts: opts("n:c:qvz", "lines=", "bytes=", "quiet", "silent", "verbose"), ownArgs: true, ignored: []string{"z"}}
	d.check = func(args []string) string { _, why := d.opts.parse("head", numArg(args), d.ignored); return why }
	register(d)
	t := &command{names: []string{"tail"}, run: cmdTail, opts: opts("n:c:qvfF", "lines=", "bytes=", "quiet", "silent", "verbose", "follow?"), ownArgs: true}
	t.check = func(args []string) string { _, why := t.opts.parse("tail", tailArgs(args), t.ignored); return why }
	register(t)
}

// numArg turns "-5" into "-n 5" for head and tail.
func numArg(args []string) []string {
	out := append([]string(nil), args...)
	for i := 0; i < len(out); i++ {
		a := out[i]
		if a == "--" {
			break
		}
		if a == "-n" || a == "-c" || a == "--lines" || a == "--bytes" {
			i++
			continue
		}
		if len(a) > 1 && a[0] == '-' && a[1] >= '0' && a[1] <= '9' {
			out[i] = "-n" + a[1:]
		}
	}
	return out
}

// parseSize reads a count with GNU suffixes (K, M, G, KB, kB, b...).
func parseSize(s string) (int64, bool) {
	mult := int64(1)
	suffixes := []struct {
		s string
		m int64
	}{{"KiB", 1024}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"kB", 1000}, {"KB", 1000}, {"MB", 1000000}, {"GB", 1000000000},
		{"b", 512}, {"K", 1024}, {"k", 1024}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}}
	for _, suf := range suffixes {
		if strings.HasSuffix(s, suf.s) && len(s) > len(suf.s) {
			s, mult = s[:len(s)-len(suf.s)], suf.m
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false
	}
	return n * mult, true
}

// countsBytes says whether head's or tail's count option counts bytes
// (-c, --bytes) rather than lines.
func countsBytes(opt string) bool { return opt[0] == 'c' || opt == "bytes" }

// badCount is head's and tail's error for a count that does not parse.
func (c *cmd) badCount(o opt) int {
	what := "lines"
	if countsBytes(o.name) {
		what = "bytes"
	}
	c.errorf("invalid number of %s: '%s'", what, o.val)
	return 1
}

// fileHeader is the "==> name <==" line head and tail write before each
// of several inputs, after a blank line but for the first.
func (c *cmd) fileHeader(name string, first bool) {
	if !first {
		c.out.WriteByte('\n')
	}
	if name == "-" {
		name = "standard input"
	}
	fmt.Fprintf(c.out, "==> %s <==\n", name)
}

func cmdHead(c *cmd) int {
	c.args = append(c.args[:1], numArg(c.args[1:])...)
	opts, files, ok := c.flags()
	if !ok {
		return 1
	}
	n, bytesMode, header := int64(10), false, len(files) > 1
	for _, o := range opts {
		switch o.name {
		case "n", "lines", "c", "bytes":
			v, ok := parseSize(o.val)
			if !ok {
				return c.badCount(o)
			}
			n, bytesMode = v, countsBytes(o.name)
		case "q", "quiet", "silent":
			header = false
		case "v", "verbose":
			header = true
		}
	}
	first := true
	return c.eachInput(files, func(name string, r io.Reader) error {
		if header {
			c.fileHeader(name, first)
		}
		first = false
		if bytesMode {
			if n >= 0 {
				_, err := io.CopyN(c.out, r, n)
				if err == io.EOF {
					err = nil
				}
				return err
			}
			data, err := c.readAll(r)
			if err != nil {
				return err
			}
			if int64(len(data)) > -n {
				c.out.Write(data[:int64(len(data))+n])
			}
			return nil
		}
		br := bufio.NewReader(r)
		if n >= 0 {
			for i := int64(0); i < n; i++ {
				s, err := c.readLine(br)
				c.out.WriteString(s)
				if err != nil {
					if err == io.EOF {
						return nil
					}
					return err
				}
			}
			return nil
		}
		lines, err := c.readLines(br)
		if err != nil {
			return err
		}
		for i := 0; i < len(lines)+int(n); i++ {
			c.out.WriteString(lines[i])
		}
		return nil
	})
}

// tailArgs rewrites -5 as -n 5 (see numArg) and +5 as -n +5, as tail
// reads them.
func tailArgs(args []string) []string {
	args = numArg(append([]string(nil), args...))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "-n" || a == "-c" {
			i++
			continue
		}
		if len(a) > 1 && a[0] == '+' && a[1] >= '0' && a[1] <= '9' {
			args[i] = "-n" + a
		}
	}
	return args
}

func cmdTail(c *cmd) int {
	// tail +N is lines from N on
	c.args = append(c.args[:1], tailArgs(c.args[1:])...)
	opts, files, ok := c.flags()
	if !ok {
		return 1
	}
	n, bytesMode, fromStart, header := int64(10), false, false, len(files) > 1
	for _, o := range opts {
		switch o.name {
		case "n", "lines", "c", "bytes":
			v := o.val
			fromStart = strings.HasPrefix(v, "+")
			v = strings.TrimPrefix(strings.TrimPrefix(v, "+"), "-")
			num, ok := parseSize(v)
			if !ok {
				return c.badCount(o)
			}
			n, bytesMode = num, countsBytes(o.name)
		case "q", "quiet", "silent":
			header = false
		case "v", "verbose":
			header = true
		}
	}
	first := true
	return c.eachInput(files, func(name string, r io.Reader) error {
		if header {
			c.fileHeader(name, first)
		}
		first = false
		data, err := c.readAll(r)
		if err != nil {
			return err
		}
		if bytesMode {
			switch {
			case fromStart && n > 0:
				if n-1 < int64(len(data)) {
					c.out.Write(data[n-1:])
				}
			case fromStart:
				c.out.Write(data)
			case n < int64(len(data)):
				c.out.Write(data[int64(len(data))-n:])
			default:
				c.out.Write(data)
			}
			return nil
		}
		lines := splitLines(string(data))
		start := 0
		if fromStart {
			start = int(n) - 1
			if start < 0 {
				start = 0
			}
		} else {
			start = len(lines) - int(n)
		}
		for i := max(start, 0); i < len(lines); i++ {
			c.out.WriteString(lines[i])
		}
		return nil
	})
}
