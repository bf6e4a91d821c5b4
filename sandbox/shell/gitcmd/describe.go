package gitcmd

// git describe [--tags] [--always] [--long] [--abbrev=N] [COMMIT]: the
// nearest tag by the number of commits between, as git counts them.

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

func init() {
	gitSubs["describe"] = &gitSub{run: gitDescribe, flags: flags("--tags", "--always", "--long", "--abbrev=?")}
	gitChecks["describe"] = func(a *gitArgs) string {
		if len(a.args) > 1 || a.dash {
			return "describing more than one commit is not supported"
		}
		if v := a.val("--abbrev"); a.has("--abbrev") && v != "" && !isDigits(v) {
			return "--abbrev needs a number"
		}
		for _, w := range a.raw {
			if w == "--abbrev=" {
				return "--abbrev needs a number"
			}
		}
		return ""
	}
}

// describeMaxCandidates is git's --candidates default: the walk stops
// after finding this many tagged commits.
const describeMaxCandidates = 10

type describeTag struct {
	name      string
	annotated bool
	when      int64 // the tagger's date, for annotated tags
}

func gitDescribe(g *gitCmd) int {
	a := g.a
	rev := "HEAD"
	if len(a.args) == 1 {
		rev = a.args[0]
	}
	c, err := g.resolveCommit(rev)
	if err != nil {
		return g.fatal("Not a valid object name %s", rev)
	}
	abbrev := 7
	if v := a.val("--abbrev"); v != "" {
		abbrev, _ = strconv.Atoi(v)
		if abbrev != 0 {
			abbrev = min(40, max(abbrev, 4))
		}
	}
	// the tags by the commit they name
	tags := map[plumbing.Hash][]describeTag{}
	anyTag, anyUnannotated := false, false
	refs, err := g.repo.Storer.IterReferences()
	if err != nil {
		return g.fatal("%v", err)
	}
	refs.ForEach(func(r *plumbing.Reference) error {
		if !r.Name().IsTag() || r.Type() != plumbing.HashReference {
			return nil
		}
		t := describeTag{name: r.Name().Short()}
		h := r.Hash()
		if to, err := g.repo.TagObject(h); err == nil {
			t.annotated, t.when = true, to.Tagger.When.Unix()
			h = to.Target
			if to.TargetType != plumbing.CommitObject {
				return nil
			}
		}
		if _, err := g.commitObject(h); err != nil {
			return nil
		}
		if !t.annotated && !a.has("--tags") {
			anyUnannotated = true
			return nil
		}
		anyTag = true
		tags[h] = append(tags[h], t)
		return nil
	})
	for h, ts := range tags {
		// git prefers an annotated tag, then the newer, then the name
		sort.Slice(ts, func(i, j int) bool {
			if ts[i].annotated != ts[j].annotated {
				return ts[i].annotated
			}
			if ts[i].when != ts[j].when {
				return ts[i].when > ts[j].when
			}
			return ts[i].name < ts[j].name
		})
		tags[h] = ts
	}
	always := func() int {
		fmt.Fprintln(g.out, c.Hash.String()[:max(abbrev, 7)])
		return 0
	}
	if ts, ok := tags[c.Hash]; ok && !a.has("--long") {
		fmt.Fprintln(g.out, ts[0].name)
		return 0
	}
	if !anyTag {
		if a.has("--always") {
			return always()
		}
		if anyUnannotated {
			return g.fatal("No annotated tags can describe '%s'.\nHowever, there were unannotated tags: try --tags.", c.Hash)
		}
		return g.fatal("No names found, cannot describe anything.")
	}
	// the first tagged commits met walking back from c, in git's order
	var found []*object.Commit
	err = g.walk([]*object.Commit{c}, nil, false, func(x *object.Commit) (bool, error) {
		if _, ok := tags[x.Hash]; ok {
			found = append(found, x)
		}
		return len(found) < describeMaxCandidates, nil
	})
	if err != nil {
		return g.fatal("%v", err)
	}
	if len(found) == 0 {
		if a.has("--always") {
			return always()
		}
		return g.fatal("No tags can describe '%s'.\nTry --always, or create some tags.", c.Hash)
	}
	// the depth of a tag is the number of commits reachable from c and
	// not from the tag: |R(c)| - |R(tag)|, counted one walk at a time
	count := func(x *object.Commit) (int, error) {
		n := 0
		err := g.walk([]*object.Commit{x}, nil, false, func(*object.Commit) (bool, error) { n++; return true, nil })
		return n, err
	}
	total, err := count(c)
	if err != nil {
		return g.fatal("%v", err)
	}
	best, bestDepth := -1, 0
	for i, f := range found {
		n, err := count(f)
		if err != nil {
			return g.fatal("%v", err)
		}
		if d := total - n; best < 0 || d < bestDepth {
			best, bestDepth = i, d
		}
	}
	name := tags[found[best].Hash][0].name
	if abbrev == 0 {
		fmt.Fprintln(g.out, name)
		return 0
	}
	fmt.Fprintf(g.out, "%s-%d-g%s\n", name, bestDepth, c.Hash.String()[:abbrev])
	return 0
}
