package shell

func cmdDirname(c *cmd) int {
	_, names, ok := c.flags("z", "zero")
	if !ok {
		return 1
	}
	if len(names) == 0 {
		c.errorf("missing operand")
		return 1
	}
	for _, n := range names {
		c.out.WriteString(dirName(n) + "\n")
	}
	return 0
}
