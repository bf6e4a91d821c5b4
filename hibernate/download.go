package hibernate

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"golang.org/x/sync/errgroup"
)

// ReadManifest reads and checks the location's manifest and returns it
// with its ETag (ErrNoImage if there is none). It does not check who
// wrote it: ReadSignedManifest does.
func ReadManifest(ctx context.Context, c *s3.Client, loc Location) (*Manifest, string, error) {
	return ReadSignedManifest(ctx, c, loc, nil)
}

// ReadSignedManifest reads the location's manifest, refuses it
// (ErrUnsigned) unless key signed it for this location (a nil key checks
// no signature), then parses and checks it.
func ReadSignedManifest(ctx context.Context, c *s3.Client, loc Location, key []byte) (*Manifest, string, error) {
	b, etag, mac, err := getManifest(ctx, c, loc)
	if err != nil {
		return nil, "", err
	}
	if key != nil {
		if err := verify(key, loc, b, mac); err != nil {
			return nil, "", err
		}
	}
	m, err := parseManifest(b)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", loc, err)
	}
	return m, etag, nil
}

// getManifest returns the bytes of the location's manifest, its ETag and
// its signature (metadata MACMeta, "" if none).
func getManifest(ctx context.Context, c *s3.Client, loc Location) ([]byte, string, string, error) {
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &loc.Bucket, Key: aws.String(loc.key(manifestName))})
	if isCode(err, "NoSuchKey", "NotFound") {
		return nil, "", "", fmt.Errorf("%s: %w (no %s)", loc, ErrNoImage, manifestName)
	}
	if err != nil {
		return nil, "", "", fmt.Errorf("%s: read the manifest: %w", loc, err)
	}
	defer out.Body.Close()
	if out.ContentLength != nil && *out.ContentLength > maxManifestBytes {
		return nil, "", "", fmt.Errorf("%s: %w: the manifest is larger than %d MiB", loc, ErrCorrupt, maxManifestBytes>>20)
	}
	b, err := io.ReadAll(io.LimitReader(out.Body, maxManifestBytes+1))
	if err != nil {
		return nil, "", "", fmt.Errorf("%s: read the manifest: %w", loc, err)
	}
	if len(b) > maxManifestBytes {
		return nil, "", "", fmt.Errorf("%s: %w: the manifest is larger than %d MiB", loc, ErrCorrupt, maxManifestBytes>>20)
	}
	return b, aws.ToString(out.ETag), out.Metadata[MACMeta], nil
}

// DownloadOptions configure Download.
type DownloadOptions struct {
	Parallel int // concurrent requests (default 8)
	// Prepare, if set, runs on the complete temporary directory before it
	// is made durable and renamed into place (the state is written there).
	Prepare func(tmp string, m *Manifest, etag string) error
	// Lazy leaves the store's blobs for later: every object is checked
	// to be there with its size (one listing), the rest of the store is
	// fetched and verified, and the blobs are listed in PendingFile for
	// a Fetcher (the mounted store's kv.BlobSource).
	Lazy bool
	// Key, if set, is the image key: a manifest it did not sign for this
	// location is refused (ErrUnsigned) before it is parsed.
	Key []byte
	// MinGeneration refuses a manifest of a lower generation
	// (ErrRolledBack) before anything is fetched: the greatest this host
	// recorded for the location and the signed lease's.
	MinGeneration uint64
}

// Download builds the store of the location's image in dir, which must
// not exist or be an empty directory: in a temporary directory beside it,
// every byte checked against the manifest, renamed into place when
// complete and on stable storage. On error nothing is left at dir. It
// returns the manifest and its ETag.
func Download(ctx context.Context, c *s3.Client, loc Location, dir string, o DownloadOptions) (*Manifest, string, Stats, error) {
	if o.Parallel <= 0 {
		o.Parallel = 8
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, "", Stats{}, err
	}
	if err := checkEmpty(dir); err != nil {
		return nil, "", Stats{}, err
	}
	m, etag, err := ReadSignedManifest(ctx, c, loc, o.Key)
	if err != nil {
		return nil, "", Stats{}, err
	}
	if err := CheckGeneration(loc, m, o.MinGeneration); err != nil {
		return nil, "", Stats{}, err
	}
	st := Stats{Files: len(m.Files), Bytes: m.Bytes(), Generation: m.Generation}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, "", st, err
	}
	if err := checkRoom(filepath.Dir(dir), m); err != nil {
		return nil, "", st, err
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := dir + ".resume-" + hex.EncodeToString(rnd[:])
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return nil, "", st, err
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(tmp)
		}
	}()
	now := m
	if o.Lazy {
		if err := checkObjects(ctx, c, loc, m); err != nil {
			return nil, "", st, err
		}
		var later []File
		now = &Manifest{ChunkSize: m.ChunkSize}
		for _, f := range m.Files {
			if lazyFile(&f) {
				later = append(later, f)
			} else {
				now.Files = append(now.Files, f)
			}
		}
		if err := os.MkdirAll(filepath.Join(tmp, "blobs"), 0o700); err != nil {
			return nil, "", st, err
		}
		if err := writePending(tmp, m.ChunkSize, later); err != nil {
			return nil, "", st, err
		}
	}
	if err := fetchFiles(ctx, c, loc, tmp, now, o.Parallel, &st); err != nil {
		return nil, "", st, err
	}
	writeCache(tmp, now.Files)
	if o.Prepare != nil {
		if err := o.Prepare(tmp, m, etag); err != nil {
			return nil, "", st, err
		}
	}
	if err := syncTree(tmp); err != nil {
		return nil, "", st, err
	}
	os.Remove(dir) // an empty directory (checkEmpty)
	if err := os.Rename(tmp, dir); err != nil {
		return nil, "", st, err
	}
	done = true
	if err := syncDir(filepath.Dir(dir)); err != nil {
		return nil, "", st, err
	}
	return m, etag, st, nil
}

// checkRoom refuses a download that would not fit on dir's file system
// (with 64 MiB to spare), before it writes anything.
func checkRoom(dir string, m *Manifest) error {
	var need int64 = 64 << 20
	for _, f := range m.Files {
		need += f.Size
		for _, h := range f.Chunks {
			if h == zeroChunk {
				need -= ChunkSize
			}
		}
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	if free := int64(fs.Bavail) * fs.Bsize; free < need {
		return fmt.Errorf("%s has %d MiB free; the workspace needs %d MiB", dir, free>>20, need>>20)
	}
	return nil
}

// checkEmpty refuses a dir that exists and is not an empty directory.
func checkEmpty(dir string) error {
	f, err := os.Open(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if len(names) > 0 {
		return fmt.Errorf("%s is not empty: resume writes a new store (remove it, or give another --store)", dir)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: %w", dir, err)
	}
	return nil
}

// fetchFiles creates the manifest's files under dir and fetches their
// chunks in parallel, each checked against its name.
func fetchFiles(ctx context.Context, c *s3.Client, loc Location, dir string, m *Manifest, parallel int, st *Stats) error {
	path := func(i int) string { return filepath.Join(dir, filepath.FromSlash(m.Files[i].Path)) }
	distinct := make(map[string]bool)
	for i, mf := range m.Files {
		if err := os.MkdirAll(filepath.Dir(path(i)), 0o700); err != nil {
			return err
		}
		f, err := os.OpenFile(path(i), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		err = f.Truncate(mf.Size)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		for _, h := range mf.Chunks {
			distinct[h] = true
		}
	}
	st.Objects = len(distinct)
	g, ctx := errgroup.WithContext(ctx)
	jobs := feedChunks(ctx, g, m)
	var moved, objects atomic.Int64
	for range parallel {
		g.Go(func() error {
			for j := range jobs {
				mf := &m.Files[j.f]
				off := int64(j.i) * m.ChunkSize
				n := min(m.ChunkSize, mf.Size-off)
				f, err := os.OpenFile(path(j.f), os.O_WRONLY, 0)
				if err != nil {
					return err
				}
				got, err := fetchChunk(ctx, c, loc, mf.Chunks[j.i], n, io.NewOffsetWriter(f, off))
				if cerr := f.Close(); err == nil {
					err = cerr
				}
				moved.Add(got)
				if err != nil {
					return fmt.Errorf("%s (for %s): %w", loc, mf.Path, err)
				}
				objects.Add(1)
			}
			return nil
		})
	}
	err := g.Wait()
	st.Moved, st.MovedObjects = moved.Load(), int(objects.Load())
	if err != nil {
		return err
	}
	for i := range m.Files {
		// Modes as they were (the files were made writable for the fetch).
		if err := os.Chmod(path(i), os.FileMode(m.Files[i].Mode)); err != nil {
			return err
		}
	}
	return nil
}

// fetchChunk writes object name, which must hold n bytes whose sha256 is
// its name, to w, trying again after a failure that may pass. It returns
// the bytes received.
func fetchChunk(ctx context.Context, c *s3.Client, loc Location, name string, n int64, w *io.OffsetWriter) (int64, error) {
	var total int64
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		var got int64
		got, err = fetchOnce(ctx, c, loc, name, n, w)
		total += got
		if err == nil || errors.Is(err, ErrIncomplete) || ctx.Err() != nil {
			break
		}
		w.Seek(0, io.SeekStart)
	}
	return total, err
}

func fetchOnce(ctx context.Context, c *s3.Client, loc Location, name string, n int64, w io.Writer) (int64, error) {
	if n == ChunkSize && name == zeroChunk {
		return 0, nil // a hole (the file was made with its size): nothing to fetch or write
	}
	key := loc.key("objects/" + name)
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &loc.Bucket, Key: &key})
	if isCode(err, "NoSuchKey", "NotFound") {
		return 0, fmt.Errorf("%w: object %s is missing", ErrIncomplete, key)
	}
	if err != nil {
		return 0, fmt.Errorf("get %s: %w", key, err)
	}
	defer out.Body.Close()
	h := sha256.New()
	// One byte more than the chunk holds: a longer object is corrupt.
	got, err := io.Copy(io.MultiWriter(w, h), io.LimitReader(out.Body, n+1))
	if err != nil {
		return got, fmt.Errorf("get %s: %w", key, err)
	}
	if got != n {
		return got, fmt.Errorf("%w: object %s holds %d bytes, not %d", ErrCorrupt, key, got, n)
	}
	if hex.EncodeToString(h.Sum(nil)) != name {
		return got, fmt.Errorf("%w: object %s does not hold what its name says (sha256 %x)", ErrCorrupt, key, h.Sum(nil))
	}
	return got, nil
}

// syncTree makes every file and directory under dir durable.
func syncTree(dir string) error {
	return filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		return f.Sync()
	})
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

func isCode(err error, codes ...string) bool {
	var ae smithy.APIError
	if err == nil || !errors.As(err, &ae) {
		return false
	}
	for _, c := range codes {
		if ae.ErrorCode() == c {
			return true
		}
	}
	return false
}

// isPrecondition: a conditional write lost. S3 answers 412 when the
// condition failed and 409 when another conditional write of the key was
// in flight; S3-compatible servers word the 409 their own way
// (versitygw's posix backend said ExistingObjectIsDirectory to one of
// four holders racing for a free lease), so any 409 counts: the caller
// reads the object again and decides from what is there.
func isPrecondition(err error) bool {
	if isCode(err, "PreconditionFailed", "ConditionalRequestConflict") {
		return true
	}
	var re interface{ HTTPStatusCode() int }
	return err != nil && errors.As(err, &re) && (re.HTTPStatusCode() == http.StatusConflict || re.HTTPStatusCode() == http.StatusPreconditionFailed)
}

// zeroChunk is the name of a chunk of ChunkSize zero bytes: the holes of
// sparse blobs, which a download leaves as holes. A constant (checked by
// TestZeroChunkName) rather than hashed at init: every run of the
// computerfs binary, `computerfs exec` included, paid 4 MiB and a few
// milliseconds for it.
const zeroChunk = "bb9f8df61474d25e71fa00722318cd387396ca1736605e1248821cc0de3d3af8"
