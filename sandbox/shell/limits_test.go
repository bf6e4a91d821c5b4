package shell

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// Endless inputs stop with the script, and a script that holds too much
// memory is stopped before the daemon runs out.
func TestEndlessInputAndMemoryLimit(t *testing.T) {
	s, _ := newShell(t)
	for _, tc := range []struct {
		script    string
		opts      ExecOptions
		code      int
		stopped   string
		maxSecond float64
	}{
		{`cat /dev/zero | sort`, ExecOptions{Timeout: time.Second, MaxMemory: -1}, ExitTimeout, "timeout", 15}, // no memory limit: without -race it would come first
		{`sort < /dev/zero > /dev/null`, ExecOptions{Timeout: time.Second, MaxMemory: -1}, ExitTimeout, "timeout", 15},
		{`sort /dev/zero`, ExecOptions{MaxMemory: 64 << 20}, ExitLimit, "memory limit", 15},
		{`x=$(cat /dev/zero); echo never`, ExecOptions{MaxMemory: 64 << 20}, ExitLimit, "memory limit", 15},
		{`tac /dev/zero | head -c 1`, ExecOptions{MaxMemory: 64 << 20}, ExitLimit, "memory limit", 15},
		{`head -c 5 /dev/zero | wc -c`, ExecOptions{MaxMemory: 64 << 20}, 0, "", 15},
	} {
		var out, errb bytes.Buffer
		tc.opts.Stdout, tc.opts.Stderr = &out, &errb
		start := time.Now()
		res, err := s.Exec(context.Background(), tc.script, tc.opts)
		took := time.Since(start).Seconds()
		if err != nil || res.ExitCode != tc.code || res.Stopped != tc.stopped || took > tc.maxSecond {
			t.Errorf("%s: %v %+v after %.1fs (want status %d, stopped %q); stderr %q", tc.script, err, res, took, tc.code, tc.stopped, errb.String())
		}
	}
	// A script within its bound is not stopped by the watchdog.
	var out bytes.Buffer
	res, err := s.Exec(context.Background(), `seq 200000 | sort -n | tail -1`, ExecOptions{Stdout: &out, MaxMemory: 256 << 20})
	if err != nil || res.ExitCode != 0 || out.String() != "200000\n" {
		t.Fatalf("seq | sort: %v %+v %q", err, res, out.String())
	}
}
