package sources

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/computerfs/computerfs/internal/safegit"
	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/policy"
	"github.com/computerfs/computerfs/spec"
	"github.com/computerfs/computerfs/wsfs"
)

// A policy's deny rules cover the work tree, and a git repository's
// objects hold every file its history ever had: a file denied in the work
// tree but committed upstream can be read back from .git (git show, or any
// program reading the pack files). So when the objects the daemon brings
// into a git source (import, refresh) hold a path a deny rule covers, the
// source's .git is denied too, for as long as the rules are the same:
// the workspace's work tree stays the agent's, its history does not.
//
// The check is made by the daemon when it writes the objects (before the
// agent can touch them) and recorded in the store (HistoryRecord, in the
// store's meta, outside the workspace), because afterwards the agent may
// move or hide objects (a pack file moved out of .git/objects is still
// readable, and no longer seen by a look at the repository).

// HistoryRecord is what the daemon found in a git source's objects
// against the policy's deny rules.
type HistoryRecord struct {
	// Rules identifies the deny rules the objects were checked against
	// (RulesKey): a record of other rules is checked again.
	Rules string `json:"rules"`
	// Denied is a path the history holds that a deny rule covers ("":
	// none).
	Denied string `json:"denied,omitempty"`
	// Why says why the check could not finish (the history too large, a
	// repository that does not open): taken as exposed.
	Why string `json:"why,omitempty"`
}

// Exposes says whether the source's .git must be denied.
func (h HistoryRecord) Exposes() bool { return h.Denied != "" || h.Why != "" }

// Reason is the record in a few words, for the deny rule's name.
func (h HistoryRecord) Reason() string {
	if h.Denied != "" {
		return "holds " + policy.Show(h.Denied)
	}
	return "not checked: " + h.Why
}

// historyMeta is the store's meta key of source idx's HistoryRecord.
func historyMeta(idx int) string { return fmt.Sprintf("git-history/%d", idx) }

// RulesKey identifies p's deny rules.
func RulesKey(p *spec.Policy) string {
	var deny []string
	if p != nil {
		deny = p.Deny
	}
	b, _ := json.Marshal(deny)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:12])
}

// ReadHistory returns the record of source idx, if the store has one.
func ReadHistory(st *kv.Store, idx int) (HistoryRecord, bool, error) {
	b, err := st.GetMeta(historyMeta(idx))
	if errors.Is(err, kv.ErrNotFound) {
		return HistoryRecord{}, false, nil
	}
	if err != nil {
		return HistoryRecord{}, false, err
	}
	var h HistoryRecord
	if json.Unmarshal(b, &h) != nil {
		return HistoryRecord{}, false, nil // checked again
	}
	return h, true, nil
}

// WriteHistory records h for source idx.
func WriteHistory(st *kv.Store, idx int, h HistoryRecord) error {
	b, _ := json.Marshal(h)
	return st.SetMeta(historyMeta(idx), b)
}

// GitDir is the store path of git source src's .git.
func GitDir(src *spec.Source) string { return path.Join("/", src.Path, ".git") }

// HistoryRule is the name of the deny rule of source src's .git, as
// refusals show it.
func HistoryRule(src *spec.Source, h HistoryRecord) string {
	return fmt.Sprintf("policy deny (the history of the git source %s %s)", policy.Show(path.Join("/", src.Path)), h.Reason())
}

// MaxHistoryEntries bounds the tree entries CheckHistory reads: past it
// the history counts as exposed (HistoryRecord.Why).
const MaxHistoryEntries = 8 << 20

// CheckHistory reads every commit in repo's object store (not only those
// its references reach) and the tree of each, and returns the first path
// (root: the repository's store path) that c denies. Each tree is read
// once for each path it appears at.
func CheckHistory(ctx context.Context, repo *git.Repository, root string, c *policy.Checker, key string) HistoryRecord {
	rec := HistoryRecord{Rules: key}
	if !c.HasDeny() {
		return rec
	}
	type visit struct {
		tree plumbing.Hash
		dir  string
	}
	seen := map[visit]bool{}
	var stack []visit
	entries := 0
	walk := func(top plumbing.Hash) error {
		stack = append(stack[:0], visit{top, root})
		for len(stack) > 0 {
			v := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if seen[v] {
				continue
			}
			seen[v] = true
			t, err := repo.TreeObject(v.tree)
			if errors.Is(err, plumbing.ErrObjectNotFound) {
				continue // not here (a shallow or partial history): nothing to read
			}
			if err != nil {
				return err
			}
			for _, e := range t.Entries {
				if entries++; entries > MaxHistoryEntries {
					return fmt.Errorf("the history has more than %d tree entries", MaxHistoryEntries)
				}
				if entries%4096 == 0 && ctx.Err() != nil {
					return ctx.Err()
				}
				p := path.Join(v.dir, e.Name)
				if e.Name == "" || e.Name == "." || e.Name == ".." {
					p = v.dir + "/" + e.Name // as written: a name no checkout takes
				}
				if c.Denied(p) != nil {
					rec.Denied = p
					return errFound
				}
				if e.Mode == filemode.Dir {
					stack = append(stack, visit{e.Hash, p})
				}
			}
		}
		return nil
	}
	iter, err := repo.CommitObjects()
	if err != nil {
		rec.Why = err.Error()
		return rec
	}
	defer iter.Close()
	err = iter.ForEach(func(cm *object.Commit) error { return walk(cm.TreeHash) })
	if err != nil && !errors.Is(err, errFound) {
		rec.Why = err.Error()
	}
	return rec
}

var errFound = errors.New("found")

// CheckSourceHistory opens git source idx's checkout in f (as the daemon
// does, see internal/safegit) and checks its objects against c. A source
// with no .git has nothing to expose; one that does not open counts as
// exposed.
func CheckSourceHistory(ctx context.Context, f *wsfs.FS, src *spec.Source, c *policy.Checker, key string) HistoryRecord {
	if _, err := f.Lstat(GitDir(src)); errors.Is(err, fs.ErrNotExist) {
		return HistoryRecord{Rules: key}
	}
	co, err := safegit.Open(f, src.Path, GitURL(src.Git.URL))
	if err != nil {
		return HistoryRecord{Rules: key, Why: err.Error()}
	}
	defer co.Close()
	return CheckHistory(ctx, co.Repo, path.Join("/", src.Path), c, key)
}

// recordHistory checks the objects the import wrote for source idx
// against the spec's deny rules and records what it found.
func (im *Importer) recordHistory(ctx context.Context, idx int, src *spec.Source, log interface{ Warn(string, ...any) }) error {
	c := policy.New(im.Spec.Policy)
	if !c.HasDeny() {
		return nil
	}
	rec := CheckSourceHistory(ctx, im.fs, src, c, RulesKey(im.Spec.Policy))
	if rec.Exposes() {
		log.Warn("the git history holds what the policy denies: the source's .git is denied to the agent", "reason", rec.Reason())
	}
	return WriteHistory(im.Store, idx, rec)
}

// holdHistory denies source src's .git while a fetch writes objects into
// it, when the rules have deny rules and do not deny it already; the
// function it returns checks the objects then, records what it found,
// denies the .git for good if they hold a denied path, and lifts the
// hold. The agent never reads objects that were not checked.
func (r *Refresher) holdHistory(src *spec.Source) func(context.Context, int, *git.Repository) error {
	live := r.Rules
	if live == nil {
		live = policy.New(r.Spec.Policy)
	}
	dot := GitDir(src)
	if !live.HasDeny() || live.Denied(dot) != nil {
		return func(context.Context, int, *git.Repository) error { return nil }
	}
	hold := fmt.Sprintf("policy deny (the history of the git source %s is checked after a fetch)", policy.Show(path.Join("/", src.Path)))
	live.DenyPath(hold, dot)
	return func(ctx context.Context, idx int, repo *git.Repository) error {
		defer live.Allow(hold)
		// The spec's rules alone: the hold itself is not what is looked for.
		rec := CheckHistory(ctx, repo, path.Join("/", src.Path), policy.New(r.Spec.Policy), RulesKey(r.Spec.Policy))
		if rec.Exposes() {
			live.DenyPath(HistoryRule(src, rec), dot)
			r.Log.Warn("the fetched git history holds what the policy denies: the source's .git is denied to the agent", "source", src.Path, "reason", rec.Reason())
		}
		return WriteHistory(r.FS.Store(), idx, rec)
	}
}
