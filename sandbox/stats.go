package sandbox

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// counters are what the cgroups of a sandbox had counted when a
// pre-started sandbox was handed its command: the Result counts from
// there. Zero for a cold start.
type counters struct {
	cpu       time.Duration
	oomKills  int64
	pidsLimit int64
}

// baseline resets the peak memory of the sandbox's cgroup to what it uses
// now (pid 1 alone, waiting) and returns the counters that cannot be reset.
func (r *run) baseline() counters {
	var c counters
	paths := r.cgroupPaths()
	if p := paths["memory"]; p != "" {
		os.WriteFile(filepath.Join(p, "memory.max_usage_in_bytes"), []byte("0"), 0)
		c.oomKills = readKey(filepath.Join(p, "memory.oom_control"), "oom_kill")
	}
	if p := paths["cpuacct"]; p != "" {
		c.cpu = time.Duration(readInt(filepath.Join(p, "cpuacct.usage")))
	}
	if p := paths["pids"]; p != "" {
		c.pidsLimit = readKey(filepath.Join(p, "pids.events"), "max")
	}
	if p := paths[""]; p != "" && paths["memory"] == "" {
		// cgroup v2: memory.peak is reset for whoever writes to it and
		// keeps its file open, which is not us; the peak may be pid 1's.
		c.oomKills = readKey(filepath.Join(p, "memory.events"), "oom_kill")
		c.cpu = time.Duration(readKey(filepath.Join(p, "cpu.stat"), "usage_usec")) * time.Microsecond
		c.pidsLimit = readKey(filepath.Join(p, "pids.events"), "max")
	}
	return c
}

// stats fills in what the sandbox's cgroups counted since base, read after
// its last process has ended and before the cgroups are removed.
func (r *run) stats(res *Result, base counters) {
	paths := r.cgroupPaths()
	if p := paths["memory"]; p != "" {
		res.PeakMemory = readInt(filepath.Join(p, "memory.max_usage_in_bytes"))
		res.OOMKilled = readKey(filepath.Join(p, "memory.oom_control"), "oom_kill") > base.oomKills
	}
	if p := paths["cpuacct"]; p != "" {
		res.CPUTime = time.Duration(readInt(filepath.Join(p, "cpuacct.usage"))) - base.cpu
	}
	if p := paths["pids"]; p != "" {
		res.PidsLimited = readKey(filepath.Join(p, "pids.events"), "max") > base.pidsLimit
	}
	if p := paths[""]; p != "" && res.PeakMemory == 0 {
		// cgroup v2
		res.PeakMemory = readInt(filepath.Join(p, "memory.peak"))
		res.OOMKilled = readKey(filepath.Join(p, "memory.events"), "oom_kill") > base.oomKills
		res.CPUTime = time.Duration(readKey(filepath.Join(p, "cpu.stat"), "usage_usec"))*time.Microsecond - base.cpu
		res.PidsLimited = readKey(filepath.Join(p, "pids.events"), "max") > base.pidsLimit
	}
}

// cgroupPaths are the sandbox's cgroups by controller ("" for cgroup v2),
// asked of libcontainer once.
func (r *run) cgroupPaths() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cgroups == nil && r.container != nil {
		if st, err := r.container.State(); err == nil {
			r.cgroups = st.CgroupPaths
		}
	}
	return r.cgroups
}

func readInt(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// readKey reads "key value" lines.
func readKey(path, key string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}
