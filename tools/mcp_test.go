package tools

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

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

// progressClient connects a real SDK client that records the progress
// notifications it gets.
func progressClient(t *testing.T, c Caller) (*mcp.ClientSession, func() []*mcp.ProgressNotificationParams) {
	t.Helper()
	var mu sync.Mutex
	var got []*mcp.ProgressNotificationParams
	st, ct := mcp.NewInMemoryTransports()
	ss, err := NewServer(c, "test", nil).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cl := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			got = append(got, r.Params)
			mu.Unlock()
		}})
	cs, err := cl.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, func() []*mcp.ProgressNotificationParams {
		mu.Lock()
		defer mu.Unlock()
		return append([]*mcp.ProgressNotificationParams(nil), got...)
	}
}

// checkProgress checks the notifications of a command that printed
// "start", ran about 13 s, then printed "end": one at least every
// heartbeat with a growing progress, the first soon with the output so
// far, each of a bounded size, all for the token.
func checkProgress(t *testing.T, got []*mcp.ProgressNotificationParams, tok any) {
	t.Helper()
	if len(got) < 2 {
		t.Fatalf("%d progress notifications for a 13 s command, want at least 2: %v", len(got), got)
	}
	last := 0.0
	for i, p := range got {
		if fmt.Sprint(p.ProgressToken) != fmt.Sprint(tok) {
			t.Errorf("notification %d: token %v, want %v", i, p.ProgressToken, tok)
		}
		if p.Progress <= last {
			t.Errorf("notification %d: progress %v after %v", i, p.Progress, last)
		}
		if gap := p.Progress - last; gap > (ProgressHeartbeat + 3*time.Second).Seconds() {
			t.Errorf("notification %d: %.1f s after the one before", i, gap)
		}
		last = p.Progress
		if len(p.Message) > ProgressMaxTail+200 {
			t.Errorf("notification %d: message of %d bytes", i, len(p.Message))
		}
	}
	if !strings.Contains(got[0].Message, "start") || got[0].Progress > 4 {
		t.Errorf("first notification at %.1f s: %q, want the output so far within a few seconds", got[0].Progress, got[0].Message)
	}
}

// TestMCPExecProgress: a long exec called with a progress token sends
// progress notifications while it runs; without a token none; the
// result is the same either way.
func TestMCPExecProgress(t *testing.T) {
	tl, _ := newTools(t, nil)
	cs, got := progressClient(t, tl)
	cmd := "echo start; sleep 13; echo end"
	p := &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"command": cmd}}
	p.SetProgressToken("tok-1")
	res, err := cs.CallTool(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if res.IsError || !strings.HasPrefix(text, "start\nend\n[exit code 0, shell backend") {
		t.Fatalf("with a token: %v %q", res.IsError, text)
	}
	checkProgress(t, got(), "tok-1")
	for _, p := range got() {
		t.Logf("progress %.1f: %q", p.Progress, p.Message)
	}
	n := len(got())
	time.Sleep(2 * ProgressMinGap)
	if len(got()) != n {
		t.Errorf("progress after the result: %v", got()[n:])
	}

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"command": "echo start; sleep 7; echo end"}})
	if err != nil {
		t.Fatal(err)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; res.IsError || !strings.HasPrefix(text, "start\nend\n[exit code 0, shell backend") {
		t.Fatalf("without a token: %v %q", res.IsError, text)
	}
	if len(got()) != n {
		t.Errorf("progress without a token: %v", got()[n:])
	}
}

// TestExecProgressBounded: a command that prints fast gets notifications
// at most one a ProgressMinGap, each with at most ProgressMaxTail bytes of
// its latest output, as valid UTF-8 without control characters.
func TestExecProgressBounded(t *testing.T) {
	tl, _ := newTools(t, nil)
	var mu sync.Mutex
	var got []Progress
	pctx := WithProgress(ctx, func(p Progress) {
		mu.Lock()
		got = append(got, p)
		mu.Unlock()
	})
	start := time.Now()
	// About 4 MB of output over ~4 s, with an escape and a broken rune.
	res, err := tl.Exec(pctx, ExecArgs{Command: `for i in 1 2 3 4; do for j in $(seq 2000); do printf 'line %d \033[31m \xff\xfe %s\n' $j xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx; done; sleep 1; done`})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s", res.ExitCode, res.Stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) < 2 || float64(len(got)) > took.Seconds()/ProgressMinGap.Seconds()+1 {
		t.Fatalf("%d notifications in %v", len(got), took)
	}
	var prev int64
	for i, p := range got {
		if len(p.Tail) > ProgressMaxTail || !utf8.ValidString(p.Tail) || strings.ContainsAny(p.Tail, "\x1b\r") {
			t.Errorf("notification %d: tail of %d bytes: %q", i, len(p.Tail), p.Tail)
		}
		if p.OutputBytes < prev {
			t.Errorf("notification %d: %d bytes after %d", i, p.OutputBytes, prev)
		}
		prev = p.OutputBytes
	}
	t.Logf("%d notifications in %v, %d bytes of output; first tail %q", len(got), took.Round(time.Millisecond), got[len(got)-1].OutputBytes, got[0].Tail[:80])
	if !strings.Contains(got[0].Tail, "line ") {
		t.Errorf("first tail %q", got[0].Tail)
	}
}
