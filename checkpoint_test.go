package computerfs

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/computerfs/computerfs/internal/testmount"
	"github.com/computerfs/computerfs/kv"
)

const checkpointSpec = `sources:
  - path: /README.md
    content: hello
policy:
  checkpoint: each-call
  checkpoints:
    keep: 4
    agent_restore: true
`

// TestCheckpointEachCall: with checkpoint: each-call every tool call has
// a checkpoint in the audit, calls that change nothing share one, undo
// goes back to before a named call, before the last change, and one
// further when repeated; the agent's undo tool goes forward again to a
// newer checkpoint; the retention keeps the newest few.
func TestCheckpointEachCall(t *testing.T) {
	m := mountWithSpec(t, checkpointSpec)
	bin := testmount.Binary(t)
	cli := workspaceCLI(t, bin, m)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(),
		&mcp.CommandTransport{Command: exec.Command(bin, "mcp", "-w", m.Dir)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if names := toolNames(t, cs); names != "checkpoints,delete,edit,exec,find,grep,ls,mkdir,read,undo,write" {
		t.Errorf("tools listed: %s", names)
	}
	f1 := filepath.Join(m.Dir, "f1")
	content := func() string {
		t.Helper()
		b, err := os.ReadFile(f1)
		if os.IsNotExist(err) {
			return "<none>"
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	wantTool(t, cs, "read", map[string]any{"path": "README.md"}, "hello")        // 1
	wantTool(t, cs, "write", map[string]any{"path": "f1", "content": "one"}, "") // 2
	wantTool(t, cs, "write", map[string]any{"path": "f1", "content": "two"}, "") // 3
	wantTool(t, cs, "exec", map[string]any{"command": "echo three > f1", "backend": "shell"}, "")
	wantTool(t, cs, "read", map[string]any{"path": "f1"}, "three") // 5
	if got := content(); got != "three\n" {
		t.Fatalf("f1 = %q", got)
	}

	out := cli(false, "log", "--tools", "--json")
	var recs []kv.AuditRecord
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r kv.AuditRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("log --tools: %v: %q", err, line)
		}
		recs = append(recs, r)
	}
	if len(recs) != 5 {
		t.Fatalf("%d audit records, want 5:\n%s", len(recs), out)
	}
	for _, r := range recs {
		if !kv.IsCheckpoint(r.Checkpoint) {
			t.Fatalf("call %d (%s) has checkpoint %q", r.ID, r.Tool, r.Checkpoint)
		}
	}
	if recs[0].Checkpoint != recs[1].Checkpoint {
		t.Errorf("a read changed nothing, yet calls 1 and 2 have checkpoints %s and %s", recs[0].Checkpoint, recs[1].Checkpoint)
	}
	for i := 2; i < 5; i++ {
		if recs[i].Checkpoint == recs[i-1].Checkpoint {
			t.Errorf("calls %d and %d share checkpoint %s though call %d wrote", i, i+1, recs[i].Checkpoint, i)
		}
	}
	if text := cli(false, "log", "--tools"); !strings.Contains(text, "checkpoint "+recs[2].Checkpoint) {
		t.Errorf("log --tools does not show the checkpoints:\n%s", text)
	}

	// Before call 3: f1 as call 2 wrote it.
	cli(false, "undo", "3")
	if got := content(); got != "one" {
		t.Fatalf("after undo 3: f1 = %q, want one", got)
	}
	// Undo again: one call further, before call 2.
	cli(false, "undo")
	if got := content(); got != "<none>" {
		t.Fatalf("after a second undo: f1 = %q, want no file", got)
	}
	// The agent goes forward again: to before call 4 (call 3's write).
	txt := wantTool(t, cs, "checkpoints", map[string]any{}, recs[3].Checkpoint)
	if !strings.Contains(txt, recs[3].Checkpoint+"  ") || !strings.Contains(txt, "after write #3") {
		t.Errorf("checkpoints do not say which call they came before:\n%s", txt)
	}
	wantTool(t, cs, "undo", map[string]any{"to": recs[3].Checkpoint}, "back to checkpoint "+recs[3].Checkpoint)
	if got := content(); got != "two" {
		t.Fatalf("after the agent's undo to %s: f1 = %q, want two", recs[3].Checkpoint, got)
	}
	// A change through the mount, then undo: it goes.
	if err := os.WriteFile(f1, []byte("mount"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "exec", "-w", m.Dir, "--", "echo exec > f2").CombinedOutput(); err != nil {
		t.Fatalf("computerfs exec: %v\n%s", err, out)
	}
	cli(false, "undo")
	if got, err := os.ReadFile(filepath.Join(m.Dir, "f2")); err == nil {
		t.Errorf("f2 (%q) is still there after undo", got)
	}
	if got := content(); got != "mount" {
		t.Errorf("after undo of the exec: f1 = %q, want mount", got)
	}
	wantToolError(t, cs, "undo", map[string]any{"to": "@999999"}, "gone")
	wantToolError(t, cs, "undo", map[string]any{"to": "x/../y"}, "want a checkpoint")

	// Retention: at most keep (4) once many calls wrote.
	for i := range 8 {
		wantTool(t, cs, "write", map[string]any{"path": "g", "content": strings.Repeat("x", i+1)}, "")
	}
	var list []kv.CheckpointInfo
	if err := json.Unmarshal([]byte(cli(false, "undo", "--list", "--json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) == 0 || len(list) > 4 {
		t.Errorf("%d checkpoints kept, want 1 to 4: %+v", len(list), list)
	}
	if snaps := cli(false, "snapshot"); strings.Contains(snaps, "@") {
		t.Errorf("checkpoints listed as snapshots:\n%s", snaps)
	}
}

// TestCheckpointToolsRefused: without agent_restore the agent can neither
// list nor restore checkpoints; without each-call there are none, and
// undo says so.
func TestCheckpointToolsRefused(t *testing.T) {
	m := mountWithSpec(t, strings.Replace(checkpointSpec, "    agent_restore: true\n", "", 1))
	bin := testmount.Binary(t)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(),
		&mcp.CommandTransport{Command: exec.Command(bin, "mcp", "-w", m.Dir)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	wantTool(t, cs, "write", map[string]any{"path": "f", "content": "x"}, "")
	if names := toolNames(t, cs); strings.Contains(names, "undo") || strings.Contains(names, "checkpoints") {
		t.Errorf("tools listed without agent_restore: %s", names)
	}
	// Called anyway (through the control socket): refused.
	c, err := Dial(m.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"checkpoints", "undo"} {
		if _, err := c.Call(context.Background(), name, nil); err == nil || !strings.Contains(err.Error(), "agent_restore") {
			t.Errorf("%s without agent_restore: %v", name, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(m.Dir, "f")); err != nil || string(b) != "x" {
		t.Errorf("f: %q %v", b, err)
	}

	plain := mountWithSpec(t, "sources:\n  - path: /a\n    content: a\n")
	out, err := exec.Command(bin, "undo", "-w", plain.Dir).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no checkpoint") {
		t.Errorf("undo without checkpoints: %v\n%s", err, out)
	}
}

// toolNames lists the server's tools, sorted, comma-separated.
func toolNames(t *testing.T, cs *mcp.ClientSession) string {
	t.Helper()
	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range lt.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}
