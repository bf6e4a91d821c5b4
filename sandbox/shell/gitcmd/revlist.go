package gitcmd

// git rev-list, and the commit filters git log shares with it: --grep,
// --author, --committer (regular expressions, -i, -E, -F, --all-match,
// --invert-grep) and --since/--until.

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing/object"
)

// commitFilterFlags are the filter options of log and rev-list.
var commitFilterFlags = []string{"--grep=", "--author=", "--committer=", "--regexp-ignore-case|-i", "--all-match",
	"--invert-grep", "--extended-regexp|-E", "--fixed-strings|-F", "--since=|--after", "--since-as-filter=", "--until=|--before", "--merges"}

func init() {
	gitSubs["rev-list"] = &gitSub{run: gitRevList, numeric: true, flags: flags(append([]string{"--max-count=|-n", "--count", "--all",
		"--reverse", "--no-merges", "--first-parent", "--abbrev-commit"}, commitFilterFlags...)...)}
	gitChecks["rev-list"] = checkFilterOpts
}

// checkFilterOpts refuses filter values the fast path cannot read.
func checkFilterOpts(a *gitArgs) string {
	for _, f := range []string{"--since", "--since-as-filter", "--until"} {
		for _, v := range a.opts[f] {
			if _, err := parseApproxDate(v, time.Now()); err != nil {
				return err.Error()
			}
		}
	}
	if _, err := buildCommitFilter(a, time.Now()); err != nil {
		return err.Error()
	}
	if a.has("--max-count") && !isDigits(strings.TrimPrefix(a.val("--max-count"), "-")) {
		return "-n needs a number"
	}
	return ""
}

// commitFilter is what a commit must match to be listed.
type commitFilter struct {
	grep              []*regexp.Regexp
	author, committer []*regexp.Regexp
	allMatch, invert  bool
	since, until      int64 // Unix seconds; 0: no bound
	// sinceFilter: --since-as-filter, which walks past older commits;
	// --since stops at them.
	sinceFilter bool
}

func (g *gitCmd) commitFilter() (*commitFilter, error) {
	return buildCommitFilter(g.a, g.now())
}

func buildCommitFilter(a *gitArgs, now time.Time) (*commitFilter, error) {
	f := &commitFilter{allMatch: a.has("--all-match"), invert: a.has("--invert-grep")}
	compile := func(pats []string) ([]*regexp.Regexp, error) {
		var out []*regexp.Regexp
		for _, p := range pats {
			var re *regexp.Regexp
			var err error
			if a.has("--fixed-strings") {
				q := regexp.QuoteMeta(p)
				if a.has("--regexp-ignore-case") {
					q = "(?i)" + q
				}
				re, err = regexp.Compile(q)
			} else {
				re, err = a.re.CompileRE(p, a.has("--extended-regexp"), a.has("--regexp-ignore-case"))
			}
			if err != nil {
				return nil, fmt.Errorf("the pattern %q is not supported: %v", p, err)
			}
			out = append(out, re)
		}
		return out, nil
	}
	var err error
	if f.grep, err = compile(a.opts["--grep"]); err != nil {
		return nil, err
	}
	if f.author, err = compile(a.opts["--author"]); err != nil {
		return nil, err
	}
	if f.committer, err = compile(a.opts["--committer"]); err != nil {
		return nil, err
	}
	// the last --since and --until count, as in git
	since := a.val("--since")
	for _, o := range a.order {
		switch o {
		case "--since":
			f.sinceFilter = false
		case "--since-as-filter":
			f.sinceFilter = true
		}
	}
	if f.sinceFilter {
		since = a.val("--since-as-filter")
	}
	if since != "" {
		t, err := parseApproxDate(since, now)
		if err != nil {
			return nil, err
		}
		f.since = t.Unix()
	}
	if a.has("--until") {
		t, err := parseApproxDate(a.val("--until"), now)
		if err != nil {
			return nil, err
		}
		f.until = t.Unix()
	}
	return f, nil
}

// tooOld reports a commit older than --since: git lists neither it nor,
// through it, its parents.
func (f *commitFilter) tooOld(c *object.Commit) bool {
	return f.since != 0 && !f.sinceFilter && c.Committer.When.Unix() < f.since
}

// match reports whether a commit passes the filter. As in git, the
// author and committer patterns must each match when given; the --grep
// patterns match the message, any one of them (all with --all-match),
// and --invert-grep turns that test around.
func (f *commitFilter) match(c *object.Commit) bool {
	if f.since != 0 && c.Committer.When.Unix() < f.since {
		return false
	}
	if f.until != 0 && c.Committer.When.Unix() > f.until {
		return false
	}
	anyOf := func(res []*regexp.Regexp, s string) bool {
		for _, re := range res {
			if re.MatchString(s) {
				return true
			}
		}
		return false
	}
	if len(f.author) > 0 && !anyOf(f.author, c.Author.Name+" <"+c.Author.Email+">") {
		return false
	}
	if len(f.committer) > 0 && !anyOf(f.committer, c.Committer.Name+" <"+c.Committer.Email+">") {
		return false
	}
	if len(f.grep) == 0 {
		return true
	}
	lines := strings.Split(strings.TrimRight(c.Message, "\n"), "\n")
	hits := 0
	for _, re := range f.grep {
		for _, l := range lines {
			if re.MatchString(l) {
				hits++
				break
			}
		}
	}
	ok := hits > 0
	if f.allMatch {
		ok = hits == len(f.grep)
	}
	return ok != f.invert
}

// parseApproxDate reads the dates of --since and --until that agents
// write: ISO 8601 dates and times (a date alone keeps the time
// of day of now, as git's approxidate does), and "N units ago". Other
// forms are refused, so that they run with the real git.
func parseApproxDate(s string, now time.Time) (time.Time, error) {
	now = now.UTC()
	v := strings.TrimSpace(s)
	for _, layout := range []string{"2006-01-02 15:04:05 -0700", "2006-01-02T15:04:05-07:00", "2006-01-02T15:04:05Z07:00",
		"2006-01-02 15:04:05", "2006-01-02T15:04:05", "2006-01-02 15:04", "2006-01-02T15:04"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	if t, err := time.Parse("2006-01-02", v); err == nil {
		return time.Date(t.Year(), t.Month(), t.Day(), now.Hour(), now.Minute(), now.Second(), 0, time.UTC), nil
	}
	f := strings.FieldsFunc(strings.ToLower(v), func(r rune) bool { return r == ' ' || r == '.' })
	if len(f) == 3 && f[2] == "ago" && isDigits(f[0]) && len(f[0]) < 7 {
		n, _ := strconv.Atoi(f[0])
		unit := strings.TrimSuffix(f[1], "s")
		secs := map[string]int64{"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 7 * 86400}
		if d, ok := secs[unit]; ok {
			return now.Add(-time.Duration(int64(n)*d) * time.Second), nil
		}
		switch unit {
		case "month":
			return now.AddDate(0, -n, 0), nil
		case "year":
			return now.AddDate(-n, 0, 0), nil
		}
	}
	return time.Time{}, fmt.Errorf("the date %q is not supported", s)
}

const revListUsage = `usage: git rev-list [<options>] <commit>... [--] [<path>...]

  limiting output:
    --max-count=<n>
    --max-age=<epoch>
    --min-age=<epoch>
    --sparse
    --no-merges
    --min-parents=<n>
    --no-min-parents
    --max-parents=<n>
    --no-max-parents
    --remove-empty
    --all
    --branches
    --tags
    --remotes
    --stdin
    --exclude-hidden=[receive|uploadpack]
    --quiet
  ordering output:
    --topo-order
    --date-order
    --reverse
  formatting output:
    --parents
    --children
    --objects | --objects-edge
    --disk-usage[=human]
    --unpacked
    --header | --pretty
    --[no-]object-names
    --abbrev=<n> | --no-abbrev
    --abbrev-commit
    --left-right
    --count
  special purpose:
    --bisect
    --bisect-vars
    --bisect-all
`

func gitRevList(g *gitCmd) int {
	a := g.a
	list, _, code := g.listCommits(true)
	if code >= 0 {
		return code
	}
	if a.has("--count") {
		fmt.Fprintln(g.out, len(list))
		return 0
	}
	for _, c := range list {
		if a.has("--abbrev-commit") {
			fmt.Fprintln(g.out, g.abbrev(c.Hash))
		} else {
			fmt.Fprintln(g.out, c.Hash.String())
		}
	}
	return 0
}
