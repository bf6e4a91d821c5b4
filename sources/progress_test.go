package sources

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a terminal that Progress's goroutine draws on while the
// test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// lastLine is the line drawn last: what follows the last "clear line".
func (l *lockedBuffer) lastLine() string {
	s := l.String()
	if i := strings.LastIndex(s, "\r\033[K"); i >= 0 {
		return s[i+len("\r\033[K"):]
	}
	return ""
}

// backdate makes the phase look started d ago, so that its rate and ETA
// are known: the counts are set, the clock is not.
func (p *Progress) backdate(d time.Duration) {
	p.mu.Lock()
	p.start = time.Now().Add(-d)
	p.mu.Unlock()
}

// TestProgressTerminal: on a terminal the phase is one line redrawn in
// place with objects (of the total), bytes, rate and ETA; End draws the
// totals and the time taken, and ends the line.
func TestProgressTerminal(t *testing.T) {
	var term lockedBuffer
	p := &Progress{Term: &term}
	p.Begin("/data", "download", 10, 10<<20)
	p.Add(4, 4<<20)
	p.backdate(100 * time.Second) // 4 MiB in 100 s: 41 KiB/s, 6 MiB to go: 150 s
	// The line is redrawn every 200 ms; wait for a redraw with the ETA.
	line := regexp.MustCompile(`^/data: download 4/10 objects, 4\.0 MiB, (\d+\.\d) KiB/s, ETA (2m3[01]s)$`)
	deadline := time.Now().Add(10 * time.Second)
	for !line.MatchString(term.lastLine()) {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s the terminal shows %q", term.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if rate, _ := strconv.ParseFloat(line.FindStringSubmatch(term.lastLine())[1], 64); rate < 40 || rate > 41 {
		t.Fatalf("rate %v KiB/s, want 4 MiB / 100 s = 41 KiB/s", rate)
	}
	p.Add(6, 6<<20)
	p.End()
	final := regexp.MustCompile(`^/data: download 10/10 objects, 10\.0 MiB, \d+\.\d KiB/s in 1m40(\.\d+)?s\n$`)
	if got := term.lastLine(); !final.MatchString(got) {
		t.Fatalf("final line %q", got)
	}
	// Once ended, nothing more is drawn.
	n := len(term.String())
	time.Sleep(300 * time.Millisecond)
	if len(term.String()) != n {
		t.Fatalf("drawn after End: %q", term.String()[n:])
	}

	// Unknown totals: no "/total", no ETA; byte counts in human units.
	var term2 lockedBuffer
	p = &Progress{Term: &term2}
	p.Begin("/repo", "fetch", 0, 0)
	p.Add(3, 1536)
	p.End()
	if got := term2.lastLine(); !regexp.MustCompile(`^/repo: fetch 3 objects, 1\.5 KiB, [\d.]+ (KiB|MiB)/s in [\d.]+m?s\n$`).MatchString(got) {
		t.Fatalf("final line with unknown totals %q", got)
	}

	// A nil Progress reports nothing (and does not fail).
	var none *Progress
	none.Begin("/x", "list", 1, 1)
	none.Add(1, 1)
	none.SetTotal(2, 2)
	none.End()
}

// TestProgressLog: without a terminal, progress is logged as structured
// records with the same figures; the final record says done, and a short
// phase's is at debug level only.
func TestProgressLog(t *testing.T) {
	var buf lockedBuffer
	p := &Progress{Log: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	p.Begin("/data", "download", 0, 0)
	p.SetTotal(10, 10<<20) // known after the listing
	p.Add(4, 4<<20)
	p.backdate(100 * time.Second)
	p.report(false) // what the loop logs every 5 s
	p.Add(6, 6<<20)
	p.End()
	p.Begin("/n", "copy", 0, 0)
	p.Add(1, 10)
	p.End()

	// slog's JSON names; the rest match the fields' names.
	type record struct {
		Level, Msg, Source, Phase, ETA string
		Objects, Bytes                 int64
		TotalObjects                   int64 `json:"total_objects"`
		BytesPerSec                    int64 `json:"bytes_per_sec"`
		Done                           bool
	}
	var recs []record
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var r record
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		recs = append(recs, r)
	}
	if len(recs) != 3 {
		t.Fatalf("%d records, want 3:\n%s", len(recs), buf.String())
	}
	r := recs[0]
	if r.Level != "INFO" || r.Msg != "import progress" || r.Source != "/data" || r.Phase != "download" ||
		r.Objects != 4 || r.TotalObjects != 10 || r.Bytes != 4<<20 || r.Done ||
		r.BytesPerSec < 41000 || r.BytesPerSec > 41943 || (r.ETA != "2m30s" && r.ETA != "2m31s") {
		t.Fatalf("progress record %+v, want 4 of 10 objects, 4 MiB at about 41943 B/s, ETA 2m30s:\n%s", r, buf.String())
	}
	r = recs[1]
	if r.Level != "INFO" || r.Objects != 10 || r.Bytes != 10<<20 || !r.Done || r.ETA != "0s" {
		t.Fatalf("final record %+v, want 10 objects, 10 MiB, done:\n%s", r, buf.String())
	}
	if r = recs[2]; r.Level != "DEBUG" || r.Source != "/n" || !r.Done || r.Objects != 1 || r.TotalObjects != 0 {
		t.Fatalf("a short phase's record %+v, want done at debug level:\n%s", r, buf.String())
	}
}
