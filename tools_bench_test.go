package computerfs

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/computerfs/computerfs/internal/testmount"
)

// BenchmarkToolsLatency measures the round trip of tool calls over MCP
// stdio (`computerfs mcp` against a mounted workspace, driven by the SDK's
// client) next to the same work done by spawning a process on a tmpfs
// copy (cat, sed -i, bash -c, grep -rn), in the same run. It reports the
// median and p99 of each and the ratio of the medians.
//
//	go test -run '^$' -bench ToolsLatency -benchtime 1x .
func BenchmarkToolsLatency(b *testing.B) {
	const n = 200
	m := testmount.StartPlain(b, filepath.Join(b.TempDir(), "store"))
	tmp, err := os.MkdirTemp("/dev/shm", "computerfs-bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	var src strings.Builder
	for i := range 400 {
		fmt.Fprintf(&src, "line %d of the file with some text\n", i)
	}
	for _, dir := range []string{m.Dir, tmp} {
		os.MkdirAll(filepath.Join(dir, "src/sub"), 0o755)
		for i := range 50 {
			os.WriteFile(filepath.Join(dir, fmt.Sprintf("src/sub/f%d.txt", i)), []byte(src.String()), 0o644)
		}
		os.WriteFile(filepath.Join(dir, "a.txt"), []byte(src.String()), 0o644)
	}
	cmd := exec.Command(testmount.PlainBinary(b), "mcp", "-w", m.Dir)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()

	call := func(name string, args func(i int) map[string]any) func(i int) {
		return func(i int) {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args(i)})
			if err != nil || res.IsError {
				b.Fatalf("%s: %v %+v", name, err, res)
			}
		}
	}
	spawn := func(argv func(i int) []string) func(i int) {
		return func(i int) {
			a := argv(i)
			c := exec.Command(a[0], a[1:]...)
			c.Dir = tmp
			if out, err := c.CombinedOutput(); err != nil && !strings.HasPrefix(a[0], "grep") {
				b.Fatalf("%v: %v %s", a, err, out)
			}
		}
	}
	type pair struct {
		name, base string
		tool, ref  func(i int)
	}
	pairs := []pair{
		{"read (400 lines)", "cat", call("read", func(int) map[string]any { return map[string]any{"path": "a.txt"} }),
			spawn(func(int) []string { return []string{"cat", "a.txt"} })},
		{"edit (one line)", "sed -i", call("edit", func(i int) map[string]any {
			return map[string]any{"path": "a.txt", "edits": []any{map[string]any{"oldText": fmt.Sprintf("line %d of", i), "newText": fmt.Sprintf("LINE %d of", i)}}}
		}), spawn(func(i int) []string {
			return []string{"sed", "-i", fmt.Sprintf("s/line %d of/LINE %d of/", i, i), "a.txt"}
		})},
		{"exec, shell fast path (wc -l)", "bash -c", call("exec", func(int) map[string]any { return map[string]any{"command": "wc -l a.txt", "backend": "shell"} }),
			spawn(func(int) []string { return []string{"bash", "-c", "wc -l a.txt"} })},
		{"grep (50 files, 20k lines)", "grep -rn", call("grep", func(int) map[string]any { return map[string]any{"path": "src", "query": "line 399 of", "limit": 100} }),
			spawn(func(int) []string { return []string{"grep", "-rn", "line 399 of", "src"} })},
		{"grep through exec (shell)", "grep -rn", call("exec", func(int) map[string]any {
			return map[string]any{"command": "grep -rn 'line 399 of' src", "backend": "shell"}
		}),
			spawn(func(int) []string { return []string{"grep", "-rn", "line 399 of", "src"} })},
	}
	measure := func(fn func(i int)) (med, p99 time.Duration) {
		fn(0) // warm
		d := make([]time.Duration, n)
		for i := range n {
			start := time.Now()
			fn(i + 1)
			d[i] = time.Since(start)
		}
		sort.Slice(d, func(a, b int) bool { return d[a] < d[b] })
		return d[n/2], d[n*99/100]
	}
	for b.Loop() {
		var out strings.Builder
		fmt.Fprintf(&out, "\n| call | MCP stdio median | p99 | baseline | median | p99 | median ratio |\n|---|---:|---:|---|---:|---:|---:|\n")
		for _, p := range pairs {
			tm, tp := measure(p.tool)
			rm, rp := measure(p.ref)
			fmt.Fprintf(&out, "| %s | %v | %v | %s | %v | %v | %.2f |\n", p.name, tm.Round(time.Microsecond), tp.Round(time.Microsecond),
				p.base, rm.Round(time.Microsecond), rp.Round(time.Microsecond), float64(tm)/float64(rm))
			b.ReportMetric(float64(tm.Microseconds()), strings.Fields(p.name)[0]+"-µs")
		}
		b.Log(out.String())
	}
}
