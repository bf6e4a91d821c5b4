package sandbox

import "testing"

func TestUnder(t *testing.T) {
	for _, c := range []struct {
		p, dir string
		want   bool
	}{
		{"/opt/ws", "/opt", true}, {"/opt", "/opt", false}, {"/optx/ws", "/opt", false},
		{"/usr/local/a/b", "/usr", true}, {"/", "/usr", false}, {"/usr/", "/usr", true},
	} {
		if got := under(c.p, c.dir); got != c.want {
			t.Errorf("under(%q, %q) = %v", c.p, c.dir, got)
		}
	}
	if got := unescapeOctal(`/mnt/a\040b\134c`); got != `/mnt/a b\c` {
		t.Errorf("unescape: %q", got)
	}
}

// BenchmarkCheckMounts is what the check of the host's mounts adds to a
// sandbox's start (one read of /proc/self/mountinfo).
func BenchmarkCheckMounts(b *testing.B) {
	r := &run{opts: &Options{Workspace: "/nonexistent-ws"}}
	for i := 0; i < b.N; i++ {
		if err := r.checkMounts(); err != nil {
			b.Fatal(err)
		}
	}
}
