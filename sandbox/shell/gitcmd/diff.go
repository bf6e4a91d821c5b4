package gitcmd

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// diffFlags are the output options shared by diff, log and show.
var diffFlagSpecs = []string{"--stat", "--name-only", "--name-status", "--numstat", "--shortstat", "--patch|-p|-u",
	"--no-patch|-s", "--unified=|-U", "--no-color", "--color=?", "--no-renames", "--find-renames|-M", "--no-ext-diff", "--full-index", "--binary", "--exit-code", "--quiet", "--word-diff=?"}

func init() {
	gitSubs["diff"] = &gitSub{run: gitDiff, flags: flags(append([]string{"--cached|--staged"}, diffFlagSpecs...)...)}
	gitChecks["diff"] = checkDiffOpts
}

func checkDiffOpts(a *gitArgs) string {
	if why := checkWordDiff(a); why != "" {
		return why
	}
	n := 0
	for _, f := range []string{"--name-only", "--name-status", "--no-patch"} {
		if a.has(f) {
			n++
		}
	}
	if n > 1 {
		return "--name-only, --name-status and -s together are git's fatal error"
	}
	if v := a.val("--color"); a.has("--color") && v != "never" {
		return "--color is not supported"
	}
	if a.has("--unified") && !isDigits(a.val("--unified")) {
		return "-U needs a number"
	}
	for _, r := range a.args[:argsBeforeDash(a)] {
		if strings.Contains(r, "...") {
			return "A...B ranges are not supported"
		}
	}
	return ""
}

func argsBeforeDash(a *gitArgs) int {
	if a.dash {
		return a.nDash
	}
	return len(a.args)
}

// diffOut writes changes as git diff does.
type diffOut struct {
	g       *gitCmd
	ctx     int
	readA   func(p string, f treeFile) ([]byte, error)
	readB   func(p string, f treeFile) ([]byte, error)
	hashB   func(p string, f treeFile) plumbing.Hash
	relName func(string) string // for --stat and friends
	words   *wordMode           // --word-diff's, or nil
}

func (g *gitCmd) newDiffOut() *diffOut {
	d := &diffOut{g: g, ctx: 3, relName: func(p string) string { return p }, words: wordModes[wordDiffMode(g.a)]}
	if g.a.has("--unified") {
		d.ctx, _ = strconv.Atoi(g.a.val("--unified"))
	}
	blob := func(_ string, f treeFile) ([]byte, error) { return g.blob(f.hash) }
	d.readA, d.readB = blob, blob
	d.hashB = func(_ string, f treeFile) plumbing.Hash { return f.hash }
	return d
}

// format says what to print: "patch", "stat", "name-only", ...
func diffFormats(a *gitArgs, def string) map[string]bool {
	m := map[string]bool{}
	for _, f := range []string{"--stat", "--name-only", "--name-status", "--numstat", "--shortstat", "--patch"} {
		if a.has(f) {
			m[strings.TrimPrefix(f, "--")] = true
		}
	}
	if a.has("--no-patch") {
		return map[string]bool{"none": true}
	}
	// names only: git drops the stats and the patch (diff_setup_done)
	for _, f := range []string{"name-status", "name-only"} {
		if m[f] {
			return map[string]bool{f: true}
		}
	}
	if len(m) == 0 && def != "" {
		m[def] = true
	}
	return m
}

func (d *diffOut) write(cs []change, formats map[string]bool) error {
	o := d.g.out
	if formats["name-only"] {
		for _, c := range cs {
			fmt.Fprintf(o, "%s\n", quotePath(d.relName(c.path())))
		}
	}
	if formats["name-status"] {
		for _, c := range cs {
			if c.kind() == 'R' {
				fmt.Fprintf(o, "R%03d\t%s\t%s\n", c.score, quotePath(d.relName(c.from)), quotePath(d.relName(c.to)))
			} else {
				fmt.Fprintf(o, "%c\t%s\n", c.kind(), quotePath(d.relName(c.path())))
			}
		}
	}
	var stats []fileStat
	if formats["stat"] || formats["numstat"] || formats["shortstat"] {
		for _, c := range cs {
			st, err := d.stat(c)
			if err != nil {
				return err
			}
			stats = append(stats, st)
		}
	}
	if formats["numstat"] {
		for _, s := range stats {
			if s.binary {
				fmt.Fprintf(o, "-\t-\t%s\n", s.name)
			} else {
				fmt.Fprintf(o, "%d\t%d\t%s\n", s.add, s.del, s.name)
			}
		}
	}
	if formats["stat"] {
		writeStat(o, stats, true)
	} else if formats["shortstat"] {
		writeStat(o, stats, false)
	}
	if formats["patch"] {
		if (formats["stat"] || formats["shortstat"] || formats["numstat"]) && len(cs) > 0 {
			o.WriteString("\n")
		}
		for _, c := range cs {
			if err := d.patch(c); err != nil {
				return err
			}
		}
	}
	return nil
}

type fileStat struct {
	name     string
	add, del int
	binary   bool
	sizeA    int
	sizeB    int
}

func (d *diffOut) contents(c change) (a, b []byte, err error) {
	if c.from != "" {
		if a, err = d.readA(c.from, c.a); err != nil {
			return nil, nil, err
		}
	}
	if c.to != "" {
		if b, err = d.readB(c.to, c.b); err != nil {
			return nil, nil, err
		}
	}
	return a, b, nil
}

func isBinary(b []byte) bool {
	if len(b) > 8000 {
		b = b[:8000]
	}
	return bytes.IndexByte(b, 0) >= 0
}

func (d *diffOut) stat(c change) (fileStat, error) {
	st := fileStat{name: statName(d.relName(c.from), d.relName(c.to), c.kind())}
	a, b, err := d.contents(c)
	if err != nil {
		return st, err
	}
	if isBinary(a) || isBinary(b) {
		st.binary, st.sizeA, st.sizeB = true, len(a), len(b)
		if bytes.Equal(a, b) {
			st.binary = false
		}
		return st, nil
	}
	for _, op := range d.g.lineDiff(splitKeep(string(a)), splitKeep(string(b))) {
		switch op.Kind {
		case '+':
			st.add++
		case '-':
			st.del++
		}
	}
	return st, nil
}

// statName is a rename as --stat shows it: a/{b => c}/d.
func statName(from, to string, kind byte) string {
	if kind != 'R' {
		if to != "" {
			return quotePath(to)
		}
		return quotePath(from)
	}
	from, to = quotePath(from), quotePath(to)
	// common prefix and suffix on "/" boundaries
	pre := 0
	for i := 0; i < len(from) && i < len(to) && from[i] == to[i]; i++ {
		if from[i] == '/' {
			pre = i + 1
		}
	}
	suf := 0
	for i := 1; i <= len(from)-pre && i <= len(to)-pre && from[len(from)-i] == to[len(to)-i]; i++ {
		if from[len(from)-i] == '/' {
			suf = i
		}
	}
	if pre == 0 && suf == 0 {
		return from + " => " + to
	}
	return from[:pre] + "{" + from[pre:len(from)-suf] + " => " + to[pre:len(to)-suf] + "}" + from[len(from)-suf:]
}

type stringWriter interface {
	WriteString(string) (int, error)
	Write([]byte) (int, error)
}

// writeStat prints a diffstat in git's 80-column layout (full: the per
// file lines too).
func writeStat(o stringWriter, stats []fileStat, full bool) {
	if len(stats) == 0 {
		return
	}
	maxLen, maxChange, adds, dels := 0, 0, 0, 0
	hasBin := false
	for _, s := range stats {
		maxLen = max(maxLen, len(s.name))
		if s.binary {
			hasBin = true
			continue
		}
		maxChange = max(maxChange, s.add+s.del)
		adds += s.add
		dels += s.del
	}
	if full {
		width := 80
		numWidth := len(strconv.Itoa(maxChange))
		if hasBin && numWidth < 3 {
			numWidth = 3
		}
		binWidth := 0
		for _, s := range stats {
			if s.binary {
				binWidth = max(binWidth, len(fmt.Sprintf("Bin %d -> %d bytes", s.sizeA, s.sizeB)))
			}
		}
		nameWidth, graphWidth := maxLen, maxChange
		if maxChange+4 <= binWidth {
			graphWidth = binWidth - 4
		}
		if nameWidth+numWidth+6+graphWidth > width {
			if graphWidth > width*3/8-numWidth-6 {
				graphWidth = width*3/8 - numWidth - 6
				if graphWidth < 6 {
					graphWidth = 6
				}
			}
			if nameWidth > width-numWidth-6-graphWidth {
				nameWidth = width - numWidth - 6 - graphWidth
			} else {
				graphWidth = width - numWidth - 6 - nameWidth
			}
		}
		for _, s := range stats {
			name := s.name
			if len(name) > nameWidth {
				// "..." and the end of the name, from a "/" if possible
				keep := nameWidth - 3
				tail := name[len(name)-keep:]
				if i := strings.IndexByte(tail, '/'); i >= 0 {
					tail = tail[i:]
				}
				name = "..." + tail
			}
			if s.binary {
				fmt.Fprintf(o, " %-*s | %*s %d -> %d bytes\n", nameWidth, name, numWidth, "Bin", s.sizeA, s.sizeB)
				continue
			}
			add, del := s.add, s.del
			if graphWidth <= maxChange && maxChange > 0 {
				total := scaleLinear(add+del, graphWidth, maxChange)
				if total < 2 && add > 0 && del > 0 {
					total = 2
				}
				if add < del {
					add = scaleLinear(add, graphWidth, maxChange)
					del = total - add
				} else {
					del = scaleLinear(del, graphWidth, maxChange)
					add = total - del
				}
			}
			sp := ""
			if s.add+s.del > 0 {
				sp = " "
			}
			fmt.Fprintf(o, " %-*s | %*d%s%s%s\n", nameWidth, name, numWidth, s.add+s.del, sp, strings.Repeat("+", add), strings.Repeat("-", del))
		}
	}
	fmt.Fprintf(o, " %d %s changed", len(stats), plural(len(stats), "file", "files"))
	if adds > 0 || dels == 0 {
		fmt.Fprintf(o, ", %d %s(+)", adds, plural(adds, "insertion", "insertions"))
	}
	if dels > 0 || adds == 0 {
		fmt.Fprintf(o, ", %d %s(-)", dels, plural(dels, "deletion", "deletions"))
	}
	o.WriteString("\n")
}

func scaleLinear(it, width, maxChange int) int {
	if it == 0 {
		return 0
	}
	return 1 + it*(width-1)/maxChange
}

// diffName quotes a/b names of headers.
func diffName(prefix, p string) string { return quotePath(prefix + p) }

func tabIfSpace(p string) string {
	if strings.IndexByte(p, ' ') >= 0 {
		return "\t"
	}
	return ""
}

func (d *diffOut) patch(c change) error {
	o := d.g.out
	from, to := c.from, c.to
	if from == "" {
		from = to
	}
	if to == "" {
		to = from
	}
	fmt.Fprintf(o, "diff --git %s %s\n", diffName("a/", from), diffName("b/", to))
	hb := plumbing.ZeroHash
	if c.to != "" {
		hb = d.hashB(c.to, c.b)
	}
	ha := c.a.hash
	if c.from == "" {
		ha = plumbing.ZeroHash
	}
	switch c.kind() {
	case 'A':
		fmt.Fprintf(o, "new file mode %s\n", modeStr(c.b.mode))
	case 'D':
		fmt.Fprintf(o, "deleted file mode %s\n", modeStr(c.a.mode))
	case 'R':
		fmt.Fprintf(o, "similarity index %d%%\nrename from %s\nrename to %s\n", c.score, quotePath(c.from), quotePath(c.to))
	case 'T', 'M':
		if c.a.mode != c.b.mode {
			fmt.Fprintf(o, "old mode %s\nnew mode %s\n", modeStr(c.a.mode), modeStr(c.b.mode))
		}
	}
	if c.kind() == 'R' && ha == hb {
		if c.a.mode != c.b.mode {
			fmt.Fprintf(o, "old mode %s\nnew mode %s\n", modeStr(c.a.mode), modeStr(c.b.mode))
		}
		return nil
	}
	if ha == hb && c.kind() != 'A' && c.kind() != 'D' {
		return nil // a mode change only
	}
	idxLine := fmt.Sprintf("index %s..%s", d.g.abbrev(ha), d.g.abbrev(hb))
	if (c.kind() == 'M' || c.kind() == 'R') && c.a.mode == c.b.mode {
		idxLine += " " + modeStr(c.a.mode)
	}
	o.WriteString(idxLine + "\n")
	a, b, err := d.contents(c)
	if err != nil {
		return err
	}
	aName, bName := diffName("a/", from)+tabIfSpace(from), diffName("b/", to)+tabIfSpace(to)
	if c.kind() == 'A' {
		aName = "/dev/null"
	}
	if c.kind() == 'D' {
		bName = "/dev/null"
	}
	if isBinary(a) || isBinary(b) {
		fmt.Fprintf(o, "Binary files %s and %s differ\n", strings.TrimSuffix(aName, "\t"), strings.TrimSuffix(bName, "\t"))
		return nil
	}
	if len(a) == 0 && len(b) == 0 {
		return nil
	}
	fmt.Fprintf(o, "--- %s\n+++ %s\n", aName, bName)
	la, lb := splitKeep(string(a)), splitKeep(string(b))
	hunks := d.g.host.Hunks(d.g.lineDiff(la, lb), d.ctx)
	if d.words != nil {
		d.writeWordHunks(o, hunks, la, lb, d.words)
	} else {
		writeHunks(o, hunks, la, lb)
	}
	return nil
}

func modeStr(m filemode.FileMode) string { return fmt.Sprintf("%06o", uint32(m)) }

// writeHunks writes unified hunks with git's function-name headers.
func writeHunks(o stringWriter, hunks []Hunk, la, lb []string) {
	for _, h := range hunks {
		fn := funcName(la, h.AStart)
		if fn != "" {
			fn = " " + fn
		}
		fmt.Fprintf(o, "@@ %s @@%s\n", h.Ranges, fn)
		for _, op := range h.Ops {
			switch op.Kind {
			case ' ':
				gitLine(o, " ", la[op.A])
			case '-':
				gitLine(o, "-", la[op.A])
			case '+':
				gitLine(o, "+", lb[op.B])
			}
		}
	}
}

func gitLine(o stringWriter, prefix, l string) {
	o.WriteString(prefix)
	o.WriteString(l)
	if !strings.HasSuffix(l, "\n") {
		o.WriteString("\n\\ No newline at end of file\n")
	}
}

// funcName is the hunk header's context: the last line before line
// (0-based) that starts with a letter, "_" or "$", cut to 80 bytes.
func funcName(lines []string, line int) string {
	for i := min(line, len(lines)) - 1; i >= 0; i-- {
		l := lines[i]
		if l == "" {
			continue
		}
		c := l[0]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '$' {
			if len(l) > 80 {
				l = l[:80]
			}
			return strings.TrimRight(l, " \t\n\r\v\f")
		}
	}
	return ""
}

func gitDiff(g *gitCmd) int {
	a := g.a
	revs, paths := a.args[:argsBeforeDash(a)], a.args[argsBeforeDash(a):]
	// without "--", leading arguments that are revisions are revisions
	if !a.dash {
		n := 0
		for n < len(revs) {
			r := revs[n]
			if strings.Contains(r, "..") {
				n++
				continue
			}
			if _, err := g.resolve(r); err != nil {
				break
			}
			n++
		}
		revs, paths = a.args[:n], a.args[n:]
		for _, p := range paths {
			if _, err := g.wfs.Lstat(g.wsPath(g.host.Abs(g.dir, p))); err != nil {
				g.out.Flush()
				fmt.Fprintf(g.stderr, "fatal: ambiguous argument '%s': unknown revision or path not in the working tree.\nUse '--' to separate paths from revisions, like this:\n'git <command> [<revision>...] -- [<file>...]'\n", p)
				return 128
			}
		}
	}
	specs, err := g.pathspecs(paths)
	if err != nil {
		return g.fatal("%v", err)
	}
	if len(revs) == 1 && strings.Contains(revs[0], "..") {
		x, y, _ := strings.Cut(revs[0], "..")
		if x == "" {
			x = "HEAD"
		}
		if y == "" {
			y = "HEAD"
		}
		revs = []string{x, y}
	}
	d := g.newDiffOut()
	var cs []change
	idx, err := g.readIndex()
	if err != nil {
		return g.fatal("%v", err)
	}
	switch {
	case len(revs) > 2:
		return g.usage("diff with more than two revisions is not supported")
	case len(revs) == 2:
		ca, err := g.resolveCommit(revs[0])
		if err != nil {
			return g.badRev(revs[0], err)
		}
		cb, err := g.resolveCommit(revs[1])
		if err != nil {
			return g.badRev(revs[1], err)
		}
		if err := g.diffTrees(ca.TreeHash, cb.TreeHash, "", &cs); err != nil {
			return g.fatal("%v", err)
		}
		cs = filterChanges(cs, specs)
	case a.has("--cached"):
		rev := "HEAD"
		if len(revs) == 1 {
			rev = revs[0]
		}
		var base *object.Commit
		if head, _, _ := g.head(); head != nil || len(revs) > 0 {
			if base, err = g.resolveCommit(rev); err != nil {
				return g.badRev(rev, err)
			}
		}
		if cs, err = g.stagedChanges(base, indexFiles(idx)); err != nil {
			return g.fatal("%v", err)
		}
		cs = filterChanges(cs, specs)
	default:
		w, err := g.scanWorktree(idx, specs)
		if err != nil {
			return g.fatal("%v", err)
		}
		d.readB = func(p string, f treeFile) ([]byte, error) {
			at, err := g.wfs.Lstat(g.file(p))
			if err != nil {
				return nil, err
			}
			return g.readWork(p, at)
		}
		d.hashB = func(p string, f treeFile) plumbing.Hash {
			if _, ok := w.files[p]; ok {
				return w.hash(p)
			}
			return f.hash
		}
		ixf := indexFiles(idx)
		if len(revs) == 0 {
			cs = w.changes(ixf)
			// an unchanged index entry that only differs in stat data
			// is not a change
		} else {
			ta, err := g.revFiles(revs[0])
			if err != nil {
				return g.badRev(revs[0], err)
			}
			// the work tree's files: the index's, updated by w
			wf := map[string]treeFile{}
			for p, f := range filterFiles(ixf, specs) {
				wf[p] = f
			}
			for p, f := range w.files {
				if f.hash.IsZero() {
					delete(wf, p)
				} else {
					wf[p] = treeFile{w.hash(p), f.mode}
				}
			}
			cs = compareFiles(filterFiles(ta, specs), wf)
			// files the index has as the commit but the work tree changed
		}
	}
	if !a.has("--no-renames") {
		cs = g.detectRenames(cs)
	}
	if a.has("--quiet") {
		if len(cs) > 0 {
			return 1
		}
		return 0
	}
	fm := diffFormats(a, "patch")
	if err := d.write(cs, fm); err != nil {
		return g.fatal("%v", err)
	}
	if a.has("--exit-code") && len(cs) > 0 {
		return 1
	}
	return 0
}

// usage reports a form the fast path does not run, as a usage error.
func (g *gitCmd) usage(msg string) int {
	g.out.Flush()
	fmt.Fprintf(g.stderr, "git %s: %s (the shell fast path runs only some forms of git; run it in the sandbox)\n", g.sub, msg)
	return 129
}

func (g *gitCmd) badRev(rev string, err error) int {
	g.out.Flush()
	fmt.Fprintf(g.stderr, "fatal: ambiguous argument '%s': unknown revision or path not in the working tree.\nUse '--' to separate paths from revisions, like this:\n'git <command> [<revision>...] -- [<file>...]'\n", rev)
	return 128
}

// revFiles lists the files of a revision's tree.
func (g *gitCmd) revFiles(rev string) (map[string]treeFile, error) {
	c, err := g.resolveCommit(rev)
	if err != nil {
		return nil, err
	}
	return treeFilesOf(c)
}

// filterChanges keeps the changes of paths the pathspecs name.
func filterChanges(cs []change, specs []string) []change {
	if len(specs) == 0 {
		sortChanges(cs)
		return cs
	}
	var out []change
	for _, c := range cs {
		if c.from != "" && matchSpec(specs, c.from) || c.to != "" && matchSpec(specs, c.to) {
			out = append(out, c)
		}
	}
	sortChanges(out)
	return out
}
