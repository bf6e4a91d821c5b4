package spec

import (
	"path"
	"strings"
	"testing"
)

func TestCheckTreePath(t *testing.T) {
	good := []string{"a", "a/b", ".gitignore", ".github/x", "git", "x.git", ".gitx/y", "a b", "é/ü", "..a", "a..", ".a.", "a/.git-keep"}
	bad := []string{"", "/a", "a/", "a//b", "./a", "a/./b", "..", "../a", "x/../../other/f", "x/../.git/hooks/pre-commit",
		".git", ".git/config", "a/.git/hooks/x", ".GIT/config", ".Git", "sub/.gIt", ".git.", ".git ", ".git. . ", "git~1/config",
		"GIT~1", ".g\u200cit/config", "\ufeff.git", ".gi\u200dt", "a\x00b", `a\b`, `..\x`, strings.Repeat("a", 256),
		strings.Repeat("a/", 2049) + "a"}
	for _, p := range good {
		if err := CheckTreePath(p); err != nil {
			t.Errorf("CheckTreePath(%q): %v", p, err)
		}
	}
	for _, p := range bad {
		if err := CheckTreePath(p); err == nil {
			t.Errorf("CheckTreePath(%q) accepted", p)
		}
	}
}

func TestTreeFile(t *testing.T) {
	sp := &Spec{Sources: []Source{{Path: "/repo"}, {Path: "/data"}, {Path: "/repo2"}}}
	if p, err := sp.TreeFile(0, "a/b"); err != nil || p != "/repo/a/b" {
		t.Fatalf("TreeFile = %q, %v", p, err)
	}
	for _, rel := range []string{"../data/x", "../repo2/x", ".git/config", "a/../../data"} {
		if p, err := sp.TreeFile(0, rel); err == nil {
			t.Errorf("TreeFile(0, %q) = %q, accepted", rel, p)
		}
	}
	root := &Spec{Sources: []Source{{Path: "/"}}}
	if p, err := root.TreeFile(0, "a"); err != nil || p != "/a" {
		t.Fatalf("TreeFile at / = %q, %v", p, err)
	}
}

// FuzzTreePath: what CheckTreePath accepts stays below the source's
// directory once joined, is clean, and has no component git would take
// for .git.
func FuzzTreePath(f *testing.F) {
	for _, s := range []string{"a", "a/b", "../x", ".git/x", ".GIT", "git~1", "a//b", ".g\u200cit", "x/./y", "a\\b"} {
		f.Add(s)
	}
	sp := &Spec{Sources: []Source{{Path: "/src"}, {Path: "/srcx"}, {Path: "/other"}}}
	f.Fuzz(func(t *testing.T, p string) {
		if err := CheckTreePath(p); err != nil {
			if _, err2 := sp.TreeFile(0, p); err2 == nil {
				t.Fatalf("TreeFile accepted %q that CheckTreePath refuses", p)
			}
			return
		}
		if path.Clean(p) != p || strings.HasPrefix(p, "/") || strings.Contains(p, "\\") || strings.IndexByte(p, 0) >= 0 {
			t.Fatalf("CheckTreePath accepted %q", p)
		}
		for _, c := range strings.Split(p, "/") {
			if strings.EqualFold(strings.TrimRight(c, ". "), ".git") || c == ".." || c == "." {
				t.Fatalf("CheckTreePath accepted %q (component %q)", p, c)
			}
		}
		full, err := sp.TreeFile(0, p)
		if err != nil {
			t.Fatalf("TreeFile(%q): %v", p, err)
		}
		if !strings.HasPrefix(full, "/src/") {
			t.Fatalf("TreeFile(%q) = %q, outside /src", p, full)
		}
	})
}
