package s3test_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/computerfs/computerfs/internal/faultnet"
	"github.com/computerfs/computerfs/internal/s3test"
)

// faultyClient returns a client of s whose requests go through ft.
func faultyClient(t *testing.T, s *s3test.Server, ft *faultnet.Transport) *s3.Client {
	return s.Client(t, func(o *s3.Options) { o.HTTPClient = &http.Client{Transport: ft} })
}

func TestFaultsRetriedBySDK(t *testing.T) {
	s := s3test.Start(t)
	b := s.NewBucket(t)
	ft := faultnet.New(nil)
	r := ft.Add(faultnet.Match("PUT", "/"+b+"/k").Status(503).Times(2))
	c := faultyClient(t, s, ft)

	// The SDK's standard retryer makes 3 attempts: the third gets through.
	if _, err := c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: &b, Key: aws.String("k"), Body: strings.NewReader("v")}); err != nil {
		t.Fatalf("put after two 503s: %v", err)
	}
	if r.Requests() != 3 || r.Injected() != 2 {
		t.Errorf("Requests, Injected = %d, %d; want 3, 2", r.Requests(), r.Injected())
	}
	if got := s.Get(t, b, "k"); string(got) != "v" {
		t.Errorf("got %q", got)
	}
}

func TestTruncatedGet(t *testing.T) {
	s := s3test.Start(t)
	b := s.NewBucket(t)
	s.Put(t, b, "k", []byte(strings.Repeat("x", 10000)))
	ft := faultnet.New(nil)
	ft.Add(faultnet.Match("GET", "/"+b+"/k").TruncateAfter(100))
	out, err := faultyClient(t, s, ft).GetObject(ctx(t), &s3.GetObjectInput{Bucket: &b, Key: aws.String("k")})
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(out.Body)
	out.Body.Close()
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("reading a truncated body: %d bytes, err %v; want io.ErrUnexpectedEOF", len(got), err)
	}
	if len(got) > 100 {
		t.Errorf("read %d bytes past the cut", len(got))
	}
}

// TestConditionalPutLostResponse shows what a writer sees when the
// connection drops after the server applied an If-None-Match: * put: the
// SDK retries, and the retry is refused because the object now exists.
func TestConditionalPutLostResponse(t *testing.T) {
	s := s3test.Start(t)
	b := s.NewBucket(t)
	ft := faultnet.New(nil)
	r := ft.Add(faultnet.Match("PUT", "/"+b+"/k").Fail(syscall.ECONNRESET).AfterSend().Times(1))
	_, err := faultyClient(t, s, ft).PutObject(ctx(t), &s3.PutObjectInput{
		Bucket: &b, Key: aws.String("k"), IfNoneMatch: aws.String("*"), Body: strings.NewReader("mine"),
	})
	t.Logf("requests %d; error: %v", r.Requests(), err)
	if r.Requests() != 2 {
		t.Fatalf("%d attempts; want the SDK to retry the reset connection once", r.Requests())
	}
	apiError(t, err, "PreconditionFailed", http.StatusPreconditionFailed)
	if got := s.Get(t, b, "k"); string(got) != "mine" {
		t.Errorf("object holds %q; the first attempt should have stored it", got)
	}
}
