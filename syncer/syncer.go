package syncer

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	"math"
	"math/rand/v2"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/wsfs"
)

// Source is one source of the workspace with write-back.
type Source struct {
	Index int    // in the spec (names its meta values)
	Path  string // its directory in the workspace
	Kind  string // "s3" or "git"
	// Prefix maps a path below Path to its remote name: Prefix + rel. It
	// is "" or ends in "/".
	Prefix string
	Target Target
	// Repo, if set, takes the place of Target: the source is written back
	// as a whole (git), see repoPass.
	Repo RepoTarget
	// OnSync: the source is written back only by an explicit Sync, never
	// in the background (git push.when: sync).
	OnSync bool
	// AgentCommits: a repository source pushes the commits the agent
	// made and never commits the work tree's changes itself (git
	// push.commit: agent).
	AgentCommits bool
	// CommitOnSync: a repository source commits the work tree's changes
	// only in an explicit Sync; the background pushes the agent's
	// commits alone, so it never commits an edit the agent is about to
	// commit itself (git push.commit: sync, the daemon's default).
	CommitOnSync bool
}

// Options configure a Syncer.
type Options struct {
	FS      *wsfs.FS
	Sources []Source
	// Debounce is how long a path must be left alone before it is written
	// back (default 1 s); a close after writing or an fsync ends it early.
	Debounce time.Duration
	// Retention is how long synced journal records are kept (default 7
	// days; negative: for ever).
	Retention time.Duration
	// Lock, if set, is held during every pass (the workspace's refresh
	// lock: a refresh and a pass never interleave their manifest updates).
	Lock sync.Locker
	Log  *slog.Logger
	// MinBackoff and MaxBackoff bound the wait after a failed pass
	// (defaults 1 s and 5 min); each failure doubles it, with jitter.
	MinBackoff, MaxBackoff time.Duration
	// Tick is how often the background loop looks for work (default a
	// quarter of Debounce, between 20 ms and 1 s).
	Tick time.Duration
	// TrimEvery is how often the background loop trims the journal
	// (default a minute).
	TrimEvery time.Duration
}

// Syncer writes changes back to the sources of one workspace.
type Syncer struct {
	opts Options
	st   *kv.Store
	fs   *wsfs.FS
	srcs []*source

	passMu sync.Mutex // one pass at a time

	mu       sync.Mutex // guards closed and the sources' status fields
	closed   map[uint64]int64
	lastTrim time.Time
	// lastQuotaTrim: when the loop last trimmed for the quota.
	lastQuotaTrim time.Time

	// passes numbers the passes that go to a remote (an S3 pass with
	// something to put or delete, a git pass that runs), from 1 in each
	// process: a git pass's own changes to the store are journaled as
	// "sync #N", and the log's "synced" records name the pass.
	passes atomic.Uint64

	started    atomic.Bool
	kick       chan struct{}
	stop, done chan struct{}
	closeOnce  sync.Once
}

type source struct {
	Source
	cursor   uint64 // in memory; may be ahead of the stored one
	saved    time.Time
	failures int
	nextTry  time.Time
	waiting  bool // the last pass left paths for later
	// looked is the last record a repository pass looked at: the
	// cursor may stay behind it (edits left for an explicit Sync)
	// without the loop passing again for nothing new.
	looked     uint64
	last       LastResult
	targetMode string
}

// LastResult is the outcome of a source's latest pass that did anything.
type LastResult struct {
	Time   time.Time `json:"time"`
	Result string    `json:"result"`
	OK     bool      `json:"ok"`
}

// Conflict is a path that the remote changed behind the workspace's back.
type Conflict struct {
	Path   string    `json:"path"`
	Reason string    `json:"reason"`
	Remote string    `json:"remote,omitempty"` // the remote's version ("" none)
	Time   time.Time `json:"time"`
}

// Report says what a pass (or an explicit sync) did, per source.
type Report struct {
	Sources []SourceReport `json:"sources"`
}

// SourceReport is one source's part of a Report.
type SourceReport struct {
	Path     string   `json:"path"`
	Kind     string   `json:"kind"`
	Uploaded []string `json:"uploaded,omitempty"`
	Deleted  []string `json:"deleted,omitempty"`
	// Git: the commit made of the work tree's changes, and its changes
	// ("M path"); the branch pushed to and the commit it now holds.
	Commit    string     `json:"commit,omitempty"`
	Committed []string   `json:"committed,omitempty"`
	Branch    string     `json:"branch,omitempty"`
	Pushed    string     `json:"pushed,omitempty"`
	Conflicts []Conflict `json:"conflicts,omitempty"`
	Errors    []string   `json:"errors,omitempty"`
	// Waiting counts paths left for a later pass (still being written).
	Waiting int `json:"waiting,omitempty"`
}

// Failed reports whether any source failed or had conflicts.
func (r *Report) Failed() bool {
	for _, s := range r.Sources {
		if len(s.Errors) > 0 || len(s.Conflicts) > 0 {
			return true
		}
	}
	return false
}

func (r *SourceReport) summary() string {
	parts := []string{fmt.Sprintf("%d uploaded, %d deleted", len(r.Uploaded), len(r.Deleted))}
	if r.Kind == "git" {
		parts = parts[:0]
		if r.Commit != "" {
			parts = append(parts, fmt.Sprintf("committed %d changes as %.12s", len(r.Committed), r.Commit))
		}
		if r.Pushed != "" {
			parts = append(parts, fmt.Sprintf("pushed %.12s to %s", r.Pushed, r.Branch))
		} else if len(r.Conflicts) == 0 && len(r.Errors) == 0 {
			parts = append(parts, "up to date")
		}
	}
	if n := len(r.Conflicts); n > 0 {
		parts = append(parts, fmt.Sprintf("%d in conflict", n))
	}
	if n := len(r.Errors); n > 0 {
		parts = append(parts, fmt.Sprintf("%d failed (%s)", n, r.Errors[0]))
	}
	return strings.Join(parts, ", ")
}

// Meta names. The manifest (s3/IDX/KEY) is shared with sources (import
// and refresh write it).
func cursorKey(idx int) string               { return fmt.Sprintf("sync/%d/cursor", idx) }
func lastKey(idx int) string                 { return fmt.Sprintf("sync/%d/last", idx) }
func conflictPrefix(idx int) string          { return fmt.Sprintf("sync/%d/conflict/", idx) }
func conflictKey(idx int, rel string) string { return conflictPrefix(idx) + rel }

// ManifestKey names the meta value holding the version that the remote
// of S3 source idx last had at key (sources.manifestKey writes the same).
func ManifestKey(idx int, key string) string { return fmt.Sprintf("s3/%d/%s", idx, key) }

// New returns a syncer; Start runs it in the background.
func New(opts Options) (*Syncer, error) {
	if opts.Debounce <= 0 {
		opts.Debounce = time.Second
	}
	if opts.Retention == 0 {
		opts.Retention = 7 * 24 * time.Hour
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = time.Second
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 5 * time.Minute
	}
	if opts.Tick <= 0 {
		opts.Tick = min(max(opts.Debounce/4, 20*time.Millisecond), time.Second)
	}
	if opts.TrimEvery <= 0 {
		opts.TrimEvery = time.Minute
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	s := &Syncer{opts: opts, st: opts.FS.Store(), fs: opts.FS, closed: map[uint64]int64{},
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	for _, src := range opts.Sources {
		if src.Prefix != "" && !strings.HasSuffix(src.Prefix, "/") {
			src.Prefix += "/"
		}
		x := &source{Source: src}
		v, err := s.st.GetMeta(cursorKey(src.Index))
		switch {
		case err == nil && len(v) == 8:
			x.cursor = binary.BigEndian.Uint64(v)
		case err == nil:
			return nil, fmt.Errorf("sync cursor of source %d: %d bytes, want 8", src.Index, len(v))
		case err != kv.ErrNotFound:
			return nil, err
		}
		if v, err := s.st.GetMeta(lastKey(src.Index)); err == nil {
			json.Unmarshal(v, &x.last)
		}
		x.waiting = true // look at once: there may be work from before a restart
		s.srcs = append(s.srcs, x)
	}
	return s, nil
}

// Start runs the background loop: passes as paths become ready, retries
// with backoff, and journal trimming.
func (s *Syncer) Start() {
	s.started.Store(true)
	go s.run()
}

// Close stops the background loop and waits for a pass in progress.
func (s *Syncer) Close() {
	s.closeOnce.Do(func() {
		close(s.stop)
		if !s.started.Load() {
			return
		}
		select {
		case <-s.done:
		case <-time.After(time.Minute):
		}
	})
}

// Ready notes that ino was closed after writing or fsynced: its pending
// changes need not wait for the debounce.
func (s *Syncer) Ready(ino uint64) {
	if len(s.srcs) == 0 {
		return // nothing to write back: remember nothing
	}
	s.mu.Lock()
	s.closed[ino] = time.Now().UnixNano()
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// forgetCloses drops the closes noted long enough ago that the debounce
// alone has made their changes ready since: the map would otherwise grow
// with every file ever written.
func (s *Syncer) forgetCloses(now time.Time) {
	horizon := now.Add(-max(10*s.opts.Debounce, time.Minute)).UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	for ino, at := range s.closed {
		if at < horizon {
			delete(s.closed, ino)
		}
	}
}

func (s *Syncer) closedAt(ino uint64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed[ino]
}

func (s *Syncer) run() {
	defer close(s.done)
	t := time.NewTicker(s.opts.Tick)
	defer t.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.stop
		cancel()
	}()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		case <-s.st.QuotaHits():
			// A change was refused for the quota: trim what no sync
			// needs now (at most every quotaHitTrimEvery), rather than at
			// the next quotaTrimEvery.
			if now := time.Now(); now.Sub(s.lastQuotaTrim) >= quotaHitTrimEvery {
				s.lastQuotaTrim = now
				if _, err := s.Trim(now); err != nil {
					s.opts.Log.Error("journal trim failed", "err", err)
				}
			}
			continue
		case <-s.kick:
			// Gather the closes that follow (a program writing many
			// files) into one pass.
			select {
			case <-time.After(gather):
			case <-s.stop:
				return
			}
		}
		s.cycle(ctx)
	}
}

// gather is how long a close waits for others to join its pass.
const gather = 10 * time.Millisecond

// cycle passes over the sources that have work and are not backing off.
func (s *Syncer) cycle(ctx context.Context) {
	now := time.Now()
	last := s.st.LastSeq()
	for _, src := range s.srcs {
		s.mu.Lock()
		skip := src.OnSync || now.Before(src.nextTry) || last <= max(src.cursor, src.looked) && !src.waiting
		s.mu.Unlock()
		if skip || ctx.Err() != nil {
			continue
		}
		s.pass(ctx, src, false)
	}
	if now.Sub(s.lastTrim) >= s.opts.TrimEvery {
		s.lastTrim = now
		s.forgetCloses(now)
		if _, err := s.Trim(now); err != nil {
			s.opts.Log.Error("journal trim failed", "err", err)
		}
	}
	if s.nearQuota() && now.Sub(s.lastQuotaTrim) >= quotaTrimEvery {
		s.lastQuotaTrim = now
		if _, err := s.Trim(now); err != nil {
			s.opts.Log.Error("journal trim failed", "err", err)
		}
	}
}

// quotaTrimEvery is how often the loop trims the journal while the
// workspace is near its quota.
const quotaTrimEvery = 2 * time.Second

// quotaHitTrimEvery is how often a refused change makes the loop trim at
// once: a program retrying its write in a loop must not make every one
// of its failures a trim.
const quotaHitTrimEvery = 100 * time.Millisecond

// nearQuota tells whether the workspace holds 7/8 of its quota or more
// (the journal and the audit count in it: kv's usage).
func (s *Syncer) nearQuota() bool {
	u := s.st.UsageDetail()
	return u.Quota > 0 && u.Used >= u.Quota-u.Quota/8
}

// Sync writes back everything pending now, debounce or not, conflicts
// included, and says what it did.
func (s *Syncer) Sync(ctx context.Context) Report {
	rep := Report{Sources: []SourceReport{}}
	for _, src := range s.srcs {
		rep.Sources = append(rep.Sources, s.pass(ctx, src, true))
	}
	return rep
}

// Trim deletes journal records that every source has synced and that are
// older than the retention, or, while the workspace holds 7/8 of its
// quota or more (the journal counts in it), every record synced whatever
// its age: the quota wins over the retention. Records not yet synced stay
// (sync back needs them); the quota bounds them. It returns how many went.
func (s *Syncer) Trim(now time.Time) (int, error) {
	if s.opts.Retention < 0 {
		return 0, nil
	}
	s.passMu.Lock()
	defer s.passMu.Unlock()
	upto := s.st.LastSeq()
	for _, src := range s.srcs {
		upto = min(upto, src.cursor)
	}
	before := now.Add(-s.opts.Retention).UnixNano()
	near := s.nearQuota()
	if near {
		before = math.MaxInt64
	}
	n, err := s.st.TrimJournal(upto, before)
	if n > 0 {
		s.opts.Log.Info("journal trimmed", "records", n, "synced_up_to", upto, "near_quota", near)
	}
	return n, err
}

// newPass returns the id of a new pass.
func (s *Syncer) newPass() string { return strconv.FormatUint(s.passes.Add(1), 10) }

// key is the remote name of rel.
func (src *source) key(rel string) string { return src.Prefix + rel }

// rel is the path of a remote name, or false for a name that is no path.
func (src *source) rel(key string) (string, bool) {
	rel := strings.TrimLeft(strings.TrimPrefix(key, src.Prefix), "/")
	if rel == "" || strings.HasSuffix(rel, "/") {
		return "", false
	}
	for _, p := range strings.Split(rel, "/") {
		if p == "" || p == "." || p == ".." || len(p) > kv.MaxNameLen {
			return "", false
		}
	}
	return rel, true
}

// item is one pending path in a pass.
type item struct {
	touch  *Touch
	file   File
	action Action
	change Change
}

// pass looks at one source's pending paths and writes back those that are
// ready (all of them with force).
func (s *Syncer) pass(ctx context.Context, src *source, force bool) SourceReport {
	s.passMu.Lock()
	defer s.passMu.Unlock()
	if s.opts.Lock != nil {
		s.opts.Lock.Lock()
		defer s.opts.Lock.Unlock()
	}
	rep := SourceReport{Path: src.Path, Kind: src.Kind}
	fail := func(err error) SourceReport {
		rep.Errors = append(rep.Errors, err.Error())
		s.finish(src, &rep, force)
		return rep
	}
	last := s.st.SealJournal()
	var recs []kv.Record
	err := s.st.ReadJournal(src.cursor, func(r kv.Record) bool {
		if r.Seq > last {
			return false
		}
		recs = append(recs, r)
		return true
	})
	if err != nil {
		return fail(err)
	}
	conflicts, err := s.conflicts(src)
	if err != nil {
		return fail(err)
	}
	if src.Repo != nil {
		return s.repoPass(ctx, src, recs, last, conflicts, force)
	}
	cands := map[string]*Touch{}
	for _, t := range Touches(src.Path, recs) {
		if err := s.expand(src, t, cands); err != nil {
			return fail(err)
		}
	}
	if force {
		for rel := range conflicts {
			if cands[rel] == nil {
				cands[rel] = &Touch{Rel: rel} // First 0: does not hold the cursor
			}
		}
	}
	now := time.Now()
	var notDone []uint64
	var items []*item
	for _, rel := range sortedRels(cands) {
		t := cands[rel]
		f, err := s.state(src, rel, conflicts)
		if err != nil {
			rep.Errors = append(rep.Errors, err.Error())
			notDone = append(notDone, t.First)
			continue
		}
		if !force && !Ready(t, now, s.opts.Debounce, s.closedAt(f.Ino)) {
			rep.Waiting++
			notDone = append(notDone, t.First)
			continue
		}
		it := &item{touch: t, file: f, action: Decide(src.key(rel), f)}
		it.change = Change{Rel: rel, Key: src.key(rel), Expect: f.Version}
		switch it.action {
		case Put:
			it.change.Size = f.Size
			it.change.Data = &fileData{st: s.st, ino: f.Ino, ctime: f.Ctime}
		case Delete, Recheck:
			it.change.Delete = true
		}
		items = append(items, it)
	}

	// Fetch lazy files that must be uploaded (renamed, say) before any
	// delete: their content may live only under the old name.
	var puts, dels []*item
	fetchFailed := false
	for _, it := range items {
		switch it.action {
		case Put:
			if err := s.st.Fetch(it.file.Ino); err != nil && !errors.Is(err, kv.ErrNotFound) {
				rep.Errors = append(rep.Errors, fmt.Sprintf("%s: %v", path.Join(src.Path, it.change.Rel), err))
				notDone = append(notDone, it.touch.First)
				fetchFailed = true
				continue
			}
			puts = append(puts, it)
		case Delete, Recheck:
			dels = append(dels, it)
		}
	}
	if fetchFailed {
		for _, it := range dels {
			notDone = append(notDone, it.touch.First)
		}
		dels = nil
	}

	set := map[string][]byte{}
	var del []string
	var origins []kv.OriginUpdate
	for _, it := range items {
		if it.action == Nothing && it.file.Conflict {
			del = append(del, conflictKey(src.Index, it.change.Rel)) // resolved
		}
	}
	var pass string
	if len(puts)+len(dels) > 0 {
		pass = s.newPass()
		// What the remote gets must survive here first (see GitTarget's
		// SyncRepo): a crash must not take back a change already uploaded.
		if err := s.st.Sync(); err != nil {
			return fail(fmt.Errorf("sync the store before uploading: %w", err))
		}
	}
	for _, group := range [][]*item{puts, dels} {
		if len(group) == 0 {
			continue
		}
		changes := make([]Change, len(group))
		for i, it := range group {
			changes[i] = it.change
		}
		results := src.Target.Apply(ctx, changes)
		for i, it := range group {
			res := results[i]
			p := path.Join(src.Path, it.change.Rel)
			mkey := ManifestKey(src.Index, it.change.Key)
			switch {
			case errors.Is(res.Err, ErrChanged):
				rep.Waiting++
				notDone = append(notDone, it.touch.First)
			case res.Err != nil:
				rep.Errors = append(rep.Errors, fmt.Sprintf("%s: %v", p, res.Err))
				notDone = append(notDone, it.touch.First)
			case res.Conflict != "":
				c := Conflict{Path: p, Reason: res.Conflict, Remote: res.Remote, Time: now}
				rep.Conflicts = append(rep.Conflicts, c)
				v, _ := json.Marshal(c)
				set[conflictKey(src.Index, it.change.Rel)] = v
				if it.change.Delete && it.file.Version != "" {
					// Gone here, changed there: forget the old version so
					// that a refresh brings the remote's in.
					del = append(del, mkey)
				}
			case it.change.Delete:
				if it.file.Version != "" {
					rep.Deleted = append(rep.Deleted, p)
					del = append(del, mkey)
				}
				if it.file.Conflict {
					del = append(del, conflictKey(src.Index, it.change.Rel))
				}
			default:
				if !res.Same || it.file.Version != res.Version {
					rep.Uploaded = append(rep.Uploaded, p) // (a replay counts: this pass found it done)
				}
				origins = append(origins, kv.OriginUpdate{Ino: it.file.Ino,
					Origin: kv.Origin{Source: uint32(src.Index), Key: it.change.Key, ID: res.Version, Ctime: it.file.Ctime}})
				set[mkey] = []byte(res.Version)
				if it.file.Conflict {
					del = append(del, conflictKey(src.Index, it.change.Rel))
				}
			}
		}
	}
	sort.Strings(rep.Uploaded)
	sort.Strings(rep.Deleted)
	sort.Slice(rep.Conflicts, func(i, j int) bool { return rep.Conflicts[i].Path < rep.Conflicts[j].Path })
	cursor := Advance(src.cursor, last, notDone)
	did := len(set)+len(del)+len(origins) > 0
	if did || force || cursor != src.cursor && now.Sub(src.saved) > 10*time.Second {
		set[cursorKey(src.Index)] = binary.BigEndian.AppendUint64(nil, cursor)
		lr := LastResult{Time: now, Result: rep.summary(), OK: len(rep.Errors) == 0 && len(rep.Conflicts) == 0}
		if did || force || len(rep.Errors) > 0 {
			v, _ := json.Marshal(lr)
			set[lastKey(src.Index)] = v
		}
		if err := s.st.CommitSync(origins, set, del); err != nil {
			return fail(err)
		}
		s.mu.Lock()
		if did || force || len(rep.Errors) > 0 {
			src.last = lr
		}
		s.mu.Unlock()
		src.saved = now
	}
	s.mu.Lock()
	src.cursor = cursor
	s.mu.Unlock()
	s.finish(src, &rep, force)
	if did {
		s.opts.Log.Info("synced", "source", src.Path, "pass", pass, "uploaded", len(rep.Uploaded), "deleted", len(rep.Deleted),
			"conflicts", len(rep.Conflicts), "errors", len(rep.Errors))
	}
	for _, e := range rep.Errors {
		s.opts.Log.Warn("sync failed", "source", src.Path, "err", e)
	}
	return rep
}

// finish sets the backoff after a pass.
func (s *Syncer) finish(src *source, rep *SourceReport, force bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	src.waiting = rep.Waiting > 0 || len(rep.Errors) > 0
	if len(rep.Errors) == 0 {
		src.failures, src.nextTry = 0, time.Time{}
		return
	}
	if len(rep.Errors) > 0 && src.last.OK {
		src.last = LastResult{Time: time.Now(), Result: rep.summary()}
	}
	src.failures++
	d := s.opts.MinBackoff << min(src.failures-1, 20)
	d = min(d, s.opts.MaxBackoff)
	d = d/2 + rand.N(d) // jitter: between half and one and a half times
	src.nextTry = time.Now().Add(d)
}

// maxWalkPath bounds the paths expand walks to: S3 takes keys of at most
// 1,024 bytes.
const maxWalkPath = 4096

// expand adds t's path to cands, and when it is (or was) a directory,
// every file below it now and every object the manifest has below it.
func (s *Syncer) expand(src *source, t *Touch, cands map[string]*Touch) error {
	add := func(rel string) {
		if c := cands[rel]; c != nil {
			c.First = min(c.First, t.First)
			c.Time = max(c.Time, t.Time)
			return
		}
		cands[rel] = &Touch{Rel: rel, First: t.First, Time: t.Time}
	}
	if t.Rel != "" {
		add(t.Rel)
	}
	p := path.Join(src.Path, t.Rel)
	if a, err := s.fs.Lstat(p); err == nil && a.IsDir() {
		// A loop over a list of directories, not a recursion: the agent
		// makes trees of any depth, and a Go stack frame a level would
		// end the daemon. A path past maxWalkPath (4 times S3's longest
		// key) could never be uploaded: the pass stops there with an error.
		type dirAt struct{ dir, rel string }
		todo := []dirAt{{p, t.Rel}}
		for len(todo) > 0 {
			d := todo[len(todo)-1]
			todo = todo[:len(todo)-1]
			if len(d.rel) > maxWalkPath {
				return fmt.Errorf("%.200q...: a path longer than %d bytes, not written back", d.rel, maxWalkPath)
			}
			var ents []kv.Dirent
			if err := s.fs.ReadDir(d.dir, "", func(e kv.Dirent) bool { ents = append(ents, e); return true }); err != nil {
				return err
			}
			for _, e := range ents {
				r := path.Join(d.rel, e.Name)
				switch e.Type {
				case kv.S_IFDIR:
					todo = append(todo, dirAt{path.Join(d.dir, e.Name), r})
				case kv.S_IFREG:
					add(r)
				}
			}
		}
	}
	mp := ManifestKey(src.Index, src.Prefix)
	if t.Rel != "" {
		mp = ManifestKey(src.Index, src.key(t.Rel)+"/")
	}
	n := len(ManifestKey(src.Index, ""))
	return s.st.ScanMeta(mp, func(k string, _ []byte) bool {
		if rel, ok := src.rel(k[n:]); ok {
			add(rel)
		}
		return true
	})
}

// state reads what the store holds at rel now.
func (s *Syncer) state(src *source, rel string, conflicts map[string]Conflict) (File, error) {
	var f File
	_, f.Conflict = conflicts[rel]
	v, err := s.st.GetMeta(ManifestKey(src.Index, src.key(rel)))
	switch {
	case err == nil:
		f.Version = string(v)
	case err != kv.ErrNotFound:
		return f, err
	}
	a, err := s.fs.Lstat(path.Join(src.Path, rel))
	switch {
	case err == nil && a.IsRegular():
		f.Exists, f.Ino, f.Size, f.Ctime = true, a.Ino, int64(a.Size), a.Ctime
		o, err := s.st.Origin(a.Ino)
		if err == nil && o.Source == uint32(src.Index) {
			f.Origin = &o
		} else if err != nil && err != kv.ErrNotFound {
			return f, err
		}
	case err == nil, errors.Is(err, iofs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
	default:
		return f, err
	}
	return f, nil
}

// conflicts returns the paths a source has in conflict.
func (s *Syncer) conflicts(src *source) (map[string]Conflict, error) {
	out := map[string]Conflict{}
	pfx := conflictPrefix(src.Index)
	var derr error
	err := s.st.ScanMeta(pfx, func(k string, v []byte) bool {
		var c Conflict
		if err := json.Unmarshal(v, &c); err != nil {
			derr = fmt.Errorf("sync conflict record %s: %w", k, err)
			return false
		}
		out[k[len(pfx):]] = c
		return true
	})
	return out, errors.Join(err, derr)
}

// fileData reads a file of the store for an upload, failing with
// ErrChanged once the file is no longer as the pass saw it.
type fileData struct {
	st    *kv.Store
	ino   uint64
	ctime int64
}

func (d *fileData) ReadAt(p []byte, off int64) (int, error) {
	n, a, err := d.st.Read(d.ino, off, p)
	if err == kv.ErrNotFound {
		return 0, ErrChanged
	}
	if err != nil {
		return n, err
	}
	if a.Ctime != d.ctime {
		return 0, ErrChanged
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// SourceStatus describes one source's sync state.
type SourceStatus struct {
	Path      string     `json:"path"`
	Mode      string     `json:"mode,omitempty"`
	Cursor    uint64     `json:"cursor"`
	Pending   int        `json:"pending"`
	Conflicts []Conflict `json:"conflicts,omitempty"`
	Last      LastResult `json:"last"`
	NextRetry *time.Time `json:"next_retry,omitempty"`
}

// Status describes every source's sync state: pending paths (touched since
// the cursor, or in conflict), conflicts, the last result.
func (s *Syncer) Status() []SourceStatus {
	var out []SourceStatus
	for _, src := range s.srcs {
		s.mu.Lock()
		st := SourceStatus{Path: src.Path, Cursor: src.cursor, Last: src.last}
		if !src.nextTry.IsZero() {
			t := src.nextTry
			st.NextRetry = &t
		}
		s.mu.Unlock()
		var t any = src.Target
		if src.Repo != nil {
			t = src.Repo
		}
		if m, ok := t.(interface{ ModeName() string }); ok {
			st.Mode = m.ModeName()
		}
		switch {
		case src.AgentCommits:
			st.Mode = strings.Replace(st.Mode, "commit and push", "push the agent's commits", 1)
		case src.CommitOnSync:
			st.Mode = strings.Replace(st.Mode, "commit and push", "push the agent's commits", 1) + ", commit the rest on sync"
		}
		if src.OnSync {
			st.Mode += ", only on sync"
		}
		var recs []kv.Record
		s.st.ReadJournal(st.Cursor, func(r kv.Record) bool {
			if src.Repo == nil || r.Actor.Entry != syncActor.Entry {
				recs = append(recs, r)
			}
			return true
		})
		pending := Touches(src.Path, recs)
		if src.Repo != nil {
			pending = collapseGitDir(pending)
		}
		conflicts, _ := s.conflicts(src)
		for _, rel := range sortedRels(conflicts) {
			st.Conflicts = append(st.Conflicts, conflicts[rel])
			if pending[rel] == nil {
				pending[rel] = &Touch{}
			}
		}
		delete(pending, "")
		st.Pending = len(pending)
		out = append(out, st)
	}
	return out
}
