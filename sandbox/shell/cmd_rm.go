package shell

import (
	"fmt"
	"path"
	"strings"
	"syscall"
)

func init() {
	register(&command{names: []string{"rm"}, run: cmdRm, opts: opts("rRfivdI", "recursive", "force", "verbose", "dir", "interactive?", "no-preserve-root", "preserve-root?", "one-file-system"), ignored: []string{"i", "I", "interactive"}})
}

func cmdRm(c *cmd) int {
	opts, files, ok := c.flags()
	if !ok {
		return 1
	}
	recursive, force, verbose, dir := false, false, false, false
	for _, o := range opts {
		switch o.name {
		case "r", "R", "recursive":
			recursive = true
		case "f", "force":
			force = true
		case "v", "verbose":
			verbose = true
		case "d", "dir":
			dir = true
		}
	}
	if len(files) == 0 && !force {
		c.errorf("missing operand")
		return 1
	}
	status := 0
	for _, f := range files {
		base := path.Base(strings.TrimSuffix(f, "/"))
		if base == "." || base == ".." {
			c.errorf("refusing to remove '.' or '..' directory: skipping '%s'", f)
			status = 1
			continue
		}
		abs := c.abs(f)
		if abs == "/" || abs == wsRoot || abs == tmpRoot || abs == wsRoot+"/" || abs == tmpRoot+"/" {
			if abs == "/" {
				c.errorf("it is dangerous to operate recursively on '/'")
			} else {
				c.errorf("cannot remove '%s': Device or resource busy", f)
			}
			status = 1
			continue
		}
		fi, err := c.r.sh.ns.lstat(abs)
		if err != nil {
			if !(force && errno(err) == syscall.ENOENT) {
				c.errorf("cannot remove '%s': %s", f, errText(err))
				status = 1
			}
			continue
		}
		if fi.IsDir() {
			if !recursive && !dir {
				c.errorf("cannot remove '%s': Is a directory", f)
				status = 1
				continue
			}
			if recursive {
				if err := c.removeTree(abs, f, verbose); err != nil {
					status = 1
				}
				continue
			}
		}
		if err := c.r.sh.ns.remove(abs); err != nil {
			c.errorf("cannot remove '%s': %s", f, errText(err))
			status = 1
		} else if verbose {
			if fi.IsDir() {
				fmt.Fprintf(c.out, "removed directory '%s'\n", f)
			} else {
				fmt.Fprintf(c.out, "removed '%s'\n", f)
			}
		}
	}
	return status
}

func (c *cmd) removeTree(abs, shown string, verbose bool) error {
	if treeTooDeep(abs) {
		c.errorf("cannot remove '%s': %s", shown, errText(syscall.ENAMETOOLONG))
		return syscall.ENAMETOOLONG
	}
	ents, err := c.readDir(abs)
	if err != nil {
		c.errorf("cannot remove '%s': %s", shown, errText(err))
		return err
	}
	var firstErr error
	for _, e := range ents {
		if c.canceled() {
			return c.ctx.Err()
		}
		child, childShown := abs+"/"+e.name, strings.TrimSuffix(shown, "/")+"/"+e.name
		if e.typ.IsDir() {
			if err := c.removeTree(child, childShown, verbose); err != nil && firstErr == nil {
				firstErr = err
			}
			continue
		}
		if err := c.r.sh.ns.remove(child); err != nil {
			c.errorf("cannot remove '%s': %s", childShown, errText(err))
			if firstErr == nil {
				firstErr = err
			}
		} else if verbose {
			fmt.Fprintf(c.out, "removed '%s'\n", childShown)
		}
	}
	if firstErr != nil {
		return firstErr
	}
	if err := c.r.sh.ns.remove(abs); err != nil {
		c.errorf("cannot remove '%s': %s", shown, errText(err))
		return err
	}
	if verbose {
		fmt.Fprintf(c.out, "removed directory '%s'\n", shown)
	}
	return nil
}
