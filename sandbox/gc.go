package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/opencontainers/runc/libcontainer"

	"github.com/computerfs/computerfs/internal/proc"
)

// GC removes what sandboxes left behind when the process that ran them
// died (SIGKILL, a crash, a host crash): their processes, cgroups and
// state, and the cache volumes it mounted (OpenCache under stateDir).
// Sandboxes whose process still runs are left alone. stateDir is
// Options.StateDir ("" for DefaultStateDir). It returns the ids of the
// sandboxes it removed.
func GC(stateDir string) ([]string, error) {
	if stateDir == "" {
		stateDir = DefaultStateDir
	}
	root := filepath.Join(stateDir, "containers")
	entries, err := os.ReadDir(root)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	removed := gcCaches(stateDir)
	var errs []error
	live := map[string]bool{}
	for _, e := range entries {
		id := e.Name()
		c, err := libcontainer.Load(root, id)
		if err != nil {
			// No usable state. A container being created has none yet
			// either: only remove what is older than a minute.
			if fi, err := os.Stat(filepath.Join(root, id)); err == nil && time.Since(fi.ModTime()) < time.Minute {
				live[id] = true
				continue
			}
			// Its cgroups go below.
			if err := os.RemoveAll(filepath.Join(root, id)); err != nil {
				errs = append(errs, err)
			}
			removed = append(removed, id)
			continue
		}
		cfg := c.Config()
		if ownerAlive(cfg.Labels) {
			live[id] = true
			continue
		}
		if err := destroyContainer(c); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", id, err))
			live[id] = true
			continue
		}
		removed = append(removed, id)
	}
	// Cgroups without state (the state was removed, the cgroup was not).
	parent := cgroupParent(stateDir)
	for _, dir := range cgroupDirs(parent + "/cfs-*") {
		id := strings.TrimSuffix(filepath.Base(dir), "-init") // pid 1's own pids cgroup
		if live[id] {
			continue
		}
		// A container being created now may have made its cgroup after
		// the state directory was read above: as for state, only what is
		// older than a minute goes (a SIGKILL of a sandbox that was
		// starting, the first sandboxed command right after a daemon
		// started, died of this).
		if fi, err := os.Stat(dir); err == nil && time.Since(fi.ModTime()) < time.Minute {
			continue
		}
		if err := removeCgroup(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		if !contains(removed, id) {
			removed = append(removed, id)
		}
	}
	tmps, _ := filepath.Glob(filepath.Join(stateDir, ".rootfs-*"))
	for _, t := range tmps {
		os.RemoveAll(t)
	}
	if len(live) == 0 && filepath.Clean(stateDir) != DefaultStateDir {
		errs = append(errs, removeParents(parent))
	}
	return removed, errors.Join(errs...)
}

// removeParents removes the cgroup parent of a state directory that holds
// no sandbox any more, in every hierarchy, so that state directories that
// come and go (tests, one-off sandboxctl runs) do not leave an empty cgroup
// each. One that a sandbox being created right now has entered is busy and
// stays. The default state directory's parent is shared by every daemon on
// the host and stays too.
func removeParents(parent string) error {
	var errs []error
	for _, dir := range cgroupDirs(parent) {
		if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.EBUSY) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// cgroupDirs lists the cgroups matching pattern (relative to a hierarchy's
// root) in every v1 hierarchy and in a unified (v2-only) one.
func cgroupDirs(pattern string) []string {
	v1, _ := filepath.Glob("/sys/fs/cgroup/*/" + pattern)
	v2, _ := filepath.Glob("/sys/fs/cgroup/" + pattern)
	return append(v1, v2...)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ownerAlive says whether the process named by a container's owner label
// still runs.
func ownerAlive(labels []string) bool {
	for _, l := range labels {
		v, ok := strings.CutPrefix(l, ownerLabel+"=")
		if !ok {
			continue
		}
		p, s, _ := strings.Cut(v, ":")
		pid, err1 := strconv.Atoi(p)
		start, err2 := strconv.ParseUint(s, 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		// A zombie (a daemon killed and not yet reaped) has ended.
		return startTime(pid) == start && proc.Running(pid)
	}
	return false
}

// destroyContainer kills a container's processes and removes it.
func destroyContainer(c *libcontainer.Container) error {
	c.Signal(syscall.SIGKILL)
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := c.Destroy()
		if err == nil || !errors.Is(err, libcontainer.ErrRunning) {
			return err
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// removeCgroup kills whatever is left in a cgroup and removes it.
func removeCgroup(dir string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		err := os.Remove(dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
}
