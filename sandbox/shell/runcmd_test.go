package shell

import (
	"bytes"
	"errors"
	"os/exec"
	"testing"
)

// runCmd runs a reference command (bash, GNU tools, git, rg) to its end
// and returns its stdout, stderr and exit status; a command that cannot
// start fails the test. The differential tests compare these with the
// fast path's.
func runCmd(t testing.TB, cmd *exec.Cmd) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}
