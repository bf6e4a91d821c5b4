package shell

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestRunawayRecursion: a shell function calling itself forever is
// stopped with a clear error long before its stack could end the daemon.
func TestRunawayRecursion(t *testing.T) {
	s, _ := newShell(t)
	var errb bytes.Buffer
	start := time.Now()
	res, err := s.Exec(context.Background(), "f() { f; }; f", ExecOptions{Stderr: &errb, Timeout: 2 * time.Minute, MaxCommands: -1})
	if err != nil || res.ExitCode != ExitLimit || res.Stopped != "nesting limit" ||
		!strings.Contains(errb.String(), "maximum function nesting level exceeded") {
		t.Fatalf("%+v %v %q", res, err, errb.String())
	}
	t.Logf("stopped after %v", time.Since(start))
	// deep but finite recursion still works
	out, _, code := sh(t, s, "f() { if [ $1 -gt 0 ]; then f $(($1 - 1)); else echo bottom; fi; }; f 1000")
	if out != "bottom\n" || code != 0 {
		t.Fatalf("%q %d", out, code)
	}
}
