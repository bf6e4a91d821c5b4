package hibernate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
	"golang.org/x/sync/errgroup"
)

// Stats says what an upload or a download did.
type Stats struct {
	Files   int   // files in the store
	Bytes   int64 // their total size
	Objects int   // distinct chunks the image holds
	// Moved is the bytes sent (upload) or received (download) in objects,
	// MovedObjects their number; the manifest is not counted.
	Moved        int64
	MovedObjects int
	Manifest     int64 // size of the manifest
	Read         int64 // bytes of the store read and hashed (upload)
	// Generation is the manifest's (Manifest.Generation).
	Generation uint64
	// Deleted is the chunks of the previous image that the new one no
	// longer names, deleted after its manifest was written; DeleteErr
	// the first error deleting them (the image is whole regardless).
	Deleted   int
	DeleteErr error
}

// UploadOptions configure Upload.
type UploadOptions struct {
	StoreID string // the store's identity (required)
	// BaseETag is the ETag of the manifest this store last wrote or
	// resumed from ("": none). If the location holds a manifest with
	// another ETag, someone else wrote it since, and Upload refuses
	// (ErrImageChanged) rather than lose their image.
	BaseETag string
	Host     string
	// Holder is the store's lease holder id: a manifest of the same store
	// and holder with another ETag than BaseETag is this store's own,
	// from a run that ended after writing it and before recording its ETag
	// (killed): it is the base too.
	Holder   string
	Parallel int // concurrent requests (default 8)
	// BeforeManifest, if set, runs once every object is there and before
	// the manifest of generation gen is written: an error stops the
	// upload (the lease is renewed there).
	BeforeManifest func(ctx context.Context, gen uint64) error
	// MinGeneration is the greatest generation the writer knows of at the
	// location besides the manifest there (the host's record, the
	// lease's): the new manifest's is above both.
	MinGeneration uint64
	// Key, if set, signs the manifest (see ErrUnsigned); a manifest at
	// the location that is not BaseETag must be signed with it too.
	Key []byte
}

// ExcludedNames are the entries of a store directory that an image
// leaves out: the lock, the daemon's log, the ballast and the spare files
// (remade on open), the sandbox's cache volume, the state and the cache.
var ExcludedNames = map[string]bool{
	"lock": true, "daemon.log": true, "ballast": true, "spare.log": true, "spare.manifest": true,
	"sandbox-cache.img": true, PendingFile: true, FetchDir: true, StateFile: true, StateFile + ".tmp": true, CacheFile: true, CacheFile + ".tmp": true,
}

// Upload writes the closed store in dir to the location: the chunks of
// its files that are not there yet, then the manifest. It holds the
// store's lock meanwhile, so a store that is open (mounted) is refused.
// It returns the new manifest's ETag.
func Upload(ctx context.Context, c *s3.Client, loc Location, dir string, o UploadOptions) (Stats, string, error) {
	if o.StoreID == "" {
		return Stats{}, "", errors.New("hibernate: no store id")
	}
	if o.Parallel <= 0 {
		o.Parallel = 8
	}
	unlock, err := LockStore(dir)
	if err != nil {
		return Stats{}, "", err
	}
	defer unlock()
	// The image there must be this store's, as this store last saw it.
	var old *Manifest
	b, etag, mac, err := getManifest(ctx, c, loc)
	if err == nil && o.Key != nil && etag != o.BaseETag {
		err = verify(o.Key, loc, b, mac)
	}
	if err == nil {
		if old, err = parseManifest(b); err != nil {
			err = fmt.Errorf("%s: %w", loc, err)
		}
	}
	switch {
	case errors.Is(err, ErrNoImage):
		etag = ""
	case err != nil:
		return Stats{}, "", fmt.Errorf("%s: %w (refusing to overwrite it)", loc, err)
	case old.StoreID != o.StoreID:
		return Stats{}, "", fmt.Errorf("%s: %w (store %s, this is %s, from host %s)", loc, ErrOtherStore, old.StoreID, o.StoreID, old.Host)
	case etag != o.BaseETag && (o.Holder == "" || old.Holder != o.Holder):
		return Stats{}, "", fmt.Errorf("%s: %w (written by host %s at %s)", loc, ErrImageChanged, old.Host, old.Created.Format(time.RFC3339))
	}

	gen := o.MinGeneration
	if old != nil {
		gen = max(gen, old.Generation)
	}
	m := &Manifest{Format: Format, Version: Version, StoreID: o.StoreID, Host: o.Host, Holder: o.Holder, Generation: gen + 1, Created: time.Now().UTC(), ChunkSize: ChunkSize}
	if m.Files, err = listStore(dir); err != nil {
		return Stats{}, "", err
	}
	cache := readCache(dir)
	for i := range m.Files {
		f := &m.Files[i]
		if cf, ok := cache[f.Path]; ok && cf.Sig == f.sig && f.sig.Ino != 0 && len(cf.Chunks) == len(f.Chunks) {
			f.known = cf.Chunks
		}
	}
	have, err := listObjects(ctx, c, loc)
	if err != nil {
		return Stats{}, "", err
	}
	st := Stats{Files: len(m.Files), Bytes: m.Bytes(), Generation: m.Generation}
	if err := uploadChunks(ctx, c, loc, dir, m, have, o.Parallel, &st); err != nil {
		return st, "", err
	}
	// Blobs a lazy resume has not fetched yet are in the image it came
	// from: named as they are, if the location holds their chunks.
	later, err := pendingFiles(dir)
	if err != nil {
		return st, "", err
	}
	for _, f := range later {
		for _, h := range f.Chunks {
			if _, ok := have[h]; !ok && h != zeroChunk {
				return st, "", fmt.Errorf("%s: %w: %d blobs of this store are still to be fetched from the image it was resumed from, and this location lacks their chunks: mount the store until its fetch is done (computerfs status), then hibernate", loc, ErrIncomplete, len(later))
			}
		}
		m.Files = append(m.Files, f)
		st.Files++
		st.Bytes += f.Size
	}
	if o.BeforeManifest != nil {
		if err := o.BeforeManifest(ctx, m.Generation); err != nil {
			return st, "", err
		}
	}
	b, err = json.Marshal(m)
	if err != nil {
		return st, "", err
	}
	st.Manifest = int64(len(b))
	in := &s3.PutObjectInput{Bucket: &loc.Bucket, Key: aws.String(loc.key(manifestName)), Body: bytes.NewReader(b),
		ContentType: aws.String("application/json"), ChecksumSHA256: aws.String(b64sum(b))}
	if o.Key != nil {
		in.Metadata = map[string]string{MACMeta: sign(o.Key, loc, b)}
	}
	if etag == "" {
		in.IfNoneMatch = aws.String("*")
	} else {
		in.IfMatch = aws.String(etag)
	}
	out, err := c.PutObject(ctx, in)
	var newETag string
	if err == nil {
		newETag = aws.ToString(out.ETag)
	}
	if isPrecondition(err) {
		// The SDK may have sent the write again after a response that
		// was lost: then the manifest there is this one.
		cur, etag, rerr := ReadSignedManifest(ctx, c, loc, o.Key)
		if rerr != nil || cur.StoreID != m.StoreID || cur.Host != m.Host || !cur.Created.Equal(m.Created) || cur.Generation != m.Generation {
			return st, "", fmt.Errorf("%s: %w (by another writer, while this one uploaded)", loc, ErrImageChanged)
		}
		newETag, err = etag, nil
	}
	if err != nil {
		return st, "", fmt.Errorf("%s: write the manifest: %w", loc, err)
	}
	writeCache(dir, m.Files)
	if old != nil {
		st.Deleted, st.DeleteErr = dropChunks(ctx, c, loc, old, m, o.Parallel)
	}
	return st, newETag, nil
}

// dropChunks deletes the chunks of the previous manifest that the new one
// does not name. Objects no manifest named (none, unless a hibernate was
// stopped after its upload and the store changed before the next) are
// left. It returns how many it deleted and the first error.
func dropChunks(ctx context.Context, c *s3.Client, loc Location, old, m *Manifest, parallel int) (int, error) {
	keep := make(map[string]bool)
	for _, f := range m.Files {
		for _, h := range f.Chunks {
			keep[h] = true
		}
	}
	drop := make(map[string]bool)
	for _, f := range old.Files {
		for _, h := range f.Chunks {
			if !keep[h] {
				drop[h] = true
			}
		}
	}
	var g errgroup.Group
	g.SetLimit(parallel)
	var n atomic.Int64
	for h := range drop {
		g.Go(func() error {
			_, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &loc.Bucket, Key: aws.String(loc.key("objects/" + h))})
			if err != nil {
				return fmt.Errorf("%s: delete %s: %w", loc, h, err)
			}
			n.Add(1)
			return nil
		})
	}
	err := g.Wait()
	return int(n.Load()), err
}

const manifestName = "manifest.json"

func b64sum(b []byte) string {
	s := sha256.Sum256(b)
	return base64.StdEncoding.EncodeToString(s[:])
}

// LockStore takes the store's lock (the one kv.Open takes), so that
// nothing opens the store while an image is made of it. It fails if the
// store is open.
func LockStore(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock store: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("store %s is open (mounted?): unmount it first", dir)
		}
		return nil, fmt.Errorf("lock store: %w", err)
	}
	return func() { f.Close() }, nil
}

// listStore returns the files of the store in dir, chunks not yet known.
func listStore(dir string) ([]File, error) {
	var files []File
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		top := !stringsContainsSep(rel)
		if top && ExcludedNames[rel] {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		switch t := d.Type(); {
		case d.IsDir():
			return nil
		case t.IsRegular():
		case top && t&(fs.ModeSocket|fs.ModeNamedPipe) != 0:
			return nil // the control socket
		default:
			return fmt.Errorf("store %s: %s is a %v, not a file: a store holds only files", dir, rel, t)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		n := (info.Size() + ChunkSize - 1) / ChunkSize
		f := File{Path: filepath.ToSlash(rel), Size: info.Size(), Mode: uint32(info.Mode().Perm()), Chunks: make([]string, n)}
		f.sig, _ = sigOf(info)
		files = append(files, f)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list store: %w", err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("store %s: no files", dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "db")); err != nil {
		return nil, fmt.Errorf("store %s has no db/: not a computerfs store", dir)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, nil
}

func stringsContainsSep(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == filepath.Separator {
			return true
		}
	}
	return false
}

// listObjects returns the objects under PREFIX/objects/ with their sizes.
func listObjects(ctx context.Context, c *s3.Client, loc Location) (map[string]int64, error) {
	have := make(map[string]int64)
	pfx := loc.key("objects/")
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: &loc.Bucket, Prefix: &pfx})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: list objects: %w", loc, err)
		}
		for _, o := range page.Contents {
			have[aws.ToString(o.Key)[len(pfx):]] = aws.ToInt64(o.Size)
		}
	}
	return have, nil
}

// uploadChunks hashes every chunk of the files and puts those the
// location does not have (by name and size), filling in m's chunks.
func uploadChunks(ctx context.Context, c *s3.Client, loc Location, dir string, m *Manifest, have map[string]int64, parallel int, st *Stats) error {
	g, ctx := errgroup.WithContext(ctx)
	jobs := feedChunks(ctx, g, m)
	var mu sync.Mutex // guards have, claimed
	claimed := make(map[string]bool)
	var moved, movedObjects, read atomic.Int64
	for range parallel {
		g.Go(func() error {
			buf := make([]byte, ChunkSize)
			for j := range jobs {
				f := &m.Files[j.f]
				off := int64(j.i) * ChunkSize
				n := min(ChunkSize, f.Size-off)
				if f.known != nil {
					// The file has not changed since its chunks were
					// named: if the image has the chunk, nothing to read.
					name := f.known[j.i]
					mu.Lock()
					size, ok := have[name]
					there := ok && size == n || claimed[name]
					if there {
						claimed[name] = true
					}
					mu.Unlock()
					if there {
						f.Chunks[j.i] = name
						continue
					}
				}
				read.Add(n)
				if err := readChunk(filepath.Join(dir, filepath.FromSlash(f.Path)), buf[:n], off); err != nil {
					return err
				}
				sum := sha256.Sum256(buf[:n])
				name := hex.EncodeToString(sum[:])
				f.Chunks[j.i] = name // each job its own element
				mu.Lock()
				size, ok := have[name]
				skip := ok && size == n || claimed[name]
				claimed[name] = true
				mu.Unlock()
				if skip {
					continue
				}
				_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &loc.Bucket, Key: aws.String(loc.key("objects/" + name)),
					Body: bytes.NewReader(buf[:n])}, withPayloadHash(name))
				if err != nil {
					return fmt.Errorf("%s: upload %s (of %s): %w", loc, name, f.Path, err)
				}
				moved.Add(n)
				movedObjects.Add(1)
			}
			return nil
		})
	}
	err := g.Wait()
	st.Objects = len(claimed)
	st.Moved, st.MovedObjects, st.Read = moved.Load(), int(movedObjects.Load()), read.Load()
	return err
}

func readChunk(path string, b []byte, off int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.ReadAt(b, off); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%s changed while it was read (it is shorter): is the store open?", path)
		}
		return err
	}
	return nil
}

// withPayloadHash gives the request signer the payload's sha256, which
// Upload has computed already (the chunk's name), so that the SDK does
// not read the chunk again to compute it. The server checks the signed
// hash against what it receives: a chunk damaged on the way is refused.
func withPayloadHash(hexSum string) func(*s3.Options) {
	return func(o *s3.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			// Without that step (an unsigned payload) there is nothing to save.
			_ = st.Finalize.Insert(middleware.FinalizeMiddlewareFunc("computerfsPayloadHash",
				func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
					return next.HandleFinalize(v4.SetPayloadHash(ctx, hexSum), in)
				}), "ComputePayloadHash", middleware.Before)
			return nil
		})
	}
}

// chunkJob names chunk i of file f of a manifest.
type chunkJob struct{ f, i int }

// feedChunks sends every chunk of m's files, in order, on the channel it
// returns, from a goroutine of g that stops when ctx ends; the channel is
// closed after the last.
func feedChunks(ctx context.Context, g *errgroup.Group, m *Manifest) <-chan chunkJob {
	jobs := make(chan chunkJob)
	g.Go(func() error {
		defer close(jobs)
		for f := range m.Files {
			for i := range m.Files[f].Chunks {
				select {
				case jobs <- chunkJob{f, i}:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}
		return nil
	})
	return jobs
}
