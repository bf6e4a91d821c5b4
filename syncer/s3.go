package syncer

import (
	"bytes"
	"cmp"
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"golang.org/x/sync/errgroup"

	"github.com/computerfs/computerfs/spec"
)

// Conditional says how an S3 target keeps from overwriting a remote change.
type Conditional string

// The modes.
const (
	// Auto probes the server once: headers if it honours If-None-Match
	// on PutObject, HEAD otherwise.
	Auto Conditional = "auto"
	// Headers sends If-Match / If-None-Match with PutObject,
	// CompleteMultipartUpload and DeleteObject: the server refuses a write
	// over another version atomically.
	Headers Conditional = "headers"
	// Head asks for the object's ETag (HEAD) before each write and writes
	// only if it is the expected one. A change that lands between the HEAD
	// and the write is not caught: for servers without conditional writes.
	Head Conditional = "head"
)

// S3Target writes a source's changes to a prefix of a bucket.
type S3Target struct {
	Client *s3.Client
	Bucket string
	Mode   Conditional // "" is Auto
	// PartSize is the size of multipart upload parts; files larger than
	// it are uploaded in parts (default 16 MiB).
	PartSize int64
	// Parallel is how many objects (and parts of one object) move at
	// once (default 16 and 4).
	Parallel, PartParallel int
	// MaxFileSize is the largest file uploaded (0:
	// spec.DefaultS3MaxFileSize); a larger one is a conflict, and nothing
	// of it is read or sent.
	MaxFileSize int64

	modeMu sync.Mutex
	mode   Conditional
}

var _ Target = (*S3Target)(nil)

// DefaultPartSize is the multipart threshold and part size.
const DefaultPartSize = 16 << 20

// smallObject is the size up to which a put reads the file into memory.
const smallObject = 1 << 20

var partBufs = sync.Pool{New: func() any { return new([]byte) }}

func (t *S3Target) partSize() int64 {
	if t.PartSize > 0 {
		return t.PartSize
	}
	return DefaultPartSize
}

// ConditionalMode returns the mode in use, probing the server first if the
// mode is Auto.
func (t *S3Target) ConditionalMode(ctx context.Context) (Conditional, error) {
	t.modeMu.Lock()
	defer t.modeMu.Unlock()
	if t.mode != "" {
		return t.mode, nil
	}
	switch t.Mode {
	case Headers, Head:
		t.mode = t.Mode
		return t.mode, nil
	}
	m, err := t.detect(ctx)
	if err != nil {
		return "", err // probed again next time
	}
	t.mode = m
	return m, nil
}

// detect puts a probe object twice with If-None-Match: * and deletes it:
// a server that lets the second put through ignores the header.
func (t *S3Target) detect(ctx context.Context) (Conditional, error) {
	var rnd [8]byte
	rand.Read(rnd[:])
	key := ".computerfs-probe-" + hex.EncodeToString(rnd[:])
	put := func() error {
		_, err := t.Client.PutObject(ctx, &s3.PutObjectInput{Bucket: &t.Bucket, Key: &key,
			Body: bytes.NewReader(nil), IfNoneMatch: aws.String("*")})
		return err
	}
	if err := put(); err != nil {
		if isCode(err, "NotImplemented") {
			return Head, nil
		}
		return "", fmt.Errorf("probe s3://%s/%s: %w", t.Bucket, key, err)
	}
	defer t.Client.DeleteObject(context.WithoutCancel(ctx), &s3.DeleteObjectInput{Bucket: &t.Bucket, Key: &key})
	err := put()
	switch {
	case err == nil:
		return Head, nil
	case isPrecondition(err):
		return Headers, nil
	case isCode(err, "NotImplemented"):
		return Head, nil
	}
	return "", fmt.Errorf("probe s3://%s/%s: %w", t.Bucket, key, err)
}

// ModeName says how writes are made conditional ("auto" until the first
// sync has probed the server).
func (t *S3Target) ModeName() string {
	t.modeMu.Lock()
	defer t.modeMu.Unlock()
	if t.mode != "" {
		return string(t.mode)
	}
	return string(cmp.Or(t.Mode, Auto))
}

// Apply puts and deletes objects, t.Parallel at a time.
func (t *S3Target) Apply(ctx context.Context, changes []Change) []Result {
	out := make([]Result, len(changes))
	mode, err := t.ConditionalMode(ctx)
	if err != nil {
		for i := range out {
			out[i].Err = err
		}
		return out
	}
	var g errgroup.Group
	g.SetLimit(cmp.Or(t.Parallel, 16))
	for i := range changes {
		g.Go(func() error {
			out[i] = t.apply(ctx, mode, &changes[i])
			return nil
		})
	}
	g.Wait()
	return out
}

func (t *S3Target) apply(ctx context.Context, mode Conditional, c *Change) Result {
	if c.Delete {
		return t.delete(ctx, mode, c)
	}
	if max := cmp.Or(t.MaxFileSize, spec.DefaultS3MaxFileSize); c.Size > max {
		return Result{Conflict: fmt.Sprintf("%d bytes, over s3.max_file_size (%d bytes): not uploaded", c.Size, max), Remote: c.Expect}
	}
	if c.Expect != "" && c.Size <= smallObject {
		// A small file whose content is what the remote had (its mode or
		// times changed, say) needs no upload.
		mine, err := t.localETag(c)
		if err != nil {
			return Result{Err: t.wrap("read", c, err)}
		}
		if mine == c.Expect {
			return Result{Version: c.Expect, Same: true}
		}
	}
	if mode == Head || c.Size > t.partSize() {
		// A multipart upload asks first even with conditional headers
		// (which still guard its completion): a replay after a crash
		// then finds its object there without sending the parts again.
		cur, err := t.head(ctx, c.Key)
		if err != nil {
			return Result{Err: err}
		}
		if cur != c.Expect {
			return t.mismatch(ctx, c, cur)
		}
		if mode == Head {
			v, err := t.put(ctx, c, false)
			return Result{Version: v, Err: err}
		}
	}
	v, err := t.put(ctx, c, true)
	if isPrecondition(err) || c.Expect != "" && isCode(err, "NoSuchKey") {
		cur, err := t.head(ctx, c.Key)
		if err != nil {
			return Result{Err: err}
		}
		return t.mismatch(ctx, c, cur)
	}
	return Result{Version: v, Err: err}
}

// mismatch handles a remote that holds cur rather than the expected
// version: if cur is what the local content would be (a put that reached
// the remote before a crash), the put is done; otherwise it is a conflict.
func (t *S3Target) mismatch(ctx context.Context, c *Change, cur string) Result {
	if cur != "" {
		mine, err := t.localETag(c)
		if err != nil {
			return Result{Err: err}
		}
		if mine == cur {
			return Result{Version: cur, Same: true}
		}
	}
	why := "changed at the remote since the workspace took it"
	switch {
	case c.Expect == "":
		why = "made here and exists at the remote"
	case cur == "":
		why = "changed here and deleted at the remote"
	}
	return Result{Conflict: why, Remote: cur}
}

func (t *S3Target) delete(ctx context.Context, mode Conditional, c *Change) Result {
	in := &s3.DeleteObjectInput{Bucket: &t.Bucket, Key: &c.Key}
	if mode == Head || c.Expect == "" {
		cur, err := t.head(ctx, c.Key)
		if err != nil {
			return Result{Err: err}
		}
		if cur == "" {
			return Result{}
		}
		if cur != c.Expect {
			return Result{Conflict: "deleted here and changed at the remote", Remote: cur}
		}
	} else {
		in.IfMatch = aws.String(quote(c.Expect))
	}
	_, err := t.Client.DeleteObject(ctx, in)
	switch {
	case err == nil || isCode(err, "NoSuchKey"):
		return Result{}
	case isPrecondition(err):
		cur, err := t.head(ctx, c.Key)
		if err != nil {
			return Result{Err: err}
		}
		if cur == "" {
			return Result{}
		}
		return Result{Conflict: "deleted here and changed at the remote", Remote: cur}
	}
	return Result{Err: fmt.Errorf("delete s3://%s/%s: %w", t.Bucket, c.Key, err)}
}

// head returns the object's ETag, "" if there is no object.
func (t *S3Target) head(ctx context.Context, key string) (string, error) {
	out, err := t.Client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &t.Bucket, Key: &key})
	if err != nil {
		var nf *types.NotFound
		if errors.As(err, &nf) || isCode(err, "NoSuchKey") || isCode(err, "NotFound") {
			return "", nil
		}
		return "", fmt.Errorf("head s3://%s/%s: %w", t.Bucket, key, err)
	}
	return unquote(aws.ToString(out.ETag)), nil
}

// put uploads the change's content, in one request or in parts, with the
// change's condition if cond.
func (t *S3Target) put(ctx context.Context, c *Change, cond bool) (string, error) {
	var ifMatch, ifNone *string
	if cond {
		if c.Expect != "" {
			ifMatch = aws.String(quote(c.Expect))
		} else {
			ifNone = aws.String("*")
		}
	}
	if c.Size > t.partSize() {
		return t.putParts(ctx, c, ifMatch, ifNone)
	}
	var body io.ReadSeeker = newSection(c.Data, 0, c.Size)
	if c.Size <= smallObject {
		// Read once: the SDK reads a body twice (hash, then send).
		b := make([]byte, c.Size)
		if _, err := c.Data.ReadAt(b, 0); err != nil && !(err == io.EOF && c.Size == 0) {
			return "", t.wrap("read", c, err)
		}
		body = bytes.NewReader(b)
	}
	out, err := t.Client.PutObject(ctx, &s3.PutObjectInput{Bucket: &t.Bucket, Key: &c.Key,
		Body: body, ContentLength: aws.Int64(c.Size),
		IfMatch: ifMatch, IfNoneMatch: ifNone})
	if err != nil {
		return "", t.wrap("put", c, err)
	}
	return unquote(aws.ToString(out.ETag)), nil
}

func (t *S3Target) wrap(op string, c *Change, err error) error {
	if errors.Is(err, ErrChanged) {
		return ErrChanged
	}
	return fmt.Errorf("%s s3://%s/%s: %w", op, t.Bucket, c.Key, err)
}

func (t *S3Target) putParts(ctx context.Context, c *Change, ifMatch, ifNone *string) (string, error) {
	up, err := t.Client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &t.Bucket, Key: &c.Key})
	if err != nil {
		return "", t.wrap("start multipart upload of", c, err)
	}
	done := false
	defer func() {
		if !done {
			t.Client.AbortMultipartUpload(context.WithoutCancel(ctx), &s3.AbortMultipartUploadInput{
				Bucket: &t.Bucket, Key: &c.Key, UploadId: up.UploadId})
		}
	}()
	ps := t.partSize()
	n := int((c.Size + ps - 1) / ps)
	parts := make([]types.CompletedPart, n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cmp.Or(t.PartParallel, 4))
	for i := range n {
		g.Go(func() error {
			off := int64(i) * ps
			size := min(ps, c.Size-off)
			num := int32(i + 1)
			// A part is read from the store once into memory (the SDK
			// reads a body twice: hash, then send): PartParallel parts
			// of PartSize at most.
			buf := partBufs.Get().(*[]byte)
			defer partBufs.Put(buf)
			if int64(cap(*buf)) < size {
				*buf = make([]byte, size)
			}
			b := (*buf)[:size]
			if _, err := c.Data.ReadAt(b, off); err != nil {
				return err
			}
			out, err := t.Client.UploadPart(gctx, &s3.UploadPartInput{Bucket: &t.Bucket, Key: &c.Key,
				UploadId: up.UploadId, PartNumber: &num, ContentLength: &size,
				Body: bytes.NewReader(b)})
			if err != nil {
				return err
			}
			parts[i] = types.CompletedPart{ETag: out.ETag, PartNumber: &num}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return "", t.wrap("upload a part of", c, err)
	}
	out, err := t.Client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: &t.Bucket, Key: &c.Key,
		UploadId: up.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
		IfMatch: ifMatch, IfNoneMatch: ifNone})
	if err != nil {
		return "", t.wrap("complete the multipart upload of", c, err)
	}
	done = true
	return unquote(aws.ToString(out.ETag)), nil
}

// localETag is the ETag the remote gives the change's content when this
// target uploads it: the MD5 of the content, or for a multipart upload the
// MD5 of the parts' MD5s and "-" the number of parts.
func (t *S3Target) localETag(c *Change) (string, error) {
	ps := t.partSize()
	var sums []byte
	for off := int64(0); off < c.Size || off == 0; off += ps {
		h := md5.New()
		if _, err := io.Copy(h, newSection(c.Data, off, min(ps, c.Size-off))); err != nil {
			return "", err
		}
		sums = h.Sum(sums)
		if c.Size <= ps {
			return hex.EncodeToString(sums), nil
		}
	}
	all := md5.Sum(sums)
	return fmt.Sprintf("%s-%d", hex.EncodeToString(all[:]), len(sums)/md5.Size), nil
}

func quote(etag string) string   { return `"` + etag + `"` }
func unquote(etag string) string { return strings.Trim(etag, `"`) }

func isCode(err error, code string) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == code
}

// isPrecondition tells a failed condition (412, or 409 for a conflicting
// conditional request in flight).
func isPrecondition(err error) bool {
	if isCode(err, "PreconditionFailed") || isCode(err, "ConditionalRequestConflict") {
		return true
	}
	var re interface{ HTTPStatusCode() int }
	return errors.As(err, &re) && (re.HTTPStatusCode() == http.StatusPreconditionFailed)
}

// section reads [off, off+size) of an io.ReaderAt as an io.ReadSeeker,
// in reads of up to 1 MiB whatever the caller's buffer: the SDK reads
// bodies in small pieces, and each read of the store costs an iterator.
type section struct {
	ra        io.ReaderAt
	off, size int64
	pos       int64
	buf       []byte
	bufAt     int64 // position of buf[0]
}

const sectionBuf = 1 << 20

func newSection(ra io.ReaderAt, off, size int64) *section {
	return &section{ra: ra, off: off, size: size}
}

func (s *section) Read(p []byte) (int, error) {
	if s.pos >= s.size {
		return 0, io.EOF
	}
	if s.pos < s.bufAt || s.pos >= s.bufAt+int64(len(s.buf)) {
		if s.buf == nil {
			s.buf = make([]byte, min(sectionBuf, s.size))
		}
		n := int(min(int64(cap(s.buf)), s.size-s.pos))
		m, err := s.ra.ReadAt(s.buf[:n], s.off+s.pos)
		if m < n {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
		s.buf, s.bufAt = s.buf[:n], s.pos
	}
	n := copy(p, s.buf[s.pos-s.bufAt:])
	s.pos += int64(n)
	return n, nil
}

func (s *section) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += s.pos
	case io.SeekEnd:
		offset += s.size
	default:
		return 0, errors.New("seek: bad whence")
	}
	if offset < 0 {
		return 0, errors.New("seek: negative position")
	}
	s.pos = offset
	return offset, nil
}
