package gitcmd

// git diff --word-diff[=plain|porcelain|none], as git 2.39's diff.c does
// it: the hunks are the line diff's; within a hunk, the removed and added
// lines up to the next context line are split into words (runs of bytes
// other than space, tab, newline and carriage return, git's isspace),
// the two word lists are diffed, and the text is written with the
// changed words marked. The text between changes is the new side's
// (whitespace included), as git prints it.

import (
	"strings"
)

// wordStyle is how one kind of text is marked.
type wordStyle struct{ prefix, suffix string }

// wordMode is a --word-diff mode's marks.
type wordMode struct {
	added, removed, ctx wordStyle
	newline             string
}

var wordModes = map[string]*wordMode{
	"plain":     {added: wordStyle{"{+", "+}"}, removed: wordStyle{"[-", "-]"}, newline: "\n"},
	"porcelain": {added: wordStyle{"+", "\n"}, removed: wordStyle{"-", "\n"}, ctx: wordStyle{" ", "\n"}, newline: "~\n"},
}

// wordDiffMode is the mode the --word-diff options give: the last one
// wins, and --word-diff alone keeps a mode given before it. "" is none.
func wordDiffMode(a *gitArgs) string {
	mode := ""
	for _, v := range a.opts["--word-diff"] {
		switch v {
		case "":
			if mode == "" {
				mode = "plain"
			}
		case "none":
			mode = ""
		default:
			mode = v
		}
	}
	return mode
}

// checkWordDiff refuses the modes the fast path does not write.
func checkWordDiff(a *gitArgs) string {
	for _, w := range a.raw {
		if w == "--" {
			break
		}
		if w == "--word-diff=" {
			return "--word-diff= is git's usage error" // bad --word-diff argument
		}
	}
	for _, v := range a.opts["--word-diff"] {
		if v != "" && v != "none" && wordModes[v] == nil {
			return "--word-diff=" + v + " is not supported"
		}
	}
	return ""
}

// writeWordHunks writes the hunks of a file's line diff as words.
func (d *diffOut) writeWordHunks(o stringWriter, hunks []Hunk, la, lb []string, m *wordMode) {
	var minus, plus strings.Builder
	flush := func() {
		d.writeWords(o, minus.String(), plus.String(), m)
		minus.Reset()
		plus.Reset()
	}
	for _, h := range hunks {
		fn := funcName(la, h.AStart)
		if fn != "" {
			fn = " " + fn
		}
		o.WriteString("@@ " + h.Ranges + " @@" + fn + "\n")
		for _, op := range h.Ops {
			switch op.Kind {
			case '-':
				minus.WriteString(withNewline(la[op.A]))
			case '+':
				plus.WriteString(withNewline(lb[op.B]))
			default:
				flush()
				if m.ctx.prefix != "" { // porcelain: " line" and "~"
					o.WriteString(" " + withNewline(la[op.A]) + m.newline)
				} else {
					o.WriteString(withNewline(la[op.A]))
				}
			}
		}
		flush()
	}
}

// withNewline: a last line without its newline is shown as if it had one
// (git eats the "\ No newline at end of file" marker in word mode).
func withNewline(l string) string {
	if strings.HasSuffix(l, "\n") {
		return l
	}
	return l + "\n"
}

// word is a word's place in its text.
type word struct{ begin, end int }

// splitWords finds the words of a text.
func splitWords(s string) (words []word, texts []string) {
	for i := 0; i < len(s); {
		for i < len(s) && isGitSpace(s[i]) {
			i++
		}
		if i >= len(s) {
			break
		}
		j := i + 1
		for j < len(s) && !isGitSpace(s[j]) {
			j++
		}
		words = append(words, word{i, j})
		texts = append(texts, s[i:j])
		i = j
	}
	return words, texts
}

func isGitSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }

// writeWords writes the removed text minus and the added text plus as
// words, as git's diff_words_show does.
func (d *diffOut) writeWords(o stringWriter, minus, plus string, m *wordMode) {
	if minus == "" && plus == "" {
		return
	}
	if plus == "" {
		writeMarked(o, m.removed, m.newline, minus)
		return
	}
	// A word of one byte and its space cost 32 bytes of word lists: the
	// lists are charged to the call (and given back after), so that a
	// big file of short words cannot exhaust the daemon.
	held := int64(len(minus)+len(plus)+2) * 16
	if !d.g.grow(held) {
		return
	}
	defer d.g.grow(-held)
	wa, ta := splitWords(minus)
	wb, tb := splitWords(plus)
	ops := compactEdits(d.g.lineDiff(ta, tb), ta, tb)
	cur := 0 // how much of plus is written
	for i := 0; i < len(ops); {
		if ops[i].Kind == ' ' {
			i++
			continue
		}
		// a run of changes: the words removed and added there
		mb, me, pb, pe := -1, -1, -1, -1
		before := ops[i].B // plus words before the run
		for ; i < len(ops) && ops[i].Kind != ' '; i++ {
			switch op := ops[i]; op.Kind {
			case '-':
				if mb < 0 {
					mb = wa[op.A].begin
				}
				me = wa[op.A].end
			case '+':
				if pb < 0 {
					pb = wb[op.B].begin
				}
				pe = wb[op.B].end
			}
		}
		if pb < 0 { // nothing added: the place is after the word before
			pb = 0
			if before > 0 {
				pb = wb[before-1].end
			}
			pe = pb
		}
		if cur != pb {
			writeMarked(o, m.ctx, m.newline, plus[cur:pb])
		}
		if mb >= 0 {
			writeMarked(o, m.removed, m.newline, minus[mb:me])
		}
		if pb != pe {
			writeMarked(o, m.added, m.newline, plus[pb:pe])
		}
		cur = pe
	}
	if cur != len(plus) {
		writeMarked(o, m.ctx, m.newline, plus[cur:])
	}
}

// writeMarked writes text in a style, line by line: each piece between
// newlines marked, each newline as the mode's.
func writeMarked(o stringWriter, st wordStyle, newline, text string) {
	for text != "" {
		i := strings.IndexByte(text, '\n')
		seg := text
		if i >= 0 {
			seg = text[:i]
		}
		if seg != "" {
			o.WriteString(st.prefix + seg + st.suffix)
		}
		if i < 0 {
			return
		}
		o.WriteString(newline)
		text = text[i+1:]
	}
}

// wordRegexSet says why the words may not be git's default ones, or "":
// diff.wordRegex in the repository's configuration, or an attributes
// file that names a diff driver (a driver, built in or configured, has
// its own word expression).
func (g *gitCmd) wordRegexSet() string {
	cfg := g.config()
	if cfg.Raw.Section("diff").Option("wordRegex") != "" {
		return "--word-diff with diff.wordRegex is not supported"
	}
	files := []string{".git/info/attributes", ".gitattributes"}
	idx, err := g.readIndex()
	if err != nil {
		return err.Error()
	}
	for _, e := range idx.Entries {
		if strings.HasSuffix(e.Name, "/.gitattributes") {
			files = append(files, e.Name)
		}
	}
	for _, f := range files {
		a, err := g.wfs.Lstat(g.file(f))
		if err != nil || !a.IsRegular() {
			continue // git reads no attributes through a symbolic link
		}
		if a.Size > maxAttributes {
			return "--word-diff with a large " + f + " is not supported"
		}
		data, err := g.wfs.ReadFile(g.file(f))
		if err == nil && strings.Contains(string(data), "diff=") {
			return "--word-diff with a diff driver in " + f + " is not supported"
		}
	}
	return ""
}

// maxAttributes bounds what is read of one attributes file.
const maxAttributes = 1 << 20

// compactEdits moves the changes of an edit script where xdiff's
// xdl_change_compact puts them (git diffs words with no indent
// heuristic): each run of changes on one side slides up and down over
// equal words as far as it goes, merging with the runs it meets, and
// stays at its lowest place unless a place lines it up with a change on
// the other side. nil (a stopped diff) stays nil.
func compactEdits(ops []Edit, a, b []string) []Edit {
	if ops == nil {
		return nil
	}
	// changed flags with a false sentinel at each end (xdiff's rchg)
	ca, cb := make([]bool, len(a)+2), make([]bool, len(b)+2)
	for _, op := range ops {
		switch op.Kind {
		case '-':
			ca[op.A+1] = true
		case '+':
			cb[op.B+1] = true
		}
	}
	compactSide(ca, cb, a)
	compactSide(cb, ca, b)
	out := make([]Edit, 0, len(ops))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		if i < len(a) && j < len(b) && !ca[i+1] && !cb[j+1] {
			out = append(out, Edit{' ', i, j})
			i, j = i+1, j+1
			continue
		}
		for i < len(a) && ca[i+1] {
			out = append(out, Edit{'-', i, j})
			i++
		}
		for j < len(b) && cb[j+1] {
			out = append(out, Edit{'+', i, j})
			j++
		}
	}
	return out
}

// group is a run of changed records, [start, end), in xdiff's sense: the
// k-th group of one side (maybe empty) faces the k-th of the other.
type group struct{ start, end int }

// compactSide is xdl_change_compact of side ch (records rec) against the
// other side's flags co. Both have the sentinels: index 1 is record 0.
func compactSide(ch, co []bool, rec []string) {
	n, no := len(ch)-2, len(co)-2
	at := func(c []bool, i int) bool { return c[i+1] }
	set := func(c []bool, i int, v bool) { c[i+1] = v }
	initG := func(c []bool) group {
		g := group{}
		for at(c, g.end) {
			g.end++
		}
		return g
	}
	next := func(c []bool, nrec int, g *group) bool {
		if g.end == nrec {
			return false
		}
		g.start = g.end + 1
		for g.end = g.start; at(c, g.end); g.end++ {
		}
		return true
	}
	prev := func(c []bool, g *group) bool {
		if g.start == 0 {
			return false
		}
		g.end = g.start - 1
		for g.start = g.end; at(c, g.start-1); g.start-- {
		}
		return true
	}
	down := func(g *group) bool {
		if g.end < n && rec[g.start] == rec[g.end] {
			set(ch, g.start, false)
			set(ch, g.end, true)
			g.start++
			g.end++
			for at(ch, g.end) {
				g.end++
			}
			return true
		}
		return false
	}
	up := func(g *group) bool {
		if g.start > 0 && rec[g.start-1] == rec[g.end-1] {
			g.start--
			g.end--
			set(ch, g.start, true)
			set(ch, g.end, false)
			for at(ch, g.start-1) {
				g.start--
			}
			return true
		}
		return false
	}
	g, og := initG(ch), initG(co)
	for {
		if g.end != g.start {
			var earliest, matching, size int
			for {
				size = g.end - g.start
				matching = -1
				for up(&g) {
					prev(co, &og)
				}
				earliest = g.end
				if og.end > og.start {
					matching = g.end
				}
				for down(&g) {
					next(co, no, &og)
					if og.end > og.start {
						matching = g.end
					}
				}
				if size == g.end-g.start {
					break
				}
			}
			if g.end != earliest && matching != -1 {
				for og.end == og.start {
					up(&g)
					prev(co, &og)
				}
			}
		}
		if !next(ch, n, &g) {
			return
		}
		next(co, no, &og)
	}
}
