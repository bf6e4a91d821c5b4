package sources

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/spec"
	"github.com/computerfs/computerfs/wsfs"
)

// importGit checks a repository out at the source's path: a working tree
// and a .git directory, written into the store directly, never through
// the mount (see gitcli.go for how).
func (im *Importer) importGit(ctx context.Context, idx int, src *spec.Source) error {
	g := src.Git
	url := GitURL(g.URL)
	auth, err := GitAuth(g, url)
	if err != nil {
		return err
	}
	target, err := resolveRef(ctx, url, g, auth)
	if err != nil {
		return err
	}
	if gitBin := im.gitBinary(); gitBin != "" {
		return im.cloneWithCLI(ctx, gitBin, idx, src, url, target)
	}
	return im.cloneWithGoGit(ctx, idx, src, url, auth, target)
}

// cloneWithGoGit clones with go-git straight into the store.
func (im *Importer) cloneWithGoGit(ctx context.Context, idx int, src *spec.Source, url string, auth transport.AuthMethod, target refTarget) error {
	g := src.Git
	name := src.Path
	im.Progress.Begin(name, "clone", 0, 0)
	prog := &gitProgress{p: im.Progress, name: name}
	wt := &countingFS{Billy: im.fs.Billy(src.Path), p: im.Progress}
	dot, err := im.fs.Billy(src.Path).Chroot(".git")
	if err != nil {
		return err
	}
	dot = &packFS{Filesystem: dot, g: prog}
	st := filesystem.NewStorageWithOptions(dot, cache.NewObjectLRUDefault(), filesystem.Options{ExclusiveAccess: true, KeepDescriptors: true})
	defer st.Close()
	opts := &git.CloneOptions{
		URL:           url,
		Auth:          auth,
		ReferenceName: target.ref,
		SingleBranch:  g.Depth > 0, // as git clone --depth does
		Depth:         g.Depth,
		NoCheckout:    true,
		Tags:          git.AllTags,
		Progress:      prog,
	}
	if g.Depth > 0 {
		opts.Tags = git.NoTags
	}
	repo, err := git.CloneContext(ctx, st, wt, opts)
	prog.end()
	if err != nil {
		return fmt.Errorf("git clone %s: %w", g.URL, explainGitError(err))
	}
	head := target.hash
	if head.IsZero() {
		ref, err := repo.Head()
		if err != nil {
			return fmt.Errorf("git %s: HEAD: %w", g.URL, err)
		}
		head = ref.Hash()
	} else if err := repo.Storer.SetReference(plumbing.NewHashReference(plumbing.HEAD, head)); err != nil {
		return err // a commit: a detached HEAD, as git checkout COMMIT leaves it
	}
	commit, err := repo.CommitObject(head)
	if err != nil {
		return fmt.Errorf("git %s: commit %s: %w", g.URL, head, err)
	}
	files, err := treeFiles(commit, func(p string) error {
		if _, err := im.Spec.TreeFile(idx, p); err != nil {
			return fmt.Errorf("git %s: the tree to check out has a path the workspace refuses: %w", g.URL, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	im.Progress.Begin(name, "checkout", files, 0)
	w, err := repo.Worktree()
	if err != nil {
		return err
	}
	if err := w.Reset(&git.ResetOptions{Mode: git.HardReset, Commit: head}); err != nil {
		return fmt.Errorf("git %s: checkout %s: %w", g.URL, head, err)
	}
	im.Progress.End()
	return im.recordGitOrigins(idx, src, repo)
}

// recordGitOrigins notes for every checked-out file its path in the
// repository and blob hash.
func (im *Importer) recordGitOrigins(idx int, src *spec.Source, repo *git.Repository) error {
	index, err := repo.Storer.Index()
	if err != nil {
		return err
	}
	for _, e := range index.Entries {
		a, err := im.fs.Lstat(path.Join(src.Path, e.Name)) // a symbolic link is itself the file
		if err != nil {
			return fmt.Errorf("git: checked-out file %s: %w", e.Name, err)
		}
		if err := im.fs.Store().SetOrigin(a.Ino, kv.Origin{Source: uint32(idx), Key: e.Name, ID: e.Hash.String()}); err != nil {
			return err
		}
	}
	return nil
}

// treeFiles counts the files of a commit's tree, for progress, and
// checks every path with check; it reads tree objects only, not the
// files' contents.
func treeFiles(c *object.Commit, check func(string) error) (int64, error) {
	tree, err := c.Tree()
	if err != nil {
		return 0, err
	}
	w := object.NewTreeWalker(tree, true, nil)
	defer w.Close()
	var n int64
	for {
		name, e, err := w.Next()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		if e.Mode != filemode.Dir {
			if err := check(name); err != nil {
				return n, err
			}
		}
		if e.Mode.IsFile() {
			n++
		}
	}
}

// refTarget is what a spec's ref names: a remote reference to clone, or a
// commit to check out after cloning the default branch.
type refTarget struct {
	ref  plumbing.ReferenceName
	hash plumbing.Hash
}

var hexRe = regexp.MustCompile(`^[0-9a-f]{4,40}$`)

// resolveRef lists the remote's references (git ls-remote) and finds ref
// among branches, then tags, then commit hashes.
func resolveRef(ctx context.Context, url string, g *spec.Git, auth transport.AuthMethod) (refTarget, error) {
	rem := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{url}})
	refs, err := rem.ListContext(ctx, &git.ListOptions{Auth: auth})
	if err != nil {
		return refTarget{}, fmt.Errorf("git %s: %w", g.URL, explainGitError(err))
	}
	if g.Ref == "" {
		return refTarget{}, nil
	}
	var branches, tags []string
	for _, r := range refs {
		switch n := r.Name(); {
		case n.IsBranch():
			branches = append(branches, n.Short())
			if n.Short() == g.Ref || string(n) == g.Ref {
				return refTarget{ref: n}, nil
			}
		case n.IsTag():
			tags = append(tags, n.Short())
		}
	}
	for _, r := range refs {
		if n := r.Name(); n.IsTag() && (n.Short() == g.Ref || string(n) == g.Ref) {
			return refTarget{ref: n}, nil
		}
	}
	if hexRe.MatchString(g.Ref) {
		if len(g.Ref) != 40 {
			return refTarget{}, fmt.Errorf("git %s: ref %q: give a commit as its full 40-digit hash", g.URL, g.Ref)
		}
		if g.Depth > 0 {
			return refTarget{}, fmt.Errorf("git %s: ref %q is a commit, which a shallow clone (depth %d) cannot fetch: use depth 0, a branch or a tag", g.URL, g.Ref, g.Depth)
		}
		return refTarget{hash: plumbing.NewHash(g.Ref)}, nil
	}
	sort.Strings(branches)
	sort.Strings(tags)
	return refTarget{}, fmt.Errorf("git %s: ref %q does not exist (branches: %s; tags: %s)", g.URL, g.Ref,
		listOrNone(branches), listOrNone(tags))
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	if len(s) > 10 {
		return strings.Join(s[:10], ", ") + fmt.Sprintf(" and %d more", len(s)-10)
	}
	return strings.Join(s, ", ")
}

func explainGitError(err error) error {
	switch {
	case errors.Is(err, transport.ErrRepositoryNotFound):
		return fmt.Errorf("%w (check the url)", err)
	case errors.Is(err, transport.ErrAuthenticationRequired), errors.Is(err, transport.ErrAuthorizationFailed):
		return fmt.Errorf("%w (check token_env, ssh_key or the SSH agent)", err)
	case errors.Is(err, transport.ErrEmptyRemoteRepository):
		return fmt.Errorf("%w: nothing to check out", err)
	}
	return err
}

var schemeRe = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*://`)
var scpRe = regexp.MustCompile(`^[^/]+@[^/:]+:`)

// GitURL turns a spec's url into one go-git understands: a local path
// becomes an absolute one; URLs stay as they are.
func GitURL(u string) string {
	if schemeRe.MatchString(u) || scpRe.MatchString(u) {
		return u
	}
	if abs, err := filepath.Abs(u); err == nil {
		return abs
	}
	return u
}

// GitAuth returns the credentials for a git source, from the environment:
// a token for HTTPS (the variable token_env names), a key file or the SSH
// agent for ssh.
func GitAuth(g *spec.Git, url string) (transport.AuthMethod, error) {
	ep, err := transport.NewEndpoint(url)
	if err != nil {
		return nil, fmt.Errorf("git url %q: %w", g.URL, err)
	}
	switch ep.Protocol {
	case "http", "https":
		if g.TokenEnv == "" {
			return nil, nil
		}
		tok := os.Getenv(g.TokenEnv)
		if tok == "" {
			return nil, fmt.Errorf("git %s: token_env %s is not set in the environment", g.URL, g.TokenEnv)
		}
		user := g.Username
		if user == "" {
			user = "git"
		}
		return &githttp.BasicAuth{Username: user, Password: tok}, nil
	case "ssh":
		user := ep.User
		if user == "" {
			user = "git"
		}
		if g.SSHKey != "" {
			a, err := gitssh.NewPublicKeysFromFile(user, g.SSHKey, os.Getenv("SSH_KEY_PASSPHRASE"))
			if err != nil {
				return nil, fmt.Errorf("git %s: ssh_key %s: %w", g.URL, g.SSHKey, err)
			}
			return a, nil
		}
		if os.Getenv("SSH_AUTH_SOCK") == "" {
			return nil, fmt.Errorf("git %s: an ssh url needs ssh_key or a running SSH agent (SSH_AUTH_SOCK)", g.URL)
		}
		a, err := gitssh.NewSSHAgentAuth(user)
		if err != nil {
			return nil, fmt.Errorf("git %s: SSH agent: %w", g.URL, err)
		}
		return a, nil
	}
	return nil, nil
}

// countingFS counts the files go-git writes, for progress.
type countingFS struct {
	*wsfs.Billy
	p *Progress
}

func (c *countingFS) OpenFile(name string, flag int, perm os.FileMode) (billy.File, error) {
	f, err := c.Billy.OpenFile(name, flag, perm)
	if err != nil || flag&(os.O_WRONLY|os.O_RDWR) == 0 || c.p == nil {
		return f, err
	}
	return &countingFile{File: f, p: c.p}, nil
}

func (c *countingFS) Create(name string) (billy.File, error) {
	return c.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
}

type countingFile struct {
	billy.File
	p *Progress
	n int64
}

func (f *countingFile) Write(b []byte) (int, error) {
	n, err := f.File.Write(b)
	f.n += int64(n)
	return n, err
}

func (f *countingFile) Close() error {
	f.p.Add(1, f.n)
	return f.File.Close()
}
