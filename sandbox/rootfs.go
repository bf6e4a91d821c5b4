package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// The host directories that make the default root file system, read-only:
// the userland, and nothing of /root, /home, /run, /var, /srv, /mnt or
// /tmp. Those that are symbolic links on the host (/bin -> usr/bin) are the
// same links in the sandbox.
var hostCandidates = []string{"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "opt"}

// Directories the skeleton has for mounts of its own.
var skeletonDirs = []string{"proc", "dev", "tmp", "workspace"}

type hostEntry struct {
	name, link string // link is the target of a symbolic link, "" for a directory
}

var (
	hostOnce    sync.Once
	hostEntries []hostEntry
	hostDirs    []string // the directories among hostEntries, bind-mounted
)

func hostLayout() {
	hostOnce.Do(func() {
		for _, name := range hostCandidates {
			fi, err := os.Lstat("/" + name)
			if err != nil {
				continue
			}
			switch {
			case fi.Mode()&os.ModeSymlink != 0:
				target, err := os.Readlink("/" + name)
				if err == nil {
					hostEntries = append(hostEntries, hostEntry{name, target})
				}
			case fi.IsDir():
				hostEntries = append(hostEntries, hostEntry{name: name})
				hostDirs = append(hostDirs, name)
			}
		}
	})
}

// hostSkeleton returns the root of the default root file system: a
// directory of empty mount points and the host's top-level links, made
// once per layout under stateDir and shared by every sandbox (it is
// mounted read-only).
func hostSkeleton(stateDir string) (string, error) {
	hostLayout()
	h := sha256.New()
	for _, e := range hostEntries {
		fmt.Fprintf(h, "%s\x00%s\x00", e.name, e.link)
	}
	fmt.Fprintf(h, "%s\x00", strings.Join(skeletonDirs, ","))
	dir := filepath.Join(stateDir, "rootfs-"+hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(dir); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return "", fmt.Errorf("sandbox: state directory: %w", err)
	}
	// The mapped users must reach the root file system.
	if err := os.Chmod(stateDir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(stateDir, ".rootfs-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	for _, d := range skeletonDirs {
		if err := os.Mkdir(filepath.Join(tmp, d), 0o755); err != nil {
			return "", err
		}
	}
	for _, e := range hostEntries {
		p := filepath.Join(tmp, e.name)
		if e.link != "" {
			err = os.Symlink(e.link, p)
		} else {
			err = os.Mkdir(p, 0o755)
		}
		if err != nil {
			return "", err
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Another run made it first.
		if _, serr := os.Stat(dir); serr == nil {
			return dir, nil
		}
		return "", err
	}
	return dir, nil
}

// checkRootfs says clearly what is wrong with a root file system given by
// the user, before libcontainer says it less clearly.
func checkRootfs(dir string, workspace bool) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("sandbox: rootfs %s: not an absolute path", dir)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("sandbox: rootfs: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("sandbox: rootfs %s: not a directory", dir)
	}
	if fi.Mode().Perm()&0o005 != 0o005 {
		return fmt.Errorf("sandbox: rootfs %s: the sandbox's users (host uid %d and up) cannot read it (mode %v)", dir, hostIDBase, fi.Mode().Perm())
	}
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err == nil && fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("sandbox: rootfs %s: the sandbox's users (host uid %d and up) cannot reach it: %s has mode %v", dir, hostIDBase, p, fi.Mode().Perm())
		}
		if p == "/" {
			break
		}
	}
	need := []string{"proc", "dev", "tmp"}
	if workspace {
		need = append(need, "workspace")
	}
	var missing []string
	for _, d := range need {
		if fi, err := os.Stat(filepath.Join(dir, d)); err != nil || !fi.IsDir() {
			missing = append(missing, "/"+d)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("sandbox: rootfs %s: missing directories %s (mount points must exist: the root is read-only)", dir, strings.Join(missing, ", "))
	}
	return nil
}

// startTime is a process's start time in clock ticks since boot, 0 if it
// does not run.
func startTime(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	// Fields after the command: state is field 3, starttime field 22.
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0
	}
	t, _ := strconv.ParseUint(f[19], 10, 64)
	return t
}
