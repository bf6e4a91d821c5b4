package computerfs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/sources"
	"github.com/computerfs/computerfs/spec"
	"github.com/computerfs/computerfs/wsfs"
)

// Meta keys the workspace keeps in its store.
const (
	metaSpec     = "spec"     // the spec the store was imported from (JSON)
	metaImported = "imported" // when the import finished (RFC 3339)
)

// ImportOptions configure Import.
type ImportOptions struct {
	Spec  *spec.Spec
	Store string // store directory
	// Owner owns the imported files unless the spec names one (default:
	// the workspace's agent identity, so that the agent can edit them).
	Owner *wsfs.Owner
	// Agent is the workspace's agent identity (see MountOptions.Agent).
	Agent      AgentOptions
	Logger     *slog.Logger
	Progress   *sources.Progress
	HTTPClient *http.Client // for S3 (nil: the SDK's, with timeouts)
	// MemTableSize and CacheSize tune the store during the import (0: defaults).
	MemTableSize uint64
	CacheSize    int64
}

// ErrNotImported is returned by Import for an existing store that was not
// made from a spec: importing into it would mix a workspace's files with
// the sources'.
var ErrNotImported = errors.New("store exists and was not imported from a spec")

// Import populates a new store from a spec and reports whether it did: a
// store that was already imported is left alone (imported false).
//
// The store is built in a staging directory beside Store and renamed into
// place only once complete, so an interrupted import (an error, a crash, a
// kill) leaves no store that looks populated; the next Import throws the
// staging directory away and starts again.
func Import(ctx context.Context, opts ImportOptions) (imported bool, err error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	dir, err := filepath.Abs(opts.Store)
	if err != nil {
		return false, err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return false, err
	}
	// One import per store at a time: the lock covers the staging directory.
	lock, err := os.OpenFile(dir+".import-lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return false, err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return false, fmt.Errorf("store %s: another import of it is running", dir)
	}
	defer os.Remove(lock.Name())

	if done, err := alreadyImported(dir, opts); done || err != nil {
		return false, err
	}
	stage := dir + ".importing"
	if _, err := os.Stat(stage); err == nil {
		opts.Logger.Warn("removing an interrupted import", "dir", stage)
	}
	if err := os.RemoveAll(stage); err != nil {
		return false, fmt.Errorf("remove interrupted import: %w", err)
	}
	agent, err := resolveAgent(dir, opts.Spec, opts.Agent)
	if err != nil {
		return false, err
	}
	start := time.Now()
	if err := importInto(ctx, stage, agent, opts); err != nil {
		if rerr := os.RemoveAll(stage); rerr != nil {
			opts.Logger.Error("removing the failed import", "dir", stage, "err", rerr)
		}
		return false, err
	}
	// rename(2), not os.Rename: it replaces an empty directory (one the
	// user made for the store), which os.Rename refuses.
	if err := syscall.Rename(stage, dir); err != nil {
		err = &os.LinkError{Op: "rename", Old: stage, New: dir, Err: err}
		os.RemoveAll(stage)
		return false, fmt.Errorf("store %s: %w (did something create it during the import?)", dir, err)
	}
	if err := syncDir(filepath.Dir(dir)); err != nil {
		return false, err
	}
	opts.Logger.Info("import finished", "store", dir, "sources", len(opts.Spec.Sources), "elapsed", time.Since(start).Round(time.Millisecond).String())
	return true, nil
}

// alreadyImported tells whether dir holds a store imported from a spec. A
// missing or empty dir is not (an empty one is left in place until the
// import is complete: the rename replaces it, and a failed import leaves
// it as it was); a store made some other way is an error.
func alreadyImported(dir string, opts ImportOptions) (bool, error) {
	if err := kv.CheckDir(dir); err != nil {
		return false, err
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) || err == nil && len(entries) == 0 {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	st, err := kv.Open(dir, kv.Options{Logger: opts.Logger})
	if err != nil {
		return false, err
	}
	defer st.Close()
	old, err := st.GetMeta(metaSpec)
	if err == kv.ErrNotFound {
		return false, fmt.Errorf("%s: %w (import into a new store directory)", dir, ErrNotImported)
	}
	if err != nil {
		return false, err
	}
	if now, _ := json.Marshal(opts.Spec); string(now) != string(old) {
		opts.Logger.Warn("the store was imported from a different spec; keeping what it holds (import into a new store to apply the new spec)", "store", dir)
	}
	return true, nil
}

func importInto(ctx context.Context, stage string, agent Agent, opts ImportOptions) error {
	// No journal: what the sources hold is the starting point, not a change.
	// No syncs until the end: an import that stops is thrown away, and one
	// pass over the finished store (in parallel) costs far less than the
	// dozens of syncs Pebble makes on the way (eleven to create the store).
	st, err := kv.Open(stage, kv.Options{Logger: opts.Logger, MemTableSize: opts.MemTableSize, CacheSize: opts.CacheSize, NoJournal: true, NoSync: true})
	if err != nil {
		return err
	}
	owner := agent.owner()
	if opts.Owner != nil {
		owner = *opts.Owner
	}
	im := &sources.Importer{Store: st, Spec: opts.Spec, Owner: owner, Log: opts.Logger,
		Progress: opts.Progress, HTTPClient: opts.HTTPClient}
	err = im.Run(ctx)
	if err == nil {
		err = privateRoot(st, agent)
	}
	if err == nil {
		err = recordAgent(st, agent)
	}
	if err == nil {
		var js []byte
		js, err = json.Marshal(opts.Spec)
		if err == nil {
			err = st.SetMeta(metaSpec, js)
		}
		if err == nil {
			err = st.SetMeta(metaImported, []byte(time.Now().UTC().Format(time.RFC3339Nano)))
		}
		if err == nil {
			err = st.WriteTables()
		}
	}
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = kv.SyncTree(stage)
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// storedSpec returns the spec a store was imported from, or nil.
func storedSpec(st *kv.Store) (*spec.Spec, error) {
	js, err := st.GetMeta(metaSpec)
	if err == kv.ErrNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var sp spec.Spec
	if err := json.Unmarshal(js, &sp); err != nil {
		return nil, fmt.Errorf("store's spec: %w", err)
	}
	return &sp, nil
}
