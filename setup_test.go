package computerfs

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestSystemPackagesListed: what the build and the tests take from the
// system comes from the packages that scripts/packages.txt lists (the one
// list that scripts/deps.sh, make and .ci/run install from), so that a
// fresh machine gets all of it; and on this machine nothing listed is
// missing.
func TestSystemPackagesListed(t *testing.T) {
	listed := map[string]bool{}
	f, err := os.Open("scripts/packages.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if f := strings.Fields(strings.SplitN(sc.Text(), "#", 2)[0]); len(f) > 0 {
			listed[f[0]] = true
		}
	}
	if out, err := exec.Command("scripts/deps.sh", "--check").CombinedOutput(); err != nil {
		t.Fatalf("scripts/deps.sh --check: %v: %s", err, out)
	}
	ci, err := os.ReadFile(".ci/run")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ci), "scripts/deps.sh") || strings.Contains(string(ci), "apt-get install") {
		t.Errorf(".ci/run installs packages of its own instead of through scripts/deps.sh")
	}
	mk, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"build", "test", "lint"} {
		if !regexp.MustCompile(`(?m)^` + target + `:[^#\n]*\bdeps\b`).Match(mk) {
			t.Errorf("make %s does not depend on deps", target)
		}
	}

	// owner is the package that holds path (merged /usr: dpkg may know it
	// under /bin).
	owner := func(path string) string {
		for _, p := range []string{path, strings.TrimPrefix(path, "/usr")} {
			out, err := exec.Command("dpkg-query", "-S", p).Output()
			if err == nil {
				pkg, _, _ := strings.Cut(strings.SplitN(string(out), "\n", 2)[0], ":")
				return pkg
			}
		}
		return ""
	}
	// provided: pkg is listed, essential, or what a listed package depends
	// on directly (pkg-config is pkgconf's).
	provided := func(pkg string) bool {
		if listed[pkg] {
			return true
		}
		if out, _ := exec.Command("dpkg-query", "-W", "-f=${Essential}", pkg).Output(); string(out) == "yes" {
			return true
		}
		for l := range listed {
			out, _ := exec.Command("dpkg-query", "-W", "-f=${Depends}", l).Output()
			for _, d := range strings.Split(string(out), ",") {
				if name, _, _ := strings.Cut(strings.TrimSpace(d), " "); strings.TrimSuffix(name, ":any") == pkg {
					return true
				}
			}
		}
		return false
	}
	// The programs the tests and the build run from the host.
	for _, cmd := range []string{"fusermount3", "setfattr", "getfattr", "setfacl", "getfacl", "rsync", "gcc", "pkg-config", "git", "bash", "tar", "gzip", "diff", "unshare", "setpriv", "mkfs.ext4", "node", "npm"} {
		path, err := exec.LookPath(cmd)
		if err != nil {
			t.Errorf("%s: not on this machine (%v)", cmd, err)
			continue
		}
		if pkg := owner(path); pkg == "" || !provided(pkg) {
			t.Errorf("%s (%s) comes from package %q, which scripts/packages.txt does not list", cmd, path, pkg)
		}
	}
	// And libseccomp's headers, which cgo finds through pkg-config.
	dir, err := exec.Command("pkg-config", "--variable=pcfiledir", "libseccomp").Output()
	if err != nil {
		t.Fatalf("pkg-config finds no libseccomp: %v", err)
	}
	if pkg := owner(filepath.Join(strings.TrimSpace(string(dir)), "libseccomp.pc")); !provided(pkg) {
		t.Errorf("libseccomp.pc comes from %q, which scripts/packages.txt does not list", pkg)
	}
}
