package shell

import (
	"context"
	"testing"
	"time"
)

func TestProcSubst(t *testing.T) {
	s, _ := newShell(t)
	cases := []struct{ script, out string }{
		{"x=hello; cat <(echo $x)", "hello\n"},
		{"for i in 1 2 3; do cat <(echo $i); done", "1\n2\n3\n"},
		{"f() { cat <(echo in-f); }; f", "in-f\n"},
		{"wc -c <(seq 200000) | cut -d' ' -f1", "1288895\n"},
		{"seq 100000 | tee >(wc -l) > /dev/null", "100000\n"},
		{"[ -p <(true) ] && echo pipe", "pipe\n"},
		{"echo <(true) <(true)", "/dev/fd/63 /dev/fd/62\n"},
		{"bash -c 'cat <(echo nested)'", "nested\n"},
		{"eval 'cat <(echo ev)'", "ev\n"},
		{"cat <(cat <(echo inner))", "inner\n"},
		{"echo <(yes) done | cut -d' ' -f2", "done\n"},
		{"head -1 <(yes)", "y\n"},
		{"echo a > >(cat) ; sleep 0.05", "a\n"},
		{"diff <(echo a) <(echo a) && echo same", "same\n"},
	}
	for _, c := range cases {
		start := time.Now()
		out, stderr, code := sh(t, s, c.script)
		if out != c.out || code != 0 {
			t.Errorf("%q: %q (status %d, stderr %q), want %q", c.script, out, code, stderr, c.out)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("%q took %v", c.script, d)
		}
	}
	// a substitution that never ends is stopped by the timeout
	res, err := s.Exec(context.Background(), "cat <(sleep 30)", ExecOptions{Timeout: 200 * time.Millisecond})
	if err != nil || res.ExitCode != ExitTimeout {
		t.Fatalf("%+v %v", res, err)
	}
}
