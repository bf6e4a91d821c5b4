package gitcmd

import (
	"container/heap"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/computerfs/computerfs/kv"
)

func init() {
	gitSubs["status"] = &gitSub{run: gitStatus, flags: flags("--short|-s", "--branch|-b", "--porcelain=?",
		"--long", "--untracked-files=?|-u", "--no-renames", "--renames", "--ignore-submodules=?", "--show-stash", "--ahead-behind", "--no-ahead-behind")}
	gitChecks["status"] = func(a *gitArgs) string {
		if v := a.val("--porcelain"); a.has("--porcelain") && v != "" && v != "v1" {
			return "--porcelain=" + v + " is not supported"
		}
		if v := a.val("--untracked-files"); a.has("--untracked-files") && v != "" && v != "all" && v != "normal" && v != "no" {
			return "--untracked-files=" + v + " is not supported"
		}
		return ""
	}
	gitChecks["ls-files"] = func(a *gitArgs) string {
		if a.has("--others") && !a.has("--exclude-standard") {
			return "--others without --exclude-standard is not supported"
		}
		return ""
	}
	gitSubs["ls-files"] = &gitSub{run: gitLsFiles, flags: flags("--cached|-c", "--others|-o", "--exclude-standard", "--modified|-m", "--deleted|-d", "--stage|-s", "-z", "--full-name", "--error-unmatch")}
}

// treeFile is a file of a tree or the index: blob (or link) and mode.
type treeFile struct {
	hash plumbing.Hash
	mode filemode.FileMode
}

// treeFiles lists the files of a commit's tree by path (nil commit: none).
func treeFilesOf(c *object.Commit) (map[string]treeFile, error) {
	m := map[string]treeFile{}
	if c == nil {
		return m, nil
	}
	t, err := c.Tree()
	if err != nil {
		return nil, err
	}
	return treeFilesOfTree(t)
}

func treeFilesOfTree(t *object.Tree) (map[string]treeFile, error) {
	m := map[string]treeFile{}
	w := object.NewTreeWalker(t, true, nil)
	defer w.Close()
	for {
		name, e, err := w.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if e.Mode == filemode.Dir {
			if tooDeep(name) {
				return nil, errTooDeep // before the walker goes into it
			}
			continue
		}
		m[name] = treeFile{e.Hash, e.Mode}
	}
	return m, nil
}

// change is one changed path between two sides.
type change struct {
	from, to string // paths (from "" for an added file, to "" for a deleted one)
	a, b     treeFile
	score    int // similarity of a rename, percent
}

func (c change) path() string {
	if c.to != "" {
		return c.to
	}
	return c.from
}

func (c change) kind() byte {
	switch {
	case c.from == "":
		return 'A'
	case c.to == "":
		return 'D'
	case c.from != c.to:
		return 'R'
	case (c.a.mode == filemode.Symlink) != (c.b.mode == filemode.Symlink):
		return 'T'
	}
	return 'M'
}

// compareFiles lists the changes from a to b, sorted by path.
func compareFiles(a, b map[string]treeFile) []change {
	var out []change
	for p, fa := range a {
		fb, ok := b[p]
		switch {
		case !ok:
			out = append(out, change{from: p, a: fa})
		case fa != fb:
			out = append(out, change{from: p, to: p, a: fa, b: fb})
		}
	}
	for p, fb := range b {
		if _, ok := a[p]; !ok {
			out = append(out, change{to: p, b: fb})
		}
	}
	sortChanges(out)
	return out
}

func sortChanges(c []change) {
	sort.Slice(c, func(i, j int) bool { return c[i].path() < c[j].path() })
}

// indexFiles lists the index's stage-0 entries by path.
func indexFiles(idx *index.Index) map[string]treeFile {
	m := make(map[string]treeFile, len(idx.Entries))
	for _, e := range idx.Entries {
		if e.Stage == 0 {
			m[e.Name] = treeFile{e.Hash, e.Mode}
		}
	}
	return m
}

// worktree compares the index with the files on disk.
type worktree struct {
	g   *gitCmd
	idx *index.Index
	// files: the work tree's version of every index entry that changed
	// (absent: unchanged); a zero hash means deleted.
	files map[string]treeFile
	// refreshed counts unchanged entries whose stat data was renewed.
	refreshed int
	// denied: the entries the agent may not stat (their directory is
	// not searchable, or a rule denies them), in index order.
	denied []string
}

// modeOf is the git mode of a file of the store.
func modeOf(a kv.Attr) (filemode.FileMode, bool) {
	switch a.Mode & kv.S_IFMT {
	case kv.S_IFLNK:
		return filemode.Symlink, true
	case kv.S_IFREG:
		if a.Mode&0o100 != 0 {
			return filemode.Executable, true
		}
		return filemode.Regular, true
	}
	return 0, false
}

// hashFile computes the blob hash of a work-tree file.
func (g *gitCmd) hashFile(rel string, a kv.Attr) (plumbing.Hash, []byte, error) {
	data, err := g.readWork(rel, a)
	if err != nil {
		return plumbing.ZeroHash, nil, err
	}
	return plumbing.ComputeHash(plumbing.BlobObject, data), data, nil
}

func (g *gitCmd) readWork(rel string, a kv.Attr) ([]byte, error) {
	if a.Mode&kv.S_IFMT == kv.S_IFLNK {
		t, err := g.wfs.Readlink(g.file(rel))
		return []byte(t), err
	}
	return g.wfs.ReadFile(g.file(rel))
}

func isNotExist(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR)
}

// scanWorktree finds the index entries whose work-tree file differs.
// Stat data decides first (size, mode, mtime, as git's cache does), and
// content hashing settles the rest, so a file with new stat data but the
// same content is unchanged.
func (g *gitCmd) scanWorktree(idx *index.Index, specs []string) (*worktree, error) {
	w := &worktree{g: g, idx: idx, files: map[string]treeFile{}}
	for _, e := range idx.Entries {
		if e.Stage != 0 || !matchSpec(specs, e.Name) || e.Mode == filemode.Submodule {
			continue
		}
		if err := g.ctx.Err(); err != nil {
			return nil, err
		}
		a, err := g.lstatWork(e.Name)
		if isNotExist(err) {
			w.files[e.Name] = treeFile{}
			continue
		}
		if isDenied(err) {
			// As git run as the agent: diff-files' perror and the entry
			// taken as unchanged; ls-files -m calls it modified; stash
			// refuses (its caller says so).
			w.denied = append(w.denied, e.Name)
			g.out.Flush()
			if g.sub == "stash" {
				continue
			}
			if g.sub == "ls-files" {
				fmt.Fprintf(g.stderr, "error: cannot lstat '%s': %s\n", e.Name, g.host.ErrText(syscall.EACCES))
				w.files[e.Name] = treeFile{hash: needHash, mode: e.Mode}
			} else {
				fmt.Fprintf(g.stderr, "%s: %s\n", e.Name, g.host.ErrText(syscall.EACCES))
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		mode, ok := modeOf(a)
		if !ok {
			w.files[e.Name] = treeFile{}
			continue
		}
		mt := time.Unix(0, a.Mtime)
		if mode == e.Mode && uint32(a.Size) == e.Size && mt.Equal(e.ModifiedAt) && (idx.ModTime.IsZero() || mt.Before(idx.ModTime)) {
			continue
		}
		if mode == e.Mode && uint32(a.Size) != e.Size {
			w.files[e.Name] = treeFile{hash: needHash, mode: mode}
			continue
		}
		h, _, err := g.hashFile(e.Name, a)
		if err != nil {
			return nil, err
		}
		if h != e.Hash || mode != e.Mode {
			w.files[e.Name] = treeFile{h, mode}
		} else if !mt.Before(idx.ModTime) || !mt.Equal(e.ModifiedAt) || uint32(a.Size) != e.Size {
			statEntry(e, a) // unchanged: new stat data for the next time
			w.refreshed++
		}
	}
	return w, nil
}

// needHash marks a changed file whose hash is not computed yet.
var needHash = plumbing.NewHash("ffffffffffffffffffffffffffffffffffffffff")

// hash returns a changed file's real hash.
func (w *worktree) hash(p string) plumbing.Hash {
	f := w.files[p]
	if f.hash == needHash {
		a, err := w.g.wfs.Lstat(w.g.file(p))
		if err == nil {
			if h, _, err := w.g.hashFile(p, a); err == nil {
				f.hash = h
				w.files[p] = f
			}
		}
	}
	return f.hash
}

// changes lists the index-to-work-tree changes.
func (w *worktree) changes(idxFiles map[string]treeFile) []change {
	var out []change
	for p, f := range w.files {
		a := idxFiles[p]
		if f.hash.IsZero() {
			out = append(out, change{from: p, a: a})
			continue
		}
		out = append(out, change{from: p, to: p, a: a, b: treeFile{w.hash(p), f.mode}})
	}
	sortChanges(out)
	return out
}

// ignorer answers whether a path is ignored, reading .gitignore files as
// the walk goes down.
type ignorer struct {
	g        *gitCmd
	patterns map[string][]gitignore.Pattern // by directory, inherited
}

func newIgnorer(g *gitCmd) *ignorer {
	ig := &ignorer{g: g, patterns: map[string][]gitignore.Pattern{}}
	var ps []gitignore.Pattern
	if data, err := g.wfs.ReadFile(g.file(".git/info/exclude")); err == nil {
		ps = append(ps, parseIgnore(string(data), nil)...)
	}
	ig.patterns["\x00"] = ps
	return ig
}

func parseIgnore(s string, domain []string) []gitignore.Pattern {
	var ps []gitignore.Pattern
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimRight(l, "\r")
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			continue
		}
		ps = append(ps, gitignore.ParsePattern(l, domain))
	}
	return ps
}

// dirPatterns returns the patterns in force inside dir ("" the root).
func (ig *ignorer) dirPatterns(dir string) []gitignore.Pattern {
	if ps, ok := ig.patterns[dir]; ok {
		return ps
	}
	var parent []gitignore.Pattern
	var domain []string
	if dir == "" {
		parent = ig.patterns["\x00"]
	} else {
		parent = ig.dirPatterns(parentDir(dir))
		domain = strings.Split(dir, "/")
	}
	ps := parent
	data, err := ig.g.wfs.ReadFile(ig.g.file(path.Join(dir, ".gitignore")))
	if err == nil {
		ps = append(append([]gitignore.Pattern(nil), parent...), parseIgnore(string(data), domain)...)
	} else if isDenied(err) {
		ig.g.warnf("unable to access '%s': %s", path.Join(dir, ".gitignore"), ig.g.host.ErrText(syscall.EACCES))
	}
	ig.patterns[dir] = ps
	return ps
}

func parentDir(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}

func (ig *ignorer) ignored(p string, isDir bool) bool {
	ps := ig.dirPatterns(parentDir(p))
	parts := strings.Split(p, "/")
	for i := len(ps) - 1; i >= 0; i-- {
		if r := ps[i].Match(parts, isDir); r != gitignore.NoMatch {
			return r == gitignore.Exclude
		}
	}
	// a file in an ignored directory is ignored
	if d := parentDir(p); d != "" {
		return ig.ignoredDir(d)
	}
	return false
}

func (ig *ignorer) ignoredDir(d string) bool {
	for ; d != ""; d = parentDir(d) {
		ps := ig.dirPatterns(parentDir(d))
		parts := strings.Split(d, "/")
		for i := len(ps) - 1; i >= 0; i-- {
			if r := ps[i].Match(parts, true); r != gitignore.NoMatch {
				if r == gitignore.Exclude {
					return true
				}
				break
			}
		}
	}
	return false
}

// untracked lists the files not in the index and not ignored: whole
// directories as "dir/" when nothing in them is tracked (all: every
// file).
func (g *gitCmd) untracked(idx *index.Index, specs []string, all bool) ([]string, error) {
	names := make([]string, 0, len(idx.Entries))
	for _, e := range idx.Entries {
		names = append(names, e.Name)
	}
	sort.Strings(names)
	tracked := func(p string) bool {
		i := sort.SearchStrings(names, p)
		return i < len(names) && names[i] == p
	}
	trackedDir := func(d string) bool {
		i := sort.SearchStrings(names, d+"/")
		return i < len(names) && strings.HasPrefix(names[i], d+"/")
	}
	ig := newIgnorer(g)
	var out []string
	var walk func(dir string, collapse bool) (bool, error)
	// walk returns whether dir holds an untracked file; with collapse it
	// stops at the first.
	walk = func(dir string, collapse bool) (bool, error) {
		m, err := g.listDir(dir)
		if err != nil {
			return false, err
		}
		ents := make([]kv.Dirent, 0, len(m))
		for _, d := range m {
			ents = append(ents, d)
		}
		sort.Slice(ents, func(i, j int) bool { return ents[i].Name < ents[j].Name })
		found := false
		for _, d := range ents {
			if err := g.ctx.Err(); err != nil {
				return false, err
			}
			p := d.Name
			if dir != "" {
				p = dir + "/" + d.Name
			}
			if d.Name == ".git" {
				continue
			}
			isDir := d.Type == kv.S_IFDIR
			if isDir {
				if tracked(p) { // a submodule
					continue
				}
				if !collapse && trackedDir(p) {
					if len(specs) > 0 && !matchSpec(specs, p) && !specUnder(specs, p) {
						continue
					}
					if _, err := walk(p, false); err != nil {
						return false, err
					}
					continue
				}
				if ig.ignored(p, true) {
					continue
				}
				if len(specs) > 0 && !matchSpec(specs, p) && !specUnder(specs, p) {
					continue
				}
				if all || (len(specs) > 0 && !matchSpec(specs, p)) {
					n := len(out)
					if _, err := walk(p, false); err != nil {
						return false, err
					}
					if len(out) > n {
						found = true
						if collapse {
							return true, nil
						}
					}
					continue
				}
				has, err := walk(p, true)
				if err != nil {
					return false, err
				}
				if has {
					found = true
					if collapse {
						return true, nil
					}
					out = append(out, p+"/")
				}
				continue
			}
			if d.Type != kv.S_IFREG && d.Type != kv.S_IFLNK {
				continue
			}
			if tracked(p) || ig.ignored(p, false) || !matchSpec(specs, p) {
				continue
			}
			found = true
			if collapse {
				return true, nil
			}
			out = append(out, p)
		}
		return found, nil
	}
	if _, err := walk("", false); err != nil {
		return nil, err
	}
	sort.Strings(out)
	return out, nil
}

// specUnder reports whether a pathspec names something inside dir.
func specUnder(specs []string, dir string) bool {
	for _, s := range specs {
		if strings.HasPrefix(s, dir+"/") || strings.ContainsAny(s, "*?[") {
			return true
		}
	}
	return false
}

// statusData is everything git status shows.
type statusData struct {
	branch    string
	head      *object.Commit
	staged    []change
	unstaged  []change
	untracked []string
	// noUntracked: untracked files were not looked for (-uno)
	noUntracked bool
}

func (g *gitCmd) collectStatus(specs []string, untrackedMode string, renames bool) (*statusData, error) {
	head, branch, err := g.head()
	if err != nil {
		return nil, err
	}
	idx, err := g.readIndex()
	if err != nil {
		return nil, err
	}
	ixf := indexFiles(idx)
	st := &statusData{branch: branch, head: head}
	staged, err := g.stagedChanges(head, ixf)
	if err != nil {
		return nil, err
	}
	for _, c := range staged {
		if matchSpec(specs, c.path()) {
			st.staged = append(st.staged, c)
		}
	}
	if renames {
		st.staged = g.detectRenames(st.staged)
	}
	w, err := g.scanWorktree(idx, specs)
	if err != nil {
		return nil, err
	}
	st.unstaged = w.changes(ixf)
	if w.refreshed > 0 && g.cfgs["--no-optional-locks"] == "" {
		// as git status does: write the renewed stat data back, if the
		// index is not locked, so the next status need not hash again
		g.writeIndex(idx)
	}
	st.noUntracked = untrackedMode == "no"
	if untrackedMode != "no" {
		if st.untracked, err = g.untracked(idx, specs, untrackedMode == "all"); err != nil {
			return nil, err
		}
	}
	return st, nil
}

func filterFiles(m map[string]treeFile, specs []string) map[string]treeFile {
	if len(specs) == 0 {
		return m
	}
	out := map[string]treeFile{}
	for p, f := range m {
		if matchSpec(specs, p) {
			out[p] = f
		}
	}
	return out
}

// upstream returns the branch's upstream ("origin/main") and its commit,
// or "" if it has none; gone says the upstream ref does not exist.
func (g *gitCmd) upstream(branch string) (name string, c *object.Commit, gone bool) {
	if branch == "" {
		return "", nil, false
	}
	cfg := g.config()
	b, ok := cfg.Branches[branch]
	if !ok || b.Remote == "" || b.Merge == "" {
		return "", nil, false
	}
	var ref plumbing.ReferenceName
	if b.Remote == "." {
		ref, name = b.Merge, b.Merge.Short()
	} else {
		ref = plumbing.NewRemoteReferenceName(b.Remote, b.Merge.Short())
		name = b.Remote + "/" + b.Merge.Short()
	}
	r, err := g.repo.Storer.Reference(ref)
	if err != nil {
		return name, nil, true
	}
	c, err = g.commitObject(r.Hash())
	if err != nil {
		return name, nil, true
	}
	return name, c, false
}

// aheadBehind counts the commits of a not in b and of b not in a.
func (g *gitCmd) aheadBehind(a, b *object.Commit) (int, int, error) {
	if a.Hash == b.Hash {
		return 0, 0, nil
	}
	flags := map[plumbing.Hash]uint8{a.Hash: 1}
	flags[b.Hash] |= 2
	q := &commitQueue{}
	heap.Push(q, a)
	if b.Hash != a.Hash {
		heap.Push(q, b)
	}
	// Every commit is visited once per side that reaches it. (Stopping
	// when only commits of both sides are left, as git does, is wrong
	// when commit dates go backwards, as fixed test dates do.)
	for q.Len() > 0 {
		c := heap.Pop(q).(*object.Commit)
		f := flags[c.Hash]
		for _, p := range c.ParentHashes {
			if flags[p]|f == flags[p] {
				continue
			}
			flags[p] |= f
			pc, err := g.commitObject(p)
			if err != nil {
				return 0, 0, err
			}
			heap.Push(q, pc)
		}
	}
	ahead, behind := 0, 0
	for _, f := range flags {
		switch f {
		case 1:
			ahead++
		case 2:
			behind++
		}
	}
	return ahead, behind, nil
}

func (g *gitCmd) reachable(c *object.Commit) (map[plumbing.Hash]bool, error) {
	seen := map[plumbing.Hash]bool{}
	if c == nil {
		return seen, nil
	}
	stack := []plumbing.Hash{c.Hash}
	charge := g.walkCharge()
	for len(stack) > 0 {
		h := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[h] {
			continue
		}
		seen[h] = true
		if err := charge(); err != nil {
			return nil, err
		}
		if err := g.ctx.Err(); err != nil {
			return nil, err
		}
		cm, err := g.commitObject(h)
		if err != nil {
			return nil, err
		}
		stack = append(stack, cm.ParentHashes...)
	}
	return seen, nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func gitStatus(g *gitCmd) int {
	a := g.a
	specs, err := g.pathspecs(a.args)
	if err != nil {
		return g.fatal("%v", err)
	}
	um := "normal"
	if a.has("--untracked-files") {
		um = a.val("--untracked-files")
		if um == "" {
			um = "all"
		}
	}
	st, err := g.collectStatus(specs, um, !a.has("--no-renames"))
	if err != nil {
		return g.fatal("%v", err)
	}
	short, porcelain := false, false
	for _, f := range a.order {
		switch f {
		case "--short":
			short, porcelain = true, false
		case "--porcelain":
			short, porcelain = true, true
		case "--long":
			short, porcelain = false, false
		}
	}
	if short {
		g.statusShort(st, porcelain)
	} else {
		g.statusLong(st)
	}
	return 0
}

func (g *gitCmd) statusShort(st *statusData, porcelain bool) {
	show := g.rel
	if porcelain {
		show = func(p string) string { return p }
	}
	if g.a.has("--branch") {
		g.out.WriteString("## ")
		switch {
		case st.branch == "":
			g.out.WriteString("HEAD (no branch)")
		case st.head == nil:
			fmt.Fprintf(g.out, "No commits yet on %s", st.branch)
		default:
			g.out.WriteString(st.branch)
			if up, uc, gone := g.upstream(st.branch); up != "" {
				fmt.Fprintf(g.out, "...%s", up)
				if gone {
					g.out.WriteString(" [gone]")
				} else if ah, bh, err := g.aheadBehind(st.head, uc); err == nil && (ah > 0 || bh > 0) {
					switch {
					case ah > 0 && bh > 0:
						fmt.Fprintf(g.out, " [ahead %d, behind %d]", ah, bh)
					case ah > 0:
						fmt.Fprintf(g.out, " [ahead %d]", ah)
					default:
						fmt.Fprintf(g.out, " [behind %d]", bh)
					}
				}
			}
		}
		g.out.WriteString("\n")
	}
	type line struct {
		x, y     byte
		from, to string
	}
	lines := map[string]*line{}
	get := func(p string) *line {
		l := lines[p]
		if l == nil {
			l = &line{x: ' ', y: ' ', to: p}
			lines[p] = l
		}
		return l
	}
	for _, c := range st.staged {
		l := get(c.path())
		l.x = c.kind()
		if l.x == 'R' {
			l.from = c.from
		}
	}
	for _, c := range st.unstaged {
		get(c.path()).y = c.kind()
	}
	keys := make([]string, 0, len(lines))
	for k := range lines {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		l := lines[k]
		if l.from != "" {
			fmt.Fprintf(g.out, "%c%c %s -> %s\n", l.x, l.y, quotePathSP(show(l.from)), quotePathSP(show(l.to)))
		} else {
			fmt.Fprintf(g.out, "%c%c %s\n", l.x, l.y, quotePathSP(show(l.to)))
		}
	}
	for _, u := range st.untracked {
		fmt.Fprintf(g.out, "?? %s\n", quotePathSP(show(u)))
	}
}

var statusLabel = map[byte]string{'M': "modified:   ", 'A': "new file:   ", 'D': "deleted:    ", 'R': "renamed:    ", 'T': "typechange: "}

func (g *gitCmd) statusLong(st *statusData) {
	o := g.out
	switch {
	case st.branch != "":
		fmt.Fprintf(o, "On branch %s\n", st.branch)
	case st.head != nil:
		fmt.Fprintf(o, "HEAD detached at %s\n", g.abbrev(st.head.Hash))
	}
	if st.head != nil {
		if up, uc, gone := g.upstream(st.branch); up != "" {
			if gone {
				fmt.Fprintf(o, "Your branch is based on '%s', but the upstream is gone.\n  (use \"git branch --unset-upstream\" to fixup)\n", up)
			} else if ah, bh, err := g.aheadBehind(st.head, uc); err == nil {
				switch {
				case ah == 0 && bh == 0:
					fmt.Fprintf(o, "Your branch is up to date with '%s'.\n", up)
				case bh == 0:
					fmt.Fprintf(o, "Your branch is ahead of '%s' by %d %s.\n  (use \"git push\" to publish your local commits)\n", up, ah, plural(ah, "commit", "commits"))
				case ah == 0:
					fmt.Fprintf(o, "Your branch is behind '%s' by %d %s, and can be fast-forwarded.\n  (use \"git pull\" to update your local branch)\n", up, bh, plural(bh, "commit", "commits"))
				default:
					fmt.Fprintf(o, "Your branch and '%s' have diverged,\nand have %d and %d different commits each, respectively.\n  (use \"git pull\" to merge the remote branch into yours)\n", up, ah, bh)
				}
			}
			o.WriteString("\n")
		}
	} else {
		o.WriteString("\nNo commits yet\n\n")
	}
	entry := func(c change) {
		p := quotePath(g.rel(c.path()))
		if c.kind() == 'R' {
			p = quotePath(g.rel(c.from)) + " -> " + p
		}
		fmt.Fprintf(o, "\t%s%s\n", statusLabel[c.kind()], p)
	}
	if len(st.staged) > 0 {
		o.WriteString("Changes to be committed:\n")
		if st.head == nil {
			o.WriteString("  (use \"git rm --cached <file>...\" to unstage)\n")
		} else {
			o.WriteString("  (use \"git restore --staged <file>...\" to unstage)\n")
		}
		for _, c := range st.staged {
			entry(c)
		}
		o.WriteString("\n")
	}
	if len(st.unstaged) > 0 {
		o.WriteString("Changes not staged for commit:\n")
		del := false
		for _, c := range st.unstaged {
			if c.kind() == 'D' {
				del = true
			}
		}
		if del {
			o.WriteString("  (use \"git add/rm <file>...\" to update what will be committed)\n")
		} else {
			o.WriteString("  (use \"git add <file>...\" to update what will be committed)\n")
		}
		o.WriteString("  (use \"git restore <file>...\" to discard changes in working directory)\n")
		for _, c := range st.unstaged {
			entry(c)
		}
		o.WriteString("\n")
	}
	if st.noUntracked && len(st.staged) > 0 {
		o.WriteString("Untracked files not listed (use -u option to show untracked files)\n")
	}
	if len(st.untracked) > 0 {
		o.WriteString("Untracked files:\n  (use \"git add <file>...\" to include in what will be committed)\n")
		for _, u := range st.untracked {
			fmt.Fprintf(o, "\t%s\n", quotePath(g.rel(u)))
		}
		o.WriteString("\n")
	}
	switch {
	case len(st.staged) > 0:
	case len(st.unstaged) > 0:
		o.WriteString("no changes added to commit (use \"git add\" and/or \"git commit -a\")\n")
	case len(st.untracked) > 0:
		o.WriteString("nothing added to commit but untracked files present (use \"git add\" to track)\n")
	case st.head == nil:
		o.WriteString("nothing to commit (create/copy files and use \"git add\" to track)\n")
	case st.noUntracked:
		o.WriteString("nothing to commit (use -u to show untracked files)\n")
	default:
		o.WriteString("nothing to commit, working tree clean\n")
	}
}

// detectRenames pairs deleted and added files of equal content (and
// then, for the rest, of similar content: 50% or more) as renames.
func (g *gitCmd) detectRenames(cs []change) []change {
	var dels, adds []int
	for i, c := range cs {
		switch c.kind() {
		case 'D':
			dels = append(dels, i)
		case 'A':
			adds = append(adds, i)
		}
	}
	if len(dels) == 0 || len(adds) == 0 {
		return cs
	}
	used := map[int]bool{}
	var out []change
	pair := func(di, ai, score int) {
		used[di], used[ai] = true, true
		out = append(out, change{from: cs[di].from, to: cs[ai].to, a: cs[di].a, b: cs[ai].b, score: score})
	}
	for _, ai := range adds { // exact renames first
		for _, di := range dels {
			if !used[di] && cs[di].a.hash == cs[ai].b.hash {
				pair(di, ai, 100)
				break
			}
		}
	}
	if len(dels)*len(adds) <= 100*100 {
		for _, ai := range adds {
			if used[ai] {
				continue
			}
			best, bestScore := -1, 0
			for _, di := range dels {
				if used[di] {
					continue
				}
				if s := g.similarity(cs[di].a.hash, cs[ai].b.hash); s >= 50 && s > bestScore {
					best, bestScore = di, s
				}
			}
			if best >= 0 {
				pair(best, ai, bestScore)
			}
		}
	}
	for i, c := range cs {
		if !used[i] {
			out = append(out, c)
		}
	}
	sortChanges(out)
	return out
}

// similarity estimates how alike two blobs are, in percent, as git's
// rename detection does: the bytes of b found in a (counted by line),
// over the larger size.
func (g *gitCmd) similarity(a, b plumbing.Hash) int {
	da, err1 := g.blob(a)
	db, err2 := g.blob(b)
	if err1 != nil || err2 != nil || len(da) == 0 || len(db) == 0 {
		return 0
	}
	count := map[string]int{}
	for _, l := range splitKeep(string(da)) {
		count[l] += len(l)
	}
	same := 0
	for _, l := range splitKeep(string(db)) {
		if count[l] >= len(l) {
			count[l] -= len(l)
			same += len(l)
		}
	}
	m := max(len(da), len(db))
	return same * 100 / m
}

// blob reads a blob's content.
func (g *gitCmd) blob(h plumbing.Hash) ([]byte, error) {
	b, err := g.repo.BlobObject(h)
	if err != nil {
		return nil, err
	}
	r, err := b.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// splitKeep splits s into lines, each with its newline.
func splitKeep(s string) []string {
	var out []string
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

func gitLsFiles(g *gitCmd) int {
	a := g.a
	specs, err := g.pathspecs(a.args)
	if err != nil {
		return g.fatal("%v", err)
	}
	idx, err := g.readIndex()
	if err != nil {
		return g.fatal("%v", err)
	}
	term := "\n"
	if a.has("-z") {
		term = "\x00"
	}
	show := func(p string) string {
		if !a.has("--full-name") {
			p = g.rel(p)
		}
		if term == "\n" {
			return quotePath(p)
		}
		return p
	}
	cached := a.has("--cached") || !(a.has("--others") || a.has("--modified") || a.has("--deleted"))
	matched := map[string]bool{}
	var w *worktree
	if a.has("--modified") || a.has("--deleted") {
		if w, err = g.scanWorktree(idx, specs); err != nil {
			return g.fatal("%v", err)
		}
	}
	for _, e := range idx.Entries {
		if !matchSpec(specs, e.Name) {
			continue
		}
		for _, s := range specs {
			if matchSpec([]string{s}, e.Name) {
				matched[s] = true
			}
		}
		if cached {
			if a.has("--stage") {
				fmt.Fprintf(g.out, "%s %s %d\t%s%s", modeStr(e.Mode), e.Hash, e.Stage, show(e.Name), term)
			} else {
				fmt.Fprintf(g.out, "%s%s", show(e.Name), term)
			}
		}
		if w != nil {
			f, changed := w.files[e.Name]
			if a.has("--deleted") && changed && f.hash.IsZero() {
				fmt.Fprintf(g.out, "%s%s", show(e.Name), term)
			}
			if a.has("--modified") && changed {
				fmt.Fprintf(g.out, "%s%s", show(e.Name), term)
			}
		}
	}
	if a.has("--others") {
		others, err := g.untracked(idx, specs, true)
		if err != nil {
			return g.fatal("%v", err)
		}
		for _, p := range others {
			fmt.Fprintf(g.out, "%s%s", show(p), term)
		}
	}
	if a.has("--error-unmatch") {
		for i, s := range specs {
			if !matched[s] {
				g.out.Flush()
				fmt.Fprintf(g.stderr, "error: pathspec '%s' did not match any file(s) known to git\nDid you forget to 'git add'?\n", a.args[i])
				return 1
			}
		}
	}
	return 0
}

// quotePathSP quotes as quotePath does, and a path with a space too (the
// short status format).
func quotePathSP(p string) string {
	if q := quotePath(p); q != p || !strings.Contains(p, " ") {
		return q
	}
	return `"` + p + `"`
}

// memTree is a directory of the index with its tree hash computed in
// memory (nothing is stored).
type memTree struct {
	files map[string]treeFile
	dirs  map[string]*memTree
	hash  plumbing.Hash
}

func buildMemTree(files map[string]treeFile) *memTree {
	newDir := func() *memTree { return &memTree{files: map[string]treeFile{}, dirs: map[string]*memTree{}} }
	root := newDir()
	for p, f := range files {
		d := root
		for {
			i := strings.IndexByte(p, '/')
			if i < 0 {
				break
			}
			sub := d.dirs[p[:i]]
			if sub == nil {
				sub = newDir()
				d.dirs[p[:i]] = sub
			}
			d, p = sub, p[i+1:]
		}
		d.files[p] = f
	}
	root.computeHash()
	return root
}

func (t *memTree) computeHash() {
	type ent struct {
		key  string
		name string
		mode filemode.FileMode
		hash plumbing.Hash
	}
	ents := make([]ent, 0, len(t.files)+len(t.dirs))
	for n, f := range t.files {
		ents = append(ents, ent{n, n, f.mode, f.hash})
	}
	for n, d := range t.dirs {
		d.computeHash()
		ents = append(ents, ent{n + "/", n, filemode.Dir, d.hash})
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].key < ents[j].key })
	var buf []byte
	for _, e := range ents {
		buf = strconv.AppendUint(buf, uint64(e.mode), 8)
		buf = append(buf, ' ')
		buf = append(buf, e.name...)
		buf = append(buf, 0)
		buf = append(buf, e.hash[:]...)
	}
	t.hash = plumbing.ComputeHash(plumbing.TreeObject, buf)
}

// stagedChanges compares HEAD's tree with the index, reading only the
// trees whose hash differs from the index's (as git's cache tree spares
// it reading unchanged trees).
func (g *gitCmd) stagedChanges(head *object.Commit, ixf map[string]treeFile) ([]change, error) {
	mt := buildMemTree(ixf)
	var out []change
	if head == nil {
		return compareFiles(map[string]treeFile{}, ixf), nil
	}
	var walk func(prefix string, th plumbing.Hash, d *memTree) error
	walk = func(prefix string, th plumbing.Hash, d *memTree) error {
		if d != nil && d.hash == th {
			return nil
		}
		if tooDeep(prefix) {
			return errTooDeep
		}
		var tf map[string]treeFile
		var tdirs map[string]plumbing.Hash
		if !th.IsZero() {
			t, err := g.repo.TreeObject(th)
			if err != nil {
				return err
			}
			tf, tdirs = map[string]treeFile{}, map[string]plumbing.Hash{}
			for _, e := range t.Entries {
				if e.Mode == filemode.Dir {
					tdirs[e.Name] = e.Hash
				} else {
					tf[e.Name] = treeFile{e.Hash, e.Mode}
				}
			}
		}
		var dfiles map[string]treeFile
		var ddirs map[string]*memTree
		if d != nil {
			dfiles, ddirs = d.files, d.dirs
		}
		for n, f := range tf {
			if df, ok := dfiles[n]; !ok {
				out = append(out, change{from: prefix + n, a: f})
			} else if df != f {
				out = append(out, change{from: prefix + n, to: prefix + n, a: f, b: df})
			}
		}
		for n, df := range dfiles {
			if _, ok := tf[n]; !ok {
				out = append(out, change{to: prefix + n, b: df})
			}
		}
		for n, h := range tdirs {
			if err := walk(prefix+n+"/", h, ddirs[n]); err != nil {
				return err
			}
		}
		for n, sub := range ddirs {
			if _, ok := tdirs[n]; !ok {
				if err := walk(prefix+n+"/", plumbing.ZeroHash, sub); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk("", head.TreeHash, mt); err != nil {
		return nil, err
	}
	sortChanges(out)
	return out, nil
}
