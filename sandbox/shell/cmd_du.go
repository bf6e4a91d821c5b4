package shell

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
)

func init() {
	register(&command{names: []string{"du"}, run: cmdDu, opts: opts("shacd:bkm", "summarize", "human-readable", "all", "total", "max-depth=", "apparent-size", "bytes")})
}

func cmdDu(c *cmd) int {
	opts, args, ok := c.flags()
	if !ok {
		return 1
	}
	summarize, human, all, total, maxDepth, apparent, unit := false, false, false, false, -1, false, int64(1024)
	for _, o := range opts {
		switch o.name {
		case "s", "summarize":
			summarize = true
		case "h", "human-readable":
			human = true
		case "a", "all":
			all = true
		case "c", "total":
			total = true
		case "d", "max-depth":
			maxDepth, _ = strconv.Atoi(o.val)
		case "apparent-size":
			apparent = true
		case "b", "bytes":
			apparent, unit = true, 1
		case "k":
			unit = 1024
		case "m":
			unit = 1 << 20
		}
	}
	if summarize {
		maxDepth = 0
	}
	if len(args) == 0 {
		args = []string{"."}
	}
	size := func(fi *fileInfo) int64 {
		if apparent {
			if fi.IsDir() {
				return 0
			}
			return fi.size
		}
		return fi.blocks * 512
	}
	show := func(n int64, name string) {
		if human {
			fmt.Fprintf(c.out, "%s\t%s\n", humanSize(n, true), name)
		} else {
			fmt.Fprintf(c.out, "%d\t%s\n", (n+unit-1)/unit, name)
		}
	}
	var grand int64
	status := 0
	seen := map[uint64]bool{}
	var walk func(abs, shown string, depth int) int64
	walk = func(abs, shown string, depth int) int64 {
		fi, err := c.r.sh.ns.lstat(abs)
		if err != nil {
			c.errorf("cannot access '%s': %s", shown, errText(err))
			status = 1
			return 0
		}
		if fi.nlink > 1 && !fi.IsDir() {
			if seen[fi.ino] {
				return 0
			}
			seen[fi.ino] = true
		}
		n := size(fi)
		if fi.IsDir() && treeTooDeep(abs) {
			c.errorf("cannot read directory '%s': %s", shown, errText(syscall.ENAMETOOLONG))
			status = 1
		} else if fi.IsDir() {
			ents, _ := c.readDir(abs)
			for _, e := range ents {
				n += walk(strings.TrimSuffix(abs, "/")+"/"+e.name, strings.TrimSuffix(shown, "/")+"/"+e.name, depth+1)
			}
			if maxDepth < 0 || depth <= maxDepth {
				show(n, shown)
			}
		} else if depth == 0 || all && (maxDepth < 0 || depth <= maxDepth) {
			show(n, shown)
		}
		return n
	}
	for _, a := range args {
		grand += walk(c.abs(a), a, 0)
	}
	if total {
		show(grand, "total")
	}
	return status
}
