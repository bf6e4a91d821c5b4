// Package faultnet injects faults into HTTP traffic for tests: a Transport
// wraps a real http.RoundTripper and, for the requests that match a rule,
// fails them with an error, answers them with a chosen status, delays them
// or cuts their response bodies short. Tests still talk to real servers;
// faultnet only breaks some of the exchanges on the way.
//
// Rules are built with Match or MatchFunc, configured with their chained
// methods, then registered with Transport.Add:
//
//	ft := faultnet.New(nil)
//	put := ft.Add(faultnet.Match("PUT", "/bucket/").Status(503).Times(2))
//	client := &http.Client{Transport: ft}
//	...
//	if put.Injected() != 2 { ... }
//
// For each request the rules are visited in the order they were added. Every
// rule whose matcher accepts the request counts it (Requests). The first
// matching rule that has an action and has not used up its Times fires: it
// counts the fault (Injected) and applies its action. Rules without an
// action only count.
package faultnet

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// ErrInjected is the error Fail uses when given nil.
var ErrInjected = errors.New("faultnet: injected failure")

// Transport is an http.RoundTripper that applies fault rules to the
// requests it passes on to Base. It is safe for concurrent use.
type Transport struct {
	base http.RoundTripper

	mu    sync.Mutex
	rules []*Rule
}

// New returns a Transport that sends requests with base, or with
// http.DefaultTransport when base is nil.
func New(base http.RoundTripper) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	return &Transport{base: base}
}

// Client returns an http.Client that uses t.
func (t *Transport) Client() *http.Client { return &http.Client{Transport: t} }

// Add registers r after the rules already present and returns it. A rule
// must not be reconfigured once added, nor added twice.
func (t *Transport) Add(r *Rule) *Rule {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, o := range t.rules {
		if o == r {
			panic("faultnet: rule added twice")
		}
	}
	r.frozen = true
	t.rules = append(t.rules, r)
	return r
}

// Remove unregisters r; requests no longer match it. Its counts stay
// readable.
func (t *Transport) Remove(r *Rule) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, o := range t.rules {
		if o == r {
			t.rules = append(t.rules[:i:i], t.rules[i+1:]...)
			return
		}
	}
}

// Reset unregisters every rule.
func (t *Transport) Reset() {
	t.mu.Lock()
	t.rules = nil
	t.mu.Unlock()
}

type kind int

const (
	none kind = iota
	fail
	status
	truncate
	delayOnly
)

// Rule selects requests and says what to do with them. Build one with Match
// or MatchFunc; its configuring methods return the rule itself so that they
// chain, and must all be called before Transport.Add.
type Rule struct {
	method string
	path   string
	fn     func(*http.Request) bool

	kind      kind
	err       error
	code      int
	body      string
	delay     time.Duration
	keep      int64
	afterSend bool
	times     int // 0: no limit

	frozen bool

	mu       sync.Mutex // guards requests and injected
	requests int
	injected int
}

// Match returns a rule that matches requests whose method is method (any
// method when empty) and whose URL path contains path (any path when
// empty).
func Match(method, path string) *Rule {
	return &Rule{method: method, path: path}
}

// MatchFunc returns a rule that matches the requests for which f returns
// true. f may be called concurrently and must not read the request body.
func MatchFunc(f func(*http.Request) bool) *Rule {
	return &Rule{fn: f}
}

func (r *Rule) mutable() {
	if r.frozen {
		panic("faultnet: rule changed after Transport.Add")
	}
}

func (r *Rule) setKind(k kind) {
	r.mutable()
	if r.kind != none && r.kind != delayOnly && r.kind != k {
		panic("faultnet: a rule takes one of Fail, Status and TruncateAfter")
	}
	r.kind = k
}

// Fail makes the matched requests fail with err (ErrInjected when nil),
// without reaching the server unless AfterSend is set. The error the
// caller sees is wrapped by net/http in a *url.Error; errors.Is finds err.
func (r *Rule) Fail(err error) *Rule {
	r.setKind(fail)
	if err == nil {
		err = ErrInjected
	}
	r.err = err
	return r
}

// Status makes the matched requests receive a response with the given
// status code and a short text body, without reaching the server unless
// AfterSend is set.
func (r *Rule) Status(code int) *Rule {
	return r.StatusBody(code, fmt.Sprintf("faultnet: injected status %d\n", code))
}

// StatusBody is Status with the given response body.
func (r *Rule) StatusBody(code int, body string) *Rule {
	r.setKind(status)
	r.code = code
	r.body = body
	return r
}

// TruncateAfter passes the matched requests to the server but cuts the
// response body after k bytes: the read that would go past them returns
// io.ErrUnexpectedEOF. Bodies of k bytes or fewer are left whole.
func (r *Rule) TruncateAfter(k int64) *Rule {
	r.setKind(truncate)
	r.keep = k
	return r
}

// Delay waits d before the request is sent (or failed). On its own it
// delays requests that then proceed normally; it also combines with Fail,
// Status and TruncateAfter. The wait ends early, with the context's error,
// when the request's context is done.
func (r *Rule) Delay(d time.Duration) *Rule {
	r.mutable()
	if r.kind == none {
		r.kind = delayOnly
	}
	r.delay = d
	return r
}

// AfterSend makes Fail and Status act after the request has reached the
// server and its response has been read: the server applies the request
// but the client sees the fault, as when a connection drops after a write.
func (r *Rule) AfterSend() *Rule {
	r.mutable()
	r.afterSend = true
	return r
}

// Times limits the rule to firing for the first n requests it matches;
// later matching requests pass through (they are still counted). Without
// Times, or with n <= 0, it fires every time.
func (r *Rule) Times(n int) *Rule {
	r.mutable()
	if n < 0 {
		n = 0
	}
	r.times = n
	return r
}

func (r *Rule) matches(req *http.Request) bool {
	if r.fn != nil {
		return r.fn(req)
	}
	if r.method != "" && !strings.EqualFold(r.method, req.Method) {
		return false
	}
	return strings.Contains(req.URL.Path, r.path)
}

// Requests returns how many requests the rule has matched, whether or not
// it fired for them.
func (r *Rule) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

// Injected returns how many times the rule has fired.
func (r *Rule) Injected() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.injected
}

// pick counts req against the rules and returns the one that fires, if any.
func (t *Transport) pick(req *http.Request) *Rule {
	t.mu.Lock()
	rules := append([]*Rule(nil), t.rules...)
	t.mu.Unlock()

	var fired *Rule
	for _, r := range rules {
		if !r.matches(req) {
			continue
		}
		r.mu.Lock()
		r.requests++
		if fired == nil && r.kind != none && (r.times == 0 || r.injected < r.times) {
			r.injected++
			fired = r
		}
		r.mu.Unlock()
	}
	return fired
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	r := t.pick(req)
	if r == nil {
		return t.base.RoundTrip(req)
	}
	if r.delay > 0 {
		timer := time.NewTimer(r.delay)
		select {
		case <-timer.C:
		case <-req.Context().Done():
			timer.Stop()
			closeBody(req)
			return nil, req.Context().Err()
		}
	}
	switch r.kind {
	case fail, status:
		if r.afterSend {
			resp, err := t.base.RoundTrip(req)
			if err != nil {
				return nil, err
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		} else {
			closeBody(req)
		}
		if r.kind == fail {
			return nil, r.err
		}
		return &http.Response{
			Status:        fmt.Sprintf("%d %s", r.code, http.StatusText(r.code)),
			StatusCode:    r.code,
			Proto:         "HTTP/1.1",
			ProtoMajor:    1,
			ProtoMinor:    1,
			Header:        http.Header{"Content-Type": {"text/plain; charset=utf-8"}},
			Body:          io.NopCloser(strings.NewReader(r.body)),
			ContentLength: int64(len(r.body)),
			Request:       req,
		}, nil
	case truncate:
		resp, err := t.base.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		resp.Body = &cutBody{rc: resp.Body, left: r.keep}
		return resp, nil
	default:
		return t.base.RoundTrip(req)
	}
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// cutBody returns at most left bytes of rc, then io.ErrUnexpectedEOF if rc
// had more.
type cutBody struct {
	mu   sync.Mutex
	rc   io.ReadCloser
	left int64
	cut  bool
}

func (b *cutBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cut {
		return 0, io.ErrUnexpectedEOF
	}
	if b.left <= 0 {
		// Find out whether anything follows the kept prefix.
		var one [1]byte
		for {
			n, err := b.rc.Read(one[:])
			if n > 0 {
				b.cut = true
				return 0, io.ErrUnexpectedEOF
			}
			if err != nil {
				return 0, err
			}
		}
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *cutBody) Close() error { return b.rc.Close() }
