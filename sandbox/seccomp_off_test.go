//go:build !(seccomp && cgo)

package sandbox_test

import (
	"context"
	"strings"
	"testing"

	"github.com/computerfs/computerfs/sandbox"
)

// Built without seccomp, Run refuses unless asked to run without it.
func TestNoSeccompBuild(t *testing.T) {
	_, err := sandbox.Run(context.Background(), sandbox.Options{Args: []string{"true"}, StateDir: stateDir})
	if err == nil || !strings.Contains(err.Error(), "seccomp") {
		t.Errorf("want an error about seccomp, got %v", err)
	}
	o := run(t, sandbox.Options{Args: []string{"true"}})
	if o.err != nil || o.res.ExitCode != 0 {
		t.Errorf("NoSeccomp:\n%v", o)
	}
}
