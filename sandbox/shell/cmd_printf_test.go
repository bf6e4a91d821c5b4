package shell

import (
	"os/exec"
	"strings"
	"testing"
)

// TestPrintfMatchesBash runs printf forms with bash's printf and the
// fast path's.
func TestPrintfMatchesBash(t *testing.T) {
	s, _ := newShell(t)
	forms := []string{
		`printf '%-10s|%5.2f|%03d\n' name 3.14159 7`,
		`printf '%s\n' a b c`,
		`printf '%d %i %u %o %x %X %#x %#o\n' 42 -7 3 8 255 255 255 8`,
		`printf '%5d|%-5d|%05d|%+d|% d\n' 42 42 42 42 42`,
		`printf '%.3d|%8.3f|%-8.2e|%g|%g|%g|%G\n' 5 2.5 12345.678 0.0001 1234567 100 1e-10`,
		`printf '%10.4s|%-6s|%c%c\n' abcdefgh ab xyz q`,
		`printf '%*d|%-*s|%.*f\n' 6 42 4 ab 2 3.14159`,
		`printf '%b\n' 'a\tb\\n' 'x\0101y' 'stop\cnever'; echo`,
		`printf 'tab\there\\ \x41\101\u00e9\n'`,
		`printf '%s=%d\n' a 1 b 2 c`,
		`printf '%d\n' abc 12x; echo "status $?"`,
		`printf '%q\n' 'hello world' "it's" '' 'a$b' plain`,
		`printf '%d %d\n' "'A" '"b'`,
		`printf '%%|%5s%%\n' x`,
		`printf 'no newline'`,
		`printf '%z\n' 1; echo "status $?"`,
		`printf '%s' ; echo "[$?]"`,
		`printf '%.0f %.0f %.1f\n' 2.5 3.5 0.05`,
		`printf '%ld %lld %hd\n' 1 2 3`,
		`echo a b | xargs printf '<%s>\n'`,
	}
	for _, f := range forms {
		want, _ := exec.Command("bash", "-c", f).Output()
		got, _, _ := sh(t, s, f)
		if got != string(want) {
			t.Errorf("%s\n got: %q\nwant: %q", f, got, want)
		}
	}
	// printf -v sets a variable, which a built-in command cannot: the
	// sandbox runs it
	if ok, why := CanRun(`printf -v x '%03d' 7; echo $x`); ok || !strings.Contains(why, "printf -v") {
		t.Errorf("CanRun of printf -v: %v %q", ok, why)
	}
}
