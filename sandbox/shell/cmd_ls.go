package shell

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func init() {
	register(&command{names: []string{"ls"}, run: cmdLs, opts: opts("aAlRh1dFprtSUnogiCx", "all", "almost-all", "recursive", "human-readable", "directory",
		"classify?", "reverse", "color?", "numeric-uid-gid", "inode", "group-directories-first", "full-time", "time-style=", "indicator-style="), ignored: []string{"C", "x", "group-directories-first", "full-time", "time-style", "indicator-style"}})
}

type lsEntry struct {
	name   string // as shown
	path   string // absolute
	fi     *fileInfo
	target string
}

type lsOpts struct {
	all, almost, long, recursive, human, dirOnly, classify, slash, reverse, one bool
	sortBy                                                                      byte // 'n', 't', 'S', 'U'
	numeric, noOwner, noGroup, inode                                            bool
}

func cmdLs(c *cmd) int {
	opts, args, ok := c.flags()
	if !ok {
		return 2
	}
	o := lsOpts{sortBy: 'n'}
	for _, op := range opts {
		switch op.name {
		case "a", "all":
			o.all = true
		case "A", "almost-all":
			o.almost = true
		case "l":
			o.long = true
		case "R", "recursive":
			o.recursive = true
		case "h", "human-readable":
			o.human = true
		case "d", "directory":
			o.dirOnly = true
		case "F", "classify":
			o.classify = true
		case "p":
			o.slash = true
		case "r", "reverse":
			o.reverse = true
		case "t":
			o.sortBy = 't'
		case "S":
			o.sortBy = 'S'
		case "U":
			o.sortBy = 'U'
		case "n", "numeric-uid-gid":
			o.long, o.numeric = true, true
		case "o":
			o.long, o.noGroup = true, true
		case "g":
			o.long, o.noOwner = true, true
		case "i", "inode":
			o.inode = true
		}
	}
	if len(args) == 0 {
		args = []string{"."}
	}
	status := 0
	var files []lsEntry
	var dirs []lsEntry
	for _, a := range args {
		abs := c.abs(a)
		fi, err := c.r.sh.ns.stat(abs)
		if err != nil {
			lfi, lerr := c.r.sh.ns.lstat(abs)
			if lerr != nil {
				c.errorf("cannot access '%s': %s", a, errText(err))
				status = 2
				continue
			}
			fi = lfi
		}
		e := lsEntry{name: a, path: abs, fi: fi}
		if o.long || o.dirOnly || o.classify {
			if lfi, err := c.r.sh.ns.lstat(abs); err == nil && lfi.mode&fs.ModeSymlink != 0 && !strings.HasSuffix(a, "/") {
				e.fi = lfi
				e.target, _ = c.r.sh.ns.readlink(abs)
			}
		}
		if e.fi.IsDir() && !o.dirOnly {
			dirs = append(dirs, e)
		} else {
			files = append(files, e)
		}
	}
	o.sort(files)
	o.sort(dirs)
	c.lsPrint(files, &o, false)
	header := len(args) > 1 || o.recursive
	for i, d := range dirs {
		if i > 0 || len(files) > 0 {
			c.out.WriteString("\n")
		}
		if c.lsDir(d.path, d.name, &o, header) != 0 {
			status = 2
		}
	}
	return status
}

func (o *lsOpts) sort(e []lsEntry) {
	if o.sortBy == 'U' {
		return
	}
	sort.SliceStable(e, func(i, j int) bool {
		a, b := e[i], e[j]
		var less bool
		switch o.sortBy {
		case 't':
			if !a.fi.mtime.Equal(b.fi.mtime) {
				less = a.fi.mtime.After(b.fi.mtime)
			} else {
				less = a.name < b.name
			}
		case 'S':
			if a.fi.size != b.fi.size {
				less = a.fi.size > b.fi.size
			} else {
				less = a.name < b.name
			}
		default:
			less = a.name < b.name
		}
		if o.reverse {
			return !less
		}
		return less
	})
}

func (c *cmd) lsDir(abs, shown string, o *lsOpts, header bool) int {
	if header {
		fmt.Fprintf(c.out, "%s:\n", shown)
	}
	ents, err := c.readDir(abs)
	if err != nil {
		c.errorf("cannot open directory '%s': %s", shown, errText(err))
		return 2
	}
	var list []lsEntry
	if o.all {
		for _, n := range []string{".", ".."} {
			p := path.Join(abs, n)
			fi, err := c.r.sh.ns.stat(p)
			if err != nil {
				fi = virtInfo("/")
			}
			list = append(list, lsEntry{name: n, path: p, fi: fi})
		}
	}
	for _, e := range ents {
		if strings.HasPrefix(e.name, ".") && !o.all && !o.almost {
			continue
		}
		p := strings.TrimSuffix(abs, "/") + "/" + e.name
		le := lsEntry{name: e.name, path: p}
		if o.long || o.sortBy == 't' || o.sortBy == 'S' || o.classify || o.recursive || o.inode {
			fi, err := c.r.sh.ns.lstatEntry(abs, e)
			if err != nil {
				continue
			}
			le.fi = fi
			if fi.mode&fs.ModeSymlink != 0 {
				le.target, _ = c.r.sh.ns.readlink(p)
			}
		} else {
			le.fi = &fileInfo{name: e.name, mode: e.typ}
		}
		list = append(list, le)
	}
	o.sort(list)
	c.lsPrint(list, o, true)
	status := 0
	if o.recursive {
		for _, e := range list {
			if e.name == "." || e.name == ".." || !e.fi.IsDir() {
				continue
			}
			c.out.WriteString("\n")
			sub := strings.TrimSuffix(shown, "/") + "/" + e.name
			if treeTooDeep(e.path) {
				c.errorf("cannot open directory '%s': %s", sub, errText(syscall.ENAMETOOLONG))
				status = 2
				continue
			}
			if c.lsDir(e.path, sub, o, true) != 0 {
				status = 2
			}
		}
	}
	return status
}

func (c *cmd) lsPrint(list []lsEntry, o *lsOpts, inDir bool) {
	if !o.long {
		for _, e := range list {
			if o.inode {
				fmt.Fprintf(c.out, "%d ", e.fi.ino)
			}
			c.out.WriteString(e.name + o.suffix(e) + "\n")
		}
		return
	}
	if inDir {
		var blocks int64
		for _, e := range list {
			blocks += e.fi.blocks
		}
		if o.human {
			fmt.Fprintf(c.out, "total %s\n", humanSize(blocks*512, true))
		} else {
			fmt.Fprintf(c.out, "total %d\n", (blocks+1)/2)
		}
	}
	rows := make([][]string, len(list))
	widths := make([]int, 5)
	for i, e := range list {
		size := strconv.FormatInt(e.fi.size, 10)
		if o.human {
			size = humanSize(e.fi.size, true)
		}
		if e.fi.mode&fs.ModeDevice != 0 {
			size = "1, 3"
		}
		r := []string{strconv.Itoa(int(e.fi.nlink)), c.owner(e.fi.uid, o.numeric), c.owner(e.fi.gid, o.numeric), size}
		if o.inode {
			r = append(r, strconv.FormatUint(e.fi.ino, 10))
		}
		rows[i] = r
		for j, f := range r {
			widths[j] = max(widths[j], len(f))
		}
	}
	now := c.now()
	for i, e := range list {
		r := rows[i]
		var b strings.Builder
		if o.inode {
			fmt.Fprintf(&b, "%*s ", widths[4], r[4])
		}
		b.WriteString(modeString(e.fi.mode))
		fmt.Fprintf(&b, " %*s", widths[0], r[0])
		if !o.noOwner {
			fmt.Fprintf(&b, " %-*s", widths[1], r[1])
		}
		if !o.noGroup {
			fmt.Fprintf(&b, " %-*s", widths[2], r[2])
		}
		fmt.Fprintf(&b, " %*s %s %s", widths[3], r[3], lsTime(e.fi.mtime, now), e.name)
		if e.target != "" {
			b.WriteString(" -> " + e.target)
		} else {
			b.WriteString(o.suffix(e))
		}
		c.out.WriteString(b.String() + "\n")
	}
}

func (o *lsOpts) suffix(e lsEntry) string {
	if !o.classify && !o.slash {
		return ""
	}
	m := e.fi.mode
	switch {
	case m.IsDir():
		return "/"
	case !o.classify:
		return ""
	case m&fs.ModeSymlink != 0:
		return "@"
	case m&fs.ModeNamedPipe != 0:
		return "|"
	case m&fs.ModeSocket != 0:
		return "="
	case m.IsRegular() && m&0o111 != 0:
		return "*"
	}
	return ""
}

func (c *cmd) owner(id uint32, numeric bool) string {
	if id == 0 && !numeric {
		return "root"
	}
	return strconv.FormatUint(uint64(id), 10)
}

// lsTime is ls -l's date: the time of day for recent files, the year for
// files older than six months or in the future.
func lsTime(t, now time.Time) string {
	t = t.UTC()
	six := now.Add(-time.Duration(365.2425 * 24 / 2 * float64(time.Hour)))
	if t.After(six) && !t.After(now.Add(time.Hour)) {
		return t.Format("Jan _2 15:04")
	}
	return t.Format("Jan _2  2006")
}
