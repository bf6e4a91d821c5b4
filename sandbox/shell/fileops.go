package shell

import (
	"io/fs"
	"path"
	"strings"
	"syscall"
)

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
