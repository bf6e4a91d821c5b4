package sources

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Progress reports a long import: on a terminal as one line redrawn in
// place (objects, bytes, rate, ETA), otherwise as a structured log record
// every few seconds. The zero value reports nothing; a nil *Progress too.
type Progress struct {
	Term io.Writer    // a terminal to draw on, or nil
	Log  *slog.Logger // where to log progress when Term is nil

	mu      sync.Mutex
	name    string
	phase   string
	start   time.Time
	objects atomic.Int64
	bytes   atomic.Int64
	total   atomic.Int64 // expected objects, 0 if unknown
	totalB  atomic.Int64 // expected bytes, 0 if unknown
	stop    chan struct{}
	done    chan struct{}
}

// Begin starts reporting one source's phase ("list", "fetch", "checkout").
func (p *Progress) Begin(name, phase string, totalObjects, totalBytes int64) {
	if p == nil {
		return
	}
	p.End()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.name, p.phase, p.start = name, phase, time.Now()
	p.objects.Store(0)
	p.bytes.Store(0)
	p.total.Store(totalObjects)
	p.totalB.Store(totalBytes)
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	go p.loop(p.stop, p.done)
}

// Rename makes the phase under way another (its counts start again),
// without reporting it as done: for a phase that stood for the work until
// its real steps were known ("clone" until git reports "fetch").
func (p *Progress) Rename(phase string, totalObjects int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	running := p.stop != nil
	if running {
		p.phase, p.start = phase, time.Now()
		p.objects.Store(0)
		p.bytes.Store(0)
		p.total.Store(totalObjects)
		p.totalB.Store(0)
	}
	name := p.name
	p.mu.Unlock()
	if !running {
		p.Begin(name, phase, totalObjects, 0)
	}
}

// SetTotal sets what the phase expects, once it is known.
func (p *Progress) SetTotal(objects, bytes int64) {
	if p != nil {
		p.total.Store(objects)
		p.totalB.Store(bytes)
	}
}

// Set says how much of the phase is done (of total objects, when that
// becomes known): for work counted elsewhere, as git's progress.
func (p *Progress) Set(objects, total, bytes int64) {
	if p != nil {
		p.objects.Store(objects)
		p.total.Store(total)
		p.bytes.Store(bytes)
	}
}

// SetObjects and SetBytes are Set of one count.
func (p *Progress) SetObjects(objects, total int64) {
	if p != nil {
		p.objects.Store(objects)
		p.total.Store(total)
	}
}

func (p *Progress) SetBytes(bytes int64) {
	if p != nil {
		p.bytes.Store(bytes)
	}
}

// Add counts work done.
func (p *Progress) Add(objects, bytes int64) {
	if p != nil {
		p.objects.Add(objects)
		p.bytes.Add(bytes)
	}
}

// End finishes the phase and reports its totals.
func (p *Progress) End() {
	if p == nil {
		return
	}
	p.mu.Lock()
	stop, done := p.stop, p.done
	p.stop, p.done = nil, nil
	p.mu.Unlock()
	if stop == nil {
		return
	}
	close(stop)
	<-done
	p.report(true)
}

func (p *Progress) loop(stop, done chan struct{}) {
	defer close(done)
	every := 5 * time.Second
	if p.Term != nil {
		every = 200 * time.Millisecond
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			p.report(false)
		}
	}
}

func (p *Progress) report(final bool) {
	p.mu.Lock()
	name, phase, start := p.name, p.phase, p.start
	p.mu.Unlock()
	objs, bytes, total, totalB := p.objects.Load(), p.bytes.Load(), p.total.Load(), p.totalB.Load()
	elapsed := time.Since(start)
	rate := float64(bytes) / max(elapsed.Seconds(), 1e-3)
	var eta time.Duration
	switch {
	case totalB > 0 && bytes > 0:
		eta = time.Duration(float64(elapsed) * float64(totalB-bytes) / float64(bytes))
	case total > 0 && objs > 0:
		eta = time.Duration(float64(elapsed) * float64(total-objs) / float64(objs))
	}
	if p.Term == nil {
		if p.Log != nil {
			level := slog.LevelInfo
			if final && elapsed < 2*time.Second {
				level = slog.LevelDebug // a short phase needs no record
			}
			p.Log.Log(context.Background(), level, "import progress", "source", name, "phase", phase, "objects", objs, "total_objects", total,
				"bytes", bytes, "bytes_per_sec", int64(rate), "eta", eta.Round(time.Second).String(), "done", final)
		}
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\r\033[K%s: %s %d", name, phase, objs)
	if total > 0 {
		fmt.Fprintf(&b, "/%d", total)
	}
	b.WriteString(" objects")
	if bytes > 0 { // the server's counting and compressing have none
		fmt.Fprintf(&b, ", %s, %s/s", humanBytes(bytes), humanBytes(int64(rate)))
	}
	if final {
		fmt.Fprintf(&b, " in %s\n", elapsed.Round(10*time.Millisecond))
	} else if eta > 0 {
		fmt.Fprintf(&b, ", ETA %s", eta.Round(time.Second))
	}
	io.WriteString(p.Term, b.String())
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
