package shell

import (
	"io"
	"path"
	"sort"
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
				c.fail(f, err)
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
