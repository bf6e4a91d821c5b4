package shell

import (
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"syscall"
)

var patchOpts = opts("p:i:RNso:d:uF:", "strip=", "input=", "reverse", "forward", "silent", "quiet", "output=", "directory=",
	"unified", "fuzz=", "dry-run", "no-backup-if-mismatch")

func init() {
	register(&command{names: []string{"patch"}, run: cmdPatch, opts: patchOpts, check: patchCheck})
}

// patchCheck routes the forms the fast path does not take as GNU patch
// 2.7 does: counts that are not plain numbers, output to stdout, more
// than two operands.
func patchCheck(args []string) string {
	opts, operands, _ := parseOptsIn(args, true, patchOpts.shorts, patchOpts.longs...)
	for _, o := range opts {
		switch o.name {
		case "p", "strip", "F", "fuzz":
			if _, err := strconv.Atoi(o.val); err != nil || strings.Trim(o.val, "0123456789") != "" {
				return "patch -" + o.name + " " + o.val + ": not a plain number"
			}
		case "o", "output":
			if o.val == "-" || o.val == "" {
				return "patch -o " + o.val + ": output to stdout or computed at run time is the sandbox's"
			}
		}
	}
	if len(operands) > 2 {
		return "patch: more than two operands"
	}
	if len(operands) > 0 && operands[0] == "-" {
		return "patch -: a file named - is the sandbox's"
	}
	return ""
}

// A patchHunk is one hunk of a unified diff.
type patchHunk struct {
	header         string      // the @@ line
	text           []string    // the hunk's lines as read (for .rej)
	oldStart       int         // first line of the old side (1-based; an append's is the line after)
	old, new       []string    // the lines of each side, each with its newline unless at a missing one
	ops            []patchLine // the lines in order
	prefix, suffix int         // leading and trailing context lines
}

// patchLine is one line of a hunk: ' ' context, '-' deleted, '+' added.
type patchLine struct {
	kind byte
	text string
}

// A patchFile is the part of a patch for one file.
type patchFile struct {
	oldName, newName string
	leading          []string // the text before its first hunk, since the previous file's
	hunkLine         int      // the line number of its first hunk
	hunks            []*patchHunk
	err              error // a malformed hunk after these (GNU finds it once it has begun the file)
}

// patchName is the file name of a ---/+++ line: up to a tab (a date
// follows), or the whole line.
func patchName(s string) string {
	if i := strings.IndexByte(s, '\t'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimRight(s, " \r")
}

// parseHunkRange reads "-a,b" or "+a" of an @@ line.
func parseHunkRange(s string) (int, int, bool) {
	a, b, two := strings.Cut(s[1:], ",")
	start, err := strconv.Atoi(a)
	if err != nil || start < 0 {
		return 0, 0, false
	}
	n := 1
	if two {
		if n, err = strconv.Atoi(b); err != nil || n < 0 {
			return 0, 0, false
		}
	}
	return start, n, true
}

// errPatch is a fatal error of the patch input, as GNU's "patch: **** ...".
type errPatch struct{ msg string }

func (e errPatch) Error() string { return e.msg }

// parsePatch reads a unified diff. Lines that are not part of a file's
// header or hunks are text (a commit message, diff --git and index
// lines), as GNU patch skips them. What the fast path does not
// implement (context and normal diffs, git's renames, copies and binary
// patches) fails the command rather than being misread.
func parsePatch(c *cmd, data string) ([]*patchFile, error) {
	lines := splitLines(data)
	if !c.grow(int64(len(lines)) * 40) {
		return nil, errMemoryLimit
	}
	var files []*patchFile
	textStart := 0
	for i := 0; i < len(lines); i++ {
		if i&0xfff == 0 && c.canceled() {
			return nil, errSilent
		}
		l := strings.TrimSuffix(lines[i], "\n")
		switch {
		case strings.HasPrefix(l, "rename from ") || strings.HasPrefix(l, "copy from ") || strings.HasPrefix(l, "GIT binary patch") ||
			strings.HasPrefix(l, "Binary files "):
			return nil, errPatch{"the fast path's patch does not apply git renames, copies or binary patches (line " + strconv.Itoa(i+1) + ")"}
		case strings.HasPrefix(l, "*** ") && i+1 < len(lines) && strings.HasPrefix(lines[i+1], "--- "),
			isNormalDiff(l) && len(files) == 0 && textStart == i:
			return nil, errPatch{"the fast path's patch applies unified diffs only (line " + strconv.Itoa(i+1) + ")"}
		}
		if !strings.HasPrefix(l, "--- ") || i+2 >= len(lines) || !strings.HasPrefix(lines[i+1], "+++ ") || !strings.HasPrefix(lines[i+2], "@@ ") {
			continue
		}
		f := &patchFile{oldName: patchName(l[4:]), newName: patchName(strings.TrimSuffix(lines[i+1], "\n")[4:]), leading: lines[textStart : i+2], hunkLine: i + 3}
		i += 2
		for i < len(lines) && strings.HasPrefix(lines[i], "@@ ") {
			h, next, err := parseHunk(lines, i)
			if err != nil {
				f.err = err
				return append(files, f), nil
			}
			f.hunks = append(f.hunks, h)
			i = next
		}
		files = append(files, f)
		textStart = i
		i--
	}
	if len(files) == 0 {
		return nil, errPatch{"Only garbage was found in the patch input."}
	}
	return files, nil
}

// isNormalDiff reports whether a line is a normal diff's command (5c5, 3,4d2).
func isNormalDiff(l string) bool {
	i := strings.IndexAny(l, "acd")
	if i <= 0 {
		return false
	}
	ok := func(s string) bool { return s != "" && strings.Trim(s, "0123456789,") == "" }
	return ok(l[:i]) && ok(l[i+1:])
}

// parseHunk reads the hunk whose @@ line is lines[i]; it returns the
// index of the line after it.
func parseHunk(lines []string, i int) (*patchHunk, int, error) {
	header := strings.TrimSuffix(lines[i], "\n")
	fields := strings.Fields(header)
	malformed := func(n int) error {
		l := ""
		if n < len(lines) {
			l = lines[n]
		}
		return errPatch{fmt.Sprintf("malformed patch at line %d: %s", n+1, l)} // the line keeps its newline, as GNU prints it
	}
	if len(fields) < 4 || fields[3] != "@@" || fields[1][0] != '-' || fields[2][0] != '+' {
		return nil, 0, malformed(i)
	}
	oldStart, oldN, ok1 := parseHunkRange(fields[1])
	_, newN, ok2 := parseHunkRange(fields[2])
	if !ok1 || !ok2 {
		return nil, 0, malformed(i)
	}
	h := &patchHunk{header: header, text: []string{lines[i]}, oldStart: oldStart}
	if oldN == 0 {
		h.oldStart++ // an append: after line oldStart
	}
	i++
	inPrefix := true
	for oldN > 0 || newN > 0 {
		if i >= len(lines) {
			return nil, 0, malformed(i - 1)
		}
		l := lines[i]
		kind := byte(' ')
		body := ""
		switch {
		case l == "\n":
			body = "\n" // an empty line is an empty context line
		case l[0] == ' ' || l[0] == '-' || l[0] == '+':
			kind, body = l[0], l[1:]
		default:
			return nil, 0, malformed(i)
		}
		if !strings.HasSuffix(body, "\n") {
			body += "\n" // the last line of the patch, without its newline
		}
		h.text = append(h.text, l)
		i++
		noNL := i < len(lines) && strings.HasPrefix(lines[i], `\`)
		if noNL {
			body = strings.TrimSuffix(body, "\n")
			h.text = append(h.text, lines[i])
			i++
		}
		h.ops = append(h.ops, patchLine{kind, body})
		switch kind {
		case ' ':
			if oldN == 0 || newN == 0 {
				return nil, 0, malformed(i - 1)
			}
			h.old, h.new = append(h.old, body), append(h.new, body)
			oldN--
			newN--
			if inPrefix {
				h.prefix++
			}
			h.suffix++
		case '-':
			if oldN == 0 {
				return nil, 0, malformed(i - 1)
			}
			h.old = append(h.old, body)
			oldN--
			inPrefix, h.suffix = false, 0
		case '+':
			if newN == 0 {
				return nil, 0, malformed(i - 1)
			}
			h.new = append(h.new, body)
			newN--
			inPrefix, h.suffix = false, 0
		}
	}
	if inPrefix { // all context
		h.suffix = 0
	}
	return h, i, nil
}

// swap reverses a hunk (-R, or to detect a reversed patch).
func (h *patchHunk) swap(newStart int) *patchHunk {
	r := *h
	r.old, r.new = h.new, h.old
	r.oldStart = newStart
	r.ops = make([]patchLine, len(h.ops))
	for i, l := range h.ops {
		if l.kind != ' ' {
			l.kind = '-' + '+' - l.kind
		}
		r.ops[i] = l
	}
	return &r
}

// patchRun is the state of applying one file's hunks, as GNU's
// in_offset and last_frozen_line.
type patchRun struct {
	in       []string
	inOffset int
	frozen   int // the last input line already copied out (1-based)
	// stop says the call ended; work counts the lines compared since
	// it was last asked. A hunk is looked for at every line of the file,
	// each a comparison of up to all its lines: a file of a million
	// equal lines and a hunk of thousands that differs only in its
	// middle took minutes past the call's end.
	stop    func() bool
	work    int
	stopped bool
}

// match reports whether h's old lines, but the fuzzed context, are the
// input's at line base+1 (0-based base).
func (p *patchRun) match(h *patchHunk, base, prefixFuzz, suffixFuzz int) bool {
	if p.work += len(h.old) + 1; p.work > 1<<16 {
		p.work = 0
		p.stopped = p.stopped || p.stop != nil && p.stop()
	}
	if p.stopped {
		return false
	}
	for k := prefixFuzz; k < len(h.old)-suffixFuzz; k++ {
		i := base + k
		if i < 0 || i >= len(p.in) || p.in[i] != h.old[k] {
			return false
		}
	}
	return true
}

// locate finds where hunk h applies with the given fuzz (the line, or 0),
// as GNU patch's locate_hunk: from the line the hunk names (moved by the
// offset found so far), outwards, first after it.
func (p *patchRun) locate(h *patchHunk, fuzz int) int {
	first := h.oldStart + p.inOffset
	pat := len(h.old)
	if pat == 0 {
		return first
	}
	context := max(h.prefix, h.suffix)
	prefixFuzz, suffixFuzz := fuzz+h.prefix-context, fuzz+h.suffix-context
	maxWhere := len(p.in) - (pat - max(suffixFuzz, 0)) + 1
	minWhere := p.frozen + 1
	maxPos, maxNeg := maxWhere-first, first-minWhere
	if first <= maxNeg {
		maxNeg = first - 1
	}
	if prefixFuzz < 0 && h.oldStart <= 1 {
		// can only match at the start of the file
		if suffixFuzz < 0 && pat != len(p.in) {
			return 0
		}
		off := 1 - first
		if p.frozen == 0 && off <= maxPos && p.match(h, 0, 0, max(suffixFuzz, 0)) {
			p.inOffset += off
			return 1
		}
		return 0
	}
	prefixFuzz = max(prefixFuzz, 0)
	if suffixFuzz < 0 {
		// can only match at the end of the file
		off := first - (len(p.in) - pat + 1)
		if off <= maxNeg && p.match(h, first-off-1, prefixFuzz, 0) {
			p.inOffset -= off
			return first - off
		}
		return 0
	}
	for off := 0; off <= max(maxPos, maxNeg) && !p.stopped; off++ {
		if off <= maxPos && p.match(h, first+off-1, prefixFuzz, suffixFuzz) {
			p.inOffset += off
			return first + off
		}
		if off > 0 && off <= maxNeg && p.match(h, first-off-1, prefixFuzz, suffixFuzz) {
			p.inOffset -= off
			return first - off
		}
	}
	return 0
}

type patchFlags struct {
	strip                                      int // -1: none given
	reverse, forward, silent, dryRun, noBackup bool
	maxFuzz                                    int
	output                                     string
}

func cmdPatch(c *cmd) int {
	opts, operands, ok := c.flags()
	if !ok {
		return 2
	}
	f := patchFlags{strip: -1, maxFuzz: 2}
	input := ""
	for _, o := range opts {
		switch o.name {
		case "p", "strip":
			f.strip, _ = strconv.Atoi(o.val)
		case "F", "fuzz":
			f.maxFuzz, _ = strconv.Atoi(o.val)
		case "i", "input":
			input = o.val
		case "R", "reverse":
			f.reverse = true
		case "N", "forward":
			f.forward = true
		case "s", "silent", "quiet":
			f.silent = true
		case "o", "output":
			f.output = o.val
		case "d", "directory":
			dir := c.abs(o.val)
			if fi, err := c.stat(dir); err != nil || !fi.IsDir() {
				if err == nil {
					err = syscall.ENOTDIR
				}
				fmt.Fprintf(c.stderr, "patch: **** Can't change to directory %s : %s\n", o.val, errText(err))
				return 2
			}
			c.dir = dir
		case "dry-run":
			f.dryRun = true
		case "no-backup-if-mismatch":
			f.noBackup = true
		}
	}
	target := ""
	if len(operands) > 0 {
		target = operands[0]
	}
	if len(operands) > 1 {
		input = operands[1]
	}
	var data []byte
	var err error
	if input == "" || input == "-" {
		data, err = c.readAll(c.stdin)
	} else {
		data, err = c.readFile(input)
	}
	if err != nil {
		if err == errMemoryLimit || c.canceled() {
			return 2
		}
		fmt.Fprintf(c.stderr, "patch: **** Can't open patch file %s : %s\n", input, errText(err))
		return 2
	}
	files, err := parsePatch(c, string(data))
	if err != nil {
		if e, ok := err.(errPatch); ok {
			c.out.Flush()
			fmt.Fprintf(c.stderr, "patch: **** %s\n", e.msg)
		}
		return 2
	}
	status := 0
	for _, pf := range files {
		code := c.patchOne(pf, target, f)
		if code == 2 {
			return 2
		}
		status = max(status, code)
	}
	return status
}

// patchStrip applies -p to a name of the patch; without -p, GNU takes
// the last component.
func patchStrip(name string, strip int) (string, bool) {
	if name == "/dev/null" {
		return "", false
	}
	if strip < 0 {
		return path.Base(name), true
	}
	for ; strip > 0; strip-- {
		i := strings.IndexByte(name, '/')
		if i < 0 {
			return "", false
		}
		name = strings.TrimLeft(name[i+1:], "/")
	}
	return name, name != ""
}

func patchPlural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// patchOne applies one file's hunks; its status (0, 1, or 2 for trouble).
func (c *cmd) patchOne(pf *patchFile, target string, f patchFlags) int {
	say := func(format string, a ...any) { fmt.Fprintf(c.out, format, a...) }
	oldName, oldOK := patchStrip(pf.oldName, f.strip)
	newName, newOK := patchStrip(pf.newName, f.strip)
	creating := pf.oldName == "/dev/null" || len(pf.hunks) == 1 && len(pf.hunks[0].old) == 0 && pf.hunks[0].oldStart == 1 && !c.exists(oldName)
	deleting := pf.newName == "/dev/null"
	if f.reverse {
		creating, deleting = deleting, creating
	}
	name := target
	if name == "" {
		// the existing one of the two names, the shorter in GNU's order
		var cands []string
		for _, n := range []struct {
			s  string
			ok bool
		}{{oldName, oldOK}, {newName, newOK}} {
			if n.ok && c.exists(n.s) {
				cands = append(cands, n.s)
			}
		}
		switch {
		case len(cands) > 0:
			name = cands[0]
			for _, n := range cands[1:] {
				if patchBetter(n, name) {
					name = n
				}
			}
		case creating && newOK && !f.reverse:
			name = newName
		case creating && oldOK && f.reverse:
			name = oldName
		}
	}
	nh := len(pf.hunks)
	hunks := patchPlural(nh, "hunk", "hunks")
	if deleting && name == "" && target == "" {
		gone := oldName
		if !oldOK {
			gone = newName
		}
		when, ask := "", "Assume -R?"
		if f.reverse {
			when, ask = ", when reversed,", "Ignore -R?"
		}
		say("The next patch%s would delete the file %s,\nwhich does not exist!  %s [n] \nApply anyway? [n] \nSkipping patch.\n", when, gone, ask)
		say("%d out of %d %s ignored\n", nh, nh, hunks)
		return 1
	}
	if name == "" || !creating && !c.exists(name) {
		say("can't find file to patch at input line %d\n", pf.hunkLine)
		if f.strip < 0 {
			say("Perhaps you should have used the -p or --strip option?\n")
		} else {
			say("Perhaps you used the wrong -p or --strip option?\n")
		}
		say("The text leading up to this was:\n--------------------------\n")
		for _, l := range pf.leading {
			say("|%s", l)
			if !strings.HasSuffix(l, "\n") {
				say("\n")
			}
		}
		say("--------------------------\nFile to patch: \nSkip this patch? [y] \nSkipping patch.\n")
		say("%d out of %d %s ignored\n", nh, nh, hunks)
		return 1
	}
	if creating && c.exists(name) && !f.reverse {
		say("The next patch would create the file %s,\nwhich already exists!  Assume -R? [n] \nApply anyway? [n] \nSkipping patch.\n", name)
		say("%d out of %d %s ignored\n", nh, nh, hunks)
		return 1
	}
	var in []string
	if c.exists(name) {
		data, err := c.readFile(name)
		if err != nil {
			if err != errMemoryLimit && !c.canceled() {
				c.out.Flush()
				fmt.Fprintf(c.stderr, "patch: **** Can't open file %s : %s\n", name, errText(err))
			}
			return 2
		}
		if !c.grow(int64(len(data)) + 16*int64(strings.Count(string(data), "\n"))) {
			return 2
		}
		in = splitLines(string(data))
	}
	outName := name
	if f.output != "" {
		outName = f.output
	}
	if !f.silent {
		switch {
		case f.dryRun:
			say("checking file %s\n", outName)
		case f.output != "":
			say("patching file %s (read from %s)\n", outName, name)
		default:
			say("patching file %s\n", outName)
		}
	}
	if pf.err != nil {
		c.out.Flush()
		fmt.Fprintf(c.stderr, "patch: **** %s\n", pf.err.(errPatch).msg)
		return 2
	}
	p := &patchRun{in: in, stop: c.canceled}
	var out []string
	var rejects []*patchHunk
	mismatch, skipped := false, false
	outOffset := 0
	for i, h := range pf.hunks {
		if c.canceled() {
			return 2
		}
		newStart, _, _ := parseHunkRange(strings.Fields(h.header)[2])
		if len(h.new) == 0 {
			newStart++
		}
		if f.reverse {
			h = h.swap(newStart)
		}
		if skipped {
			rejects = append(rejects, pf.hunks[i])
			continue
		}
		where, fuzz := 0, 0
		maxFuzz := min(f.maxFuzz, max(h.prefix, h.suffix))
		for ; fuzz <= maxFuzz; fuzz++ {
			if where = p.locate(h, fuzz); where != 0 {
				break
			}
			if i == 0 {
				// a reversed (or applied) patch?
				rev := h.swap(h.oldStart)
				if f.reverse {
					rev.oldStart = pf.hunks[0].oldStart
				} else {
					rev.oldStart = newStart
				}
				probe := &patchRun{in: p.in, stop: c.canceled}
				if probe.locate(rev, fuzz) != 0 {
					what := "Reversed (or previously applied)"
					ask := "Assume -R?"
					if f.reverse {
						what, ask = "Unreversed", "Ignore -R?"
					}
					if f.forward {
						say("%s patch detected!  Skipping patch.\n", what)
					} else {
						say("%s patch detected!  %s [n] \nApply anyway? [n] \n", what, ask)
						if !f.silent {
							say("Skipping patch.\n")
						}
					}
					skipped = true
					break
				}
			}
		}
		if c.canceled() {
			return 2
		}
		if skipped {
			rejects = append(rejects, pf.hunks[i])
			continue
		}
		if where == 0 {
			mismatch = true
			rejects = append(rejects, pf.hunks[i])
			if !f.silent {
				say("Hunk #%d FAILED at %d.\n", i+1, h.oldStart)
			}
			continue
		}
		// copy the input up to the hunk, then the hunk: context from the
		// input (fuzzed lines stay as they are), new lines from the patch
		out = append(out, p.in[p.frozen:where-1]...)
		ii := where - 1
		for _, l := range h.ops {
			switch l.kind {
			case ' ':
				out = append(out, p.in[ii])
				ii++
			case '-':
				ii++
			case '+':
				out = append(out, l.text)
			}
		}
		p.frozen = where - 1 + len(h.old)
		if fuzz > 0 || p.inOffset != 0 {
			mismatch = true
			if !f.silent {
				say("Hunk #%d succeeded at %d", i+1, where+outOffset)
				if fuzz > 0 {
					say(" with fuzz %d", fuzz)
				}
				if p.inOffset != 0 {
					say(" (offset %d %s)", p.inOffset, patchPlural(absInt(p.inOffset), "line", "lines"))
				}
				say(".\n")
			}
		}
		outOffset += len(h.new) - len(h.old)
	}
	if !skipped {
		out = append(out, p.in[min(p.frozen, len(p.in)):]...)
		for i := range len(out) - 1 {
			if !strings.HasSuffix(out[i], "\n") {
				out[i] += "\n" // a line that was the last, and is no more
			}
		}
	}
	status := 0
	if len(rejects) > 0 {
		status = 1
		verb := "FAILED"
		if skipped {
			verb = "ignored"
		}
		say("%d out of %d %s %s", len(rejects), nh, hunks, verb)
		if f.dryRun {
			say("\n")
		} else {
			say(" -- saving rejects to file %s.rej\n", outName)
		}
	}
	if f.dryRun {
		return status
	}
	if !skipped {
		if mismatch && !f.noBackup && f.output == "" && c.exists(name) {
			if err := c.writeLines(name+".orig", in); err != nil {
				return c.patchWriteFail(name+".orig", err)
			}
		}
		removeIt := deleting && len(out) == 0
		if deleting && len(out) > 0 && len(rejects) == 0 {
			say("Not deleting file %s as content differs from patch\n", outName)
			status = 1
		}
		if removeIt && f.output == "" {
			if err := c.r.sh.ns.remove(c.abs(name)); err != nil {
				return c.patchWriteFail(name, err)
			}
		} else {
			if creating {
				if dir := path.Dir(c.abs(outName)); dir != "/" {
					if err := c.mkdirAll(dir, 0o755, false); err != nil {
						return c.patchWriteFail(outName, err)
					}
				}
			}
			if err := c.writeLines(outName, out); err != nil {
				return c.patchWriteFail(outName, err)
			}
		}
	}
	if len(rejects) > 0 {
		// the header names the file, or /dev/null for a side that is none
		oldSide, newSide := name, name
		if pf.oldName == "/dev/null" {
			oldSide = pf.oldName
		}
		if pf.newName == "/dev/null" {
			newSide = pf.newName
		}
		if f.reverse {
			oldSide, newSide = newSide, oldSide
		}
		rej := []string{"--- " + oldSide + "\n", "+++ " + newSide + "\n"}
		for _, h := range rejects {
			rej = append(rej, h.rejText(f.reverse)...)
		}
		if err := c.writeLines(outName+".rej", rej); err != nil {
			return c.patchWriteFail(outName+".rej", err)
		}
	}
	return status
}

// rejText is the hunk as a .rej file holds it: as read, or reversed
// (with -R) as GNU writes it, deletions before additions.
func (h *patchHunk) rejText(reversed bool) []string {
	if !reversed {
		return h.text
	}
	f := strings.Fields(h.header)
	rest := strings.TrimPrefix(h.header, strings.Join(f[:4], " "))
	out := []string{"@@ -" + f[2][1:] + " +" + f[1][1:] + " @@" + rest + "\n"}
	var dels, adds []string
	flush := func() {
		out = append(append(out, dels...), adds...)
		dels, adds = nil, nil
	}
	body := h.text[1:]
	for i := 0; i < len(body); i++ {
		l := body[i]
		group := []string{l[1:]}
		if l == "\n" {
			group[0] = "\n"
		}
		if i+1 < len(body) && strings.HasPrefix(body[i+1], `\`) {
			group[0] = strings.TrimSuffix(group[0], "\n")
			i++ // GNU 2.7 drops the marker (and the newline) from a reversed reject
		}
		switch l[0] {
		case '-':
			group[0] = "+" + group[0]
			adds = append(adds, group...)
		case '+':
			group[0] = "-" + group[0]
			dels = append(dels, group...)
		default:
			flush()
			out = append(out, l)
			out = append(out, group[1:]...)
		}
	}
	flush()
	return out
}

func absInt(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// patchBetter is GNU's choice among existing names: fewer components,
// then a shorter base name, then a shorter name.
func patchBetter(a, b string) bool {
	ca, cb := strings.Count(a, "/"), strings.Count(b, "/")
	if ca != cb {
		return ca < cb
	}
	if la, lb := len(path.Base(a)), len(path.Base(b)); la != lb {
		return la < lb
	}
	return len(a) < len(b)
}

func (c *cmd) exists(name string) bool {
	if name == "" {
		return false
	}
	fi, err := c.stat(name)
	return err == nil && !fi.IsDir()
}

// writeLines writes a file whole (charged to the call while it is built).
func (c *cmd) writeLines(name string, lines []string) error {
	n := 0
	for _, l := range lines {
		n += len(l)
	}
	if !c.grow(int64(n)) {
		return errMemoryLimit
	}
	var b strings.Builder
	b.Grow(n)
	for _, l := range lines {
		b.WriteString(l)
	}
	w, err := c.create(name)
	if err != nil {
		return err
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

func (c *cmd) patchWriteFail(name string, err error) int {
	if err == errMemoryLimit || c.canceled() {
		return 2
	}
	c.out.Flush()
	fmt.Fprintf(c.stderr, "patch: **** Can't create file %s : %s\n", name, errText(err))
	return 2
}
