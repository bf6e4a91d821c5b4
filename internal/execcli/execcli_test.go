package execcli

import (
	"flag"
	"io"
	"slices"
	"testing"
)

// TestParseInterleaved: flags before and after the command, and nothing
// after "--" taken for a flag (it was: `-- grep -v x` ran `grep x` with -v).
func TestParseInterleaved(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		pos     []string
		mount   string
		verbose bool
	}{
		{[]string{"-w", "m", "--", "grep", "-v", "x"}, []string{"grep", "-v", "x"}, "m", false},
		{[]string{"-w", "m", "--", "a", "--", "-v"}, []string{"a", "--", "-v"}, "m", false},
		{[]string{"a", "-w", "m", "-v", "b"}, []string{"a", "b"}, "m", true},
		{[]string{"-w", "--", "ls", "-v"}, []string{"ls"}, "--", true}, // "--" as -w's value
		{[]string{"-v=false", "--w=m", "-", "--", "-w", "x"}, []string{"-", "-w", "x"}, "m", false},
	} {
		fset := flag.NewFlagSet("exec", flag.ContinueOnError)
		fset.SetOutput(io.Discard)
		f := Define(fset)
		pos, err := ParseInterleaved(fset, tc.args)
		if err != nil || !slices.Equal(pos, tc.pos) || *f.mount != tc.mount || *f.verbose != tc.verbose {
			t.Errorf("%q: positional %q, -w %q, -v %v, %v; want %q, %q, %v", tc.args, pos, *f.mount, *f.verbose, err, tc.pos, tc.mount, tc.verbose)
		}
	}
	for _, args := range [][]string{{"-bogus", "x"}, {"---x"}, {"-w"}, {"-v=maybe"}} {
		fset := flag.NewFlagSet("exec", flag.ContinueOnError)
		fset.SetOutput(io.Discard)
		Define(fset)
		if _, err := ParseInterleaved(fset, args); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}
