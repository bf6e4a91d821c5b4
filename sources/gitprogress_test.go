package sources

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/computerfs/computerfs/internal/gittest"
)

// progressRecords are the records of a Progress that logs JSON.
type progressRecord struct {
	Phase, Source string
	Objects       int64
	TotalObjects  int64 `json:"total_objects"`
	Bytes         int64
	Done          bool
}

func progressRecords(t *testing.T, buf *lockedBuffer) []progressRecord {
	t.Helper()
	var recs []progressRecord
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var r progressRecord
		if l == "" {
			continue
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		if r.Phase != "" {
			recs = append(recs, r)
		}
	}
	return recs
}

// TestGitProgressText: git's progress text, redrawn with \r, becomes the
// phases' counts; stages it does not know and the server's other text
// never reach the terminal; what is not progress is kept, bounded, for
// an error message.
func TestGitProgressText(t *testing.T) {
	var term lockedBuffer
	p := &Progress{Term: &term}
	p.Begin("/repo", "clone", 0, 0)
	g := &gitProgress{p: p, name: "/repo"}
	text := "Cloning into 'wt'...\n" +
		"remote: Enumerating objects: 10, done.\n" +
		"remote: Counting objects:  50% (5/10)\rremote: Counting objects: 100% (10/10), done.\n" +
		"remote: \033]0;pwned\007Evil stage:  50% (1/2)\r" +
		"Receiving objects:  40% (4/10), 1.50 MiB | 3.00 MiB/s\r"
	for _, c := range []string{text[:17], text[17:60], text[60:]} { // in any pieces
		g.Write([]byte(c))
	}
	if p.phase != "fetch" || p.objects.Load() != 4 || p.total.Load() != 10 || p.bytes.Load() != 3<<19 {
		t.Fatalf("phase %q objects %d/%d bytes %d", p.phase, p.objects.Load(), p.total.Load(), p.bytes.Load())
	}
	g.Write([]byte("Receiving objects: 100% (10/10), 2.00 MiB | 3.00 MiB/s, done.\nResolving deltas: 100% (3/3), done.\n"))
	if p.phase != "resolve" || p.objects.Load() != 3 || p.total.Load() != 3 {
		t.Fatalf("phase %q objects %d/%d", p.phase, p.objects.Load(), p.total.Load())
	}
	g.end()
	out := term.String()
	for _, want := range []string{"/repo: remote count 10/10 objects in ", "/repo: fetch 10/10 objects, 2.0 MiB, ", "/repo: resolve 3/3 objects in "} {
		if !strings.Contains(out, want) {
			t.Errorf("the terminal has no %q:\n%q", want, out)
		}
	}
	if strings.Contains(out, "clone") || strings.Contains(out, "pwned") || strings.Contains(out, "Evil") {
		t.Errorf("the terminal shows the placeholder or the server's text:\n%q", out)
	}
	if got := g.String(); got != "Cloning into 'wt'...\nremote: Enumerating objects: 10, done." {
		t.Errorf("kept text %q", got)
	}
	// An endless line or endless text is bounded.
	g.Write([]byte(strings.Repeat("x", 1<<20)))
	for range 100 {
		g.Write([]byte(strings.Repeat("fatal: y\n", 1000)))
	}
	if n := len(g.part) + len(g.other); n > 2*stderrKeep+maxProgressLine {
		t.Errorf("gitProgress holds %d bytes", n)
	}
	if !strings.HasSuffix(g.String(), "fatal: y") {
		t.Errorf("the last of the text is lost: %q", g.String()[max(0, len(g.String())-40):])
	}
}

// TestGitCloneProgress: a clone reports a fetch phase with the objects
// received of the pack's total, and its bytes, with the git command line
// and with go-git (which counts the pack it writes), over file:// and
// HTTP; the log records have the figures.
func TestGitCloneProgress(t *testing.T) {
	files := map[string]string{}
	for i := range 40 {
		files[fmt.Sprintf("d/f%d.txt", i)] = strings.Repeat(fmt.Sprintf("line %d of a file\n", i), 2000)
	}
	repo := gittest.NewRepo(t, files)
	bare := gittest.Bare(t, repo)
	for _, c := range []struct {
		name  string
		gogit bool
		url   string
	}{
		{"cli-file", false, "file://" + bare},
		{"gogit-file", true, "file://" + bare},
		{"cli-http", false, gittest.ServeHTTP(t, bare)},
		{"gogit-http", true, gittest.ServeHTTP(t, bare)},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.gogit {
				t.Setenv("COMPUTERFS_NO_GIT_CLI", "1")
			}
			var buf lockedBuffer
			p := &Progress{Log: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
			sp := parse(t, fmt.Sprintf("sources:\n  - path: /repo\n    git: {url: %q}\n", c.url))
			im := &Importer{Store: newStore(t), Spec: sp, Log: quiet(), Progress: p}
			if err := im.Run(t.Context()); err != nil {
				t.Fatal(err)
			}
			var fetch *progressRecord
			recs := progressRecords(t, &buf)
			for i, r := range recs {
				if r.Phase == "fetch" && r.Done {
					fetch = &recs[i]
				}
				if r.Phase == "clone" {
					t.Errorf("the placeholder phase was reported: %+v", r)
				}
			}
			objects := int64(len(files) + 3) // the blobs, two trees and a commit
			if fetch == nil || fetch.Objects != objects || fetch.TotalObjects != objects || fetch.Bytes < 1000 || fetch.Source != "/repo" {
				t.Fatalf("fetch record %+v (want %d objects), records %+v", fetch, objects, recs)
			}
		})
	}
}
