package shell

import (
	"bufio"
	"io"
	"math"
	"strconv"
	"strings"
)

func init() {
	register(&command{names: []string{"fold"}, run: cmdFold, opts: opts("bsw:", "bytes", "spaces", "width="),
		check: foldCheck})
}

// foldCheck routes the widths whose reading the fast path does not copy
// from GNU's xdectoumax (a sign, leading blanks): digits, and other
// words that are not numbers at all, are read as GNU does.
func foldCheck(args []string) string {
	opts, _, _ := parseOptsIn(args, true, "bsw:", "bytes", "spaces", "width=")
	for _, o := range opts {
		if (o.name == "w" || o.name == "width") && o.val != "" && strings.IndexAny(o.val[:1], "+- \t\n\v\f\r") >= 0 {
			return "fold -w " + o.val + ": the width is not read as GNU reads it"
		}
	}
	return ""
}

// foldWidth reads fold's -w as GNU does (1 to SIZE_MAX-9).
func foldWidth(c *cmd, v string) (uint64, bool) {
	n, err := strconv.ParseUint(v, 10, 64)
	switch {
	case err != nil && strings.Trim(v, "0123456789") == "" && v != "":
		c.errorf("invalid number of columns: ‘%s’: Value too large for defined data type", v)
	case err != nil:
		c.errorf("invalid number of columns: ‘%s’", v)
	case n == 0:
		c.errorf("invalid number of columns: ‘%s’: Numerical result out of range", v)
	case n > math.MaxUint64-9:
		c.errorf("invalid number of columns: ‘%s’: Value too large for defined data type", v)
	default:
		return n, true
	}
	return 0, false
}

func cmdFold(c *cmd) int {
	opts, files, ok := c.flags()
	if !ok {
		return 1
	}
	width, spaces, bytes := uint64(80), false, false
	for _, o := range opts {
		switch o.name {
		case "b", "bytes":
			bytes = true
		case "s", "spaces":
			spaces = true
		case "w", "width":
			if width, ok = foldWidth(c, o.val); !ok {
				return 1
			}
		}
	}
	return c.eachInput(files, func(name string, r io.Reader) error {
		return c.foldStream(r, width, spaces, bytes)
	})
}

// foldStream folds one input as GNU fold's fold_file does: a line is
// cut before the byte that would take it past width columns (with -s,
// after the last blank before it). The pending line is charged to the
// call's budget: a line with no newline and a huge width is held whole.
func (c *cmd) foldStream(r io.Reader, width uint64, spaces, bytes bool) error {
	adjust := func(col uint64, b byte) uint64 {
		if bytes {
			return col + 1
		}
		switch b {
		case '\b':
			if col > 0 {
				return col - 1
			}
			return 0
		case '\r':
			return 0
		case '\t':
			return col + 8 - col%8
		}
		return col + 1
	}
	br := bufio.NewReaderSize(r, 64<<10)
	line := make([]byte, 0, 256)
	charged := int64(0)
	col := uint64(0)
	for n := 0; ; n++ {
		b, err := br.ReadByte()
		if err == io.EOF {
			break
		}
		if err != nil {
			c.out.Write(line)
			return err
		}
		if n&0xffff == 0 && c.canceled() {
			return errSilent
		}
		if b == '\n' {
			line = append(line, b)
			c.out.Write(line)
			line, col = line[:0], 0
			continue
		}
	rescan:
		col = adjust(col, b)
		if col > width {
			if spaces {
				end := -1
				for i := len(line) - 1; i >= 0; i-- {
					if line[i] == ' ' || line[i] == '\t' {
						end = i + 1
						break
					}
				}
				if end > 0 {
					c.out.Write(line[:end])
					c.out.WriteByte('\n')
					line = line[:copy(line, line[end:])]
					col = 0
					for _, x := range line {
						col = adjust(col, x)
					}
					goto rescan
				}
			}
			if len(line) > 0 {
				line = append(line, '\n')
				c.out.Write(line)
				line, col = line[:0], 0
				goto rescan
			}
		}
		line = append(line, b)
		if int64(cap(line)) > charged {
			if !c.grow(int64(cap(line)) - charged) {
				return errSilent
			}
			charged = int64(cap(line))
		}
	}
	c.out.Write(line)
	return nil
}
