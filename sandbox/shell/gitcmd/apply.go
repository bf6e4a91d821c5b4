package gitcmd

// git apply [--check] [-R] [--stat] [--numstat] [-p N] [--cached|--index]
// [PATCH...]: unified diffs (git's or plain), applied as git 2.39 does
// with its default options: every hunk must match with its whole context,
// at its line or the nearest offset; nothing is written unless every hunk
// of every file applies. Renames, copies, mode changes and binary patches
// are left to the real git (a usage error, status 129).

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
)

func init() {
	gitSubs["apply"] = &gitSub{run: gitApply, flags: flags("--check", "--reverse|-R", "--stat", "--numstat", "-p=",
		"--cached", "--index", "--apply")}
	gitChecks["apply"] = func(a *gitArgs) string {
		if v := a.val("-p"); a.has("-p") && !isDigits(v) {
			return "-p needs a number"
		}
		if a.has("--cached") && a.has("--index") {
			return "--cached with --index is not supported"
		}
		return ""
	}
}

type applyHunk struct {
	oldPos, oldLines, newPos, newLines int
	pre, post                          []string // lines with their newlines
	leading, trailing                  int      // context lines before and after the change
	added                              []applyLine
	removed                            []applyLine
}

type applyLine struct {
	text string // without the leading +/-
	no   int    // line number in the patch
}

type applyFile struct {
	oldName, newName string // "" for /dev/null
	newMode          filemode.FileMode
	hunks            []*applyHunk
	source           string // the patch's name, for messages
}

func (p *applyFile) name() string {
	if p.newName != "" {
		return p.newName
	}
	return p.oldName
}

// stripPath removes n leading components of a patch path; ok is false if
// it has fewer.
func stripPath(s string, n int) (string, bool) {
	if i := strings.IndexByte(s, '\t'); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimRight(s, " ")
	if s == "/dev/null" {
		return "", true
	}
	for ; n > 0; n-- {
		i := strings.IndexByte(s, '/')
		if i < 0 {
			return "", false
		}
		s = s[i+1:]
	}
	return s, s != ""
}

// parseApplyPatch reads the files of a patch; an error is a form the fast
// path does not take.
func parseApplyPatch(text, source string, strip int) ([]*applyFile, error) {
	lines := splitKeep(text)
	var files []*applyFile
	var cur *applyFile
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSuffix(lines[i], "\n")
		switch {
		case strings.HasPrefix(l, "diff --git "):
			cur = &applyFile{source: source}
			files = append(files, cur)
			if f := strings.Fields(l); len(f) == 4 {
				cur.oldName, _ = stripPath(f[2], strip)
				cur.newName, _ = stripPath(f[3], strip)
			} else {
				return nil, fmt.Errorf("the header %q is not supported", l)
			}
		case cur != nil && len(cur.hunks) == 0 && strings.HasPrefix(l, "new file mode "):
			m, err := strconv.ParseUint(strings.TrimPrefix(l, "new file mode "), 8, 32)
			if err != nil || (m != 0o100644 && m != 0o100755) {
				return nil, fmt.Errorf("%q is not supported", l)
			}
			cur.newMode = filemode.FileMode(m)
			cur.oldName = ""
		case cur != nil && len(cur.hunks) == 0 && strings.HasPrefix(l, "deleted file mode "):
			cur.newName = ""
		case cur != nil && len(cur.hunks) == 0 && strings.HasPrefix(l, "index "):
		case strings.HasPrefix(l, "old mode ") || strings.HasPrefix(l, "new mode ") || strings.HasPrefix(l, "rename ") ||
			strings.HasPrefix(l, "copy ") || strings.HasPrefix(l, "similarity index") || strings.HasPrefix(l, "dissimilarity index") ||
			strings.HasPrefix(l, "Binary files ") || l == "GIT binary patch":
			return nil, fmt.Errorf("patches with %q are not supported", strings.Fields(l)[0]+" "+strings.Fields(l + " x")[1])
		case strings.HasPrefix(l, "--- ") && i+1 < len(lines) && strings.HasPrefix(lines[i+1], "+++ "):
			oldN, ok1 := stripPath(strings.TrimPrefix(l, "--- "), strip)
			newN, ok2 := stripPath(strings.TrimSuffix(strings.TrimPrefix(lines[i+1], "+++ "), "\n"), strip)
			if !ok1 || !ok2 {
				if cur != nil && len(cur.hunks) == 0 {
					return nil, &stripError{fmt.Sprintf("git diff header lacks filename information when removing %d leading pathname components (line %d)", strip, i+3)}
				}
				return nil, fmt.Errorf("a path with fewer than %d components", strip)
			}
			if cur == nil || len(cur.hunks) > 0 {
				cur = &applyFile{source: source}
				files = append(files, cur)
			}
			cur.oldName, cur.newName = oldN, newN
			i++
		case strings.HasPrefix(l, "@@ -"):
			if cur == nil {
				return nil, fmt.Errorf("a hunk without a file header")
			}
			h, next, err := parseApplyHunk(lines, i)
			if err != nil {
				return nil, err
			}
			cur.hunks = append(cur.hunks, h)
			i = next - 1
		default:
			if cur != nil && len(cur.hunks) > 0 && !strings.HasPrefix(l, "diff ") && l != "" && !strings.HasPrefix(l, "-- ") && l != "--" {
				// text after the hunks (a mail signature) is ignored, as git does
				continue
			}
		}
	}
	for _, f := range files {
		for _, n := range []string{f.oldName, f.newName} {
			if n == "" {
				continue
			}
			for _, part := range strings.Split(n, "/") {
				if part == "" || part == "." || part == ".." || strings.EqualFold(part, ".git") {
					return nil, fmt.Errorf("the path %q is not supported", n)
				}
			}
		}
		if f.oldName != "" && f.newName != "" && f.oldName != f.newName {
			return nil, fmt.Errorf("renames are not supported")
		}
		if f.oldName == "" && f.newName == "" {
			return nil, fmt.Errorf("a patch of /dev/null")
		}
	}
	return files, nil
}

// stripError is git's own error for a -p that strips too much.
type stripError struct{ msg string }

func (e *stripError) Error() string { return e.msg }

// parseApplyHunk reads the hunk whose "@@" line is lines[i]; next is the
// index of the line after it.
func parseApplyHunk(lines []string, i int) (*applyHunk, int, error) {
	l := strings.TrimSuffix(lines[i], "\n")
	rest := strings.TrimPrefix(l, "@@ -")
	end := strings.Index(rest, " @@")
	if end < 0 {
		return nil, 0, fmt.Errorf("the hunk header %q is not supported", l)
	}
	old, nw, ok := strings.Cut(rest[:end], " +")
	if !ok {
		return nil, 0, fmt.Errorf("the hunk header %q is not supported", l)
	}
	rng := func(s string) (int, int, bool) {
		a, b, has := strings.Cut(s, ",")
		x, err1 := strconv.Atoi(a)
		y := 1
		var err2 error
		if has {
			y, err2 = strconv.Atoi(b)
		}
		return x, y, err1 == nil && err2 == nil && x >= 0 && y >= 0 && x < 1<<30 && y < 1<<30
	}
	h := &applyHunk{}
	var ok1, ok2 bool
	h.oldPos, h.oldLines, ok1 = rng(old)
	h.newPos, h.newLines, ok2 = rng(nw)
	if !ok1 || !ok2 {
		return nil, 0, fmt.Errorf("the hunk header %q is not supported", l)
	}
	oldLeft, newLeft := h.oldLines, h.newLines
	seenChange := false
	last := byte(0)
	j := i + 1
	for ; j < len(lines) && (oldLeft > 0 || newLeft > 0 || j < len(lines) && strings.HasPrefix(lines[j], "\\")); j++ {
		s := lines[j]
		if s == "\n" {
			s = " \n" // an empty context line, as some tools write it
		}
		switch s[0] {
		case ' ':
			h.pre = append(h.pre, s[1:])
			h.post = append(h.post, s[1:])
			oldLeft--
			newLeft--
			if seenChange {
				h.trailing++
			} else {
				h.leading++
			}
		case '-':
			h.pre = append(h.pre, s[1:])
			h.removed = append(h.removed, applyLine{s[1:], j + 1})
			oldLeft--
			seenChange, h.trailing = true, 0
		case '+':
			h.post = append(h.post, s[1:])
			h.added = append(h.added, applyLine{s[1:], j + 1})
			newLeft--
			seenChange, h.trailing = true, 0
		case '\\':
			// "\ No newline at end of file": the line before has none
			trim := func(ls []string) {
				if n := len(ls); n > 0 {
					ls[n-1] = strings.TrimSuffix(ls[n-1], "\n")
				}
			}
			switch last {
			case ' ':
				trim(h.pre)
				trim(h.post)
			case '-':
				trim(h.pre)
				r := &h.removed[len(h.removed)-1]
				r.text = strings.TrimSuffix(r.text, "\n")
			case '+':
				trim(h.post)
				r := &h.added[len(h.added)-1]
				r.text = strings.TrimSuffix(r.text, "\n")
			}
			continue
		default:
			return nil, 0, fmt.Errorf("a corrupt patch at line %d", j+1)
		}
		last = s[0]
		if oldLeft < 0 || newLeft < 0 {
			return nil, 0, fmt.Errorf("a corrupt patch at line %d", j+1)
		}
	}
	if oldLeft > 0 || newLeft > 0 {
		return nil, 0, fmt.Errorf("a corrupt patch at line %d", j+1)
	}
	return h, j, nil
}

// reverse swaps a hunk's sides (-R).
func (h *applyHunk) reverse() {
	h.oldPos, h.newPos = h.newPos, h.oldPos
	h.oldLines, h.newLines = h.newLines, h.oldLines
	h.pre, h.post = h.post, h.pre
	h.added, h.removed = h.removed, h.added
}

// applyHunks applies a file's hunks to its lines, as git's find_pos does:
// at the expected line, else the nearest line after, then before, and so
// on. It returns the hunk that did not apply, if one.
func applyHunks(img []string, hunks []*applyHunk) ([]string, *applyHunk) {
	for _, h := range hunks {
		pos := 0
		if h.newPos > 0 {
			pos = h.newPos - 1
		}
		matchBegin := h.oldPos <= 1
		matchEnd := h.trailing == 0
		at := -1
		fits := func(p int) bool {
			if p < 0 || p+len(h.pre) > len(img) {
				return false
			}
			if matchBegin && p != 0 || matchEnd && p+len(h.pre) != len(img) {
				return false
			}
			for k, l := range h.pre {
				if img[p+k] != l {
					return false
				}
			}
			return true
		}
		if pos > len(img) {
			pos = len(img)
		}
		back, fwd := pos, pos
		for i := 0; ; i++ {
			try := pos
			if i > 0 {
				if back == 0 && fwd >= len(img) {
					break
				}
				if i%2 == 1 && fwd < len(img) || back == 0 {
					fwd++
					try = fwd
				} else {
					back--
					try = back
				}
			}
			if fits(try) {
				at = try
				break
			}
		}
		if at < 0 {
			return nil, h
		}
		out := make([]string, 0, len(img)-len(h.pre)+len(h.post))
		out = append(out, img[:at]...)
		out = append(out, h.post...)
		out = append(out, img[at+len(h.pre):]...)
		img = out
	}
	return img, nil
}

// wsErrors lists the whitespace errors of added lines as git's default
// (trailing space, space before tab in the indent) reports them.
func wsErrors(files []*applyFile) (msgs []string, lines int) {
	for _, f := range files {
		for _, h := range f.hunks {
			for _, a := range h.added {
				t := strings.TrimSuffix(a.text, "\n")
				var what []string
				if strings.HasSuffix(t, " ") || strings.HasSuffix(t, "\t") || strings.HasSuffix(t, "\r") {
					what = append(what, "trailing whitespace")
				}
				indent := t[:len(t)-len(strings.TrimLeft(t, " \t"))]
				if strings.Contains(indent, " \t") {
					what = append(what, "space before tab in indent")
				}
				if len(what) > 0 {
					lines++
					msgs = append(msgs, fmt.Sprintf("%s:%d: %s.\n%s\n", f.source, a.no, strings.Join(what, ", "), t))
				}
			}
		}
	}
	return msgs, lines
}

func gitApply(g *gitCmd) int {
	a := g.a
	if g.prefix != "" {
		return g.usage("git apply in a subdirectory is not supported")
	}
	strip := 1
	if a.has("-p") {
		strip, _ = strconv.Atoi(a.val("-p"))
	}
	names := a.args
	if len(names) == 0 {
		names = []string{"-"}
	}
	var files []*applyFile
	for _, n := range names {
		var data []byte
		var err error
		source := n
		if n == "-" {
			source = "<stdin>"
			data, err = g.readAll(g.stdin)
		} else {
			var f io.ReadCloser
			if f, err = g.host.Open(g.host.Abs(g.dir, n)); err == nil {
				data, err = g.readAll(f)
				f.Close()
			}
		}
		if err != nil {
			if err == g.host.MemoryLimit() {
				return 1
			}
			g.out.Flush()
			fmt.Fprintf(g.stderr, "error: can't open patch '%s': %s\n", n, g.host.ErrText(err))
			return 128
		}
		fs, err := parseApplyPatch(string(data), source, strip)
		if se, ok := err.(*stripError); ok {
			g.out.Flush()
			fmt.Fprintf(g.stderr, "error: %s\n", se.msg)
			return 128
		}
		if err != nil {
			return g.usage(err.Error())
		}
		files = append(files, fs...)
	}
	if len(files) == 0 {
		g.out.Flush()
		fmt.Fprint(g.stderr, "error: No valid patches in input (allow with \"--allow-empty\")\n")
		return 128
	}
	if a.has("--reverse") {
		// git goes through a reversed patch's files from the last
		for i, j := 0, len(files)-1; i < j; i, j = i+1, j-1 {
			files[i], files[j] = files[j], files[i]
		}
	}
	seen := map[string]bool{}
	for _, f := range files {
		if seen[f.name()] {
			return g.usage("a patch that changes one file twice is not supported")
		}
		seen[f.name()] = true
		if a.has("--reverse") {
			f.oldName, f.newName = f.newName, f.oldName
			for _, h := range f.hunks {
				h.reverse()
			}
		}
	}
	apply := !a.has("--stat") && !a.has("--numstat") && !a.has("--check") || a.has("--apply")
	check := apply || a.has("--check")
	useIndex := a.has("--index") || a.has("--cached")
	var idx *index.Index
	if useIndex {
		var err error
		if idx, err = g.readIndex(); err != nil {
			return g.fatal("%v", err)
		}
	}
	type result struct {
		f     *applyFile
		data  string
		mode  filemode.FileMode
		entry *index.Entry
	}
	var results []result
	if check {
		failed := false
		fail := func(format string, args ...any) {
			g.out.Flush()
			fmt.Fprintf(g.stderr, "error: "+format+"\n", args...)
			failed = true
		}
		ixf := map[string]*index.Entry{}
		if idx != nil {
			for _, e := range idx.Entries {
				ixf[e.Name] = e
			}
		}
		var ws []string
		wsLines := 0
		if apply {
			ws, wsLines = wsErrors(files)
			g.out.Flush()
			for i, m := range ws {
				if i < 5 {
					fmt.Fprint(g.stderr, m)
				}
			}
		}
		for _, f := range files {
			r := result{f: f, mode: f.newMode}
			if r.mode == 0 {
				r.mode = filemode.Regular
			}
			var img []string
			if f.oldName == "" {
				// a new file: nothing may be in its place
				if e := ixf[f.newName]; e != nil {
					fail("%s: already exists in index", f.newName)
					continue
				}
				if !a.has("--cached") {
					if _, err := g.wfs.Lstat(g.file(f.newName)); err == nil {
						fail("%s: already exists in working directory", f.newName)
						continue
					}
				}
			} else {
				var data []byte
				var err error
				e := ixf[f.oldName]
				if useIndex && e == nil {
					fail("%s: does not exist in index", f.oldName)
					continue
				}
				if a.has("--cached") {
					r.mode, r.entry = e.Mode, e
					data, err = g.blob(e.Hash)
				} else {
					at, lerr := g.wfs.Lstat(g.file(f.oldName))
					if lerr != nil {
						fail("%s: %s", f.oldName, g.host.ErrText(orNotExist(lerr)))
						continue
					}
					m, ok := modeOf(at)
					if !ok || m == filemode.Symlink {
						return g.usage("patching " + f.oldName + ", which is not a regular file, is not supported")
					}
					if at.Size > stashMaxFile {
						return g.usage(fmt.Sprintf("%s is larger than %d MiB", f.oldName, stashMaxFile>>20))
					}
					r.mode = m
					data, err = g.readWork(f.oldName, at)
					if err == nil && e != nil {
						r.entry = e
						if h := plumbing.ComputeHash(plumbing.BlobObject, data); h != e.Hash || e.Mode != m {
							fail("%s: does not match index", f.oldName)
							continue
						}
					}
				}
				if err != nil {
					return g.fatal("%v", err)
				}
				img = splitKeep(string(data))
			}
			out, bad := applyHunks(img, f.hunks)
			if bad != nil {
				fail("patch failed: %s:%d", f.oldName, bad.oldPos)
				fail("%s: patch does not apply", f.oldName)
				continue
			}
			r.data = strings.Join(out, "")
			if f.newName == "" && r.data != "" {
				fail("removal patch leaves file contents")
				fail("%s: patch does not apply", f.oldName)
				continue
			}
			results = append(results, r)
		}
		if failed {
			return 1
		}
		if apply {
			for _, r := range results {
				if code := g.applyResult(r.f, r.data, r.mode, idx, a.has("--cached")); code != 0 {
					return code
				}
			}
			if idx != nil {
				if err := g.writeIndex(idx); err != nil {
					return g.fatal("%v", err)
				}
			}
			if len(ws) > 5 {
				fmt.Fprintf(g.stderr, "warning: squelched %d whitespace errors\n", len(ws)-5)
			}
			if wsLines > 0 {
				fmt.Fprintf(g.stderr, "warning: %d %s whitespace errors.\n", wsLines, plural(wsLines, "line adds", "lines add"))
			}
		}
	}
	if a.has("--stat") {
		applyStat(g, files)
	}
	if a.has("--numstat") {
		for _, f := range files {
			add, del := f.counts()
			fmt.Fprintf(g.out, "%d\t%d\t%s\n", add, del, quotePath(f.name()))
		}
	}
	return 0
}

func orNotExist(err error) error {
	if isNotExist(err) {
		return syscall.ENOENT
	}
	return err
}

func (f *applyFile) counts() (add, del int) {
	for _, h := range f.hunks {
		add += len(h.added)
		del += len(h.removed)
	}
	return
}

// applyResult writes one patched file to the work tree (unless cached)
// and the index (when idx is given).
func (g *gitCmd) applyResult(f *applyFile, data string, mode filemode.FileMode, idx *index.Index, cached bool) int {
	if f.newName == "" {
		if !cached {
			if err := g.wfs.Remove(g.file(f.oldName)); err != nil && !isNotExist(err) {
				return g.fatal("%v", err)
			}
			g.removeEmptyDirs(parentDir(f.oldName))
		}
		if idx != nil {
			unstage(idx, f.oldName)
		}
		return 0
	}
	p := f.newName
	var h plumbing.Hash
	if idx != nil {
		var err error
		if h, err = g.writeObject(plumbing.BlobObject, []byte(data)); err != nil {
			return g.fatal("%v", err)
		}
	}
	if !cached {
		for d := parentDir(p); d != ""; d = parentDir(d) {
			if at, err := g.wfs.Lstat(g.file(d)); err == nil && !at.IsDir() {
				g.out.Flush()
				fmt.Fprintf(g.stderr, "error: affected file '%s' is beyond a symbolic link\n", p)
				return 1
			}
		}
		if err := g.mkdirs(parentDir(p)); err != nil {
			return g.fatal("%v", err)
		}
		perm := uint32(0o644)
		if mode == filemode.Executable {
			perm = 0o755
		}
		fp := g.file(p)
		if err := g.wfs.WriteFile(fp, []byte(data), perm); err != nil {
			return g.fatal("%v", err)
		}
		if f.oldName == "" {
			if err := g.wfs.Chmod(fp, perm); err != nil {
				return g.fatal("%v", err)
			}
		}
	}
	if idx == nil {
		return 0
	}
	var e *index.Entry
	for _, x := range idx.Entries {
		if x.Name == p {
			e = x
		}
	}
	if e == nil {
		e = &index.Entry{Name: p}
		idx.Entries = append(idx.Entries, e)
	}
	e.Hash, e.Mode = h, mode
	if cached {
		e.ModifiedAt, e.Size = time.Time{}, 0 // stat data no longer describes the file
		return 0
	}
	if at, err := g.wfs.Lstat(g.file(p)); err == nil {
		statEntry(e, at)
	}
	return 0
}

// applyStat prints git apply --stat: git's own layout (a five-wide
// count), not git diff's.
func applyStat(g *gitCmd, files []*applyFile) {
	maxLen, maxChange := 0, 0
	for _, f := range files {
		add, del := f.counts()
		maxChange = max(maxChange, add+del)
		for _, n := range []string{f.oldName, f.newName} {
			if n != "" {
				maxLen = max(maxLen, len(quotePath(n)))
			}
		}
	}
	width := min(maxLen, 50)
	adds, dels := 0, 0
	for _, f := range files {
		name := quotePath(f.name())
		if len(name) > width {
			cut := len(name) + 3 - width
			if i := strings.IndexByte(name[cut:], '/'); i >= 0 {
				cut += i
			}
			name = "..." + name[cut:]
		}
		add, del := f.counts()
		adds += add
		dels += del
		scale := maxChange
		if width+maxChange > 70 {
			scale = 70 - width
		}
		pa, pd := add, del
		if maxChange > 0 {
			total := ((add+del)*scale + maxChange/2) / maxChange
			pa = (add*scale + maxChange/2) / maxChange
			pd = total - pa
		}
		fmt.Fprintf(g.out, " %-*s |%5d %s%s\n", width, name, add+del, strings.Repeat("+", pa), strings.Repeat("-", pd))
	}
	s := fmt.Sprintf(" %d %s changed", len(files), plural(len(files), "file", "files"))
	if adds > 0 || dels == 0 {
		s += fmt.Sprintf(", %d %s(+)", adds, plural(adds, "insertion", "insertions"))
	}
	if dels > 0 || adds == 0 {
		s += fmt.Sprintf(", %d %s(-)", dels, plural(dels, "deletion", "deletions"))
	}
	fmt.Fprintln(g.out, s)
}
