package shell

import (
	"fmt"
	"strings"
)

func init() {
	register(&command{names: []string{"ln"}, run: cmdLn, opts: opts("sfnvrTt:", "symbolic", "force", "no-dereference", "verbose", "relative", "no-target-directory", "target-directory="), ignored: []string{"r", "relative", "T", "no-target-directory"}})
}

func cmdLn(c *cmd) int {
	opts, args, ok := c.flags()
	if !ok {
		return 1
	}
	symbolic, force, noDeref, verbose, target := false, false, false, false, ""
	for _, o := range opts {
		switch o.name {
		case "s", "symbolic":
			symbolic = true
		case "f", "force":
			force = true
		case "n", "no-dereference":
			noDeref = true
		case "v", "verbose":
			verbose = true
		case "t", "target-directory":
			target = o.val
		}
	}
	if target == "" {
		switch len(args) {
		case 0:
			c.errorf("missing file operand")
			return 1
		case 1:
			target = "."
		default:
			target, args = args[len(args)-1], args[:len(args)-1]
		}
	}
	var intoDir bool
	if noDeref {
		fi, err := c.lstat(target)
		intoDir = err == nil && fi.IsDir()
	} else {
		fi, err := c.stat(target)
		intoDir = err == nil && fi.IsDir()
	}
	if len(args) > 1 && !intoDir {
		c.errorf("target '%s' is not a directory", target)
		return 1
	}
	status := 0
	for _, src := range args {
		dst := target
		if intoDir {
			dst = strings.TrimSuffix(target, "/") + "/" + baseName(src)
		}
		dabs := c.abs(dst)
		if _, err := c.r.sh.ns.lstat(dabs); err == nil {
			if !force {
				c.errorf("failed to create %slink '%s': File exists", map[bool]string{true: "symbolic ", false: "hard "}[symbolic], dst)
				status = 1
				continue
			}
			c.r.sh.ns.remove(dabs)
		}
		var err error
		if symbolic {
			err = c.r.sh.ns.symlink(src, dabs)
		} else {
			err = c.r.sh.ns.link(c.abs(src), dabs)
		}
		if err != nil {
			kind := "hard link"
			if symbolic {
				kind = "symbolic link"
			}
			c.errorf("failed to create %s '%s': %s", kind, dst, errText(err))
			status = 1
		} else if verbose {
			fmt.Fprintf(c.out, "'%s' -> '%s'\n", dst, src)
		}
	}
	return status
}
