package sandbox

import (
	"os"
	"path"
	"path/filepath"
	"strings"
)

// HasProgram reports whether the root file system of a sandbox with this
// Rootfs ("" for the host's userland) has an executable regular file at
// p, an absolute path inside the sandbox, as a PATH search there would
// find it: symbolic links are followed as the sandbox sees them (an
// absolute target from the sandbox's root; in the host's userland only
// what the sandbox binds: /usr, /bin, /etc, /opt... never /home or /root).
// It answers the shell fast path's which and command -v.
func HasProgram(rootfs, p string) bool {
	if !path.IsAbs(p) {
		return false
	}
	hostLayout()
	visible := func(abs string) bool {
		if rootfs != "" {
			return true
		}
		top, _, _ := strings.Cut(strings.TrimPrefix(abs, "/"), "/")
		for _, e := range hostEntries {
			if e.name == top {
				return true
			}
		}
		return false
	}
	root := rootfs
	if root == "" {
		root = "/"
	}
	cur := "/"
	rest := strings.Split(strings.TrimPrefix(path.Clean(p), "/"), "/")
	for links := 0; len(rest) > 0; {
		name := rest[0]
		rest = rest[1:]
		if name == "" || name == "." {
			continue
		}
		next := path.Join(cur, name) // ".." stops at the sandbox's root
		if !visible(next) {
			return false
		}
		fi, err := os.Lstat(filepath.Join(root, next))
		if err != nil {
			return false
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			if links++; links > 40 {
				return false
			}
			target, err := os.Readlink(filepath.Join(root, next))
			if err != nil {
				return false
			}
			if path.IsAbs(target) {
				cur = "/"
			}
			rest = append(strings.Split(strings.TrimPrefix(target, "/"), "/"), rest...)
			continue
		}
		if len(rest) > 0 && !fi.IsDir() {
			return false
		}
		cur = next
		if len(rest) == 0 {
			return fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
		}
	}
	return false
}
