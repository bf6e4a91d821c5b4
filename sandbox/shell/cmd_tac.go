package shell

import (
	"io"
	"strings"
)

func init() {
	register(&command{names: []string{"tac"}, run: cmdTac, opts: opts("")})
}

func cmdTac(c *cmd) int {
	_, files, ok := c.flags()
	if !ok {
		return 1
	}
	return c.eachInput(files, func(name string, r io.Reader) error {
		lines, err := c.readLines(r)
		if err != nil {
			return err
		}
		if n := len(lines); n > 0 && !strings.HasSuffix(lines[n-1], "\n") {
			// GNU tac glues an unterminated last line to the one before
			last := lines[n-1]
			lines = lines[:n-1]
			c.out.WriteString(last)
		}
		for i := len(lines) - 1; i >= 0; i-- {
			c.out.WriteString(lines[i])
		}
		return nil
	})
}
