package shell

import (
	"io/fs"
	"strconv"
	"strings"
	"syscall"
)

func init() {
	register(&command{names: []string{"chmod"}, run: cmdChmod, opts: opts("Rvcf"+"rwxXstugoa" /* modes: chmod -w f */, "recursive", "verbose", "changes", "silent", "quiet"), ownArgs: true, check: chmodCheck})
}

// chmodCheck routes the options that cmdChmod's loop does not take (a
// mode such as -w is not an option).
func chmodCheck(args []string) string {
	for _, a := range args {
		if !strings.HasPrefix(a, "-") || isModeArg(a) || a == "--" {
			break
		}
		switch a {
		case "-R", "--recursive", "-v", "--verbose", "-c", "--changes", "-f", "--silent", "--quiet":
		default:
			return "chmod " + a + " is not built in"
		}
	}
	return ""
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
			if treeTooDeep(abs) {
				c.errorf("cannot read directory '%s': %s", shown, errText(syscall.ENAMETOOLONG))
				status = 1
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
