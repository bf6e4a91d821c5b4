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

// HistoryRecord is what the daemon found in a source's git repositories
// (a git source's checkout; the .git directories a dir source copied in)
// against the policy's deny rules.
type HistoryRecord struct {
	// Rules identifies the deny rules the objects were checked against
	// (RulesKey): a record of other rules is checked again.
	Rules string `json:"rules"`
	// Exposed are the repositories whose .git must be denied.
	Exposed []RepoHistory `json:"exposed,omitempty"`
	// Unsure says a check did not finish (the history too large,
	// cancelled): checked again at the next mount (Exposed holds the
	// repository meanwhile).
	Unsure bool `json:"unsure,omitempty"`
}

// RepoHistory is one repository whose .git is denied, and why.
type RepoHistory struct {
	Dir    string `json:"dir"`              // the store path to deny (a .git, or a whole source)
	Denied string `json:"denied,omitempty"` // a denied path its history holds
	Why    string `json:"why,omitempty"`    // why it could not be checked
}

// Reason is why, in a few words, for the deny rule's name.
func (r RepoHistory) Reason() string {
	if r.Denied != "" {
		return "holds " + policy.Show(r.Denied)
	}
	return "not checked: " + r.Why
}

// Rule is the name of the deny rule of r, as refusals show it.
func (r RepoHistory) Rule() string {
	return fmt.Sprintf("policy deny (the git history of %s %s)", policy.Show(r.Dir), r.Reason())
}

// Apply adds the record's deny rules to c.
func (h HistoryRecord) Apply(c *policy.Checker) {
	for _, r := range h.Exposed {
		c.DenyPath(r.Rule(), r.Dir)
	}
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

// HasHistory tells whether a source of src's kind can bring git objects
// into the workspace (a git source, or a dir source, which copies any
// .git it holds).
func HasHistory(src *spec.Source) bool { return src.Kind() == "git" || src.Kind() == "dir" }

// GitDir is the store path of git source src's .git.
func GitDir(src *spec.Source) string { return path.Join("/", src.Path, ".git") }

// MaxHistoryEntries bounds the tree entries CheckHistory reads, and
// maxHistoryPaths the bytes of the directory paths it keeps (a deep tree
// of long names makes long paths), maxTreeObject the size of one tree
// object it decodes: past any of them the history counts as exposed
// (RepoHistory.Why). The objects may be an upstream's or the agent's.
const MaxHistoryEntries = 8 << 20

var (
	maxHistoryPaths = 64 << 20 // vars: the tests lower them
	maxTreeObject   = int64(64 << 20)
)

// CheckHistory reads every commit in repo's object store (not only those
// its references reach) and the tree of each, and returns the first path
// (root: the repository's store path) that c denies. Each tree is read
// once for each path it appears at.
func CheckHistory(ctx context.Context, repo *git.Repository, root string, c *policy.Checker) (denied string, err error) {
	if !c.HasDeny() {
		return "", nil
	}
	type visit struct {
		tree plumbing.Hash
		dir  string
	}
	seen := map[visit]bool{}
	var stack []visit
	entries, pathBytes := 0, 0
	walk := func(top plumbing.Hash) error {
		stack = append(stack[:0], visit{top, root})
		for len(stack) > 0 {
			v := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if seen[v] {
				continue
			}
			seen[v] = true
			obj, err := repo.Storer.EncodedObject(plumbing.TreeObject, v.tree)
			if errors.Is(err, plumbing.ErrObjectNotFound) {
				continue // not here (a shallow or partial history): nothing to read
			}
			if err != nil {
				return err
			}
			if obj.Size() > maxTreeObject {
				return fmt.Errorf("tree %s is %d bytes, more than %d", v.tree, obj.Size(), maxTreeObject)
			}
			t, err := object.DecodeTree(repo.Storer, obj)
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
					denied = p
					return errFound
				}
				if e.Mode == filemode.Dir {
					if pathBytes += len(p); pathBytes > maxHistoryPaths {
						return fmt.Errorf("the history's directory paths take more than %d bytes", maxHistoryPaths)
					}
					stack = append(stack, visit{e.Hash, p})
				}
			}
		}
		return nil
	}
	iter, err := repo.CommitObjects()
	if err != nil {
		return "", err
	}
	defer iter.Close()
	err = iter.ForEach(func(cm *object.Commit) error { return walk(cm.TreeHash) })
	if errors.Is(err, errFound) {
		return denied, nil
	}
	return "", err
}

var errFound = errors.New("found")

// CheckSourceHistory checks the git repositories of source src in f
// against c: a git source's checkout, or every directory a dir source
// holds whose name git takes for .git. A repository that does not open
// as the daemon opens one (see internal/safegit) is exposed.
func CheckSourceHistory(ctx context.Context, f *wsfs.FS, src *spec.Source, c *policy.Checker, key string) HistoryRecord {
	rec := HistoryRecord{Rules: key}
	if !c.HasDeny() {
		return rec
	}
	var dots []string
	switch src.Kind() {
	case "git":
		if _, err := f.Lstat(GitDir(src)); !errors.Is(err, fs.ErrNotExist) {
			dots = append(dots, GitDir(src))
		}
	case "dir":
		var err error
		if dots, err = findGitDirs(ctx, f, path.Join("/", src.Path)); err != nil {
			// Not looked through: the whole source is the agent's only
			// once it is.
			rec.Exposed = append(rec.Exposed, RepoHistory{Dir: path.Join("/", src.Path), Why: err.Error()})
			rec.Unsure = true
			return rec
		}
	}
	for _, dot := range dots {
		r := checkRepo(ctx, f, dot, c)
		if r.Denied != "" || r.Why != "" {
			rec.Exposed = append(rec.Exposed, r)
			rec.Unsure = rec.Unsure || r.Why != ""
		}
	}
	return rec
}

// checkRepo checks the repository whose .git is the store path dot.
func checkRepo(ctx context.Context, f *wsfs.FS, dot string, c *policy.Checker) RepoHistory {
	r := RepoHistory{Dir: dot}
	if path.Base(dot) != ".git" {
		r.Why = "a .git directory by another spelling"
		return r
	}
	co, err := safegit.Open(f, path.Dir(dot), "")
	if err != nil {
		r.Why = err.Error()
		return r
	}
	defer co.Close()
	if r.Denied, err = CheckHistory(ctx, co.Repo, path.Dir(dot), c); err != nil {
		r.Why = err.Error()
	}
	return r
}

// maxGitDirSearch bounds the entries findGitDirs reads.
const maxGitDirSearch = 1 << 20

// findGitDirs returns the store paths of the directories under root
// (root included) whose name git takes for .git.
func findGitDirs(ctx context.Context, f *wsfs.FS, root string) ([]string, error) {
	var out []string
	seen := 0
	stack := []string{root}
	for len(stack) > 0 {
		dir := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		err := f.ReadDir(dir, "", func(d kv.Dirent) bool {
			seen++
			if d.Type != kv.S_IFDIR {
				return seen <= maxGitDirSearch
			}
			p := path.Join(dir, d.Name)
			if spec.IsGitDirName(d.Name) {
				out = append(out, p)
			} else {
				stack = append(stack, p)
			}
			return seen <= maxGitDirSearch
		})
		if err != nil {
			return nil, err
		}
		if seen > maxGitDirSearch {
			return nil, fmt.Errorf("more than %d entries to look through for git repositories", maxGitDirSearch)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// recordHistory checks the objects the import wrote for source idx
// against the spec's deny rules and records what it found.
func (im *Importer) recordHistory(ctx context.Context, idx int, src *spec.Source, log interface{ Warn(string, ...any) }) error {
	c := policy.New(im.Spec.Policy)
	if !c.HasDeny() {
		return nil
	}
	rec := CheckSourceHistory(ctx, im.fs, src, c, RulesKey(im.Spec.Policy))
	for _, r := range rec.Exposed {
		log.Warn("the git history holds what the policy denies: it is denied to the agent", "git_dir", r.Dir, "reason", r.Reason())
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
		rec := HistoryRecord{Rules: RulesKey(r.Spec.Policy)}
		rh := RepoHistory{Dir: dot}
		var err error
		if rh.Denied, err = CheckHistory(ctx, repo, path.Join("/", src.Path), policy.New(r.Spec.Policy)); err != nil {
			rh.Why = err.Error()
		}
		if rh.Denied != "" || rh.Why != "" {
			rec.Exposed, rec.Unsure = []RepoHistory{rh}, rh.Why != ""
			rec.Apply(live)
			r.Log.Warn("the fetched git history holds what the policy denies: it is denied to the agent", "git_dir", dot, "reason", rh.Reason())
		}
		return WriteHistory(r.FS.Store(), idx, rec)
	}
}
