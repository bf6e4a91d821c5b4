package sandbox

import (
	"os"
	"path/filepath"
	"testing"
)

// HasProgram finds what a PATH search in the sandbox would: executables
// of the host's userland and of a root file system given, through
// symbolic links as the sandbox sees them, never outside what it binds.
func TestHasProgram(t *testing.T) {
	for _, c := range []struct {
		p    string
		want bool
	}{
		{"/usr/bin/env", true}, {"/bin/sh", true}, {"/usr/bin/../bin/env", true},
		{"/usr/bin/no-such-program", false}, {"/usr/bin", false}, {"/etc/os-release", false},
		{"relative/env", false}, {"/root/.bashrc", false}, {"/home", false},
	} {
		if got := HasProgram("", c.p); got != c.want {
			t.Errorf("host %s: %v, want %v", c.p, got, c.want)
		}
	}
	// A root file system of our own: links inside it resolve from its root
	// (an absolute link never reaches the host), .. stops at its root.
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "usr/bin"), 0o755)
	os.WriteFile(filepath.Join(root, "usr/bin/tool"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(root, "usr/bin/data"), []byte("x"), 0o644)
	os.Symlink("/usr/bin/tool", filepath.Join(root, "usr/bin/abs"))
	os.Symlink("../../../../usr/bin/tool", filepath.Join(root, "usr/bin/up"))
	os.Symlink("/usr/bin/env", filepath.Join(root, "usr/bin/hostenv")) // the host has it, the rootfs not
	os.Symlink("loop", filepath.Join(root, "usr/bin/loop"))
	for _, c := range []struct {
		p    string
		want bool
	}{
		{"/usr/bin/tool", true}, {"/usr/bin/abs", true}, {"/usr/bin/up", true},
		{"/usr/bin/data", false}, {"/usr/bin/hostenv", false}, {"/usr/bin/loop", false}, {"/usr/bin/env", false},
	} {
		if got := HasProgram(root, c.p); got != c.want {
			t.Errorf("rootfs %s: %v, want %v", c.p, got, c.want)
		}
	}
}
