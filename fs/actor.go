package fs

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/computerfs/computerfs/kv"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// as returns the store as the process that made request h: its changes
// are journaled with the caller's pid, uid, gid, command name and
// sandbox.
func (f *FS) as(h *fuse.InHeader) kv.Session {
	a := f.actors.get(h.Caller.Pid)
	a.Uid, a.Gid = h.Caller.Uid, h.Caller.Gid
	return f.store.As(&a)
}

// actorCache remembers the command name and sandbox of recent callers, so
// that a process writing a big file costs one look at /proc, not one per
// request. An entry lives a second: a pid reused after that is looked up
// afresh.
type actorCache struct {
	mu      sync.Mutex
	entries map[uint32]actorEntry
}

type actorEntry struct {
	actor kv.Actor
	until time.Time
}

const actorTTL = time.Second

func (c *actorCache) get(pid uint32) kv.Actor {
	now := time.Now()
	c.mu.Lock()
	if e, ok := c.entries[pid]; ok && now.Before(e.until) {
		c.mu.Unlock()
		return e.actor
	}
	c.mu.Unlock()
	a := kv.Actor{Pid: pid}
	if pid != 0 {
		a.Comm, a.Sandbox = procInfo(pid)
	}
	c.mu.Lock()
	if c.entries == nil || len(c.entries) > 1024 {
		c.entries = make(map[uint32]actorEntry)
	}
	c.entries[pid] = actorEntry{actor: a, until: now.Add(actorTTL)}
	c.mu.Unlock()
	return a
}

// procInfo reads a process's command name and, if it runs in a computerfs
// sandbox, the sandbox's id (from its cgroup: computerfs-sandbox*/ID).
func procInfo(pid uint32) (comm, sandbox string) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err == nil {
		comm = string(bytes.TrimSpace(b))
	}
	b, err = os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return comm, ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		// hierarchy-ID:controllers:path
		fields := strings.SplitN(line, ":", 3)
		if len(fields) != 3 {
			continue
		}
		parts := strings.Split(fields[2], "/")
		for i := 0; i+1 < len(parts); i++ {
			if strings.HasPrefix(parts[i], "computerfs-sandbox") {
				return comm, strings.TrimSuffix(parts[i+1], "-init")
			}
		}
	}
	return comm, ""
}
