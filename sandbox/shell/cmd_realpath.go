package shell

import (
	"strings"
)

func init() {
	register(&command{names: []string{"realpath"}, run: cmdRealpath, opts: opts("emsqz", "canonicalize-existing", "canonicalize-missing", "strip", "no-symlinks", "quiet", "relative-to="), ignored: []string{"z"}})
}

func cmdRealpath(c *cmd) int {
	opts, args, ok := c.flags()
	if !ok {
		return 1
	}
	mode := byte('f')
	strip, rel := false, ""
	for _, o := range opts {
		switch o.name {
		case "e", "canonicalize-existing":
			mode = 'e'
		case "m", "canonicalize-missing":
			mode = 'm'
		case "s", "strip", "no-symlinks":
			strip = true
		case "relative-to":
			rel = o.val
		}
	}
	if len(args) == 0 {
		c.errorf("missing operand")
		return 1
	}
	status := 0
	for _, a := range args {
		var p string
		var err error
		if strip {
			p = strings.TrimSuffix(c.abs(a), "/")
		} else {
			p, err = c.canonical(a, mode)
		}
		if err != nil {
			c.fail(a, err)
			status = 1
			continue
		}
		if rel != "" {
			base, _ := c.canonical(rel, 'm')
			p = relPath(base, p)
		}
		c.out.WriteString(p + "\n")
	}
	return status
}

// relPath is target relative to base (both absolute and clean).
func relPath(base, target string) string {
	b, t := split(base), split(target)
	i := 0
	for i < len(b) && i < len(t) && b[i] == t[i] {
		i++
	}
	var parts []string
	for range b[i:] {
		parts = append(parts, "..")
	}
	parts = append(parts, t[i:]...)
	if len(parts) == 0 {
		return "."
	}
	return strings.Join(parts, "/")
}
