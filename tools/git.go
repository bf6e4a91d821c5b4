package tools

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/computerfs/computerfs/internal/gitnet"
)

// GitCloneArgs are GitClone's arguments.
type GitCloneArgs struct {
	URL   string `json:"url"`             // https, ssh, file:// or a local path of the host
	Path  string `json:"path"`            // where the checkout goes; must not exist
	Ref   string `json:"ref,omitempty"`   // a branch or tag (default: the remote's HEAD)
	Depth int    `json:"depth,omitempty"` // 0: the whole history
}

// GitCloneResult is what GitClone made.
type GitCloneResult struct {
	Path   string `json:"path"`
	Head   string `json:"head"` // the commit checked out
	Branch string `json:"branch,omitempty"`
}

func (r GitCloneResult) summary() string { return "checked out " + r.Head }

// Text is the result as a model reads it.
func (r GitCloneResult) Text() string {
	return fmt.Sprintf("Cloned into %s at %s.", r.Path, r.Head)
}

// GitClone clones a git repository into the workspace (with go-git,
// through the store, journaled as the call's). It is for harnesses, not
// offered over MCP. The url is the caller's, so it is held to the
// policy: https or http to a host of policy.git_clone_hosts, and nothing
// else (no local path or file:// url, which would read the host's
// repositories as the daemon; no ssh, which would use the daemon's SSH
// agent; no ext::). No credentials are sent: a public repository works.
func (t *Tools) GitClone(ctx context.Context, a GitCloneArgs) (GitCloneResult, error) {
	return do(ctx, t, "git-clone", a, func(c *call) (GitCloneResult, error) {
		if a.URL == "" {
			return GitCloneResult{}, errors.New("url is empty")
		}
		if err := t.cloneURLAllowed(a.URL); err != nil {
			return GitCloneResult{}, err
		}
		if a.Depth < 0 {
			return GitCloneResult{}, errors.New("depth must be 0 (the whole history) or more")
		}
		p, err := t.resolveFor(c.fs, a.Path, true, true)
		if err != nil {
			return GitCloneResult{}, err
		}
		if p == "/" {
			return GitCloneResult{}, fmt.Errorf("clone into a directory under %s, not the root", Root)
		}
		if _, err := c.fs.Lstat(p); err == nil {
			return GitCloneResult{}, fmt.Errorf("%s exists: clone into a new path", show(p))
		} else if !errors.Is(err, fs.ErrNotExist) {
			return GitCloneResult{}, showErr(err)
		}
		if err := t.mkdirAll(c, p); err != nil {
			return GitCloneResult{}, err
		}
		// The clone fills the new directory whole, as an import does:
		// paths the rules cover are made too (a denied one is then
		// unreadable, a read-only one unchangeable, like any other). The
		// harness clones; the agent cannot (no MCP tool).
		cfs := t.raw.As(c.actor)
		var repo *git.Repository
		refs := []plumbing.ReferenceName{""}
		if a.Ref != "" { // a branch, else a tag
			refs = []plumbing.ReferenceName{plumbing.NewBranchReferenceName(a.Ref), plumbing.NewTagReferenceName(a.Ref)}
		}
		var cerr error
		for _, ref := range refs {
			dot, err := cfs.Billy(p).Chroot(".git")
			if err != nil {
				return GitCloneResult{}, err
			}
			st := filesystem.NewStorageWithOptions(dot, cache.NewObjectLRUDefault(), filesystem.Options{KeepDescriptors: true})
			opts := &git.CloneOptions{URL: a.URL, ReferenceName: ref, Depth: a.Depth, SingleBranch: a.Depth > 0}
			if a.Depth > 0 {
				opts.Tags = git.NoTags
			}
			// a listed host may redirect, but only to a listed host
			rctx := gitnet.WithRedirectCheck(ctx, func(u *url.URL) error { return t.cloneURLAllowed(u.String()) })
			repo, cerr = git.CloneContext(rctx, st, cfs.Billy(p), opts)
			st.Close()
			if cerr == nil {
				break
			}
			repo = nil
			if err := cfs.RemoveAll(p); err != nil {
				return GitCloneResult{}, showErr(err)
			}
			if err := cfs.MkdirAll(p, 0o755); err != nil {
				return GitCloneResult{}, showErr(err)
			}
		}
		if repo == nil {
			cfs.RemoveAll(p)
			if a.Ref != "" {
				return GitCloneResult{}, fmt.Errorf("git clone %s, ref %q (tried as a branch and as a tag): %w", a.URL, a.Ref, cerr)
			}
			return GitCloneResult{}, fmt.Errorf("git clone %s: %w", a.URL, cerr)
		}
		head, err := repo.Head()
		if err != nil {
			return GitCloneResult{}, fmt.Errorf("git %s: HEAD: %w", a.URL, err)
		}
		res := GitCloneResult{Path: show(p), Head: head.Hash().String()}
		if head.Name().IsBranch() {
			res.Branch = head.Name().Short()
		}
		return res, nil
	})
}

// cloneURLAllowed checks a git-clone url against the policy.
func (t *Tools) cloneURLAllowed(raw string) error {
	hosts := t.pol.p.GitCloneHosts
	u, err := url.Parse(raw)
	if err != nil || !strings.Contains(raw, "://") {
		return &Refusal{Rule: "git-clone", Msg: fmt.Sprintf("url %q: give an https:// (or http://) url; local paths, file://, ssh and ext:: are refused", raw)}
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return &Refusal{Rule: "git-clone", Msg: fmt.Sprintf("url %q: the %s scheme is refused; give an https:// (or http://) url", raw, u.Scheme)}
	}
	if u.User != nil {
		return &Refusal{Rule: "git-clone", Msg: fmt.Sprintf("url %q: credentials in the url are refused", raw)}
	}
	if u.Host == "" {
		return &Refusal{Rule: "git-clone", Msg: fmt.Sprintf("url %q has no host", raw)}
	}
	for _, h := range hosts {
		if strings.EqualFold(h, u.Host) || strings.EqualFold(h, u.Hostname()) {
			return nil
		}
	}
	if len(hosts) == 0 {
		return &Refusal{Rule: "policy git_clone_hosts", Msg: "git-clone is off: the policy lists no git_clone_hosts"}
	}
	return &Refusal{Rule: "policy git_clone_hosts", Msg: fmt.Sprintf("host %q is not in git_clone_hosts", u.Host)}
}
