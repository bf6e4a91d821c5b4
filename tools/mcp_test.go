package tools

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// connect serves tl over an in-memory MCP transport to a real SDK client.
func connect(t testing.TB, c Caller) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	srv := NewServer(c, "test", nil)
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// callText calls a tool and returns its text and whether it is an error.
func callText(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

func TestMCPInMemory(t *testing.T) {
	tl, _ := newTools(t, nil)
	cs := connect(t, tl)
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range lt.Tools {
		names = append(names, tool.Name)
		if tool.Description == "" || tool.InputSchema == nil {
			t.Errorf("%s: no description or schema", tool.Name)
		}
	}
	if strings.Join(names, ",") != "delete,edit,exec,find,grep,ls,mkdir,read,write" {
		t.Fatalf("tools: %v", names)
	}
	if txt, isErr := callText(t, cs, "write", map[string]any{"path": "a.txt", "content": "hello\nworld\n"}); isErr || !strings.Contains(txt, "Created /workspace/a.txt") {
		t.Fatalf("write: %s", txt)
	}
	if txt, isErr := callText(t, cs, "edit", map[string]any{"path": "a.txt", "edits": []map[string]any{{"oldText": "world", "newText": "there"}}}); isErr || !strings.Contains(txt, "-world\n+there") {
		t.Fatalf("edit: %s", txt)
	}
	if txt, isErr := callText(t, cs, "read", map[string]any{"path": "/workspace/a.txt"}); isErr || txt != "     1\thello\n     2\tthere" {
		t.Fatalf("read: %q", txt)
	}
	// Tool errors are results with isError, with the reason.
	if txt, isErr := callText(t, cs, "read", map[string]any{"path": "/etc/passwd"}); !isErr || !strings.Contains(txt, "outside /workspace") {
		t.Fatalf("escape: %v %s", isErr, txt)
	}
	// Schema violations are refused before the tool runs.
	for _, args := range []map[string]any{{"path": 3}, {"path": "a", "limit": 100000}, {"pathx": "a"}, {}} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read", Arguments: args})
		if err == nil && !res.IsError {
			t.Fatalf("%v accepted", args)
		}
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "nope", Arguments: map[string]any{}}); err == nil {
		t.Fatal("unknown tool accepted")
	}
}
