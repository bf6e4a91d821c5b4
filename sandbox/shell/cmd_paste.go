package shell

import (
	"strings"
)

func init() {
	register(&command{names: []string{"paste"}, run: cmdPaste, opts: opts("d:s", "delimiters=", "serial")})
}

func cmdPaste(c *cmd) int {
	opts, files, ok := c.flags()
	if !ok {
		return 1
	}
	delims, serial := "\t", false
	for _, o := range opts {
		switch o.name {
		case "d", "delimiters":
			delims, _ = unescape(o.val, false)
		case "s", "serial":
			serial = true
		}
	}
	if len(files) == 0 {
		files = []string{"-"}
	}
	var cols [][]string
	for _, f := range files {
		data, err := c.readFile(f)
		if err != nil {
			c.fail(f, err)
			return 1
		}
		s := strings.TrimSuffix(string(data), "\n")
		if len(data) == 0 {
			cols = append(cols, nil)
		} else {
			cols = append(cols, strings.Split(s, "\n"))
		}
	}
	d := func(i int) string {
		if delims == "" {
			return ""
		}
		return string([]rune(delims)[i%len([]rune(delims))])
	}
	if serial {
		for _, col := range cols {
			var b strings.Builder
			for i, v := range col {
				if i > 0 {
					b.WriteString(d(i - 1))
				}
				b.WriteString(v)
			}
			c.out.WriteString(b.String() + "\n")
		}
		return 0
	}
	n := 0
	for _, col := range cols {
		n = max(n, len(col))
	}
	for i := 0; i < n; i++ {
		var b strings.Builder
		for j, col := range cols {
			if j > 0 {
				b.WriteString(d(j - 1))
			}
			if i < len(col) {
				b.WriteString(col[i])
			}
		}
		c.out.WriteString(b.String() + "\n")
	}
	return 0
}
