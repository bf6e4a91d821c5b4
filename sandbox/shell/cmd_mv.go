package shell

func init() {
	register(&command{names: []string{"mv"}, run: cmdMv, opts: opts("finvut:T", "force", "interactive", "no-clobber", "verbose", "update?", "target-directory=", "no-target-directory"), ignored: []string{"i", "interactive"}})
}

func cmdMv(c *cmd) int {
	opts, args, ok := c.flags()
	if !ok {
		return 1
	}
	var o cpOpts
	target := ""
	for _, op := range opts {
		switch op.name {
		case "n", "no-clobber":
			o.noClobber = true
		case "v", "verbose":
			o.verbose = true
		case "u", "update":
			o.update = true
		case "t", "target-directory":
			target = op.val
		case "T", "no-target-directory":
			o.targetIsFile = true
		}
	}
	o.recursive, o.preserve, o.noDeref = true, true, true
	return c.copyMove(args, target, &o, true)
}
