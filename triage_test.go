package computerfs

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/computerfs/computerfs/internal/gittest"
	"github.com/computerfs/computerfs/internal/s3test"
	"github.com/computerfs/computerfs/internal/testmount"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// triageModule is a Go module whose test fails: Sum subtracts.
var triageModule = map[string]string{
	"go.mod":       "module example.com/calc\n\ngo 1.21\n",
	"calc.go":      "package calc\n\n// Sum adds a and b.\nfunc Sum(a, b int) int { return a - b }\n",
	"calc_test.go": "package calc\n\nimport \"testing\"\n\nfunc TestSum(t *testing.T) {\n\tif got := Sum(2, 3); got != 5 {\n\t\tt.Fatalf(\"Sum(2, 3) = %d, want 5\", got)\n\t}\n}\n",
}

// TestTriageLoop is a bug-triage agent's whole loop over MCP, once with
// the Go SDK's client and once with the official TypeScript SDK's (from
// npm, internal/mcpts), each on a workspace of its own made from a spec
// with the module's git remote, an S3 prefix and the task: read, grep,
// the failing test in the sandbox, an edit, the tests twice (the second
// from the build cache), the agent's commit, a summary in the bucket,
// computerfs sync. Then the remote has the agent's commit, by the spec's
// author, on the workspace's own branch, main is untouched, and the
// bucket has the summary.
func TestTriageLoop(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	bucket := srv.NewBucket(t)
	srv.Put(t, bucket, "triage/inputs.csv", []byte("a,b,sum\n2,3,5\n"))

	src := gittest.NewRepo(t, triageModule)
	remote := filepath.Join(t.TempDir(), "calc.git")
	gittest.Git(t, "", "clone", "-q", "--bare", src, remote)
	mainBefore := strings.TrimSpace(gittest.Git(t, remote, "rev-parse", "main"))
	bin := testmount.Binary(t)

	for _, client := range []string{"go", "ts"} {
		t.Run(client, func(t *testing.T) {
			name := "triage-" + client
			spec := fmt.Sprintf(`name: %s
sources:
  - path: /repo
    git: {url: "file://%s", ref: main, push: true, author: "Triage Agent <agent@example.com>"}
  - path: /data
    s3: {bucket: %s, prefix: triage/, endpoint: %q, path_style: true, write_back: true}
  - path: /TASK.md
    content: |
      Sum(2, 3) is not 5: find out why, fix it, make go test ./... pass, commit.
`, name, remote, bucket, srv.Endpoint)
			m := mountWithSpec(t, spec)
			summary := "summary-" + client + ".md"
			var first, second time.Duration
			switch client {
			case "go":
				first, second = triageWithGoSDK(t, bin, m.Dir, summary)
			case "ts":
				first, second = triageWithTypeScriptSDK(t, bin, m.Dir, summary)
			}
			// The second run said "(cached)" (the build cache volume);
			// its time is the sandbox's start and the daemon's, which a
			// loaded machine or a race build stretches: logged, not
			// asserted (docs/sandbox.md has the figures).
			t.Logf("%s: go test in the sandbox after the fix %v, again %v (cached)", client, first, second)

			if out, err := exec.Command(bin, "sync", "-w", m.Dir).CombinedOutput(); err != nil {
				t.Fatalf("computerfs sync: %v\n%s", err, out)
			}
			branch := "computerfs/" + name
			got := gittest.Git(t, remote, "log", "--format=%an <%ae>|%s", "-1", branch)
			if strings.TrimSpace(got) != "Triage Agent <agent@example.com>|calc: Sum adds" {
				t.Errorf("the remote's %s: %q, want the agent's commit", branch, got)
			}
			fixed := gittest.Git(t, remote, "show", branch+":calc.go")
			if !strings.Contains(fixed, "return a + b") {
				t.Errorf("%s:calc.go is not fixed:\n%s", branch, fixed)
			}
			if head := strings.TrimSpace(gittest.Git(t, remote, "rev-parse", "main")); head != mainBefore {
				t.Errorf("the remote's main moved: %s, was %s", head, mainBefore)
			}
			if b := string(srv.Get(t, bucket, "triage/"+summary)); !strings.Contains(b, "it adds now") {
				t.Errorf("the bucket's triage/%s: %q", summary, b)
			}
			audit, err := exec.Command(bin, "log", "-w", m.Dir, "--tools").Output()
			if err != nil || strings.Count(string(audit), " exec ") < 4 {
				t.Errorf("log --tools: %v\n%s", err, audit)
			}
		})
	}
}

// triageWithGoSDK runs the loop with the Go SDK's client over stdio; it
// returns how long the two passing go tests took.
func triageWithGoSDK(t *testing.T, bin, mnt, summary string) (first, second time.Duration) {
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "triage-go", Version: "1"}, nil).
		Connect(context.Background(), &mcp.CommandTransport{Command: exec.Command(bin, "mcp", "-w", mnt)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	wantTool(t, cs, "read", map[string]any{"path": "TASK.md"}, "Sum")
	wantTool(t, cs, "grep", map[string]any{"query": "func Sum", "path": "repo"}, "/workspace/repo/calc.go:")
	goTest := map[string]any{"command": "go test ./...", "cwd": "repo", "backend": "sandbox", "timeoutMs": 600000}
	txt, _ := toolText(t, cs, "exec", goTest)
	if !strings.Contains(txt, "Sum(2, 3) = -1, want 5") || !strings.Contains(txt, "[exit code 1, sandbox backend") {
		t.Fatalf("the failing test did not fail as it should:\n%s", txt)
	}
	wantTool(t, cs, "edit", map[string]any{"path": "repo/calc.go", "edits": []any{map[string]any{"oldText": "return a - b", "newText": "return a + b"}}},
		"+func Sum(a, b int) int { return a + b }")
	first = execMillis(t, wantTool(t, cs, "exec", goTest, "ok  \texample.com/calc"))
	second = execMillis(t, wantTool(t, cs, "exec", goTest, "(cached)"))
	wantTool(t, cs, "exec", map[string]any{"command": "git commit -qam 'calc: Sum adds' && git log --format=%an -1", "cwd": "repo"}, "Triage Agent")
	wantTool(t, cs, "write", map[string]any{"path": "data/" + summary, "content": "Sum subtracted; it adds now. go test ./... passes.\n"}, "Created")
	return first, second
}

var execLine = regexp.MustCompile(`\[exit code \d+, \w+ backend, (\d+) ms\]`)

func execMillis(t *testing.T, txt string) time.Duration {
	t.Helper()
	m := execLine.FindStringSubmatch(txt)
	if m == nil {
		t.Fatalf("no exit line in:\n%s", txt)
	}
	ms, _ := strconv.Atoi(m[1])
	return time.Duration(ms) * time.Millisecond
}

// triageWithTypeScriptSDK runs internal/mcpts/triage.mjs with node, on the
// SDK that scripts/deps.sh installed there (npm ci).
func triageWithTypeScriptSDK(t *testing.T, bin, mnt, summary string) (first, second time.Duration) {
	dir, _ := filepath.Abs("internal/mcpts")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		t.Fatalf("the TypeScript MCP SDK is not installed in %s (scripts/deps.sh does it: npm ci): %v", dir, err)
	}
	cmd := exec.Command("node", "triage.mjs", bin, mnt, summary)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node triage.mjs: %v\n%s", err, out)
	}
	var res struct {
		OK            bool
		FirstMs       int64  `json:"first_ms"`
		SecondMs      int64  `json:"second_ms"`
		SecondBackend string `json:"second_backend"`
		Progress      int
	}
	line := strings.TrimSpace(string(out))
	if err := json.Unmarshal([]byte(line[strings.LastIndexByte(line, '\n')+1:]), &res); err != nil || !res.OK || res.SecondBackend != "sandbox" {
		t.Fatalf("node triage.mjs said %q (%v)", out, err)
	}
	return time.Duration(res.FirstMs) * time.Millisecond, time.Duration(res.SecondMs) * time.Millisecond
}
