package gitcmd

// git stash: push [-m MSG] [-u] [-q], list, show [-p] [--stat], apply,
// pop, drop and clear. The stash commits are the ones git makes (the work
// tree commit W with parents HEAD, the index commit I and, with -u, the
// untracked files' commit U), and refs/stash with its reflog is the list,
// so the real git reads and pops what the fast path stashed and the other
// way round. Applying is done here when it needs no content merge: each
// path the stash changed is unchanged since, or already as stashed;
// anything else is left to the real git (a usage error, status 129).

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/object"
)

func init() {
	gitSubs["stash"] = &gitSub{run: gitStash, flags: flags("--message=|-m", "--include-untracked|-u", "--quiet|-q",
		"--patch|-p", "--stat")}
	gitChecks["stash"] = func(a *gitArgs) string {
		sub := "push"
		if len(a.args) > 0 {
			sub = a.args[0]
		}
		if a.dash {
			return "git stash with paths is not supported"
		}
		n := len(a.args)
		switch sub {
		case "push", "save":
			if sub == "save" || n > 1 || a.has("--patch") || a.has("--stat") {
				return "only git stash push [-m MSG] [-u] [-q] is supported"
			}
		case "list", "clear":
			if n > 1 || len(a.order) > 0 {
				return "git stash " + sub + " with options is not supported"
			}
		case "show":
			if n > 2 || a.has("--message") || a.has("--include-untracked") || a.has("--quiet") {
				return "only git stash show [-p] [--stat] [STASH] is supported"
			}
		case "apply", "pop", "drop":
			if n > 2 || a.has("--message") || a.has("--include-untracked") || a.has("--patch") || a.has("--stat") {
				return "only git stash " + sub + " [-q] [STASH] is supported"
			}
		default:
			return "git stash " + sub + " is not supported"
		}
		return ""
	}
}

func gitStash(g *gitCmd) int {
	sub := "push"
	var rest []string
	if len(g.a.args) > 0 {
		sub, rest = g.a.args[0], g.a.args[1:]
	}
	switch sub {
	case "list":
		return gitStashList(g)
	case "clear":
		g.wfs.Remove(g.file(".git/logs/refs/stash"))
		if err := g.repo.Storer.RemoveReference(plumbing.ReferenceName("refs/stash")); err != nil {
			return g.fatal("%v", err)
		}
		return 0
	case "push":
		return g.stashPush()
	}
	n, name, code := g.stashEntry(rest)
	if code >= 0 {
		return code
	}
	entries := g.stashEntries()
	w := entries[n].new
	switch sub {
	case "show":
		return g.stashShow(w)
	case "drop":
		return g.stashDrop(n, name, w)
	}
	if code := g.stashApply(w); code != 0 {
		return code
	}
	if sub == "pop" {
		return g.stashDrop(n, name, w)
	}
	return 0
}

func gitStashList(g *gitCmd) int {
	es := g.stashEntries()
	for i := len(es) - 1; i >= 0; i-- {
		fmt.Fprintf(g.out, "stash@{%d}: %s\n", len(es)-1-i, es[i].msg)
	}
	return 0
}

// reflogEntry is one line of a reflog.
type reflogEntry struct {
	old, new plumbing.Hash
	line     string // the whole line, without its newline
	msg      string
}

// stashEntries reads the stash's reflog, oldest first.
func (g *gitCmd) stashEntries() []reflogEntry {
	data, err := g.wfs.ReadFile(g.file(".git/logs/refs/stash"))
	if err != nil {
		return nil
	}
	var out []reflogEntry
	for _, l := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		head, msg, ok := strings.Cut(l, "\t")
		f := strings.Fields(head)
		if !ok || len(f) < 2 || !plumbing.IsHash(f[0]) || !plumbing.IsHash(f[1]) {
			continue
		}
		out = append(out, reflogEntry{old: plumbing.NewHash(f[0]), new: plumbing.NewHash(f[1]), line: l, msg: msg})
	}
	return out
}

// stashEntry finds the entry an argument names (stash@{N}, N, none: the
// latest), as an index into stashEntries, and the name git prints for it;
// code is -1, or the status to return.
func (g *gitCmd) stashEntry(args []string) (int, string, int) {
	es := g.stashEntries()
	if len(es) == 0 {
		g.out.Flush()
		fmt.Fprintln(g.stderr, "No stash entries found.")
		return 0, "", 1
	}
	k, name := 0, "refs/stash@{0}"
	if len(args) == 1 {
		v := args[0]
		switch {
		case isDigits(v):
			k, _ = strconv.Atoi(v)
			name = "refs/stash@{" + v + "}"
		case strings.HasPrefix(v, "stash@{") && strings.HasSuffix(v, "}") && isDigits(v[7:len(v)-1]):
			k, _ = strconv.Atoi(v[7 : len(v)-1])
			name = v
		default:
			g.out.Flush()
			fmt.Fprintf(g.stderr, "error: %s is not a valid reference\n", v)
			return 0, "", 1
		}
		if k >= len(es) {
			g.out.Flush()
			fmt.Fprintf(g.stderr, "fatal: log for 'stash' only has %d entries\n", len(es))
			return 0, "", 128
		}
	}
	return len(es) - 1 - k, name, -1
}

// stashMaxFile: larger files are not stashed here (they would be read
// whole); the real git stashes them.
const stashMaxFile = 64 << 20

func (g *gitCmd) stashPush() int {
	a := g.a
	head, branch, err := g.head()
	if err != nil {
		return g.fatal("%v", err)
	}
	if head == nil {
		g.out.Flush()
		fmt.Fprintln(g.stderr, "You do not have the initial commit yet")
		return 1
	}
	idx, err := g.readIndex()
	if err != nil {
		return g.fatal("%v", err)
	}
	hf, err := treeFilesOf(head)
	if err != nil {
		return g.fatal("%v", err)
	}
	ixf := indexFiles(idx)
	w, err := g.scanWorktree(idx, nil)
	if err != nil {
		return g.fatal("%v", err)
	}
	var untracked []string
	if a.has("--include-untracked") {
		// git lists them twice (to see whether there are changes, then
		// to save them), and warns of what it cannot list each time.
		for range 2 {
			for _, di := range g.dirs {
				di.warned = false
			}
			if untracked, err = g.untracked(idx, nil, true); err != nil {
				return g.fatal("%v", err)
			}
		}
	}
	// git run as the agent cannot save a file it may not stat: the
	// untracked ones first, then the tracked.
	cannot := func(p, what string) int {
		g.out.Flush()
		fmt.Fprintf(g.stderr, "error: lstat(\"%s\"): %s\nfatal: Unable to process path %s\nCannot save the %s\n",
			p, g.host.ErrText(syscall.EACCES), p, what)
		return 1
	}
	for _, u := range untracked {
		if _, err := g.lstatWork(u); isDenied(err) {
			return cannot(u, "untracked files")
		}
	}
	if len(w.denied) > 0 {
		return cannot(w.denied[0], "current worktree state")
	}
	wf := map[string]treeFile{}
	for p, f := range ixf {
		wf[p] = f
	}
	var touched []string
	for p, f := range w.files {
		if f.hash.IsZero() {
			delete(wf, p)
		} else {
			h := w.hash(p)
			if h == ixf[p].hash && f.mode == ixf[p].mode {
				continue
			}
			wf[p] = treeFile{h, f.mode}
		}
		touched = append(touched, p)
	}
	staged := compareFiles(hf, ixf)
	if len(staged) == 0 && len(touched) == 0 && len(untracked) == 0 {
		if !a.has("--quiet") {
			fmt.Fprintln(g.out, "No local changes to save")
		}
		return 0
	}
	// the blobs of the work tree's files
	for _, p := range append(append([]string(nil), touched...), untracked...) {
		if _, ok := wf[p]; !ok && !contains(untracked, p) {
			continue
		}
		at, err := g.wfs.Lstat(g.file(p))
		if err != nil {
			return g.fatal("%v", err)
		}
		if at.Size > stashMaxFile {
			return g.usage(fmt.Sprintf("%s is larger than %d MiB", p, stashMaxFile>>20))
		}
		data, err := g.readWork(p, at)
		if err != nil {
			return g.fatal("%v", err)
		}
		h, err := g.writeObject(plumbing.BlobObject, data)
		if err != nil {
			return g.fatal("%v", err)
		}
		if contains(untracked, p) {
			mode, _ := modeOf(at)
			wf["\x00"+p] = treeFile{h, mode} // set aside for U below
		}
	}
	author, err := g.identity("AUTHOR")
	if err == nil {
		var cerr error
		var committer object.Signature
		if committer, cerr = g.identity("COMMITTER"); cerr == nil {
			return g.stashCommits(head, branch, ixf, wf, untracked, touched, idx, hf, author, committer)
		}
		err = cerr
	}
	g.out.Flush()
	fmt.Fprintln(g.stderr, err)
	return 128
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// stashCommits writes I, U and W, points refs/stash at W and resets the
// work tree and the index to HEAD.
func (g *gitCmd) stashCommits(head *object.Commit, branch string, ixf, wf map[string]treeFile, untracked, touched []string,
	idx *index.Index, hf map[string]treeFile, author, committer object.Signature) int {
	on := branch
	if on == "" {
		on = "(no branch)"
	}
	subj := fmt.Sprintf("%s: %s %s", on, g.abbrev(head.Hash), subjectOf(head))
	commit := func(tree plumbing.Hash, msg string, parents ...plumbing.Hash) (plumbing.Hash, error) {
		c := &object.Commit{Author: author, Committer: committer, Message: msg, TreeHash: tree, ParentHashes: parents}
		obj := g.st.NewEncodedObject()
		if err := c.Encode(obj); err != nil {
			return plumbing.ZeroHash, err
		}
		return g.st.SetEncodedObject(obj)
	}
	itree, err := g.writeTree(ixf)
	if err != nil {
		return g.fatal("%v", err)
	}
	ic, err := commit(itree, "index on "+subj+"\n", head.Hash)
	if err != nil {
		return g.fatal("%v", err)
	}
	parents := []plumbing.Hash{head.Hash, ic}
	if len(untracked) > 0 {
		uf := map[string]treeFile{}
		for _, p := range untracked {
			uf[p] = wf["\x00"+p]
		}
		utree, err := g.writeTree(uf)
		if err != nil {
			return g.fatal("%v", err)
		}
		uc, err := commit(utree, "untracked files on "+subj+"\n")
		if err != nil {
			return g.fatal("%v", err)
		}
		parents = append(parents, uc)
	}
	for p := range wf {
		if strings.HasPrefix(p, "\x00") {
			delete(wf, p)
		}
	}
	wtree, err := g.writeTree(wf)
	if err != nil {
		return g.fatal("%v", err)
	}
	msg := "WIP on " + subj
	if g.a.has("--message") {
		msg = "On " + on + ": " + g.a.val("--message")
	}
	wc, err := commit(wtree, msg, parents...)
	if err != nil {
		return g.fatal("%v", err)
	}
	old := plumbing.ZeroHash
	if r, err := g.repo.Storer.Reference("refs/stash"); err == nil {
		old = r.Hash()
	}
	if err := g.repo.Storer.SetReference(plumbing.NewHashReference("refs/stash", wc)); err != nil {
		return g.fatal("%v", err)
	}
	g.reflog("refs/stash", old, wc, strings.SplitN(msg, "\n", 2)[0], committer)
	// back to HEAD: the staged and changed paths, and the untracked files
	var paths []string
	for _, c := range compareFiles(hf, ixf) {
		paths = append(paths, c.path())
	}
	paths = dedup(append(paths, touched...))
	sort.Strings(paths)
	if len(paths) > 0 {
		if err := g.checkoutFiles(idx, filterFiles(hf, paths), paths, true, false); err != nil {
			return g.fatal("%v", err)
		}
		if err := g.writeIndex(idx); err != nil {
			return g.fatal("%v", err)
		}
	}
	for _, p := range untracked {
		g.wfs.Remove(g.file(p))
		g.removeEmptyDirs(parentDir(p))
	}
	if !g.a.has("--quiet") {
		fmt.Fprintf(g.out, "Saved working directory and index state %s\n", msg)
	}
	return 0
}

func (g *gitCmd) stashParts(w plumbing.Hash) (wc, base, uc *object.Commit, err error) {
	if wc, err = g.commitObject(w); err != nil {
		return
	}
	if len(wc.ParentHashes) < 2 {
		err = fmt.Errorf("'%s' is not a stash-like commit", w)
		return
	}
	if base, err = g.commitObject(wc.ParentHashes[0]); err != nil {
		return
	}
	if len(wc.ParentHashes) > 2 {
		uc, err = g.commitObject(wc.ParentHashes[2])
	}
	return
}

func (g *gitCmd) stashShow(w plumbing.Hash) int {
	wc, base, _, err := g.stashParts(w)
	if err != nil {
		return g.fatal("%v", err)
	}
	var cs []change
	if err := g.diffTrees(base.TreeHash, wc.TreeHash, "", &cs); err != nil {
		return g.fatal("%v", err)
	}
	sortChanges(cs)
	cs = g.detectRenames(cs)
	formats := diffFormats(g.a, "")
	if len(formats) == 0 {
		formats = map[string]bool{"stat": true}
	}
	if err := g.newDiffOut().write(cs, formats); err != nil {
		return g.fatal("%v", err)
	}
	return 0
}

func (g *gitCmd) stashDrop(k int, name string, w plumbing.Hash) int {
	es := g.stashEntries()
	var b strings.Builder
	for i, e := range es {
		if i == k {
			continue
		}
		if i == k+1 && k > 0 {
			// the next entry now follows the one before the dropped one
			e.line = es[k-1].new.String() + e.line[40:]
		} else if i == k+1 {
			e.line = plumbing.ZeroHash.String() + e.line[40:]
		}
		b.WriteString(e.line + "\n")
	}
	logPath := g.file(".git/logs/refs/stash")
	switch {
	case len(es) == 1:
		g.wfs.Remove(logPath)
		if err := g.repo.Storer.RemoveReference("refs/stash"); err != nil {
			return g.fatal("%v", err)
		}
	default:
		if err := g.wfs.WriteFile(logPath, []byte(b.String()), 0o644); err != nil {
			return g.fatal("%v", err)
		}
		top := es[len(es)-1].new
		if k == len(es)-1 {
			top = es[len(es)-2].new
		}
		if err := g.repo.Storer.SetReference(plumbing.NewHashReference("refs/stash", top)); err != nil {
			return g.fatal("%v", err)
		}
	}
	if !g.a.has("--quiet") {
		fmt.Fprintf(g.out, "Dropped %s (%s)\n", name, w)
	}
	return 0
}

// stashApply puts a stash's changes into the work tree, when no path
// needs a content merge: the index must hold HEAD, and each path the
// stash changed must be as the stash found it, or as it left it.
func (g *gitCmd) stashApply(w plumbing.Hash) int {
	wc, base, uc, err := g.stashParts(w)
	if err != nil {
		return g.fatal("%v", err)
	}
	head, _, err := g.head()
	if err != nil || head == nil {
		return g.fatal("%v", err)
	}
	idx, err := g.readIndex()
	if err != nil {
		return g.fatal("%v", err)
	}
	hf, err := treeFilesOf(head)
	if err != nil {
		return g.fatal("%v", err)
	}
	ixf := indexFiles(idx)
	if len(compareFiles(hf, ixf)) > 0 {
		return g.usage("applying a stash onto staged changes is not supported")
	}
	bf, err := treeFilesOf(base)
	if err != nil {
		return g.fatal("%v", err)
	}
	sf, err := treeFilesOf(wc)
	if err != nil {
		return g.fatal("%v", err)
	}
	wt, err := g.scanWorktree(idx, nil)
	if err != nil {
		return g.fatal("%v", err)
	}
	var uf map[string]treeFile
	if uc != nil {
		if uf, err = treeFilesOf(uc); err != nil {
			return g.fatal("%v", err)
		}
	}
	writes := map[string]treeFile{}
	var dirty []string
	for _, c := range compareFiles(bf, sf) {
		for _, p := range []string{c.from, c.to} {
			if p == "" {
				continue
			}
			cur, want := hf[p], sf[p]
			if cur == want {
				continue
			}
			if cur != bf[p] {
				return g.usage("the stash changes " + p + ", which changed since; merging them is not supported")
			}
			if _, ok := wt.files[p]; ok {
				dirty = append(dirty, p)
				continue
			}
			if _, ok := hf[p]; !ok {
				if _, err := g.wfs.Lstat(g.file(p)); err == nil {
					return g.usage(p + " is in the way of the stash; merging is not supported")
				}
			}
			writes[p] = want
		}
	}
	if len(dirty) > 0 {
		sort.Strings(dirty)
		g.out.Flush()
		fmt.Fprint(g.stderr, "error: Your local changes to the following files would be overwritten by merge:\n")
		for _, p := range dedup(dirty) {
			fmt.Fprintf(g.stderr, "\t%s\n", p)
		}
		fmt.Fprint(g.stderr, "Please commit your changes or stash them before you merge.\nAborting\n")
		// git prints the status even so
		if code := g.stashStatus(); code != 0 {
			return code
		}
		return 1
	}
	for p := range uf {
		if _, err := g.wfs.Lstat(g.file(p)); err == nil {
			return g.usage(p + " already exists; restoring the stash's untracked files over it is not supported")
		}
	}
	if base.TreeHash == wc.TreeHash {
		fmt.Fprintln(g.out, "Already up to date.")
	}
	paths := make([]string, 0, len(writes))
	for p := range writes {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		f := writes[p]
		if f.hash.IsZero() {
			if err := g.wfs.Remove(g.file(p)); err != nil && !isNotExist(err) {
				return g.fatal("%v", err)
			}
			g.removeEmptyDirs(parentDir(p))
			continue
		}
		if err := g.writeWorkFile(p, f); err != nil {
			return g.fatal("%v", err)
		}
		if _, ok := hf[p]; !ok {
			// a new file is staged again, as git does
			e := &index.Entry{Name: p, Hash: f.hash, Mode: f.mode}
			if at, err := g.wfs.Lstat(g.file(p)); err == nil {
				statEntry(e, at)
			}
			idx.Entries = append(idx.Entries, e)
		}
	}
	var ups []string
	for p := range uf {
		ups = append(ups, p)
	}
	sort.Strings(ups)
	for _, p := range ups {
		if err := g.writeWorkFile(p, uf[p]); err != nil {
			return g.fatal("%v", err)
		}
	}
	if err := g.writeIndex(idx); err != nil {
		return g.fatal("%v", err)
	}
	g.dirs = nil // the work tree changed: list it again
	return g.stashStatus()
}

// stashStatus prints the status after an apply, as git does without -q.
func (g *gitCmd) stashStatus() int {
	if g.a.has("--quiet") {
		return 0
	}
	st, err := g.collectStatus(nil, "normal", true)
	if err != nil {
		return g.fatal("%v", err)
	}
	g.statusLong(st)
	return 0
}
