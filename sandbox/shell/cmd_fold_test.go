package shell

import (
	"strings"
	"testing"
	"time"
)

func TestFoldMatchesGNU(t *testing.T) {
	text := "The quick brown fox jumps over the lazy dog; héllo wörld\tand\ttabs\n" +
		"short\n\nabc\bdef\rghijklmnopqrstuvwxyz0123456789 end\n" +
		strings.Repeat("word ", 30) + "\n" + strings.Repeat("x", 100) + "\nno newline at the end"
	files := map[string]string{"a.txt": text, "b.txt": "one two three four five six\n"}
	compareGNU(t, gnuCases(files, "from stdin, a line long enough to be folded at eighty columns by default, yes indeed\n",
		"fold a.txt", "fold -w 10 a.txt", "fold -w10 -s a.txt", "fold -s -w 7 a.txt b.txt", "fold -b -w 5 a.txt",
		"fold -bs -w 12 a.txt", "fold --width=3 --spaces b.txt", "fold --bytes --width 4 a.txt", "fold -w 1 b.txt",
		"fold", "fold - b.txt", "fold -w 2 -", "fold nofile b.txt", "fold -w 0 a.txt", "fold -w abc a.txt", "fold -w 5k a.txt",
		"fold -w 99999999999999999999999 a.txt", "fold -w 18446744073709551615 a.txt", "fold -w 18446744073709551606 b.txt",
		"fold -w 8 -s a.txt | fold -w 3", "mkdir d; fold d b.txt",
	))
}

func TestFoldRouting(t *testing.T) {
	for _, line := range []string{"fold -w +5 a", "fold -w ' 5' a", "fold -80 a", "fold -c a", "fold --width=-1 a"} {
		if ok, _ := CanRun(line); ok {
			t.Errorf("CanRun(%q) = true, want it routed to the sandbox", line)
		}
	}
}

// TestFoldBounded: a line with no end and a width that never folds it
// is held whole: the budget stops it.
func TestFoldBounded(t *testing.T) {
	_, stderr, code := boundedRun(t, "head -c 100000000 /dev/zero | fold -w 999999999999 | wc -c", "", 16<<20, time.Minute)
	if code != 125 || !strings.Contains(stderr, "memory limit") {
		t.Errorf("fold of a 100 MB line under a 16 MiB budget: status %d, stderr %q", code, stderr)
	}
}
