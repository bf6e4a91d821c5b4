package shell

import (
	"context"
	"fmt"
	"path"
	"strconv"
	"strings"
	"syscall"
)

func init() {
	register(&command{names: []string{"mkdir"}, run: cmdMkdir, opts: opts("pvm:", "parents", "verbose", "mode=")})
}

func cmdMkdir(c *cmd) int {
	opts, dirs, ok := c.flags()
	if !ok {
		return 1
	}
	parents, verbose, mode := false, false, uint32(0o777)
	for _, o := range opts {
		switch o.name {
		case "p", "parents":
			parents = true
		case "v", "verbose":
			verbose = true
		case "m", "mode":
			m, err := strconv.ParseUint(o.val, 8, 32)
			if err != nil {
				c.errorf("invalid mode ‘%s’", o.val)
				return 1
			}
			mode = uint32(m)
		}
	}
	if len(dirs) == 0 {
		c.usage("missing operand")
		return 1
	}
	status := 0
	for _, d := range dirs {
		abs := c.abs(d)
		if parents {
			if err := c.mkdirAll(abs, mode, verbose); err != nil {
				c.errorf("cannot create directory ‘%s’: %s", d, errText(err))
				status = 1
			}
			continue
		}
		if err := c.r.sh.ns.mkdir(abs, mode); err != nil {
			c.errorf("cannot create directory ‘%s’: %s", d, errText(err))
			status = 1
		} else if verbose {
			fmt.Fprintf(c.out, "mkdir: created directory '%s'\n", d)
		}
	}
	return status
}

func (c *cmd) mkdirAll(abs string, mode uint32, verbose bool) error {
	if c.canceled() {
		return context.Cause(c.ctx)
	}
	abs = strings.TrimSuffix(abs, "/")
	if treeTooDeep(abs) { // its recursion goes a level a component
		return syscall.ENAMETOOLONG
	}
	if fi, err := c.r.sh.ns.stat(abs); err == nil {
		if !fi.IsDir() {
			return syscall.EEXIST
		}
		return nil
	}
	if parent := path.Dir(abs); parent != abs {
		if err := c.mkdirAll(parent, 0o777, verbose); err != nil {
			return err
		}
	}
	if c.canceled() { // a deep path takes a while: stop with the call
		return context.Cause(c.ctx)
	}
	err := c.r.sh.ns.mkdir(abs, mode)
	if err == nil && verbose {
		fmt.Fprintf(c.out, "mkdir: created directory '%s'\n", abs)
	}
	if errno(err) == syscall.EEXIST {
		return nil
	}
	return err
}
