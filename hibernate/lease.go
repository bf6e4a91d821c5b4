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
// the lease it replaces (released, expired, forged, or the taker's own),
// and renewed and released with If-Match on its own ETag, so that of two
// hosts racing for it one wins and the other is told who.
//
// A lease is signed with the image key (the object's metadata MACMeta,
// over the location and the lease's bytes, apart from a manifest's
// signature): whoever can write the bucket but does not hold the key
// cannot make one. A lease object that the key did not sign is Forged:
// treated as absent (taken over, with a warning), never honoured.
type Lease struct {
	Holder   string    `json:"holder"` // random, one per store directory
	Host     string    `json:"host"`
	Expires  time.Time `json:"expires"`
	Released bool      `json:"released,omitempty"`
	// Generation is the image generation the holder works from: the
	// manifest it resumed or is writing, and never less than the
	// generation of the lease it replaced. A resume refuses a manifest
	// of a lower generation than the signed lease's (ErrRolledBack).
	Generation uint64 `json:"generation,omitempty"`
	ETag       string `json:"-"` // of the object as this process last wrote or read it
	// Forged: the object at the location is not a lease the reader's key
	// signed there (ReadSignedLease); nothing else of it is to be trusted.
	Forged bool `json:"-"`

	key  []byte                        // signs what put writes, verifies what it reads
	warn func(msg string, args ...any) // hears of a forged lease replaced
}

// LeaseOptions configure AcquireLease.
type LeaseOptions struct {
	Holder string // random, one per store directory
	Host   string
	TTL    time.Duration
	// Key is the image key: it signs the lease, and a lease at the
	// location it did not sign is taken over as absent. Nil: unsigned
	// leases, and every lease honoured (the package's tests of the
	// protocol alone).
	Key []byte
	// Generation is the image generation the holder knows of (the host's
	// record, the store's); the lease carries the greater of it and the
	// replaced lease's.
	Generation uint64
	// Warn hears of a forged lease that was taken over (nil: not told).
	Warn func(msg string, args ...any)
}

// HeldError says that another holder's lease is live.
type HeldError struct{ Lease Lease }

func (e *HeldError) Error() string {
	return fmt.Sprintf("the workspace is held by host %q (holder %s) until %s: it is mounted there, or was until that host stopped; hibernate it there, or wait for the lease to expire",
		e.Lease.Host, e.Lease.Holder, e.Lease.Expires.Format(time.RFC3339))
}

// ErrLeaseLost: the lease was taken by another holder (this one's had
// expired).
var ErrLeaseLost = errors.New("the lease was lost")

// ReadLease returns the location's lease, or nil if there is none,
// without checking its signature.
func ReadLease(ctx context.Context, c *s3.Client, loc Location) (*Lease, error) {
	return ReadSignedLease(ctx, c, loc, nil)
}

// ReadSignedLease returns the location's lease, or nil if there is none.
// With a key, an object that is not a lease the key signed at loc comes
// back Forged (with its ETag, so that it can be replaced conditionally).
func ReadSignedLease(ctx context.Context, c *s3.Client, loc Location, key []byte) (*Lease, error) {
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
	etag := aws.ToString(out.ETag)
	if key != nil && !verifyAs(leaseFormat, key, loc, b, out.Metadata[MACMeta]) {
		return &Lease{Forged: true, ETag: etag}, nil
	}
	var l Lease
	if err := json.Unmarshal(b, &l); err != nil || l.Holder == "" {
		if key != nil {
			return &Lease{Forged: true, ETag: etag}, nil
		}
		return nil, fmt.Errorf("%s: the lease object is not a computerfs lease (%q): remove it if nothing else uses this prefix", loc, b)
	}
	l.ETag = etag
	return &l, nil
}

// ErrNoConditional: the server ignores conditional writes, so a lease
// there would fence nothing.
var ErrNoConditional = errors.New("the S3 server ignores conditional writes (If-None-Match, If-Match): a lease there cannot keep two hosts from resuming one workspace")

// Acquire takes an unsigned lease (AcquireLease without a key).
func Acquire(ctx context.Context, c *s3.Client, loc Location, holder, host string, ttl time.Duration) (*Lease, error) {
	return AcquireLease(ctx, c, loc, LeaseOptions{Holder: holder, Host: host, TTL: ttl})
}

// AcquireLease takes the lease for o.Holder on o.Host for o.TTL: if there
// is none, it was released, it expired, it is forged (o.Key did not sign
// it), or it is the holder's already. Otherwise it fails with a
// *HeldError. It first checks that the server honours conditional writes
// (ErrNoConditional).
func AcquireLease(ctx context.Context, c *s3.Client, loc Location, o LeaseOptions) (*Lease, error) {
	if err := probeConditional(ctx, c, loc); err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		cur, err := ReadSignedLease(ctx, c, loc, o.Key)
		if err != nil {
			return nil, err
		}
		if cur != nil && !cur.Forged && !cur.Released && cur.Holder != o.Holder && time.Now().Before(cur.Expires) {
			return nil, &HeldError{*cur}
		}
		l := &Lease{Holder: o.Holder, Host: o.Host, Generation: o.Generation, key: o.Key, warn: o.Warn}
		etag := ""
		if cur != nil {
			etag = cur.ETag
			if cur.Forged {
				l.warnForged(loc, cur.ETag)
			} else {
				l.Generation = max(l.Generation, cur.Generation)
			}
		}
		err = l.put(ctx, c, loc, etag, o.TTL, false)
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, ErrLeaseLost) || attempt == 2 {
			return nil, err
		}
		// Someone else wrote it meanwhile: look again.
	}
}

// Held returns the lease a store holds (its holder, host and last ETag),
// to renew or release it: signed with key, forged leases reported to
// warn.
func Held(holder, host, etag string, generation uint64, key []byte, warn func(string, ...any)) *Lease {
	return &Lease{Holder: holder, Host: host, ETag: etag, Generation: generation, key: key, warn: warn}
}

func (l *Lease) warnForged(loc Location, etag string) {
	if l.warn != nil {
		l.warn("the lease object is not signed with this host's image key (written by someone who does not hold it): it is ignored and replaced", "at", loc.String(), "etag", etag)
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
// must be none). A signed lease that finds the object forged or removed
// in its place writes over it (conditionally still): neither is a
// holder's, and a holder that gave up its lease for them would let
// another host resume the workspace it has mounted.
func (l *Lease) put(ctx context.Context, c *s3.Client, loc Location, etag string, ttl time.Duration, released bool) error {
	for attempt := 0; ; attempt++ {
		next := *l
		next.Expires = time.Now().Add(ttl).UTC().Truncate(time.Second)
		next.Released = released
		b, err := json.Marshal(next)
		if err != nil {
			return err
		}
		in := &s3.PutObjectInput{Bucket: &loc.Bucket, Key: aws.String(loc.key(leaseName)), Body: bytes.NewReader(b), ContentType: aws.String("application/json")}
		if l.key != nil {
			in.Metadata = map[string]string{MACMeta: signAs(leaseFormat, l.key, loc, b)}
		}
		if etag == "" {
			in.IfNoneMatch = aws.String("*")
		} else {
			in.IfMatch = aws.String(etag)
		}
		out, err := c.PutObject(ctx, in)
		if isPrecondition(err) || isCode(err, "NoSuchKey") {
			// The SDK may have sent the write again after a response that
			// was lost: then the lease there is this one.
			cur, rerr := ReadSignedLease(ctx, c, loc, l.key)
			if rerr == nil && cur != nil && !cur.Forged && cur.Holder == next.Holder && cur.Host == next.Host &&
				cur.Expires.Equal(next.Expires) && cur.Released == next.Released && cur.Generation == next.Generation {
				next.ETag = cur.ETag
				*l = next
				return nil
			}
			if rerr == nil && l.key != nil && attempt < 3 {
				switch {
				case cur != nil && cur.Forged:
					l.warnForged(loc, cur.ETag)
					etag = cur.ETag
					continue
				case cur == nil && etag != "":
					etag = ""
					continue
				}
			}
			return fmt.Errorf("%s: %w", loc, ErrLeaseLost)
		}
		if err != nil {
			return fmt.Errorf("%s: write the lease: %w", loc, err)
		}
		next.ETag = aws.ToString(out.ETag)
		*l = next
		return nil
	}
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
