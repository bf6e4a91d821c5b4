package shell

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

func init() {
	register(&command{names: []string{"nl"}, run: cmdNl, opts: opts("b:w:s:v:i:n:", "body-numbering=", "number-width=", "number-separator=")})
}

func cmdNl(c *cmd) int {
	opts, files, ok := c.flags()
	if !ok {
		return 1
	}
	style, width, sep, start, incr, format := "t", 6, "\t", 1, 1, "rn"
	for _, o := range opts {
		switch o.name {
		case "b", "body-numbering":
			style = o.val
		case "w", "number-width":
			width, _ = strconv.Atoi(o.val)
		case "s", "number-separator":
			sep = o.val
		case "v":
			start, _ = strconv.Atoi(o.val)
		case "i":
			incr, _ = strconv.Atoi(o.val)
		case "n":
			format = o.val
		}
	}
	n := start
	return c.eachInput(files, func(name string, r io.Reader) error {
		lines, err := c.readLines(r)
		if err != nil {
			return err
		}
		for _, l := range lines {
			body := strings.TrimSuffix(l, "\n")
			if style == "a" || style == "t" && body != "" {
				var num string
				switch format {
				case "ln":
					num = fmt.Sprintf("%-*d", width, n)
				case "rz":
					num = fmt.Sprintf("%0*d", width, n)
				default:
					num = fmt.Sprintf("%*d", width, n)
				}
				c.out.WriteString(num + sep + l)
				n += incr
			} else {
				c.out.WriteString(strings.Repeat(" ", width+len(sep)) + l)
			}
		}
		if len(lines) > 0 && !strings.HasSuffix(lines[len(lines)-1], "\n") {
			c.out.WriteByte('\n')
		}
		return nil
	})
}
