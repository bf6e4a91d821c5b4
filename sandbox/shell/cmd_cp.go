package shell

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"syscall"
)

func init() {
	register(&command{names: []string{"cp"}, run: cmdCp, opts: opts("rRafinvpPLHdubt:T", "recursive", "archive", "force", "interactive", "no-clobber", "verbose",
		"preserve?", "no-dereference", "dereference", "update?", "target-directory=", "no-target-directory", "parents"), ignored: []string{"i", "interactive", "b", "parents"}})
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
	opts, args, ok := c.flags()
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
// symbolic link loop followed with -L would otherwise be endless), and
// maxTreePath the length of the paths they make. The agent makes trees
// of any depth (a chain of a million directories through the mount):
// every walk stops at these bounds with "File name too long", so that
// its recursion (a Go stack frame a level, which past a gigabyte is a
// fatal error that ends the daemon) and the paths it holds (one a
// level, each as long as the level is deep) stay small.
const (
	maxTreeDepth = 4096
	maxTreePath  = 64 << 10
)

// treeTooDeep reports whether the directory abs is past the bounds of a walk
// (maxTreeDepth levels below the namespace's root, or maxTreePath bytes).
func treeTooDeep(abs string) bool {
	return len(abs) > maxTreePath || strings.Count(abs, "/") > maxTreeDepth
}

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
		if slices.Contains(up, sfi.ino) || len(up) >= maxTreeDepth || treeTooDeep(sabs) || treeTooDeep(dabs) {
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

// copyData copies a file's content block by block, stopping with the
// call, and leaves a hole where the source reads as a block of zeros
// (a sparse file stays sparse: its holes are not written out).
func (c *cmd) copyData(out vfile, in io.Reader) error {
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
