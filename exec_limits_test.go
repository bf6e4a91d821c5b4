package computerfs_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/computerfs/computerfs"
	"github.com/computerfs/computerfs/internal/testmount"
	"github.com/computerfs/computerfs/sandbox"
)

// TestSandboxOutputIsBounded: a sandboxed command that prints without end
// is stopped at the default output limit, as on the fast path (status
// 125, "output limit"), instead of running to its timeout while the
// daemon passes its output on. Both backends answer alike.
func TestSandboxOutputIsBounded(t *testing.T) {
	m := testmount.Start(t, filepath.Join(t.TempDir(), "ws"))
	for _, b := range []string{"sandbox", "shell"} {
		start := time.Now()
		res, out, _, err := execOn(t, m.Dir, computerfs.ExecRequest{Backend: b, Timeout: "10m", Command: "yes"})
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if res.ExitCode != 125 || res.Stopped != "output limit" || !res.Truncated {
			t.Errorf("%s: %+v, want exit 125 stopped by the output limit", b, res)
		}
		if n := len(out); n > sandbox.DefaultMaxOutput || n < sandbox.DefaultMaxOutput/2 {
			t.Errorf("%s: %d bytes of output, want at most (and about) %d", b, n, sandbox.DefaultMaxOutput)
		}
		t.Logf("%s: stopped after %v", b, time.Since(start))
	}
}
