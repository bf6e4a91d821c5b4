package shell

func init() {
	register(&command{names: []string{"dirname"}, run: cmdDirname, opts: opts("z", "zero"), ignored: []string{"z", "zero"}})
}

func cmdDirname(c *cmd) int {
	_, names, ok := c.flags()
	if !ok {
		return 1
	}
	if len(names) == 0 {
		c.usage("missing operand")
		return 1
	}
	for _, n := range names {
		c.out.WriteString(dirName(n) + "\n")
	}
	return 0
}
