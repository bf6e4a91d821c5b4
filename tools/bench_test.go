package tools

import (
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"strings"
	"testing"
)

// In process, without MCP or the control socket: what the tools cost.
//
//	go test -run '^$' -bench . ./tools/
func BenchmarkRead(b *testing.B) {
	tl, f := newTools(b, nil)
	var src strings.Builder
	for i := range 400 {
		fmt.Fprintf(&src, "line %d of the file with some text\n", i)
	}
	f.WriteFile("a.txt", []byte(src.String()), 0o644)
	for b.Loop() {
		if _, err := tl.Read(ctx, ReadArgs{Path: "a.txt"}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGrep(b *testing.B) {
	tl, f := newTools(b, nil)
	var src strings.Builder
	for i := range 400 {
		fmt.Fprintf(&src, "line %d of the file with some text\n", i)
	}
	f.MkdirAll("src", 0o755)
	for i := range 50 {
		f.WriteFile(fmt.Sprintf("src/f%d.txt", i), []byte(src.String()), 0o644)
	}
	for b.Loop() {
		if _, err := tl.Grep(ctx, GrepArgs{Path: "src", Query: "line 399 of"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMCPRead is BenchmarkRead through the SDK's server and client
// (in memory): what MCP itself adds.
func BenchmarkMCPRead(b *testing.B) {
	tl, f := newTools(b, nil)
	var src strings.Builder
	for i := range 400 {
		fmt.Fprintf(&src, "line %d of the file with some text\n", i)
	}
	f.WriteFile("a.txt", []byte(src.String()), 0o644)
	cs := connect(b, tl)
	for b.Loop() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read", Arguments: map[string]any{"path": "a.txt"}})
		if err != nil || res.IsError {
			b.Fatal(err, res)
		}
	}
}
