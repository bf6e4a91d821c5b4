package hibernate

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"
)

// TestLease: one holder at a time; taken over once released or expired;
// a holder whose lease was taken cannot renew it.
func TestLease(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a, err := Acquire(ctx, e.c, e.loc, "A", "host-a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var held *HeldError
	if _, err := Acquire(ctx, e.c, e.loc, "B", "host-b", time.Minute); !errors.As(err, &held) || held.Lease.Holder != "A" || held.Lease.Host != "host-a" {
		t.Fatalf("B while A holds it: %v", err)
	}
	if err := a.Renew(ctx, e.c, e.loc, time.Minute); err != nil {
		t.Fatal(err)
	}
	// A again (the same store after a restart): its own lease. (Another
	// expiry: a lease of the same content has the same ETag.)
	a2, err := Acquire(ctx, e.c, e.loc, "A", "host-a", 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Renew(ctx, e.c, e.loc, time.Minute); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("renew with a stale ETag: %v", err)
	}
	if err := a2.Release(ctx, e.c, e.loc); err != nil {
		t.Fatal(err)
	}
	b, err := Acquire(ctx, e.c, e.loc, "B", "host-b", 2*time.Second)
	if err != nil {
		t.Fatalf("B after A released: %v", err)
	}
	if _, err := Acquire(ctx, e.c, e.loc, "A", "host-a", time.Minute); !errors.As(err, &held) {
		t.Fatalf("A while B holds it: %v", err)
	}
	// B's lease expires (B stopped renewing): A takes it, and B has lost it.
	time.Sleep(time.Until(b.Expires) + 100*time.Millisecond)
	if _, err := Acquire(ctx, e.c, e.loc, "A", "host-a", time.Minute); err != nil {
		t.Fatalf("A after B's lease expired: %v", err)
	}
	if err := b.Renew(ctx, e.c, e.loc, time.Minute); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("B renews a lease taken over: %v", err)
	}
}

// TestLeaseRace: of holders that take a free lease at once, one wins.
func TestLeaseRace(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for round := range 5 {
		var wg sync.WaitGroup
		var mu sync.Mutex
		var won []string
		holders := []string{"A", "B", "C", "D"}
		for _, h := range holders {
			wg.Go(func() {
				l, err := Acquire(ctx, e.c, e.loc, h, "host-"+h, time.Minute)
				var held *HeldError
				switch {
				case err == nil:
					mu.Lock()
					won = append(won, l.Holder)
					mu.Unlock()
				case !errors.As(err, &held):
					t.Errorf("round %d: %s: %v", round, h, err)
				}
			})
		}
		wg.Wait()
		if len(won) != 1 {
			t.Fatalf("round %d: %d holders won: %v", round, len(won), won)
		}
		l, err := ReadLease(ctx, e.c, e.loc)
		if err != nil || l.Holder != won[0] {
			t.Fatalf("round %d: the lease is %+v (%v), the winner %s", round, l, err, won[0])
		}
		if err := l.Release(ctx, e.c, e.loc); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLeaseKeep: Keep renews the lease until stopped.
func TestLeaseKeep(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	l, err := Acquire(ctx, e.c, e.loc, "A", "host-a", 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	first := l.Expires
	renewed := make(chan struct{}, 10)
	stop := l.Keep(e.c, e.loc, 3*time.Second, func(_ *Lease, err error) {
		if err == nil {
			renewed <- struct{}{}
		}
	})
	<-renewed
	<-renewed
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	cur, err := ReadLease(ctx, e.c, e.loc)
	if err != nil || !cur.Expires.After(first) || cur.ETag != l.ETag {
		t.Fatalf("after renewals: %+v (%v), first expiry %v, ours %+v", cur, err, first, l)
	}
}

func TestParseURL(t *testing.T) {
	for in, want := range map[string]string{
		"s3://b": "s3://b", "s3://b/": "s3://b", "s3://b/p/q": "s3://b/p/q", "s3://b/p/q/": "s3://b/p/q",
		"s3://b/../p": "", "s3://b/p//q": "", "s3://b/./p": "", "http://b/p": "", "s3:///p": "", "s3://b/p?x=1": "",
	} {
		loc, err := ParseURL(in)
		if got := loc.String(); want == "" && err == nil || want != "" && (err != nil || got != want) {
			t.Errorf("ParseURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// ignoreConditional is a transport that answers a refused conditional
// write with success, as a server that ignores the headers would.
type ignoreConditional struct{ base http.RoundTripper }

func (s ignoreConditional) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := s.base.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusPreconditionFailed {
		resp.Body.Close()
		resp.StatusCode, resp.Status = http.StatusOK, "200 OK"
		resp.Body, resp.ContentLength = http.NoBody, 0
		resp.Header = http.Header{"Etag": {`"0"`}}
	}
	return resp, err
}

// TestLeaseNeedsConditional: against a server that ignores conditional
// writes, no lease is taken.
func TestLeaseNeedsConditional(t *testing.T) {
	e := newEnv(t)
	c := e.client(t, &http.Client{Transport: ignoreConditional{http.DefaultTransport}})
	if _, err := Acquire(context.Background(), c, e.loc, "A", "host-a", time.Minute); !errors.Is(err, ErrNoConditional) {
		t.Fatalf("acquire: %v", err)
	}
	if l, err := ReadLease(context.Background(), e.c, e.loc); err != nil || l != nil {
		t.Fatalf("a lease was written: %+v, %v", l, err)
	}
}
