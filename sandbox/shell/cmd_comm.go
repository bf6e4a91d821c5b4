package shell

import (
	"strconv"
	"strings"
)

func init() {
	register(&command{names: []string{"comm"}, run: cmdComm, opts: opts("123", "check-order", "nocheck-order", "output-delimiter=")})
}

func cmdComm(c *cmd) int {
	opts, files, ok := c.flags()
	if !ok {
		return 1
	}
	hide := map[string]bool{}
	delim := "\t"
	for _, o := range opts {
		if o.name == "output-delimiter" {
			delim = o.val
		} else {
			hide[o.name] = true
		}
	}
	if len(files) != 2 {
		c.errorf("missing operand")
		return 1
	}
	var a, b []string
	for i, f := range files {
		data, err := c.readFile(f)
		if err != nil {
			c.fail(f, err)
			return 1
		}
		ls := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
		if len(data) == 0 {
			ls = nil
		}
		if i == 0 {
			a = ls
		} else {
			b = ls
		}
	}
	col := func(n int, s string) {
		if hide[strconv.Itoa(n)] {
			return
		}
		pre := ""
		for i := 1; i < n; i++ {
			if !hide[strconv.Itoa(i)] {
				pre += delim
			}
		}
		c.out.WriteString(pre + s + "\n")
	}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j >= len(b) || i < len(a) && a[i] < b[j]:
			col(1, a[i])
			i++
		case i >= len(a) || b[j] < a[i]:
			col(2, b[j])
			j++
		default:
			col(3, a[i])
			i++
			j++
		}
	}
	return 0
}
