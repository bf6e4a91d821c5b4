package sources

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"golang.org/x/sync/errgroup"

	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/spec"
)

// defaultHTTPClient carries S3 requests unless a caller gives its own: it
// fails fast on an endpoint that cannot be reached and never waits forever
// for a response to start. (The SDK's buildable client, unlike a plain
// http.Client, takes AWS_CA_BUNDLE's certificates.)
func defaultHTTPClient() *awshttp.BuildableClient {
	return awshttp.NewBuildableClient().
		WithDialerOptions(func(d *net.Dialer) { d.Timeout = 5 * time.Second }).
		WithTransportOptions(func(t *http.Transport) {
			t.ResponseHeaderTimeout = 60 * time.Second
			t.MaxIdleConnsPerHost = 64
		})
}

// NewS3Client returns a client for an S3 source: credentials and region
// from the standard AWS chain (the spec's region and profile take
// precedence), the spec's endpoint and addressing style. hc, if not nil,
// carries the requests (tests inject faults with it).
func NewS3Client(ctx context.Context, c *spec.S3, hc *http.Client) (*s3.Client, error) {
	opts := []func(*config.LoadOptions) error{config.WithRetryMaxAttempts(4)}
	if hc == nil {
		opts = append(opts, config.WithHTTPClient(defaultHTTPClient()))
	}
	if c.Region != "" {
		opts = append(opts, config.WithRegion(c.Region))
	}
	if c.Profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(c.Profile))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("s3 configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		if hc != nil {
			o.HTTPClient = hc
		}
		if c.Endpoint != "" {
			o.BaseEndpoint = aws.String(c.Endpoint)
		}
		o.UsePathStyle = c.PathStyle
		// Checksums only where S3 requires them: many S3-compatible
		// servers do not know the newer checksum headers.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	}), nil
}

// explainS3Error turns the SDK's errors for the usual mistakes into
// messages that say what to fix.
func explainS3Error(c *spec.S3, err error) error {
	var ae smithy.APIError
	where := c.Endpoint
	if where == "" {
		where = "AWS"
	}
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "NoSuchBucket":
			return fmt.Errorf("bucket %q does not exist at %s", c.Bucket, where)
		case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "Forbidden", "InvalidToken", "ExpiredToken",
			"XAdminUserNotFound": // versitygw's answer to an unknown access key
			return fmt.Errorf("%s refused the credentials for bucket %q (%s): check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY or the profile", where, c.Bucket, ae.ErrorCode())
		}
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return fmt.Errorf("cannot reach the S3 endpoint %s: %w", where, err)
	}
	return err
}

// s3Object is one listed object.
type s3Object struct {
	key   string
	size  int64
	etag  string
	mtime time.Time
}

// importS3 lists the prefix and records every object as a file with its
// size, ETag and mtime. Content arrives on first read (lazy) or is fetched
// here, in parallel (eager).
func (im *Importer) importS3(ctx context.Context, idx int, src *spec.Source) error {
	c := src.S3
	client, err := NewS3Client(ctx, c, im.HTTPClient)
	if err != nil {
		return err
	}
	if err := im.fs.MkdirAll(src.Path, 0o755); err != nil {
		return err
	}
	rootIno, _, err := im.fs.Resolve(src.Path)
	if err != nil {
		return err
	}
	im.Progress.Begin(src.Path, "list", 0, 0)
	// List in one goroutine while the store takes the previous page.
	pages := make(chan []s3Object, 4)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(pages)
		return listPrefix(gctx, client, c, pages)
	})
	dirs := map[string]uint64{"": rootIno}
	var remote []uint64
	var objects, bytes int64
	manifest := map[string][]byte{}
	g.Go(func() error {
		b := objectBatch{im: im}
		for page := range pages {
			for _, o := range page {
				objects++
				bytes += o.size
				if c.MaxObjects > 0 && objects > c.MaxObjects {
					return fmt.Errorf("prefix %q of bucket %q holds more than max_objects (%d) objects", c.Prefix, c.Bucket, c.MaxObjects)
				}
				if c.MaxBytes > 0 && bytes > int64(c.MaxBytes) {
					return fmt.Errorf("prefix %q of bucket %q holds more than max_bytes (%d bytes)", c.Prefix, c.Bucket, int64(c.MaxBytes))
				}
				if err := im.addObject(idx, c, dirs, o, &b); err != nil {
					return err
				}
				manifest[manifestKey(idx, o.key)] = []byte(o.etag)
				im.Progress.Add(1, o.size)
			}
			if err := b.flush(); err != nil { // the page's last directory
				return err
			}
		}
		remote = b.remote
		return nil
	})
	if err := g.Wait(); err != nil {
		return err
	}
	// What the source held, for refresh to tell local deletions from
	// upstream additions.
	if err := im.Store.UpdateMeta(manifest, nil); err != nil {
		return err
	}
	im.Progress.End()
	im.Log.Info("listed", "source", src.Path, "objects", objects, "bytes", bytes)
	if c.IsLazy() || len(remote) == 0 {
		return nil
	}
	return im.fetchAll(ctx, src.Path, remote, bytes)
}

// manifestKey names the meta value that records the ETag an S3 source's
// object had when the workspace last took it.
func manifestKey(idx int, key string) string { return fmt.Sprintf("s3/%d/%s", idx, key) }

// fetchAll downloads remote files now (an eager source), in parallel.
func (im *Importer) fetchAll(ctx context.Context, name string, inos []uint64, total int64) error {
	im.Store.SetFetcher(NewFetcher(im.Spec, im.HTTPClient).Fetch)
	im.Progress.Begin(name, "download", int64(len(inos)), total)
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(fetchParallelism)
	for _, ino := range inos {
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := im.Store.Fetch(ino); err != nil {
				return err
			}
			a, err := im.Store.GetAttr(ino)
			im.Progress.Add(1, int64(a.Size))
			return err
		})
	}
	return g.Wait()
}

// fetchParallelism is how many objects an eager import downloads at once.
const fetchParallelism = 16

// listParallelism is how many listings of sub-prefixes run at once.
const listParallelism = 8

// listPrefix lists every object under the source's prefix and sends them
// in pages. It walks the key space like a directory tree (delimiter "/"),
// listing sub-prefixes in parallel: a prefix of many "directories" lists
// several times faster than one sequential listing would, and a flat one
// costs the same.
func listPrefix(ctx context.Context, client *s3.Client, c *spec.S3, out chan<- []s3Object) error {
	g, ctx := errgroup.WithContext(ctx)
	sem := make(chan struct{}, listParallelism)
	var list func(prefix string) error
	list = func(prefix string) error {
		sem <- struct{}{}
		defer func() { <-sem }()
		p := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{
			Bucket: aws.String(c.Bucket), Prefix: aws.String(prefix), Delimiter: aws.String("/")})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return fmt.Errorf("list s3://%s/%s: %w", c.Bucket, prefix, explainS3Error(c, err))
			}
			for _, cp := range page.CommonPrefixes {
				sub := aws.ToString(cp.Prefix)
				g.Go(func() error { return list(sub) })
			}
			objs := make([]s3Object, 0, len(page.Contents))
			for _, o := range page.Contents {
				objs = append(objs, s3Object{key: aws.ToString(o.Key), size: aws.ToInt64(o.Size),
					etag: strings.Trim(aws.ToString(o.ETag), `"`), mtime: aws.ToTime(o.LastModified)})
			}
			select {
			case out <- objs:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	g.Go(func() error { return list(c.Prefix) })
	return g.Wait()
}

// addObject records one object as a remote file under the source's
// directory, making the directories its key implies. Keys that cannot be a
// path ("a//b", "../x", a name longer than 255 bytes, a file where a
// directory is needed) are skipped with a warning; "dir/" markers become
// directories.
// addObject adds the file of one listed object to the batch, making its
// directories first.
func (im *Importer) addObject(idx int, c *spec.S3, dirs map[string]uint64, o s3Object, b *objectBatch) error {
	rel, marker, valid := s3Rel(c, o.key)
	if rel == "" {
		return nil // the prefix's own marker
	}
	if !valid {
		im.Log.Warn("skipped an object whose key is not a path", "key", o.key)
		return nil
	}
	dirPath := path.Dir(rel)
	if marker {
		dirPath = rel
	}
	known := dirPath == "."
	if !known {
		_, known = dirs[dirPath]
	}
	if !known {
		// A new directory may take the name of a file in the batch:
		// create those first, as they came first.
		if err := b.flush(); err != nil {
			return err
		}
	}
	dir, err := im.mkdirs(dirs, dirPath)
	if err != nil {
		im.Log.Warn("skipped an object", "key", o.key, "err", err)
		return nil
	}
	if marker {
		return nil
	}
	n := kv.NewInode{Mode: kv.S_IFREG | 0o644, Uid: im.owner.UID, Gid: im.owner.GID, Mtime: o.mtime.UnixNano(),
		Origin: &kv.Origin{Source: uint32(idx), Key: o.key, ID: o.etag}}
	if o.size > 0 {
		n.Remote, n.Size = true, uint64(o.size)
	}
	return b.add(dir, kv.NewEntry{Name: path.Base(rel), Inode: n})
}

// objectBatch gathers the files of consecutive objects in one directory
// (a listing is in key order, so a directory's files mostly come
// together) and creates them in one store batch: a commit per file was
// most of the import's CPU.
type objectBatch struct {
	im      *Importer
	dir     uint64
	entries []kv.NewEntry
	remote  []uint64 // created files whose content stays remote
}

const objectBatchMax = 1000

func (b *objectBatch) add(dir uint64, e kv.NewEntry) error {
	if dir != b.dir || len(b.entries) >= objectBatchMax {
		if err := b.flush(); err != nil {
			return err
		}
		b.dir = dir
	}
	b.entries = append(b.entries, e)
	return nil
}

func (b *objectBatch) flush() error {
	if len(b.entries) == 0 {
		return nil
	}
	attrs, errs, err := b.im.Store.CreateMany(b.dir, b.entries)
	if err != nil {
		return err
	}
	for i, e := range b.entries {
		switch {
		case errs[i] == kv.ErrExist:
			b.im.Log.Warn("skipped an object whose path is taken (a directory of the same name?)", "key", e.Inode.Origin.Key)
		case errs[i] != nil:
			return fmt.Errorf("%s: %w", e.Inode.Origin.Key, errs[i])
		case e.Inode.Remote:
			b.remote = append(b.remote, attrs[i].Ino)
		}
	}
	b.entries = b.entries[:0]
	return nil
}

// s3Rel maps an object key to its path below the source's directory
// ("prefix/a/b.csv" is "a/b.csv"; slashes after the prefix are dropped).
// marker says the key ends in "/" (a directory marker); rel is "" for the
// prefix's own marker; valid is false for a key that cannot be a path:
// one spec.CheckTreePath refuses ("..", "a//b", a ".git" component, a
// name over 255 bytes), as git import and refresh do.
func s3Rel(c *spec.S3, key string) (rel string, marker, valid bool) {
	rel = strings.TrimLeft(strings.TrimPrefix(key, c.Prefix), "/")
	marker = strings.HasSuffix(rel, "/")
	rel = strings.TrimSuffix(rel, "/")
	if rel == "" {
		return rel, marker, true
	}
	return rel, marker, spec.CheckTreePath(rel) == nil
}

// mkdirs returns the directory at rel (slash-separated, "" or "." for
// the source's own directory, which dirs must hold under ""), making it
// and its parents as needed; dirs remembers the directories made.
func (im *Importer) mkdirs(dirs map[string]uint64, rel string) (uint64, error) {
	if rel == "." {
		rel = ""
	}
	if ino, ok := dirs[rel]; ok {
		return ino, nil
	}
	parent, err := im.mkdirs(dirs, path.Dir(rel))
	if err != nil {
		return 0, err
	}
	name := path.Base(rel)
	a, err := im.Store.Create(parent, name, kv.NewInode{Mode: kv.S_IFDIR | 0o755, Uid: im.owner.UID, Gid: im.owner.GID})
	if err == kv.ErrExist {
		if a, err = im.Store.Lookup(parent, name); err == nil && !a.IsDir() {
			err = fmt.Errorf("%s is a file, not a directory", rel)
		}
	}
	if err != nil {
		return 0, err
	}
	dirs[rel] = a.Ino
	return a.Ino, nil
}

// Fetcher fetches remote files' content from the sources of a spec. Its
// Fetch method is a kv.Fetcher.
type Fetcher struct {
	// Timeout bounds the fetch of an empty object, the time to its first
	// byte (0: DefaultFetchTimeout); every MiB of an object adds a second
	// (a floor rate of 1 MiB/s). A fetch that runs out fails the read
	// with EIO; the next read tries again. Set it before the first Fetch.
	Timeout time.Duration

	spec *spec.Spec
	hc   *http.Client

	mu      sync.Mutex
	sources map[uint32]*fetchSource
}

// fetchSource is what fetches use for one source: the SDK's client and,
// where the endpoint allows, a lighter GET with its settings.
type fetchSource struct {
	client *s3.Client
	getter *objectGetter // nil: GetObject
}

// NewFetcher returns a fetcher for sp's sources; hc may be nil.
func NewFetcher(sp *spec.Spec, hc *http.Client) *Fetcher {
	return &Fetcher{spec: sp, hc: hc, sources: make(map[uint32]*fetchSource)}
}

// DefaultFetchTimeout is a Fetcher's Timeout unless it sets one.
const DefaultFetchTimeout = 60 * time.Second

// timeout bounds one fetch: the time to the first byte and a floor rate
// of 1 MiB/s for the rest.
func (f *Fetcher) timeout(size uint64) time.Duration {
	d := f.Timeout
	if d <= 0 {
		d = DefaultFetchTimeout
	}
	return d + time.Duration(size>>20)*time.Second
}

// Fetch opens the object that o names, on the condition that it still has
// the ETag seen at import: a changed object fails the fetch rather than
// mixing versions.
func (f *Fetcher) Fetch(ctx context.Context, ino uint64, o kv.Origin, size uint64) (io.ReadCloser, error) {
	if int(o.Source) >= len(f.spec.Sources) || f.spec.Sources[o.Source].S3 == nil {
		return nil, fmt.Errorf("inode %d: source %d is not an S3 source of the spec", ino, o.Source)
	}
	c := f.spec.Sources[o.Source].S3
	src, err := f.source(ctx, o.Source, c)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout(size))
	var body io.ReadCloser
	if src.getter != nil {
		body, err = src.getter.get(ctx, o.Key, o.ID)
	} else {
		in := &s3.GetObjectInput{Bucket: aws.String(c.Bucket), Key: aws.String(o.Key)}
		if o.ID != "" {
			in.IfMatch = aws.String(`"` + o.ID + `"`)
		}
		var out *s3.GetObjectOutput
		if out, err = src.client.GetObject(ctx, in); err == nil {
			body = out.Body
		}
	}
	if err != nil {
		cancel()
		var ae smithy.APIError
		if errors.As(err, &ae) && (ae.ErrorCode() == "PreconditionFailed" || ae.ErrorCode() == "NoSuchKey") {
			return nil, fmt.Errorf("s3://%s/%s changed at the source since import (%s)", c.Bucket, o.Key, ae.ErrorCode())
		}
		return nil, fmt.Errorf("get s3://%s/%s: %w", c.Bucket, o.Key, explainS3Error(c, err))
	}
	return &cancelBody{ReadCloser: body, cancel: cancel}, nil
}

func (f *Fetcher) source(ctx context.Context, idx uint32, c *spec.S3) (*fetchSource, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if src, ok := f.sources[idx]; ok {
		return src, nil
	}
	cl, err := NewS3Client(ctx, c, f.hc)
	if err != nil {
		return nil, err
	}
	src := &fetchSource{client: cl, getter: newObjectGetter(ctx, cl, c.Bucket)}
	f.sources[idx] = src
	return src, nil
}

type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
