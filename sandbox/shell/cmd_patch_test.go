package shell

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// seqLines is "1\n2\n...n\n" with some lines replaced.
func seqLines(n int, repl map[int]string) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		if r, ok := repl[i]; ok {
			if r != "" {
				b.WriteString(r + "\n")
			}
			continue
		}
		fmt.Fprintf(&b, "%d\n", i)
	}
	return b.String()
}

const patchTwo = `--- a/f.txt
+++ b/f.txt
@@ -2,7 +2,7 @@
 2
 3
 4
-5
+five
 6
 7
 8
@@ -12,7 +12,7 @@
 12
 13
 14
-15
+fifteen
 16
 17
 18
`

func TestPatchMatchesGNU(t *testing.T) {
	after := "; echo status $?; ls -A; for f in *.rej *.orig; do [ -f \"$f\" ] && { echo \"== $f\"; cat \"$f\"; }; done; cat f.txt"
	plain := seqLines(20, nil)
	type variant struct {
		name  string
		files map[string]string
	}
	newDiff := "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1,2 @@\n+hello\n+world\n"
	delDiff := "--- a/f.txt\n+++ /dev/null\n@@ -1,3 +0,0 @@\n-1\n-2\n-3\n"
	nonl := "--- a/f.txt\n+++ b/f.txt\n@@ -1,3 +1,3 @@\n 1\n 2\n-3\n+three\n\\ No newline at end of file\n"
	two := "--- a/f.txt\n+++ b/f.txt\n@@ -1,3 +1,6 @@\n 1\n+a\n+b\n+c\n 2\n 3\n@@ -10,3 +13,3 @@\n 10\n-11\n+eleven\n 12\n"
	git := "commit message\n\ndiff --git a/src/g.txt b/src/g.txt\nindex 123..456 100644\n--- a/src/g.txt\n+++ b/src/g.txt\n@@ -1,2 +1,2 @@\n-x\n+y\n z\n" +
		"diff --git a/f.txt b/f.txt\n" + patchTwo
	base := map[string]string{"p.diff": patchTwo, "new.diff": newDiff, "del.diff": delDiff, "nonl.diff": nonl, "two.diff": two, "git.diff": git}
	with := func(f map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for k, v := range f {
			m[k] = v
		}
		return m
	}
	cases := []gnuCase{}
	add := func(files map[string]string, cmds ...string) {
		for _, c := range cmds {
			cases = append(cases, gnuCase{with(files), "", c + after})
		}
	}
	add(map[string]string{"f.txt": plain}, "patch -p1 < p.diff", "patch < p.diff", "patch -p1 -i p.diff", "patch -p1 --dry-run < p.diff",
		"patch -p1 -s < p.diff", "patch -R -p1 < p.diff", "patch -R -N -p1 < p.diff", "patch -p1 -o out.txt < p.diff; cat out.txt",
		"patch f.txt p.diff", "patch -p0 < p.diff", "patch -p2 < p.diff", "patch --strip=1 --input=p.diff", "cat p.diff | patch -p1",
		"patch -p1 < nonl.diff; wc -c f.txt", "patch -p1 < del.diff", "patch -p1 < new.diff; cat new.txt",
		"patch -p1 -u < p.diff", "patch -p1 --no-backup-if-mismatch < p.diff", "echo garbage | patch -p1", "patch -p1 < nonl.diff; echo x >> f.txt; patch -p1 -R < nonl.diff",
		"patch -p1 -i nofile.diff", "patch -p1 < git.diff", "patch -p1 -F 0 < p.diff", "patch -p1 --fuzz=1 < p.diff",
		"patch -p1 --forward < p.diff; patch -p1 --forward < p.diff", "patch -p1 < p.diff; patch -p1 -R < p.diff")
	add(map[string]string{"f.txt": "x\ny\n" + plain}, "patch -p1 < p.diff", "patch -p1 -s < p.diff", "patch -p1 --dry-run < p.diff")
	add(map[string]string{"f.txt": seqLines(20, map[int]string{3: "three"})}, "patch -p1 < p.diff", "patch -p1 -F1 < p.diff", "patch -p1 -F 3 < p.diff")
	add(map[string]string{"f.txt": seqLines(20, map[int]string{5: "FIVE"})}, "patch -p1 < p.diff", "patch -s -p1 < p.diff", "patch --dry-run -p1 < p.diff",
		"patch -p1 -o out.txt < p.diff")
	add(map[string]string{"f.txt": seqLines(20, map[int]string{5: "five", 15: "fifteen"})}, "patch -p1 < p.diff", "patch -N -p1 < p.diff",
		"patch -R -p1 < p.diff", "patch -s -p1 < p.diff")
	add(map[string]string{"f.txt": seqLines(20, map[int]string{6: "", 7: ""})}, "patch -p1 < two.diff", "patch -p1 < p.diff")
	add(map[string]string{"f.txt": seqLines(4, nil)}, "patch -p1 < del.diff")
	add(map[string]string{"new.txt": "x\n"}, "patch -p1 < new.diff", "patch -p1 < del.diff", "patch -p1 -R < new.diff")
	add(map[string]string{"f.txt": plain, "src/g.txt": "x\nz\n"}, "patch -p1 < git.diff; cat src/g.txt", "patch < git.diff")
	add(map[string]string{"sub/f.txt": plain}, "patch -d sub -p1 -i ../p.diff; cat sub/f.txt", "patch -d nodir -p1 < p.diff",
		"patch --directory=sub -p1 < p.diff; ls sub")
	add(map[string]string{"f.txt": seqLines(3, nil)}, "patch -p1 < nonl.diff; wc -c f.txt")
	add(map[string]string{"f.txt": plain}, "printf -- '--- a/f.txt\\n+++ b/f.txt\\n@@ -1,3 +1,3 @@\\n 1\\n-2\\n+two\\n 3\\n' | patch -p1",
		"printf -- '--- a/f.txt\\n+++ b/f.txt\\n@@ -1,3 +1,3 @@\\n 1\\n-2\\nx\\n' | patch -p1",
		"printf -- '--- a/f.txt\\n+++ b/f.txt\\n@@ -18,3 +18,4 @@\\n 18\\n 19\\n 20\\n+21\\n' | patch -p1",
		"printf -- '--- a/f.txt\\n+++ b/f.txt\\n@@ -1,2 +1,3 @@\\n+0\\n 1\\n 2\\n' | patch -p1",
		"printf -- '--- a/f.txt\\n+++ b/f.txt\\n@@ -9,0 +10,1 @@\\n+nine and a half\\n' | patch -p1",
		"printf -- '--- f.txt\\n+++ f.txt\\n@@ -7,3 +7,2 @@\\n 7\\n-8\\n 9\\n' | patch")
	multi := "diff --git a/f.txt b/f.txt\n" + patchTwo + "diff --git a/dir/new.c b/dir/new.c\nnew file mode 100644\nindex 0000000..1111111\n" +
		"--- /dev/null\n+++ b/dir/new.c\n@@ -0,0 +1,3 @@\n+int main() {\n+\treturn 0;\n+}\n" +
		"--- a/g.txt\n+++ b/g.txt\n@@ -1,4 +1,4 @@ func g() {\n a\n-b\n+B\n c\n d\n"
	add(map[string]string{"f.txt": plain, "g.txt": "a\nb\nc\nd\n", "m.diff": multi}, "patch -p1 < m.diff; cat dir/new.c g.txt",
		"patch -p1 --dry-run < m.diff; ls dir", "patch -p1 -R < m.diff")
	add(map[string]string{"f.txt": "x\ny\nz\n" + seqLines(20, map[int]string{15: "FIFTEEN"}), "g.txt": "a\nX\nc\nd\n", "m.diff": multi},
		"patch -p1 < m.diff; cat g.txt", "patch -p1 -s < m.diff")
	// the forms agents type: a heredoc, git diff's output piped back
	add(map[string]string{"f.txt": plain}, "patch -p1 <<'EOF'\n"+patchTwo+"EOF\ntrue", "patch -p1 --dry-run <<'EOF' && echo ok\n"+patchTwo+"EOF\ntrue")
	compareGNU(t, cases)
}

func TestPatchRouting(t *testing.T) {
	for _, line := range []string{"patch -f -p1 < x", "patch -t < x", "patch -b < x", "patch -E < x", "patch -l < x", "patch -o - < x",
		"patch -p x < x", "patch --merge < x", "patch --help", "patch --version", "patch a b c", "patch -V t < x", "patch -Z < x", "patch -p1 - < x"} {
		if ok, _ := CanRun(line); ok {
			t.Errorf("CanRun(%q) = true, want it routed to the sandbox", line)
		}
	}
	for _, line := range []string{"patch -p1 < fix.diff", "patch -p1 -i fix.diff", "patch --dry-run -p1 < x", "git diff | patch -R -p1",
		"patch -p0 -N -s -d src -o out -F 1 < x"} {
		if ok, why := CanRun(line); !ok {
			t.Errorf("CanRun(%q) = false (%s)", line, why)
		}
	}
}

// TestPatchUnsupported: what the fast path does not apply fails the
// command with a message, never a wrong file.
func TestPatchUnsupported(t *testing.T) {
	s, fs := newShell(t)
	fs.WriteFile("f.txt", []byte("a\n"), 0o644)
	for _, p := range []string{"*** f.txt\n--- f.txt\n***************\n*** 1 ****\n! a\n--- 1 ----\n! b\n", "1c1\n< a\n---\n> b\n",
		"diff --git a/f.txt b/g.txt\nsimilarity index 100%\nrename from f.txt\nrename to g.txt\n"} {
		fs.WriteFile("x.diff", []byte(p), 0o644)
		_, stderr, code := sh(t, s, "patch -p1 < x.diff")
		got, _ := fs.ReadFile("f.txt")
		if code != 2 || !strings.Contains(stderr, "fast path") || string(got) != "a\n" {
			t.Errorf("patch of %q: status %d, stderr %q, f.txt %q", p, code, stderr, got)
		}
	}
}

// TestPatchBounded: a patch of a million hunks is charged to the call,
// and a huge one stopped.
func TestPatchBounded(t *testing.T) {
	script := `seq 1 3 > f.txt; { echo '--- a/f.txt'; echo '+++ b/f.txt'; yes '@@ -1,1 +1,1 @@
-1
+1' | head -n 3000000; } | patch -p1 >/dev/null`
	_, stderr, code := boundedRun(t, script, "", 32<<20, time.Minute)
	if code == 0 || !strings.Contains(stderr, "memory limit") {
		t.Errorf("a million hunks under a 32 MiB budget: status %d, stderr %q", code, stderr)
	}
}
