package shell

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/computerfs/computerfs/internal/gittest"
)

// The rg differential test: the fixture repository (buildGitOrigin) is
// imported into a store and cloned onto tmpfs, both get the same
// untracked files (ignored ones, hidden ones, ignore files of each kind,
// a binary file), and every line of testdata/corpus-rg.txt runs on the
// fast path and with bash and the real rg (Debian's ripgrep 13) on the
// copy: stdout, stderr and the status must be identical. The real rg
// searches with threads in no fixed order, so the corpus gives it
// --sort path (or -j1), the order the fast path always uses; the fast
// path takes both options and ignores them.

// rgExtra are the files both sides get besides the repository's.
var rgExtra = map[string]string{
	"build.log":              "error: build failed\nTODO fix the build\n",
	"bin/app.txt":            "TODO in an ignored directory\n",
	".hidden/secret.go":      "package hidden // TODO hidden\n",
	".config.json":           "{\"todo\": \"TODO in a hidden json\"}\n",
	"vendor/lib/lib.go":      "package lib\n\n// TODO vendored\nfunc Lib() {}\n",
	".ignore":                "vendor/\n",
	".rgignore":              "!build.log\n",
	"src/.gitignore":         "*.pyc\n!keep.pyc\n",
	"src/cache.pyc":          "TODO cached\n",
	"src/keep.pyc":           "TODO kept\n",
	"docs/.gitignore":        "/notes.txt\n",
	"docs/sub/notes.txt":     "apple pie\nTODO notes\n",
	"data/blob.bin":          "TODO\x00binary\n",
	"deep/a/b/c/d.txt":       "TODO deep\n",
	"internal/util/uni.txt":  "héllo wörld ÉCOLE\nnaïve café\nfoo_bar baz-qux\n\tindented\tline  \n",
	"internal/util/many.txt": "m1 match\nm2\nm3 match\nm4\nm5\nm6\nm7 match\nm8 match\nm9\nm10 match\n",
}

func rgPair(t *testing.T) *gitPair {
	t.Helper()
	if _, err := exec.LookPath("rg"); err != nil {
		t.Fatal("ripgrep (rg) is needed for this test: apt-get install ripgrep")
	}
	p := newGitPair(t, buildGitOrigin(t))
	for name, content := range rgExtra {
		full := filepath.Join(p.base, "w/repo", name)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := p.fs.MkdirAll(filepath.Dir("repo/"+name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := p.fs.WriteFile("repo/"+name, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// realRg runs a script with bash and the real rg in the copy, stdin
// /dev/null (as an agent's harness runs it: rg then searches the working
// directory, not its input).
func realRg(t testing.TB, base, script string) (string, string, int) {
	t.Helper()
	ws, tmp := base+"/w", base+"/t"
	sc := strings.ReplaceAll(strings.ReplaceAll(script, "/workspace", ws), "/tmp", tmp)
	cmd := exec.Command("bash", "-c", sc)
	cmd.Dir = ws + "/repo"
	cmd.Env = append([]string{"HOME=" + ws, "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "TZ=UTC", "TMPDIR=" + tmp}, gittest.Env()...)
	out, errs, code := runCmd(t, cmd)
	o := strings.ReplaceAll(strings.ReplaceAll(out, ws, "/workspace"), tmp, "/tmp")
	return o, strings.ReplaceAll(errs, ws, "/workspace"), code
}

func fastRg(t testing.TB, p *gitPair, script string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	res, err := p.s.Exec(context.Background(), script, ExecOptions{Cwd: "/workspace/repo", Stdout: &out, Stderr: &errb, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("%q: %v", script, err)
	}
	return out.String(), errb.String(), res.ExitCode
}

func TestRgCorpus(t *testing.T) {
	p := rgPair(t)
	entries := readCorpusFile(t, "testdata/corpus-rg.txt")
	if len(entries) < 60 {
		t.Fatalf("the rg corpus has %d entries", len(entries))
	}
	same := 0
	for _, e := range entries {
		if ok, why := CanRun(e.cmd); !ok {
			t.Errorf("line %d: %s: routed to the sandbox: %s", e.line, e.cmd, why)
			continue
		}
		got, gerr, gcode := fastRg(t, p, e.cmd)
		want, werr, wcode := realRg(t, p.base, e.cmd)
		if got != want || gerr != werr || gcode != wcode {
			t.Errorf("line %d: %s\n--- fast path status %d, stderr %q; rg status %d, stderr %q\n%s", e.line, e.cmd, gcode, gerr, wcode, werr, firstDiff(got, want))
			continue
		}
		same++
	}
	t.Logf("%d of %d rg commands identical to ripgrep", same, len(entries))
}

// TestRgCanRun checks the routing of rg's forms: what the fast path does
// not implement goes to the sandbox.
func TestRgCanRun(t *testing.T) {
	sandbox := []string{
		"rg -U 'a\\nb'", "rg -P '(?<=a)b'", "rg --json foo", "rg --vimgrep foo", "rg -r X foo", "rg --replace=X foo",
		"rg -z foo", "rg -a foo", "rg --type-list", "rg -t nosuchtype foo", "rg --sort modified foo", "rg --sortr path foo",
		"rg -uuu foo", "rg --color always foo", "rg --color=always foo", "rg -p foo", "rg -b foo", "rg -M 100 foo",
		"rg 'a\\/b'", "rg '\\<foo\\>'", "rg 'a{,3}'", "rg '[[a-z]]'", "rg '[a-z&&[^aeiou]]'", "rg '(?x) a b'",
		"rg '\\u0041'", "rg 'foo(?=bar)'", "rg '(a)\\1'", "rg", "rg --help", "rg --version", "rg -V", "rg -h foo",
		"rg --iglob '*.go' foo", "rg -o -v foo", "rg -E latin1 foo", "rg --pre cat foo", "rg -x{ foo", "rg --no-such-option foo",
		"rg -A x foo", "rg --max-count=-1 foo", "rg -d 3 foo", "rg '\\p{Greek=x}'",
	}
	for _, c := range sandbox {
		if ok, _ := CanRun(c); ok {
			t.Errorf("%s: kept on the fast path", c)
		}
	}
	fast := []string{
		"rg foo", "rg -n foo src", "rg -i foo", "rg -S Foo", "rg -l foo", "rg -c foo", "rg -C 2 foo", "rg -A1 -B2 foo",
		"rg -g '*.go' foo", "rg -g '!vendor' foo", "rg -t go foo", "rg -T js foo", "rg -F 'a.b' .", "rg -w foo", "rg -x foo",
		"rg -v foo", "rg -m 3 foo", "rg -o 'f.o'", "rg -e foo -e bar", "rg --files", "rg --files -0", "rg -0 -l foo",
		"rg --hidden foo", "rg --no-ignore foo", "rg -u foo", "rg -uu foo", "rg --no-heading foo", "rg --heading foo",
		"rg --color never foo", "rg -H foo x", "rg --no-filename foo", "rg -q foo", "rg --max-depth 2 foo", "rg -L foo",
		"rg --sort path foo", "rg -j1 foo", "rg '\\bfoo\\b'", "rg '\\d+\\.\\d+'", "rg 'func \\w+\\('", "rg '(?i)foo'",
		"rg 'a{2,3}'", "rg '[[:alpha:]]+'", "rg '\\s+$'", "rg '^\\s*#'", "rg \"$X\"", "rg 'a\\.b'", "rg -- -foo",
		"rg '(?P<n>a)'", "rg --column foo", "rg -n -i 'todo|fixme' --glob '*.py'",
	}
	for _, c := range fast {
		if ok, why := CanRun(c); !ok {
			t.Errorf("%s: routed to the sandbox: %s", c, why)
		}
	}
}

// TestRgLimits: rg within the call's memory budget, on a huge file, a
// line without end and a pipe that never ends.
func TestRgLimits(t *testing.T) {
	s, fs := newShell(t)
	big := strings.Repeat("some line of text\n", 1<<16) + "needle here\n"
	if err := fs.WriteFile("big.txt", []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, _, code := sh(t, s, "rg -c needle big.txt; rg -n needle big.txt"); out != "1\n65537:needle here\n" || code != 0 {
		t.Errorf("big file: %q %d", out, code)
	}
	if out, _, code := sh(t, s, "yes | rg -m2 y"); out != "y\ny\n" || code != 0 {
		t.Errorf("yes | rg -m2: %q %d", out, code)
	}
	var out, errb bytes.Buffer
	res, err := s.Exec(context.Background(), "rg x /dev/zero", ExecOptions{Stdout: &out, Stderr: &errb, Timeout: 20 * time.Second, MaxMemory: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 {
		t.Errorf("rg x /dev/zero: status 0, stderr %q", errb.String())
	}
	if out, _, code := sh(t, s, "printf 'a\\nb\\n' | rg b"); out != "b\n" || code != 0 {
		t.Errorf("a pipe: %q %d", out, code)
	}
	if out, _, code := sh(t, s, "rg needle"); out != "big.txt:needle here\n" || code != 0 {
		t.Errorf("no path, no stdin: %q %d", out, code)
	}
	// an ignore file of a million patterns meets the memory budget
	if err := fs.WriteFile(".gitignore", []byte(strings.Repeat("x\n", 1<<20)), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errb.Reset()
	res, err = s.Exec(context.Background(), "rg --no-require-git needle", ExecOptions{Stdout: &out, Stderr: &errb, Timeout: 20 * time.Second, MaxMemory: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 {
		t.Errorf("a million ignore patterns in 64 MiB: status 0, stderr %q", errb.String())
	} else {
		t.Logf("a million ignore patterns: status %d, %q", res.ExitCode, errb.String())
	}
}

// FuzzRgParse: routing parses rg's arguments in the daemon, outside any
// command's recover, so no argument may make it panic; a pattern it
// accepts compiles.
func FuzzRgParse(f *testing.F) {
	for _, s := range []string{`-n \bfoo\b src`, `-e [[:alpha:]] -w`, `-g *.{go,md} x`, `(?P<n>a)\p{Greek}`, `\x{41}{2,3}`, `-S \p{Lu}`, `-F -i a.b`, `[^\d\w]`, `(?i-s:a)`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		args := strings.Split(s, " ")
		o, why := rgParse(args)
		if why == "" && o.re == nil && o.lit == nil && !o.files && len(o.patFiles) == 0 {
			t.Errorf("%q: accepted without a matcher", s)
		}
		for _, p := range args {
			hasUpperLiteral(p, false)
			expandBraces(p)
		}
	})
}
