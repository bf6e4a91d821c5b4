package shell

import (
	"bytes"
	"strings"
)

func init() {
	register(&command{names: []string{"yes"}, run: cmdYes, opts: opts("")})
}

func cmdYes(c *cmd) int {
	s := "y"
	if len(c.args) > 1 {
		s = strings.Join(c.args[1:], " ")
	}
	line := []byte(s + "\n")
	buf := bytes.Repeat(line, max(1, 8192/len(line)))
	for !c.canceled() {
		if _, err := c.out.Write(buf); err != nil {
			return 1
		}
	}
	return 1
}
