package shell

func init() {
	register(&command{names: []string{"readlink"}, run: cmdReadlink, opts: opts("femnqsvz", "canonicalize", "canonicalize-existing", "canonicalize-missing", "no-newline", "quiet", "silent", "verbose"), ignored: []string{"n", "no-newline", "z", "v", "verbose"}})
}

func cmdReadlink(c *cmd) int {
	opts, args, ok := c.flags()
	if !ok {
		return 1
	}
	mode := byte(0)
	for _, o := range opts {
		switch o.name {
		case "f", "canonicalize":
			mode = 'f'
		case "e", "canonicalize-existing":
			mode = 'e'
		case "m", "canonicalize-missing":
			mode = 'm'
		}
	}
	if len(args) == 0 {
		c.errorf("missing operand")
		return 1
	}
	status := 0
	for _, a := range args {
		if mode == 0 {
			t, err := c.r.sh.ns.readlink(c.abs(a))
			if err != nil {
				status = 1
				continue
			}
			c.out.WriteString(t + "\n")
			continue
		}
		p, err := c.canonical(a, mode)
		if err != nil {
			status = 1
			continue
		}
		c.out.WriteString(p + "\n")
	}
	return status
}
