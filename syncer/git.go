package syncer

import (
	"compress/zlib"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-billy/v5"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/revlist"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage"

	"github.com/computerfs/computerfs/internal/safegit"
	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/spec"
	"github.com/computerfs/computerfs/wsfs"
)

// RepoTarget is the remote end of a source whose unit of write-back is the
// whole repository, not a path (git: a commit, then a push).
//
// SyncRepo is called from one goroutine at a time. It works on the
// checkout at dir through fs (whose writes are journaled as the syncer's
// own). With commit, it first records the work tree's changes, if any.
// It must be harmless to call again after a crash at any point: a change
// already committed is not committed twice, a commit the remote already
// has is not sent again. It never overwrites a remote change: that is a
// RepoResult.Conflict.
type RepoTarget interface {
	SyncRepo(ctx context.Context, fs *wsfs.FS, dir string, commit bool) RepoResult
}

// RepoResult is what a SyncRepo did.
type RepoResult struct {
	Commit  string   // the commit made of the work tree's changes ("" none)
	Changed []string // its changes, "M path" (A added, M modified, D deleted)
	Branch  string   // the remote branch pushed to
	Pushed  string   // the commit the remote branch now holds, when this call moved it
	// Conflict, if not empty, says why nothing was pushed: the remote
	// branch holds Remote, which the local branch does not descend from.
	Conflict string
	Remote   string
	// TooLarge are work-tree files left out of the commit: larger than
	// the target's MaxFileSize.
	TooLarge []TooLarge
	Err      error
}

// TooLarge is a file too large to commit.
type TooLarge struct {
	Rel  string // below the checkout
	Size int64
	Max  int64
}

func (t TooLarge) reason() string {
	return fmt.Sprintf("%d bytes, over git.max_file_size (%d bytes): not committed; the rest of the change is", t.Size, t.Max)
}

// GitTarget commits a git checkout's changes and pushes them.
//
// A pass stages every change of the work tree (git add -A: new, changed
// and deleted files, .gitignore respected), commits them if anything is
// staged, then pushes HEAD's commit to Branch at URL when the remote
// branch is an ancestor of it (or absent). Commits the agent made itself
// are pushed as they are: the target only ever adds one commit on top.
type GitTarget struct {
	URL  string // as go-git takes it (sources.GitURL)
	Auth transport.AuthMethod
	// Branch is the remote branch to push to ("": the branch HEAD is on).
	Branch string
	// Name and Email sign the commits (author and committer).
	Name, Email string
	// Message is the commits' first line ("": "computerfs: update N files").
	Message string
	// Now dates the commits (default time.Now).
	Now func() time.Time
	// MaxFileSize is the largest file committed, and the largest object
	// pushed (0: spec.DefaultGitMaxFileSize).
	MaxFileSize int64
}

func (g *GitTarget) maxFileSize() int64 {
	if g.MaxFileSize > 0 {
		return g.MaxFileSize
	}
	return spec.DefaultGitMaxFileSize
}

var _ RepoTarget = (*GitTarget)(nil)

// ModeName describes the target in status.
func (g *GitTarget) ModeName() string {
	if g.Branch == "" {
		return "commit and push to the checked-out branch"
	}
	return "commit and push to " + g.Branch
}

// SyncRepo implements RepoTarget.
//
// The checkout is opened with internal/safegit: the push goes to the
// spec's url with the spec's credentials, whatever .git/config says.
func (g *GitTarget) SyncRepo(ctx context.Context, fs *wsfs.FS, dir string, commit bool) (res RepoResult) {
	co, err := safegit.Open(fs, dir, g.URL)
	if err != nil {
		res.Err = err
		return res
	}
	defer co.Close()
	repo := co.Repo
	if commit {
		// go-git's status of a tree deeper than safegit.MaxTreeDepth
		// would take the daemon hours, or its stack.
		if err := safegit.CheckTree(fs, dir); err != nil {
			res.Err = err
			return res
		}
		// Not in the middle of a git command on the shell fast path,
		// which would move the branch from under the commit.
		unlock := fs.LockRepo(path.Join(dir, ".git"))
		err := g.commit(repo, fs.Billy(path.Join(dir, ".git")), &res)
		unlock()
		if err != nil {
			res.Err = err
			return res
		}
	}
	// What is pushed must survive here first: a push of a commit that a
	// crash then takes back from the workspace (a write not yet synced)
	// would leave the local branch behind the remote, and the next local
	// commit would never be a fast-forward again.
	if err := fs.Store().Sync(); err != nil {
		res.Err = fmt.Errorf("git: sync the store before pushing: %w", err)
		return res
	}
	if err := g.push(ctx, co, &res); err != nil {
		res.Err = err
	}
	return res
}

// commit stages everything (as git add -A) and commits it if anything is
// staged. After a crash between the commit and the push, the work tree is
// clean: nothing is committed twice.
//
// Staging is done here rather than with go-git's Add, which walks the
// whole work tree again for every call: one status walk is the cost of a
// pass (about 60 us a file on the store).
func (g *GitTarget) commit(repo *git.Repository, dotgit billy.Filesystem, res *RepoResult) error {
	w, err := repo.Worktree()
	if err != nil {
		return err
	}
	// The index first: status and commit build a tree of its entries
	// (by recursion, with every prefix of every path), so an entry
	// thousands of levels deep must be refused before they run.
	idx, err := repo.Storer.Index()
	if err != nil {
		return fmt.Errorf("git index: %w", err)
	}
	if err := safegit.CheckIndex(idx); err != nil {
		return err
	}
	status, err := w.Status()
	if err != nil {
		return fmt.Errorf("git status: %w", err)
	}
	var lines []string
	staged := false
	for p, fst := range status {
		if fst.Staging == git.Unmodified && fst.Worktree == git.Unmodified {
			continue
		}
		switch fst.Worktree {
		case git.Unmodified:
		case git.Deleted:
			if _, err := idx.Remove(p); err != nil && !errors.Is(err, index.ErrEntryNotFound) {
				return fmt.Errorf("git add -A: %s: %w", p, err)
			}
			staged = true
			if fst.Staging == git.Added {
				continue // added, then deleted: nothing
			}
			lines = append(lines, "D "+p)
			continue
		default:
			big, err := stage(w, dotgit, idx, p, g.maxFileSize())
			if errors.Is(err, errNotAFile) {
				continue // as git add: what git cannot hold stays out
			}
			if err != nil {
				return fmt.Errorf("git add -A: %s: %w", p, err)
			}
			if big != nil {
				res.TooLarge = append(res.TooLarge, *big)
				continue
			}
			staged = true
		}
		switch {
		case fst.Worktree == git.Untracked || fst.Staging == git.Added:
			lines = append(lines, "A "+p)
		case fst.Staging == git.Deleted && fst.Worktree == git.Unmodified:
			lines = append(lines, "D "+p)
		default:
			lines = append(lines, "M "+p)
		}
	}
	if staged {
		if err := repo.Storer.SetIndex(idx); err != nil {
			return fmt.Errorf("git index: %w", err)
		}
	}
	if len(lines) == 0 {
		return nil
	}
	sort.Slice(lines, func(i, j int) bool { return lines[i][2:] < lines[j][2:] })
	now := time.Now
	if g.Now != nil {
		now = g.Now
	}
	sig := &object.Signature{Name: g.Name, Email: g.Email, When: now()}
	h, err := w.Commit(CommitMessage(g.Message, lines), &git.CommitOptions{Author: sig, Committer: sig})
	if errors.Is(err, git.ErrEmptyCommit) {
		return nil // changed and changed back
	}
	if err != nil {
		return fmt.Errorf("git commit: %w", err)
	}
	res.Commit, res.Changed = h.String(), lines
	return nil
}

// errNotAFile is stage's answer for a FIFO, socket or device node, which
// a commit leaves out (as git add does) instead of failing the push.
var errNotAFile = errors.New("neither a file nor a symbolic link")

// stage writes the file at p of the work tree as a blob and points its
// index entry at it. A file larger than max is left alone and returned.
func stage(w *git.Worktree, dotgit billy.Filesystem, idx *index.Index, p string, max int64) (*TooLarge, error) {
	fi, err := w.Filesystem.Lstat(p)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() && fi.Mode()&os.ModeSymlink == 0 {
		return nil, errNotAFile
	}
	mode, err := filemode.NewFromOSFileMode(fi.Mode())
	if err != nil {
		return nil, err
	}
	if fi.Size() > max {
		return &TooLarge{Rel: p, Size: fi.Size(), Max: max}, nil
	}
	var h plumbing.Hash
	if fi.Mode()&os.ModeSymlink != 0 {
		target, err := w.Filesystem.Readlink(p)
		if err != nil {
			return nil, err
		}
		h, err = writeBlob(dotgit, strings.NewReader(target), int64(len(target)))
		if err != nil {
			return nil, err
		}
	} else {
		f, err := w.Filesystem.Open(p)
		if err != nil {
			return nil, err
		}
		h, err = writeBlob(dotgit, f, fi.Size())
		f.Close()
		if err != nil {
			return nil, err
		}
	}
	e, err := idx.Entry(p)
	if err != nil {
		e = idx.Add(p)
	}
	e.Hash, e.Mode, e.ModifiedAt, e.Size = h, mode, fi.ModTime(), uint32(fi.Size())
	return nil, nil
}

// writeBlob writes size bytes of r as a loose blob object of the
// repository whose .git is dotgit, streaming: through a hash and zlib
// into a temporary file, renamed to the object's name at the end. Content
// of another size (the file changed while it was read) leaves nothing
// behind.
func writeBlob(dotgit billy.Filesystem, r io.Reader, size int64) (h plumbing.Hash, err error) {
	tmp, err := dotgit.TempFile("objects", "tmp_obj_")
	if err != nil {
		return h, err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			dotgit.Remove(tmp.Name())
		}
	}()
	hasher := plumbing.NewHasher(plumbing.BlobObject, size)
	zw := zlib.NewWriter(tmp)
	if _, err = fmt.Fprintf(zw, "blob %d\x00", size); err != nil {
		return h, err
	}
	n, err := io.Copy(io.MultiWriter(zw, hasher), io.LimitReader(r, size+1))
	if err != nil {
		return h, err
	}
	if n != size {
		return h, fmt.Errorf("changed while it was read (%d bytes, then %d)", size, n)
	}
	if err = zw.Close(); err != nil {
		return h, err
	}
	if err = tmp.Close(); err != nil {
		return h, err
	}
	h = hasher.Sum()
	hex := h.String()
	name := path.Join("objects", hex[:2], hex[2:])
	if _, serr := dotgit.Lstat(name); serr == nil {
		return h, dotgit.Remove(tmp.Name()) // already there
	}
	if err = dotgit.Rename(tmp.Name(), name); err != nil {
		return h, err
	}
	return h, nil
}

// CommitMessage is the message of a commit of the changes lines ("M
// path"): subject (default "computerfs: update N files"), a blank line,
// the changes (the first 100, then how many more).
func CommitMessage(subject string, lines []string) string {
	if subject == "" {
		subject = fmt.Sprintf("computerfs: update %d file", len(lines))
		if len(lines) != 1 {
			subject += "s"
		}
	}
	var b strings.Builder
	b.WriteString(strings.TrimRight(subject, "\n"))
	b.WriteString("\n\n")
	const most = 100
	for i, l := range lines {
		if i == most {
			fmt.Fprintf(&b, "... and %d more\n", len(lines)-most)
			break
		}
		b.WriteString(l + "\n")
	}
	return b.String()
}

// push sends HEAD's commit to the remote branch when that is a
// fast-forward. A remote that already holds it is left alone (a replay).
func (g *GitTarget) push(ctx context.Context, co *safegit.Checkout, res *RepoResult) error {
	repo := co.Repo
	head, err := repo.Reference(plumbing.HEAD, false)
	if err != nil {
		return fmt.Errorf("git: HEAD: %w", err)
	}
	branch := g.Branch
	var local plumbing.Hash
	if head.Type() == plumbing.SymbolicReference {
		if branch == "" && head.Target().IsBranch() {
			branch = head.Target().Short()
		}
		r, err := repo.Reference(head.Target(), true)
		if errors.Is(err, plumbing.ErrReferenceNotFound) {
			return nil // no commit yet: nothing to push
		}
		if err != nil {
			return fmt.Errorf("git: %s: %w", head.Target(), err)
		}
		local = r.Hash()
	} else {
		local = head.Hash()
	}
	if branch == "" {
		// Not an error to retry: nothing changes until someone checks
		// out a branch. Reported as a conflict, tried again at the next
		// change or explicit sync.
		res.Conflict = "HEAD is detached and the spec names no branch to push to (git.branch): check out a branch (git switch NAME) or set git.branch; the commits stay local"
		return nil
	}
	res.Branch = branch
	dst := plumbing.NewBranchReferenceName(branch)
	rem := co.Remote(config.RefSpec("+refs/heads/*:refs/remotes/" + safegit.RemoteName + "/*"))
	refs, err := rem.ListContext(ctx, &git.ListOptions{Auth: g.Auth})
	if err != nil && !errors.Is(err, transport.ErrEmptyRemoteRepository) {
		return fmt.Errorf("git ls-remote %s: %w", g.URL, err)
	}
	var remote plumbing.Hash
	for _, r := range refs {
		if r.Name() == dst {
			remote = r.Hash()
		}
	}
	if remote == local {
		return nil // up to date: nothing new, or a push before a crash
	}
	if remote.IsZero() {
		for _, r := range refs {
			if r.Hash() == local {
				// A commit the remote has already (the branch the
				// checkout came from, before any commit of the
				// workspace's): nothing of the workspace's to push.
				return nil
			}
		}
	}
	if !remote.IsZero() && !descends(repo, local, remote) {
		res.Conflict = fmt.Sprintf("the remote branch %s moved to %s, which %s does not descend from (not a fast-forward); the commit stays local",
			branch, shortHash(remote), shortHash(local))
		res.Remote = remote.String()
		return nil
	}
	// No object over the limit leaves: the objects the push would send
	// (what local has that the remote's refs do not) are checked first.
	var haves []plumbing.Hash
	for _, r := range refs {
		if r.Type() == plumbing.HashReference && repo.Storer.HasEncodedObject(r.Hash()) == nil {
			haves = append(haves, r.Hash())
		}
	}
	if big, err := tooLargeToPush(repo.Storer, local, haves, g.maxFileSize()); err != nil {
		return fmt.Errorf("git: objects to push: %w", err)
	} else if big != nil {
		res.Conflict = fmt.Sprintf("a commit to push holds object %s of %d bytes, over git.max_file_size (%d bytes): nothing pushed; take the file out of the branch's history (git rm --cached, then amend or rebase) or raise git.max_file_size",
			shortHash(big.h), big.size, g.maxFileSize())
		return nil
	}
	opts := &git.PushOptions{
		RemoteName: "origin",
		RefSpecs:   []config.RefSpec{config.RefSpec(local.String() + ":" + dst.String())},
		Auth:       g.Auth,
	}
	if !remote.IsZero() {
		// The remote must still hold what was checked: no push over a
		// change that arrives between the check and the push.
		opts.RequireRemoteRefs = []config.RefSpec{config.RefSpec(remote.String() + ":" + dst.String())}
	}
	err = rem.PushContext(ctx, opts)
	switch {
	case err == nil:
		res.Pushed = local.String()
	case errors.Is(err, git.NoErrAlreadyUpToDate):
	case isNonFastForward(err):
		res.Conflict = fmt.Sprintf("the remote branch %s moved while pushing (%v); the commit stays local", branch, err)
	default:
		return fmt.Errorf("git push %s %s: %w", g.URL, branch, err)
	}
	return nil
}

func shortHash(h plumbing.Hash) string { return h.String()[:12] }

type bigObject struct {
	h    plumbing.Hash
	size int64
}

// tooLargeToPush returns the first object reachable from local and not
// from haves that is larger than max (nil if none). Sizes come from the
// objects' headers; nothing is read whole.
func tooLargeToPush(st storage.Storer, local plumbing.Hash, haves []plumbing.Hash, max int64) (*bigObject, error) {
	hs, err := revlist.Objects(st, []plumbing.Hash{local}, haves)
	if err != nil {
		return nil, err
	}
	for _, h := range hs {
		n, err := st.EncodedObjectSize(h)
		if err != nil {
			return nil, err
		}
		if n > max {
			return &bigObject{h, n}, nil
		}
	}
	return nil, nil
}

func isNonFastForward(err error) bool {
	s := err.Error()
	return strings.Contains(s, "non-fast-forward") || strings.Contains(s, "fetch first") ||
		strings.Contains(s, "remote ref") && strings.Contains(s, "required to be")
}

// descends tells whether old is local or one of its ancestors. History
// that is not here (a shallow clone's boundary) counts as not found.
func descends(repo *git.Repository, local, old plumbing.Hash) bool {
	seen := map[plumbing.Hash]bool{}
	queue := []plumbing.Hash{local}
	for len(queue) > 0 && len(seen) < 1_000_000 {
		h := queue[0]
		queue = queue[1:]
		if h == old {
			return true
		}
		if seen[h] {
			continue
		}
		seen[h] = true
		c, err := repo.CommitObject(h)
		if err != nil {
			continue
		}
		queue = append(queue, c.ParentHashes...)
	}
	return false
}

// syncActor is who the syncer's own writes (a commit's objects, index and
// refs; remote-tracking refs after a push) are journaled as, with the
// pass's id as the request.
var syncActor = kv.Actor{Entry: "sync"}

// RepoConflictRel names a repository source's conflict in meta
// (sync/IDX/conflict/.git): a push that was not a fast-forward.
const RepoConflictRel = ".git"

// isGitDir tells whether rel is the .git directory or below it.
func isGitDir(rel string) bool { return rel == ".git" || strings.HasPrefix(rel, ".git/") }

// collapseGitDir counts every path below .git as the one path .git.
func collapseGitDir(m map[string]*Touch) map[string]*Touch {
	for rel := range m {
		if isGitDir(rel) && rel != ".git" {
			delete(m, rel)
			m[".git"] = &Touch{Rel: ".git"}
		}
	}
	return m
}

// repoPass is a pass over a source written back as a whole (git). The
// records after the cursor that others made (not the syncer itself: its
// own commits and ref updates must not start another pass) decide what is
// to do: a change in the work tree asks for a commit, a change below .git
// (the agent committed, or moved a branch) for a push only. Either waits
// for the debounce after the newest record, and for git's index.lock to
// go. A push that is not a fast-forward is a conflict, recorded like a
// path's (at RepoConflictRel) and tried again at the next change or
// explicit Sync; failures hold the cursor and back off.
func (s *Syncer) repoPass(ctx context.Context, src *source, recs []kv.Record, last uint64, conflicts map[string]Conflict, force bool) SourceReport {
	rep := SourceReport{Path: src.Path, Kind: src.Kind}
	now := time.Now()
	var first uint64
	var newest int64
	touched, worktree, gitdir := false, false, false
	var firstWorktree uint64 // the oldest record of the work tree's
	edited := func(seq uint64) {
		if !worktree || seq < firstWorktree {
			firstWorktree = seq
		}
		worktree = true
	}
	for i := range recs {
		r := &recs[i]
		if r.Actor.Entry == syncActor.Entry {
			continue
		}
		for i, p := range []string{r.Path, r.Path2} {
			cut := i == 0 && r.PathCut || i == 1 && r.Path2Cut
			rel, ok := touchedRel(src.Path, p, cut)
			if !ok || p == "" {
				continue
			}
			if cut {
				edited(r.Seq) // somewhere under rel: either, maybe
				gitdir = true
			}
			if !touched || r.Seq < first {
				first = r.Seq
			}
			touched = true
			newest = max(newest, r.Time)
			if rel != "" && !isGitDir(rel) {
				edited(r.Seq)
			} else {
				gitdir = true
			}
		}
	}
	_, inConflict := conflicts[RepoConflictRel]
	if (src.AgentCommits || src.CommitOnSync && !force) && !gitdir {
		// Edits of the work tree alone are the agent's to commit:
		// nothing to push until it does.
		touched = false
	}
	run := touched || force
	if touched && !force && now.UnixNano()-newest < int64(s.opts.Debounce) {
		rep.Waiting, run = 1, false
	}
	var notDone []uint64
	if src.CommitOnSync && !force && worktree {
		// The work tree's edits wait for an explicit Sync to be
		// committed: they stay pending (status counts them) until then.
		notDone = append(notDone, firstWorktree)
	}
	if run {
		if _, err := s.fs.Lstat(path.Join(src.Path, ".git/index.lock")); err == nil {
			// git is at work in the workspace: come back when it is done
			// (an explicit sync says so).
			run = false
			if force {
				rep.Errors = append(rep.Errors, fmt.Sprintf("%s: git is at work in the workspace (.git/index.lock exists); nothing committed or pushed", src.Path))
			} else {
				rep.Waiting = 1
			}
		}
	}
	if (rep.Waiting > 0 || len(rep.Errors) > 0) && touched {
		notDone = append(notDone, first)
	}
	set := map[string][]byte{}
	var del []string
	var pass string
	if run {
		pass = s.newPass()
		actor := syncActor
		actor.Request = pass
		commit := (worktree || force) && !src.AgentCommits && (force || !src.CommitOnSync)
		res := src.Repo.SyncRepo(ctx, s.fs.As(actor), src.Path, commit)
		rep.Commit, rep.Committed, rep.Branch, rep.Pushed = res.Commit, res.Changed, res.Branch, res.Pushed
		if commit && res.Err == nil {
			// Files too large to commit are conflicts of their own,
			// until they shrink or go.
			big := map[string]bool{}
			for _, t := range res.TooLarge {
				c := Conflict{Path: path.Join(src.Path, t.Rel), Reason: t.reason(), Time: now}
				rep.Conflicts = append(rep.Conflicts, c)
				v, _ := json.Marshal(c)
				set[conflictKey(src.Index, t.Rel)] = v
				big[t.Rel] = true
			}
			for rel := range conflicts {
				if rel != RepoConflictRel && !big[rel] {
					del = append(del, conflictKey(src.Index, rel))
				}
			}
		}
		switch {
		case res.Err != nil:
			rep.Errors = append(rep.Errors, fmt.Sprintf("%s: %v", src.Path, res.Err))
			if touched {
				notDone = append(notDone, first)
			}
		case res.Conflict != "":
			c := Conflict{Path: src.Path, Reason: res.Conflict, Remote: res.Remote, Time: now}
			rep.Conflicts = append(rep.Conflicts, c)
			v, _ := json.Marshal(c)
			set[conflictKey(src.Index, RepoConflictRel)] = v
		case inConflict:
			del = append(del, conflictKey(src.Index, RepoConflictRel)) // resolved
		}
	}
	cursor := Advance(src.cursor, last, notDone)
	did := rep.Commit != "" || rep.Pushed != "" || len(set)+len(del) > 0
	if did || force || cursor != src.cursor && now.Sub(src.saved) > 10*time.Second {
		set[cursorKey(src.Index)] = binary.BigEndian.AppendUint64(nil, cursor)
		lr := LastResult{Time: now, Result: rep.summary(), OK: len(rep.Errors) == 0 && len(rep.Conflicts) == 0}
		if did || force || len(rep.Errors) > 0 {
			v, _ := json.Marshal(lr)
			set[lastKey(src.Index)] = v
		}
		if err := s.st.CommitSync(nil, set, del); err != nil {
			rep.Errors = append(rep.Errors, err.Error())
			s.finish(src, &rep, force)
			return rep
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
	src.looked = last
	s.mu.Unlock()
	s.finish(src, &rep, force)
	if did {
		s.opts.Log.Info("synced", "source", src.Path, "pass", pass, "commit", rep.Commit, "pushed", rep.Pushed,
			"branch", rep.Branch, "conflicts", len(rep.Conflicts))
	}
	for _, e := range rep.Errors {
		s.opts.Log.Warn("sync failed", "source", src.Path, "err", e)
	}
	return rep
}
