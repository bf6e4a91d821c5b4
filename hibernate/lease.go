package hibernate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// DefaultLeaseTTL is how long a lease lasts unless renewed: a host that
// died holding a workspace keeps it that long.
const DefaultLeaseTTL = 5 * time.Minute

const leaseName = "lease"

// Lease is PREFIX/lease: who holds the workspace and until when. It is
// taken with If-None-Match: * (no lease yet) or If-Match on the ETag of
// the lease it replaces (released, expired, or the taker's own), and
// renewed and released with If-Match on its own ETag, so that of two
// hosts racing for it one wins and the other is told who.
type Lease struct {
	Holder   string    `json:"holder"` // random, one per store directory
	Host     string    `json:"host"`
	Expires  time.Time `json:"expires"`
	Released bool      `json:"released,omitempty"`
	ETag     string    `json:"-"` // of the object as this process last wrote or read it
}

// HeldError says that another holder's lease is live.
type HeldError struct{ Lease Lease }

func (e *HeldError) Error() string {
	return fmt.Sprintf("the workspace is held by host %q (holder %s) until %s: it is mounted there, or was until that host stopped; hibernate it there, or wait for the lease to expire",
		e.Lease.Host, e.Lease.Holder, e.Lease.Expires.Format(time.RFC3339))
}

// ErrLeaseLost: the lease was taken by another holder (this one's had
// expired) or removed.
var ErrLeaseLost = errors.New("the lease was lost")

// ReadLease returns the location's lease, or nil if there is none.
func ReadLease(ctx context.Context, c *s3.Client, loc Location) (*Lease, error) {
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &loc.Bucket, Key: aws.String(loc.key(leaseName))})
	if isCode(err, "NoSuchKey", "NotFound") {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: read the lease: %w", loc, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(io.LimitReader(out.Body, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("%s: read the lease: %w", loc, err)
	}
	var l Lease
	if err := json.Unmarshal(b, &l); err != nil || l.Holder == "" {
		return nil, fmt.Errorf("%s: the lease object is not a computerfs lease (%q): remove it if nothing else uses this prefix", loc, b)
	}
	l.ETag = aws.ToString(out.ETag)
	return &l, nil
}

// ErrNoConditional: the server ignores conditional writes, so a lease
// there would fence nothing.
var ErrNoConditional = errors.New("the S3 server ignores conditional writes (If-None-Match, If-Match): a lease there cannot keep two hosts from resuming one workspace")

// Acquire takes the lease for holder on host for ttl: if there is none,
// it was released, it expired, or it is holder's already. Otherwise it
// fails with a *HeldError. It first checks that the server honours
// conditional writes (ErrNoConditional).
func Acquire(ctx context.Context, c *s3.Client, loc Location, holder, host string, ttl time.Duration) (*Lease, error) {
	if err := probeConditional(ctx, c, loc); err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		cur, err := ReadLease(ctx, c, loc)
		if err != nil {
			return nil, err
		}
		if cur != nil && !cur.Released && cur.Holder != holder && time.Now().Before(cur.Expires) {
			return nil, &HeldError{*cur}
		}
		l := &Lease{Holder: holder, Host: host}
		etag := ""
		if cur != nil {
			etag = cur.ETag
		}
		err = l.put(ctx, c, loc, etag, ttl, false)
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, ErrLeaseLost) || attempt == 2 {
			return nil, err
		}
		// Someone else wrote it meanwhile: look again.
	}
}

// Renew extends the lease by ttl from now. ErrLeaseLost if another
// holder has it now.
func (l *Lease) Renew(ctx context.Context, c *s3.Client, loc Location, ttl time.Duration) error {
	return l.put(ctx, c, loc, l.ETag, ttl, false)
}

// Release gives the lease up: the next Acquire, by any holder, takes it.
func (l *Lease) Release(ctx context.Context, c *s3.Client, loc Location) error {
	return l.put(ctx, c, loc, l.ETag, 0, true)
}

// put writes the lease if the object's ETag is still etag ("": there
// must be none).
func (l *Lease) put(ctx context.Context, c *s3.Client, loc Location, etag string, ttl time.Duration, released bool) error {
	next := *l
	next.Expires = time.Now().Add(ttl).UTC().Truncate(time.Second)
	next.Released = released
	b, err := json.Marshal(next)
	if err != nil {
		return err
	}
	in := &s3.PutObjectInput{Bucket: &loc.Bucket, Key: aws.String(loc.key(leaseName)), Body: bytes.NewReader(b), ContentType: aws.String("application/json")}
	if etag == "" {
		in.IfNoneMatch = aws.String("*")
	} else {
		in.IfMatch = aws.String(etag)
	}
	out, err := c.PutObject(ctx, in)
	if isPrecondition(err) || isCode(err, "NoSuchKey") {
		// The SDK may have sent the write again after a response that
		// was lost: then the lease there is this one.
		if cur, rerr := ReadLease(ctx, c, loc); rerr == nil && cur != nil && cur.Holder == next.Holder && cur.Host == next.Host &&
			cur.Expires.Equal(next.Expires) && cur.Released == next.Released {
			*l = *cur
			return nil
		}
		return fmt.Errorf("%s: %w", loc, ErrLeaseLost)
	}
	if err != nil {
		return fmt.Errorf("%s: write the lease: %w", loc, err)
	}
	*l = next
	l.ETag = aws.ToString(out.ETag)
	return nil
}

// Keep renews l every ttl/3 until stop is called (once or more), which returns the
// error that ended the renewals (ErrLeaseLost if another holder took
// it). report, if set, hears of every renewal and its error.
func (l *Lease) Keep(c *s3.Client, loc Location, ttl time.Duration, report func(*Lease, error)) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		t := time.NewTicker(max(ttl/3, time.Second))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				done <- nil
				return
			case <-t.C:
			}
			rctx, rcancel := context.WithTimeout(ctx, max(ttl/3, time.Second))
			err := l.Renew(rctx, c, loc, ttl)
			rcancel()
			if ctx.Err() != nil {
				done <- nil
				return
			}
			if report != nil {
				report(l, err)
			}
			if errors.Is(err, ErrLeaseLost) {
				done <- err
				return
			}
			// Another error (the server unreachable): try again at the
			// next tick; the lease lasts ttl.
		}
	}()
	var once sync.Once
	var err error
	return func() error {
		once.Do(func() {
			cancel()
			err = <-done
		})
		return err
	}
}

// probeConditional writes a probe object twice with If-None-Match: * and
// deletes it: a server that takes the second write ignores the header.
func probeConditional(ctx context.Context, c *s3.Client, loc Location) error {
	key := loc.key(".probe-" + randomID())
	put := func() error {
		_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &loc.Bucket, Key: &key, Body: bytes.NewReader(nil), IfNoneMatch: aws.String("*")})
		return err
	}
	if err := put(); err != nil {
		return fmt.Errorf("%s: probe conditional writes: %w", loc, err)
	}
	defer c.DeleteObject(context.WithoutCancel(ctx), &s3.DeleteObjectInput{Bucket: &loc.Bucket, Key: &key})
	switch err := put(); {
	case err == nil:
		return fmt.Errorf("%s: %w", loc, ErrNoConditional)
	case isPrecondition(err):
		return nil
	default:
		return fmt.Errorf("%s: probe conditional writes: %w", loc, err)
	}
}
