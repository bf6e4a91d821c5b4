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
	wa, ta := splitWords(minus)
	wb, tb := splitWords(plus)
	ops := d.g.lineDiff(ta, tb)
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
