package computerfs

import (
	"os"
	"testing"
)

func TestInMountinfo(t *testing.T) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 16) // grows
	for _, tc := range []struct {
		path string
		want bool
	}{{"/", true}, {"/proc", true}, {"/proc/nonexistent-mount", false}, {"/pro", false}} {
		var got bool
		got, buf = inMountinfo(f, buf, []byte(mountinfoEscape(tc.path)))
		if got != tc.want {
			t.Errorf("%s mounted: %v, want %v", tc.path, got, tc.want)
		}
	}
	allocs := testing.AllocsPerRun(20, func() { _, buf = inMountinfo(f, buf, []byte("/proc")) })
	if allocs > 0 {
		t.Errorf("the check allocates %.0f times: an idle daemon would never trim its memory", allocs)
	}
	if got := mountinfoEscape(`/a b\c`); got != `/a\040b\134c` {
		t.Errorf("escape: %q", got)
	}
}
