package spec

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"
)

// MaxTreePath is the longest path CheckTreePath accepts (Linux's PATH_MAX).
const MaxTreePath = 4096

// CheckTreePath checks a path that upstream content names (a git tree
// entry, an S3 object key below the source's prefix) before anything is
// written for it below a source's directory. Import and refresh of git and
// S3 sources all use it, so that what one refuses the others refuse too.
//
// A tree path is relative and slash-separated, with no empty, "." or ".."
// component, no NUL byte, no backslash, no name longer than 255 bytes and
// no component that git would take for its own directory: ".git" in any
// case, also as NTFS (trailing dots and spaces, the short name "git~1")
// and HFS+ (ignorable code points such as U+200C) spell it. These are the
// rules of git's verify_path with core.protectNTFS and core.protectHFS,
// which are stricter than Linux needs, joined with the workspace's own:
// such a path stays inside its source's directory and never reaches the
// source's .git or another source.
func CheckTreePath(p string) error {
	switch {
	case p == "":
		return errors.New("an empty path")
	case len(p) > MaxTreePath:
		return fmt.Errorf("a path of %d bytes (at most %d)", len(p), MaxTreePath)
	case strings.IndexByte(p, 0) >= 0:
		return fmt.Errorf("path %q contains a NUL byte", p)
	case strings.IndexByte(p, '\\') >= 0:
		return fmt.Errorf("path %q contains a backslash", p)
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("path %q is absolute", p)
	}
	for _, c := range strings.Split(p, "/") {
		switch {
		case c == "":
			return fmt.Errorf("path %q has an empty component", p)
		case c == "." || c == "..":
			return fmt.Errorf("path %q has a %q component", p, c)
		case len(c) > 255:
			return fmt.Errorf("path %q has a name longer than 255 bytes", p)
		case IsGitDirName(c):
			return fmt.Errorf("path %q has a component %q that names git's own directory", p, c)
		}
	}
	return nil
}

// IsGitDirName tells whether a file name would be taken for ".git" by git
// on some file system: ".git" in any case, with HFS+'s ignorable code
// points removed, with NTFS's trailing dots and spaces removed, or NTFS's
// short name "git~1".
func IsGitDirName(name string) bool {
	if len(name) < 4 {
		return false
	}
	var b strings.Builder
	for _, r := range name {
		if !hfsIgnorable(r) {
			b.WriteRune(r)
		}
	}
	n := strings.ToLower(strings.TrimRight(b.String(), ". "))
	return n == ".git" || n == "git~1"
}

// hfsIgnorable are the code points HFS+ leaves out when it compares
// names (git's is_hfs_dotgit list).
func hfsIgnorable(r rune) bool {
	switch {
	case r == utf8.RuneError:
		return false
	case r >= 0x200c && r <= 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x206a && r <= 0x206f, r == 0xfeff:
		return true
	}
	return false
}

// TreeFile returns the workspace path of the tree path rel of source idx,
// after CheckTreePath, and checks that it lies below that source's
// directory and in no other source's.
func (sp *Spec) TreeFile(idx int, rel string) (string, error) {
	if err := CheckTreePath(rel); err != nil {
		return "", err
	}
	root := sp.Sources[idx].Path
	p := path.Join(root, rel)
	if !under(p, root) {
		return "", fmt.Errorf("path %q leaves the source's directory %s", rel, root)
	}
	for i := range sp.Sources {
		if i != idx && under(p, sp.Sources[i].Path) {
			return "", fmt.Errorf("path %q lands in another source, %s", rel, sp.Sources[i].Path)
		}
	}
	return p, nil
}

// under tells whether the clean absolute path p is dir or below it.
func under(p, dir string) bool {
	return dir == "/" || p == dir || strings.HasPrefix(p, dir+"/")
}
