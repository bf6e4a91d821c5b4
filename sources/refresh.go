package sources

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/utils/merkletrie"
	"golang.org/x/sync/errgroup"

	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/spec"
	"github.com/computerfs/computerfs/wsfs"
)

// RefreshReport says what a refresh brought in and what it left alone.
type RefreshReport struct {
	Sources []SourceReport `json:"sources"`
}

// SourceReport is one source's part of a refresh.
type SourceReport struct {
	Path      string     `json:"path"`
	Kind      string     `json:"kind"`
	Note      string     `json:"note,omitempty"`
	Updated   []string   `json:"updated,omitempty"`
	Added     []string   `json:"added,omitempty"`
	Removed   []string   `json:"removed,omitempty"`
	Conflicts []Conflict `json:"conflicts,omitempty"`
	Error     string     `json:"error,omitempty"`
}

// Conflict is a path that changed both upstream and here: refresh leaves
// the workspace's version and reports it.
type Conflict struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Failed reports whether any source failed or had conflicts.
func (r *RefreshReport) Failed() bool {
	for _, s := range r.Sources {
		if s.Error != "" || len(s.Conflicts) > 0 {
			return true
		}
	}
	return false
}

// Refresher brings upstream changes into a workspace.
type Refresher struct {
	FS         *wsfs.FS // with the mount's notifier, if mounted
	Spec       *spec.Spec
	Log        *slog.Logger
	HTTPClient *http.Client
}

// Run refreshes every git and S3 source. A source that fails is reported
// and the others still run; the error is only for the workspace itself.
func (r *Refresher) Run(ctx context.Context) (RefreshReport, error) {
	if r.Log == nil {
		r.Log = slog.Default()
	}
	var rep RefreshReport
	for i := range r.Spec.Sources {
		src := &r.Spec.Sources[i]
		sr := SourceReport{Path: src.Path, Kind: src.Kind()}
		var err error
		switch src.Kind() {
		case "git":
			err = r.refreshGit(ctx, i, src, &sr)
		case "s3":
			err = r.refreshS3(ctx, i, src, &sr)
		default:
			sr.Note = "local copy; nothing to refresh"
		}
		if err != nil {
			sr.Error = err.Error()
			r.Log.Error("refresh failed", "source", src.Path, "err", err)
		}
		rep.Sources = append(rep.Sources, sr)
	}
	return rep, nil
}

// localFile is a file of the workspace that came from a source.
type localFile struct {
	path   string
	attr   kv.Attr
	origin kv.Origin
}

// originFiles walks dir and returns the files whose origin is source idx,
// by their key at the source.
func (r *Refresher) originFiles(idx int, dir string) (map[string]localFile, error) {
	st := r.FS.Store()
	out := map[string]localFile{}
	var walk func(p string) error
	walk = func(p string) error {
		var ents []kv.Dirent
		if err := r.FS.ReadDir(p, "", func(d kv.Dirent) bool { ents = append(ents, d); return true }); err != nil {
			return err
		}
		for _, d := range ents {
			cp := path.Join(p, d.Name)
			if d.Type == kv.S_IFDIR {
				if err := walk(cp); err != nil {
					return err
				}
				continue
			}
			o, err := st.Origin(d.Ino)
			if err == kv.ErrNotFound || err == nil && o.Source != uint32(idx) {
				continue
			}
			if err != nil {
				return err
			}
			a, err := st.GetAttr(d.Ino)
			if err != nil {
				return err
			}
			out[o.Key] = localFile{path: cp, attr: a, origin: o}
		}
		return nil
	}
	return out, walk(dir)
}

func (r *Refresher) refreshS3(ctx context.Context, idx int, src *spec.Source, rep *SourceReport) error {
	c := src.S3
	client, err := NewS3Client(ctx, c, r.HTTPClient)
	if err != nil {
		return err
	}
	pages := make(chan []s3Object, 4)
	remote := map[string]s3Object{}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(pages)
		return listPrefix(gctx, client, c, pages)
	})
	g.Go(func() error {
		for page := range pages {
			for _, o := range page {
				remote[o.key] = o
			}
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return err
	}
	st := r.FS.Store()
	seen := map[string]string{} // the manifest: what the workspace last took
	prefix := manifestKey(idx, "")
	if err := st.ScanMeta(prefix, func(k string, v []byte) bool {
		seen[strings.TrimPrefix(k, prefix)] = string(v)
		return true
	}); err != nil {
		return err
	}
	local, err := r.originFiles(idx, src.Path)
	if err != nil {
		return err
	}
	set := map[string][]byte{}
	var del []string
	conflict := func(p, reason string) { rep.Conflicts = append(rep.Conflicts, Conflict{p, reason}) }
	keys := make([]string, 0, len(remote))
	for k := range remote {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		o := remote[k]
		loc, here := local[k]
		last, known := seen[k]
		switch {
		case here && loc.origin.ID == o.etag: // unchanged upstream
		case here && !loc.origin.Unchanged(&loc.attr):
			conflict(loc.path, "edited here and changed upstream")
			continue
		case here:
			o2 := loc.origin
			o2.ID = o.etag
			if _, err := r.FS.Session().ReplaceRemote(loc.attr.Ino, uint64(o.size), o.mtime.UnixNano(), o2); err != nil {
				return err
			}
			r.notifyChanged(loc.attr.Ino)
			if !c.IsLazy() {
				if err := st.Fetch(loc.attr.Ino); err != nil {
					return err
				}
			}
			rep.Updated = append(rep.Updated, loc.path)
		case known && last == o.etag: // deleted here; stays deleted
			continue
		case known:
			conflict(s3Path(src.Path, c, k), "deleted here and changed upstream")
			continue
		default: // new upstream
			p := s3Path(src.Path, c, k)
			if p == "" {
				continue // a key that is not a path, as at import
			}
			if _, err := r.FS.Lstat(p); err == nil {
				conflict(p, "made here and added upstream")
				continue
			}
			if err := r.FS.MkdirAll(path.Dir(p), 0o755); err != nil {
				return err
			}
			n := kv.NewInode{Mode: kv.S_IFREG | 0o644, Mtime: o.mtime.UnixNano(),
				Origin: &kv.Origin{Source: uint32(idx), Key: k, ID: o.etag}, Remote: o.size > 0, Size: uint64(max(o.size, 0))}
			a, err := r.FS.CreateInode(p, n)
			if err != nil {
				return err
			}
			if !c.IsLazy() && o.size > 0 {
				if err := st.Fetch(a.Ino); err != nil {
					return err
				}
			}
			rep.Added = append(rep.Added, p)
		}
		set[manifestKey(idx, k)] = []byte(o.etag)
	}
	for k := range seen {
		if _, ok := remote[k]; ok {
			continue
		}
		loc, here := local[k]
		switch {
		case here && !loc.origin.Unchanged(&loc.attr):
			conflict(loc.path, "edited here and deleted upstream")
			continue
		case here:
			if err := r.FS.Remove(loc.path); err != nil {
				return err
			}
			rep.Removed = append(rep.Removed, loc.path)
		}
		del = append(del, manifestKey(idx, k))
	}
	sort.Strings(rep.Removed)
	if len(rep.Updated)+len(rep.Added)+len(rep.Removed)+len(rep.Conflicts) == 0 {
		rep.Note = "up to date"
	}
	return st.UpdateMeta(set, del)
}

// s3Path is where the object key appears in the workspace ("" if the key
// is not a path).
func s3Path(root string, c *spec.S3, key string) string {
	rel, marker, valid := s3Rel(c, key)
	if rel == "" || marker || !valid {
		return ""
	}
	return path.Join(root, rel)
}

func (r *Refresher) notifyChanged(ino uint64) {
	if n := r.FS.Notifier(); n != nil {
		n.Changed(ino)
	}
}

// refreshGit fetches the branch the checkout is on and fast-forwards it
// when no changed path has local edits (staged or not); otherwise it
// reports the conflicting paths and leaves the checkout alone, with the
// fetched commits in origin/BRANCH for the agent to merge.
func (r *Refresher) refreshGit(ctx context.Context, idx int, src *spec.Source, rep *SourceReport) error {
	g := src.Git
	wt := r.FS.Billy(src.Path)
	dot, err := wt.Chroot(".git")
	if err != nil {
		return err
	}
	st := filesystem.NewStorage(dot, cache.NewObjectLRUDefault())
	defer st.Close()
	repo, err := git.Open(st, wt)
	if err != nil {
		return fmt.Errorf("open the checkout: %w", err)
	}
	head, err := repo.Head()
	if err != nil {
		return err
	}
	if !head.Name().IsBranch() {
		rep.Note = fmt.Sprintf("HEAD is detached at %s (the spec pins a tag or commit): nothing to refresh", head.Hash())
		return nil
	}
	branch := head.Name().Short()
	url := GitURL(g.URL)
	auth, err := GitAuth(g, url)
	if err != nil {
		return err
	}
	err = repo.FetchContext(ctx, &git.FetchOptions{RemoteName: "origin", Auth: auth, Depth: g.Depth})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return fmt.Errorf("git fetch %s: %w", g.URL, explainGitError(err))
	}
	upstream, err := repo.Reference(plumbing.NewRemoteReferenceName("origin", branch), true)
	if err != nil {
		return fmt.Errorf("origin/%s: %w", branch, err)
	}
	oldC, err := repo.CommitObject(head.Hash())
	if err != nil {
		return err
	}
	newC, err := repo.CommitObject(upstream.Hash())
	if err != nil {
		return err
	}
	if oldC.Hash == newC.Hash {
		rep.Note = "up to date with origin/" + branch
		return nil
	}
	if ok, err := oldC.IsAncestor(newC); err != nil {
		return err
	} else if !ok {
		if behind, _ := newC.IsAncestor(oldC); behind {
			rep.Note = fmt.Sprintf("%s has local commits that origin/%s does not: nothing to bring in", branch, branch)
		} else {
			rep.Note = fmt.Sprintf("%s and origin/%s have diverged: origin/%s is fetched; merge it in the workspace", branch, branch, branch)
			rep.Conflicts = append(rep.Conflicts, Conflict{src.Path, "local commits diverge from origin/" + branch})
		}
		return nil
	}
	oldT, err := oldC.Tree()
	if err != nil {
		return err
	}
	newT, err := newC.Tree()
	if err != nil {
		return err
	}
	changes, err := object.DiffTreeWithOptions(ctx, oldT, newT, &object.DiffTreeOptions{})
	if err != nil {
		return err
	}
	ix, err := repo.Storer.Index()
	if err != nil {
		return err
	}
	// Every changed path must be as HEAD has it, in the index and in the
	// working tree; a new path must not exist yet.
	for _, ch := range changes {
		from, to := ch.From, ch.To
		p := to.Name
		if p == "" {
			p = from.Name
		}
		if reason := r.gitLocalEdit(src.Path, ix, p, from); reason != "" {
			rep.Conflicts = append(rep.Conflicts, Conflict{path.Join(src.Path, p), reason})
		}
	}
	if len(rep.Conflicts) > 0 {
		rep.Note = fmt.Sprintf("origin/%s is fetched (%s); not fast-forwarded: paths it changes have local edits", branch, newC.Hash)
		return nil
	}
	for _, ch := range changes {
		action, err := ch.Action()
		if err != nil {
			return err
		}
		if err := r.applyGitChange(repo, idx, src.Path, ix, ch, action); err != nil {
			return err
		}
		p := path.Join(src.Path, ch.To.Name)
		switch action {
		case merkletrie.Insert:
			rep.Added = append(rep.Added, p)
		case merkletrie.Modify:
			rep.Updated = append(rep.Updated, p)
		case merkletrie.Delete:
			rep.Removed = append(rep.Removed, path.Join(src.Path, ch.From.Name))
		}
	}
	sort.Slice(ix.Entries, func(i, j int) bool { return ix.Entries[i].Name < ix.Entries[j].Name })
	if err := repo.Storer.SetIndex(ix); err != nil {
		return err
	}
	if err := repo.Storer.SetReference(plumbing.NewHashReference(head.Name(), newC.Hash)); err != nil {
		return err
	}
	rep.Note = fmt.Sprintf("fast-forwarded %s to %s", branch, newC.Hash)
	return nil
}

// gitLocalEdit says why path p (at from in HEAD, or new) cannot be
// updated, or "" if it can.
func (r *Refresher) gitLocalEdit(root string, ix *index.Index, p string, from object.ChangeEntry) string {
	e, _ := ix.Entry(p)
	full := path.Join(root, p)
	if from.Name == "" { // added upstream
		if e != nil {
			return "staged here and added upstream"
		}
		if _, err := r.FS.Lstat(full); err == nil {
			return "made here and added upstream"
		}
		return ""
	}
	if e == nil || e.Hash != from.TreeEntry.Hash {
		return "staged here and changed upstream"
	}
	a, err := r.FS.Lstat(full)
	if err != nil {
		return "deleted here and changed upstream"
	}
	if o, err := r.FS.Store().Origin(a.Ino); err == nil && o.Unchanged(&a) && o.ID == e.Hash.String() {
		return "" // untouched since import or the last refresh
	}
	h, err := r.worktreeHash(full, a)
	if err != nil || h != e.Hash {
		return "edited here and changed upstream"
	}
	return ""
}

// worktreeHash is the git blob hash of a file of the working tree.
func (r *Refresher) worktreeHash(p string, a kv.Attr) (plumbing.Hash, error) {
	var data []byte
	var err error
	if a.Mode&kv.S_IFMT == kv.S_IFLNK {
		var t string
		t, err = r.FS.Readlink(p)
		data = []byte(t)
	} else {
		data, err = r.FS.ReadFile(p)
	}
	if err != nil {
		return plumbing.ZeroHash, err
	}
	return plumbing.ComputeHash(plumbing.BlobObject, data), nil
}

// applyGitChange writes one change of the fast-forward into the working
// tree and the index.
func (r *Refresher) applyGitChange(repo *git.Repository, idx int, root string, ix *index.Index, ch *object.Change, action merkletrie.Action) error {
	if action == merkletrie.Delete || action == merkletrie.Modify && ch.From.Name != ch.To.Name {
		full := path.Join(root, ch.From.Name)
		if err := r.FS.Remove(full); err != nil {
			return err
		}
		ix.Remove(ch.From.Name)
		for d := path.Dir(full); d != root && d != "/"; d = path.Dir(d) {
			if r.FS.Remove(d) != nil { // only while empty
				break
			}
		}
		if action == merkletrie.Delete {
			return nil
		}
	}
	to := ch.To
	full := path.Join(root, to.Name)
	blob, err := repo.BlobObject(to.TreeEntry.Hash)
	if err != nil {
		return err
	}
	rd, err := blob.Reader()
	if err != nil {
		return err
	}
	data, err := io.ReadAll(rd)
	rd.Close()
	if err != nil {
		return err
	}
	if err := r.FS.MkdirAll(path.Dir(full), 0o755); err != nil {
		return err
	}
	if a, err := r.FS.Lstat(full); err == nil && (a.Mode&kv.S_IFMT == kv.S_IFLNK || to.TreeEntry.Mode == filemode.Symlink) {
		if err := r.FS.Remove(full); err != nil {
			return err
		}
	}
	switch to.TreeEntry.Mode {
	case filemode.Symlink:
		err = r.FS.Symlink(string(data), full)
	default:
		perm := uint32(0o644)
		if to.TreeEntry.Mode == filemode.Executable {
			perm = 0o755
		}
		if err = r.FS.WriteFile(full, data, perm); err == nil {
			err = r.FS.Chmod(full, perm)
		}
	}
	if err != nil {
		return err
	}
	a, err := r.FS.Lstat(full)
	if err != nil {
		return err
	}
	if err := r.FS.Store().SetOrigin(a.Ino, kv.Origin{Source: uint32(idx), Key: to.Name, ID: to.TreeEntry.Hash.String()}); err != nil {
		return err
	}
	e, err := ix.Entry(to.Name)
	if err != nil {
		e = ix.Add(to.Name)
	}
	e.Hash, e.Mode = to.TreeEntry.Hash, to.TreeEntry.Mode
	fillStat(e, a)
	return nil
}

// fillStat puts a file's stat data into its index entry, as git does.
func fillStat(e *index.Entry, a kv.Attr) {
	e.CreatedAt, e.ModifiedAt = timeFromNs(a.Ctime), timeFromNs(a.Mtime)
	e.Dev, e.Inode, e.UID, e.GID, e.Size = 0, uint32(a.Ino), a.Uid, a.Gid, uint32(a.Size)
}
