package faultnet_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/computerfs/computerfs/internal/faultnet"
)

// server is a real HTTP server that answers every request with body and
// counts the requests that reach it.
type server struct {
	*httptest.Server
	hits atomic.Int64
}

func newServer(t *testing.T, body string) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(s.Close)
	return s
}

func get(t *testing.T, c *http.Client, url string) (int, string, error) {
	t.Helper()
	return do(t, c, "GET", url, "")
}

func do(t *testing.T, c *http.Client, method, url, body string) (int, string, error) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func TestFailTimes(t *testing.T) {
	s := newServer(t, "ok")
	ft := faultnet.New(s.Client().Transport)
	boom := errors.New("boom")
	r := ft.Add(faultnet.Match("GET", "/obj").Fail(boom).Times(2))
	c := ft.Client()

	for i := range 2 {
		_, _, err := get(t, c, s.URL+"/a/obj")
		if !errors.Is(err, boom) {
			t.Fatalf("request %d: err = %v, want boom", i, err)
		}
	}
	code, body, err := get(t, c, s.URL+"/a/obj")
	if err != nil || code != 200 || body != "ok" {
		t.Fatalf("third request: %d %q %v, want 200 ok", code, body, err)
	}
	if got := s.hits.Load(); got != 1 {
		t.Errorf("server saw %d requests, want 1 (failed ones must not reach it)", got)
	}
	if r.Requests() != 3 || r.Injected() != 2 {
		t.Errorf("Requests, Injected = %d, %d; want 3, 2", r.Requests(), r.Injected())
	}
}

func TestFailNilUsesErrInjected(t *testing.T) {
	s := newServer(t, "ok")
	ft := faultnet.New(s.Client().Transport)
	ft.Add(faultnet.Match("", "").Fail(nil))
	if _, _, err := get(t, ft.Client(), s.URL); !errors.Is(err, faultnet.ErrInjected) {
		t.Fatalf("err = %v, want ErrInjected", err)
	}
}

func TestStatus(t *testing.T) {
	s := newServer(t, "ok")
	ft := faultnet.New(s.Client().Transport)
	r := ft.Add(faultnet.Match("PUT", "").Status(503).Times(2))
	c := ft.Client()

	// GET does not match the rule.
	if code, _, err := get(t, c, s.URL+"/x"); err != nil || code != 200 {
		t.Fatalf("GET: %d %v", code, err)
	}
	for i := range 2 {
		code, body, err := do(t, c, "PUT", s.URL+"/x", "data")
		if err != nil || code != 503 || !strings.Contains(body, "503") {
			t.Fatalf("PUT %d: %d %q %v, want injected 503", i, code, body, err)
		}
	}
	if code, body, err := do(t, c, "PUT", s.URL+"/x", "data"); err != nil || code != 200 || body != "ok" {
		t.Fatalf("third PUT: %d %q %v", code, body, err)
	}
	if got := s.hits.Load(); got != 2 {
		t.Errorf("server saw %d requests, want 2", got)
	}
	if r.Requests() != 3 || r.Injected() != 2 {
		t.Errorf("Requests, Injected = %d, %d; want 3, 2", r.Requests(), r.Injected())
	}
}

func TestStatusBody(t *testing.T) {
	s := newServer(t, "ok")
	ft := faultnet.New(s.Client().Transport)
	ft.Add(faultnet.Match("", "").StatusBody(http.StatusTooManyRequests, "slow down"))
	code, body, err := get(t, ft.Client(), s.URL)
	if err != nil || code != 429 || body != "slow down" {
		t.Fatalf("got %d %q %v", code, body, err)
	}
}

func TestAfterSend(t *testing.T) {
	s := newServer(t, "ok")
	ft := faultnet.New(s.Client().Transport)
	ft.Add(faultnet.Match("POST", "/fail").Fail(nil).AfterSend())
	ft.Add(faultnet.Match("POST", "/status").Status(500).AfterSend())
	c := ft.Client()

	if _, _, err := do(t, c, "POST", s.URL+"/fail", "x"); !errors.Is(err, faultnet.ErrInjected) {
		t.Fatalf("err = %v", err)
	}
	if code, _, err := do(t, c, "POST", s.URL+"/status", "x"); err != nil || code != 500 {
		t.Fatalf("got %d %v, want 500", code, err)
	}
	if got := s.hits.Load(); got != 2 {
		t.Errorf("server saw %d requests, want 2 (AfterSend sends them)", got)
	}
}

func TestDelay(t *testing.T) {
	s := newServer(t, "ok")
	ft := faultnet.New(s.Client().Transport)
	const d = 150 * time.Millisecond
	r := ft.Add(faultnet.Match("GET", "/slow").Delay(d).Times(1))
	c := ft.Client()

	start := time.Now()
	code, body, err := get(t, c, s.URL+"/slow")
	if err != nil || code != 200 || body != "ok" {
		t.Fatalf("got %d %q %v", code, body, err)
	}
	if el := time.Since(start); el < d {
		t.Errorf("delayed request took %v, want at least %v", el, d)
	}
	start = time.Now()
	if _, _, err := get(t, c, s.URL+"/slow"); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el >= d {
		t.Errorf("second request took %v; Times(1) should not delay it", el)
	}
	if r.Injected() != 1 {
		t.Errorf("Injected = %d, want 1", r.Injected())
	}
}

func TestDelayHonoursContext(t *testing.T) {
	s := newServer(t, "ok")
	ft := faultnet.New(s.Client().Transport)
	ft.Add(faultnet.Match("", "").Delay(time.Hour))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", s.URL, nil)
	start := time.Now()
	_, err := ft.Client().Do(req)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want deadline exceeded", err)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("cancelled delay took %v", el)
	}
	if s.hits.Load() != 0 {
		t.Errorf("a cancelled request reached the server")
	}
}

func TestDelayThenStatus(t *testing.T) {
	s := newServer(t, "ok")
	ft := faultnet.New(s.Client().Transport)
	ft.Add(faultnet.Match("", "").Delay(50 * time.Millisecond).Status(502))
	start := time.Now()
	code, _, err := get(t, ft.Client(), s.URL)
	if err != nil || code != 502 {
		t.Fatalf("got %d %v, want 502", code, err)
	}
	if time.Since(start) < 50*time.Millisecond {
		t.Errorf("no delay before the status")
	}
}

func TestTruncate(t *testing.T) {
	full := strings.Repeat("0123456789", 100)
	s := newServer(t, full)
	ft := faultnet.New(s.Client().Transport)
	r := ft.Add(faultnet.Match("GET", "/big").TruncateAfter(100).Times(1))
	c := ft.Client()

	code, body, err := get(t, c, s.URL+"/big")
	if code != 200 {
		t.Fatalf("status %d", code)
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("read err = %v, want io.ErrUnexpectedEOF", err)
	}
	if body != full[:100] {
		t.Fatalf("read %d bytes %q..., want the first 100", len(body), body[:min(len(body), 20)])
	}
	// Times(1): the next read is whole.
	code, body, err = get(t, c, s.URL+"/big")
	if err != nil || code != 200 || body != full {
		t.Fatalf("second read: %d, %d bytes, %v", code, len(body), err)
	}
	if r.Requests() != 2 || r.Injected() != 1 {
		t.Errorf("Requests, Injected = %d, %d; want 2, 1", r.Requests(), r.Injected())
	}
}

func TestTruncateZeroAndShortBodies(t *testing.T) {
	s := newServer(t, "short")
	ft := faultnet.New(s.Client().Transport)
	ft.Add(faultnet.Match("", "/zero").TruncateAfter(0))
	ft.Add(faultnet.Match("", "/exact").TruncateAfter(5))
	ft.Add(faultnet.Match("", "/long").TruncateAfter(50))
	c := ft.Client()

	if _, body, err := get(t, c, s.URL+"/zero"); !errors.Is(err, io.ErrUnexpectedEOF) || body != "" {
		t.Errorf("/zero: %q %v", body, err)
	}
	for _, p := range []string{"/exact", "/long"} {
		if _, body, err := get(t, c, s.URL+p); err != nil || body != "short" {
			t.Errorf("%s: %q %v, want the whole body", p, body, err)
		}
	}
}

func TestMatchFuncAndCounting(t *testing.T) {
	s := newServer(t, "ok")
	ft := faultnet.New(s.Client().Transport)
	// A rule with no action only counts; it does not shadow later rules.
	all := ft.Add(faultnet.Match("", ""))
	gets := ft.Add(faultnet.Match("GET", ""))
	hdr := ft.Add(faultnet.MatchFunc(func(r *http.Request) bool {
		return r.Header.Get("X-Fault") == "yes"
	}).Status(418))
	c := ft.Client()

	if code, _, _ := get(t, c, s.URL+"/a"); code != 200 {
		t.Fatalf("plain GET: %d", code)
	}
	if code, _, _ := do(t, c, "DELETE", s.URL+"/b", ""); code != 200 {
		t.Fatalf("DELETE: %d", code)
	}
	req, _ := http.NewRequest("GET", s.URL+"/c", nil)
	req.Header.Set("X-Fault", "yes")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 418 {
		t.Fatalf("header-matched GET: %d, want 418", resp.StatusCode)
	}
	for _, tc := range []struct {
		name           string
		r              *faultnet.Rule
		reqs, injected int
	}{
		{"all", all, 3, 0},
		{"gets", gets, 2, 0},
		{"hdr", hdr, 1, 1},
	} {
		if tc.r.Requests() != tc.reqs || tc.r.Injected() != tc.injected {
			t.Errorf("%s: Requests, Injected = %d, %d; want %d, %d",
				tc.name, tc.r.Requests(), tc.r.Injected(), tc.reqs, tc.injected)
		}
	}
}

func TestFirstMatchingRuleFires(t *testing.T) {
	s := newServer(t, "ok")
	ft := faultnet.New(s.Client().Transport)
	first := ft.Add(faultnet.Match("", "/x").Status(500).Times(1))
	second := ft.Add(faultnet.Match("", "/x").Status(502).Times(1))
	c := ft.Client()
	var codes []int
	for range 3 {
		code, _, err := get(t, c, s.URL+"/x")
		if err != nil {
			t.Fatal(err)
		}
		codes = append(codes, code)
	}
	if codes[0] != 500 || codes[1] != 502 || codes[2] != 200 {
		t.Fatalf("codes = %v, want [500 502 200]", codes)
	}
	if first.Requests() != 3 || second.Requests() != 3 {
		t.Errorf("both rules should count all 3 requests: %d, %d", first.Requests(), second.Requests())
	}
}

func TestRemoveAndReset(t *testing.T) {
	s := newServer(t, "ok")
	ft := faultnet.New(s.Client().Transport)
	r := ft.Add(faultnet.Match("", "").Status(500))
	c := ft.Client()
	if code, _, _ := get(t, c, s.URL); code != 500 {
		t.Fatalf("with rule: %d", code)
	}
	ft.Remove(r)
	if code, _, _ := get(t, c, s.URL); code != 200 {
		t.Fatalf("after Remove: %d", code)
	}
	if r.Requests() != 1 {
		t.Errorf("removed rule counted %d requests, want 1", r.Requests())
	}
	ft.Add(faultnet.Match("", "").Status(500))
	ft.Reset()
	if code, _, _ := get(t, c, s.URL); code != 200 {
		t.Fatalf("after Reset: %d", code)
	}
}

func TestConfigureAfterAddPanics(t *testing.T) {
	ft := faultnet.New(nil)
	r := ft.Add(faultnet.Match("", ""))
	defer func() {
		if recover() == nil {
			t.Fatal("changing a rule after Add did not panic")
		}
	}()
	r.Status(500)
}

func TestConcurrentTimesIsExact(t *testing.T) {
	s := newServer(t, "ok")
	ft := faultnet.New(s.Client().Transport)
	r := ft.Add(faultnet.Match("GET", "").Status(503).Times(10))
	c := ft.Client()

	const n = 60
	var wg sync.WaitGroup
	var failed, ok atomic.Int64
	for range n {
		wg.Go(func() {
			code, _, err := get(t, c, s.URL)
			switch {
			case err != nil:
				t.Error(err)
			case code == 503:
				failed.Add(1)
			case code == 200:
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	if failed.Load() != 10 || ok.Load() != n-10 {
		t.Errorf("503s, 200s = %d, %d; want 10, %d", failed.Load(), ok.Load(), n-10)
	}
	if r.Requests() != n || r.Injected() != 10 {
		t.Errorf("Requests, Injected = %d, %d; want %d, 10", r.Requests(), r.Injected(), n)
	}
	if s.hits.Load() != n-10 {
		t.Errorf("server saw %d, want %d", s.hits.Load(), n-10)
	}
}
