package gitcmd

import (
	"os"
	"path"
	"regexp"
	"strings"
	"testing"
)

// The git CLI differential tests run git through the shell, in
// sandbox/shell (git_test.go, git_forms_test.go, git_cases_test.go).

// goRegexps reads patterns as Go's: enough for the routing's tests.
type goRegexps struct{}

func (goRegexps) TranslateRE(re string, extended bool) (string, error) { return re, nil }

func (goRegexps) CompileRE(re string, extended, fold bool) (*regexp.Regexp, error) {
	return regexp.Compile(re)
}

func (goRegexps) CompileGo(expr string) (*regexp.Regexp, error) { return regexp.Compile(expr) }

// testHost is a Host for the parts of a run that need no shell; the rest
// of Host panics if called.
type testHost struct{ Host }

func (testHost) Abs(dir, p string) string {
	if !strings.HasPrefix(p, "/") {
		p = dir + "/" + p
	}
	return path.Clean(p)
}

// FuzzGitCommandLine: the routing check and the run-time parser agree (a
// command line gitCanRun accepts parses), and a pathspec never leaves the
// repository.
func FuzzGitCommandLine(f *testing.F) {
	data, _ := os.ReadFile("../testdata/corpus-git.txt")
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "git ") {
			f.Add(l)
		}
	}
	f.Add("git log -5 -p --stat -- ../x")
	f.Add("git -C .. commit -am")
	f.Fuzz(func(t *testing.T, line string) {
		argv := strings.Fields(line)
		if len(argv) == 0 || argv[0] != "git" {
			return
		}
		lits := make([]bool, len(argv))
		for i := range lits {
			lits[i] = true
		}
		ok, why := CanRun(argv, lits, goRegexps{})
		if ok != (why == "") {
			t.Fatalf("CanRun(%q) = %v, %q", argv, ok, why)
		}
		if ok {
			i, err := gitGlobal(argv, func(string, string) {})
			if err != nil || i >= len(argv) {
				t.Fatalf("%q accepted, but the global options do not parse: %v", argv, err)
			}
			if _, err := parseGitArgs(argv[i], gitSubs[argv[i]], argv[i+1:]); err != nil {
				t.Fatalf("%q accepted, but does not parse: %v", argv, err)
			}
		}
		g := &gitCmd{dir: "/workspace/repo/sub", root: "/workspace/repo", host: testHost{}}
		specs, err := g.pathspecs(argv[1:])
		if err != nil {
			return
		}
		for _, s := range specs {
			if s == ".." || strings.HasPrefix(s, "../") || strings.Contains(s, "/../") || strings.HasPrefix(s, "/") {
				t.Fatalf("pathspec %q of %q leaves the repository", s, argv)
			}
		}
	})
}
