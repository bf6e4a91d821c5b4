package s3test_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/computerfs/computerfs/internal/s3test"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// apiError checks that err is an S3 error with the given code and HTTP
// status.
func apiError(t *testing.T, err error, code string, status int) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s (%d)", code, status)
	}
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("error %v is not an S3 API error, want %s", err, code)
	}
	if ae.ErrorCode() != code {
		t.Errorf("error code %q, want %q (%v)", ae.ErrorCode(), code, err)
	}
	var re *smithyhttp.ResponseError
	if !errors.As(err, &re) {
		t.Fatalf("error %v carries no HTTP response", err)
	}
	if re.HTTPStatusCode() != status {
		t.Errorf("HTTP status %d, want %d (%v)", re.HTTPStatusCode(), status, err)
	}
}

func TestStartupTime(t *testing.T) {
	s3test.Binary(t) // building the binary is not part of the startup
	const n = 3
	var total time.Duration
	for range n {
		start := time.Now()
		s := s3test.Start(t)
		total += time.Since(start)
		if !strings.HasPrefix(s.Endpoint, "http://127.0.0.1:") {
			t.Errorf("Endpoint %q", s.Endpoint)
		}
	}
	avg := total / n
	t.Logf("versitygw starts in %v on average", avg)
	if avg > 5*time.Second {
		t.Errorf("versitygw takes %v to start", avg)
	}
}

func TestPutGetListPaginated(t *testing.T) {
	s := s3test.Start(t)
	c := s.Client(t)
	s.CreateBucket(t, "many")

	const n = 1500
	keys := make([]string, n)
	for i := range keys {
		// Nested keys: the posix backend turns them into directories.
		keys[i] = fmt.Sprintf("dir%02d/obj-%05d", i%7, i)
	}
	body := func(k string) []byte { return []byte("content of " + k) }

	var wg sync.WaitGroup
	work := make(chan string)
	errs := make(chan error, n)
	for range 16 {
		wg.Go(func() {
			for k := range work {
				_, err := c.PutObject(ctx(t), &s3.PutObjectInput{
					Bucket: aws.String("many"), Key: aws.String(k), Body: bytes.NewReader(body(k)),
				})
				if err != nil {
					errs <- fmt.Errorf("put %s: %w", k, err)
				}
			}
		})
	}
	for _, k := range keys {
		work <- k
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	// The default page size (1000) and a small one.
	for _, max := range []int32{0, 97} {
		in := &s3.ListObjectsV2Input{Bucket: aws.String("many")}
		if max > 0 {
			in.MaxKeys = aws.Int32(max)
		}
		var got []string
		pages := 0
		p := s3.NewListObjectsV2Paginator(c, in)
		for p.HasMorePages() {
			out, err := p.NextPage(ctx(t))
			if err != nil {
				t.Fatal(err)
			}
			pages++
			for _, o := range out.Contents {
				got = append(got, *o.Key)
				if *o.Size != int64(len(body(*o.Key))) {
					t.Errorf("%s: size %d", *o.Key, *o.Size)
				}
			}
		}
		want := slices.Clone(keys)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("MaxKeys %d: listed %d keys, want %d (sorted)", max, len(got), len(want))
		}
		perPage := 1000
		if max > 0 {
			perPage = int(max)
		}
		if wantPages := (n + perPage - 1) / perPage; pages != wantPages {
			t.Errorf("MaxKeys %d: %d pages, want %d", max, pages, wantPages)
		}
	}

	// Delimiter listing sees the 7 directories.
	out, err := c.ListObjectsV2(ctx(t), &s3.ListObjectsV2Input{Bucket: aws.String("many"), Delimiter: aws.String("/")})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.CommonPrefixes) != 7 || len(out.Contents) != 0 {
		t.Errorf("delimiter listing: %d prefixes, %d objects; want 7, 0", len(out.CommonPrefixes), len(out.Contents))
	}

	for _, i := range []int{0, 1, 777, n - 1} {
		if got := s.Get(t, "many", keys[i]); !bytes.Equal(got, body(keys[i])) {
			t.Errorf("get %s = %q", keys[i], got)
		}
	}
}

func TestPutHelperAndETag(t *testing.T) {
	s := s3test.Start(t)
	b := s.NewBucket(t)
	data := []byte("hello, world\n")
	s.Put(t, b, "a/b.txt", data)
	out, err := s.Client(t).HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: &b, Key: aws.String("a/b.txt")})
	if err != nil {
		t.Fatal(err)
	}
	sum := md5.Sum(data)
	if want := `"` + hex.EncodeToString(sum[:]) + `"`; aws.ToString(out.ETag) != want {
		t.Errorf("ETag %s, want the MD5 %s", aws.ToString(out.ETag), want)
	}
	// The posix backend stores the object as a plain file under Root.
	onDisk, err := os.ReadFile(filepath.Join(s.Root, b, "a", "b.txt"))
	if err != nil || !bytes.Equal(onDisk, data) {
		t.Errorf("file under Root: %q, %v", onDisk, err)
	}
}

func TestConditionalPut(t *testing.T) {
	s := s3test.Start(t)
	c := s.Client(t)
	b := s.NewBucket(t)
	put := func(key, data string, f func(*s3.PutObjectInput)) (*s3.PutObjectOutput, error) {
		in := &s3.PutObjectInput{Bucket: &b, Key: aws.String(key), Body: strings.NewReader(data)}
		f(in)
		return c.PutObject(ctx(t), in)
	}

	// If-None-Match: * creates a missing object once.
	first, err := put("k", "v1", func(in *s3.PutObjectInput) { in.IfNoneMatch = aws.String("*") })
	if err != nil {
		t.Fatalf("If-None-Match * on a new key: %v", err)
	}
	_, err = put("k", "v2", func(in *s3.PutObjectInput) { in.IfNoneMatch = aws.String("*") })
	apiError(t, err, "PreconditionFailed", http.StatusPreconditionFailed)
	if got := s.Get(t, b, "k"); string(got) != "v1" {
		t.Fatalf("after refused If-None-Match: %q, want v1", got)
	}

	// If-Match replaces only the version the writer saw.
	second, err := put("k", "v2", func(in *s3.PutObjectInput) { in.IfMatch = first.ETag })
	if err != nil {
		t.Fatalf("If-Match with the current ETag: %v", err)
	}
	if aws.ToString(second.ETag) == aws.ToString(first.ETag) {
		t.Fatalf("new content kept the ETag %s", aws.ToString(first.ETag))
	}
	_, err = put("k", "v3", func(in *s3.PutObjectInput) { in.IfMatch = first.ETag })
	apiError(t, err, "PreconditionFailed", http.StatusPreconditionFailed)
	if got := s.Get(t, b, "k"); string(got) != "v2" {
		t.Fatalf("after refused If-Match: %q, want v2", got)
	}

	// If-Match on a missing object: AWS answers 404 NoSuchKey.
	_, err = put("missing", "x", func(in *s3.PutObjectInput) { in.IfMatch = first.ETag })
	if err == nil {
		t.Fatal("If-Match on a missing key succeeded")
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		t.Logf("If-Match on a missing key: %s", ae.ErrorCode())
	}
	if _, err := c.HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: &b, Key: aws.String("missing")}); err == nil {
		t.Error("a refused If-Match put created the object")
	}
}

func TestConditionalPutRace(t *testing.T) {
	// Of many writers racing with If-None-Match: *, exactly one wins.
	s := s3test.Start(t)
	c := s.Client(t)
	b := s.NewBucket(t)
	const n = 12
	var wg sync.WaitGroup
	results := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, results[i] = c.PutObject(ctx(t), &s3.PutObjectInput{
				Bucket: &b, Key: aws.String("lock"), IfNoneMatch: aws.String("*"),
				Body: strings.NewReader(fmt.Sprintf("writer %d", i)),
			})
		})
	}
	wg.Wait()
	winners := 0
	var winner string
	for i, err := range results {
		if err == nil {
			winners++
			winner = fmt.Sprintf("writer %d", i)
			continue
		}
		var ae smithy.APIError
		if !errors.As(err, &ae) || (ae.ErrorCode() != "PreconditionFailed" && ae.ErrorCode() != "ConditionalRequestConflict") {
			t.Errorf("writer %d: %v", i, err)
		}
	}
	if winners != 1 {
		t.Fatalf("%d writers won, want 1", winners)
	}
	if got := s.Get(t, b, "lock"); string(got) != winner {
		t.Errorf("object holds %q, want %q", got, winner)
	}
}

func TestMultipartUpload(t *testing.T) {
	s := s3test.Start(t)
	c := s.Client(t)
	b := s.NewBucket(t)
	key := aws.String("big/object.bin")

	const partSize = 5 << 20 // the minimum for all but the last part
	sizes := []int{partSize, partSize, 123_457}
	var whole []byte
	parts := make([][]byte, len(sizes))
	for i, n := range sizes {
		parts[i] = bytes.Repeat([]byte{byte('a' + i)}, n)
		parts[i][0] = byte(i) // not all alike
		whole = append(whole, parts[i]...)
	}

	mp, err := c.CreateMultipartUpload(ctx(t), &s3.CreateMultipartUploadInput{Bucket: &b, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	var done []types.CompletedPart
	// Upload the parts out of order.
	for _, i := range []int{2, 0, 1} {
		out, err := c.UploadPart(ctx(t), &s3.UploadPartInput{
			Bucket: &b, Key: key, UploadId: mp.UploadId,
			PartNumber: aws.Int32(int32(i + 1)), Body: bytes.NewReader(parts[i]),
		})
		if err != nil {
			t.Fatalf("part %d: %v", i+1, err)
		}
		done = append(done, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(int32(i + 1))})
	}
	slices.SortFunc(done, func(a, b types.CompletedPart) int { return int(*a.PartNumber - *b.PartNumber) })

	// Before completion the object does not exist but the upload is listed.
	if _, err := c.HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: &b, Key: key}); err == nil {
		t.Error("object visible before CompleteMultipartUpload")
	}
	ups, err := c.ListMultipartUploads(ctx(t), &s3.ListMultipartUploadsInput{Bucket: &b})
	if err != nil {
		t.Fatal(err)
	}
	if len(ups.Uploads) != 1 || aws.ToString(ups.Uploads[0].UploadId) != aws.ToString(mp.UploadId) {
		t.Errorf("ListMultipartUploads: %d uploads", len(ups.Uploads))
	}

	fin, err := c.CompleteMultipartUpload(ctx(t), &s3.CompleteMultipartUploadInput{
		Bucket: &b, Key: key, UploadId: mp.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: done},
	})
	if err != nil {
		t.Fatal(err)
	}
	if etag := aws.ToString(fin.ETag); !strings.HasSuffix(strings.Trim(etag, `"`), "-3") {
		t.Errorf("multipart ETag %s, want a -3 suffix", etag)
	}
	if got := s.Get(t, b, *key); !bytes.Equal(got, whole) {
		t.Errorf("read back %d bytes, want %d identical ones", len(got), len(whole))
	}

	// A ranged read across the boundary of parts 1 and 2.
	out, err := c.GetObject(ctx(t), &s3.GetObjectInput{Bucket: &b, Key: key, Range: aws.String(fmt.Sprintf("bytes=%d-%d", partSize-3, partSize+2))})
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(out.Body)
	out.Body.Close()
	if err != nil || !bytes.Equal(got, whole[partSize-3:partSize+3]) {
		t.Errorf("ranged read: %v %v", got, err)
	}

	// An aborted upload leaves no object.
	mp2, err := c.CreateMultipartUpload(ctx(t), &s3.CreateMultipartUploadInput{Bucket: &b, Key: aws.String("aborted")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AbortMultipartUpload(ctx(t), &s3.AbortMultipartUploadInput{Bucket: &b, Key: aws.String("aborted"), UploadId: mp2.UploadId}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: &b, Key: aws.String("aborted")}); err == nil {
		t.Error("aborted upload left an object")
	}
}

func TestNoSuchBucket(t *testing.T) {
	s := s3test.Start(t)
	c := s.Client(t)
	_, err := c.ListObjectsV2(ctx(t), &s3.ListObjectsV2Input{Bucket: aws.String("nope")})
	apiError(t, err, "NoSuchBucket", http.StatusNotFound)
	// ListObjectsV2 models the error (GetObject and PutObject do not).
	var nsb *types.NoSuchBucket
	if !errors.As(err, &nsb) {
		t.Errorf("ListObjectsV2 error is not a *types.NoSuchBucket: %v", err)
	}
	_, err = c.GetObject(ctx(t), &s3.GetObjectInput{Bucket: aws.String("nope"), Key: aws.String("k")})
	apiError(t, err, "NoSuchBucket", http.StatusNotFound)
	_, err = c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String("nope"), Key: aws.String("k"), Body: strings.NewReader("x")})
	apiError(t, err, "NoSuchBucket", http.StatusNotFound)

	// A missing key in an existing bucket is a different error.
	b := s.NewBucket(t)
	_, err = c.GetObject(ctx(t), &s3.GetObjectInput{Bucket: &b, Key: aws.String("k")})
	apiError(t, err, "NoSuchKey", http.StatusNotFound)
}

func TestWrongCredentialsRefused(t *testing.T) {
	s := s3test.Start(t)
	b := s.NewBucket(t)
	s.Put(t, b, "secret", []byte("x"))

	for _, tc := range []struct {
		name, access, secret, code string
		status                     int
	}{
		{"wrong secret", s.AccessKey, s.SecretKey + "x", "SignatureDoesNotMatch", http.StatusForbidden},
		// AWS answers 403 InvalidAccessKeyId; versitygw v1.8.0 without an
		// IAM service answers 404 XAdminUserNotFound.
		{"unknown access key", "someone-else", s.SecretKey, "XAdminUserNotFound", http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := s.Client(t, func(o *s3.Options) {
				o.Credentials = credentials.NewStaticCredentialsProvider(tc.access, tc.secret, "")
			})
			_, err := c.GetObject(ctx(t), &s3.GetObjectInput{Bucket: &b, Key: aws.String("secret")})
			apiError(t, err, tc.code, tc.status)
			_, err = c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: &b, Key: aws.String("new"), Body: strings.NewReader("x")})
			apiError(t, err, tc.code, tc.status)
			_, err = c.ListBuckets(ctx(t), &s3.ListBucketsInput{})
			apiError(t, err, tc.code, tc.status)
		})
	}
	// Anonymous requests are refused too.
	resp, err := http.Get(s.Endpoint + "/" + b + "/secret")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("anonymous GET: %d, want 403", resp.StatusCode)
	}
	if _, err := s.Client(t).HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: &b, Key: aws.String("new")}); err == nil {
		t.Error("a refused put created the object")
	}
}

func TestEnvWorksWithDefaultConfig(t *testing.T) {
	s := s3test.Start(t)
	b := s.NewBucket(t)
	s.Put(t, b, "k", []byte("from env"))

	env := map[string]string{}
	for _, kv := range s.Env() {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			t.Fatalf("bad entry %q", kv)
		}
		env[k] = v
	}
	if env["AWS_ACCESS_KEY_ID"] != s.AccessKey || env["AWS_SECRET_ACCESS_KEY"] != s.SecretKey || env["AWS_REGION"] != "us-east-1" {
		t.Fatalf("Env() = %v", s.Env())
	}

	// Other credentials in the environment and in shared files lose to SetEnv.
	t.Setenv("AWS_SESSION_TOKEN", "stale")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	s.SetEnv(t)
	cfg, err := config.LoadDefaultConfig(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	c := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(s.Endpoint)
		o.UsePathStyle = true
	})
	out, err := c.GetObject(ctx(t), &s3.GetObjectInput{Bucket: &b, Key: aws.String("k")})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(out.Body)
	out.Body.Close()
	if string(got) != "from env" {
		t.Errorf("got %q", got)
	}
}

func TestServersAreIsolated(t *testing.T) {
	var servers [4]*s3test.Server
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range servers {
		wg.Go(func() {
			s := s3test.Start(t)
			mu.Lock()
			servers[i] = s
			mu.Unlock()
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for i, s := range servers {
		if seen[s.Endpoint] {
			t.Fatalf("two servers on %s", s.Endpoint)
		}
		seen[s.Endpoint] = true
		s.CreateBucket(t, fmt.Sprintf("only-on-%d", i))
	}
	for i, s := range servers {
		out, err := s.Client(t).ListBuckets(ctx(t), &s3.ListBucketsInput{})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Buckets) != 1 || aws.ToString(out.Buckets[0].Name) != fmt.Sprintf("only-on-%d", i) {
			t.Errorf("server %d lists %d buckets", i, len(out.Buckets))
		}
	}
}

func TestNewBucketNames(t *testing.T) {
	s := s3test.Start(t)
	for _, name := range []string{"Upper_Case and spaces", "slashes/and.dots", strings.Repeat("long", 30)} {
		t.Run(name, func(t *testing.T) {
			b := s.NewBucket(t)
			if len(b) > 63 || len(b) < 3 {
				t.Errorf("bucket name %q has %d characters", b, len(b))
			}
			s.Put(t, b, "k", []byte("x"))
		})
	}
}
