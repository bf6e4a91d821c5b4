package shell

import (
	"strings"
)

func cmdWhich(c *cmd) int {
	_, names, ok := c.flags("as", "all", "skip-alias")
	if !ok {
		return 1
	}
	status := 0
	for _, n := range names {
		if p, ok := builtinPath(n); ok && !strings.Contains(n, "/") {
			c.out.WriteString(p + "\n")
		} else {
			status = 1
		}
	}
	return status
}
