// Package mountinfo reads /proc/self/mountinfo: what is mounted where. It
// imports nothing but the standard library, so that the thin exec client
// (cmd/computerfs-exec) finds a workspace's store as the daemon's package
// fs does.
package mountinfo

import (
	"os"
	"path/filepath"
	"strings"
)

// Info describes the file system mounted at a directory.
type Info struct {
	FSType string // e.g. "fuse.computerfs"
	Source string // e.g. "computerfs:/var/lib/ws1"
}

// Find returns what is mounted exactly at dir (after resolving it to
// an absolute path without symlinks), from /proc/self/mountinfo; ok is
// false if nothing is.
func Find(dir string) (m Info, ok bool, err error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return m, false, err
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return m, false, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 5 || unescape(fields[4]) != abs {
			continue
		}
		// The optional fields end at "-"; fstype and source follow.
		for i := 6; i+2 < len(fields); i++ {
			if fields[i] == "-" {
				m = Info{FSType: fields[i+1], Source: unescape(fields[i+2])}
				break
			}
		}
		ok = true // the last mount at dir is the visible one: keep looking
	}
	return m, ok, nil
}

// FindSource returns the directory where a file system of source (as
// "computerfs:/var/lib/ws1") is mounted, from /proc/self/mountinfo: the
// last mount of it if there are several; ok is false if there is none.
func FindSource(source string) (dir string, ok bool, err error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", false, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		for i := 6; i+2 < len(fields); i++ {
			if fields[i] == "-" {
				if unescape(fields[i+2]) == source {
					dir, ok = unescape(fields[4]), true
				}
				break
			}
		}
	}
	return dir, ok, nil
}

// unescape undoes the octal escapes of /proc/self/mountinfo.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			ok := true
			for _, c := range s[i+1 : i+4] {
				if c < '0' || c > '7' {
					ok = false
					break
				}
				v = v*8 + byte(c-'0')
			}
			if ok {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
