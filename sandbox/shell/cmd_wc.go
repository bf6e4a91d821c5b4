package shell

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

func init() {
	register(&command{names: []string{"wc"}, run: cmdWc, opts: opts("lwcmL", "lines", "words", "bytes", "chars", "max-line-length")})
}

func cmdWc(c *cmd) int {
	opts, files, ok := c.flags()
	if !ok {
		return 1
	}
	var lines, words, bytesF, chars, maxlen bool
	for _, o := range opts {
		switch o.name {
		case "l", "lines":
			lines = true
		case "w", "words":
			words = true
		case "c", "bytes":
			bytesF = true
		case "m", "chars":
			chars = true
		case "L", "max-line-length":
			maxlen = true
		}
	}
	if !lines && !words && !bytesF && !chars && !maxlen {
		lines, words, bytesF = true, true, true
	}
	type counts struct{ l, w, m, c, L int64 }
	var results []counts
	var names []string
	var total counts
	// the width of the columns, as GNU wc computes it
	width, minWidth := int64(0), 1
	if len(files) == 0 {
		minWidth = 7
	}
	for _, f := range files {
		if fi, err := c.stat(f); err == nil && fi.mode.IsRegular() {
			width += fi.size
		} else if f == "-" || err == nil {
			minWidth = 7
		}
	}
	w := len(strconv.FormatInt(width, 10))
	if w < minWidth {
		w = minWidth
	}
	nOpts := 0
	for _, b := range []bool{lines, words, bytesF, chars, maxlen} {
		if b {
			nOpts++
		}
	}
	if nOpts == 1 && len(files) <= 1 {
		w = 1
	}
	print := func(k counts, name string) {
		var parts []string
		add := func(on bool, v int64) {
			if on {
				parts = append(parts, fmt.Sprintf("%*d", w, v))
			}
		}
		add(lines, k.l)
		add(words, k.w)
		add(chars, k.m)
		add(bytesF, k.c)
		add(maxlen, k.L)
		s := strings.Join(parts, " ")
		if name != "" {
			s += " " + name
		}
		c.out.WriteString(s + "\n")
	}
	status := c.eachInput(files, func(name string, r io.Reader) error {
		var k counts
		br := bufio.NewReaderSize(r, 64<<10)
		inWord := false
		var col int64
		for {
			ch, size, err := br.ReadRune()
			if err != nil {
				if err == io.EOF {
					break
				}
				return err
			}
			k.c += int64(size)
			k.m++
			switch ch {
			case '\n':
				k.l++
				k.L = max(k.L, col)
				col = 0
			case '\t':
				col += 8 - col%8
			default:
				col++
			}
			if ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r' || ch == '\v' || ch == '\f' {
				inWord = false
			} else if !inWord && (ch != 0xFFFD || size > 1) {
				inWord = true
				k.w++
			}
		}
		k.L = max(k.L, col)
		if len(files) > 0 {
			results = append(results, k)
			names = append(names, name)
			print(k, name)
		} else {
			print(k, "")
		}
		total.l += k.l
		total.w += k.w
		total.m += k.m
		total.c += k.c
		total.L = max(total.L, k.L)
		return nil
	})
	if len(files) > 1 {
		print(total, "total")
	}
	return status
}
