package gitcmd

// git shortlog [-s] [-n] [-e] [-c] [REVISIONS] [-- PATHS]: commits grouped
// by author (by committer with -c).

import (
	"fmt"
	"sort"

	"github.com/go-git/go-git/v5/plumbing/object"
)

func init() {
	// shortlog's --committer groups by committer (parse-options takes it
	// before the revision option --committer=PATTERN, which shortlog so
	// refuses)
	specs := []string{"--summary|-s", "--numbered|-n", "--email|-e", "-c|--committer", "--all", "--no-merges", "--first-parent"}
	for _, f := range commitFilterFlags {
		if f != "--committer=" {
			specs = append(specs, f)
		}
	}
	gitSubs["shortlog"] = &gitSub{run: gitShortlog, flags: flags(specs...)}
	gitChecks["shortlog"] = checkFilterOpts
}

func gitShortlog(g *gitCmd) int {
	a := g.a
	if _, err := g.wfs.Lstat(g.file(".mailmap")); err == nil {
		return g.usage("a .mailmap is not supported")
	}
	if len(a.args[:argsBeforeDash(a)]) == 0 && !a.has("--all") {
		// with no revision and no terminal, git reads a log from stdin
		var b [1]byte
		if g.stdin != nil {
			if n, _ := g.stdin.Read(b[:]); n > 0 {
				return g.usage("reading a log from stdin is not supported")
			}
		}
		return 0
	}
	list, _, code := g.listCommits(false)
	if code >= 0 {
		return code
	}
	type author struct {
		name     string
		subjects []string
	}
	byName := map[string]*author{}
	var authors []*author
	for i := len(list) - 1; i >= 0; i-- {
		c := list[i]
		who := c.Author
		if a.has("-c") {
			who = c.Committer
		}
		name := who.Name
		if a.has("--email") {
			name += " <" + who.Email + ">"
		}
		au := byName[name]
		if au == nil {
			au = &author{name: name}
			byName[name] = au
			authors = append(authors, au)
		}
		au.subjects = append(au.subjects, shortlogSubject(c))
	}
	sort.Slice(authors, func(i, j int) bool { return authors[i].name < authors[j].name })
	if a.has("--numbered") {
		sort.SliceStable(authors, func(i, j int) bool { return len(authors[i].subjects) > len(authors[j].subjects) })
	}
	for _, au := range authors {
		if a.has("--summary") {
			fmt.Fprintf(g.out, "%6d\t%s\n", len(au.subjects), au.name)
			continue
		}
		fmt.Fprintf(g.out, "%s (%d):\n", au.name, len(au.subjects))
		for _, s := range au.subjects {
			fmt.Fprintf(g.out, "      %s\n", s)
		}
		g.out.WriteString("\n")
	}
	return 0
}

func shortlogSubject(c *object.Commit) string {
	s, _ := subjectBody(c.Message)
	return s
}
