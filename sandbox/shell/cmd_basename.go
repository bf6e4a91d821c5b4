package shell

import (
	"strings"
)

func init() {
	register(&command{names: []string{"basename"}, run: cmdBasename, opts: opts("as:z", "multiple", "suffix=", "zero"), ignored: []string{"z", "zero"}})
}

func cmdBasename(c *cmd) int {
	opts, names, ok := c.flags()
	if !ok {
		return 1
	}
	multiple, suffix := false, ""
	for _, o := range opts {
		switch o.name {
		case "a", "multiple":
			multiple = true
		case "s", "suffix":
			suffix, multiple = o.val, true
		}
	}
	if len(names) == 0 {
		c.usage("missing operand")
		return 1
	}
	if !multiple {
		if len(names) == 2 {
			suffix = names[1]
		} else if len(names) > 2 {
			c.usage("extra operand ‘%s’", names[2])
			return 1
		}
		names = names[:1]
	}
	for _, n := range names {
		b := baseName(n)
		if suffix != "" && b != suffix && strings.HasSuffix(b, suffix) {
			b = b[:len(b)-len(suffix)]
		}
		c.out.WriteString(b + "\n")
	}
	return 0
}
