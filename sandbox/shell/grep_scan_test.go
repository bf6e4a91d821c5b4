package shell

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode"
)

// TestGrepFoldUnsafe checks foldUnsafe: every ASCII letter that a
// non-ASCII character folds to (regexp's (?i)) or lowers to (grep -F -i)
// is in it.
func TestGrepFoldUnsafe(t *testing.T) {
	for r := rune(0x80); r <= unicode.MaxRune; r++ {
		if l := unicode.ToLower(r); l < 0x80 && !strings.ContainsRune(foldUnsafe, l) {
			t.Errorf("%U lowers to %q, which is not in foldUnsafe", r, l)
		}
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if f < 0x80 && !strings.ContainsRune(foldUnsafe, f) {
				t.Errorf("%U folds to %q, which is not in foldUnsafe", r, f)
			}
		}
	}
}

func TestGrepLits(t *testing.T) {
	for _, c := range []struct{ expr, want string }{
		{"func", "func"},
		{"(?i)Error", "~error"},
		{"(?i)test", "~te"}, // s folds to U+017F
		{"foo.*barbaz", "barbaz"},
		{"(?:foo)|(?:bar)", "foo|bar"},
		{`(?:^|\b)(?:Exec)(?:\b|$)`, "Exec"},
		{"a*b?", ""},
		{"[0-9]+", ""},
		{"(?:x)|(?:.*)", ""},
		{"(?i)ks", ""},
		{"caf\u00e9", "caf\u00e9"},
		{"(?i)caf\u00e9s", "~caf"},
		{"ab{2,}", "a"},
	} {
		var got []string
		for _, l := range grepLits(c.expr) {
			s := string(l.s)
			if l.fold {
				s = "~" + s
			}
			got = append(got, s)
		}
		if g := strings.Join(got, "|"); g != c.want {
			t.Errorf("grepLits(%q) = %q, want %q", c.expr, g, c.want)
		}
	}
}

// TestGrepSkipSameOutput runs grep with and without skipping the lines
// that hold no required string over files made to catch the scanner out
// (strings across the 64 KiB buffer's end, lines longer than it, a NUL,
// no last newline, characters that fold to ASCII) and wants the same
// output and status.
func TestGrepSkipSameOutput(t *testing.T) {
	s, fs := newShell(t)
	rnd := rand.New(rand.NewPCG(1, 2))
	words := []string{"func", "FUNC", "Func", "error", "ERROR", "test", "TEST", "\u017ftest", "te\u017ft", "\u212aey", "key", "x", "fu", "nc", "\u00e9t\u00e9", "\x00", "\xff", "", "  "}
	line := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteString(words[rnd.IntN(len(words))])
			b.WriteByte(" ;"[rnd.IntN(2)])
		}
		return b.String()
	}
	if err := fs.MkdirAll("d", 0o755); err != nil {
		t.Fatal(err)
	}
	for f := range 12 {
		var b strings.Builder
		for b.Len() < 200<<10 {
			switch rnd.IntN(40) {
			case 0:
				b.WriteString(strings.Repeat("y", 70<<10) + "func" + strings.Repeat("z", rnd.IntN(70<<10)))
			case 1:
				b.WriteString(strings.Repeat("q", (64<<10)-b.Len()%(64<<10)-2) + "fun") // func across the buffer's end
			default:
				b.WriteString(line(rnd.IntN(12)))
			}
			b.WriteByte('\n')
		}
		data := b.String()
		if f%2 == 1 {
			data = strings.TrimSuffix(data, "\n") + "func"
		}
		if f%3 == 0 {
			data = strings.ReplaceAll(data, "\x00", "")
		}
		if err := fs.WriteFile(fmt.Sprintf("d/f%02d", f), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	scripts := []string{
		"grep -rn func d", "grep -rnb func d", "grep -rc func d", "grep -rl func d", "grep -rL error d",
		"grep -rni error d", "grep -rni test d", "grep -rni key d", "grep -rn -e func -e error d", "grep -rnF -e fu -e nc d",
		"grep -rniF TEST d", "grep -rniF KEY d", "grep -rnw func d", "grep -rnx x d", "grep -rnA2 func d",
		"grep -rn -m3 error d", "grep -rno 'fu[n]c' d", "grep -rnE 'err(or|xx)' d", "grep -rn -a func d", "grep -rnc \u00e9t\u00e9 d",
		"grep -rn 'y*func' d | cut -c1-80", "grep -rnq TEST d",
	}
	for _, script := range scripts {
		grepSkips = true
		out, errOut, code := sh(t, s, script)
		grepSkips = false
		wantOut, wantErr, wantCode := sh(t, s, script)
		grepSkips = true
		if out != wantOut || errOut != wantErr || code != wantCode {
			t.Errorf("%s: skipping lines printed %d bytes (%q), status %d; without %d bytes (%q), status %d",
				script, len(out), errOut, code, len(wantOut), wantErr, wantCode)
		}
	}
}
