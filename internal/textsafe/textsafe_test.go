package textsafe

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestName(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"/repo/main.go", "/repo/main.go"},
		{"/repo/a b.txt", "/repo/a b.txt"},
		{"/données/été.csv", "/données/été.csv"},
		{"/日本/語", "/日本/語"},
		{"/x\x1b]0;pwned\x07", `"/x\x1b]0;pwned\a"`},
		{"/x\n2026-01-01T00:00:00.000Z 7 create /forged by tools", `"/x\n2026-01-01T00:00:00.000Z 7 create /forged by tools"`},
		{"/a\rb", `"/a\rb"`},
		{"/a\tb", `"/a\tb"`},
		{"/evil\u202etxt.exe", `"/evil\u202etxt.exe"`},
		{"/zero\u200bwidth", `"/zero\u200bwidth"`},
		{"/bad\xffutf8", `"/bad\xffutf8"`},
		{"/c1\u009bcontrol", `"/c1\u009bcontrol"`},
		{`"quoted"`, `"\"quoted\""`},
		{"/nbsp\u00a0x", `"/nbsp\u00a0x"`},
		{"", ""},
	} {
		if got := Name(c.in); got != c.want {
			t.Errorf("Name(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestText(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`open "a b": no such file`, `open "a b": no such file`},
		{"line one\nline two", `line one\nline two`},
		{"\x1b[2J\x1b[Hgone", `\x1b[2J\x1b[Hgone`},
		{"bad\xfe\xffbytes", `bad\xfe\xffbytes`},
		{"rtl\u202ex", `rtl\u202ex`},
	} {
		if got := Text(c.in); got != c.want {
			t.Errorf("Text(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}

// FuzzRender checks, for any bytes, that what is printed holds no control
// character, no format character and no invalid UTF-8, and that a quoted
// name turns back into its bytes.
func FuzzRender(f *testing.F) {
	for _, s := range []string{"a", "\x1b[31m", "a\nb", "\xff", "\u202e", `"x`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, out := range []string{Name(s), Text(s)} {
			if !utf8.ValidString(out) {
				t.Fatalf("%q: output %q is not UTF-8", s, out)
			}
			for _, r := range out {
				if !plain(r) {
					t.Fatalf("%q: output %q holds %U", s, out, r)
				}
			}
		}
		n := Name(s)
		if strings.HasPrefix(n, `"`) {
			back, err := strconv.Unquote(n)
			if err != nil || back != s {
				t.Fatalf("%q: Name %s does not unquote to it (%q, %v)", s, n, back, err)
			}
		} else if n != s {
			t.Fatalf("%q: Name changed it to %q without quoting", s, n)
		}
	})
}
