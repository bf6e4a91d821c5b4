package shell

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func init() {
	register(cmdCp, "cp")
	register(cmdMv, "mv")
	register(cmdLn, "ln")
	register(cmdReadlink, "readlink")
	register(cmdRealpath, "realpath")
	register(cmdStat, "stat")
	register(cmdChmod, "chmod")
	register(cmdMktemp, "mktemp")
	register(cmdTrueish, "chown", "chgrp")
}

type cpOpts struct {
	recursive, force, noClobber, verbose, preserve, noDeref, update, targetIsFile bool
	// deref is the last of -H, -L, -P given (0: none): -L follows every
	// symbolic link, -H those of the operands, -P none; without one, cp
	// follows operands and copies links as links when recursive, as GNU
	// cp does.
	deref byte
	made  map[uint64]bool // the directories this cp made: copying one of them again is copying into itself
}

func cmdCp(c *cmd) int {
	opts, args, ok := c.flags("rRafinvpPLHdubt:T", "recursive", "archive", "force", "interactive", "no-clobber", "verbose",
		"preserve?", "no-dereference", "dereference", "update?", "target-directory=", "no-target-directory", "parents")
	if !ok {
		return 1
	}
	var o cpOpts
	target := ""
	for _, op := range opts {
		switch op.name {
		case "r", "R", "recursive":
			o.recursive = true
		case "a", "archive":
			o.recursive, o.preserve, o.noDeref = true, true, true
		case "f", "force":
			o.force = true
		case "n", "no-clobber":
			o.noClobber = true
		case "v", "verbose":
			o.verbose = true
		case "p", "preserve":
			o.preserve = true
		case "P", "d", "no-dereference":
			o.deref = 'P'
		case "L", "dereference":
			o.deref = 'L'
		case "H":
			o.deref = 'H'
		case "u", "update":
			o.update = true
		case "t", "target-directory":
			target = op.val
		case "T", "no-target-directory":
			o.targetIsFile = true
		}
	}
	switch o.deref {
	case 0:
		o.noDeref = o.noDeref || o.recursive
	case 'P':
		o.noDeref = true
	default:
		o.noDeref = false
	}
	return c.copyMove(args, target, &o, false)
}

func cmdMv(c *cmd) int {
	opts, args, ok := c.flags("finvut:T", "force", "interactive", "no-clobber", "verbose", "update?", "target-directory=", "no-target-directory")
	if !ok {
		return 1
	}
	var o cpOpts
	target := ""
	for _, op := range opts {
		switch op.name {
		case "n", "no-clobber":
			o.noClobber = true
		case "v", "verbose":
			o.verbose = true
		case "u", "update":
			o.update = true
		case "t", "target-directory":
			target = op.val
		case "T", "no-target-directory":
			o.targetIsFile = true
		}
	}
	o.recursive, o.preserve, o.noDeref = true, true, true
	return c.copyMove(args, target, &o, true)
}

func (c *cmd) copyMove(args []string, target string, o *cpOpts, move bool) int {
	if target == "" {
		if len(args) < 2 {
			if len(args) == 0 {
				c.errorf("missing file operand")
			} else {
				c.errorf("missing destination file operand after '%s'", args[0])
			}
			return 1
		}
		target, args = args[len(args)-1], args[:len(args)-1]
	}
	tfi, terr := c.stat(target)
	intoDir := terr == nil && tfi.IsDir() && !o.targetIsFile
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
		if c.copyOne(src, dst, o, move) != nil {
			status = 1
		}
	}
	return status
}

func (c *cmd) copyOne(src, dst string, o *cpOpts, move bool) error {
	sabs, dabs := c.abs(src), c.abs(dst)
	sfi, err := c.r.sh.ns.lstat(sabs)
	followTop := !o.noDeref || o.deref == 0 && !o.recursive
	if err == nil && followTop && sfi.mode&fs.ModeSymlink != 0 {
		sfi, err = c.r.sh.ns.stat(sabs)
	}
	if err != nil {
		c.errorf("cannot stat '%s': %s", src, errText(err))
		return err
	}
	dfi, derr := c.r.sh.ns.stat(dabs)
	if derr == nil {
		if dfi.ino == sfi.ino && !(move && sabs != dabs && sfi.nlink > 1) {
			c.errorf("'%s' and '%s' are the same file", src, dst)
			return syscall.EINVAL
		}
		if o.noClobber {
			return nil
		}
		if o.update && !sfi.mtime.After(dfi.mtime) {
			return nil
		}
		if sfi.IsDir() && !dfi.IsDir() {
			c.errorf("cannot overwrite non-directory '%s' with directory '%s'", dst, src)
			return syscall.ENOTDIR
		}
		if !sfi.IsDir() && dfi.IsDir() {
			c.errorf("cannot overwrite directory '%s' with non-directory", dst)
			return syscall.EISDIR
		}
	}
	if sfi.IsDir() && (dabs+"/" == sabs+"/" || strings.HasPrefix(dabs+"/", sabs+"/")) {
		verb := "copy"
		if move {
			verb = "move"
		}
		c.errorf("cannot %s '%s' to a subdirectory of itself, '%s'", verb, src, dst)
		return syscall.EINVAL
	}
	if move {
		err := c.r.sh.ns.rename(sabs, dabs)
		if err == nil {
			if o.verbose {
				fmt.Fprintf(c.out, "renamed '%s' -> '%s'\n", src, dst)
			}
			return nil
		}
		if errno(err) != syscall.EXDEV {
			c.errorf("cannot move '%s' to '%s': %s", src, dst, errText(err))
			return err
		}
		// across /workspace and /tmp: copy, then remove
		if err := c.copyTree(sabs, dabs, src, dst, sfi, o); err != nil {
			return err
		}
		if sfi.IsDir() {
			return c.removeTree(sabs, src, false)
		}
		return c.r.sh.ns.remove(sabs)
	}
	if sfi.IsDir() && !o.recursive {
		c.errorf("-r not specified; omitting directory '%s'", src)
		return syscall.EISDIR
	}
	return c.copyTree(sabs, dabs, src, dst, sfi, o)
}

// maxTreeDepth bounds how deep the commands that walk a tree go (a
// symbolic link loop followed with -L would otherwise be endless).
const maxTreeDepth = 4096

func (c *cmd) copyTree(sabs, dabs, src, dst string, sfi *fileInfo, o *cpOpts) error {
	return c.copyTreeIn(sabs, dabs, src, dst, sfi, o, nil)
}

// copyTreeIn copies under the directories of inodes up (the ancestors
// being copied: a loop of links is found there).
func (c *cmd) copyTreeIn(sabs, dabs, src, dst string, sfi *fileInfo, o *cpOpts, up []uint64) error {
	if c.canceled() {
		return context.Cause(c.ctx)
	}
	ns := c.r.sh.ns
	switch {
	case sfi.IsDir():
		if slices.Contains(up, sfi.ino) || len(up) >= maxTreeDepth {
			c.errorf("cannot copy cyclic directory '%s': File system loop detected", src)
			return syscall.ELOOP
		}
		if o.made[sfi.ino] {
			c.errorf("cannot copy a directory, '%s', into itself, '%s'", src, dst)
			return syscall.EINVAL
		}
		if err := ns.mkdir(dabs, uint32(sfi.mode.Perm())); err != nil && errno(err) != syscall.EEXIST {
			c.errorf("cannot create directory '%s': %s", dst, errText(err))
			return err
		}
		if dfi, err := ns.stat(dabs); err == nil {
			if o.made == nil {
				o.made = map[uint64]bool{}
			}
			o.made[dfi.ino] = true
		}
		if o.verbose {
			fmt.Fprintf(c.out, "'%s' -> '%s'\n", src, dst)
		}
		ents, err := c.readDir(sabs)
		if err != nil {
			c.errorf("cannot access '%s': %s", src, errText(err))
			return err
		}
		var first error
		for _, e := range ents {
			s, d := sabs+"/"+e.name, dabs+"/"+e.name
			fi, err := ns.lstat(s)
			if err == nil && !o.noDeref && o.deref != 'H' && fi.mode&fs.ModeSymlink != 0 {
				fi, err = ns.stat(s)
			}
			if err == nil {
				err = c.copyTreeIn(s, d, src+"/"+e.name, dst+"/"+e.name, fi, o, append(up, sfi.ino))
			}
			if err != nil && first == nil {
				first = err
			}
		}
		if o.preserve {
			ns.chmod(dabs, uint32(sfi.mode.Perm()))
			ns.chtimes(dabs, sfi.atime, sfi.mtime)
		}
		return first
	case sfi.mode&fs.ModeSymlink != 0:
		t, err := ns.readlink(sabs)
		if err == nil {
			ns.remove(dabs)
			err = ns.symlink(t, dabs)
		}
		if err != nil {
			c.errorf("cannot create symbolic link '%s': %s", dst, errText(err))
		} else if o.verbose {
			fmt.Fprintf(c.out, "'%s' -> '%s'\n", src, dst)
		}
		return err
	case !sfi.mode.IsRegular() && len(up) > 0:
		// a device or pipe met while recursing (through a link to /dev):
		// copied as the special file it is by GNU cp, never read
		c.errorf("cannot create special file '%s': Operation not permitted", dst)
		return syscall.EPERM
	}
	in, err := ns.open(sabs, O_RDONLY, 0, nil, nil, nil)
	if err != nil {
		c.errorf("cannot open '%s' for reading: %s", src, errText(err))
		return err
	}
	defer in.Close()
	out, err := ns.open(dabs, O_WRONLY|O_CREATE|O_TRUNC, uint32(sfi.mode.Perm()), nil, nil, nil)
	if err != nil {
		c.errorf("cannot create regular file '%s': %s", dst, errText(err))
		return err
	}
	err = c.copyData(out, in)
	out.Close()
	if err != nil {
		c.errorf("error writing '%s': %s", dst, errText(err))
		return err
	}
	if o.preserve {
		ns.chmod(dabs, uint32(sfi.mode.Perm()))
		ns.chtimes(dabs, sfi.atime, sfi.mtime)
	}
	if o.verbose {
		fmt.Fprintf(c.out, "'%s' -> '%s'\n", src, dst)
	}
	return nil
}

func cmdLn(c *cmd) int {
	opts, args, ok := c.flags("sfnvrTt:", "symbolic", "force", "no-dereference", "verbose", "relative", "no-target-directory", "target-directory=")
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

// canonical resolves every link in p (realpath, readlink -f). With
// missingOK the last part may be missing (-m for all parts).
func (c *cmd) canonical(p string, mode byte) (string, error) {
	abs := strings.TrimSuffix(c.abs(p), "/")
	if abs == "" {
		abs = "/"
	}
	parts := split(abs)
	cur := "/"
	links := 0
	for i := 0; i < len(parts); i++ {
		next := path.Join(cur, parts[i])
		if parts[i] == ".." {
			cur = path.Dir(cur)
			continue
		}
		fi, err := c.r.sh.ns.lstat(next)
		if err != nil {
			last := i == len(parts)-1
			if mode == 'm' || mode == 'f' && last && errno(err) == syscall.ENOENT {
				cur = next
				continue
			}
			return "", err
		}
		if fi.mode&fs.ModeSymlink != 0 {
			if links++; links > 40 {
				return "", syscall.ELOOP
			}
			t, err := c.r.sh.ns.readlink(next)
			if err != nil {
				return "", err
			}
			rest := parts[i+1:]
			if strings.HasPrefix(t, "/") {
				// the workspace's links are rooted at the workspace
				b, _, _, _ := c.r.sh.ns.route(next)
				if b == c.r.sh.ns.ws {
					t = wsRoot + t
				}
				cur = "/"
			}
			parts = append(split(t), rest...)
			i = -1
			continue
		}
		if !fi.IsDir() && i < len(parts)-1 && mode != 'm' {
			return "", syscall.ENOTDIR
		}
		cur = next
	}
	return cur, nil
}

func cmdReadlink(c *cmd) int {
	opts, args, ok := c.flags("femnqsvz", "canonicalize", "canonicalize-existing", "canonicalize-missing", "no-newline", "quiet", "silent", "verbose")
	if !ok {
		return 1
	}
	mode := byte(0)
	for _, o := range opts {
		switch o.name {
		case "f", "canonicalize":
			mode = 'f'
		case "e", "canonicalize-existing":
			mode = 'e'
		case "m", "canonicalize-missing":
			mode = 'm'
		}
	}
	if len(args) == 0 {
		c.errorf("missing operand")
		return 1
	}
	status := 0
	for _, a := range args {
		if mode == 0 {
			t, err := c.r.sh.ns.readlink(c.abs(a))
			if err != nil {
				status = 1
				continue
			}
			c.out.WriteString(t + "\n")
			continue
		}
		p, err := c.canonical(a, mode)
		if err != nil {
			status = 1
			continue
		}
		c.out.WriteString(p + "\n")
	}
	return status
}

func cmdRealpath(c *cmd) int {
	opts, args, ok := c.flags("emsqz", "canonicalize-existing", "canonicalize-missing", "strip", "no-symlinks", "quiet", "relative-to=")
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

func cmdStat(c *cmd) int {
	opts, args, ok := c.flags("c:Lt", "format=", "printf=", "dereference", "terse")
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

func cmdChmod(c *cmd) int {
	args := c.args[1:]
	recursive, verbose := false, false
	for len(args) > 0 && strings.HasPrefix(args[0], "-") && !isModeArg(args[0]) {
		switch args[0] {
		case "-R", "--recursive":
			recursive = true
		case "-v", "--verbose", "-c", "--changes":
			verbose = true
		case "-f", "--silent", "--quiet":
		case "--":
			args = args[1:]
			goto done
		default:
			c.errorf("invalid option -- '%s'", strings.TrimLeft(args[0], "-"))
			return 1
		}
		args = args[1:]
	}
done:
	_ = verbose
	if len(args) < 2 {
		c.errorf("missing operand")
		return 1
	}
	mode := args[0]
	status := 0
	var apply func(abs, shown string)
	apply = func(abs, shown string) {
		fi, err := c.r.sh.ns.stat(abs)
		if err != nil {
			c.errorf("cannot access '%s': %s", shown, errText(err))
			status = 1
			return
		}
		m, ok := applyMode(mode, uint32(unixMode(fi.mode)&0o7777), fi.IsDir())
		if !ok {
			c.errorf("invalid mode: '%s'", mode)
			status = 1
			return
		}
		if err := c.r.sh.ns.chmod(abs, m); err != nil {
			c.errorf("changing permissions of '%s': %s", shown, errText(err))
			status = 1
		}
		if recursive && fi.IsDir() {
			if lfi, err := c.r.sh.ns.lstat(abs); err == nil && lfi.mode&fs.ModeSymlink != 0 {
				return
			}
			ents, _ := c.readDir(abs)
			for _, e := range ents {
				if e.typ&fs.ModeSymlink != 0 {
					continue
				}
				apply(strings.TrimSuffix(abs, "/")+"/"+e.name, strings.TrimSuffix(shown, "/")+"/"+e.name)
			}
		}
	}
	for _, f := range args[1:] {
		apply(c.abs(f), f)
	}
	return status
}

func isModeArg(s string) bool {
	return len(s) > 1 && strings.Trim(s[1:], "rwxXstugoa,+-=0123456789") == ""
}

// applyMode applies a chmod mode (octal or symbolic) to old.
func applyMode(spec string, old uint32, isDir bool) (uint32, bool) {
	if v, err := strconv.ParseUint(spec, 8, 32); err == nil {
		m := uint32(v)
		if isDir && len(spec) < 5 {
			m |= old & (0o6000) // directories keep setuid/setgid, as GNU does
			m = m&^0o6000 | uint32(v)&0o7000 | old&0o6000&^(uint32(v)&0o7000)
			if len(spec) <= 3 {
				m = uint32(v) | old&0o6000
			}
		}
		return m, true
	}
	m := old
	for _, clause := range strings.Split(spec, ",") {
		i := 0
		var who uint32
		for i < len(clause) && strings.IndexByte("ugoa", clause[i]) >= 0 {
			switch clause[i] {
			case 'u':
				who |= 0o4700
			case 'g':
				who |= 0o2070
			case 'o':
				who |= 0o1007
			case 'a':
				who |= 0o7777
			}
			i++
		}
		umask := uint32(0)
		if who == 0 {
			who = 0o7777
			umask = 0o022
		}
		if i >= len(clause) {
			return 0, false
		}
		for i < len(clause) {
			op := clause[i]
			if op != '+' && op != '-' && op != '=' {
				return 0, false
			}
			i++
			var perm uint32
			for i < len(clause) && strings.IndexByte("rwxXstugo", clause[i]) >= 0 {
				switch clause[i] {
				case 'r':
					perm |= 0o444
				case 'w':
					perm |= 0o222
				case 'x':
					perm |= 0o111
				case 'X':
					if isDir || old&0o111 != 0 {
						perm |= 0o111
					}
				case 's':
					perm |= 0o6000
				case 't':
					perm |= 0o1000
				case 'u':
					u := (m >> 6) & 7
					perm |= u<<6 | u<<3 | u
				case 'g':
					g := (m >> 3) & 7
					perm |= g<<6 | g<<3 | g
				case 'o':
					o := m & 7
					perm |= o<<6 | o<<3 | o
				}
				i++
			}
			perm &= who &^ umask
			switch op {
			case '+':
				m |= perm
			case '-':
				m &^= perm
			case '=':
				m = m&^(who&0o777|who&0o7000&^0o6000*boolU(isDir)) | perm
			}
		}
	}
	return m, true
}

func boolU(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

func cmdMktemp(c *cmd) int {
	opts, args, ok := c.flags("dqup:t", "directory", "quiet", "dry-run", "tmpdir?", "suffix=")
	if !ok {
		return 1
	}
	dir, isDir, dry, useTmp, suffix := "", false, false, false, ""
	for _, o := range opts {
		switch o.name {
		case "d", "directory":
			isDir = true
		case "u", "dry-run":
			dry = true
		case "p", "tmpdir":
			dir = o.val
			useTmp = true
		case "t":
			useTmp = true
		case "suffix":
			suffix = o.val
		}
	}
	template := "tmp.XXXXXXXXXX"
	if len(args) > 0 {
		template = args[0]
	} else {
		useTmp = true
	}
	if useTmp && dir == "" {
		dir = c.getenv("TMPDIR")
		if dir == "" {
			dir = tmpRoot
		}
	}
	n := len(template) - len(strings.TrimRight(template, "X"))
	if n < 3 {
		c.errorf("too few X's in template '%s'", template)
		return 1
	}
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	for try := 0; try < 100; try++ {
		b := make([]byte, n)
		rand.Read(b)
		for i := range b {
			b[i] = letters[int(b[i])%len(letters)]
		}
		name := template[:len(template)-n] + string(b) + suffix
		if dir != "" {
			name = strings.TrimSuffix(dir, "/") + "/" + name
		}
		abs := c.abs(name)
		if dry {
			c.out.WriteString(name + "\n")
			return 0
		}
		var err error
		if isDir {
			err = c.r.sh.ns.mkdir(abs, 0o700)
		} else {
			var f vfile
			f, err = c.r.sh.ns.open(abs, O_WRONLY|O_CREATE|O_EXCL, 0o600, nil, nil, nil)
			if err == nil {
				f.Close()
			}
		}
		if errno(err) == syscall.EEXIST {
			continue
		}
		if err != nil {
			c.errorf("failed to create %s via template '%s': %s", map[bool]string{true: "directory", false: "file"}[isDir], name, errText(err))
			return 1
		}
		c.out.WriteString(name + "\n")
		return 0
	}
	return 1
}

// copyData copies a file's content block by block, stopping with the
// call, and leaves a hole where the source reads as a block of zeros
// (a sparse file stays sparse: its holes are not written out).
func (c *cmd) copyData(out, in vfile) error {
	buf := make([]byte, 128<<10)
	var off, pos int64
	hole := false
	for {
		if c.canceled() {
			return context.Cause(c.ctx)
		}
		n, err := io.ReadFull(in, buf)
		if n > 0 {
			if allZero(buf[:n]) {
				hole = true
			} else {
				if pos != off {
					if _, err := out.Seek(off, io.SeekStart); err != nil {
						return err
					}
				}
				if _, werr := out.Write(buf[:n]); werr != nil {
					return werr
				}
				pos = off + int64(n)
				hole = false
			}
			off += int64(n)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return err
		}
	}
	if hole {
		return out.Truncate(off)
	}
	return nil
}

func allZero(b []byte) bool {
	for len(b) >= 8 {
		if b[0]|b[1]|b[2]|b[3]|b[4]|b[5]|b[6]|b[7] != 0 {
			return false
		}
		b = b[8:]
	}
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}
