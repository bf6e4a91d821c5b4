package hibernate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"golang.org/x/sync/errgroup"
)

// A lazy resume fetches the store's database (and everything else that
// is not a blob) before the store opens, and its blobs (STORE/blobs/INO,
// the data of big files) afterwards: in the background, and first on
// demand when a call needs one (a Fetcher is the store's kv.BlobSource).
// PendingFile, in the store directory, lists the blobs still to come with
// their chunks; it is written once, by the download, and removed when
// every blob is there. A blob is fetched into FetchDir, verified chunk by
// chunk, synced, and linked into blobs/ whole: a blob file that is there
// is complete, so after a crash the fetch goes on with those that are
// not. Both are root's, outside the workspace, and no image holds them.
const (
	PendingFile = "hibernate-pending.json"
	FetchDir    = "hibernate-fetch"
)

type pendingList struct {
	ChunkSize int64  `json:"chunk_size"`
	Files     []File `json:"files"`
}

// lazyFile tells whether the manifest's file f is a blob a lazy resume
// fetches after the mount: a file of the store's blobs/ directory (not a
// snapshot's: those are fetched first, a fork or rollback links them).
func lazyFile(f *File) bool {
	dir, name := path.Split(f.Path)
	if dir != "blobs/" || f.Size == 0 {
		return false
	}
	_, err := strconv.ParseUint(name, 16, 64)
	return err == nil
}

// checkObjects refuses an image that lacks an object its manifest names,
// or holds one of another size, from one listing of its objects.
func checkObjects(ctx context.Context, c *s3.Client, loc Location, m *Manifest) error {
	have, err := listObjects(ctx, c, loc)
	if err != nil {
		return err
	}
	for _, f := range m.Files {
		for i, h := range f.Chunks {
			n := min(m.ChunkSize, f.Size-int64(i)*m.ChunkSize)
			if n == ChunkSize && h == zeroChunk {
				continue // a hole: never fetched
			}
			got, ok := have[h]
			if !ok {
				return fmt.Errorf("%s: %w: object %s (of %s) is missing", loc, ErrIncomplete, h, f.Path)
			}
			if got != n {
				return fmt.Errorf("%s: %w: object %s (of %s) holds %d bytes, not %d", loc, ErrCorrupt, h, f.Path, got, n)
			}
		}
	}
	return nil
}

// writePending writes the list of the blobs still to come into dir.
func writePending(dir string, chunkSize int64, files []File) error {
	b, err := json.Marshal(pendingList{ChunkSize: chunkSize, Files: files})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, PendingFile), b, 0o600); err != nil {
		return err
	}
	return os.MkdirAll(filepath.Join(dir, FetchDir), 0o700)
}

// readPending returns the blobs of the store in dir that are still to
// come (absent from blobs/), nil if none.
func readPending(dir string) (*pendingList, error) {
	b, err := os.ReadFile(filepath.Join(dir, PendingFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var p pendingList
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, PendingFile), err)
	}
	m := Manifest{ChunkSize: p.ChunkSize, Files: p.Files, StoreID: "-"}
	if err := m.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, PendingFile), err)
	}
	kept := p.Files[:0]
	for _, f := range p.Files {
		if !lazyFile(&f) {
			return nil, fmt.Errorf("%s: %q is not a blob", filepath.Join(dir, PendingFile), f.Path)
		}
		if _, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(f.Path))); errors.Is(err, os.ErrNotExist) {
			kept = append(kept, f)
		} else if err != nil {
			return nil, err
		}
	}
	p.Files = kept
	return &p, nil
}

// HasPending tells whether the store in dir still has blobs to fetch
// from its image.
func HasPending(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, PendingFile))
	return err == nil
}

// FetchStats says how far a Fetcher is.
type FetchStats struct {
	Owed, Fetched, Failed int   // blobs still to come, fetched, found corrupt or missing
	Bytes                 int64 // received
	Err                   error // the first blob that failed for good, if any
}

// Fetcher fetches the blobs a lazy resume left for later, in the
// background (Start) and on demand (Fetch, for the store: it is the
// store's kv.BlobSource). Its methods are safe for concurrent use.
type Fetcher struct {
	dir       string
	c         *s3.Client
	loc       Location
	chunkSize int64
	log       *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	bytes  atomic.Int64

	bgDone chan struct{} // closed when the background fetch ended (Start)

	mu     sync.Mutex
	closed bool
	blobs  map[uint64]*owedBlob
	order  []uint64
	bad    error // the first permanent failure
}

type owedBlob struct {
	f       File
	running bool
	done    bool          // fetched, or dropped
	wait    chan struct{} // closed when the run under way ends
	err     error         // the last run's; a permanent one stays
}

// OpenFetcher returns the fetcher of the blobs the store in dir still
// lacks from its image at loc (nil, nil if it lacks none: the list is
// removed then). Stale pieces of an interrupted fetch are removed.
func OpenFetcher(dir string, c *s3.Client, loc Location, log *slog.Logger) (*Fetcher, error) {
	if log == nil {
		log = slog.Default()
	}
	p, err := readPending(dir)
	if err != nil || p == nil {
		return nil, err
	}
	if err := os.RemoveAll(filepath.Join(dir, FetchDir)); err != nil {
		return nil, err
	}
	if len(p.Files) == 0 {
		return nil, os.Remove(filepath.Join(dir, PendingFile))
	}
	if err := os.Mkdir(filepath.Join(dir, FetchDir), 0o700); err != nil {
		return nil, err
	}
	fe := &Fetcher{dir: dir, c: c, loc: loc, chunkSize: p.ChunkSize, log: log, blobs: make(map[uint64]*owedBlob), bgDone: make(chan struct{})}
	fe.ctx, fe.cancel = context.WithCancel(context.Background())
	for _, f := range p.Files {
		ino, _ := strconv.ParseUint(path.Base(f.Path), 16, 64)
		fe.blobs[ino] = &owedBlob{f: f}
		fe.order = append(fe.order, ino)
	}
	return fe, nil
}

// Start fetches every owed blob in the background, workers blobs at a
// time, until all are there (then the list is removed) or Close.
func (fe *Fetcher) Start(workers int) {
	if workers <= 0 {
		workers = 2
	}
	next := make(chan uint64)
	fe.wg.Add(1)
	go func() {
		defer fe.wg.Done()
		defer close(next)
		for _, ino := range fe.order {
			select {
			case next <- ino:
			case <-fe.ctx.Done():
				return
			}
		}
	}()
	var left sync.WaitGroup
	for range workers {
		left.Add(1)
		fe.wg.Add(1)
		go func() {
			defer fe.wg.Done()
			defer left.Done()
			for ino := range next {
				for attempt := 0; attempt < 3; attempt++ {
					if _, err := fe.fetch(ino, 4, nil); err == nil || fe.permanent(ino) || fe.ctx.Err() != nil {
						break
					}
					select {
					case <-time.After(time.Duration(attempt+1) * time.Second):
					case <-fe.ctx.Done():
					}
				}
			}
		}()
	}
	fe.wg.Add(1)
	go func() {
		defer fe.wg.Done()
		defer close(fe.bgDone)
		left.Wait()
		fe.finish()
	}()
}

// Wait waits until the background fetch that Start began has ended: every
// blob is there, some failed for good, or Close stopped it.
func (fe *Fetcher) Wait() { <-fe.bgDone }

// finish removes the list once every blob is there.
func (fe *Fetcher) finish() {
	st := fe.Stats()
	switch {
	case fe.ctx.Err() != nil:
	case st.Owed == 0 && st.Failed == 0:
		if err := os.Remove(filepath.Join(fe.dir, PendingFile)); err != nil {
			fe.log.Warn("removing the list of blobs to fetch failed", "err", err)
		}
		os.RemoveAll(filepath.Join(fe.dir, FetchDir))
		fe.log.Info("fetched every blob of the resumed workspace", "from", fe.loc.String(), "blobs", st.Fetched, "bytes", st.Bytes)
	default:
		fe.log.Error("the resumed workspace lacks blobs its image did not give: reads of those files fail with EIO", "from", fe.loc.String(), "missing", st.Owed+st.Failed, "err", st.Err)
	}
}

// Fetch makes ino's blob file present if the fetcher owes it, fetching it
// now (or waiting for the fetch under way) until cancel closes (nil: no
// end); false if it owes none. A wait cancelled leaves the fetch going.
func (fe *Fetcher) Fetch(ino uint64, cancel <-chan struct{}) (bool, error) {
	return fe.fetch(ino, 8, cancel)
}

func (fe *Fetcher) fetch(ino uint64, parallel int, cancel <-chan struct{}) (bool, error) {
	fe.mu.Lock()
	b := fe.blobs[ino]
	if b == nil {
		fe.mu.Unlock()
		return false, nil
	}
	if b.done {
		fe.mu.Unlock()
		return true, nil
	}
	if b.err != nil && isPermanent(b.err) {
		fe.mu.Unlock()
		return false, b.err
	}
	if !b.running {
		if fe.closed {
			fe.mu.Unlock()
			return false, errors.New("the blob's fetch stopped: the store is closing")
		}
		// Run apart from the caller, so that a caller that stops waiting
		// does not stop the fetch for the others.
		b.running, b.wait, b.err = true, make(chan struct{}), nil
		fe.wg.Add(1)
		go fe.runOwed(ino, b, parallel)
	}
	wait := b.wait
	fe.mu.Unlock()
	select {
	case <-wait:
	case <-cancel:
		select {
		case <-wait: // there by now: no reason to fail the call
		default:
			return false, errors.New("interrupted while the blob is fetched")
		}
	case <-fe.ctx.Done():
		return false, errors.New("the blob's fetch stopped: the store is closing")
	}
	fe.mu.Lock()
	done, err := b.done, b.err
	fe.mu.Unlock()
	if !done && err == nil {
		err = errors.New("the blob's fetch stopped")
	}
	return done, err
}

// runOwed fetches b and records how that went.
func (fe *Fetcher) runOwed(ino uint64, b *owedBlob, parallel int) {
	defer fe.wg.Done()
	err := fe.run(b, parallel)
	fe.mu.Lock()
	b.running, b.err = false, err
	if err == nil {
		b.done = true
	} else if isPermanent(err) && fe.bad == nil {
		fe.bad = err
	}
	close(b.wait)
	fe.mu.Unlock()
	if err != nil {
		if isPermanent(err) {
			fe.log.Error("a blob of the resumed workspace is damaged in its image: reads of that file fail with EIO", "inode", ino, "blob", b.f.Path, "from", fe.loc.String(), "err", err)
		} else if fe.ctx.Err() == nil {
			fe.log.Warn("fetching a blob of the resumed workspace failed; trying again", "inode", ino, "err", err)
		}
	}
}

func isPermanent(err error) bool { return errors.Is(err, ErrCorrupt) || errors.Is(err, ErrIncomplete) }

func (fe *Fetcher) permanent(ino uint64) bool {
	fe.mu.Lock()
	defer fe.mu.Unlock()
	b := fe.blobs[ino]
	return b == nil || b.done || (b.err != nil && isPermanent(b.err))
}

// run fetches b into a temporary file, each chunk verified, and links it
// into place unless the store dropped it meanwhile.
func (fe *Fetcher) run(b *owedBlob, parallel int) error {
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(fe.dir, FetchDir, path.Base(b.f.Path)+"."+hex.EncodeToString(rnd[:]))
	defer os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(b.f.Size); err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(fe.ctx)
	g.SetLimit(parallel)
	for i, h := range b.f.Chunks {
		off := int64(i) * fe.chunkSize
		n := min(fe.chunkSize, b.f.Size-off)
		g.Go(func() error {
			got, err := fetchChunk(ctx, fe.c, fe.loc, h, n, io.NewOffsetWriter(f, off))
			fe.bytes.Add(got)
			if err != nil {
				return fmt.Errorf("%s (for %s): %w", fe.loc, b.f.Path, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if err := f.Chmod(os.FileMode(b.f.Mode)); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	dst := filepath.Join(fe.dir, filepath.FromSlash(b.f.Path))
	fe.mu.Lock()
	if b.done { // dropped by the store meanwhile
		fe.mu.Unlock()
		return nil
	}
	err = os.Link(tmp, dst) // never over a file that is there
	fe.mu.Unlock()
	if err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return syncDir(filepath.Dir(dst))
}

// Drop forgets ino's blob: the store removed it (see kv.BlobSource).
func (fe *Fetcher) Drop(ino uint64) {
	fe.mu.Lock()
	if b := fe.blobs[ino]; b != nil {
		b.done = true
	}
	fe.mu.Unlock()
}

// FetchAll fetches every blob still owed, in order, and returns the first
// error.
func (fe *Fetcher) FetchAll() error {
	var first error
	for _, ino := range fe.order {
		if _, err := fe.Fetch(ino, nil); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Stats says how far the fetch is.
func (fe *Fetcher) Stats() FetchStats {
	fe.mu.Lock()
	defer fe.mu.Unlock()
	st := FetchStats{Bytes: fe.bytes.Load(), Err: fe.bad}
	for _, b := range fe.blobs {
		switch {
		case b.done:
			st.Fetched++
		case b.err != nil && isPermanent(b.err):
			st.Failed++
		default:
			st.Owed++
		}
	}
	return st
}

// Close stops the fetch (a blob half fetched is thrown away; the rest is
// fetched when the store is mounted again) and waits for it.
func (fe *Fetcher) Close() {
	fe.mu.Lock()
	fe.closed = true
	fe.mu.Unlock()
	fe.cancel()
	fe.wg.Wait()
}

// pendingFiles returns the blobs of the store in dir still to come, for
// an upload: they are in the image it was resumed from.
func pendingFiles(dir string) ([]File, error) {
	p, err := readPending(dir)
	if err != nil || p == nil {
		return nil, err
	}
	if p.ChunkSize != ChunkSize {
		return nil, fmt.Errorf("%s: chunks of %d bytes, not %d", PendingFile, p.ChunkSize, ChunkSize)
	}
	return p.Files, nil
}
