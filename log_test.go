package computerfs

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/computerfs/computerfs/internal/testmount"
	"github.com/computerfs/computerfs/kv"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestParseSince: --since takes a sequence number, a duration back from
// now or an RFC 3339 time, and refuses anything else.
func TestParseSince(t *testing.T) {
	now := time.Date(2026, 11, 29, 13, 33, 30, 418e6, time.UTC)
	for _, c := range []struct {
		in    string
		after uint64
		since time.Time
	}{
		{"120", 119, time.Time{}},
		{"1", 0, time.Time{}},
		{"0", 0, time.Time{}},
		{"10m", 0, now.Add(-10 * time.Minute)},
		{"1h30m", 0, now.Add(-90 * time.Minute)},
		{"250ms", 0, now.Add(-250 * time.Millisecond)},
		{"2026-11-29T13:00:00Z", 0, time.Date(2026, 11, 29, 13, 0, 0, 0, time.UTC)},
		{"2026-11-29T14:00:00.5+01:00", 0, time.Date(2026, 11, 29, 13, 0, 0, 5e8, time.UTC)},
	} {
		q, err := ParseSince(c.in, now)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if q.After != c.after || !q.Since.Equal(c.since) {
			t.Errorf("%q: after %d since %v, want after %d since %v", c.in, q.After, q.Since, c.after, c.since)
		}
	}
	for _, bad := range []string{"", "-10m", "0s", "yesterday", "2026-11-29", "2026-11-29 13:00:00", "10 m"} {
		if q, err := ParseSince(bad, now); err == nil || !strings.Contains(err.Error(), "want a sequence number, a duration (10m) or a time (RFC 3339)") {
			t.Errorf("%q: %+v, %v; want an error", bad, q, err)
		}
	}
}

// TestLogFollow: `computerfs log --follow` prints what the journal holds,
// then each new change as it comes (here filtered by --path, as JSON),
// until it is interrupted; it then exits 0.
func TestLogFollow(t *testing.T) {
	m := testmount.Start(t, filepath.Join(t.TempDir(), "ws"))
	bin := testmount.Binary(t)
	if err := os.Mkdir(filepath.Join(m.Dir, "f"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "log", "-w", m.Dir, "--follow", "--json", "--path", "/f")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	entries := make(chan LogEntry, 100)
	go func() {
		defer close(entries)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var e LogEntry
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Errorf("log --follow --json printed %q: %v", sc.Text(), err)
				return
			}
			entries <- e
		}
	}()
	next := func(what string) LogEntry {
		t.Helper()
		select {
		case e, ok := <-entries:
			if !ok {
				t.Fatalf("log --follow ended before %s:\n%s", what, stderr.String())
			}
			return e
		case <-time.After(20 * time.Second):
			t.Fatalf("log --follow did not print %s in 20 s", what)
		}
		panic("unreachable")
	}
	if e := next("the existing record"); e.Op != "mkdir" || e.Path != "/f" {
		t.Fatalf("first record %+v, want the mkdir of /f", e)
	}
	// Changes made while it follows: one outside --path, two inside.
	if err := os.WriteFile(filepath.Join(m.Dir, "elsewhere"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(m.Dir, "f/new"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if e := next("the create"); e.Op != "create" || e.Path != "/f/new" || e.Actor.Pid == 0 {
		t.Fatalf("record %+v, want the create of /f/new by this process", e)
	}
	if e := next("the write"); e.Op != "write" || e.Path != "/f/new" || e.Size != 5 {
		t.Fatalf("record %+v, want the write of /f/new, 5 bytes", e)
	}
	if err := os.Rename(filepath.Join(m.Dir, "elsewhere"), filepath.Join(m.Dir, "f/moved")); err != nil {
		t.Fatal(err)
	}
	if e := next("the rename"); e.Op != "rename" || e.Path != "/elsewhere" || e.Path2 != "/f/moved" {
		t.Fatalf("record %+v, want the rename into /f", e)
	}
	// Interrupted, it ends its output and exits 0; it printed nothing else
	// (no record outside --path, none twice).
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case e, ok := <-entries:
		if ok {
			t.Fatalf("log --follow printed %+v, a record outside --path or twice", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("log --follow did not stop on SIGINT")
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("log --follow after SIGINT: %v\n%s", err, stderr.String())
	}
}

// TestLogHostileNames: names are the agent's to choose. `computerfs log`
// prints each record on one line that holds no control character, however
// the names that it shows are made: a newline cannot forge a record, an
// escape cannot reach the terminal, and a quoted name reads back as the
// bytes it has.
func TestLogHostileNames(t *testing.T) {
	m := testmount.Start(t, filepath.Join(t.TempDir(), "ws"))
	bin := testmount.Binary(t)
	names := []string{
		"plain.txt",
		"x\n2026-01-01T00:00:00.000Z 1 remove secrets by tools",
		"title\x1b]0;owned\x07",
		"clear\x1b[2J\x1b[H",
		"rtl\u202etxt.exe",
		"bad\xff\xfeutf8",
		"cr\rhidden",
		"\"looks-quoted\"",
	}
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(m.Dir, n), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Rename(filepath.Join(m.Dir, names[1]), filepath.Join(m.Dir, "tab\there")); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "log", "-w", m.Dir).CombinedOutput()
	if err != nil {
		t.Fatalf("log: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	// One create (and one write) per name, one rename: every line must
	// start as a record does, with a time and a sequence number.
	if len(lines) < len(names)+1 {
		t.Fatalf("%d lines for %d names and a rename:\n%s", len(lines), len(names), out)
	}
	for _, l := range lines {
		if _, err := time.Parse("2006-01-02T15:04:05.000Z", strings.SplitN(l, " ", 2)[0]); err != nil {
			t.Errorf("a line that is not a record: %q", l)
		}
		for _, r := range l {
			if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '\u202e' {
				t.Errorf("line %q holds %U", l, r)
			}
		}
		if strings.Contains(l, "remove secrets by tools") && !strings.Contains(l, `\n2026`) {
			t.Errorf("the forged record is not shown as part of a name: %q", l)
		}
	}
	// A quoted name reads back as its bytes. (Bytes that are not UTF-8
	// reach the client as U+FFFD: the control socket speaks JSON.)
	for _, n := range names[2:7] {
		if !utf8.ValidString(n) {
			continue
		}
		q := strconv.Quote("/" + n)
		if !strings.Contains(string(out), q) {
			t.Errorf("%q is not shown as %s:\n%s", n, q, out)
		}
	}
	if !strings.Contains(string(out), " /plain.txt ") {
		t.Errorf("a plain name is quoted:\n%s", out)
	}
}

// TestAuditStringHostile: a tool call's arguments, result and error are
// the agent's text; `computerfs log --tools` shows each call on one line
// with no control or format character in it.
func TestAuditStringHostile(t *testing.T) {
	for _, r := range []kv.AuditRecord{
		{ID: 1, Tool: "read", Args: "{\"path\":\"a\u202eb\"}", Done: true, Error: "open a\n2026-01-01T00:00:00.000Z #2 write {} -> ok\x1b[2J"},
		{ID: 2, Tool: "exec", Args: `{"command":"x"}`, Done: true, Result: "exit 0\r\x1b]0;t\x07", Backend: "shell\n"},
		{ID: 3, Tool: "edit\x1b[31m", Args: "{}", Done: true, Refused: "policy deny", Error: "refused \u2066x"},
	} {
		s := AuditString(r)
		for _, c := range s {
			if c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0) || unicode.Is(unicode.Cf, c) {
				t.Errorf("record %d: %q holds %U", r.ID, s, c)
			}
		}
	}
}

// TestLogExcludeAndToolEdit: an agent's edit through MCP is one change of
// the edited file in `computerfs log`, and --exclude (repeatable) leaves
// out the paths its globs match or hold: a git repository's .git, lock
// files anywhere. A rename stays unless its new path is left out too.
func TestLogExcludeAndToolEdit(t *testing.T) {
	m := mountWithSpec(t, "sources:\n  - path: /repo/main.go\n    content: \"package main\\n\"\n")
	bin := testmount.Binary(t)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(),
		&mcp.CommandTransport{Command: exec.Command(bin, "mcp", "-w", m.Dir)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	before := logLines(t, bin, m.Dir)
	if out, isErr := toolText(t, cs, "edit", map[string]any{"path": "repo/main.go", "edits": []map[string]any{{"oldText": "package main", "newText": "package edited"}}}); isErr {
		t.Fatalf("edit: %s", out)
	}
	if got := logLines(t, bin, m.Dir)[len(before):]; len(got) != 1 || !strings.Contains(got[0], " write /repo/main.go ") || !strings.Contains(got[0], "tools #") {
		t.Fatalf("the journal of one edit:\n%s\nbefore it:\n%s", strings.Join(got, "\n"), strings.Join(before, "\n"))
	}
	for _, d := range []string{"repo/.git/refs", "repo/sub"} {
		if err := os.MkdirAll(filepath.Join(m.Dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"repo/.git/HEAD", "repo/.git/refs/x", "repo/sub/a.lock", "repo/sub/b.go"} {
		if err := os.WriteFile(filepath.Join(m.Dir, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Rename(filepath.Join(m.Dir, "repo/.git/refs/x"), filepath.Join(m.Dir, "repo/x")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(m.Dir, "repo/.git/HEAD"), filepath.Join(m.Dir, "repo/.git/HEAD2")); err != nil {
		t.Fatal(err)
	}
	all := strings.Join(logLines(t, bin, m.Dir), "\n")
	got := strings.Join(logLines(t, bin, m.Dir, "--exclude", "/repo/.git/**", "--exclude", "*.lock"), "\n")
	for _, want := range []string{"write /repo/main.go", "create /repo/sub/b.go", "rename /repo/.git/refs/x -> /repo/x"} {
		if !strings.Contains(got, want) {
			t.Errorf("log --exclude lost %q:\n%s", want, got)
		}
	}
	for _, gone := range []string{"mkdir /repo/.git", "/repo/.git/HEAD", "create /repo/.git/refs/x", "a.lock"} {
		if !strings.Contains(all, gone) {
			t.Errorf("log without --exclude has no %q:\n%s", gone, all)
		}
		if strings.Contains(got, gone) {
			t.Errorf("log --exclude kept %q:\n%s", gone, got)
		}
	}
	if out, err := exec.Command(bin, "log", "-w", m.Dir, "--exclude", "/a/../b").CombinedOutput(); err == nil || !strings.Contains(string(out), "--exclude") {
		t.Errorf("log --exclude with a bad pattern: %v\n%s", err, out)
	}
}

// logLines is `computerfs log -w mount args...`, a line per record.
func logLines(t *testing.T, bin, mount string, args ...string) []string {
	t.Helper()
	out, err := exec.Command(bin, append([]string{"log", "-w", mount}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("computerfs log: %v\n%s", err, out)
	}
	if len(out) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
}
