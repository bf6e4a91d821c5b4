package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestThin: the thin client links none of the daemon's packages, nor
// net/http, nor net (whose resolver links the C library when cgo is on):
// their initialisation is what it exists to avoid.
func TestThin(t *testing.T) {
	out, err := exec.Command("go", "list", "-tags", "seccomp", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) > 100 {
		t.Errorf("computerfs-exec depends on %d packages, want at most 100", len(deps))
	}
	for _, d := range deps {
		for _, heavy := range []string{"net", "crypto/tls", "github.com/computerfs/computerfs/fs", "github.com/computerfs/computerfs/kv",
			"github.com/computerfs/computerfs/sandbox", "github.com/hanwen/", "github.com/cockroachdb/", "github.com/aws/"} {
			if d == heavy || strings.HasPrefix(d, heavy+"/") || strings.HasSuffix(heavy, "/") && strings.HasPrefix(d, heavy) {
				t.Errorf("computerfs-exec depends on %s", d)
			}
		}
	}
}
