package shell

import (
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"
)

func init() {
	register(&command{names: []string{"stat"}, run: cmdStat, opts: opts("c:Lt", "format=", "printf=", "dereference", "terse"), ignored: []string{"t", "terse"}})
}

func cmdStat(c *cmd) int {
	opts, args, ok := c.flags()
	if !ok {
		return 1
	}
	format, deref, printf := "", false, false
	for _, o := range opts {
		switch o.name {
		case "c", "format":
			format = o.val + "\n"
		case "printf":
			format, printf = o.val, true
		case "L", "dereference":
			deref = true
		}
	}
	if len(args) == 0 {
		c.errorf("missing operand")
		return 1
	}
	status := 0
	for _, a := range args {
		var fi *fileInfo
		var err error
		if deref {
			fi, err = c.stat(a)
		} else {
			fi, err = c.lstat(a)
		}
		if err != nil {
			c.errorf("cannot stat '%s': %s", a, errText(err))
			status = 1
			continue
		}
		target := ""
		if fi.mode&fs.ModeSymlink != 0 {
			target, _ = c.r.sh.ns.readlink(c.abs(a))
		}
		if format == "" {
			name := a
			if target != "" {
				name = fmt.Sprintf("%s -> %s", a, target)
			}
			fmt.Fprintf(c.out, "  File: %s\n  Size: %-15d Blocks: %-10d IO Block: 4096   %s\n", name, fi.size, fi.blocks, fileType(fi))
			fmt.Fprintf(c.out, "Device: 0,0\tInode: %-11d Links: %d\n", fi.ino, fi.nlink)
			fmt.Fprintf(c.out, "Access: (%04o/%s)  Uid: (%5d/%8s)   Gid: (%5d/%8s)\n", unixMode(fi.mode)&0o7777, modeString(fi.mode), fi.uid, c.owner(fi.uid, false), fi.gid, c.owner(fi.gid, false))
			for _, t := range []struct {
				n string
				v any
			}{{"Access", fi.atime}, {"Modify", fi.mtime}, {"Change", fi.ctime}} {
				fmt.Fprintf(c.out, "%s: %s\n", t.n, statTime(t.v))
			}
			c.out.WriteString(" Birth: -\n")
			continue
		}
		if printf {
			format, _ = unescape(format, false)
		}
		c.out.WriteString(c.statFormat(format, a, fi, target))
	}
	return status
}

func fileType(fi *fileInfo) string {
	m := fi.mode
	switch {
	case m.IsDir():
		return "directory"
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "fifo"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeCharDevice != 0:
		return "character special file"
	case m&fs.ModeDevice != 0:
		return "block special file"
	case fi.size == 0:
		return "regular empty file"
	}
	return "regular file"
}

func statTime(v any) string { return fmtStatTime(v.(time.Time)) }

// fmtStatTime is stat's time: 2024-01-02 03:04:05.123456789 +0000.
func fmtStatTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000000000 -0700") }

func (c *cmd) statFormat(f, name string, fi *fileInfo, target string) string {
	var b strings.Builder
	for i := 0; i < len(f); i++ {
		if f[i] != '%' || i+1 >= len(f) {
			b.WriteByte(f[i])
			continue
		}
		i++
		j := i
		for j < len(f) && strings.IndexByte("-+ #0123456789.", f[j]) >= 0 {
			j++
		}
		flags := f[i:j]
		i = j
		if i >= len(f) {
			break
		}
		var s string
		num := false
		switch f[i] {
		case 'n':
			s = name
		case 'N':
			s = "'" + name + "'"
			if target != "" {
				s += " -> '" + target + "'"
			}
		case 's':
			s, num = strconv.FormatInt(fi.size, 10), true
		case 'a':
			s = strconv.FormatUint(uint64(unixMode(fi.mode)&0o7777), 8)
		case 'A':
			s = modeString(fi.mode)
		case 'F':
			s = fileType(fi)
		case 'i':
			s, num = strconv.FormatUint(fi.ino, 10), true
		case 'h':
			s, num = strconv.Itoa(int(fi.nlink)), true
		case 'u':
			s, num = strconv.Itoa(int(fi.uid)), true
		case 'g':
			s, num = strconv.Itoa(int(fi.gid)), true
		case 'U':
			s = c.owner(fi.uid, false)
		case 'G':
			s = c.owner(fi.gid, false)
		case 'b':
			s, num = strconv.FormatInt(fi.blocks, 10), true
		case 'B':
			s = "512"
		case 'f':
			s = strconv.FormatUint(uint64(unixMode(fi.mode)), 16)
		case 'Y':
			s, num = strconv.FormatInt(fi.mtime.Unix(), 10), true
		case 'X':
			s, num = strconv.FormatInt(fi.atime.Unix(), 10), true
		case 'Z':
			s, num = strconv.FormatInt(fi.ctime.Unix(), 10), true
		case 'W':
			s = "0"
		case 'y':
			s = fmtStatTime(fi.mtime)
		case 'x':
			s = fmtStatTime(fi.atime)
		case 'z':
			s = fmtStatTime(fi.ctime)
		case 'w':
			s = "-"
		case '%':
			s = "%"
		default:
			s = "?"
		}
		if flags != "" {
			if num {
				n, _ := strconv.ParseInt(s, 10, 64)
				s = fmt.Sprintf("%"+flags+"d", n)
			} else {
				s = fmt.Sprintf("%"+flags+"s", s)
			}
		}
		b.WriteString(s)
	}
	return b.String()
}
