package shell

import (
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"syscall"
)

func init() {
	register(&command{names: []string{"tree"}, run: cmdTree, opts: opts("adfL:I:P:", "noreport", "dirsfirst"), ignored: []string{"P", "dirsfirst"}})
}

func cmdTree(c *cmd) int {
	opts, args, ok := c.flags()
	if !ok {
		return 1
	}
	all, dirsOnly, full, depth, noreport := false, false, false, -1, false
	var ignore []string
	for _, o := range opts {
		switch o.name {
		case "a":
			all = true
		case "d":
			dirsOnly = true
		case "f":
			full = true
		case "L":
			depth, _ = strconv.Atoi(o.val)
		case "I":
			ignore = strings.Split(o.val, "|")
		case "noreport":
			noreport = true
		}
	}
	if len(args) == 0 {
		args = []string{"."}
	}
	nd, nf := 0, 0
	var walk func(abs, shown, prefix string, level int)
	walk = func(abs, shown, prefix string, level int) {
		if depth >= 0 && level >= depth {
			return
		}
		if treeTooDeep(abs) || len(prefix) > maxTreePath {
			c.errorf("%s: %s", shown, errText(syscall.ENAMETOOLONG))
			return
		}
		ents, err := c.readDir(abs)
		if err != nil {
			return
		}
		var list []dirEntry
		for _, e := range ents {
			if strings.HasPrefix(e.name, ".") && !all {
				continue
			}
			skip := false
			for _, pat := range ignore {
				if m, _ := path.Match(pat, e.name); m {
					skip = true
				}
			}
			if skip {
				continue
			}
			p := abs + "/" + e.name
			// A link to a directory is shown (and counted) as one,
			// and not followed.
			isDir := e.typ.IsDir() || e.typ&fs.ModeSymlink != 0 && linkToDir(c, p)
			if dirsOnly && !isDir {
				continue
			}
			list = append(list, e)
		}
		for i, e := range list {
			last := i == len(list)-1
			// tree 2 writes the rule's continuation with two no-break
			// spaces (U+00A0), as its UTF-8 output does.
			branch, next := "├── ", "│\u00a0\u00a0 "
			if last {
				branch, next = "└── ", "    "
			}
			name := e.name
			if full {
				name = shown + "/" + e.name
			}
			p := abs + "/" + e.name
			if e.typ&fs.ModeSymlink != 0 {
				t, _ := c.r.sh.ns.readlink(p)
				name += " -> " + t
			}
			c.out.WriteString(prefix + branch + name + "\n")
			switch {
			case e.typ.IsDir():
				nd++
				walk(p, shown+"/"+e.name, prefix+next, level+1)
			case e.typ&fs.ModeSymlink != 0 && linkToDir(c, p):
				nd++ // counted as a directory, not followed
			default:
				nf++
			}
		}
	}
	status := 0
	for _, a := range args {
		fi, err := c.stat(a)
		if err != nil || !fi.IsDir() {
			c.out.WriteString(a + "  [error opening dir]\n")
			if err != nil {
				status = 2 // a file is counted, and no error
			} else {
				nf++
			}
			continue
		}
		c.out.WriteString(a + "\n")
		before := nd + nf
		walk(strings.TrimSuffix(c.abs(a), "/"), strings.TrimSuffix(a, "/"), "", 0)
		if nd+nf > before {
			nd++ // tree 2 counts a directory it is given when it lists something in it
		}
	}
	if !noreport {
		dw, fw := "directories", "files"
		if nd == 1 {
			dw = "directory"
		}
		if nf == 1 {
			fw = "file"
		}
		if dirsOnly {
			fmt.Fprintf(c.out, "\n%d %s\n", nd, dw)
		} else {
			fmt.Fprintf(c.out, "\n%d %s, %d %s\n", nd, dw, nf, fw)
		}
	}
	return status
}

// linkToDir tells whether the symbolic link p leads to a directory.
func linkToDir(c *cmd, p string) bool {
	fi, err := c.r.sh.ns.stat(p)
	return err == nil && fi.IsDir()
}
