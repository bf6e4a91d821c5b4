package main

import (
	"strings"
	"testing"

	"github.com/computerfs/computerfs/internal/testmount"
)

// TestHibernateUsageErrors: hibernate and resume refuse bad arguments
// before they unmount, download or take a lease.
func TestHibernateUsageErrors(t *testing.T) {
	bin := testmount.Binary(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"hibernate"}, "computerfs hibernate: give -w MOUNTPOINT or --store DIR; see 'computerfs hibernate -h'"},
		{[]string{"hibernate", "-w", "/m", "--store", "/s"}, "computerfs hibernate: give -w MOUNTPOINT or --store DIR; see 'computerfs hibernate -h'"},
		{[]string{"hibernate", "-w", "/m", "--to", "http://b/p"}, `computerfs hibernate: --to "http://b/p": want s3://BUCKET/PREFIX; see 'computerfs hibernate -h'`},
		{[]string{"hibernate", "-w", "/m", "extra"}, `computerfs hibernate: unexpected argument "extra"; see 'computerfs hibernate -h'`},
		{[]string{"resume", "--store", "/s", "/m"}, "computerfs resume: missing s3://BUCKET/PREFIX; see 'computerfs resume -h'"},
		{[]string{"resume", "s3://b/p", "/m"}, "computerfs resume: missing --store DIR; see 'computerfs resume -h'"},
		{[]string{"resume", "s3://b/../p", "--store", "/s", "/m"}, `computerfs resume: "s3://b/../p": the prefix must be a clean path (no . or .. or empty parts); see 'computerfs resume -h'`},
		{[]string{"resume", "s3://b/p", "--lease-ttl", "soon", "--store", "/s", "/m"}, `computerfs resume: invalid value "soon" for flag -lease-ttl: parse error; see 'computerfs resume -h'`},
	} {
		out, errOut, code := cli(t, bin, tc.args...)
		if code != 2 || out != "" || errOut != tc.want+"\n" {
			t.Errorf("computerfs %s:\n exit %d, stdout %q, stderr %q\nwant exit 2, stderr %q", strings.Join(tc.args, " "), code, out, errOut, tc.want)
		}
	}
}
