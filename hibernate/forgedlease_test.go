package hibernate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

// warnings collects what a lease reports of forged objects.
type warnings struct {
	mu sync.Mutex
	n  int
}

func (w *warnings) warn(msg string, _ ...any) {
	if strings.Contains(msg, "not signed") {
		w.mu.Lock()
		w.n++
		w.mu.Unlock()
	}
}

func (w *warnings) count() int { w.mu.Lock(); defer w.mu.Unlock(); return w.n }

// putLease writes body as the location's lease object, unconditionally,
// with metadata meta: what whoever can write the bucket can do.
func putLease(t *testing.T, e *env, body []byte, meta map[string]string) {
	t.Helper()
	if _, err := e.c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: &e.loc.Bucket, Key: aws.String(e.loc.key(leaseName)),
		Body: bytes.NewReader(body), Metadata: meta}); err != nil {
		t.Fatal(err)
	}
}

// TestForgedLease: a lease object that the image key did not sign for
// this location (written plain, signed with another key, a manifest's
// signature, another location's lease, not JSON) is treated as absent:
// a taker takes it over with a warning, and a holder that finds one in
// place of its own writes over it at its next renewal. A signed live
// lease still fences, and the conditional writes still decide a race.
func TestForgedLease(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	far := time.Now().Add(24 * time.Hour).UTC().Truncate(time.Second)
	evil, _ := json.Marshal(Lease{Holder: "evil", Host: "attacker", Expires: far, Generation: 1 << 60})
	other := e.loc
	other.Prefix = "images/ws2"
	forgeries := map[string]func(t *testing.T){
		"plain": func(t *testing.T) { putLease(t, e, evil, nil) },
		"another key": func(t *testing.T) {
			putLease(t, e, evil, map[string]string{MACMeta: signAs(leaseFormat, []byte("fedcba9876543210fedcba9876543210"), e.loc, evil)})
		},
		"a manifest's signature": func(t *testing.T) {
			putLease(t, e, evil, map[string]string{MACMeta: sign(testKey, e.loc, evil)})
		},
		"another location's lease": func(t *testing.T) {
			putLease(t, e, evil, map[string]string{MACMeta: signAs(leaseFormat, testKey, other, evil)})
		},
		"not a lease": func(t *testing.T) { putLease(t, e, []byte("\x00garbage"), nil) },
		"a signature in bad hex": func(t *testing.T) {
			putLease(t, e, evil, map[string]string{MACMeta: "zz"})
		},
	}
	for name, forge := range forgeries {
		t.Run(name, func(t *testing.T) {
			forge(t)
			var w warnings
			l, err := AcquireLease(ctx, e.c, e.loc, LeaseOptions{Holder: "B", Host: "host-b", TTL: time.Minute, Key: testKey, Warn: w.warn})
			if err != nil {
				t.Fatalf("acquire over a forged lease: %v", err)
			}
			if w.count() == 0 {
				t.Error("no warning of the forged lease")
			}
			if l.Generation != 0 {
				t.Errorf("the forged lease's generation was taken: %d", l.Generation)
			}
			cur, err := ReadSignedLease(ctx, e.c, e.loc, testKey)
			if err != nil || cur == nil || cur.Forged || cur.Holder != "B" {
				t.Fatalf("the lease now: %+v, %v", cur, err)
			}
			// Forged again under the holder: its renewal writes over it.
			forge(t)
			if err := l.Renew(ctx, e.c, e.loc, time.Minute); err != nil {
				t.Fatalf("renew over a forged lease: %v", err)
			}
			if cur, err := ReadSignedLease(ctx, e.c, e.loc, testKey); err != nil || cur.Forged || cur.Holder != "B" || cur.ETag != l.ETag {
				t.Fatalf("after the renewal: %+v, %v", cur, err)
			}
			// A signed live lease fences another taker.
			var held *HeldError
			if _, err := AcquireLease(ctx, e.c, e.loc, LeaseOptions{Holder: "C", Host: "host-c", TTL: time.Minute, Key: testKey}); !errors.As(err, &held) || held.Lease.Holder != "B" {
				t.Fatalf("a live signed lease did not fence: %v", err)
			}
			if err := l.Release(ctx, e.c, e.loc); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("removed under its holder", func(t *testing.T) {
		l, err := AcquireLease(ctx, e.c, e.loc, LeaseOptions{Holder: "B", Host: "host-b", TTL: time.Minute, Key: testKey})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &e.loc.Bucket, Key: aws.String(e.loc.key(leaseName))}); err != nil {
			t.Fatal(err)
		}
		if err := l.Renew(ctx, e.c, e.loc, time.Minute); err != nil {
			t.Fatalf("renew after the lease was removed: %v", err)
		}
		if cur, err := ReadSignedLease(ctx, e.c, e.loc, testKey); err != nil || cur == nil || cur.Holder != "B" {
			t.Fatalf("after the renewal: %+v, %v", cur, err)
		}
		if err := l.Release(ctx, e.c, e.loc); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("race over a forged lease", func(t *testing.T) {
		putLease(t, e, evil, nil)
		var wg sync.WaitGroup
		won := make(chan string, 4)
		for _, h := range []string{"P", "Q", "R", "S"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := AcquireLease(ctx, e.c, e.loc, LeaseOptions{Holder: h, Host: "host-" + h, TTL: time.Minute, Key: testKey}); err == nil {
					won <- h
				} else if !errors.As(err, new(*HeldError)) && !errors.Is(err, ErrLeaseLost) {
					t.Errorf("%s: %v", h, err)
				}
			}()
		}
		wg.Wait()
		close(won)
		var winners []string
		for h := range won {
			winners = append(winners, h)
		}
		if len(winners) != 1 {
			t.Fatalf("winners: %v", winners)
		}
	})
}

// TestLeaseKeepsGeneration: a taken lease carries the greatest of the
// taker's generation and the replaced signed lease's, through renewals
// and the release.
func TestLeaseKeepsGeneration(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a, err := AcquireLease(ctx, e.c, e.loc, LeaseOptions{Holder: "A", Host: "a", TTL: time.Minute, Key: testKey, Generation: 7})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx, e.c, e.loc); err != nil {
		t.Fatal(err)
	}
	b, err := AcquireLease(ctx, e.c, e.loc, LeaseOptions{Holder: "B", Host: "b", TTL: time.Minute, Key: testKey, Generation: 3})
	if err != nil || b.Generation != 7 {
		t.Fatalf("generation %d, %v; want 7", b.Generation, err)
	}
	if err := b.Release(ctx, e.c, e.loc); err != nil {
		t.Fatal(err)
	}
	if cur, err := ReadSignedLease(ctx, e.c, e.loc, testKey); err != nil || cur.Generation != 7 || !cur.Released {
		t.Fatalf("released: %+v, %v", cur, err)
	}
}

// TestRecord: the record keeps the greatest generation per location,
// and refuses a directory others can write.
func TestRecord(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gens")
	r, err := OpenRecord(dir)
	if err != nil {
		t.Fatal(err)
	}
	a := Location{Bucket: "b", Prefix: "p"}
	b := Location{Bucket: "b", Prefix: "p2"}
	for _, g := range []uint64{3, 2, 5, 4} {
		if err := r.Raise(a, g); err != nil {
			t.Fatal(err)
		}
	}
	if g, err := r.Seen(a); err != nil || g != 5 {
		t.Fatalf("seen %d, %v; want 5", g, err)
	}
	if g, err := r.Seen(b); err != nil || g != 0 {
		t.Fatalf("another location: %d, %v", g, err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenRecord(dir); err == nil {
		t.Fatal("a record others can write was opened")
	}
}
