// Package hibernate writes a closed computerfs store to S3 as an image and
// brings it back on any host, and keeps a lease in S3 that says which host
// holds the workspace.
//
// An image under s3://BUCKET/PREFIX is
//
//	PREFIX/objects/SHA256   the store's files in chunks of ChunkSize, by content
//	PREFIX/manifest.json    the store's files: path, size, mode, chunks (written last)
//	PREFIX/lease            who holds the workspace, until when (conditional writes)
//
// An image is complete if and only if its manifest exists and every object
// the manifest names is there with the content its name says. Objects
// are immutable and named by their content, so a second hibernate of a
// store uploads only the chunks it does not find (the tables Pebble wrote
// since, the blobs that changed), and a hibernate that stopped halfway is
// finished by the next one. Download verifies every byte against the
// manifest and builds the store in a temporary directory that is renamed
// into place only when it is complete.
package hibernate

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/computerfs/computerfs/sources"
	"github.com/computerfs/computerfs/spec"
)

// Location is where an image lives, and how to reach it.
type Location struct {
	Bucket string
	Prefix string // without leading or trailing slash; may be empty
	// Endpoint is an S3-compatible server's URL ("": AWS).
	Endpoint string
	Region   string // "": the SDK's environment, else us-east-1
	// PathStyle addresses buckets in the path; it is on whatever this
	// says for an endpoint whose host is an IP address or localhost.
	PathStyle bool
}

// ParseURL parses s3://BUCKET[/PREFIX].
func ParseURL(s string) (Location, error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "s3" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return Location{}, fmt.Errorf("%q: want s3://BUCKET/PREFIX", s)
	}
	p := strings.Trim(u.Path, "/")
	if p != "" {
		for _, part := range strings.Split(p, "/") {
			if part == "" || part == "." || part == ".." {
				return Location{}, fmt.Errorf("%q: the prefix must be a clean path (no . or .. or empty parts)", s)
			}
		}
	}
	return Location{Bucket: u.Host, Prefix: p}, nil
}

// String returns the location as s3://BUCKET/PREFIX.
func (l Location) String() string {
	if l.Prefix == "" {
		return "s3://" + l.Bucket
	}
	return "s3://" + l.Bucket + "/" + l.Prefix
}

// key returns the key of name under the prefix.
func (l Location) key(name string) string {
	if l.Prefix == "" {
		return name
	}
	return l.Prefix + "/" + name
}

// pathStyle tells whether requests address the bucket in the path.
func (l Location) pathStyle() bool {
	if l.PathStyle || l.Endpoint == "" {
		return l.PathStyle
	}
	u, err := url.Parse(l.Endpoint)
	if err != nil {
		return false
	}
	h := u.Hostname()
	return h == "localhost" || net.ParseIP(h) != nil
}

// NewClient returns an S3 client for the location: credentials and
// region from the SDK's environment (AWS_* variables, ~/.aws), as for the
// spec's S3 sources. hc, if not nil, carries the requests.
func NewClient(ctx context.Context, l Location, hc *http.Client) (*s3.Client, error) {
	return sources.NewS3Client(ctx, &spec.S3{Bucket: l.Bucket, Endpoint: l.Endpoint, Region: l.Region, PathStyle: l.pathStyle()}, hc)
}
