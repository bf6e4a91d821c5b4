package shell

import (
	"strings"
	"testing"
	"time"
)

func TestBcMatchesGNU(t *testing.T) {
	progs := []string{"-2^2", "2^3^2", "scale=2; 10/3", "1.50", "3*0.5", "-1/3", ".5", "0-.5", "2^200", "7%3", "scale=2; 7%3",
		"x=5; x*2", "x+=1; x", "sqrt(2)", "scale=10; sqrt(2)", "sqrt(16)", "scale", "5.", "2^-2", "scale=3; 2^-2", "1.234*1.1",
		"scale=1; 1.234*1.1", "a=1;b=2;a+b", "(1+2)*3", "-0", "10/3", "quit", "1;quit;2", "1\nquit\n2", "\"hi\"", "\"a\\n\"; 1",
		"2^1000", "3^500 / 7^100", "scale=50; 1/7", "scale=100; 4*a", "x=3; x^=3; x", "x=10; x/=4; x", "scale=2; x=10; x%=3; x",
		"x=7; x-=10; x", "x*=2; x", "1.0^100000000", "0^5", "(-1)^1000001", "-1.5 * -2.25", "12345678901234567890 * 98765432109876543210",
		"scale=5; -7/2", "scale=5; -7%2", "-7%2", "scale=0; 5.999/1", "1.999+0.001", "0.0", "scale=3; 0/5", "100 - 100.00",
		"/* comment */ 1+1", "1 + 1 # comment", "1 + \\\n2", "scale=20; 22/7", "2^64 - 1", "x = 2 ^ 10\nx\nx / 3\n",
		"scale = 4\n355 / 113\n", "99999999999999999999999999999999999999999999999999999999999999999999999999 + 1",
		"scale=80; 1/3", "-.001 * 1", "e1 = 5; e1 + 1", "foo_bar = 2; foo_bar^2", "1/0", "1/0; 5\n6", "sqrt(-1)\n1"}
	var cases []gnuCase
	for _, p := range progs {
		cases = append(cases, gnuCase{nil, p + "\n", "bc"}, gnuCase{nil, p + "\n", "bc -l"})
	}
	files := map[string]string{"prog.bc": "scale=3\n10/4\nx=2\n", "more.bc": "x*5\n"}
	cases = append(cases, gnuCases(files, "x+1\n", "bc prog.bc more.bc", "bc -q prog.bc", "echo '2^10' | bc", "bc <<< '1+2'",
		"echo 'scale=2; 1/3' | bc -l", "bc --mathlib <<< '1/3'", "echo '5*5' | bc --quiet")...)
	for i := range cases {
		if strings.Contains(cases[i].stdin, "1/0") || strings.Contains(cases[i].stdin, "sqrt(-1)") {
			cases[i].cmd += " 2>/dev/null" // GNU's message names a byte-code address the fast path has not
		}
	}
	compareGNU(t, cases)
}

func TestBcUnsupported(t *testing.T) {
	s, _ := newShell(t)
	for _, p := range []string{"ibase=16; FF", "obase=2; 5", "1 < 2", "if (1) 2", "define f(x) { return x }", "s(1)", "x++", "1 == 1",
		"length(123)", "2^0.5", "2^1000000000", "scale=10000000; 1/3", "1 +", "(1", "print 1", "a[1]=2"} {
		out, stderr, code := sh(t, s, "bc -l <<'EOF'\n"+p+"\nEOF")
		if code != 2 || out != "" || !strings.Contains(stderr, "fast path") {
			t.Errorf("bc of %q: status %d, stdout %q, stderr %q; want status 2 and a message", p, code, out, stderr)
		}
	}
	for _, line := range []string{"bc -s", "bc -w", "bc -i", "bc --standard", "bc -v", "bc --help"} {
		if ok, _ := CanRun(line); ok {
			t.Errorf("CanRun(%q) = true, want it routed", line)
		}
	}
}

// TestBcBounded: numbers grow by steps that each stay under the digit
// bound but together pass the budget.
func TestBcBounded(t *testing.T) {
	prog := "x=7^100000\n" + strings.Repeat("x=x*7^100000\n", 20) + "x%10\n"
	_, stderr, code := boundedRun(t, "bc", prog, 4<<20, time.Minute)
	if code == 0 || !(strings.Contains(stderr, "memory limit") || strings.Contains(stderr, "digits")) {
		t.Errorf("bc of growing numbers under a 4 MiB budget: status %d, stderr %q", code, stderr)
	}
}
