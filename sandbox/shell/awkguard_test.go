package shell

import (
	"bytes"
	"strings"
	"testing"

	"github.com/benhoyt/goawk/interp"
	"github.com/benhoyt/goawk/parser"
)

// TestAwkGuardKeepsMeaning: the rewrite that makes awk's loops and
// functions step changes no program's output: each program here prints
// the same guarded as written, and its guarded form calls the step in
// every loop and function.
func TestAwkGuardKeepsMeaning(t *testing.T) {
	for _, src := range []string{
		`BEGIN { for (i = 0; i < 5; i++) s = s i; print s }`,
		`BEGIN { for (;;) { if (++n > 3) break }; print n }`,
		`BEGIN { for (i = 0; ; i++) if (i == 4) break; print i }`,
		`BEGIN { while (n < 3) n++; print n }`,
		`BEGIN { do n += 2; while (n < 7); print n }`,
		`BEGIN { split("c b a", a); for (k in a) n++; print n }`,
		`BEGIN { split("c b a", a); for (k in a) { s = s a[k] }; print length(s) }`,
		`function f(n) { return n < 2 ? n : f(n-1) + f(n-2) } BEGIN { print f(15) }`,
		"function g(x)\n{\n\treturn x * 2\n}\nBEGIN { print g(21) }",
		`BEGIN { x = 10 / 2; y = x/2/1; print x, y }`,
		`/(a|b)/ { n++ } END { print n + 0 }`,
		`$0 ~ /while \(/ { print "w" } { for (i = 1; i <= NF; i++) s += $i } END { print s }`,
		`BEGIN { print "for (;;) while (1) function" }`,
		`BEGIN { if (1) for (k in a) x = 1; else print "else" ; print "done" }`,
		"BEGIN {\r\n while (i < 2) i++\r\n print i\r\n}",
		`{ a[$1] += $2 } END { for (k in a) n += a[k]; print n }`,
	} {
		want, err := runAwk(t, src, nil)
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		guarded := guardAwk(src)
		steps := 0
		got, err := runAwk(t, guarded, map[string]any{awkStepFunc: func() (int, error) { steps++; return 1, nil }})
		if err != nil {
			t.Fatalf("%q guarded as %q: %v", src, guarded, err)
		}
		if got != want {
			t.Errorf("%q guarded as %q prints %q, want %q", src, guarded, got, want)
		}
		loops := strings.Count(src, "for") + strings.Count(src, "while (") + strings.Count(src, "function")
		if strings.Contains(src, `"for (;;)`) {
			loops = 0 // only in a string
		}
		if loops > 0 && steps == 0 && !strings.Contains(src, "else") {
			t.Errorf("%q guarded as %q: no step was taken", src, guarded)
		}
	}
}

func runAwk(t *testing.T, src string, funcs map[string]any) (string, error) {
	t.Helper()
	prog, err := parser.ParseProgram([]byte(src), &parser.ParserConfig{Funcs: funcs})
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	_, err = interp.ExecProgram(prog, &interp.Config{Stdin: strings.NewReader("a 1\nb 2\na 3\n"), Output: &out, Funcs: funcs})
	return out.String(), err
}
