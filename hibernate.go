package computerfs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/computerfs/computerfs/hibernate"
	"github.com/computerfs/computerfs/kv"
)

// Where: an image's location as a user gives it (Hibernate, Resume).
type Where struct {
	URL       string // s3://BUCKET/PREFIX
	Endpoint  string // an S3-compatible server ("": AWS)
	Region    string // "": the SDK's environment
	PathStyle bool   // path-style addressing (on anyway for an IP or localhost endpoint)
	// HTTPClient carries the requests (nil: the SDK's, with timeouts).
	HTTPClient *http.Client
	// ImageKey is the file of the key that signs images (default
	// hibernate.KeyFile's): Hibernate signs the manifest with it (making
	// the key if there is none), Resume refuses an image it did not sign
	// (hibernate.ErrUnsigned). Hosts that resume each other's workspaces
	// share it; no agent may read it.
	ImageKey string
	// Generations is the host's record of the greatest image generation
	// it wrote or resumed at each location (default: image-generations
	// beside the image key): Resume refuses an older image than that
	// (hibernate.ErrRolledBack).
	Generations string
}

func (wh Where) keyFile() string { return hibernate.KeyFile(wh.ImageKey) }

func (wh Where) record() (*hibernate.Record, error) {
	d := wh.Generations
	if d == "" {
		d = hibernate.RecordDir(wh.keyFile())
	}
	return hibernate.OpenRecord(d)
}

func (wh Where) location() (hibernate.Location, error) {
	loc, err := hibernate.ParseURL(wh.URL)
	if err != nil {
		return loc, err
	}
	loc.Endpoint, loc.Region, loc.PathStyle = wh.Endpoint, wh.Region, wh.PathStyle
	return loc, nil
}

// HibernateOptions configure Hibernate.
type HibernateOptions struct {
	// Mountpoint, if set, is unmounted first (waiting up to
	// UnmountTimeout for its daemon to close the store); Store is then
	// the mount's store.
	Mountpoint     string
	UnmountTimeout time.Duration // default 30 s
	Store          string        // the store directory, closed
	// To is where the image goes; its URL may be empty for the location
	// the store last hibernated to or resumed from.
	To Where
	// KeepLocal keeps the store directory after the image is written
	// (default: removed).
	KeepLocal bool
	LeaseTTL  time.Duration // the lease taken meanwhile (default hibernate.DefaultLeaseTTL)
	Logger    *slog.Logger
}

// Hibernate writes a workspace's store to S3 and frees it locally: the
// workspace is unmounted (if Mountpoint is set), the lease taken (refused
// while another host holds it), the chunks the image lacks uploaded, the
// manifest written last, the lease released, and the store directory
// removed unless KeepLocal. A hibernate that failed halfway leaves the
// store as it was and the previous image whole; running it again
// finishes the job.
func Hibernate(ctx context.Context, o HibernateOptions) (hibernate.Stats, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.To.URL != "" {
		if _, err := o.To.location(); err != nil {
			return hibernate.Stats{}, err // before the unmount
		}
	}
	if o.Mountpoint != "" {
		mp, err := filepath.Abs(o.Mountpoint)
		if err != nil {
			return hibernate.Stats{}, err
		}
		store, err := mountedStore(mp)
		if err != nil {
			return hibernate.Stats{}, err
		}
		if o.Store != "" && !sameDir(o.Store, store) {
			return hibernate.Stats{}, fmt.Errorf("%s is the mount of store %s, not %s", mp, store, o.Store)
		}
		o.Store = store
		if o.UnmountTimeout <= 0 {
			o.UnmountTimeout = 30 * time.Second
		}
		if err := Unmount(mp, o.UnmountTimeout); err != nil {
			return hibernate.Stats{}, err
		}
	}
	if o.Store == "" {
		return hibernate.Stats{}, errors.New("hibernate: no store or mount point")
	}
	store, err := filepath.Abs(o.Store)
	if err != nil {
		return hibernate.Stats{}, err
	}
	if ok, err := isStore(store); err != nil || !ok {
		return hibernate.Stats{}, fmt.Errorf("%s is not a computerfs store (%v)", store, err)
	}
	// Refused at once if the store is open (Upload holds the lock while it
	// reads the store).
	unlock, err := hibernate.LockStore(store)
	if err != nil {
		return hibernate.Stats{}, err
	}
	unlock()
	st, err := hibernate.ReadState(store)
	if err != nil {
		return hibernate.Stats{}, err
	}
	if o.To.URL == "" {
		if o.To.URL = st.URL; o.To.URL == "" {
			return hibernate.Stats{}, errors.New("hibernate: no --to location, and the store has not hibernated before")
		}
		if o.To.Endpoint == "" && o.To.Region == "" {
			o.To.Endpoint, o.To.Region, o.To.PathStyle = st.Endpoint, st.Region, st.PathStyle
		}
	}
	loc, err := o.To.location()
	if err != nil {
		return hibernate.Stats{}, err
	}
	if loc.String() != st.URL {
		// Another image: what the store knew of the last one is no use.
		st.ManifestETag, st.LeaseETag = "", ""
	}
	st.SetLocation(loc)
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = hibernate.DefaultLeaseTTL
	}
	st.LeaseTTL = o.LeaseTTL
	key, err := hibernate.LoadOrCreateKey(o.To.keyFile())
	if err != nil {
		return hibernate.Stats{}, err
	}
	st.KeyFile = o.To.keyFile()
	rec, err := o.To.record()
	if err != nil {
		return hibernate.Stats{}, err
	}
	floor, err := rec.Seen(loc)
	if err != nil {
		return hibernate.Stats{}, err
	}
	if err := checkImageOutsideSources(store, loc); err != nil {
		return hibernate.Stats{}, err
	}
	c, err := hibernate.NewClient(ctx, loc, o.To.HTTPClient)
	if err != nil {
		return hibernate.Stats{}, err
	}
	host, _ := os.Hostname()
	if _, err := os.Stat(filepath.Join(store, hibernate.StateFile)); errors.Is(err, os.ErrNotExist) {
		// A store without a state gets new ids at each ReadState: they
		// are recorded before the lease is taken, so that a hibernate
		// killed in between is run again as the same holder.
		if err := hibernate.WriteState(store, st); err != nil {
			return hibernate.Stats{}, err
		}
	}
	lease, err := hibernate.AcquireLease(ctx, c, loc, hibernate.LeaseOptions{Holder: st.Holder, Host: host, TTL: o.LeaseTTL,
		Key: key, Generation: max(floor, st.Generation), Warn: o.Logger.Warn})
	if err != nil {
		return hibernate.Stats{}, err
	}
	st.LeaseETag = lease.ETag
	if err := hibernate.WriteState(store, st); err != nil {
		return hibernate.Stats{}, err
	}
	stop := lease.Keep(c, loc, o.LeaseTTL, nil)
	stats, etag, err := hibernate.Upload(ctx, c, loc, store, hibernate.UploadOptions{
		StoreID: st.StoreID, BaseETag: st.ManifestETag, Host: host, Holder: st.Holder, Key: key,
		MinGeneration: lease.Generation,
		BeforeManifest: func(ctx context.Context, gen uint64) error {
			// The lease must still be ours when the image changes hands.
			// It names the new generation only once the manifest is
			// written (the release below): a lease left by a hibernate
			// that failed at the manifest must not refuse the image
			// that is still there.
			if err := stop(); err != nil {
				return err
			}
			stop = func() error { return nil }
			return lease.Renew(ctx, c, loc, o.LeaseTTL)
		},
	})
	stop()
	if errors.Is(err, hibernate.ErrImageChanged) || errors.Is(err, hibernate.ErrOtherStore) || errors.Is(err, hibernate.ErrFormat) || errors.Is(err, hibernate.ErrCorrupt) {
		// This store will not write there: give the lease back.
		if rerr := lease.Release(ctx, c, loc); rerr == nil {
			st.LeaseETag = ""
			hibernate.WriteState(store, st)
		}
	}
	if err != nil {
		return stats, err
	}
	st.ManifestETag, st.Generation = etag, stats.Generation
	if err := rec.Raise(loc, stats.Generation); err != nil {
		o.Logger.Error("hibernate: the image is written, but recording its generation failed: this host would not notice an older image put back in its place", "err", err)
	}
	// Released with the generation written: it tells a resume anywhere
	// that an older manifest is a replay.
	lease.Generation = max(lease.Generation, stats.Generation)
	if err := lease.Release(ctx, c, loc); err != nil {
		// The image is complete; the lease lapses at its expiry.
		o.Logger.Warn("hibernate: the image is written, but releasing the lease failed (it expires by itself)", "err", err, "expires", lease.Expires)
	}
	st.LeaseETag = ""
	if err := hibernate.WriteState(store, st); err != nil {
		return stats, err
	}
	o.Logger.Info("hibernated", "store", store, "to", loc.String(), "files", stats.Files, "bytes", stats.Bytes, "uploaded", stats.Moved)
	if !o.KeepLocal {
		if err := os.RemoveAll(store); err != nil {
			return stats, fmt.Errorf("hibernated to %s, but removing the local store failed: %w", loc, err)
		}
	}
	return stats, nil
}

func sameDir(a, b string) bool {
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}

// isStore tells whether dir holds a computerfs store.
func isStore(dir string) (bool, error) {
	st, err := os.Stat(filepath.Join(dir, "db"))
	if err != nil {
		return false, err
	}
	return st.IsDir(), nil
}

// ResumeOptions configure ResumeStore and Resume.
type ResumeOptions struct {
	From Where
	// Store is the store directory to make: it must not exist or be
	// empty, unless it is the copy a hibernate kept (--keep-local) and
	// the image is still the one it wrote, which is used as it is.
	Store    string
	LeaseTTL time.Duration // default hibernate.DefaultLeaseTTL; the daemon renews it every third
	// AgentsDir is the host's registry of agent identities (default
	// DefaultAgentsDir): a store whose agent is another store's here is
	// refused.
	AgentsDir string
	// Eager downloads the whole image before the store is used. By
	// default the blobs (the data of big files) are fetched after: in
	// the background once mounted, and first when a call needs one.
	Eager bool
	// AllowRollback resumes an image older than one this host or the
	// location's lease has seen (hibernate.ErrRolledBack otherwise): for
	// an operator who put an older image back on purpose. Its next
	// hibernate is still numbered above every generation seen.
	AllowRollback bool
	Logger        *slog.Logger
}

// ResumeStore takes the image's lease (refused with a *hibernate.HeldError
// while another host holds it) and downloads the image into Store,
// verified, without mounting it: Mount of that store renews the lease
// from then on. It fails with hibernate.ErrNoImage, ErrFormat, ErrCorrupt
// or ErrIncomplete for an image it cannot use, leaving nothing at Store.
func ResumeStore(ctx context.Context, o ResumeOptions) (hibernate.Stats, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = hibernate.DefaultLeaseTTL
	}
	loc, err := o.From.location()
	if err != nil {
		return hibernate.Stats{}, err
	}
	store, err := filepath.Abs(o.Store)
	if err != nil {
		return hibernate.Stats{}, err
	}
	key, err := hibernate.LoadKey(o.From.keyFile())
	if err != nil {
		return hibernate.Stats{}, err
	}
	rec, err := o.From.record()
	if err != nil {
		return hibernate.Stats{}, err
	}
	floor, err := rec.Seen(loc)
	if err != nil {
		return hibernate.Stats{}, err
	}
	c, err := hibernate.NewClient(ctx, loc, o.From.HTTPClient)
	if err != nil {
		return hibernate.Stats{}, err
	}
	host, _ := os.Hostname()
	if ok, _ := isStore(store); ok {
		return resumeKept(ctx, c, loc, store, host, key, rec, floor, o)
	}
	st := hibernate.NewState() // its StoreID is the image's, below
	st.LeaseTTL, st.KeyFile = o.LeaseTTL, o.From.keyFile()
	lease, err := hibernate.AcquireLease(ctx, c, loc, hibernate.LeaseOptions{Holder: st.Holder, Host: host, TTL: o.LeaseTTL,
		Key: key, Generation: floor, Warn: o.Logger.Warn})
	if err != nil {
		return hibernate.Stats{}, err
	}
	stop := lease.Keep(c, loc, o.LeaseTTL, nil)
	seen := lease.Generation // the host's record and the signed lease's
	_, _, stats, err := hibernate.Download(ctx, c, loc, store, hibernate.DownloadOptions{
		Lazy:          !o.Eager,
		Key:           key,
		MinGeneration: minGeneration(seen, o),
		Prepare: func(tmp string, m *hibernate.Manifest, etag string) error {
			if err := stop(); err != nil {
				return err
			}
			stop = func() error { return nil }
			if m.Generation < seen {
				o.Logger.Warn("resuming an image older than one seen at its location, as asked (--allow-rollback)", "at", loc.String(), "generation", m.Generation, "seen", seen)
			}
			st.StoreID, st.ManifestETag, st.LeaseETag = m.StoreID, etag, lease.ETag
			st.Generation = max(seen, m.Generation)
			st.SetLocation(loc)
			return hibernate.WriteState(tmp, st)
		},
	})
	stop()
	if err == nil {
		if rerr := rec.Raise(loc, stats.Generation); rerr != nil {
			o.Logger.Error("resumed, but recording the image's generation failed: this host would not notice an older image put back in its place", "err", rerr)
		}
	}
	if err == nil {
		if err = checkResumedAgent(store, o.AgentsDir); err != nil {
			os.RemoveAll(store)
		}
	}
	if err != nil {
		if rerr := lease.Release(ctx, c, loc); rerr != nil {
			o.Logger.Warn("resume failed, and releasing the lease failed too (it expires by itself)", "err", rerr)
		}
		return stats, err
	}
	o.Logger.Info("resumed", "from", loc.String(), "store", store, "files", stats.Files, "bytes", stats.Bytes, "downloaded", stats.Moved)
	return stats, nil
}

// checkResumedAgent opens the store a resume made and refuses it if its
// agent identity is one an agent must never have (an image is written by
// whoever can write the bucket) or that of another store on this host.
func checkResumedAgent(store, agentsDirOpt string) error {
	st, err := kv.Open(store, kv.Options{MinFree: -1, Ballast: -1})
	if err != nil {
		return fmt.Errorf("the resumed store does not open: %w", err)
	}
	a, ok, err := storedAgent(st)
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err != nil || !ok {
		return err
	}
	if err := checkAgent(a); err != nil {
		return fmt.Errorf("the image's agent identity: %w", err)
	}
	r, err := openRegistry(agentsDir(agentsDirOpt))
	if err != nil {
		return err
	}
	defer r.close()
	m, err := r.entries()
	if err != nil {
		return err
	}
	if e, ok := m[a.UID]; ok && e.Store != store && e.live() {
		return fmt.Errorf("the workspace's agent %s is the agent of the store %s on this host: two workspaces never share an agent (hibernate or remove that store first)", a, e.Store)
	}
	return nil
}

// minGeneration is the lowest manifest generation a resume takes.
func minGeneration(seen uint64, o ResumeOptions) uint64 {
	if o.AllowRollback {
		return 0
	}
	return seen
}

// resumeKept resumes into a store directory that holds a store already:
// only the copy a hibernate kept, of the image as it still is.
func resumeKept(ctx context.Context, c *s3.Client, loc hibernate.Location, store, host string, key []byte, rec *hibernate.Record, floor uint64, o ResumeOptions) (hibernate.Stats, error) {
	st, err := hibernate.ReadState(store)
	if err != nil {
		return hibernate.Stats{}, err
	}
	// Its bytes are the copy's own when their ETag (S3's digest of the
	// content) is the one the copy recorded: no signature needed.
	m, etag, err := hibernate.ReadManifest(ctx, c, loc)
	if err != nil {
		return hibernate.Stats{}, err
	}
	if st.URL != loc.String() || st.StoreID != m.StoreID || st.ManifestETag != etag {
		return hibernate.Stats{}, fmt.Errorf("%s holds a store that is not the image at %s as it is now: resume into a new directory (or mount this store)", store, loc)
	}
	unlock, err := hibernate.LockStore(store)
	if err != nil {
		return hibernate.Stats{}, err
	}
	defer unlock()
	lease, err := hibernate.AcquireLease(ctx, c, loc, hibernate.LeaseOptions{Holder: st.Holder, Host: host, TTL: o.LeaseTTL,
		Key: key, Generation: max(floor, st.Generation), Warn: o.Logger.Warn})
	if err != nil {
		return hibernate.Stats{}, err
	}
	// The kept copy's manifest put back over a newer image has the
	// copy's ETag again (S3's ETag is the content's digest).
	if err := hibernate.CheckGeneration(loc, m, minGeneration(lease.Generation, o)); err != nil {
		if rerr := lease.Release(ctx, c, loc); rerr != nil {
			o.Logger.Warn("releasing the lease failed (it expires by itself)", "err", rerr)
		}
		return hibernate.Stats{}, err
	}
	st.Generation = max(lease.Generation, m.Generation)
	if err := rec.Raise(loc, m.Generation); err != nil {
		o.Logger.Error("recording the image's generation failed", "err", err)
	}
	st.LeaseETag, st.LeaseTTL, st.KeyFile = lease.ETag, o.LeaseTTL, o.From.keyFile()
	st.SetLocation(loc) // the endpoint as given now
	if err := hibernate.WriteState(store, st); err != nil {
		return hibernate.Stats{}, err
	}
	o.Logger.Info("resumed from the local copy of the image", "from", loc.String(), "store", store)
	return hibernate.Stats{Files: len(m.Files), Bytes: m.Bytes()}, nil
}

// Resume resumes a hibernated workspace (ResumeStore) and mounts it with
// mo (whose Store is o.Store).
func Resume(ctx context.Context, o ResumeOptions, mo MountOptions) (*Workspace, hibernate.Stats, error) {
	stats, err := ResumeStore(ctx, o)
	if err != nil {
		return nil, stats, err
	}
	mo.Store = o.Store
	w, err := Mount(mo)
	return w, stats, err
}

// Hibernate unmounts the workspace (in this process) and hibernates its
// store (o's Mountpoint and Store are the workspace's).
func (w *Workspace) Hibernate(ctx context.Context, o HibernateOptions) (hibernate.Stats, error) {
	if err := w.Unmount(); err != nil {
		return hibernate.Stats{}, err
	}
	o.Mountpoint, o.Store = "", w.Store.Dir()
	return Hibernate(ctx, o)
}

// leaseKeeper renews the lease of a resumed store while it is mounted.
type leaseKeeper struct{ stop func() error }

// keepLease starts renewing the store's lease if it holds one (it was
// resumed and not hibernated since); nil if it holds none.
func keepLease(store string, hc *http.Client, log *slog.Logger) *leaseKeeper {
	if _, err := os.Stat(filepath.Join(store, hibernate.StateFile)); err != nil {
		return nil
	}
	st, err := hibernate.ReadState(store)
	if err != nil {
		log.Error("the store's hibernate state is unreadable: its lease is not renewed", "err", err)
		return nil
	}
	if st.LeaseETag == "" {
		return nil
	}
	loc, err := st.Location()
	if err != nil {
		log.Error("the store's hibernate state has no location: its lease is not renewed", "err", err)
		return nil
	}
	c, err := hibernate.NewClient(context.Background(), loc, hc)
	if err != nil {
		log.Error("no S3 client for the lease: it is not renewed", "err", err)
		return nil
	}
	ttl := st.LeaseTTL
	if ttl <= 0 {
		ttl = hibernate.DefaultLeaseTTL
	}
	host, _ := os.Hostname()
	keyFile := st.KeyFile
	if keyFile == "" {
		keyFile = hibernate.KeyFile("")
	}
	key, err := hibernate.LoadKey(keyFile)
	if err != nil {
		// Renewed unsigned, other hosts take the lease as forged.
		log.Error("the image key is unreadable: the workspace's lease is renewed unsigned, and another host may take it over", "err", err)
		key = nil
	}
	l := hibernate.Held(st.Holder, host, st.LeaseETag, st.Generation, key, log.Warn)
	stop := l.Keep(c, loc, ttl, func(l *hibernate.Lease, err error) {
		switch {
		case errors.Is(err, hibernate.ErrLeaseLost):
			log.Error("the workspace's lease was taken by another host: its image may be resumed there; hibernating this store will be refused", "at", loc.String())
		case err != nil:
			log.Warn("renewing the workspace's lease failed; trying again", "at", loc.String(), "err", err, "expires", l.Expires)
		default:
			st.LeaseETag = l.ETag
			if err := hibernate.WriteState(store, st); err != nil {
				log.Warn("recording the renewed lease failed", "err", err)
			}
		}
	})
	log.Info("holding the workspace's lease", "at", loc.String(), "ttl", ttl)
	return &leaseKeeper{stop: stop}
}

// openBlobFetcher returns the fetcher of the blobs a lazy resume left
// for later, if the store still lacks some (nil if none).
func openBlobFetcher(store string, hc *http.Client, log *slog.Logger) (*hibernate.Fetcher, error) {
	if !hibernate.HasPending(store) {
		return nil, nil
	}
	st, err := hibernate.ReadState(store)
	if err != nil {
		return nil, err
	}
	loc, err := st.Location()
	if err != nil {
		return nil, fmt.Errorf("the store still lacks blobs of its image, but: %w", err)
	}
	c, err := hibernate.NewClient(context.Background(), loc, hc)
	if err != nil {
		return nil, err
	}
	fe, err := hibernate.OpenFetcher(store, c, loc, log)
	if err != nil {
		return nil, fmt.Errorf("the blobs still to fetch from %s: %w", loc, err)
	}
	if fe != nil {
		st := fe.Stats()
		log.Info("fetching the workspace's blobs from its image in the background", "from", loc.String(), "blobs", st.Owed)
	}
	return fe, nil
}

// checkImageOutsideSources refuses an image location that shares keys
// with one of the store's S3 sources: the agent reads those keys (import,
// refresh, lazy reads) and writes them (write-back), so it could read its
// image's chunks (the raw store, denied files included) and overwrite
// them. Prefixes are compared as key spaces, whatever the endpoints.
func checkImageOutsideSources(store string, loc hibernate.Location) error {
	st, err := kv.Open(store, kv.Options{MinFree: -1, Ballast: -1})
	if err != nil {
		return fmt.Errorf("hibernate: %s: %w", store, err)
	}
	sp, err := storedSpec(st)
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err != nil || sp == nil {
		return err
	}
	img := loc.Prefix + "/"
	if loc.Prefix == "" {
		img = ""
	}
	for _, src := range sp.Sources {
		if src.S3 == nil || src.S3.Bucket != loc.Bucket {
			continue
		}
		p := strings.TrimLeft(src.S3.Prefix, "/")
		if strings.HasPrefix(p, img) || strings.HasPrefix(img, p) {
			return fmt.Errorf("hibernate: %s shares keys with the workspace's S3 source %s (s3://%s/%s): the agent could read and write its own image there; hibernate to a prefix outside every source", loc, src.Path, src.S3.Bucket, src.S3.Prefix)
		}
	}
	return nil
}
