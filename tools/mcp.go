package tools

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Caller runs a tool by name with JSON arguments and returns its JSON
// result: *Tools in the process that holds the store, or a client of the
// daemon that does (computerfs.Client).
type Caller interface {
	Call(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error)
}

// texter is a result that a model reads as text.
type texter interface{ Text() string }

// Descriptions, written for a model.
const (
	descRead = `Read a text file of the workspace, with line numbers ("NUMBER<TAB>TEXT" per line).
Paths are absolute under /workspace or relative to it (notes/a.txt is /workspace/notes/a.txt).
Returns at most 'limit' lines (default 2000) and about 64 KiB; when more remains the text ends with "[truncated: ... continue with offset=N]": call again with that offset.
Binary files are reported (type and size), not shown. Use this rather than exec cat.`
	descWrite = `Write a file of the workspace: create it (and any missing parent directories) or replace its whole content.
The file is replaced atomically and keeps the mode of the file it replaces. For small changes to an existing file prefer edit, which sends only the change.`
	descEdit = `Edit a text file by exact replacement. Each edits[i].oldText must occur exactly once in the file as it is now (copy it from read's output without the line-number prefix, whitespace and indentation exact; add neighbouring lines to make it unique).
The edits must not overlap; they are applied together or not at all. Line endings (CRLF) and a byte-order mark are kept. Returns a unified diff of the change.`
	descMkdir = `Make a directory of the workspace, with any missing parents (mkdir -p). An existing directory is fine.`
	descLs    = `List a directory of the workspace: each entry's type (file, dir, symlink), size, modification time, and a symlink's target, in name order.
Paginated: at most 'limit' entries (default 200); when more remain the result says "continue with offset=N".`
	descFind = `Find files and directories under a directory (default /workspace) whose path matches a glob.
"*.go" matches names at any depth; a pattern with a slash ("src/**/*_test.go") matches paths relative to 'path'; ** is any number of directories. .git directories are skipped. Directories end with "/".
Paginated like ls.`
	descGrep = `Search file contents under a path (a file or a directory, default /workspace) for lines containing 'query' (a literal string, or an RE2 regular expression with regex=true).
Options: ignoreCase, include (a glob on file names such as "*.go"), context (lines around each match).
Output lines are "FILE:LINE:TEXT" (context lines "FILE-LINE-TEXT"). Binary files and .git directories are skipped. Paginated: at most 'limit' matches (default 100), then "continue with offset=N".
Prefer this over exec grep: it is faster and its output is structured.`
	descDelete = `Delete a file, symbolic link or directory of the workspace. A directory that is not empty needs recursive=true (it is then removed with everything under it). The workspace root cannot be deleted.`
	descExec   = `Run a shell command line in the workspace (working directory /workspace unless cwd says otherwise) and return its exit code, stdout and stderr (output past the limit is cut, and the result says so).
Backends: "shell" is the fast path: a bash-compatible interpreter with built-in coreutils, grep, sed, find, awk, jq, diff, xargs, tar and the common git commands (status, diff, log, add, commit...) running directly on the workspace in well under a millisecond, but no other programs. "sandbox" runs real programs (compilers, test runners, package managers, git push and fetch) in an isolated container; it costs tens of milliseconds per call. "auto" (the default) picks shell when every command in the line is built in.
A command that runs past timeoutMs is stopped (exit code 124).`
)

// The checkpoint tools' descriptions.
const (
	descCheckpoints = `List the workspace's checkpoints, oldest first: the state before each of your calls that followed a change (when the workspace's policy takes them and lets you use them).`
	descUndo        = `Put the whole workspace back to a checkpoint: 'to' is a checkpoint's name from the checkpoints tool (@SEQ); empty goes back to before your last call that changed something (again: one more). Files changed since are as they were then; newer checkpoints stay, so an undo can itself be undone.`
)

// toolDef adds one tool to a server.
type toolDef struct {
	name string
	add  func(s *mcp.Server, c Caller)
}

// def defines a tool; bounds gives properties a maximum and a default.
func def[In any, Out texter](name, desc string, bounds map[string][2]float64) toolDef {
	return toolDef{name, func(s *mcp.Server, c Caller) {
		addTool[In, Out](s, c, &mcp.Tool{Name: name, Description: desc, InputSchema: inputSchema[In](bounds)})
	}}
}

// Optional tools are listed only when the workspace's policy offers them
// (Offerer): a model is not shown tools it may not use.
var optional = map[string]bool{"checkpoints": true, "undo": true}

// Offerer is a Caller that knows which optional tools its workspace
// offers. A Caller that is not one offers none.
type Offerer interface {
	Offers(name string) bool
}

// Offers says whether the policy lets the agent use the tool name.
func (t *Tools) Offers(name string) bool {
	switch name {
	case "checkpoints", "undo":
		return t.checkpointsAllowed() == nil
	}
	return slices.Contains(Names, name)
}

var defs = []toolDef{
	def[ReadArgs, ReadResult]("read", descRead, map[string][2]float64{"limit": {ReadMaxLines, ReadDefaultLines}}),
	def[WriteArgs, WriteResult]("write", descWrite, nil),
	def[EditArgs, EditResult]("edit", descEdit, nil),
	def[MkdirArgs, MkdirResult]("mkdir", descMkdir, nil),
	def[LsArgs, LsResult]("ls", descLs, map[string][2]float64{"limit": {LsMax, LsDefault}}),
	def[FindArgs, FindResult]("find", descFind, map[string][2]float64{"limit": {FindMax, FindDefault}}),
	def[GrepArgs, GrepResult]("grep", descGrep, map[string][2]float64{"limit": {GrepMax, GrepDefault}, "context": {GrepMaxContext, 0}}),
	def[DeleteArgs, DeleteResult]("delete", descDelete, nil),
	// exec's timeoutMs has neither a default nor a maximum in the schema:
	// both are the policy's, which only the daemon knows, and the SDK
	// would fill a schema default into every call that gives none.
	def[ExecArgs, ExecResult]("exec", descExec, nil),
	def[CheckpointsArgs, CheckpointsResult]("checkpoints", descCheckpoints, nil),
	def[UndoArgs, UndoResult]("undo", descUndo, nil),
}

func addTool[In any, Out texter](s *mcp.Server, c Caller, t *mcp.Tool) {
	mcp.AddTool(s, t, func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		var out Out
		args, err := json.Marshal(in)
		if err != nil {
			return nil, out, err
		}
		if req != nil && req.Params != nil && req.Session != nil {
			if tok := req.Params.GetProgressToken(); tok != nil {
				var stop func()
				ctx, stop = notifyProgress(ctx, req.Session, tok)
				defer stop()
			}
		}
		res, err := c.Call(ctx, t.Name, args)
		if err != nil {
			return nil, out, err
		}
		if err := json.Unmarshal(res, &out); err != nil {
			return nil, out, fmt.Errorf("%s: result: %w", t.Name, err)
		}
		text := out.Text()
		if l, ok := any(out).(interface{ lean() Out }); ok {
			out = l.lean() // the text says it all: not twice
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
	})
}

// notifyProgress returns a context under which a tool's progress goes to
// the client as notifications/progress for the request's token. The
// notifications go from a goroutine of their own, the newest replacing
// one not yet sent, so that a client slow to read never holds up the
// tool; stop ends it before the result goes.
func notifyProgress(ctx context.Context, ss *mcp.ServerSession, tok any) (context.Context, func()) {
	next := make(chan Progress, 1)
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case p := <-next:
				// The request's context: over streamable HTTP the
				// notification goes on the request's stream.
				ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok,
					Progress: float64(p.ElapsedMs) / 1000, Message: p.Message()})
			}
		}
	}()
	fn := func(p Progress) {
		for {
			select {
			case next <- p:
				return
			default:
			}
			select {
			case <-next: // stale: the newest goes instead
			default:
			}
		}
	}
	return WithProgress(ctx, fn), func() {
		close(quit)
		<-done
	}
}

func inputSchema[In any](bounds map[string][2]float64) *jsonschema.Schema {
	s, err := jsonschema.For[In](nil)
	if err != nil {
		panic(err) // the argument types are ours: a test catches this
	}
	for name, b := range bounds {
		if p := s.Properties[name]; p != nil {
			mx := b[0]
			mn := 0.0
			p.Maximum, p.Minimum = &mx, &mn
			p.Default, _ = json.Marshal(b[1])
		}
	}
	return s
}

// NewServer returns an MCP server whose tools are those of c.
func NewServer(c Caller, version string, log *slog.Logger) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "computerfs", Title: "computerfs workspace", Version: version},
		&mcp.ServerOptions{Logger: log, Instructions: "Tools for one computerfs workspace, mounted at /workspace. " +
			"Paths are absolute under /workspace or relative to it; the same paths work in exec's commands."})
	o, _ := c.(Offerer)
	for _, d := range defs {
		if !optional[d.name] || (o != nil && o.Offers(d.name)) {
			d.add(s, c)
		}
	}
	return s
}

// maxMessage bounds one MCP message: room for a write of the largest
// content the default policy allows (16 MiB) and its JSON escapes.
const maxMessage = 64 << 20

// ServeStdio serves c's tools over MCP on standard input and output until
// the client goes away or ctx ends.
func ServeStdio(ctx context.Context, c Caller, version string, log *slog.Logger) error {
	return NewServer(c, version, log).Run(ctx, &mcp.StdioTransport{MaxLineLength: maxMessage})
}

// HTTPHandler serves c's tools over MCP's streamable HTTP transport to
// clients that send "Authorization: Bearer TOKEN"; others get 401.
func HTTPHandler(c Caller, version, token string, log *slog.Logger) http.Handler {
	s := NewServer(c, version, log)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Logger: log, MaxRequestBodyBytes: maxMessage})
	verify := func(_ context.Context, got string, _ *http.Request) (*auth.TokenInfo, error) {
		if token == "" || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: "token", Expiration: time.Now().Add(24 * time.Hour)}, nil
	}
	return auth.RequireBearerToken(verify, nil)(h)
}
