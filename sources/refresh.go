package sources

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/utils/merkletrie"
	"golang.org/x/sync/errgroup"

	"github.com/computerfs/computerfs/internal/safegit"
	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/policy"
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
	FS   *wsfs.FS // with the mount's notifier, if mounted
	Spec *spec.Spec
	// Rules are the path rules in force (the mounted workspace's, which
	// a fetch that brings denied history into a source extends: see
	// history.go); nil: the spec's.
	Rules      *policy.Checker
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
// by their key at the source. It keeps the directories to read on a list,
// not Go's stack (the agent makes trees of any depth), and goes no deeper
// than spec.MaxTreePath bytes of path: no file the source brought in is
// deeper (import and refresh refuse longer paths).
func (r *Refresher) originFiles(idx int, dir string) (map[string]localFile, error) {
	st := r.FS.Store()
	out := map[string]localFile{}
	todo := []string{dir}
	for len(todo) > 0 {
		p := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		var ents []kv.Dirent
		if err := r.FS.ReadDir(p, "", func(d kv.Dirent) bool { ents = append(ents, d); return true }); err != nil {
			return nil, err
		}
		for _, d := range ents {
			cp := path.Join(p, d.Name)
			if d.Type == kv.S_IFDIR {
				if len(cp)-len(dir) <= spec.MaxTreePath {
					todo = append(todo, cp)
				}
				continue
			}
			o, err := st.Origin(d.Ino)
			if err == kv.ErrNotFound || err == nil && o.Source != uint32(idx) {
				continue
			}
			if err != nil {
				return nil, err
			}
			a, err := st.GetAttr(d.Ino)
			if err != nil {
				return nil, err
			}
			out[o.Key] = localFile{path: cp, attr: a, origin: o}
		}
	}
	return out, nil
}

func (r *Refresher) refreshS3(ctx context.Context, idx int, src *spec.Source, rep *SourceReport) error {
	c := src.S3
	if err := safegit.RealDir(r.FS, src.Path); err != nil {
		return fmt.Errorf("the source's directory: %w", err)
	}
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
	var del, skipped []string
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
			rel, marker, valid := s3Rel(c, k)
			if rel == "" || marker {
				continue // a directory marker, as at import
			}
			p, err := r.Spec.TreeFile(idx, rel)
			if !valid || err != nil {
				skipped = append(skipped, k) // a key that is not a path, as at import
				continue
			}
			if _, err := r.FS.Lstat(p); err == nil {
				conflict(p, "made here and added upstream")
				continue
			}
			if reason := r.throughLink(src.Path, rel, nil); reason != "" {
				conflict(p, reason)
				continue
			}
			if err := r.mkdirsNoFollow(src.Path, path.Dir(rel)); err != nil {
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
	if len(skipped) > 0 {
		sort.Strings(skipped)
		r.Log.Warn("skipped objects whose keys are not paths", "source", src.Path, "count", len(skipped), "first", skipped[0])
		rep.Note = strings.TrimPrefix(rep.Note+fmt.Sprintf("; skipped %d object(s) whose key is not a path the workspace takes (%q...)", len(skipped), skipped[0]), "; ")
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
//
// The fetch goes to the spec's url with the spec's credentials, whatever
// the checkout's .git/config says (see internal/safegit), and a new tree
// whose paths fail spec.CheckTreePath, or would be written through a
// symbolic link, is refused whole: nothing of it is written.
func (r *Refresher) refreshGit(ctx context.Context, idx int, src *spec.Source, rep *SourceReport) error {
	g := src.Git
	url := GitURL(g.URL)
	co, err := safegit.Open(r.FS, src.Path, url)
	if err != nil {
		return fmt.Errorf("open the checkout: %w", err)
	}
	defer co.Close()
	repo := co.Repo
	head, err := repo.Head()
	if err != nil {
		return err
	}
	if !head.Name().IsBranch() {
		rep.Note = fmt.Sprintf("HEAD is detached at %s (the spec pins a tag or commit): nothing to refresh", head.Hash())
		return nil
	}
	branch := head.Name().Short()
	auth, err := GitAuth(g, url)
	if err != nil {
		return err
	}
	rem := co.Remote(config.RefSpec("+refs/heads/*:refs/remotes/" + safegit.RemoteName + "/*"))
	done := r.holdHistory(src)
	err = rem.FetchContext(ctx, &git.FetchOptions{RemoteName: safegit.RemoteName, Auth: auth, Depth: g.Depth})
	if herr := done(ctx, idx, repo); herr != nil {
		return herr
	}
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return fmt.Errorf("git fetch %s: %w", g.URL, explainGitError(err))
	}
	upstream, err := repo.Reference(plumbing.NewRemoteReferenceName(safegit.RemoteName, branch), true)
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
	// Every path the new tree brings must be one the import would take.
	gone := map[string]bool{} // paths of the old tree that go away
	for _, ch := range changes {
		for _, e := range []object.ChangeEntry{ch.From, ch.To} {
			if e.Name == "" {
				continue
			}
			if _, err := r.Spec.TreeFile(idx, e.Name); err != nil {
				return fmt.Errorf("origin/%s (%s) is fetched but not checked out: its tree has a path the workspace refuses: %w", branch, newC.Hash, err)
			}
		}
		if ch.From.Name != "" && ch.From.Name != ch.To.Name {
			gone[ch.From.Name] = true
		}
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
		} else if to.Name != "" {
			if reason := r.throughLink(src.Path, to.Name, gone); reason != "" {
				rep.Conflicts = append(rep.Conflicts, Conflict{path.Join(src.Path, p), reason})
			}
		}
	}
	if len(rep.Conflicts) > 0 {
		rep.Note = fmt.Sprintf("origin/%s is fetched (%s); not fast-forwarded: paths it changes have local edits", branch, newC.Hash)
		return nil
	}
	// Removals first, so that a directory that becomes a file (or a
	// symbolic link that becomes a directory) is out of the way.
	for _, ch := range changes {
		action, err := ch.Action()
		if err != nil {
			return err
		}
		if action == merkletrie.Delete || ch.From.Name != "" && ch.From.Name != ch.To.Name {
			if err := r.removeGitFile(src.Path, ix, ch.From.Name); err != nil {
				return err
			}
		}
		if action == merkletrie.Delete {
			rep.Removed = append(rep.Removed, path.Join(src.Path, ch.From.Name))
		}
	}
	for _, ch := range changes {
		action, err := ch.Action()
		if err != nil {
			return err
		}
		if action == merkletrie.Delete {
			continue
		}
		if err := r.writeGitFile(repo, idx, src.Path, ix, ch.To); err != nil {
			return err
		}
		p := path.Join(src.Path, ch.To.Name)
		switch action {
		case merkletrie.Insert:
			rep.Added = append(rep.Added, p)
		case merkletrie.Modify:
			rep.Updated = append(rep.Updated, p)
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

// throughLink says why the file rel cannot be written below root without
// going through a symbolic link or a file of the workspace ("" if it
// can): directories on its way that exist must be directories, unless
// gone says the refresh removes them first.
func (r *Refresher) throughLink(root, rel string, gone map[string]bool) string {
	dirs := strings.Split(rel, "/")
	for i := 1; i < len(dirs); i++ {
		d := strings.Join(dirs[:i], "/")
		a, err := r.FS.Lstat(path.Join(root, d))
		switch {
		case err != nil: // made by the refresh
			return ""
		case gone[d]:
			return ""
		case a.Mode&kv.S_IFMT == kv.S_IFLNK:
			return fmt.Sprintf("%s is a symbolic link here: the refresh does not write through it", path.Join(root, d))
		case !a.IsDir():
			return fmt.Sprintf("%s is a file here, where upstream has a directory", path.Join(root, d))
		}
	}
	return ""
}

// mkdirsNoFollow makes the directory rel below root and its parents, and
// fails if one on the way is a symbolic link or not a directory: what a
// refresh writes lands below root, where its tree path says.
func (r *Refresher) mkdirsNoFollow(root, rel string) error {
	if rel == "." || rel == "" {
		return safegit.RealDir(r.FS, root)
	}
	p := root
	for _, name := range strings.Split(rel, "/") {
		p = path.Join(p, name)
		a, err := r.FS.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			if err := r.FS.Mkdir(p, 0o755); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		if a.Mode&kv.S_IFMT == kv.S_IFLNK {
			return fmt.Errorf("%s is a symbolic link: the refresh does not write through it", p)
		}
		if !a.IsDir() {
			return fmt.Errorf("%s is not a directory", p)
		}
	}
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

// worktreeHash is the git blob hash of a file of the working tree, read
// as a stream.
func (r *Refresher) worktreeHash(p string, a kv.Attr) (plumbing.Hash, error) {
	if a.Mode&kv.S_IFMT == kv.S_IFLNK {
		t, err := r.FS.Readlink(p)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		return plumbing.ComputeHash(plumbing.BlobObject, []byte(t)), nil
	}
	f, err := r.FS.Open(p, wsfs.O_RDONLY, 0)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	defer f.Close()
	h := plumbing.NewHasher(plumbing.BlobObject, int64(a.Size))
	n, err := io.Copy(h, f)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if n != int64(a.Size) {
		return plumbing.ZeroHash, fmt.Errorf("%s changed while it was read", p)
	}
	return h.Sum(), nil
}

// removeGitFile removes the file rel of the working tree and the index,
// and the directories it leaves empty.
func (r *Refresher) removeGitFile(root string, ix *index.Index, rel string) error {
	full := path.Join(root, rel)
	if err := r.FS.Remove(full); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	ix.Remove(rel)
	for d := path.Dir(full); d != root && d != "/"; d = path.Dir(d) {
		if r.FS.Remove(d) != nil { // only while empty
			break
		}
	}
	return nil
}

// wholeWrite is the size up to which a file a refresh writes changes in
// one step of the store (readers see the old content or the new); larger
// ones are streamed.
const wholeWrite = 16 << 20

// writeGitFile writes the tree entry to into the working tree and the
// index, streaming the blob's content.
func (r *Refresher) writeGitFile(repo *git.Repository, idx int, root string, ix *index.Index, to object.ChangeEntry) error {
	full := path.Join(root, to.Name)
	if err := r.mkdirsNoFollow(root, path.Dir(to.Name)); err != nil {
		return err
	}
	blob, err := repo.BlobObject(to.TreeEntry.Hash)
	if err != nil {
		return err
	}
	if a, err := r.FS.Lstat(full); err == nil && (a.Mode&kv.S_IFMT == kv.S_IFLNK || to.TreeEntry.Mode == filemode.Symlink) {
		if err := r.FS.Remove(full); err != nil {
			return err
		}
	}
	rd, err := blob.Reader()
	if err != nil {
		return err
	}
	defer rd.Close()
	switch to.TreeEntry.Mode {
	case filemode.Symlink:
		if blob.Size >= 4096 {
			return fmt.Errorf("%s: a symbolic link of %d bytes (at most 4095)", full, blob.Size)
		}
		var target []byte
		if target, err = io.ReadAll(rd); err == nil {
			err = r.FS.Symlink(string(target), full)
		}
	default:
		perm := uint32(0o644)
		if to.TreeEntry.Mode == filemode.Executable {
			perm = 0o755
		}
		if blob.Size <= wholeWrite {
			var data []byte
			if data, err = io.ReadAll(rd); err == nil {
				err = r.FS.WriteFile(full, data, perm)
			}
		} else {
			err = r.streamFile(full, rd, perm)
		}
		if err == nil {
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

// streamFile writes rd into the regular file p (made if missing).
func (r *Refresher) streamFile(p string, rd io.Reader, perm uint32) error {
	f, err := r.FS.Open(p, wsfs.O_WRONLY|wsfs.O_CREATE|wsfs.O_TRUNC, perm)
	if err != nil {
		return err
	}
	buf := make([]byte, 16*kv.ChunkSize)
	if _, err := io.CopyBuffer(f, rd, buf); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// fillStat puts a file's stat data into its index entry, as git does.
func fillStat(e *index.Entry, a kv.Attr) {
	e.CreatedAt, e.ModifiedAt = timeFromNs(a.Ctime), timeFromNs(a.Mtime)
	e.Dev, e.Inode, e.UID, e.GID, e.Size = 0, uint32(a.Ino), a.Uid, a.Gid, uint32(a.Size)
}
