package shell

import (
	"io"
	"strings"
)

func init() {
	register(&command{names: []string{"rev"}, run: cmdRev, opts: opts("")})
}

func cmdRev(c *cmd) int {
	_, files, ok := c.flags()
	if !ok {
		return 1
	}
	return c.eachInput(files, func(name string, r io.Reader) error {
		lines, err := c.readLines(r)
		if err != nil {
			return err
		}
		for _, l := range lines {
			body, nl := strings.CutSuffix(l, "\n")
			rs := []rune(body)
			for i, j := 0, len(rs)-1; i < j; i, j = i+1, j-1 {
				rs[i], rs[j] = rs[j], rs[i]
			}
			c.out.WriteString(string(rs))
			if nl {
				c.out.WriteByte('\n')
			}
		}
		return nil
	})
}
