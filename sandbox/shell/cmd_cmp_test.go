package shell

import (
	"strings"
	"testing"
	"time"
)

func TestCmpMatchesGNU(t *testing.T) {
	files := map[string]string{
		"a": "abcdef\nxyz\n", "b": "abcXef\nxyQ\n", "c": "abc", "e": "", "d": "abcdef\nxyz\nmore\n",
		"p": "ab\ncd", "q": "ab\n", "r": "ab\ncdef",
		"bin1": "\x01\x80\xff\x7f", "bin2": "\x02\x81\xfe\x20",
		"big1": strings.Repeat("0123456789", 2000) + "x", "big2": strings.Repeat("0123456789", 2000) + "y",
	}
	var cmds []string
	for _, args := range []string{"a b", "-b a b", "-l a b", "-lb a b", "a c", "c a", "e a", "a e", "e e", "a a",
		"-l a c", "-l a d", "-b a d", "-s a c", "-s a b", "-s a a", "a nofile", "nofile a", "-s a nofile", "-n 3 a b", "-n 4 a b",
		"-i 4 a b", "-i 1:2 a b", "a b 1 2", "a b 1", "-l -n 100 a d", "-bl a d", "-i 100 a b", "a", "a -", "- -", "- a",
		"p r", "q r", "r q", "-b bin1 bin2", "-lb bin1 bin2", "-l bin1 bin2", "a b 1 2 3", "", "-n 0 a b", "-l -s a b", "-s -l a b", "--verbose a b", "--print-bytes a b",
		"-s a b && echo same || echo differ", "-s a a && echo same", "--silent a d; echo $?",
		"--bytes=4 --ignore-initial=1:2 a b", "-sn4 a b", "-n 2 a d", "-l -n 3 a b", "-l -n 10000 a b",
		"--quiet a b", "--silent a d", "big1 big2", "-l big1 big2", "-i 5 big1 big2", "mkdir dd; cmp a dd", "a b 2>&1 >/dev/null", "-l -i 3:0 a b"} {
		cmds = append(cmds, "cmp "+args)
	}
	compareGNU(t, gnuCases(files, "abcdef\nxyz\n", cmds...))
}

func TestCmpRouting(t *testing.T) {
	for _, line := range []string{"cmp -n 2k a b", "cmp -i 0x10 a b", "cmp -i 010 a b", "cmp a b 1k", "cmp a b 1 1M",
		"cmp --print-chars a b", "cmp -x a b", "cmp a b -x", "cmp -i x a b", "cmp -n x a b", "cmp a b c", "cmp --bytes a b", "cmp -v", "cmp -n $N a b", "cmp a b $S"} {
		if ok, _ := CanRun(line); ok {
			t.Errorf("CanRun(%q) = true, want it routed to the sandbox", line)
		}
	}
	for _, line := range []string{"cmp a b", "cmp -s $A $B", "cmp -l a b 10 20", "cmp -n 100 -i 1:2 a b"} {
		if ok, why := CanRun(line); !ok {
			t.Errorf("CanRun(%q) = false (%s)", line, why)
		}
	}
}

// TestCmpStopped: two endless equal streams end with the call.
func TestCmpStopped(t *testing.T) {
	_, _, code := boundedRun(t, "cat /dev/zero | cmp /dev/zero -", "", 16<<20, 2*time.Second)
	if code != 124 {
		t.Errorf("cmp of two endless streams under a timeout: status %d, want 124", code)
	}
}
