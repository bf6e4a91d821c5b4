package computerfs

import (
	"cmp"
	"context"
	"path/filepath"
	"time"

	"github.com/computerfs/computerfs/sources"
	"github.com/computerfs/computerfs/spec"
	"github.com/computerfs/computerfs/syncer"
)

// startSyncer runs sync back for the spec's S3 sources with write_back and
// git sources with push,
// and journal trimming for every workspace.
func (w *Workspace) startSyncer(opts MountOptions) error {
	var srcs []syncer.Source
	so := syncer.Options{FS: w.FS, Lock: &w.refreshMu, Log: w.log}
	if w.spec != nil {
		for i, s := range w.spec.Sources {
			if s.Git != nil && s.Git.Push.On {
				t, err := gitTarget(s.Git, w.Name())
				if err != nil {
					return err
				}
				srcs = append(srcs, syncer.Source{Index: i, Path: s.Path, Kind: "git", Repo: t,
					OnSync: s.Git.Push.When == spec.PushOnSync, AgentCommits: s.Git.Push.Commit == spec.CommitAgent,
					CommitOnSync: cmp.Or(s.Git.Push.Commit, spec.CommitOnSync) == spec.CommitOnSync})
				continue
			}
			if s.S3 == nil || !s.S3.WriteBack {
				continue
			}
			client, err := sources.NewS3Client(context.Background(), s.S3, w.httpClient)
			if err != nil {
				return err
			}
			srcs = append(srcs, syncer.Source{Index: i, Path: s.Path, Kind: "s3", Prefix: s.S3.Prefix,
				Target: &syncer.S3Target{Client: client, Bucket: s.S3.Bucket,
					Mode:        syncer.Conditional(cmp.Or(s.S3.Conditional, string(syncer.Auto))),
					MaxFileSize: int64(s.S3.MaxFileSize)}})
		}
		so.Debounce, so.Retention = syncTimes(w.spec.Sync)
	}
	if opts.SyncDebounce > 0 {
		so.Debounce = opts.SyncDebounce
	}
	so.Sources = srcs
	sy, err := syncer.New(so)
	if err != nil {
		return err
	}
	w.syncer = sy
	w.syncerReady.Store(sy)
	sy.Start()
	return nil
}

// Name is the workspace's name: the spec's name, or the base name of the
// store's directory. Its git sources push to computerfs/NAME by default.
func (w *Workspace) Name() string {
	if w.spec != nil && w.spec.Name != "" {
		return w.spec.Name
	}
	return filepath.Base(w.Store.Dir())
}

// gitTarget is the push-back of a git source in the workspace called ws:
// the url and credentials the import used, the spec's author and message,
// and the branch: the spec's, or computerfs/WS, never the one checked out
// (the agent's own pushes go there).
func gitTarget(g *spec.Git, ws string) (*syncer.GitTarget, error) {
	url := sources.GitURL(g.URL)
	auth, err := sources.GitAuth(g, url)
	if err != nil {
		return nil, err
	}
	name, email, err := spec.ParseAuthor(cmp.Or(g.Author, spec.DefaultGitAuthor))
	if err != nil {
		return nil, err
	}
	return &syncer.GitTarget{URL: url, Auth: auth, Branch: g.PushBranch(ws), Name: name, Email: email, Message: g.Message,
		MaxFileSize: int64(g.MaxFileSize)}, nil
}

// syncTimes reads the spec's debounce and retention (0: the defaults).
func syncTimes(s *spec.Sync) (debounce, retention time.Duration) {
	if s == nil {
		return 0, 0
	}
	debounce = time.Duration(s.Debounce)
	if s.JournalRetention != nil {
		retention = max(time.Duration(*s.JournalRetention), time.Nanosecond)
	}
	return debounce, retention
}

// Sync writes back everything pending now (debounce or not) and reports
// what it did.
func (w *Workspace) Sync(ctx context.Context) syncer.Report {
	return w.syncer.Sync(ctx)
}

// written hears from the mount that a file was closed after writing or
// fsynced.
func (w *Workspace) written(ino uint64) {
	if sy := w.syncerReady.Load(); sy != nil {
		sy.Ready(ino)
	}
}
