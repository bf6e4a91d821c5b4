package shell

import (
	"strings"
	"testing"
	"time"
)

func TestExprMatchesGNU(t *testing.T) {
	var cmds []string
	for _, args := range []string{"1 + 2", "99999999999999999999 + 1", "5 / 0", "5 % 0", "a + 1", "1 +", "1 2", "",
		"length héllo", "substr héllo 2 3", "index héllo l", "héllo : 'h\\(.*\\)o'", "héllo : '.*'", "abc : b",
		"abc : '\\(x\\)*'", "0", "''", "-5 + 1", "+5 + 1", "+ 5", "'(' 1 + 2 ')' '*' 3", "10 '<' 9", "a '<' b",
		"01 = 1", "a '|' b", "'' '|' 0", "0 '&' 1", "3 '&' 4", "length", "match abc 'a\\(b\\)'", "substr abc 0 1",
		"substr abc 2 99999999999999999999", "-- 3 + 3", "'(' 1", "1 ')'", "007 + 1", "' 5' + 1", "5 '*' -2",
		"-7 / 2", "-7 % 2", "1 = 1 = 1", "a '!=' b", "2 '>=' 10", "--", "-- --", "'('", "1 + '('",
		"'(' 1 2", "substr abc 1 x", "index abc ''", "5 = 5.0", "-0", "00 '|' x",
		"1 + 2 '*' 3", "a = a '&' 3 '<' 4", "length 123 + 1", "- 1", "2 - -3", "abc : 'a\\(b\\)\\(c\\)'",
		"'(' ')'", "')'", "substr abcdef -1 2", "abc : 'ab*c'", "abc : '^a'", "'a+b' : 'a+'",
		"aab : 'a\\+'", "ab : 'a\\|b'", "'*a' : '*a'", "x : '\\(a\\)\\|x'", "abc : 'a\\{1,2\\}'",
		"123456789012345678901234567890 '*' 987654321098765432109876543210", "-123456789012345678901234567890 / 7",
		"'' = ''", "abc '>' abd", "10 '>' 9", "a10 '>' a9", "0 '|' ''", "'' '&' x", "substr hello 3 1",
		"index hello xyzo", "match hello 'he'", "length ''", "1 - 1", "x '|' 1 / 0", "0 '&' 1 / 0", "+ '('",
		"length + length", "match", "substr a", "index a", "a : b : c", "ab : '\\(a\\)' : a", "3 + 4 = 7",
		"\"$(printf 'a%.0s' {1..1000})\" : '.*'", "'-1' '<' '-2'", "$(expr 3 + 4) '*' 2", "\"$(printf 'v1.2.3')\" : 'v\\([0-9]*\\)'", "-00 + 0", "0 '&' 0 '|' 0"} {
		cmds = append(cmds, "expr "+args)
	}
	compareGNU(t, gnuCases(nil, "", cmds...))
}

func TestExprRouting(t *testing.T) {
	for _, line := range []string{"expr --help", "expr --version", "expr -x", "expr abc : '['", "expr x : '\\('",
		"expr x : 'a\\)'", "expr x : '\\1'", "expr x : '[b-a]'", "expr \"$x\" : \"$re\"", "expr match a \"$re\"",
		"expr x : 'a\\{x\\}'", "expr --foo", "expr a : ''", "expr x : '\\{1\\}'"} {
		if ok, _ := CanRun(line); ok {
			t.Errorf("CanRun(%q) = true, want it routed to the sandbox", line)
		}
	}
	for _, line := range []string{"expr 1 + 1", "expr \"$x\" : '.*'", "expr length \"$x\"", "expr $i + 1", "expr -1 + 1"} {
		if ok, why := CanRun(line); !ok {
			t.Errorf("CanRun(%q) = false (%s)", line, why)
		}
	}
}

// TestExprBounded: products of huge numbers are charged to the call.
func TestExprBounded(t *testing.T) {
	script := `x=$(printf '9%.0s' {1..200000}); expr $x '*' $x '*' $x '*' $x '*' $x '*' $x '*' $x '*' $x | wc -c`
	out, stderr, code := boundedRun(t, script, "", 1<<20, time.Minute)
	if code == 0 || !strings.Contains(stderr, "memory limit") {
		t.Errorf("expr of huge products under a 1 MiB budget: status %d, stdout %q, stderr %q", code, out, stderr)
	}
}
