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
var skeletonDirs = []string{"proc", "dev", "tmp", "workspace", "cache"}

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
func checkRootfs(dir string, workspace, cache bool) error {
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
		return fmt.Errorf("sandbox: rootfs %s: the sandbox's users (host ids other than root's) cannot read it (mode %v)", dir, fi.Mode().Perm())
	}
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err == nil && fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("sandbox: rootfs %s: the sandbox's users (host ids other than root's) cannot reach it: %s has mode %v", dir, p, fi.Mode().Perm())
		}
		if p == "/" {
			break
		}
	}
	need := []string{"proc", "dev", "tmp"}
	if workspace {
		need = append(need, "workspace")
	}
	if cache {
		need = append(need, CacheDir[1:])
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

// HostDirs are the host directories the default root file system binds
// read-only into every sandbox ("/usr", "/etc", ...). Nothing may be
// mounted under them (see checkMounts).
func HostDirs() []string {
	hostLayout()
	out := make([]string, len(hostDirs))
	for i, d := range hostDirs {
		out[i] = "/" + d
	}
	return out
}

type mountPoint struct{ dir, fsType string }

// mountPoints lists the mounts of this process's mount namespace.
func mountPoints() ([]mountPoint, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var mps []mountPoint
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		m := mountPoint{dir: unescapeOctal(f[4])}
		for i := 6; i+1 < len(f); i++ {
			if f[i] == "-" {
				m.fsType = f[i+1]
				break
			}
		}
		mps = append(mps, m)
	}
	return mps, nil
}

// unescapeOctal undoes mountinfo's \NNN escapes.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// under says whether p is strictly below dir.
func under(p, dir string) bool {
	return dir != p && strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// checkMounts refuses, with a clear message, what the kernel or the
// sandbox's isolation cannot have: a mount under a host directory the
// sandbox binds (the kernel refuses to bind, in a user namespace, a
// directory with a mount under it, since that would uncover what the
// mount hides: with a mount under /opt no sandbox on the host starts),
// and a mount under a root file system given by the user (it is bound
// with everything under it, so that mount, another workspace perhaps,
// would appear inside the sandbox).
func (r *run) checkMounts() error {
	mps, err := mountPoints()
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	var binds []string
	if r.opts.Rootfs == "" {
		binds = HostDirs()
	}
	for _, m := range mps {
		mp := m.dir
		for _, d := range binds {
			if mp == d && strings.HasPrefix(m.fsType, "fuse") {
				return fmt.Errorf("sandbox: %s is a FUSE mount (%s), which every sandbox would get as its %s: unmount it (mount workspaces under /mnt or /srv)", mp, m.fsType, d)
			}
			if under(mp, d) {
				return fmt.Errorf("sandbox: %s is a mount point under %s, which every sandbox binds read-only from the host, and the kernel refuses that bind with a mount under it: no sandbox can start until %s is unmounted (mount it elsewhere, under /mnt or /srv)", mp, d, mp)
			}
		}
		if r.opts.Rootfs != "" && under(mp, r.opts.Rootfs) {
			return fmt.Errorf("sandbox: rootfs %s has a mount under it (%s), which would appear inside the sandbox: unmount it or use another root file system", r.opts.Rootfs, mp)
		}
		if r.opts.Workspace != "" && under(mp, r.opts.Workspace) {
			return fmt.Errorf("sandbox: workspace %s has a mount under it (%s), which the kernel refuses to leave out of the sandbox's /workspace: unmount it first", r.opts.Workspace, mp)
		}
	}
	return nil
}
