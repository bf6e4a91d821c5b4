package sandbox

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// stats fills in what the sandbox's cgroups counted, read after its last
// process has ended and before the cgroups are removed.
func (r *run) stats(res *Result) {
	if r.container == nil {
		return
	}
	st, err := r.container.State()
	if err != nil {
		return
	}
	paths := st.CgroupPaths
	if p := paths["memory"]; p != "" {
		res.PeakMemory = readInt(filepath.Join(p, "memory.max_usage_in_bytes"))
		res.OOMKilled = readKey(filepath.Join(p, "memory.oom_control"), "oom_kill") > 0
	}
	if p := paths["cpuacct"]; p != "" {
		res.CPUTime = time.Duration(readInt(filepath.Join(p, "cpuacct.usage")))
	}
	if p := paths["pids"]; p != "" {
		res.PidsLimited = readKey(filepath.Join(p, "pids.events"), "max") > 0
	}
	if p := paths[""]; p != "" && res.PeakMemory == 0 {
		// cgroup v2
		res.PeakMemory = readInt(filepath.Join(p, "memory.peak"))
		res.OOMKilled = readKey(filepath.Join(p, "memory.events"), "oom_kill") > 0
		res.CPUTime = time.Duration(readKey(filepath.Join(p, "cpu.stat"), "usage_usec")) * time.Microsecond
		res.PidsLimited = readKey(filepath.Join(p, "pids.events"), "max") > 0
	}
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
