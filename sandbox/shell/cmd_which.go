package shell

func init() {
	register(&command{names: []string{"which"}, run: cmdWhich, opts: opts("as", "all", "skip-alias")})
}

func cmdWhich(c *cmd) int {
	_, names, ok := c.flags()
	if !ok {
		return 1
	}
	status := 0
	for _, n := range names {
		if p, ok := c.r.programPath(c, n); ok {
			c.out.WriteString(p + "\n")
		} else {
			status = 1
		}
	}
	return status
}
