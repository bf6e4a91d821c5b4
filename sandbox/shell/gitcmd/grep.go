package gitcmd

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/filemode"
)

func init() {
	gitSubs["grep"] = &gitSub{run: gitGrep, flags: flags("--line-number|-n", "--ignore-case|-i", "--files-with-matches|-l|--name-only",
		"--count|-c", "--invert-match|-v", "--extended-regexp|-E", "--fixed-strings|-F", "--basic-regexp|-G", "--word-regexp|-w", "-e=", "--quiet|-q",
		"-h", "-I", "--cached", "--full-name")}
	gitSubs["blame"] = &gitSub{run: gitBlame, flags: flags("-L=", "--show-email|-e", "-s")}
	gitChecks["blame"] = func(a *gitArgs) string {
		if len(a.args) == 0 || len(a.args) > 2 {
			return "blame takes one file (and a revision)"
		}
		for _, l := range a.opts["-L"] {
			if _, _, err := parseBlameRange(l, 1<<30); err != nil {
				return "-L " + l + " is not supported"
			}
		}
		return ""
	}
}

func gitGrep(g *gitCmd) int {
	a := g.a
	pats := a.opts["-e"]
	args := a.args
	if len(pats) == 0 {
		if len(args) == 0 || a.dash && a.nDash == 0 {
			g.out.Flush()
			fmt.Fprint(g.stderr, "fatal: no pattern given\n")
			return 128
		}
		pats, args = args[:1], args[1:]
	}
	// a revision to search is not supported; the rest are paths
	for _, x := range args[:min(len(args), argsBeforeDash(a)-(len(a.args)-len(args)))] {
		if _, err := g.wfs.Lstat(g.wsPath(g.host.Abs(g.dir, x))); err == nil {
			continue
		}
		if _, err := g.resolve(x); err == nil {
			return g.usage("searching a revision is not supported")
		}
	}
	specs, err := g.pathspecs(args)
	if err != nil {
		return g.fatal("%v", err)
	}
	if len(args) == 0 && g.prefix != "" {
		specs = []string{strings.TrimSuffix(g.prefix, "/")}
	}
	var alts []string
	for _, p := range pats {
		var t string
		switch {
		case a.has("--fixed-strings"):
			t = regexp.QuoteMeta(p)
		default:
			t, err = g.host.TranslateRE(p, a.has("--extended-regexp"))
			if err != nil {
				return g.fatal("command line, '%s': %v", p, err)
			}
		}
		alts = append(alts, "(?:"+t+")")
	}
	expr := strings.Join(alts, "|")
	if a.has("--word-regexp") {
		expr = `(?:^|\W)(?:` + expr + `)(?:\W|$)`
	}
	if a.has("--ignore-case") {
		expr = "(?i)" + expr
	}
	re, err := g.host.CompileGo(expr)
	if err != nil {
		return g.fatal("command line: %v", err)
	}
	idx, err := g.readIndex()
	if err != nil {
		return g.fatal("%v", err)
	}
	found := false
	attrWarned := map[string]bool{}
	for _, e := range idx.Entries {
		if e.Stage != 0 || e.Mode == filemode.Submodule || !matchSpec(specs, e.Name) {
			continue
		}
		if err := g.ctx.Err(); err != nil {
			return 1
		}
		var data []byte
		if a.has("--cached") || e.Mode == filemode.Symlink {
			if data, err = g.blob(e.Hash); err != nil {
				return g.fatal("%v", err)
			}
		} else {
			at, err := g.lstatWork(e.Name)
			if isDenied(err) {
				// As git run as the agent: its attributes' lookup warns
				// once for the directory, its stat fails twice.
				g.out.Flush()
				if d := parentDir(e.Name); d != "" && !attrWarned[d] {
					attrWarned[d] = true
					fmt.Fprintf(g.stderr, "warning: unable to access '%s/.gitattributes': %s\n", d, g.host.ErrText(syscall.EACCES))
				}
				msg := fmt.Sprintf("error: failed to stat '%s': %s\n", e.Name, g.host.ErrText(syscall.EACCES))
				fmt.Fprint(g.stderr, msg+msg)
				continue
			}
			if err != nil {
				continue // deleted in the work tree
			}
			if data, err = g.readWork(e.Name, at); err != nil {
				return g.fatal("%v", err)
			}
		}
		name := e.Name
		if !a.has("--full-name") {
			name = g.rel(name)
		}
		name = quotePath(name)
		binary := isBinary(data)
		n := 0
		lines := splitKeep(string(data))
		for i, l := range lines {
			l = strings.TrimSuffix(l, "\n")
			if g.host.MatchTooCostly(re, len(l)) {
				return 125
			}
			if re.MatchString(l) == a.has("--invert-match") {
				continue
			}
			n++
			found = true
			if a.has("--quiet") {
				return 0
			}
			if a.has("--files-with-matches") || a.has("--count") {
				continue
			}
			if binary {
				if !a.has("-I") {
					fmt.Fprintf(g.out, "Binary file %s matches\n", name)
				}
				break
			}
			if !a.has("-h") {
				g.out.WriteString(name + ":")
			}
			if a.has("--line-number") {
				g.out.WriteString(strconv.Itoa(i+1) + ":")
			}
			g.out.WriteString(l + "\n")
		}
		if n > 0 && a.has("--files-with-matches") && !(binary && a.has("-I")) {
			fmt.Fprintf(g.out, "%s\n", name)
		} else if n > 0 && a.has("--count") {
			if a.has("-h") {
				fmt.Fprintf(g.out, "%d\n", n)
			} else {
				fmt.Fprintf(g.out, "%s:%d\n", name, n)
			}
		}
	}
	if !found {
		return 1
	}
	return 0
}

// parseBlameRange reads -L N,M, N,+K and N (to the end).
func parseBlameRange(s string, lines int) (int, int, error) {
	from, to, hasTo := strings.Cut(s, ",")
	start, err := strconv.Atoi(from)
	if err != nil || start < 1 {
		return 0, 0, fmt.Errorf("bad range")
	}
	end := lines
	if hasTo && to != "" {
		if k, ok := strings.CutPrefix(to, "+"); ok {
			n, err := strconv.Atoi(k)
			if err != nil || n < 1 {
				return 0, 0, fmt.Errorf("bad range")
			}
			end = start + n - 1
		} else if end, err = strconv.Atoi(to); err != nil || end < 1 {
			return 0, 0, fmt.Errorf("bad range")
		}
	}
	if end < start {
		start, end = end, start
	}
	return start, min(end, lines), nil
}

func gitBlame(g *gitCmd) int {
	a := g.a
	rev, file := "HEAD", a.args[len(a.args)-1]
	if len(a.args) == 2 {
		rev = a.args[0]
	}
	ps, err := g.pathspecs([]string{file})
	if err != nil {
		return g.fatal("%v", err)
	}
	p := ps[0]
	c, err := g.resolveCommit(rev)
	if err != nil {
		return g.badRev(rev, err)
	}
	files, err := treeFilesOf(c)
	if err != nil {
		return g.fatal("%v", err)
	}
	f, ok := files[p]
	if !ok {
		if _, err := g.wfs.Lstat(g.file(p)); err != nil {
			return g.fatal("no such path '%s' in %s", p, rev)
		}
		return g.usage("blame of a file that is not committed is not supported")
	}
	if len(a.args) == 1 {
		// without a revision git blames the work tree's version
		at, err := g.wfs.Lstat(g.file(p))
		if err != nil {
			return g.usage("blame of a file deleted in the work tree is not supported")
		}
		if h, _, err := g.hashFile(p, at); err != nil || h != f.hash {
			return g.usage("blame of uncommitted changes is not supported")
		}
	}
	res, err := git.Blame(c, p)
	if err != nil {
		return g.fatal("%v", err)
	}
	start, end := 1, len(res.Lines)
	for _, l := range a.opts["-L"] {
		if start, end, err = parseBlameRange(l, len(res.Lines)); err != nil || start > len(res.Lines) {
			return g.fatal("file %s has only %d lines", p, len(res.Lines))
		}
	}
	boundary := map[string]bool{}
	authorW := 0
	for _, l := range res.Lines[start-1 : end] {
		who := l.AuthorName
		if a.has("--show-email") {
			who = "<" + l.Author + ">"
		}
		authorW = max(authorW, len(who))
		if _, ok := boundary[l.Hash.String()]; !ok {
			bc, err := g.commitObject(l.Hash)
			boundary[l.Hash.String()] = err == nil && bc.NumParents() == 0
		}
	}
	numW := len(strconv.Itoa(end))
	var b bytes.Buffer
	for i, l := range res.Lines[start-1 : end] {
		h := l.Hash.String()[:8]
		if boundary[l.Hash.String()] {
			h = "^" + l.Hash.String()[:7]
		}
		bc, _ := g.commitObject(l.Hash)
		when := l.Date
		if bc != nil {
			when = bc.Author.When
		}
		who := l.AuthorName
		if a.has("--show-email") {
			who = "<" + l.Author + ">"
		}
		if a.has("-s") {
			fmt.Fprintf(&b, "%s %*d) %s\n", h, numW, start+i, l.Text)
			continue
		}
		fmt.Fprintf(&b, "%s (%-*s %s %*d) %s\n", h, authorW, who, when.Format("2006-01-02 15:04:05 -0700"), numW, start+i, l.Text)
	}
	g.out.Write(b.Bytes())
	return 0
}
