package main

import (
	"strings"
	"testing"

	"github.com/computerfs/computerfs/internal/testmount"
)

// The snapshot and fork commands' usage errors: one line, exit 2.
func TestSnapshotUsageErrors(t *testing.T) {
	bin := testmount.Binary(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"snapshot", "x"}, "computerfs snapshot: missing -w MOUNTPOINT or --store DIR; see 'computerfs snapshot -h'"},
		{[]string{"snapshot", "-w", "/m", "a", "b"}, `computerfs snapshot: unexpected argument "b"; see 'computerfs snapshot -h'`},
		{[]string{"snapshot", "-w", "/m", "--delete"}, "computerfs snapshot: missing NAME; see 'computerfs snapshot -h'"},
		{[]string{"fork", "-w", "/m"}, "computerfs fork: missing --store DIR; see 'computerfs fork -h'"},
		{[]string{"fork", "--store", "/d"}, "computerfs fork: missing -w MOUNTPOINT or --src STORE; see 'computerfs fork -h'"},
		{[]string{"fork", "-w", "/m", "--src", "/s", "--store", "/d"}, "computerfs fork: give -w MOUNTPOINT or --src STORE, not both; see 'computerfs fork -h'"},
		{[]string{"rollback", "x"}, "computerfs rollback: missing -w MOUNTPOINT or --store DIR; see 'computerfs rollback -h'"},
		{[]string{"rollback", "--store", "/d"}, "computerfs rollback: missing NAME; see 'computerfs rollback -h'"},
		{[]string{"rollback", "--store", "/d", "a", "b"}, `computerfs rollback: unexpected argument "b"; see 'computerfs rollback -h'`},
		{[]string{"rollback", "-w", "/m", "--store", "/d", "a"}, "computerfs rollback: give -w MOUNTPOINT or --store DIR, not both; see 'computerfs rollback -h'"},
		{[]string{"fork", "-w", "/m", "--store", "/d", "extra"}, `computerfs fork: unexpected argument "extra"; see 'computerfs fork -h'`},
	} {
		out, errOut, code := cli(t, bin, tc.args...)
		if code != 2 || out != "" || errOut != tc.want+"\n" {
			t.Errorf("computerfs %s:\n exit %d, stdout %q, stderr %q\nwant exit 2, stderr %q", strings.Join(tc.args, " "), code, out, errOut, tc.want)
		}
	}
}
