package sources

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/encoding/httpbinding"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// objectGetter fetches objects of one bucket with plain HTTP GETs that it
// signs itself, with the client's credentials, signer settings, endpoint,
// HTTP client and retry policy. A lazy workspace fetches one object per
// file it reads, and the SDK's GetObject costs several times the request
// itself in CPU: two dozen middlewares, an endpoint resolution per call
// (the endpoint of a bucket does not depend on the key, so it is resolved
// once here) and call stacks deep enough that each new FUSE request
// goroutine grows its stack several times.
type objectGetter struct {
	hc          aws.HTTPClient
	creds       aws.CredentialsProvider // nil: anonymous
	signer      *v4.Signer
	retryer     aws.Retryer
	base        url.URL // the bucket's endpoint (with the bucket in the path or the host)
	signingName string
	region      string
}

// emptySHA256 is the SHA-256 of an empty payload, which S3 wants in
// X-Amz-Content-Sha256 for a GET.
const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// newObjectGetter prepares GETs of bucket with client's settings. It
// returns nil where the endpoint needs more than SigV4 (S3 Express,
// multi-region access points): the SDK's GetObject handles those.
func newObjectGetter(ctx context.Context, client *s3.Client, bucket string) *objectGetter {
	o := client.Options()
	if o.EndpointResolverV2 == nil || o.HTTPClient == nil || o.Retryer == nil {
		return nil
	}
	params := s3.EndpointParameters{
		Bucket:                         aws.String(bucket),
		Region:                         aws.String(o.Region),
		UseFIPS:                        aws.Bool(o.EndpointOptions.UseFIPSEndpoint == aws.FIPSEndpointStateEnabled),
		UseDualStack:                   aws.Bool(o.EndpointOptions.UseDualStackEndpoint == aws.DualStackEndpointStateEnabled),
		Endpoint:                       o.BaseEndpoint,
		ForcePathStyle:                 aws.Bool(o.UsePathStyle),
		Accelerate:                     aws.Bool(o.UseAccelerate),
		DisableMultiRegionAccessPoints: aws.Bool(o.DisableMultiRegionAccessPoints),
		UseArnRegion:                   aws.Bool(o.UseARNRegion),
		DisableS3ExpressSessionAuth:    o.DisableS3ExpressSessionAuth,
	}
	ep, err := o.EndpointResolverV2.ResolveEndpoint(ctx, params)
	if err != nil || len(ep.Headers) > 0 {
		return nil
	}
	g := &objectGetter{hc: o.HTTPClient, retryer: o.Retryer, base: ep.URI, signingName: "s3", region: o.Region}
	if schemes, ok := ep.Properties.Get("authSchemes").([]interface{}); ok && len(schemes) > 0 {
		s, _ := schemes[0].(map[string]interface{})
		if name, _ := s["name"].(string); name != "sigv4" {
			return nil
		}
		if n, _ := s["signingName"].(string); n != "" {
			g.signingName = n
		}
		if r, _ := s["signingRegion"].(string); r != "" {
			g.region = r
		}
	}
	if o.Credentials != nil {
		if _, anon := o.Credentials.(aws.AnonymousCredentials); !anon {
			g.creds = o.Credentials
			g.signer = v4.NewSigner(func(so *v4.SignerOptions) { so.DisableURIPathEscaping = true })
		}
	}
	g.base.RawPath = g.base.EscapedPath()
	return g
}

// get fetches key if its ETag is still etag (none: any version), retrying
// what the client's retryer retries.
func (g *objectGetter) get(ctx context.Context, key, etag string) (io.ReadCloser, error) {
	release := g.retryer.GetInitialToken()
	for attempt := 1; ; attempt++ {
		body, err := g.attempt(ctx, key, etag)
		if err == nil {
			release(nil)
			return body, nil
		}
		if ctx.Err() != nil || attempt >= g.retryer.MaxAttempts() || !g.retryer.IsErrorRetryable(err) {
			return nil, err
		}
		delay, derr := g.retryer.RetryDelay(attempt, err)
		if derr != nil {
			return nil, err
		}
		rel, terr := g.retryer.GetRetryToken(ctx, err)
		if terr != nil {
			return nil, err
		}
		release = rel
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return nil, err
		}
	}
}

func (g *objectGetter) attempt(ctx context.Context, key, etag string) (io.ReadCloser, error) {
	u := g.base
	u.Path = strings.TrimSuffix(u.Path, "/") + "/" + key
	u.RawPath = strings.TrimSuffix(u.RawPath, "/") + "/" + httpbinding.EscapePath(key, false)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	// Go's transport would ask for gzip and unzip it: the size must be the
	// object's.
	req.Header.Set("Accept-Encoding", "identity")
	req.Header.Set("X-Amz-Content-Sha256", emptySHA256)
	if etag != "" {
		req.Header.Set("If-Match", `"`+etag+`"`)
	}
	if g.signer != nil {
		creds, err := g.creds.Retrieve(ctx)
		if err != nil {
			return nil, fmt.Errorf("credentials: %w", err)
		}
		if err := g.signer.SignHTTP(ctx, creds, req, emptySHA256, g.signingName, g.region, time.Now().UTC()); err != nil {
			return nil, err
		}
	}
	resp, err := g.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, &smithyhttp.RequestSendError{Err: err}
	}
	if resp.StatusCode == http.StatusOK {
		return resp.Body, nil
	}
	defer resp.Body.Close()
	return nil, responseError(resp)
}

// getError is an S3 error response. It is a smithy.APIError (so callers
// see the same codes as from the SDK) and tells the retryer its status.
type getError struct {
	status        int
	code, message string
}

func (e *getError) Error() string {
	return fmt.Sprintf("https response error StatusCode: %d, api error %s: %s", e.status, e.code, e.message)
}
func (e *getError) ErrorCode() string    { return e.code }
func (e *getError) ErrorMessage() string { return e.message }
func (e *getError) HTTPStatusCode() int  { return e.status }
func (e *getError) ErrorFault() smithy.ErrorFault {
	if e.status >= 500 {
		return smithy.FaultServer
	}
	return smithy.FaultClient
}

var _ smithy.APIError = (*getError)(nil)

// responseError reads an S3 error response: its XML body's code and
// message, or, without one, a code for the status as the SDK would name it.
func responseError(resp *http.Response) error {
	e := &getError{status: resp.StatusCode}
	var body struct {
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err == nil && xml.Unmarshal(b, &body) == nil {
		e.code, e.message = body.Code, body.Message
	}
	if e.code == "" {
		switch resp.StatusCode {
		case http.StatusNotFound:
			e.code = "NotFound"
		case http.StatusPreconditionFailed:
			e.code = "PreconditionFailed"
		case http.StatusForbidden:
			e.code = "Forbidden"
		default:
			e.code = strings.ReplaceAll(http.StatusText(resp.StatusCode), " ", "")
		}
	}
	if e.message == "" {
		e.message = http.StatusText(resp.StatusCode)
	}
	return e
}
