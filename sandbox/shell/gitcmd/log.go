package gitcmd

import (
	"container/heap"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

func init() {
	logFlags := append([]string{"--oneline", "--max-count=|-n", "--reverse", "--format=|--pretty=", "--no-decorate",
		"--abbrev-commit", "--no-merges", "--first-parent", "--all", "--graph", "--date="}, append(commitFilterFlags, diffFlagSpecs...)...)
	gitSubs["log"] = &gitSub{run: gitLog, flags: flags(logFlags...), numeric: true}
	gitChecks["log"] = checkLogOpts
	gitSubs["show"] = &gitSub{run: gitShow, flags: flags(append([]string{"--oneline", "--format=|--pretty=", "--no-decorate", "--abbrev-commit", "--quiet", "--date="}, diffFlagSpecs...)...)}
	gitChecks["show"] = checkLogOpts
	gitSubs["rev-parse"] = &gitSub{run: gitRevParse, flags: flags("--show-toplevel", "--abbrev-ref", "--is-inside-work-tree", "--git-dir",
		"--short=?", "--verify", "--quiet|-q", "--show-prefix", "--show-cdup", "--is-bare-repository", "--absolute-git-dir", "--symbolic-full-name")}
}

func checkLogOpts(a *gitArgs) string {
	if why := checkDiffOpts(a); why != "" {
		return why
	}
	if why := checkFilterOpts(a); why != "" {
		return why
	}
	if a.has("--format") {
		if _, err := parseFormat(a.val("--format")); err != nil {
			return err.Error()
		}
	}
	if a.has("--date") && !dateModes[a.val("--date")] {
		return "--date=" + a.val("--date") + " is not supported"
	}
	if a.has("--graph") {
		if !a.has("--oneline") && !a.has("--format") || len(diffFormats(a, "")) > 0 {
			return "--graph is supported with --oneline or --format only"
		}
		if f := a.val("--format"); strings.Contains(f, "%n") || strings.Contains(f, "%b") || strings.Contains(f, "%B") || strings.HasPrefix(f, "format:") || f == "medium" || f == "full" || f == "short" {
			return "--graph with a format of several lines is not supported"
		}
	}
	if a.has("--max-count") && !isDigits(strings.TrimPrefix(a.val("--max-count"), "-")) {
		return "-n needs a number"
	}
	return ""
}

// resolve finds the object a revision names.
func (g *gitCmd) resolve(rev string) (plumbing.Hash, error) {
	if rev == "@" {
		rev = "HEAD"
	}
	if strings.HasPrefix(rev, "@~") || strings.HasPrefix(rev, "@^") {
		rev = "HEAD" + rev[1:]
	}
	if strings.HasPrefix(rev, "-") || rev == "" {
		return plumbing.ZeroHash, errors.New("bad revision")
	}
	for _, peel := range []string{"^{tree}", "^{commit}", "^{}"} {
		if base, ok := strings.CutSuffix(rev, peel); ok {
			c, err := g.resolveCommit(base)
			if err != nil {
				return plumbing.ZeroHash, err
			}
			if peel == "^{tree}" {
				return c.TreeHash, nil
			}
			return c.Hash, nil
		}
	}
	h, err := g.repo.ResolveRevision(plumbing.Revision(rev))
	if err != nil {
		return plumbing.ZeroHash, err
	}
	return *h, nil
}

func (g *gitCmd) resolveCommit(rev string) (*object.Commit, error) {
	h, err := g.resolve(rev)
	if err != nil {
		return nil, err
	}
	return g.commitObject(h)
}

// commitQueue orders commits newest first (by committer date), as git
// log walks without --topo-order.
type commitQueue []*object.Commit

func (q commitQueue) Len() int { return len(q) }
func (q commitQueue) Less(i, j int) bool {
	return q[i].Committer.When.After(q[j].Committer.When)
}
func (q commitQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *commitQueue) Push(x any)   { *q = append(*q, x.(*object.Commit)) }
func (q *commitQueue) Pop() any {
	old := *q
	c := old[len(old)-1]
	*q = old[:len(old)-1]
	return c
}

// walkCommitCost is what one commit of a history walk holds (its entry in
// the seen set, the commit in a queue or a list), charged to the call's
// memory budget, so that a history of millions of commits is stopped at
// the budget rather than exhausting the daemon.
const walkCommitCost = 256

// walkCharge returns a function to call for each commit a walk meets.
func (g *gitCmd) walkCharge() func() error {
	n := 0
	return func() error {
		if n++; n%1024 == 0 && !g.grow(1024*walkCommitCost) {
			return g.host.MemoryLimit()
		}
		return nil
	}
}

// errSkipParents from walk's function: do not walk on to this commit's
// parents.
var errSkipParents = errors.New("skip the parents")

// walk lists the commits reachable from include and not from exclude,
// newest first.
func (g *gitCmd) walk(include, exclude []*object.Commit, firstParent bool, fn func(*object.Commit) (bool, error)) error {
	hidden := map[plumbing.Hash]bool{}
	for _, c := range exclude {
		r, err := g.reachable(c)
		if err != nil {
			return err
		}
		for h := range r {
			hidden[h] = true
		}
	}
	seen := map[plumbing.Hash]bool{}
	charge := g.walkCharge()
	q := &commitQueue{}
	for _, c := range include {
		if !seen[c.Hash] {
			seen[c.Hash] = true
			heap.Push(q, c)
		}
	}
	for q.Len() > 0 {
		if err := g.ctx.Err(); err != nil {
			return err
		}
		c := heap.Pop(q).(*object.Commit)
		if !hidden[c.Hash] {
			more, err := fn(c)
			if err == errSkipParents {
				continue
			}
			if err != nil || !more {
				return err
			}
		}
		for i, p := range c.ParentHashes {
			if firstParent && i > 0 {
				break
			}
			if seen[p] {
				continue
			}
			seen[p] = true
			if err := charge(); err != nil {
				return err
			}
			pc, err := g.commitObject(p)
			if err != nil {
				return err
			}
			heap.Push(q, pc)
		}
	}
	return nil
}

// commitChanges lists what a commit changed against its first parent.
func (g *gitCmd) commitChanges(c *object.Commit, specs []string, renames bool) ([]change, error) {
	pt := plumbing.ZeroHash
	if c.NumParents() > 0 {
		pt2, err := g.treeOf(c.ParentHashes[0])
		if err != nil {
			return nil, err
		}
		pt = pt2
	}
	var cs []change
	if err := g.diffTrees(pt, c.TreeHash, "", &cs); err != nil {
		return nil, err
	}
	if len(specs) > 0 {
		out := cs[:0]
		for _, ch := range cs {
			if matchSpec(specs, ch.from) || matchSpec(specs, ch.to) {
				out = append(out, ch)
			}
		}
		cs = out
	}
	sortChanges(cs)
	if renames {
		cs = g.detectRenames(cs)
	}
	return cs, nil
}

// treeOf returns a commit's tree hash.
func (g *gitCmd) treeOf(h plumbing.Hash) (plumbing.Hash, error) {
	c, err := g.commitObject(h)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	return c.TreeHash, nil
}

// diffTrees appends the changes from tree a to tree b (zero: empty),
// reading only subtrees whose hashes differ.
func (g *gitCmd) diffTrees(a, b plumbing.Hash, prefix string, out *[]change) error {
	if a == b {
		return nil
	}
	if tooDeep(prefix) {
		return errTooDeep
	}
	read := func(h plumbing.Hash) (map[string]treeFile, map[string]plumbing.Hash, error) {
		files, dirs := map[string]treeFile{}, map[string]plumbing.Hash{}
		if h.IsZero() {
			return files, dirs, nil
		}
		t, err := g.repo.TreeObject(h)
		if err != nil {
			return nil, nil, err
		}
		for _, e := range t.Entries {
			if e.Mode == filemode.Dir {
				dirs[e.Name] = e.Hash
			} else {
				files[e.Name] = treeFile{e.Hash, e.Mode}
			}
		}
		return files, dirs, nil
	}
	af, ad, err := read(a)
	if err != nil {
		return err
	}
	bf, bd, err := read(b)
	if err != nil {
		return err
	}
	for n, f := range af {
		if f2, ok := bf[n]; !ok {
			*out = append(*out, change{from: prefix + n, a: f})
		} else if f2 != f {
			*out = append(*out, change{from: prefix + n, to: prefix + n, a: f, b: f2})
		}
	}
	for n, f := range bf {
		if _, ok := af[n]; !ok {
			*out = append(*out, change{to: prefix + n, b: f})
		}
	}
	for n, h := range ad {
		if err := g.diffTrees(h, bd[n], prefix+n+"/", out); err != nil {
			return err
		}
	}
	for n, h := range bd {
		if _, ok := ad[n]; !ok {
			if err := g.diffTrees(plumbing.ZeroHash, h, prefix+n+"/", out); err != nil {
				return err
			}
		}
	}
	return nil
}

// logFormat is a parsed --format.
type logFormat struct {
	builtin string // "medium", "oneline", "short", "full"
	format  string // user format
	sep     bool   // format: (separator) rather than tformat: (terminator)
}

var formatCodes = map[string]bool{"H": true, "h": true, "T": true, "t": true, "P": true, "p": true, "an": true, "ae": true,
	"ad": true, "aI": true, "ai": true, "at": true, "cn": true, "ce": true, "cd": true, "cI": true, "ci": true, "ct": true,
	"s": true, "b": true, "B": true, "n": true, "%": true, "as": true, "cs": true, "ar": true, "cr": true}

func parseFormat(f string) (logFormat, error) {
	switch f {
	case "oneline", "medium", "short", "full":
		return logFormat{builtin: f}, nil
	}
	lf := logFormat{}
	switch {
	case strings.HasPrefix(f, "format:"):
		lf.format, lf.sep = strings.TrimPrefix(f, "format:"), true
	case strings.HasPrefix(f, "tformat:"):
		lf.format = strings.TrimPrefix(f, "tformat:")
	case strings.Contains(f, "%"):
		lf.format = f
	default:
		return lf, fmt.Errorf("--format=%s is not supported", f)
	}
	for i := 0; i < len(lf.format); i++ {
		if lf.format[i] != '%' {
			continue
		}
		ok := false
		for _, n := range []int{2, 1} {
			if i+1+n <= len(lf.format) && formatCodes[lf.format[i+1:i+1+n]] {
				i += n
				ok = true
				break
			}
		}
		if !ok {
			return lf, fmt.Errorf("the format placeholder %q is not supported", lf.format[i:min(i+3, len(lf.format))])
		}
	}
	return lf, nil
}

func subjectBody(msg string) (string, string) {
	msg = strings.TrimLeft(msg, "\n")
	subj, body, _ := strings.Cut(msg, "\n\n")
	subj = strings.Join(strings.Fields(strings.ReplaceAll(subj, "\n", " ")), " ")
	body = strings.TrimLeft(body, "\n")
	return subj, body
}

func zone(t time.Time) string { return t.Format("-0700") }

func (g *gitCmd) expandFormat(f string, c *object.Commit) string {
	var b strings.Builder
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			b.WriteByte(f[i])
			continue
		}
		code := f[i+1 : i+2]
		if i+3 <= len(f) && formatCodes[f[i+1:i+3]] {
			code = f[i+1 : i+3]
		}
		i += len(code)
		subj, body := subjectBody(c.Message)
		switch code {
		case "H":
			b.WriteString(c.Hash.String())
		case "h":
			b.WriteString(g.abbrev(c.Hash))
		case "T":
			b.WriteString(c.TreeHash.String())
		case "t":
			b.WriteString(g.abbrev(c.TreeHash))
		case "P", "p":
			var ps []string
			for _, p := range c.ParentHashes {
				if code == "P" {
					ps = append(ps, p.String())
				} else {
					ps = append(ps, g.abbrev(p))
				}
			}
			b.WriteString(strings.Join(ps, " "))
		case "an":
			b.WriteString(c.Author.Name)
		case "ae":
			b.WriteString(c.Author.Email)
		case "cn":
			b.WriteString(c.Committer.Name)
		case "ce":
			b.WriteString(c.Committer.Email)
		case "ad", "cd", "aI", "cI", "ai", "ci", "at", "ct", "as", "cs", "ar", "cr":
			t := c.Author.When
			if code[0] == 'c' {
				t = c.Committer.When
			}
			switch code[1] {
			case 'd':
				b.WriteString(g.showDate(t))
			case 'r':
				b.WriteString(relativeDate(t, g.now()))
			case 'I':
				b.WriteString(t.Format("2006-01-02T15:04:05-07:00"))
			case 'i':
				b.WriteString(t.Format("2006-01-02 15:04:05 -0700"))
			case 't':
				b.WriteString(strconv.FormatInt(t.Unix(), 10))
			case 's':
				b.WriteString(t.Format("2006-01-02"))
			}
		case "s":
			b.WriteString(subj)
		case "b":
			b.WriteString(body)
		case "B":
			b.WriteString(strings.TrimLeft(c.Message, "\n"))
		case "n":
			b.WriteString("\n")
		case "%":
			b.WriteString("%")
		}
	}
	return b.String()
}

// logPrinter prints commits as git log does.
type logPrinter struct {
	g       *gitCmd
	lf      logFormat
	formats map[string]bool
	specs   []string
	n       int
	abbrev  bool
	graph   bool // a linear --graph: "* " before each line
}

func (lp *logPrinter) header(c *object.Commit) {
	g, o := lp.g, lp.g.out
	if lp.graph {
		o.WriteString("* ")
	}
	if lp.lf.format != "" {
		if lp.lf.sep && lp.n > 0 {
			o.WriteString("\n")
		}
		o.WriteString(g.expandFormat(lp.lf.format, c))
		if !lp.lf.sep {
			o.WriteString("\n")
		}
		lp.n++
		return
	}
	subj, _ := subjectBody(c.Message)
	if lp.lf.builtin == "oneline" {
		h := c.Hash.String()
		if lp.abbrev {
			h = g.abbrev(c.Hash)
		}
		fmt.Fprintf(o, "%s %s\n", h, subj)
		lp.n++
		return
	}
	if lp.n > 0 {
		o.WriteString("\n")
	}
	lp.n++
	h := c.Hash.String()
	if lp.abbrev {
		h = g.abbrev(c.Hash)
	}
	fmt.Fprintf(o, "commit %s\n", h)
	if c.NumParents() > 1 {
		var ps []string
		for _, p := range c.ParentHashes {
			ps = append(ps, g.abbrev(p))
		}
		fmt.Fprintf(o, "Merge: %s\n", strings.Join(ps, " "))
	}
	fmt.Fprintf(o, "Author: %s <%s>\n", c.Author.Name, c.Author.Email)
	switch lp.lf.builtin {
	case "full":
		fmt.Fprintf(o, "Commit: %s <%s>\n", c.Committer.Name, c.Committer.Email)
	case "medium":
		fmt.Fprintf(o, "Date:   %s\n", g.showDate(c.Author.When))
	}
	o.WriteString("\n")
	msg := strings.TrimRight(strings.TrimLeft(c.Message, "\n"), "\n")
	if lp.lf.builtin == "short" {
		msg = subj
	}
	for _, l := range strings.Split(msg, "\n") {
		fmt.Fprintf(o, "    %s\n", l)
	}
}

func (lp *logPrinter) print(c *object.Commit, cs []change) error {
	lp.header(c)
	if lp.formats["none"] || len(lp.formats) == 0 || c.NumParents() > 1 || len(cs) == 0 {
		return nil
	}
	if lp.lf.builtin != "oneline" {
		lp.g.out.WriteString("\n")
	}
	return lp.g.newDiffOut().write(cs, lp.formats)
}

func gitLog(g *gitCmd) int {
	a := g.a
	lp := &logPrinter{g: g, lf: logFormat{builtin: "medium"}}
	if err := lp.setup(); err != nil {
		return g.usage(err.Error())
	}
	list, specs, code := g.listCommits(false)
	if code >= 0 {
		return code
	}
	lp.specs = specs
	if a.has("--graph") {
		for _, c := range list {
			if c.NumParents() > 1 {
				return g.usage("--graph of a history with merges is not supported")
			}
		}
		lp.graph = true
	}
	for _, c := range list {
		var cs []change
		var err error
		if len(lp.formats) > 0 && !lp.formats["none"] {
			if cs, err = g.commitChanges(c, specs, !a.has("--no-renames")); err != nil {
				return g.fatal("%v", err)
			}
		}
		if err := lp.print(c, cs); err != nil {
			return g.fatal("%v", err)
		}
	}
	return 0
}

// listCommits lists the commits that git log or git rev-list shows for
// the revisions, paths and filters of the command line, in order, and the
// pathspecs. code is -1, or the status to return. needRev: with no
// revision, fail as rev-list does rather than start at HEAD.
func (g *gitCmd) listCommits(needRev bool) (list []*object.Commit, specs []string, code int) {
	a := g.a
	max := -1
	if a.has("--max-count") {
		max, _ = strconv.Atoi(a.val("--max-count"))
	}
	f, err := g.commitFilter()
	if err != nil {
		return nil, nil, g.usage(err.Error())
	}
	// revisions, then paths
	revs, paths := a.args[:argsBeforeDash(a)], a.args[argsBeforeDash(a):]
	if !a.dash {
		n := 0
		for n < len(revs) {
			r := strings.TrimPrefix(revs[n], "^")
			ok := true
			for _, part := range strings.SplitN(r, "..", 2) {
				if part == "" {
					continue
				}
				if _, err := g.resolve(part); err != nil {
					ok = false
				}
			}
			if !ok {
				break
			}
			n++
		}
		revs, paths = a.args[:n], a.args[n:]
		for _, p := range paths {
			if _, err := g.wfs.Lstat(g.wsPath(g.host.Abs(g.dir, p))); err != nil {
				return nil, nil, g.badRev(p, err)
			}
		}
	}
	specs, err = g.pathspecs(paths)
	if err != nil {
		return nil, nil, g.fatal("%v", err)
	}
	var include, exclude []*object.Commit
	add := func(r string, neg bool) error {
		c, err := g.resolveCommit(r)
		if err != nil {
			return err
		}
		if neg {
			exclude = append(exclude, c)
		} else {
			include = append(include, c)
		}
		return nil
	}
	for _, r := range revs {
		if x, y, ok := strings.Cut(r, ".."); ok {
			if x == "" {
				x = "HEAD"
			}
			if y == "" {
				y = "HEAD"
			}
			if add(x, true) != nil || add(y, false) != nil {
				return nil, nil, g.badRev(r, nil)
			}
			continue
		}
		if add(strings.TrimPrefix(r, "^"), strings.HasPrefix(r, "^")) != nil {
			return nil, nil, g.badRev(r, nil)
		}
	}
	if a.has("--all") {
		refs, err := g.repo.References()
		if err == nil {
			refs.ForEach(func(r *plumbing.Reference) error {
				if r.Type() == plumbing.HashReference {
					if c, err := g.commitObject(r.Hash()); err == nil {
						include = append(include, c)
					}
				}
				return nil
			})
		}
	}
	if len(include) == 0 {
		if needRev && len(revs) == 0 && !a.has("--all") {
			g.out.Flush()
			fmt.Fprint(g.stderr, revListUsage)
			return nil, nil, 129
		}
		if len(revs) > 0 {
			// only exclusions (rev-list ^A): nothing
			return nil, specs, -1
		}
		head, branch, err := g.head()
		if err != nil {
			return nil, nil, g.fatal("%v", err)
		}
		if head == nil {
			return nil, nil, g.fatal("your current branch '%s' does not have any commits yet", branch)
		}
		include = append(include, head)
	}
	err = g.walk(include, exclude, a.has("--first-parent"), func(c *object.Commit) (bool, error) {
		if max >= 0 && len(list) >= max && !a.has("--reverse") {
			return false, nil
		}
		if f.tooOld(c) {
			return false, errSkipParents
		}
		if a.has("--no-merges") && c.NumParents() > 1 {
			return true, nil
		}
		if a.has("--merges") && c.NumParents() < 2 {
			return true, nil
		}
		if !f.match(c) {
			return true, nil
		}
		if len(specs) > 0 {
			cs, err := g.commitChanges(c, specs, false)
			if err != nil {
				return false, err
			}
			if len(cs) == 0 {
				return true, nil
			}
		}
		list = append(list, c)
		return true, nil
	})
	if err != nil {
		return nil, nil, g.fatal("%v", err)
	}
	if a.has("--reverse") {
		if max >= 0 && len(list) > max {
			list = list[:max]
		}
		for i, j := 0, len(list)-1; i < j; i, j = i+1, j-1 {
			list[i], list[j] = list[j], list[i]
		}
	}
	return list, specs, -1
}

func (lp *logPrinter) setup() error {
	a := lp.g.a
	for _, f := range a.order {
		switch f {
		case "--oneline":
			lp.lf, lp.abbrev = logFormat{builtin: "oneline"}, true
		case "--format":
			lf, err := parseFormat(a.val("--format"))
			if err != nil {
				return err
			}
			lp.lf = lf
		}
	}
	if a.has("--abbrev-commit") {
		lp.abbrev = true
	}
	lp.formats = diffFormats(a, "")
	return nil
}

func gitShow(g *gitCmd) int {
	a := g.a
	lp := &logPrinter{g: g, lf: logFormat{builtin: "medium"}}
	if err := lp.setup(); err != nil {
		return g.usage(err.Error())
	}
	if len(lp.formats) == 0 {
		lp.formats = map[string]bool{"patch": true}
	}
	if a.has("--quiet") {
		lp.formats = map[string]bool{"none": true}
	}
	revs := a.args[:argsBeforeDash(a)]
	specs, err := g.pathspecs(a.args[argsBeforeDash(a):])
	if err != nil {
		return g.fatal("%v", err)
	}
	if len(revs) == 0 {
		revs = []string{"HEAD"}
	}
	for _, r := range revs {
		if rev, p, ok := strings.Cut(r, ":"); ok {
			if code := g.showBlob(r, rev, p); code != 0 {
				return code
			}
			continue
		}
		h, err := g.resolve(r)
		if err != nil {
			return g.badRev(r, err)
		}
		c, err := g.commitObject(h)
		if err != nil {
			return g.usage("showing objects other than commits and files is not supported")
		}
		if c.NumParents() > 1 && !lp.formats["none"] {
			return g.usage("showing a merge's combined diff is not supported")
		}
		cs, err := g.commitChanges(c, specs, !a.has("--no-renames"))
		if err != nil {
			return g.fatal("%v", err)
		}
		if len(specs) > 0 && len(cs) == 0 && c.NumParents() < 2 {
			continue // a commit that does not touch the paths is not shown
		}
		if err := lp.print(c, cs); err != nil {
			return g.fatal("%v", err)
		}
	}
	return 0
}

// showBlob prints REV:PATH.
func (g *gitCmd) showBlob(arg, rev, p string) int {
	if rev == "" {
		idx, err := g.readIndex()
		if err != nil {
			return g.fatal("%v", err)
		}
		for _, e := range idx.Entries {
			if e.Name == strings.TrimPrefix(p, "./") {
				data, err := g.blob(e.Hash)
				if err != nil {
					return g.fatal("%v", err)
				}
				g.out.Write(data)
				return 0
			}
		}
		return g.fatal("path '%s' is in the working tree, but not in the index", p)
	}
	c, err := g.resolveCommit(rev)
	if err != nil {
		return g.badRev(arg, err)
	}
	if strings.HasPrefix(p, "./") || strings.HasPrefix(p, "../") {
		ps, err := g.pathspecs([]string{p})
		if err != nil {
			return g.fatal("%v", err)
		}
		p = ps[0]
	}
	files, err := treeFilesOf(c)
	if err != nil {
		return g.fatal("%v", err)
	}
	f, ok := files[p]
	if !ok {
		return g.fatal("path '%s' does not exist in '%s'", p, rev)
	}
	data, err := g.blob(f.hash)
	if err != nil {
		return g.fatal("%v", err)
	}
	g.out.Write(data)
	return 0
}

func gitRevParse(g *gitCmd) int {
	a := g.a
	o := g.out
	for _, f := range a.order {
		switch f {
		case "--show-toplevel":
			fmt.Fprintln(o, g.root)
		case "--is-inside-work-tree":
			fmt.Fprintln(o, "true")
		case "--is-bare-repository":
			fmt.Fprintln(o, "false")
		case "--git-dir":
			if g.prefix == "" {
				fmt.Fprintln(o, ".git")
			} else {
				fmt.Fprintln(o, g.root+"/.git")
			}
		case "--absolute-git-dir":
			fmt.Fprintln(o, g.root+"/.git")
		case "--show-prefix":
			fmt.Fprintln(o, g.prefix)
		case "--show-cdup":
			fmt.Fprintln(o, strings.Repeat("../", strings.Count(g.prefix, "/")))
		}
	}
	for _, r := range a.args {
		if r == "--" {
			continue
		}
		if a.has("--abbrev-ref") || a.has("--symbolic-full-name") {
			name := ""
			if r == "HEAD" || r == "@" {
				if ref := g.headRefName(); ref != "" {
					name = ref.String()
				} else {
					name = "HEAD"
				}
			} else if _, err := g.repo.Storer.Reference(plumbing.NewBranchReferenceName(r)); err == nil {
				name = plumbing.NewBranchReferenceName(r).String()
			} else if _, err := g.resolve(r); err == nil {
				name = r
			} else {
				return g.badRev(r, err)
			}
			if a.has("--abbrev-ref") {
				name = plumbing.ReferenceName(name).Short()
			}
			if name == "HEAD" && a.has("--symbolic-full-name") && !a.has("--abbrev-ref") {
				continue
			}
			fmt.Fprintln(o, name)
			continue
		}
		h, err := g.resolve(r)
		if err != nil {
			if a.has("--verify") {
				if a.has("--quiet") {
					return 1
				}
				g.out.Flush()
				fmt.Fprintln(g.stderr, "fatal: Needed a single revision")
				return 128
			}
			return g.badRev(r, err)
		}
		if a.has("--short") {
			n := 7
			if v := a.val("--short"); v != "" {
				n, _ = strconv.Atoi(v)
				n = min(40, n)
				n = max(n, 4)
			}
			fmt.Fprintln(o, h.String()[:n])
		} else {
			fmt.Fprintln(o, h.String())
		}
	}
	return 0
}

// dateModes are the --date values the fast path formats.
var dateModes = map[string]bool{"default": true, "short": true, "iso": true, "iso8601": true, "iso-strict": true,
	"iso8601-strict": true, "rfc": true, "rfc2822": true, "raw": true, "unix": true, "relative": true}

// showDate formats a date as --date says (%ad, %cd, "Date:").
func (g *gitCmd) showDate(t time.Time) string {
	switch g.a.val("--date") {
	case "short":
		return t.Format("2006-01-02")
	case "iso", "iso8601":
		return t.Format("2006-01-02 15:04:05 -0700")
	case "iso-strict", "iso8601-strict":
		return t.Format("2006-01-02T15:04:05-07:00")
	case "rfc", "rfc2822":
		return t.Format("Mon, 2 Jan 2006 15:04:05 -0700")
	case "raw":
		return strconv.FormatInt(t.Unix(), 10) + " " + zone(t)
	case "unix":
		return strconv.FormatInt(t.Unix(), 10)
	case "relative":
		return relativeDate(t, g.now())
	}
	return gitDate(t)
}

// relativeDate is git's "2 years, 11 months ago".
func relativeDate(t, now time.Time) string {
	ago := func(n int64, unit string) string {
		if n != 1 {
			unit += "s"
		}
		return fmt.Sprintf("%d %s ago", n, unit)
	}
	if now.Unix() < t.Unix() {
		return "in the future"
	}
	diff := now.Unix() - t.Unix()
	if diff < 90 {
		return ago(diff, "second")
	}
	diff = (diff + 30) / 60
	if diff < 90 {
		return ago(diff, "minute")
	}
	diff = (diff + 30) / 60
	if diff < 36 {
		return ago(diff, "hour")
	}
	diff = (diff + 12) / 24
	switch {
	case diff < 14:
		return ago(diff, "day")
	case diff < 70:
		return ago((diff+3)/7, "week")
	case diff < 365:
		return ago((diff+15)/30, "month")
	case diff < 1825:
		total := (diff*12*2 + 365) / (365 * 2)
		years, months := total/12, total%12
		if months == 0 {
			return ago(years, "year")
		}
		y := fmt.Sprintf("%d year", years)
		if years != 1 {
			y += "s"
		}
		return y + ", " + ago(months, "month")
	}
	return ago((diff+183)/365, "year")
}
