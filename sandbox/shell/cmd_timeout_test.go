package shell

import (
	"testing"
	"time"
)

func TestTimeoutMatchesGNU(t *testing.T) {
	files := map[string]string{"a.txt": "one\ntwo\nthree\n"}
	compareGNU(t, gnuCases(files, "from stdin\n",
		"timeout 5 cat a.txt", "timeout 5 true", "timeout 5 false; echo $?", "timeout 0 echo hi", "timeout 1.5s wc -l a.txt",
		"timeout 2m grep two a.txt", "timeout 1h sort -r a.txt", "timeout 1d head -1 a.txt", "timeout .5 echo x",
		"timeout 0.2 sleep 5", "timeout 0.2 sleep 5; echo $?", "timeout -v 0.2 sleep 5", "timeout --verbose 0.1s sleep 3",
		"timeout --preserve-status 0.2 sleep 5", "timeout -s INT --preserve-status 0.2 sleep 5",
		"timeout -s HUP -v 0.2 sleep 5", "timeout --signal=SIGUSR1 -v 0.1 sleep 5", "timeout -s 2 -v 0.1 sleep 5",
		"timeout -sint -v 0.1 sleep 5", "timeout -k 1 0.2 sleep 5", "timeout --kill-after=1s 0.2 sleep 5",
		"timeout 5", "timeout", "timeout 5 sh -c 'echo in sh; exit 3'", "timeout 0.3 sh -c 'while :; do :; done'",
		"timeout 5 cat", "timeout -- 5 echo dashes", "timeout 5 xargs echo < a.txt", "timeout 5 timeout 0.1 sleep 3",
		"timeout 0.2 timeout 5 sleep 3", "echo a | timeout 5 tr a b",
		"timeout 5 env FOO=1 printenv FOO", "timeout 0.1 seq 1 inf > /dev/null", "timeout 5 test -f a.txt",
		"timeout 5 [ -f nope ]; echo $?", "timeout abc ls", "timeout -v x true", "timeout 5 printf '%s\\n' a b",
	))
}

// TestTimeoutKill: -s KILL ends with 137, as bash sees GNU's timeout
// kill itself with its command (bash's report of the killed job, with
// its pid, is not written).
func TestTimeoutKill(t *testing.T) {
	s, _ := newShell(t)
	for _, line := range []string{"timeout -s KILL 0.2 sleep 5", "timeout -s 9 0.1 sleep 5", "timeout -s kill -k 1 0.1 sleep 5"} {
		if out, stderr, code := sh(t, s, line); code != 137 || out != "" || stderr != "" {
			t.Errorf("%s: status %d, stdout %q, stderr %q; want 137 and nothing", line, code, out, stderr)
		}
	}
}

func TestTimeoutRouting(t *testing.T) {
	for _, line := range []string{"timeout --foreground 5 ls", "timeout --help", "timeout --version", "timeout -x 5 ls",
		"timeout 1e3 ls", "timeout inf ls", "timeout 0x10 ls", "timeout -1 ls", "timeout nan ls", "timeout 5 /usr/bin/echo x", "timeout 5 cd /",
		"timeout 5 read x", "timeout 5 :", "timeout 5 nosuchprogram", "timeout 5 ./script.sh", "timeout 5 $CMD",
		"timeout -s STOP 5 ls", "timeout -s CONT 5 ls", "timeout -s BOGUS 5 ls", "timeout -s 99 5 ls", "timeout -k x 5 ls",
		"timeout 5 ls --no-such-option", "timeout 5 eval ls", "timeout --pres 5 ls", "timeout -s $S 5 ls",
		"f() { :; }; timeout 5 f", "timeout 5 bash -x script", "timeout 5 python3 x.py"} {
		if ok, _ := CanRun(line); ok {
			t.Errorf("CanRun(%q) = true, want it routed to the sandbox", line)
		}
	}
	for _, line := range []string{"timeout 10 ls", "timeout 60 go test ./...", "timeout 5 grep -rn x .", "timeout 5 bash -c 'ls'",
		"timeout -s TERM -k 5 30s find . -name x", "timeout 300 cat $F"} {
		ok, why := CanRun(line)
		want := line != "timeout 60 go test ./..."
		if ok != want {
			t.Errorf("CanRun(%q) = %v (%s), want %v", line, ok, why, want)
		}
	}
}

// TestTimeoutWithinCall: the call's own timeout still ends a longer
// timeout's command.
func TestTimeoutWithinCall(t *testing.T) {
	_, _, code := boundedRun(t, "timeout 1h sleep 3600", "", 16<<20, 300*time.Millisecond)
	if code != 124 {
		t.Errorf("timeout 1h under a 300ms call: status %d, want 124", code)
	}
}
