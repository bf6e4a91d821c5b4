package computerfs

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/computerfs/computerfs/internal/testmount"
	"github.com/computerfs/computerfs/tools"
)

// TestMCPExecProgressThroughDaemon: `computerfs mcp` (stdio, and
// streamable HTTP) passes the daemon's progress of a long sandboxed
// command to a client that gave a progress token: one at least every
// heartbeat, the first with the output so far; the result is the same as
// without a token, which gets no notifications. A client whose request
// timeout is shorter than the command but resets on progress (as the
// TypeScript SDK's resetTimeoutOnProgress) would not time out.
func TestMCPExecProgressThroughDaemon(t *testing.T) {
	m := mountWithSpec(t, "sources:\n  - path: /a\n    content: x\n")
	var mu sync.Mutex
	var got []*mcp.ProgressNotificationParams
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			got = append(got, r.Params)
			mu.Unlock()
		}})
	take := func() []*mcp.ProgressNotificationParams {
		mu.Lock()
		defer mu.Unlock()
		out := got
		got = nil
		return out
	}
	const command = "echo start; sleep 13; echo end"
	run := func(t *testing.T, cs *mcp.ClientSession) {
		for _, tok := range []any{"stdio-or-http", 7, nil} {
			p := &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"command": command, "backend": "sandbox"}}
			if tok != nil {
				p.SetProgressToken(tok)
			}
			start := time.Now()
			res, err := cs.CallTool(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			text := res.Content[0].(*mcp.TextContent).Text
			if res.IsError || !strings.HasPrefix(text, "start\nend\n[exit code 0, sandbox backend") {
				t.Fatalf("token %v: %v %q", tok, res.IsError, text)
			}
			ps := take()
			var gaps []string
			last := 0.0
			for _, p := range ps {
				gaps = append(gaps, fmt.Sprintf("%.1f", p.Progress-last))
				last = p.Progress
			}
			t.Logf("token %v: %d notifications in %v, gaps %v s", tok, len(ps), time.Since(start).Round(time.Millisecond), gaps)
			if tok == nil {
				if len(ps) != 0 {
					t.Errorf("no token: %d notifications", len(ps))
				}
				continue
			}
			if len(ps) < 2 {
				t.Fatalf("token %v: %d notifications for a 13 s command", tok, len(ps))
			}
			last = 0
			for i, p := range ps {
				if fmt.Sprint(p.ProgressToken) != fmt.Sprint(tok) || p.Progress <= last || p.Progress-last > (tools.ProgressHeartbeat+3*time.Second).Seconds() {
					t.Errorf("notification %d: token %v, progress %v after %v", i, p.ProgressToken, p.Progress, last)
				}
				last = p.Progress
			}
			if !strings.Contains(ps[0].Message, "start") {
				t.Errorf("first notification %q: want the output so far", ps[0].Message)
			}
		}
	}
	t.Run("stdio", func(t *testing.T) {
		cmd := exec.Command(testmount.Binary(t), "mcp", "-w", m.Dir)
		cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		run(t, cs)
	})
	t.Run("http", func(t *testing.T) {
		cmd := exec.Command(testmount.Binary(t), "mcp", "-w", m.Dir, "--listen", "127.0.0.1:0")
		cmd.Env = append(os.Environ(), "COMPUTERFS_MCP_TOKEN=progress-token")
		stderr, _ := cmd.StderrPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		sc := bufio.NewScanner(stderr)
		url := ""
		for url == "" && sc.Scan() {
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
		tr := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{"progress-token"}}, MaxRetries: -1}
		cs, err := client.Connect(context.Background(), tr, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		run(t, cs)
	})
}
