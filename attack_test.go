package computerfs

// The attack suite, end to end: an agent drives its workspace through MCP
// (the Go SDK's client, over stdio, as agents do) and tries to end, wedge
// or exhaust the daemon that serves it, or another workspace's. Each
// attack is a tool call with a short timeoutMs. What must hold after each
// one is the property, not the attack's own answer:
//   - the call came back in time (its timeout, plus slack for a loaded
//     machine), whatever the command was;
//   - the work behind it stopped: the daemon's CPU goes back to idle;
//   - the attacked daemon still answers, and so does a second workspace's,
//     whose files are intact;
//   - nothing was killed: both daemons are the same processes at the end.
// The daemons run in a memory cgroup of the test's, so that a failure here
// is a killed daemon (and a failed test), never a machine out of memory.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/computerfs/computerfs/internal/proc"
	"github.com/computerfs/computerfs/internal/testmount"
)

// attackSlack is how late past its timeout a call may come back here. The
// daemon's own bound is a second; a busy 2-core machine running the race
// detector needs more, and the test reports what it measured.
const attackSlack = 15 * time.Second

// memoryCgroup puts pid in a new v1 memory cgroup limited to limit bytes
// (swap included where the kernel counts it), and takes it out again when
// the test ends.
func memoryCgroup(t *testing.T, pid int, limit int64) {
	t.Helper()
	root := "/sys/fs/cgroup/memory"
	if _, err := os.Stat(filepath.Join(root, "cgroup.procs")); err != nil {
		root = "/sys/fs/cgroup/unified" // a v2 hierarchy with the memory controller
	}
	dir := filepath.Join(root, fmt.Sprintf("computerfs-attack-%d-%d", os.Getpid(), pid))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("memory cgroup: %v", err)
	}
	lim := strconv.FormatInt(limit, 10)
	var err error
	if strings.HasSuffix(root, "memory") {
		err = os.WriteFile(filepath.Join(dir, "memory.limit_in_bytes"), []byte(lim), 0o644)
		if err == nil {
			// Not there when the kernel does not account swap.
			os.WriteFile(filepath.Join(dir, "memory.memsw.limit_in_bytes"), []byte(lim), 0o644)
		}
	} else {
		err = os.WriteFile(filepath.Join(dir, "memory.max"), []byte(lim), 0o644)
		if err == nil {
			os.WriteFile(filepath.Join(dir, "memory.swap.max"), []byte("0"), 0o644)
		}
	}
	if err != nil {
		os.Remove(dir)
		t.Fatalf("memory cgroup limit: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		os.Remove(dir)
		t.Fatalf("memory cgroup: move pid %d: %v", pid, err)
	}
	t.Cleanup(func() {
		if proc.Running(pid) {
			os.WriteFile(filepath.Join(root, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
		}
		for i := 0; i < 50; i++ {
			if err := os.Remove(dir); err == nil || errors.Is(err, os.ErrNotExist) {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Errorf("memory cgroup %s is left", dir)
	})
}

// cpuTicks is the CPU time pid has used, in clock ticks (user + system).
func cpuTicks(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatalf("daemon %d: %v", pid, err)
	}
	// The command name, in parentheses, may hold spaces: count from after it.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}

// waitIdle waits until pid uses less than a tenth of a CPU over a second,
// and fails the test if that does not happen within limit.
func waitIdle(t *testing.T, pid int, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		before := cpuTicks(t, pid)
		time.Sleep(time.Second)
		if used := cpuTicks(t, pid) - before; used <= 10 { // 100 ticks a second
			return time.Since(start)
		} else if time.Since(start) > limit {
			t.Fatalf("daemon %d still busy %v after the call returned (%d ticks in the last second): the work behind the call goes on", pid, limit, used)
		}
	}
}

type attack struct {
	name    string
	backend string // "shell" or "sandbox"
	command string
	timeout time.Duration
}

// fastPathAttacks are commands that, on the shell fast path, would use
// all the memory there is, run forever or write without end.
var fastPathAttacks = []attack{
	{"jq array of 1e9", "shell", `jq -n '[range(1e9)]' | wc -c`, 3 * time.Second},
	{"jq string repeat", "shell", `jq -n '"x" * 1e10' | wc -c`, 3 * time.Second},
	{"jq reduce", "shell", `jq -n 'reduce range(1e9) as $i ([]; . + [$i])' | wc -c`, 3 * time.Second},
	{"eval of a huge string", "shell", `x=$(printf '%0200000000d' 0); eval "$x$x$x$x"`, 3 * time.Second},
	{"doubling variable", "shell", `x=x; while :; do x=$x$x; done`, 3 * time.Second},
	{"awk busy loop", "shell", `awk 'BEGIN { while (1) ; }'`, 3 * time.Second},
	{"awk growing array", "shell", `awk 'BEGIN { for (;;) a[i++] = i }'`, 3 * time.Second},
	{"sed loop", "shell", `echo x | sed ':a; s/x/xx/; ta'`, 3 * time.Second},
	{"shell busy loop", "shell", `while :; do :; done`, 3 * time.Second},
	{"deep recursion", "shell", `f() { f; }; f`, 3 * time.Second},
	{"cp of a sparse file", "shell", `truncate -s 100G sparse && cp sparse copy; rm -f sparse copy`, 3 * time.Second},
	{"endless file", "shell", `yes > endless; rm -f endless`, 3 * time.Second},
	{"deep mkdir", "shell", `mkdir -p $(printf 'd/%.0s' $(seq 100000))`, 3 * time.Second},
	{"find over a deep tree", "shell", `mkdir -p t/a/b/c/d/e && while :; do find t > /dev/null; done`, 3 * time.Second},
	{"sort of endless input", "shell", `yes | sort`, 3 * time.Second},
	{"read that waits", "shell", `read x`, 3 * time.Second},
	{"sleep", "shell", `sleep 1000`, 3 * time.Second},
}

// sandboxAttacks are the same kind of thing with real programs.
var sandboxAttacks = []attack{
	{"fork bomb", "sandbox", `f() { f | f & }; f`, 5 * time.Second},
	{"memory hog", "sandbox", `head -c 20G /dev/zero | tail -c 1 | wc -c`, 5 * time.Second},
	{"endless output", "sandbox", `yes`, 5 * time.Second},
	{"busy loop", "sandbox", `while :; do :; done`, 5 * time.Second},
}

// TestAttackDaemonSurvives runs every attack through MCP on workspace A
// and checks, after each, the properties in the file comment.
func TestAttackDaemonSurvives(t *testing.T) {
	a := mountWithSpec(t, "sources:\n  - path: /README\n    content: a\n")
	b := mountWithSpec(t, "sources:\n  - path: /README\n    content: the other workspace\n")
	memoryCgroup(t, a.Pid, 4<<30)
	memoryCgroup(t, b.Pid, 1<<30)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "attacker", Version: "1"}, nil).Connect(context.Background(),
		&mcp.CommandTransport{Command: exec.Command(testmount.Binary(t), "mcp", "-w", a.Dir)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	waitIdle(t, a.Pid, time.Minute)

	for _, at := range append(append([]attack(nil), fastPathAttacks...), sandboxAttacks...) {
		t.Run(at.name, func(t *testing.T) {
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), at.timeout+2*attackSlack)
			defer cancel()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{
				"command": at.command, "backend": at.backend, "timeoutMs": at.timeout.Milliseconds()}})
			took := time.Since(start)
			if err != nil {
				t.Fatalf("the call failed after %v: %v", took, err)
			}
			text := ""
			for _, c := range res.Content {
				if tc, ok := c.(*mcp.TextContent); ok {
					text += tc.Text
				}
			}
			if len(text) > 300 {
				text = text[:150] + " ... " + text[len(text)-150:]
			}
			if took > at.timeout+attackSlack {
				t.Errorf("the call came back after %v (timeout %v): %s", took, at.timeout, text)
			}
			if !proc.Running(a.Pid) || !proc.Running(b.Pid) {
				t.Fatalf("a daemon is gone (A %v, B %v): %s", proc.Running(a.Pid), proc.Running(b.Pid), text)
			}
			idle := waitIdle(t, a.Pid, 30*time.Second)
			// Both workspaces still answer, through the mount and the fast path.
			for _, w := range []*testmount.Mount{a, b} {
				if _, err := os.Stat(filepath.Join(w.Dir, "README")); err != nil {
					t.Fatalf("workspace %s: %v", w.Dir, err)
				}
			}
			got, err := os.ReadFile(filepath.Join(b.Dir, "README"))
			if err != nil || string(got) != "the other workspace" {
				t.Fatalf("the other workspace's file: %q %v", got, err)
			}
			txt, isErr := toolText(t, cs, "exec", map[string]any{"command": "cat README", "backend": "shell"})
			if isErr || !strings.HasPrefix(txt, "a") {
				t.Fatalf("workspace A after the attack: %q", txt)
			}
			t.Logf("returned after %v (timeout %v), daemon idle %v later: %s", took.Round(time.Millisecond), at.timeout, idle.Round(time.Millisecond), strings.ReplaceAll(text, "\n", " | "))
		})
	}
}
