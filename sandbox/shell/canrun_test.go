package shell

import (
	"os"
	"strings"
	"testing"
)

func TestCanRun(t *testing.T) {
	cases := []struct {
		script string
		ok     bool
	}{
		{"ls -la | grep foo", true},
		{"for f in *.go; do wc -l $f; done", true},
		{"f() { cat $1; }; f x", true},
		{"python3 x.py", false},
		{"ls && make build", false},
		{"$CMD arg", false},
		{"eval 'ls | wc -l'", true},
		{"eval 'gcc x.c'", false},
		{"eval \"$x\"", false},
		{"source env.sh", false},
		{"diff <(ls a) <(ls b)", false},
		{"find . -name '*.go' -exec grep -l x {} +", true},
		{"find . -exec rustc {} \\;", false},
		{"ls | xargs -n1 -I{} cat {}", true},
		{"ls | xargs node", false},
		{"env FOO=1 cat x", true},
		{"command -v gcc", true},
		{"command gcc", false},
		{"/usr/bin/grep x y", true},
		{"./script.sh", false},
		{"kill 1", false},
		{"echo 'unclosed", false},
		{"git push", false},
	}
	for _, c := range cases {
		ok, why := CanRun(c.script)
		if ok != c.ok {
			t.Errorf("CanRun(%q) = %v (%s), want %v", c.script, ok, why, c.ok)
		}
		if !ok && why == "" {
			t.Errorf("CanRun(%q): no reason", c.script)
		}
	}
}

// TestCorpusCanRun: the share of the corpus that auto would run here.
func TestCorpusCanRun(t *testing.T) {
	entries := readCorpus(t)
	n := 0
	for _, e := range entries {
		if ok, why := CanRun(e.cmd); ok {
			n++
		} else if !strings.Contains(e.cmd, "<(") && !strings.HasPrefix(e.cmd, "nosuchcommand") {
			t.Errorf("corpus.txt:%d: %q: %s", e.line, e.cmd, why)
		}
	}
	t.Logf("CanRun accepts %d of %d corpus commands", n, len(entries))
}

func FuzzCanRun(f *testing.F) {
	for _, name := range []string{"testdata/corpus.txt", "testdata/corpus-git.txt"} {
		data, _ := os.ReadFile(name)
		for _, l := range strings.Split(string(data), "\n") {
			f.Add(l)
		}
	}
	f.Add("eval 'eval \"ls\"'")
	f.Fuzz(func(t *testing.T, script string) {
		ok, why := CanRun(script)
		if ok && why != "" || !ok && why == "" {
			t.Fatalf("CanRun(%q) = %v, %q", script, ok, why)
		}
		if ok {
			file, err := parse(script)
			if err != nil {
				t.Fatalf("CanRun accepted %q, which does not parse: %v", script, err)
			}
			if unsupported(file) != "" {
				t.Fatalf("CanRun accepted %q with %s", script, unsupported(file))
			}
		}
		// path resolution never leaves the namespace
		abs := absPath("/workspace", script)
		if script != "" && !strings.HasPrefix(abs, "/") {
			t.Fatalf("absPath(%q) = %q", script, abs)
		}
		if strings.Contains(abs, "/../") || strings.HasSuffix(abs, "/..") {
			t.Fatalf("absPath(%q) = %q keeps ..", script, abs)
		}
	})
}
