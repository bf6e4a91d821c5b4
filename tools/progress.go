package tools

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Progress is what a running exec has done so far: a client that asked
// for progress (MCP's progressToken) gets one at least every
// ProgressHeartbeat while the command runs, and one soon after new output,
// at most one per ProgressMinGap.
type Progress struct {
	// ElapsedMs is how long the command has run; it grows from one
	// notification to the next.
	ElapsedMs int64 `json:"elapsedMs"`
	// OutputBytes is what the command has printed so far (stdout and
	// stderr, including what is past the output limit).
	OutputBytes int64 `json:"outputBytes"`
	// Tail is the end of what it printed since the last notification, at
	// most ProgressMaxTail bytes of valid UTF-8, with control characters
	// other than newline and tab shown as '.' (the agent's output must not
	// drive a client's terminal). In JSON it takes at most 6 times that
	// (every byte escaped as \u00XX).
	Tail string `json:"tail,omitempty"`
}

// Message is the progress as a person or a model reads it.
func (p Progress) Message() string {
	s := fmt.Sprintf("running for %s, %d bytes of output", (time.Duration(p.ElapsedMs) * time.Millisecond).Round(time.Second), p.OutputBytes)
	if p.Tail != "" {
		s += "; latest:\n" + p.Tail
	}
	return s
}

// The pace and size of progress notifications. A client whose request
// timeout resets on progress needs one well within its timeout (the
// TypeScript SDK's default is 60 s).
const (
	ProgressHeartbeat = 5 * time.Second
	ProgressMinGap    = time.Second
	ProgressMaxTail   = 1 << 10
)

// ProgressFunc receives progress. It is called from one goroutine at a
// time, never after the call that it reports on has returned; it should
// not block for long.
type ProgressFunc func(Progress)

type progressKey struct{}

// WithProgress returns a context under which exec reports its progress to
// fn.
func WithProgress(ctx context.Context, fn ProgressFunc) context.Context {
	return context.WithValue(ctx, progressKey{}, fn)
}

// ProgressFrom returns the ProgressFunc of ctx, or nil.
func ProgressFrom(ctx context.Context) ProgressFunc {
	fn, _ := ctx.Value(progressKey{}).(ProgressFunc)
	return fn
}

// progressTap sees a command's output (its writers call see under their
// shared lock) and reports progress from its own goroutine.
type progressTap struct {
	mu    *sync.Mutex // the output writers' lock
	total int64
	// ring holds the last ProgressMaxTail bytes written since the last
	// report: n of them, the oldest at pos once it is full. A write
	// costs its own length, whatever the size of the writes.
	ring   [ProgressMaxTail]byte
	pos, n int
	fresh  bool // output since the last report

	stop chan struct{}
	done chan struct{}
}

// see is called with mu held.
func (p *progressTap) see(b []byte) {
	p.total += int64(len(b))
	p.fresh = true
	if len(b) >= len(p.ring) {
		copy(p.ring[:], b[len(b)-len(p.ring):])
		p.pos, p.n = 0, len(p.ring)
		return
	}
	k := copy(p.ring[p.pos:], b)
	copy(p.ring[:], b[k:])
	p.pos = (p.pos + len(b)) % len(p.ring)
	p.n = min(p.n+len(b), len(p.ring))
}

// take returns the bytes seen since the last take, and forgets them;
// called with mu held.
func (p *progressTap) take() []byte {
	var out []byte
	if p.n < len(p.ring) {
		out = append(out, p.ring[p.pos-p.n:p.pos]...)
	} else {
		out = append(append(out, p.ring[p.pos:]...), p.ring[:p.pos]...)
	}
	p.pos, p.n, p.fresh = 0, 0, false
	return out
}

// startProgress reports to fn until the returned function is called; that
// function returns once fn is no longer running.
func startProgress(fn ProgressFunc, mu *sync.Mutex, start time.Time) (*progressTap, func()) {
	p := &progressTap{mu: mu, stop: make(chan struct{}), done: make(chan struct{})}
	go p.run(fn, start)
	return p, func() {
		close(p.stop)
		<-p.done
	}
}

func (p *progressTap) run(fn ProgressFunc, start time.Time) {
	defer close(p.done)
	tick := time.NewTicker(ProgressMinGap)
	defer tick.Stop()
	last := start
	var lastMs int64
	for {
		select {
		case <-p.stop:
			return
		case now := <-tick.C:
			p.mu.Lock()
			if !p.fresh && now.Sub(last) < ProgressHeartbeat-ProgressMinGap/2 {
				p.mu.Unlock()
				continue
			}
			pr := Progress{ElapsedMs: now.Sub(start).Milliseconds(), OutputBytes: p.total}
			tail := p.take()
			p.mu.Unlock()
			pr.Tail = validTail(tail)
			if pr.ElapsedMs <= lastMs {
				pr.ElapsedMs = lastMs + 1
			}
			lastMs, last = pr.ElapsedMs, now
			fn(pr)
		}
	}
}

// validTail is b as valid UTF-8 without control characters, starting at
// a rune, at most ProgressMaxTail bytes.
func validTail(b []byte) string {
	i := 0
	for i < len(b) && i < utf8.UTFMax && !utf8.RuneStart(b[i]) {
		i++
	}
	s := strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return r
		}
		if r < 0x20 || (r >= 0x7f && r < 0xa0) || r == utf8.RuneError {
			return '.'
		}
		return r
	}, string(b[i:]))
	for len(s) > ProgressMaxTail {
		_, n := utf8.DecodeRuneInString(s)
		s = s[n:]
	}
	return s
}
