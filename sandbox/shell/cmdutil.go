package shell

import (
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"mvdan.cc/sh/v3/expand"
)

// cmdTrueish is a command that has nothing to do here (sync, chown).
func cmdTrueish(c *cmd) int { return 0 }

// unescape expands backslash escapes as echo -e and printf %b do; stop
// reports \c.
func unescape(s string, echo bool) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if ch != '\\' || i+1 >= len(s) {
			b.WriteByte(ch)
			continue
		}
		i++
		switch s[i] {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'a':
			b.WriteByte(7)
		case 'b':
			b.WriteByte(8)
		case 'f':
			b.WriteByte(12)
		case 'v':
			b.WriteByte(11)
		case 'e', 'E':
			b.WriteByte(27)
		case '\\':
			b.WriteByte('\\')
		case 'c':
			return b.String(), true
		case '0', '1', '2', '3', '4', '5', '6', '7':
			j, n := i, 0
			max := 3
			if s[i] == '0' && echo {
				j++
				max = 4
			}
			for j < len(s) && j-i < max && s[j] >= '0' && s[j] <= '7' {
				n = n*8 + int(s[j]-'0')
				j++
			}
			b.WriteByte(byte(n))
			i = j - 1
		case 'x':
			j, n := i+1, 0
			for j < len(s) && j-i <= 2 && isHex(s[j]) {
				n = n*16 + hexVal(s[j])
				j++
			}
			if j == i+1 {
				b.WriteString("\\x")
				continue
			}
			b.WriteByte(byte(n))
			i = j - 1
		default:
			b.WriteByte('\\')
			b.WriteByte(s[i])
		}
	}
	return b.String(), false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func hexVal(c byte) int {
	switch {
	case c >= 'a':
		return int(c-'a') + 10
	case c >= 'A':
		return int(c-'A') + 10
	}
	return int(c - '0')
}

// eachInput calls fn with every operand opened ("-" or none: stdin);
// errors are reported and make the status 1.
// openFail reports an input that does not open as the command's GNU
// tool words it: head and tail "cannot open 'f' for reading" (a directory
// "error reading 'f'"), tac "failed to open", the others "f: error".
func (c *cmd) openFail(f string, err error) {
	dir := errno(err) == syscall.EISDIR
	switch {
	case (c.name == "head" || c.name == "tail") && dir:
		c.errorf("error reading '%s': %s", f, errText(err))
	case c.name == "head" || c.name == "tail":
		c.errorf("cannot open '%s' for reading: %s", f, errText(err))
	case c.name == "tac" && !dir:
		c.errorf("failed to open '%s' for reading: %s", f, errText(err))
	default:
		c.fail(f, err)
	}
}

func (c *cmd) eachInput(files []string, fn func(name string, r io.Reader) error) int {
	if len(files) == 0 {
		files = []string{"-"}
	}
	status := 0
	for _, f := range files {
		if c.canceled() {
			return 1
		}
		var r io.Reader
		if f == "-" {
			r = c.stdin
		} else {
			fi, err := c.stat(f)
			if err == nil && fi.IsDir() {
				err = syscall.EISDIR
			}
			var file vfile
			if err == nil {
				file, err = c.open(f)
			}
			if err != nil {
				c.openFail(f, err)
				status = 1
				continue
			}
			r = file
			defer file.Close()
		}
		if err := fn(f, r); err != nil {
			if err == errSilent {
				status = 1
				continue
			}
			if err == errOutputLimit || errno(err) == syscall.EPIPE {
				return 1
			}
			c.fail(f, err)
			status = 1
		}
	}
	return status
}

func splitLines(s string) []string {
	var out []string
	for len(s) > 0 {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

func baseName(n string) string {
	t := strings.TrimRight(n, "/")
	if t == "" {
		if n == "" {
			return ""
		}
		return "/"
	}
	return path.Base(t)
}

func dirName(n string) string {
	t := strings.TrimRight(n, "/")
	if t == "" {
		if strings.HasPrefix(n, "/") {
			return "/"
		}
		return "."
	}
	i := strings.LastIndexByte(t, '/')
	if i < 0 {
		return "."
	}
	d := strings.TrimRight(t[:i], "/")
	if d == "" {
		return "/"
	}
	return d
}

// exported lists the exported variables, sorted by name.
func exported(env expand.Environ) []string {
	seen := map[string]string{}
	env.Each(func(name string, vr expand.Variable) bool {
		if vr.Exported && vr.IsSet() && vr.Kind == expand.String {
			seen[name] = vr.Str
		} else {
			delete(seen, name)
		}
		return true
	})
	var out []string
	for k, v := range seen {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

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
