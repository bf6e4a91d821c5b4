package shell

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

func init() {
	register(cmdLs, "ls")
	register(cmdTree, "tree")
	register(cmdDu, "du")
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
	opts, args, ok := c.flags("aAlRh1dFprtSUnogiCx", "all", "almost-all", "recursive", "human-readable", "directory",
		"classify?", "reverse", "color?", "numeric-uid-gid", "inode", "group-directories-first", "full-time", "time-style=", "indicator-style=")
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
			fi, err := c.r.sh.ns.lstat(p)
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

// modeString is ls's -rwxr-xr-x.
func modeString(m fs.FileMode) string {
	b := []byte("----------")
	switch {
	case m.IsDir():
		b[0] = 'd'
	case m&fs.ModeSymlink != 0:
		b[0] = 'l'
	case m&fs.ModeNamedPipe != 0:
		b[0] = 'p'
	case m&fs.ModeSocket != 0:
		b[0] = 's'
	case m&fs.ModeCharDevice != 0:
		b[0] = 'c'
	case m&fs.ModeDevice != 0:
		b[0] = 'b'
	}
	const rwx = "rwxrwxrwx"
	for i := 0; i < 9; i++ {
		if m&(1<<(8-i)) != 0 {
			b[i+1] = rwx[i]
		}
	}
	if m&fs.ModeSetuid != 0 {
		b[3] = "Ss"[boolInt(m&0o100 != 0)]
	}
	if m&fs.ModeSetgid != 0 {
		b[6] = "Ss"[boolInt(m&0o010 != 0)]
	}
	if m&fs.ModeSticky != 0 {
		b[9] = "Tt"[boolInt(m&0o001 != 0)]
	}
	return string(b)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// humanSize is the -h form: 1.5K, 23M; rounded up as GNU does.
func humanSize(n int64, ceil bool) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10)
	}
	units := "KMGTPE"
	v := float64(n)
	u := -1
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	if v < 10 {
		r := v * 10
		if ceil {
			r = ceilf(r)
		}
		if r >= 100 {
			return fmt.Sprintf("%d%c", 10, units[u])
		}
		return fmt.Sprintf("%.1f%c", r/10, units[u])
	}
	r := v
	if ceil {
		r = ceilf(r)
	}
	if r >= 1024 && u < len(units)-1 {
		return fmt.Sprintf("1.0%c", units[u+1])
	}
	return fmt.Sprintf("%d%c", int64(r), units[u])
}

func ceilf(v float64) float64 {
	i := float64(int64(v))
	if v > i+1e-9 {
		return i + 1
	}
	return i
}

func cmdTree(c *cmd) int {
	opts, args, ok := c.flags("adfL:IP:", "noreport", "dirsfirst")
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
			isDir := e.typ.IsDir()
			if e.typ&fs.ModeSymlink != 0 {
				if fi, err := c.r.sh.ns.stat(p); err == nil && fi.IsDir() {
					isDir = false // tree does not follow links
				}
			}
			if dirsOnly && !isDir {
				continue
			}
			list = append(list, e)
		}
		for i, e := range list {
			last := i == len(list)-1
			branch, next := "├── ", "│   "
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
			if e.typ.IsDir() {
				nd++
				walk(p, shown+"/"+e.name, prefix+next, level+1)
			} else {
				nf++
			}
		}
	}
	for _, a := range args {
		fi, err := c.stat(a)
		if err != nil || !fi.IsDir() {
			c.out.WriteString(a + "  [error opening dir]\n")
			continue
		}
		c.out.WriteString(a + "\n")
		walk(strings.TrimSuffix(c.abs(a), "/"), strings.TrimSuffix(a, "/"), "", 0)
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
	return 0
}

func cmdDu(c *cmd) int {
	opts, args, ok := c.flags("shacd:bkm", "summarize", "human-readable", "all", "total", "max-depth=", "apparent-size", "bytes")
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
		if fi.IsDir() {
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
