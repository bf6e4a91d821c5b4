package computerfs

import (
	"fmt"
	"os/exec"
)

// fusermount runs fusermount3 (or fusermount) with args.
func fusermount(args ...string) ([]byte, error) {
	for _, bin := range []string{"fusermount3", "fusermount"} {
		if path, err := exec.LookPath(bin); err == nil {
			return exec.Command(path, args...).CombinedOutput()
		}
	}
	return nil, fmt.Errorf("neither fusermount3 nor fusermount is installed")
}
