package computerfs

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/computerfs/computerfs/internal/testmount"
	"github.com/computerfs/computerfs/kv"
)

const toolsSpec = `sources:
  - path: /BUG_REPORT.md
    content: |
      # Crash on empty input
      Steps: run it with no input.
  - path: /secrets/token
    content: s3cr3t
policy:
  deny: ["/secrets"]
  read_only_paths: ["/BUG_REPORT.md"]
  exec:
    deny_commands: ['\bcurl\b']
`

// mountWithSpec mounts a workspace imported from yaml.
func mountWithSpec(t *testing.T, yaml string) *testmount.Mount {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "ws.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return testmount.Start(t, filepath.Join(dir, "store"), "--spec", file)
}

func toolText(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

func wantTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, want string) string {
	t.Helper()
	txt, isErr := toolText(t, cs, name, args)
	if isErr || !strings.Contains(txt, want) {
		t.Fatalf("%s %v: error %v, text:\n%s\nwant it to contain %q", name, args, isErr, txt, want)
	}
	return txt
}

func wantToolError(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, want string) {
	t.Helper()
	txt, isErr := toolText(t, cs, name, args)
	if !isErr || !strings.Contains(txt, want) {
		t.Fatalf("%s %v: error %v, text %q; want an error containing %q", name, args, isErr, txt, want)
	}
}

// exerciseTools drives every tool through an MCP session on the mount m.
func exerciseTools(t *testing.T, cs *mcp.ClientSession, m *testmount.Mount) {
	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(lt.Tools) != 9 {
		t.Fatalf("tools: %v %v", lt, err)
	}
	wantTool(t, cs, "read", map[string]any{"path": "BUG_REPORT.md"}, "     1\t# Crash on empty input\n     2\tSteps")
	wantTool(t, cs, "mkdir", map[string]any{"path": "/workspace/triage"}, "Made /workspace/triage")
	wantTool(t, cs, "write", map[string]any{"path": "triage/notes.md", "content": "first\nsecond\n"}, "Created /workspace/triage/notes.md")
	// The mount sees the change at once (the daemon tells the kernel).
	if b, err := os.ReadFile(filepath.Join(m.Dir, "triage/notes.md")); err != nil || string(b) != "first\nsecond\n" {
		t.Fatalf("on the mount: %q %v", b, err)
	}
	wantTool(t, cs, "edit", map[string]any{"path": "triage/notes.md", "edits": []any{map[string]any{"oldText": "second", "newText": "2nd"}}}, "-second\n+2nd")
	for i := range 5 {
		os.WriteFile(filepath.Join(m.Dir, fmt.Sprintf("triage/f%d.txt", i)), []byte("needle\n"), 0o644)
	}
	wantTool(t, cs, "ls", map[string]any{"path": "triage", "limit": 2}, "continue with offset=2")
	wantTool(t, cs, "find", map[string]any{"pattern": "*.txt", "limit": 3, "offset": 3}, "/workspace/triage/f4.txt")
	wantTool(t, cs, "grep", map[string]any{"query": "NEEDLE", "ignoreCase": true, "limit": 1}, "/workspace/triage/f0.txt:1:needle\n[more matches: continue with offset=1]")
	wantTool(t, cs, "exec", map[string]any{"command": "grep -c needle triage/*.txt | wc -l", "backend": "shell"}, "5\n")
	wantTool(t, cs, "delete", map[string]any{"path": "triage", "recursive": true}, "Deleted /workspace/triage")
	if _, err := os.Stat(filepath.Join(m.Dir, "triage")); !os.IsNotExist(err) {
		t.Fatalf("triage still on the mount: %v", err)
	}
	// Refusals name their rule; escapes are refused; schema violations too.
	wantToolError(t, cs, "read", map[string]any{"path": "secrets/token"}, `policy deny[0] "/secrets"`)
	wantToolError(t, cs, "write", map[string]any{"path": "BUG_REPORT.md", "content": "x"}, "read_only_paths[0]")
	wantToolError(t, cs, "exec", map[string]any{"command": "curl http://example.com"}, "exec.deny_commands[0]")
	wantToolError(t, cs, "read", map[string]any{"path": "../../etc/passwd"}, "climbs out of /workspace")
	wantToolError(t, cs, "edit", map[string]any{"path": "BUG_REPORT.md", "edits": "nope"}, "")
	wantToolError(t, cs, "ls", map[string]any{"limit": 1e6}, "")
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "rm", Arguments: map[string]any{}}); err == nil {
		t.Fatal("an unknown tool was called")
	}
	// Concurrent calls.
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := fmt.Sprintf("c/%d.txt", i)
			if txt, isErr := toolText(t, cs, "write", map[string]any{"path": p, "content": "x"}); isErr {
				t.Errorf("write %s: %s", p, txt)
			}
			if txt, isErr := toolText(t, cs, "read", map[string]any{"path": p}); isErr || !strings.Contains(txt, "\tx") {
				t.Errorf("read %s: %s", p, txt)
			}
		}()
	}
	wg.Wait()
}

func TestMCPStdioEndToEnd(t *testing.T) {
	m := mountWithSpec(t, toolsSpec)
	bin := testmount.Binary(t)
	cmd := exec.Command(bin, "mcp", "-w", m.Dir)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	exerciseTools(t, cs, m)
	cs.Close()

	// The audit: every call, readable with computerfs log --tools.
	out, err := exec.Command(bin, "log", "-w", m.Dir, "--tools", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var recs []kv.AuditRecord
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var r kv.AuditRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		recs = append(recs, r)
	}
	if len(recs) != 25 { // 13 calls and 12 concurrent ones: schema violations and unknown tools reach no tool
		t.Fatalf("%d audit records:\n%s", len(recs), out)
	}
	byTool := map[string]kv.AuditRecord{}
	for _, r := range recs {
		if !r.Done {
			t.Errorf("record not done: %+v", r)
		}
		if _, ok := byTool[r.Tool]; !ok {
			byTool[r.Tool] = r
		}
	}
	if w := byTool["write"]; w.Journal != 1 || w.Actor.Entry != "tools" || w.Result != "created, 13 bytes" {
		t.Fatalf("write record: %+v", w)
	}
	if x := byTool["exec"]; x.Backend != "shell" || x.Result == "" {
		t.Fatalf("exec record: %+v", x)
	}
	text, err := exec.Command(bin, "log", "-w", m.Dir, "--tools").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`#\d+ read \{[^}]*"path":"secrets/token"\} -> REFUSED: refused by policy deny\[0\]`).Match(text) {
		t.Fatalf("log --tools:\n%s", text)
	}
	// The journal names the calls.
	jl, _ := exec.Command(bin, "log", "-w", m.Dir, "--path", "/triage/notes.md").Output()
	if !strings.Contains(string(jl), "by tools #") {
		t.Fatalf("journal:\n%s", jl)
	}
	// The audit survives the daemon and reads from the store too.
	m.Unmount(t)
	stored, err := exec.Command(bin, "log", "--store", m.Store, "--tools", "--since", "10").Output()
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(string(stored)), "\n"); len(lines) != 16 || !strings.Contains(lines[0], " #10 read ") {
		t.Fatalf("log --store --tools --since 10:\n%s", stored)
	}
}

// bearer adds a token to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func TestMCPHTTPEndToEnd(t *testing.T) {
	m := mountWithSpec(t, toolsSpec)
	cmd := exec.Command(testmount.Binary(t), "mcp", "-w", m.Dir, "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "COMPUTERFS_MCP_TOKEN=right-token")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(stderr)
	url := ""
	deadline := time.Now().Add(30 * time.Second)
	for url == "" && time.Now().Before(deadline) && sc.Scan() {
		if m := regexp.MustCompile(`on (http://\S+/mcp)`).FindStringSubmatch(sc.Text()); m != nil {
			url = m[1]
		}
	}
	if url == "" {
		t.Fatal("computerfs mcp did not say where it listens")
	}
	go func() {
		for sc.Scan() {
		}
	}()
	connect := func(token string) (*mcp.ClientSession, error) {
		tr := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token}}, MaxRetries: -1}
		return mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), tr, nil)
	}
	if cs, err := connect("wrong-token"); err == nil {
		cs.Close()
		t.Fatal("a wrong token was accepted")
	}
	resp, err := http.Post(url, "application/json", strings.NewReader(`{}`))
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: %v %v", resp, err)
	}
	resp.Body.Close()
	cs, err := connect("right-token")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	exerciseTools(t, cs, m)
}
