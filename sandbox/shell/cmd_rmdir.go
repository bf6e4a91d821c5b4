package shell

import (
	"path"
	"strings"
	"syscall"
)

func init() {
	register(&command{names: []string{"rmdir"}, run: cmdRmdir, opts: opts("pv", "parents", "verbose", "ignore-fail-on-non-empty"), ignored: []string{"v", "verbose"}})
}

func cmdRmdir(c *cmd) int {
	opts, dirs, ok := c.flags()
	if !ok {
		return 1
	}
	parents, ignore := false, false
	for _, o := range opts {
		switch o.name {
		case "p", "parents":
			parents = true
		case "ignore-fail-on-non-empty":
			ignore = true
		}
	}
	if len(dirs) == 0 {
		c.errorf("missing operand")
		return 1
	}
	status := 0
	for _, d := range dirs {
		for {
			fi, err := c.lstat(d)
			if err == nil && !fi.IsDir() {
				err = syscall.ENOTDIR
			}
			if err == nil {
				err = c.r.sh.ns.remove(c.abs(d))
			}
			if err != nil {
				if !(ignore && errno(err) == syscall.ENOTEMPTY) {
					c.errorf("failed to remove '%s': %s", d, errText(err))
					status = 1
				}
				break
			}
			if !parents {
				break
			}
			d = path.Dir(strings.TrimSuffix(d, "/"))
			if d == "." || d == "/" {
				break
			}
		}
	}
	return status
}
