package shell

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Every command that compiles a regular expression refuses one over
// maxRegex at once, in little memory, with its own error: Go's regexp
// compiles without a look at the call's end (a 5 MB literal took grep 10 s
// and 600 MiB, awk 47 s through a timeout of 20). One under it is matched
// as before.
func TestRegexBombs(t *testing.T) {
	s, _ := newShell(t)
	peak, stop := heapPeak()
	defer stop()
	const big = `x=$(head -c 5000000 /dev/zero | tr '\0' a); `
	for _, c := range []struct{ cmd, want string }{
		{`grep -c "$x" /dev/null`, "grep: regular expression too big\n"},
		{`echo a | grep -E "($x)*"`, "grep: regular expression too big\n"},
		{`echo a | sed "s/$x/b/"`, "regular expression too big\n"},
		{`echo a | sed -n "/$x/p"`, "regular expression too big\n"},
		{`echo a | awk "/$x/"`, "over the fast path's limit of 262144\n"},
		{`echo a | awk -v x="$x" '$0 ~ x'`, "awk: regular expression too big: 5000000 bytes"},
		{`echo a | awk -v x="$x" '{ gsub(x, "b") } 1'`, "awk: regular expression too big: 5000000 bytes"},
		{`jq -n --arg x "$x" '"a" | test($x)'`, "regular expression too big: 5000000 bytes"},
		{`jq -n --arg x "$x" '"a" | sub($x; "b")'`, "regular expression too big: 5000000 bytes"},
		{`jq -n --arg x "$x" '"a" | [match($x; "g")]'`, "regular expression too big: 5000000 bytes"},
		{`find . -regex "$x"`, "find: regular expression too big\n"},
		{`[[ a =~ $x ]]; echo $?`, "bash: a pattern of about"},
		{`[[ a =~ b$x ]] && echo no`, "bash: a pattern of about"},
	} {
		runtime.GC()
		peak.Store(0)
		var out bytes.Buffer
		start := time.Now()
		res, err := s.Exec(context.Background(), big+c.cmd, ExecOptions{Stdout: &out, Stderr: &out, Timeout: 10 * time.Minute})
		p := peak.Load()
		t.Logf("%-50.50s exit %d %5.2fs peak %3d MiB %q", c.cmd, res.ExitCode, time.Since(start).Seconds(), p>>20, out.String())
		if err != nil || res.ExitCode == 0 || !strings.Contains(out.String(), c.want) {
			t.Errorf("%s: %v %+v %q, want an error with %q", c.cmd, err, res, out.String(), c.want)
		}
		for line := range stopNoise {
			if strings.Contains(out.String(), line) {
				t.Errorf("%s: stderr has the stop's noise %q: %q", c.cmd, line, out.String())
			}
		}
		if p > 200<<20 {
			t.Errorf("%s: the heap reached %d MiB", c.cmd, p>>20)
		}
	}
	// A long expression that regexp cannot skip by on a long line costs
	// its length times the line's in one match that cannot be stopped:
	// stopped before it starts, where the product passes the bound.
	const long = `x=$(head -c 30000 /dev/zero | tr '\0' a); `
	for _, cmd := range []string{
		`echo $x | grep -ic "$x"`,
		`echo $x | grep -c "a*$x"`,
		`echo $x | sed -n "/a*$x/p"`,
		`echo $x | sed "s/a*$x/b/"`,
		`echo $x | awk -v x="a*$x" '$0 ~ x { print "no" }'`,
		`echo $x | awk -v x="a*$x" '{ print match($0, x) }'`,
		`echo $x | awk -v x="a*$x" '{ n = gsub(x, "b"); print n }'`,
		`echo $x | awk -v x="a*$x" '{ s = $0; if ((s "") ~ x) print "no" }'`,
		`echo $x | awk "\$0 ~ /a*$x/ { print 1 }"`,
		`jq -n --arg x "$x" '$x | test("a*" + $x)'`,
		`[[ $x =~ a*$x ]] && echo no`,
		`[[ $x == *$x?* ]] && echo no`,
		`case $x in *$x?*) echo no;; esac`,
		`y=${x//a*$x/b}; echo no`,
		`y=${x#*$x?}; echo no`,
		`jq -n --arg x "$x" '$x | [match("a*" + $x; "g")] | length'`,
	} {
		var out bytes.Buffer
		start := time.Now()
		res, err := s.Exec(context.Background(), long+cmd, ExecOptions{Stdout: &out, Stderr: &out, Timeout: 10 * time.Minute})
		t.Logf("%-40s exit %d %5.2fs %q", cmd, res.ExitCode, time.Since(start).Seconds(), out.String())
		if err != nil || res.ExitCode == 0 || !strings.Contains(out.String(), "of 30000 bytes: more than the shell fast path matches in one step") || strings.Contains(out.String(), "no\n") {
			t.Errorf("%s: %v %+v %q, want a pattern limit", cmd, err, res, out.String())
		}
	}
	// The same expression on short lines, and a plain string on the long
	// line, are matched.
	var short bytes.Buffer
	if res, err := s.Exec(context.Background(), long+`printf 'a\nb\n' | grep -ic "$x"; echo $x | grep -c "$x"; echo $x | sed -n "/$x/s/.*/sed/p"`, ExecOptions{Stdout: &short, Stderr: &short}); err != nil || short.String() != "0\n1\nsed\n" {
		t.Fatalf("short lines: %v %+v %q", err, res, short.String())
	}
	// grep -F matches without a regexp: any length.
	var fixed bytes.Buffer
	if res, err := s.Exec(context.Background(), big+`echo a | grep -F -e "$x" -e a; echo "b$x" | grep -cF "$x"`, ExecOptions{Stdout: &fixed, Stderr: &fixed}); err != nil || fixed.String() != "a\n1\n" {
		t.Fatalf("grep -F: %v %+v %q", err, res, fixed.String())
	}
	// Under the limit: matched, with bash's answers.
	var out bytes.Buffer
	res, err := s.Exec(context.Background(), `x=$(head -c 200000 /dev/zero | tr '\0' a); echo a | grep -c "$x"; [[ a =~ $x ]]; echo $?; [[ $x =~ ^a+$ ]] && echo all; echo a | awk -v x="$x" '$0 ~ x'; echo b$x | awk -v x="$x" 'index($0, x) == 2 { print "awk" }'; echo b | awk -v x="$x" '{ gsub(x, "c") } 1'; jq -n --arg x "$x" '"a" | test($x)'; echo b | sed -n "/$x/!s/.*/sed/p"`,
		ExecOptions{Stdout: &out, Stderr: &out, Timeout: 10 * time.Minute})
	if want := "0\n1\nall\nawk\nb\nfalse\nsed\n"; err != nil || out.String() != want {
		t.Fatalf("under the limit: %v %+v %q, want %q", err, res, out.String(), want)
	}
}
