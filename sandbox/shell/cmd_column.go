package shell

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"
)

func init() {
	register(&command{names: []string{"column"}, run: cmdColumn,
		opts:  opts("ts:o:L", "table", "separator=", "output-separator=", "keep-empty-lines"),
		check: columnCheck})
}

// columnCheck: the fast path builds in column's table mode (-t), which
// is what agents use; filling columns to the terminal's width is the
// sandbox's.
func columnCheck(args []string) string {
	opts, _, _ := parseOptsIn(args, true, "ts:o:L", "table", "separator=", "output-separator=", "keep-empty-lines")
	table := false
	for _, o := range opts {
		switch o.name {
		case "t", "table":
			table = true
		case "s", "separator":
			if o.val == "" {
				return "column -s '' is not built in"
			}
		}
	}
	if !table {
		return "column without -t (filling the terminal's width) is not built in"
	}
	return ""
}

// columnWidth is the width util-linux gives a cell, and the cell as it
// prints it: bytes that are not UTF-8 are printed as \xHH; control
// characters, combining marks and format characters take no room, East
// Asian wide ones two.
func columnWidth(s string) (string, int) {
	w := 0
	var esc strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			if esc.Len() == 0 {
				esc.WriteString(s[:i])
			}
			fmt.Fprintf(&esc, `\x%02x`, s[i])
			w += 4
			i++
			continue
		}
		if esc.Len() > 0 {
			esc.WriteString(s[i : i+n])
		}
		i += n
		switch {
		case r < 0x20 || r >= 0x7f && r < 0xa0 || unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf):
		case wideRune(r):
			w += 2
		default:
			w++
		}
	}
	if esc.Len() > 0 {
		return esc.String(), w
	}
	return s, w
}

// wideRune reports whether r is East Asian wide or full width.
func wideRune(r rune) bool {
	for _, rg := range [][2]rune{{0x1100, 0x115f}, {0x2e80, 0x303e}, {0x3041, 0x33ff}, {0x3400, 0x4dbf},
		{0x4e00, 0x9fff}, {0xa000, 0xa4cf}, {0xac00, 0xd7a3}, {0xf900, 0xfaff}, {0xfe30, 0xfe4f},
		{0xff00, 0xff60}, {0xffe0, 0xffe6}, {0x1f300, 0x1f64f}, {0x1f900, 0x1f9ff}, {0x20000, 0x3fffd}} {
		if r >= rg[0] && r <= rg[1] {
			return true
		}
	}
	return false
}

func cmdColumn(c *cmd) int {
	opts, files, ok := c.flags()
	if !ok {
		return 1
	}
	sep, outSep, keepEmpty, greedy := " \t", "  ", false, true
	for _, o := range opts {
		switch o.name {
		case "s", "separator":
			sep, greedy = o.val, false
		case "o", "output-separator":
			outSep = o.val
		case "L", "keep-empty-lines":
			keepEmpty = true
		}
	}
	stdin := len(files) == 0
	if stdin {
		files = []string{""}
	}
	type cell struct {
		text  string
		width int
	}
	var rows [][]cell
	var widths []int
	read := 0
	for _, f := range files {
		var r io.Reader = c.stdin
		if !stdin {
			// "-" is a file's name to column, not standard input
			file, err := c.open(c.abs(f))
			if err != nil {
				c.fail(f, err)
				continue
			}
			defer file.Close()
			if fi, err := c.stat(f); err == nil && fi.IsDir() {
				c.errorf("read failed: %s", errText(syscall.EISDIR))
				return 1
			}
			r = file
		}
		read++
		br := bufio.NewReader(r)
		for {
			l, err := c.readLine(br)
			if l == "" && err != nil {
				if err == io.EOF {
					break
				}
				if err != errMemoryLimit && !c.canceled() {
					c.errorf("read failed: %s", errText(err))
				}
				return 1
			}
			l, _ = columnWidth(strings.TrimSuffix(l, "\n"))
			var parts []string
			if greedy {
				parts = strings.FieldsFunc(l, func(r rune) bool { return strings.ContainsRune(sep, r) })
			} else if l != "" {
				parts = splitAny(l, sep)
			}
			if strings.Trim(l, " \t") == "" {
				// a blank line is no row, or (-L) a row of no cells
				if !keepEmpty {
					continue
				}
				parts = nil
			}
			// a row is held with its cells' headers
			if !c.grow(int64(len(l)) + 32*int64(len(parts)+1)) {
				return 1
			}
			row := make([]cell, len(parts))
			for i, p := range parts {
				t, w := columnWidth(p)
				row[i] = cell{t, w}
				if i >= len(widths) {
					widths = append(widths, 0)
				}
				widths[i] = max(widths[i], w)
			}
			rows = append(rows, row)
		}
	}
	if read == 0 {
		return 1
	}
	for _, row := range rows {
		if c.canceled() {
			return 1
		}
		for i := range widths {
			var cl cell
			if i < len(row) {
				cl = row[i]
			}
			c.out.WriteString(cl.text)
			if i < len(widths)-1 {
				for k := cl.width; k < widths[i]; k++ {
					c.out.WriteByte(' ')
				}
				c.out.WriteString(outSep)
			}
		}
		if err := c.out.WriteByte('\n'); err != nil {
			return 1
		}
	}
	return 0
}

// splitAny splits s at each character of seps, keeping empty fields.
func splitAny(s, seps string) []string {
	var out []string
	start := 0
	for i, r := range s {
		if strings.ContainsRune(seps, r) {
			out = append(out, s[start:i])
			start = i + utf8.RuneLen(r)
		}
	}
	return append(out, s[start:])
}
