package tools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/sandbox/shell"
	"github.com/computerfs/computerfs/spec"
	"github.com/computerfs/computerfs/wsfs"
)

var ctx = context.Background()

// shellRunner runs commands on the shell fast path, as the daemon does.
func shellRunner(f *wsfs.FS) Runner {
	var n int
	var mu sync.Mutex
	return func(ctx context.Context, r RunRequest, stdout, stderr io.Writer) (RunResult, error) {
		mu.Lock()
		n++
		id := strconv.Itoa(n)
		mu.Unlock()
		a := kv.Actor{Entry: "shell", Request: id}
		g := f.As(a)
		g.SetRootPrefix(Root)
		res, err := shell.New(g, shell.Options{}).Exec(ctx, r.Command, shell.ExecOptions{Cwd: r.Cwd, Env: r.Env,
			Stdin: strings.NewReader(string(r.Stdin)), Stdout: stdout, Stderr: stderr, Timeout: r.Timeout})
		return RunResult{ExitCode: res.ExitCode, Backend: "shell", Stopped: res.Stopped, Actor: a}, err
	}
}

func newTools(t testing.TB, pol *spec.Policy) (*Tools, *wsfs.FS) {
	t.Helper()
	s, err := kv.Open(t.TempDir()+"/store", kv.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	f := wsfs.New(s, wsfs.Owner{UID: 1000, GID: 1000})
	tl, err := New(f, Options{Policy: pol, Run: shellRunner(f)})
	if err != nil {
		t.Fatal(err)
	}
	return tl, f
}

func must[R any](t testing.TB) func(R, error) R {
	return func(r R, err error) R {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
}

func wantErr(t testing.TB, err error, sub string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", sub)
	}
	if !strings.Contains(err.Error(), sub) {
		t.Fatalf("error %q does not contain %q", err, sub)
	}
}

func wantRefused(t testing.TB, err error, rule string) {
	t.Helper()
	var rf *Refusal
	if !errors.As(err, &rf) {
		t.Fatalf("error %v (%T) is not a refusal", err, err)
	}
	if !strings.Contains(rf.Rule, rule) {
		t.Fatalf("refused by %q, want %q", rf.Rule, rule)
	}
}

func TestWriteReadRoundTrip(t *testing.T) {
	tl, f := newTools(t, nil)
	w := must[WriteResult](t)(tl.Write(ctx, WriteArgs{Path: "notes/deep/a.txt", Content: "one\ntwo\nthree\n"}))
	if !w.Created || w.Path != "/workspace/notes/deep/a.txt" || w.Bytes != 14 {
		t.Fatalf("write: %+v", w)
	}
	r := must[ReadResult](t)(tl.Read(ctx, ReadArgs{Path: "/workspace/notes/deep/a.txt"}))
	if r.Content != "     1\tone\n     2\ttwo\n     3\tthree" || r.NextOffset != 0 || r.Lines != 3 {
		t.Fatalf("read: %+v", r)
	}
	// Mode and owner of an existing file are kept.
	if err := f.Chmod("notes/deep/a.txt", 0o750); err != nil {
		t.Fatal(err)
	}
	if err := f.Lchown("notes/deep/a.txt", 42, 43); err != nil {
		t.Fatal(err)
	}
	w = must[WriteResult](t)(tl.Write(ctx, WriteArgs{Path: "notes/deep/a.txt", Content: "new"}))
	a, _ := f.Stat("notes/deep/a.txt")
	if w.Created || a.Mode&0o7777 != 0o750 || a.Uid != 42 || a.Gid != 43 || a.Size != 3 {
		t.Fatalf("rewrite: %+v, attr %o %d:%d size %d", w, a.Mode, a.Uid, a.Gid, a.Size)
	}
	// No temporary files are left.
	ls := must[LsResult](t)(tl.Ls(ctx, LsArgs{Path: "notes/deep"}))
	if len(ls.Entries) != 1 || ls.Entries[0].Name != "a.txt" || ls.Entries[0].Type != "file" || ls.Entries[0].Size != 3 {
		t.Fatalf("ls: %+v", ls)
	}
	_, err := tl.Write(ctx, WriteArgs{Path: "notes", Content: "x"})
	wantErr(t, err, "is a directory")
}

func TestReadPagesAndLimits(t *testing.T) {
	tl, _ := newTools(t, &spec.Policy{Limits: &spec.Limits{MaxRead: 100}})
	var b strings.Builder
	for i := 1; i <= 50; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	must[WriteResult](t)(tl.Write(ctx, WriteArgs{Path: "f", Content: b.String()}))
	r := must[ReadResult](t)(tl.Read(ctx, ReadArgs{Path: "f", Offset: 10, Limit: 3}))
	if r.FirstLine != 10 || r.Lines != 3 || r.NextOffset != 13 || !strings.HasPrefix(r.Content, "    10\tline 10\n") {
		t.Fatalf("page: %+v", r)
	}
	if !strings.Contains(r.Text(), "[truncated: lines 10-12 shown; continue with offset=13]") {
		t.Fatalf("marker: %s", r.Text())
	}
	// The byte budget (policy max_read 100) cuts too, and says where to go on.
	r = must[ReadResult](t)(tl.Read(ctx, ReadArgs{Path: "f"}))
	if r.Lines != 7 || r.NextOffset != 8 {
		t.Fatalf("budget: %d lines, next %d", r.Lines, r.NextOffset)
	}
	r = must[ReadResult](t)(tl.Read(ctx, ReadArgs{Path: "f", Offset: 48}))
	if r.Lines != 3 || r.NextOffset != 0 {
		t.Fatalf("end: %+v", r)
	}
	_, err := tl.Read(ctx, ReadArgs{Path: "f", Offset: 99})
	wantErr(t, err, "past the end")
	_, err = tl.Read(ctx, ReadArgs{Path: "f", Limit: ReadMaxLines + 1})
	wantErr(t, err, "over the maximum")
	_, err = tl.Read(ctx, ReadArgs{Path: "missing"})
	wantErr(t, err, "/workspace/missing")
	_, err = tl.Read(ctx, ReadArgs{Path: "/workspace"})
	wantErr(t, err, "is a directory")
}

func TestReadBinaryAndCRLF(t *testing.T) {
	tl, f := newTools(t, nil)
	if err := f.WriteFile("img.png", []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := must[ReadResult](t)(tl.Read(ctx, ReadArgs{Path: "img.png"}))
	if !r.Binary || r.MediaType != "image/png" || r.Content != "" || !strings.Contains(r.Text(), "binary file") {
		t.Fatalf("binary: %+v", r)
	}
	f.WriteFile("latin1", []byte("caf\xe9\n"), 0o644)
	if r := must[ReadResult](t)(tl.Read(ctx, ReadArgs{Path: "latin1"})); !r.Binary {
		t.Fatalf("invalid UTF-8 is not reported as binary: %+v", r)
	}
	f.WriteFile("dos.txt", []byte("a\r\nb\r\n"), 0o644)
	if r := must[ReadResult](t)(tl.Read(ctx, ReadArgs{Path: "dos.txt"})); r.Content != "     1\ta\n     2\tb" {
		t.Fatalf("crlf: %q", r.Content)
	}
	f.WriteFile("empty", nil, 0o644)
	if r := must[ReadResult](t)(tl.Read(ctx, ReadArgs{Path: "empty"})); r.Lines != 0 || !strings.Contains(r.Text(), "empty") {
		t.Fatalf("empty: %+v", r)
	}
}

func TestEditSemantics(t *testing.T) {
	for _, tc := range []struct {
		name    string
		file    string
		edits   []Edit
		want    string // new content, or
		err     string // an error
		diffHas string
	}{
		{name: "one", file: "a\nb\nc\n", edits: []Edit{{"b", "B"}}, want: "a\nB\nc\n", diffHas: "@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"},
		{name: "no match", file: "a\n", edits: []Edit{{"x", "y"}}, err: "not found"},
		{name: "two matches", file: "x\nx\n", edits: []Edit{{"x", "y"}}, err: "more than once in /workspace/f.txt (lines 1 and 2"},
		{name: "overlapping occurrences", file: "aaa", edits: []Edit{{"aa", "b"}}, err: "more than once"},
		{name: "overlap", file: "abcdef", edits: []Edit{{"abc", "1"}, {"cde", "2"}}, err: "overlap"},
		{name: "batch", file: "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n", edits: []Edit{{"12", "twelve"}, {"1\n2\n", "1\ntwo\n"}}, want: "1\ntwo\n3\n4\n5\n6\n7\n8\n9\n10\n11\ntwelve\n", diffHas: "@@ -1,5 +1,5 @@"},
		{name: "crlf kept", file: "a\r\nb\r\nc\r\n", edits: []Edit{{"a\nb", "x\ny\nz"}}, want: "x\r\ny\r\nz\r\nc\r\n"},
		{name: "bom kept", file: "\ufefffoo\nbar\n", edits: []Edit{{"foo", "baz"}}, want: "\ufeffbaz\nbar\n"},
		{name: "unicode", file: "héllo wörld ✓\n", edits: []Edit{{"wörld ✓", "мир"}}, want: "héllo мир\n"},
		{name: "delete lines", file: "a\nb\nc\n", edits: []Edit{{"b\n", ""}}, want: "a\nc\n", diffHas: "@@ -1,3 +1,2 @@\n a\n-b\n c\n"},
		{name: "empty old", file: "a", edits: []Edit{{"", "x"}}, err: "oldText is empty"},
		{name: "no change", file: "a", edits: []Edit{{"a", "a"}}, err: "change nothing"},
		{name: "binary", file: "a\x00b", edits: []Edit{{"a", "b"}}, err: "binary"},
		{name: "none", file: "a", err: "no edits"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl, f := newTools(t, nil)
			if err := f.WriteFile("f.txt", []byte(tc.file), 0o644); err != nil {
				t.Fatal(err)
			}
			res, err := tl.Edit(ctx, EditArgs{Path: "f.txt", Edits: tc.edits})
			got, _ := f.ReadFile("f.txt")
			if tc.err != "" {
				wantErr(t, err, tc.err)
				if string(got) != tc.file {
					t.Fatalf("a failed edit changed the file: %q", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("content %q, want %q", got, tc.want)
			}
			if !strings.HasPrefix(res.Diff, "--- a/f.txt\n+++ b/f.txt\n") || !strings.Contains(res.Diff, tc.diffHas) {
				t.Fatalf("diff:\n%s\nwant it to contain\n%s", res.Diff, tc.diffHas)
			}
		})
	}
}

func TestLsFindGrepPaginate(t *testing.T) {
	tl, f := newTools(t, nil)
	for i := range 25 {
		f.MkdirAll(fmt.Sprintf("src/p%02d", i), 0o755)
		f.WriteFile(fmt.Sprintf("src/p%02d/a.go", i), []byte("package p\n// TODO fix\nfunc A() {}\n"), 0o644)
	}
	f.MkdirAll(".git/objects", 0o755)
	f.WriteFile(".git/objects/x.go", []byte("TODO"), 0o644)
	f.WriteFile("bin", []byte("TODO\x00"), 0o644)
	f.Symlink("src", "link")
	ls := must[LsResult](t)(tl.Ls(ctx, LsArgs{Path: "src", Limit: 10}))
	if len(ls.Entries) != 10 || ls.NextOffset != 10 || ls.Entries[0].Name != "p00" || ls.Entries[0].Type != "dir" {
		t.Fatalf("ls page 1: %+v", ls)
	}
	ls = must[LsResult](t)(tl.Ls(ctx, LsArgs{Path: "src", Offset: 20, Limit: 10}))
	if len(ls.Entries) != 5 || ls.NextOffset != 0 || ls.Entries[0].Name != "p20" {
		t.Fatalf("ls last page: %+v", ls)
	}
	root := must[LsResult](t)(tl.Ls(ctx, LsArgs{}))
	if !strings.Contains(root.Text(), "link -> src") {
		t.Fatalf("ls root: %s", root.Text())
	}
	fd := must[FindResult](t)(tl.Find(ctx, FindArgs{Pattern: "*.go", Limit: 20}))
	if len(fd.Paths) != 20 || fd.NextOffset != 20 || fd.Paths[0] != "/workspace/src/p00/a.go" {
		t.Fatalf("find: %+v", fd)
	}
	fd = must[FindResult](t)(tl.Find(ctx, FindArgs{Pattern: "*.go", Offset: 20, Limit: 20}))
	if len(fd.Paths) != 5 {
		t.Fatalf("find page 2 (.git must be skipped): %+v", fd)
	}
	fd = must[FindResult](t)(tl.Find(ctx, FindArgs{Path: "src", Pattern: "p1*/**/*.go"}))
	if len(fd.Paths) != 10 || fd.Paths[0] != "/workspace/src/p10/a.go" {
		t.Fatalf("find with a path pattern: %+v", fd)
	}
	g := must[GrepResult](t)(tl.Grep(ctx, GrepArgs{Query: "todo", IgnoreCase: true, Limit: 5, Context: 1}))
	if len(g.Matches) != 5 || g.NextOffset != 5 || g.SkippedBinary != 1 {
		t.Fatalf("grep: %+v", g)
	}
	m := g.Matches[0]
	if m.File != "/workspace/src/p00/a.go" || m.Line != 2 || m.Text != "// TODO fix" || len(m.Before) != 1 || m.After[0] != "func A() {}" {
		t.Fatalf("grep match: %+v", m)
	}
	if !strings.Contains(g.Text(), "/workspace/src/p00/a.go:2:// TODO fix\n/workspace/src/p00/a.go-3-func A() {}") {
		t.Fatalf("grep text:\n%s", g.Text())
	}
	g = must[GrepResult](t)(tl.Grep(ctx, GrepArgs{Query: `^func \w+\(`, Regex: true, Include: "*.go", Path: "src/p03"}))
	if len(g.Matches) != 1 || g.Matches[0].Line != 3 {
		t.Fatalf("grep regex: %+v", g)
	}
	if g := must[GrepResult](t)(tl.Grep(ctx, GrepArgs{Query: "TODO", Include: "*.txt"})); len(g.Matches) != 0 {
		t.Fatalf("include: %+v", g)
	}
	_, err := tl.Grep(ctx, GrepArgs{Query: "(", Regex: true})
	wantErr(t, err, "not a regular expression")
	_, err = tl.Ls(ctx, LsArgs{Limit: LsMax + 1})
	wantErr(t, err, "over the maximum")
}

func TestDeleteAndMkdir(t *testing.T) {
	tl, f := newTools(t, nil)
	must[MkdirResult](t)(tl.Mkdir(ctx, MkdirArgs{Path: "a/b/c"}))
	if r := must[MkdirResult](t)(tl.Mkdir(ctx, MkdirArgs{Path: "a/b"})); !r.Existed {
		t.Fatalf("mkdir existing: %+v", r)
	}
	f.WriteFile("a/b/c/f", []byte("x"), 0o644)
	_, err := tl.Delete(ctx, DeleteArgs{Path: "a"})
	wantErr(t, err, "not empty: set recursive")
	d := must[DeleteResult](t)(tl.Delete(ctx, DeleteArgs{Path: "a", Recursive: true}))
	if d.Removed != 4 {
		t.Fatalf("delete: %+v", d)
	}
	if _, err := f.Stat("a"); err == nil {
		t.Fatal("a still exists")
	}
	f.WriteFile("target", []byte("x"), 0o644)
	f.Symlink("target", "l")
	must[DeleteResult](t)(tl.Delete(ctx, DeleteArgs{Path: "l"}))
	if _, err := f.Stat("target"); err != nil {
		t.Fatal("deleting a link removed its target")
	}
	_, err = tl.Delete(ctx, DeleteArgs{Path: "/workspace", Recursive: true})
	wantRefused(t, err, "confinement")
	_, err = tl.Delete(ctx, DeleteArgs{Path: "nothing"})
	wantErr(t, err, "no such file")
}

func TestExec(t *testing.T) {
	tl, f := newTools(t, &spec.Policy{Limits: &spec.Limits{MaxOutput: 16}})
	f.MkdirAll("d", 0o755)
	r := must[ExecResult](t)(tl.Exec(ctx, ExecArgs{Command: "pwd; echo $K; cat", Cwd: "d", Env: map[string]string{"K": "v"}, Stdin: "in"}))
	if r.Stdout != "/workspace/d\nv\ni" || !r.Truncated || r.Backend != "shell" || r.ExitCode != 0 {
		t.Fatalf("exec: %+v", r)
	}
	if !strings.Contains(r.Text(), "[output truncated") {
		t.Fatalf("text: %s", r.Text())
	}
	r = must[ExecResult](t)(tl.Exec(ctx, ExecArgs{Command: "exit 3"}))
	if r.ExitCode != 3 {
		t.Fatalf("exit: %+v", r)
	}
	r = must[ExecResult](t)(tl.Exec(ctx, ExecArgs{Command: "sleep 5", TimeoutMs: 50}))
	if r.ExitCode != 124 || r.Stopped != "timeout" {
		t.Fatalf("timeout: %+v", r)
	}
	_, err := tl.Exec(ctx, ExecArgs{Command: "true", Backend: "docker"})
	wantErr(t, err, "want shell, sandbox or auto")
	_, err = tl.Exec(ctx, ExecArgs{Command: "true", Cwd: "/etc"})
	wantRefused(t, err, "confinement")
}

func TestPolicyRefusals(t *testing.T) {
	pol := &spec.Policy{
		Deny:          []string{"/secrets", "*.pem"},
		ReadOnlyPaths: []string{"/workspace/vendor/**"},
		Exec:          &spec.ExecPolicy{Backends: []string{"shell"}, DenyCommands: []string{`\bcurl\b`}, MaxTimeout: "1s"},
		Limits:        &spec.Limits{MaxWrite: 64},
	}
	tl, f := newTools(t, pol)
	f.MkdirAll("secrets", 0o755)
	f.WriteFile("secrets/key", []byte("k"), 0o644)
	f.MkdirAll("vendor/lib", 0o755)
	f.WriteFile("vendor/lib/x.go", []byte("package x\n"), 0o644)
	f.WriteFile("cert.pem", []byte("c"), 0o644)
	f.Symlink("/workspace/secrets/key", "innocent")
	f.Symlink("vendor/lib", "lib")
	f.WriteFile("ok.txt", []byte("TODO key\n"), 0o644)

	for _, tc := range []struct {
		name string
		call func() error
		rule string
	}{
		{"read denied", func() error { _, err := tl.Read(ctx, ReadArgs{Path: "secrets/key"}); return err }, "deny[0]"},
		{"read denied glob", func() error { _, err := tl.Read(ctx, ReadArgs{Path: "cert.pem"}); return err }, "deny[1]"},
		{"read denied via link", func() error { _, err := tl.Read(ctx, ReadArgs{Path: "innocent"}); return err }, "deny[0]"},
		{"ls denied", func() error { _, err := tl.Ls(ctx, LsArgs{Path: "/workspace/secrets"}); return err }, "deny[0]"},
		{"write denied", func() error { _, err := tl.Write(ctx, WriteArgs{Path: "secrets/new", Content: "x"}); return err }, "deny[0]"},
		{"write read-only", func() error { _, err := tl.Write(ctx, WriteArgs{Path: "vendor/lib/x.go", Content: "x"}); return err }, "read_only_paths[0]"},
		{"write read-only via link", func() error { _, err := tl.Write(ctx, WriteArgs{Path: "lib/y.go", Content: "x"}); return err }, "read_only_paths[0]"},
		{"edit read-only", func() error {
			_, err := tl.Edit(ctx, EditArgs{Path: "vendor/lib/x.go", Edits: []Edit{{"x", "y"}}})
			return err
		}, "read_only_paths[0]"},
		{"delete read-only", func() error { _, err := tl.Delete(ctx, DeleteArgs{Path: "vendor", Recursive: true}); return err }, "read_only_paths[0]"},
		{"mkdir read-only", func() error { _, err := tl.Mkdir(ctx, MkdirArgs{Path: "vendor/new"}); return err }, "read_only_paths[0]"},
		{"write too big", func() error {
			_, err := tl.Write(ctx, WriteArgs{Path: "big", Content: strings.Repeat("x", 65)})
			return err
		}, "limits.max_write"},
		{"backend", func() error { _, err := tl.Exec(ctx, ExecArgs{Command: "ls", Backend: "sandbox"}); return err }, "exec.backends"},
		{"command", func() error { _, err := tl.Exec(ctx, ExecArgs{Command: "curl http://x"}); return err }, "exec.deny_commands[0]"},
		{"timeout", func() error { _, err := tl.Exec(ctx, ExecArgs{Command: "true", TimeoutMs: 2000}); return err }, "exec.max_timeout"},
		{"exec cwd denied", func() error { _, err := tl.Exec(ctx, ExecArgs{Command: "ls", Cwd: "secrets"}); return err }, "deny[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantRefused(t, tc.call(), tc.rule) })
	}
	// Listings hide denied paths.
	ls := must[LsResult](t)(tl.Ls(ctx, LsArgs{}))
	for _, e := range ls.Entries {
		if e.Name == "secrets" || e.Name == "cert.pem" {
			t.Fatalf("ls shows %s", e.Name)
		}
	}
	if g := must[GrepResult](t)(tl.Grep(ctx, GrepArgs{Query: "key"})); len(g.Matches) != 1 || g.Matches[0].File != "/workspace/ok.txt" {
		t.Fatalf("grep looked into denied files: %+v", g)
	}
	if fd := must[FindResult](t)(tl.Find(ctx, FindArgs{Pattern: "*key*"})); len(fd.Paths) != 0 {
		t.Fatalf("find: %+v", fd)
	}
	// Nothing was written.
	if _, err := f.Stat("secrets/new"); err == nil {
		t.Fatal("a refused write happened")
	}

	ro, _ := newTools(t, &spec.Policy{ReadOnly: true})
	_, err := ro.Write(ctx, WriteArgs{Path: "a", Content: "x"})
	wantRefused(t, err, "read_only")
	_, err = ro.Exec(ctx, ExecArgs{Command: "true"})
	wantRefused(t, err, "read_only")
	must[LsResult](t)(ro.Ls(ctx, LsArgs{}))

	off, _ := newTools(t, &spec.Policy{Exec: &spec.ExecPolicy{Disabled: true}})
	_, err = off.Exec(ctx, ExecArgs{Command: "true"})
	wantRefused(t, err, "exec.disabled")
}

func TestPathConfinement(t *testing.T) {
	tl, f := newTools(t, nil)
	f.MkdirAll("a/b", 0o755)
	f.WriteFile("a/b/f", []byte("inside\n"), 0o644)
	f.Symlink("/etc", "etc")
	f.Symlink("/etc/passwd", "passwd")
	f.Symlink("../../..", "a/up")
	f.Symlink("/workspace/a/b", "abs")
	f.Symlink("b", "a/rel")
	f.Symlink("loop", "loop")
	for _, p := range []string{"..", "../etc/passwd", "/etc/passwd", "/", "/workspacefoo/x", "a/../../x",
		"etc/passwd", "passwd", "a/up/etc", "./a/b/../../../x", "/workspace/..", "/workspace/a/../../etc"} {
		_, err := tl.Read(ctx, ReadArgs{Path: p})
		wantRefused(t, err, "confinement")
		_, err = tl.Write(ctx, WriteArgs{Path: p, Content: "x"})
		wantRefused(t, err, "confinement")
	}
	for _, p := range []string{"a/b/f", "/workspace/a/b/f", "abs/f", "a/rel/f", "a/b/../b/f", "./a//b/./f", "a/rel/../b/f"} {
		r, err := tl.Read(ctx, ReadArgs{Path: p})
		if err != nil || r.Path != "/workspace/a/b/f" {
			t.Fatalf("%s: %+v, %v", p, r, err)
		}
	}
	for _, p := range []string{"a\xffb", "a\x00b"} {
		_, err := tl.Read(ctx, ReadArgs{Path: p})
		wantErr(t, err, "path")
	}
	_, err := tl.Read(ctx, ReadArgs{Path: "loop"})
	wantErr(t, err, "too many levels")
	// A write through a link to a directory lands inside.
	must[WriteResult](t)(tl.Write(ctx, WriteArgs{Path: "abs/new", Content: "x"}))
	if _, err := f.Stat("a/b/new"); err != nil {
		t.Fatal(err)
	}
}

// FuzzConfinement throws path spellings at every tool that takes a path
// and checks that nothing outside the workspace is ever named, and that
// nothing but the one scratch file changes.
func FuzzConfinement(fz *testing.F) {
	for _, s := range []string{"..", "a/../..", "/etc/passwd", "/workspace/../etc", "link/..", "link/../../x", "out/x", "a/./b//c", "/workspace", "\xff", "l2/x", ""} {
		fz.Add(s)
	}
	tl, f := newTools(fz, nil)
	f.MkdirAll("a/b", 0o755)
	f.Symlink("a/b", "link")
	f.Symlink("/tmp", "out")
	f.Symlink("../x/../..", "l2")
	fz.Fuzz(func(t *testing.T, p string) {
		for _, r := range []struct {
			path string
			err  error
		}{
			func() struct {
				path string
				err  error
			} {
				r, err := tl.Read(ctx, ReadArgs{Path: p})
				return struct {
					path string
					err  error
				}{r.Path, err}
			}(),
			func() struct {
				path string
				err  error
			} {
				r, err := tl.Write(ctx, WriteArgs{Path: p, Content: "x"})
				if err == nil {
					f.RemoveAll(strings.TrimPrefix(r.Path, Root))
					f.MkdirAll("a/b", 0o755)
				}
				return struct {
					path string
					err  error
				}{r.Path, err}
			}(),
		} {
			if r.err == nil && r.path != Root && !strings.HasPrefix(r.path, Root+"/") {
				t.Fatalf("%q reached %q", p, r.path)
			}
			if r.err != nil && strings.Contains(r.err.Error(), "panic") {
				t.Fatalf("%q: %v", p, r.err)
			}
		}
	})
}

func TestAuditRecords(t *testing.T) {
	tl, f := newTools(t, &spec.Policy{Deny: []string{"/secret"}})
	must[WriteResult](t)(tl.Write(ctx, WriteArgs{Path: "big.txt", Content: strings.Repeat("y", 1000)}))
	must[ExecResult](t)(tl.Exec(ctx, ExecArgs{Command: "echo hi > e.txt; rm big.txt"}))
	_, err := tl.Read(ctx, ReadArgs{Path: "secret"})
	wantRefused(t, err, "deny")
	_, err = tl.Read(ctx, ReadArgs{Path: "nope"})
	if err == nil {
		t.Fatal("no error")
	}
	var recs []kv.AuditRecord
	if err := f.Store().ReadAudit(0, func(r kv.AuditRecord) bool { recs = append(recs, r); return true }); err != nil {
		t.Fatal(err)
	}
	if len(recs) != 4 {
		t.Fatalf("%d records", len(recs))
	}
	w, x, d, n := recs[0], recs[1], recs[2], recs[3]
	if w.Tool != "write" || !w.Done || w.Result != "created, 1000 bytes" || w.Start == 0 || w.DurationNs <= 0 ||
		!strings.Contains(w.Args, `"content":{"sha256":"`) || !strings.Contains(w.Args, `"size":1000`) ||
		w.Actor.Entry != "tools" || w.Actor.Request != "1" || w.Journal != 1 || w.JournalFirst == 0 {
		t.Fatalf("write record: %+v", w)
	}
	if x.Tool != "exec" || x.Backend != "shell" || x.Actor.Entry != "shell" || x.Journal != 3 || x.JournalFirst <= w.JournalLast {
		t.Fatalf("exec record: %+v", x)
	}
	// The journal records the audit names are the call's.
	var got []string
	f.Store().ReadJournal(x.JournalFirst-1, func(r kv.Record) bool {
		if r.Seq > x.JournalLast {
			return false
		}
		got = append(got, r.Op.String()+" "+r.Path+" "+r.Actor.String())
		return true
	})
	if len(got) != 3 || !strings.HasPrefix(got[0], "create /e.txt shell #") || !strings.HasPrefix(got[2], "unlink /big.txt") {
		t.Fatalf("journal of the exec: %q", got)
	}
	if d.Refused != `policy deny[0] "/secret"` || d.Error == "" || d.Result != "" {
		t.Fatalf("refused record: %+v", d)
	}
	if n.Error == "" || n.Refused != "" || n.Journal != 0 {
		t.Fatalf("error record: %+v", n)
	}
}

func TestConcurrentCalls(t *testing.T) {
	tl, f := newTools(t, nil)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 10 {
				p := fmt.Sprintf("c/%d/%d.txt", i, j)
				if _, err := tl.Write(ctx, WriteArgs{Path: p, Content: "a\nb\n"}); err != nil {
					t.Error(err)
					return
				}
				if _, err := tl.Edit(ctx, EditArgs{Path: p, Edits: []Edit{{"b", "c"}}}); err != nil {
					t.Error(err)
					return
				}
				if _, err := tl.Grep(ctx, GrepArgs{Path: "c", Query: "c"}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	n := 0
	f.Store().ReadAudit(0, func(r kv.AuditRecord) bool {
		if !r.Done || r.Error != "" {
			t.Errorf("record %+v", r)
		}
		n++
		return true
	})
	if n != 240 {
		t.Fatalf("%d audit records, want 240", n)
	}
}

// TestEditIsOneJournalRecord: an edit, or a write over a file, is one
// write record of the file in the journal (it was five of a temporary
// file: create, write, setattr, setattr, rename); a write that makes a
// file is one create. A file the agent may not write but whose directory
// it may is still replaced, as an editor saves it.
func TestEditIsOneJournalRecord(t *testing.T) {
	tl, f := newTools(t, nil)
	journal := func(do func()) []string {
		t.Helper()
		_, last, err := f.Store().JournalSpan()
		if err != nil {
			t.Fatal(err)
		}
		do()
		var got []string
		f.Store().ReadJournal(last, func(r kv.Record) bool {
			got = append(got, r.Op.String()+" "+r.Path)
			return true
		})
		return got
	}
	if got := journal(func() { must[WriteResult](t)(tl.Write(ctx, WriteArgs{Path: "src/a.go", Content: "package a\n"})) }); !slices.Equal(got, []string{"mkdir /src", "create /src/a.go"}) {
		t.Errorf("write of a new file: journal %q", got)
	}
	ino, _, _ := f.Resolve("src/a.go")
	if got := journal(func() {
		must[EditResult](t)(tl.Edit(ctx, EditArgs{Path: "src/a.go", Edits: []Edit{{"package a", "package b"}}}))
	}); !slices.Equal(got, []string{"write /src/a.go"}) {
		t.Errorf("edit: journal %q, want one write of the file", got)
	}
	if got := journal(func() { must[WriteResult](t)(tl.Write(ctx, WriteArgs{Path: "src/a.go", Content: "package c\n"})) }); !slices.Equal(got, []string{"write /src/a.go"}) {
		t.Errorf("write over a file: journal %q, want one write of the file", got)
	}
	if now, _, _ := f.Resolve("src/a.go"); now != ino {
		t.Errorf("the file's inode changed from %d to %d", ino, now)
	}
	if b, _ := f.ReadFile("src/a.go"); string(b) != "package c\n" {
		t.Fatalf("content %q", b)
	}
	// Another user's file that the agent may not write, in the agent's
	// directory: replaced through a temporary file, and the agent's.
	ag := f.ForAgent()
	ta, err := New(ag, Options{Run: shellRunner(ag)})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Lchown("src/a.go", 42, 43); err != nil {
		t.Fatal(err)
	}
	got := journal(func() {
		must[EditResult](t)(ta.Edit(ctx, EditArgs{Path: "src/a.go", Edits: []Edit{{"package c", "package d"}}}))
	})
	if len(got) == 0 || !strings.HasPrefix(got[len(got)-1], "rename /src/.a.go.tools-") {
		t.Errorf("edit of a file the agent may not write: journal %q", got)
	}
	if b, _ := f.ReadFile("src/a.go"); string(b) != "package d\n" {
		t.Fatalf("another user's file after the edit: %q", b)
	}
	if a, _ := f.Stat("src/a.go"); a.Uid != 1000 || a.Mode&0o7777 != 0o644 {
		t.Errorf("another user's file after the edit: uid %d mode %o", a.Uid, a.Mode)
	}
}
