package computerfs

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/computerfs/computerfs/internal/testmount"
)

// TestMCPExecTimeoutFromPolicy: the policy's max_timeout bounds exec, and
// a call that gives no timeoutMs gets the default within it, whatever the
// maximum: under two minutes (the default) as over ten (the schema must
// not fill in or cap what only the policy decides).
func TestMCPExecTimeoutFromPolicy(t *testing.T) {
	for _, c := range []struct {
		max      string
		okMs     int // a timeout within the maximum
		refuseMs int // one over it
	}{
		{"30s", 20000, 40000},
		{"20m", 900000, 1500000},
	} {
		t.Run(c.max, func(t *testing.T) {
			m := mountWithSpec(t, "sources:\n  - path: /a\n    content: x\npolicy:\n  exec:\n    max_timeout: "+c.max+"\n")
			cmd := exec.Command(testmount.Binary(t), "mcp", "-w", m.Dir)
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			call := func(args map[string]any) (string, bool) {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "exec", Arguments: args})
				if err != nil {
					t.Fatal(err)
				}
				return res.Content[0].(*mcp.TextContent).Text, res.IsError
			}
			if text, isErr := call(map[string]any{"command": "cat a"}); isErr || !strings.HasPrefix(text, "x") {
				t.Errorf("exec with no timeoutMs: %q", text)
			}
			if text, isErr := call(map[string]any{"command": "cat a", "timeoutMs": c.okMs}); isErr || !strings.HasPrefix(text, "x") {
				t.Errorf("exec with timeoutMs %d: %q", c.okMs, text)
			}
			if text, isErr := call(map[string]any{"command": "cat a", "timeoutMs": c.refuseMs}); !isErr || !strings.Contains(text, "max_timeout") {
				t.Errorf("exec with timeoutMs %d over %s: %v %q", c.refuseMs, c.max, isErr, text)
			}
		})
	}
}
