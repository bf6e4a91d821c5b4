package shell

import (
	"errors"
	"strings"
)

// simpleBuiltin runs an interpreter builtin for xargs and find -exec.
func simpleBuiltin(c *cmd) int {
	if c.name == "echo" {
		return cmdEcho(c)
	}
	if c.name == "printf" {
		return cmdPrintf(c)
	}
	c.out.Flush()
	if err := c.hc.Builtin(c.ctx, c.args); err != nil {
		return 1
	}
	return 0
}

// errSilent fails an input that the command reported already.
var errSilent = errors.New("reported")

// cmdEcho is bash's echo (for xargs and find -exec).
func cmdEcho(c *cmd) int {
	args := c.args[1:]
	newline, escapes := true, false
	for len(args) > 0 && len(args[0]) > 1 && args[0][0] == '-' && strings.Trim(args[0][1:], "neE") == "" {
		for _, f := range args[0][1:] {
			switch f {
			case 'n':
				newline = false
			case 'e':
				escapes = true
			case 'E':
				escapes = false
			}
		}
		args = args[1:]
	}
	for i, a := range args {
		if i > 0 {
			c.out.WriteByte(' ')
		}
		if escapes {
			s, stop := unescape(a, true)
			c.out.WriteString(s)
			if stop {
				return 0
			}
		} else {
			c.out.WriteString(a)
		}
	}
	if newline {
		c.out.WriteByte('\n')
	}
	return 0
}
