package gitcmd

import (
	"fmt"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/object"
)

func init() {
	gitSubs["add"] = &gitSub{run: gitAdd, flags: flags("--all|-A", "--update|-u", "--force|-f", "--verbose|-v", "--dry-run|-n", "--no-all", "--ignore-removal")}
	gitSubs["rm"] = &gitSub{run: gitRm, flags: flags("--cached", "-r", "--force|-f", "--quiet|-q", "--ignore-unmatch", "--dry-run|-n")}
	gitSubs["mv"] = &gitSub{run: gitMv, flags: flags("--force|-f", "-k", "--verbose|-v", "--dry-run|-n")}
	gitSubs["commit"] = &gitSub{run: gitCommit, flags: flags("--message=|-m", "--all|-a", "--allow-empty", "--quiet|-q", "--amend", "--no-edit", "--no-verify|-n", "--file=|-F", "--allow-empty-message", "--signoff|-s")}
	gitChecks["commit"] = func(a *gitArgs) string {
		if !a.has("--message") && !a.has("--file") && !(a.has("--amend") && a.has("--no-edit")) {
			return "a commit message from an editor is not supported (use -m)"
		}
		if len(a.args) > 0 {
			return "committing only some paths is not supported"
		}
		if a.has("--signoff") {
			return "--signoff is not supported"
		}
		return ""
	}
	gitSubs["reset"] = &gitSub{run: gitReset, flags: flags("--soft", "--mixed", "--hard", "--quiet|-q")}
	gitSubs["restore"] = &gitSub{run: gitRestore, flags: flags("--staged|-S", "--worktree|-W", "--source=|-s", "--quiet|-q")}
	gitSubs["checkout"] = &gitSub{run: gitCheckout, flags: flags("-b=", "-B=", "--quiet|-q", "--force|-f")}
	gitSubs["switch"] = &gitSub{run: gitSwitch, flags: flags("--create=|-c", "--force-create=|-C", "--quiet|-q", "--force|-f|--discard-changes", "--detach|-d")}
	gitSubs["branch"] = &gitSub{run: gitBranch, flags: flags("--list|-l", "--all|-a", "--remotes|-r", "--delete|-d", "-D", "--move|-m", "--show-current", "--force|-f", "--verbose|-v", "--quiet|-q")}
	gitSubs["init"] = &gitSub{run: gitInit, flags: flags("--quiet|-q", "--initial-branch=|-b"), noRepo: true}
	// Command lines that git rejects with its usage text (status 129),
	// which the sandbox prints.
	gitChecks["mv"] = func(a *gitArgs) string {
		if len(a.args) < 2 {
			return "git mv needs a source and a destination (git prints its usage)"
		}
		return ""
	}
	gitChecks["init"] = func(a *gitArgs) string {
		if len(a.args) > 1 {
			return "too many arguments (git prints its usage)"
		}
		return ""
	}
	gitChecks["branch"] = func(a *gitArgs) string {
		for _, f := range []string{"--list", "--delete", "-D", "--move", "--show-current"} {
			if a.has(f) {
				return ""
			}
		}
		if len(a.args) > 2 {
			return "too many arguments (git prints its usage)"
		}
		return ""
	}
}

// writeObject stores an object and returns its hash.
func (g *gitCmd) writeObject(t plumbing.ObjectType, data []byte) (plumbing.Hash, error) {
	obj := g.st.NewEncodedObject()
	obj.SetType(t)
	obj.SetSize(int64(len(data)))
	w, err := obj.Writer()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if _, err := w.Write(data); err != nil {
		return plumbing.ZeroHash, err
	}
	w.Close()
	if g.st.HasEncodedObject(obj.Hash()) == nil {
		return obj.Hash(), nil
	}
	return g.st.SetEncodedObject(obj)
}

// stage puts a work-tree file into the index (writing its blob).
func (g *gitCmd) stage(idx *index.Index, p string) error {
	a, err := g.wfs.Lstat(g.file(p))
	if err != nil {
		return err
	}
	mode, ok := modeOf(a)
	if !ok {
		return fmt.Errorf("%s: can only add regular files and symbolic links", p)
	}
	var e *index.Entry
	for _, x := range idx.Entries {
		if x.Name == p && x.Stage == 0 {
			e = x
			break
		}
	}
	if e != nil && e.Mode == mode && e.Size == uint32(a.Size) && e.ModifiedAt.Equal(time.Unix(0, a.Mtime)) && time.Unix(0, a.Mtime).Before(idx.ModTime) {
		return nil
	}
	data, err := g.readWork(p, a)
	if err != nil {
		return err
	}
	h, err := g.writeObject(plumbing.BlobObject, data)
	if err != nil {
		return err
	}
	if e == nil {
		e = &index.Entry{Name: p}
		idx.Entries = append(idx.Entries, e)
	}
	e.Hash, e.Mode = h, mode
	statEntry(e, a)
	return nil
}

func unstage(idx *index.Index, p string) {
	out := idx.Entries[:0]
	for _, e := range idx.Entries {
		if e.Name != p {
			out = append(out, e)
		}
	}
	idx.Entries = out
}

// writeTree stores the index's tree and returns its hash.
func (g *gitCmd) writeTree(files map[string]treeFile) (plumbing.Hash, error) {
	type dir struct {
		files map[string]treeFile
		dirs  map[string]*dir
	}
	newDir := func() *dir { return &dir{files: map[string]treeFile{}, dirs: map[string]*dir{}} }
	root := newDir()
	for p, f := range files {
		d := root
		parts := strings.Split(p, "/")
		for _, part := range parts[:len(parts)-1] {
			sub := d.dirs[part]
			if sub == nil {
				sub = newDir()
				d.dirs[part] = sub
			}
			d = sub
		}
		d.files[parts[len(parts)-1]] = f
	}
	var write func(d *dir) (plumbing.Hash, error)
	write = func(d *dir) (plumbing.Hash, error) {
		var ents []object.TreeEntry
		for n, f := range d.files {
			ents = append(ents, object.TreeEntry{Name: n, Mode: f.mode, Hash: f.hash})
		}
		for n, sub := range d.dirs {
			h, err := write(sub)
			if err != nil {
				return plumbing.ZeroHash, err
			}
			ents = append(ents, object.TreeEntry{Name: n, Mode: filemode.Dir, Hash: h})
		}
		key := func(e object.TreeEntry) string {
			if e.Mode == filemode.Dir {
				return e.Name + "/"
			}
			return e.Name
		}
		sort.Slice(ents, func(i, j int) bool { return key(ents[i]) < key(ents[j]) })
		t := &object.Tree{Entries: ents}
		obj := g.st.NewEncodedObject()
		if err := t.Encode(obj); err != nil {
			return plumbing.ZeroHash, err
		}
		if g.st.HasEncodedObject(obj.Hash()) == nil {
			return obj.Hash(), nil
		}
		return g.st.SetEncodedObject(obj)
	}
	return write(root)
}

func gitAdd(g *gitCmd) int {
	a := g.a
	if len(a.args) == 0 && !a.has("--all") && !a.has("--update") {
		g.out.Flush()
		fmt.Fprint(g.stderr, "Nothing specified, nothing added.\nhint: Maybe you wanted to say 'git add .'?\nhint: Turn this message off by running\nhint: \"git config advice.addEmptyPathspec false\"\n")
		return 0
	}
	specs, err := g.pathspecs(a.args)
	if err != nil {
		return g.fatal("%v", err)
	}
	idx, err := g.readIndex()
	if err != nil {
		return g.fatal("%v", err)
	}
	w, err := g.scanWorktree(idx, specs)
	if err != nil {
		return g.fatal("%v", err)
	}
	var untracked []string
	if !a.has("--update") {
		if untracked, err = g.untracked(idx, specs, true); err != nil {
			return g.fatal("%v", err)
		}
	}
	// every pathspec must name something
	ig := newIgnorer(g)
	var ignored []string
	for i, s := range specs {
		hit := false
		for _, e := range idx.Entries {
			if matchSpec([]string{s}, e.Name) {
				hit = true
				break
			}
		}
		for _, u := range untracked {
			if !hit && matchSpec([]string{s}, u) {
				hit = true
			}
		}
		if !hit {
			if at, err := g.wfs.Lstat(g.file(s)); err == nil && s != "" {
				if a.has("--force") && !at.IsDir() {
					untracked = append(untracked, s)
					continue
				}
				if ig.ignored(s, at.IsDir()) || at.IsDir() {
					if at.IsDir() && !ig.ignored(s, true) {
						continue // an empty directory: nothing to add
					}
					ignored = append(ignored, a.args[i])
					continue
				}
			}
			return g.fatal("pathspec '%s' did not match any files", a.args[i])
		}
	}
	// An untracked file git lists but cannot stat (its directory is
	// readable, not searchable, for the agent): git dies there, having
	// staged nothing.
	unstattable := func(u string) int {
		if _, err := g.lstatWork(u); isDenied(err) {
			return g.fatal("unable to stat '%s': %s", u, g.host.ErrText(syscall.EACCES))
		}
		return 0
	}
	if a.has("--dry-run") {
		changed := make([]string, 0, len(w.files))
		for p := range w.files {
			changed = append(changed, p)
		}
		sort.Strings(changed)
		for _, p := range changed {
			if w.files[p].hash.IsZero() {
				fmt.Fprintf(g.out, "remove '%s'\n", p)
			} else {
				fmt.Fprintf(g.out, "add '%s'\n", p)
			}
		}
		for _, u := range untracked {
			if code := unstattable(u); code != 0 {
				return code
			}
			fmt.Fprintf(g.out, "add '%s'\n", u)
		}
		return 0
	}
	for _, u := range untracked {
		if code := unstattable(u); code != 0 {
			return code
		}
	}
	var paths []string
	for p := range w.files {
		paths = append(paths, p)
	}
	paths = append(paths, untracked...)
	sort.Strings(paths)
	for _, p := range paths {
		f, tracked := w.files[p]
		if tracked && f.hash.IsZero() {
			unstage(idx, p)
			if a.has("--verbose") {
				fmt.Fprintf(g.out, "remove '%s'\n", p)
			}
			continue
		}
		if err := g.stage(idx, p); err != nil {
			return g.fatal("adding files failed: %v", err)
		}
		if a.has("--verbose") {
			fmt.Fprintf(g.out, "add '%s'\n", p)
		}
	}
	if err := g.writeIndex(idx); err != nil {
		return g.fatal("%v", err)
	}
	if len(ignored) > 0 {
		g.out.Flush()
		fmt.Fprintf(g.stderr, "The following paths are ignored by one of your .gitignore files:\n%s\nhint: Use -f if you really want to add them.\nhint: Turn this message off by running\nhint: \"git config advice.addIgnoredFile false\"\n", strings.Join(ignored, "\n"))
		return 1
	}
	return 0
}

func gitRm(g *gitCmd) int {
	a := g.a
	if len(a.args) == 0 {
		return g.fatal("No pathspec was given. Which files should I remove?")
	}
	specs, err := g.pathspecs(a.args)
	if err != nil {
		return g.fatal("%v", err)
	}
	idx, err := g.readIndex()
	if err != nil {
		return g.fatal("%v", err)
	}
	head, _, err := g.head()
	if err != nil {
		return g.fatal("%v", err)
	}
	hf, err := treeFilesOf(head)
	if err != nil {
		return g.fatal("%v", err)
	}
	var hits []string
	for i, s := range specs {
		n := 0
		for _, e := range idx.Entries {
			if matchSpec([]string{s}, e.Name) {
				if e.Name != s && !a.has("-r") && !strings.ContainsAny(s, "*?[") {
					return g.fatal("not removing '%s' recursively without -r", a.args[i])
				}
				hits = append(hits, e.Name)
				n++
			}
		}
		if n == 0 && !a.has("--ignore-unmatch") {
			return g.fatal("pathspec '%s' did not match any files", a.args[i])
		}
	}
	sort.Strings(hits)
	hits = dedup(hits)
	if !a.has("--force") {
		w, err := g.scanWorktree(idx, hits)
		if err != nil {
			return g.fatal("%v", err)
		}
		ixf := indexFiles(idx)
		var staged, local []string
		for _, p := range hits {
			hfile, inHead := hf[p]
			stagedChange := !inHead || hfile != ixf[p]
			wf, changed := w.files[p]
			localChange := changed && !wf.hash.IsZero()
			switch {
			case stagedChange && (localChange || !a.has("--cached")):
				staged = append(staged, p)
			case localChange && !a.has("--cached"):
				local = append(local, p)
			}
		}
		if len(staged) > 0 {
			g.out.Flush()
			fmt.Fprintf(g.stderr, "error: the following %s changes staged in the index:\n", plural(len(staged), "file has", "files have"))
			for _, p := range staged {
				fmt.Fprintf(g.stderr, "    %s\n", p)
			}
			fmt.Fprint(g.stderr, "(use --cached to keep the file, or -f to force removal)\n")
			return 1
		}
		if len(local) > 0 {
			g.out.Flush()
			fmt.Fprintf(g.stderr, "error: the following %s local modifications:\n", plural(len(local), "file has", "files have"))
			for _, p := range local {
				fmt.Fprintf(g.stderr, "    %s\n", p)
			}
			fmt.Fprint(g.stderr, "(use --cached to keep the file, or -f to force removal)\n")
			return 1
		}
	}
	for _, p := range hits {
		if !a.has("--quiet") {
			fmt.Fprintf(g.out, "rm '%s'\n", p)
		}
		if a.has("--dry-run") {
			continue
		}
		unstage(idx, p)
		if !a.has("--cached") {
			if err := g.wfs.Remove(g.file(p)); err != nil && !isNotExist(err) {
				return g.fatal("git rm: '%s': %s", p, g.host.ErrText(err))
			}
			g.removeEmptyDirs(parentDir(p))
		}
	}
	if a.has("--dry-run") {
		return 0
	}
	if err := g.writeIndex(idx); err != nil {
		return g.fatal("%v", err)
	}
	return 0
}

func dedup(s []string) []string {
	out := s[:0]
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// removeEmptyDirs removes dir and its parents while they are empty.
func (g *gitCmd) removeEmptyDirs(dir string) {
	for dir != "" {
		if g.wfs.Remove(g.file(dir)) != nil {
			return
		}
		dir = parentDir(dir)
	}
}

func gitMv(g *gitCmd) int {
	a := g.a
	if len(a.args) < 2 {
		g.out.Flush()
		fmt.Fprint(g.stderr, "usage: git mv [<options>] <source>... <destination>\n")
		return 129
	}
	ps, err := g.pathspecs(a.args)
	if err != nil {
		return g.fatal("%v", err)
	}
	srcs, dst := ps[:len(ps)-1], ps[len(ps)-1]
	dstAttr, derr := g.wfs.Lstat(g.file(dst))
	intoDir := derr == nil && dstAttr.IsDir()
	if len(srcs) > 1 && !intoDir {
		return g.fatal("destination '%s' is not a directory", a.args[len(a.args)-1])
	}
	idx, err := g.readIndex()
	if err != nil {
		return g.fatal("%v", err)
	}
	type move struct{ from, to string }
	var moves []move
	for i, s := range srcs {
		to := dst
		if intoDir {
			to = path.Join(dst, path.Base(s))
		}
		sa, err := g.wfs.Lstat(g.file(s))
		if err != nil {
			return g.fatal("bad source, source=%s, destination=%s", a.args[i], g.rel(to))
		}
		if _, err := g.wfs.Lstat(g.file(to)); err == nil && !a.has("--force") {
			return g.fatal("destination exists, source=%s, destination=%s", a.args[i], g.rel(to))
		}
		n := 0
		for _, e := range idx.Entries {
			if e.Name == s || sa.IsDir() && strings.HasPrefix(e.Name, s+"/") {
				n++
			}
		}
		if n == 0 {
			return g.fatal("not under version control, source=%s, destination=%s", a.args[i], g.rel(to))
		}
		moves = append(moves, move{s, to})
	}
	for _, m := range moves {
		if a.has("--verbose") || a.has("--dry-run") {
			fmt.Fprintf(g.out, "Renaming %s to %s\n", m.from, m.to)
		}
		if a.has("--dry-run") {
			continue
		}
		if err := g.wfs.MkdirAll(g.file(parentDir(m.to)), 0o755); err != nil {
			return g.fatal("%v", err)
		}
		if err := g.wfs.Rename(g.file(m.from), g.file(m.to)); err != nil {
			return g.fatal("renaming '%s' failed: %s", m.from, g.host.ErrText(err))
		}
		for _, e := range idx.Entries {
			if e.Name == m.from || strings.HasPrefix(e.Name, m.from+"/") {
				e.Name = m.to + strings.TrimPrefix(e.Name, m.from)
				if at, err := g.wfs.Lstat(g.file(e.Name)); err == nil {
					statEntry(e, at)
				}
			}
		}
	}
	if a.has("--dry-run") {
		return 0
	}
	if err := g.writeIndex(idx); err != nil {
		return g.fatal("%v", err)
	}
	return 0
}

// cleanMessage is git commit's default cleanup: trailing spaces and
// comment-free, no leading or trailing blank lines, one newline at the end.
func cleanMessage(m string) string {
	lines := strings.Split(m, "\n")
	var out []string
	blank := false
	for _, l := range lines {
		l = strings.TrimRight(l, " \t\r")
		if strings.HasPrefix(l, "#") {
			continue
		}
		if l == "" {
			blank = len(out) > 0
			continue
		}
		if blank {
			out = append(out, "")
			blank = false
		}
		out = append(out, l)
	}
	if len(out) == 0 {
		return ""
	}
	return strings.Join(out, "\n") + "\n"
}

func gitCommit(g *gitCmd) int {
	a := g.a
	for _, h := range []string{"pre-commit", "prepare-commit-msg", "commit-msg", "post-commit"} {
		if at, err := g.wfs.Stat(g.file(".git/hooks/" + h)); err == nil && at.Mode&0o111 != 0 {
			if !a.has("--no-verify") || h == "prepare-commit-msg" || h == "post-commit" {
				return g.usage("the repository has a " + h + " hook, which only the sandbox can run")
			}
		}
	}
	head, branch, err := g.head()
	if err != nil {
		return g.fatal("%v", err)
	}
	var msg string
	switch {
	case a.has("--file"):
		data, err := g.host.ReadFile(a.val("--file"))
		if err != nil {
			return g.fatal("could not read log file '%s': %s", a.val("--file"), g.host.ErrText(err))
		}
		msg = string(data)
	case a.has("--message"):
		msg = strings.Join(a.opts["--message"], "\n\n")
	case head != nil:
		msg = head.Message
	}
	msg = cleanMessage(msg)
	if msg == "" && !a.has("--allow-empty-message") {
		g.out.Flush()
		fmt.Fprint(g.stderr, "Aborting commit due to empty commit message.\n")
		return 1
	}
	idx, err := g.readIndex()
	if err != nil {
		return g.fatal("%v", err)
	}
	if a.has("--all") {
		w, err := g.scanWorktree(idx, nil)
		if err != nil {
			return g.fatal("%v", err)
		}
		for p, f := range w.files {
			if f.hash.IsZero() {
				unstage(idx, p)
			} else if err := g.stage(idx, p); err != nil {
				return g.fatal("%v", err)
			}
		}
	}
	parent := head
	var parents []plumbing.Hash
	if a.has("--amend") {
		if head == nil {
			return g.fatal("You have nothing to amend.")
		}
		raw, err := g.repo.CommitObject(head.Hash) // its real parents, shallow or not
		if err != nil {
			return g.fatal("%v", err)
		}
		parents = raw.ParentHashes
		parent = nil
		if len(head.ParentHashes) > 0 {
			if parent, err = g.commitObject(head.ParentHashes[0]); err != nil {
				return g.fatal("%v", err)
			}
		}
	} else if head != nil {
		parents = []plumbing.Hash{head.Hash}
	}
	pf, err := treeFilesOf(parent)
	if err != nil {
		return g.fatal("%v", err)
	}
	ixf := indexFiles(idx)
	cs := g.detectRenames(compareFiles(pf, ixf))
	if len(cs) == 0 && !a.has("--allow-empty") && !a.has("--amend") {
		// nothing to commit: git prints the status
		st, err := g.collectStatus(nil, "normal", true)
		if err != nil {
			return g.fatal("%v", err)
		}
		g.statusLong(st)
		return 1
	}
	author, err := g.identity("AUTHOR")
	if err != nil {
		g.out.Flush()
		fmt.Fprintln(g.stderr, err)
		return 128
	}
	committer, err := g.identity("COMMITTER")
	if err != nil {
		g.out.Flush()
		fmt.Fprintln(g.stderr, err)
		return 128
	}
	if a.has("--amend") {
		author = head.Author
	}
	tree, err := g.writeTree(ixf)
	if err != nil {
		return g.fatal("%v", err)
	}
	c := &object.Commit{Author: author, Committer: committer, Message: msg, TreeHash: tree, ParentHashes: parents}
	obj := g.st.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		return g.fatal("%v", err)
	}
	h, err := g.st.SetEncodedObject(obj)
	if err != nil {
		return g.fatal("%v", err)
	}
	if err := g.writeIndex(idx); err != nil {
		return g.fatal("%v", err)
	}
	subj, _ := subjectBody(msg)
	what := "commit"
	switch {
	case a.has("--amend"):
		what = "commit (amend)"
	case head == nil:
		what = "commit (initial)"
	}
	if err := g.moveHead(h, what+": "+subj, committer); err != nil {
		return g.fatal("%v", err)
	}
	if a.has("--quiet") {
		return 0
	}
	label := branch
	if branch == "" {
		label = "detached HEAD"
	}
	if len(parents) == 0 {
		label += " (root-commit)"
	}
	fmt.Fprintf(g.out, "[%s %s] %s\n", label, g.abbrev(h), subj)
	if author.Name != committer.Name || author.Email != committer.Email {
		fmt.Fprintf(g.out, " Author: %s <%s>\n", author.Name, author.Email)
	}
	if a.has("--amend") {
		fmt.Fprintf(g.out, " Date: %s\n", gitDate(author.When))
	}
	d := g.newDiffOut()
	var stats []fileStat
	for _, c := range cs {
		st, err := d.stat(c)
		if err != nil {
			return g.fatal("%v", err)
		}
		stats = append(stats, st)
	}
	writeStat(g.out, stats, false)
	writeSummary(g.out, cs)
	return 0
}

// writeSummary prints the --summary lines: created, deleted and renamed
// files and mode changes.
func writeSummary(o stringWriter, cs []change) {
	for _, c := range cs {
		switch c.kind() {
		case 'A':
			fmt.Fprintf(o, " create mode %s %s\n", modeStr(c.b.mode), quotePath(c.to))
		case 'D':
			fmt.Fprintf(o, " delete mode %s %s\n", modeStr(c.a.mode), quotePath(c.from))
		case 'R':
			fmt.Fprintf(o, " rename %s (%d%%)\n", statName(c.from, c.to, 'R'), c.score)
			if c.a.mode != c.b.mode {
				fmt.Fprintf(o, " mode change %s => %s %s\n", modeStr(c.a.mode), modeStr(c.b.mode), quotePath(c.to))
			}
		default:
			if c.a.mode != c.b.mode {
				fmt.Fprintf(o, " mode change %s => %s %s\n", modeStr(c.a.mode), modeStr(c.b.mode), quotePath(c.to))
			}
		}
	}
}

// moveHead points HEAD (its branch, or HEAD itself when detached) at h,
// with reflog entries as git writes them.
func (g *gitCmd) moveHead(h plumbing.Hash, reason string, who object.Signature) error {
	old := plumbing.ZeroHash
	if c, _, err := g.head(); err == nil && c != nil {
		old = c.Hash
	}
	name := g.headRefName()
	if name == "" {
		name = plumbing.HEAD
	}
	if err := g.repo.Storer.SetReference(plumbing.NewHashReference(name, h)); err != nil {
		return err
	}
	g.reflog(name, old, h, reason, who)
	if name != plumbing.HEAD {
		g.reflog(plumbing.HEAD, old, h, reason, who)
	}
	return nil
}

// reflog appends a line to a ref's log (best effort, as git). With no
// identity configured git still writes the entry, with the identity it
// makes up from the user and host names; so does this, so that
// "git checkout -" finds the branch it came from.
func (g *gitCmd) reflog(name plumbing.ReferenceName, old, new plumbing.Hash, reason string, who object.Signature) {
	if who.Name == "" || who.Email == "" {
		var err error
		if who, err = g.identity("COMMITTER"); err != nil {
			who = g.fallbackIdentity()
		}
	}
	p := g.file(".git/logs/" + name.String())
	line := fmt.Sprintf("%s %s %s <%s> %d %s\t%s\n", old, new, who.Name, who.Email, who.When.Unix(), zone(who.When), reason)
	if err := g.wfs.MkdirAll(path.Dir(p), 0o755); err != nil {
		return
	}
	f, err := g.wfs.Open(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	f.Write([]byte(line))
	f.Close()
}

// fallbackIdentity is the identity of a reflog entry when none is
// configured: git's own fallback, the user's name at "(none)".
func (g *gitCmd) fallbackIdentity() object.Signature {
	user := g.getenv("USER")
	if user == "" || strings.ContainsAny(user, "<>\n") {
		user = "unknown"
	}
	return object.Signature{Name: user, Email: user + "@localhost.(none)", When: g.now()}
}

// checkoutFiles makes the index and the work tree hold the files of
// target, for the paths where they differ from the current index (or all
// paths named by specs). Files the index had and target does not are
// removed.
func (g *gitCmd) checkoutFiles(idx *index.Index, target map[string]treeFile, specs []string, worktree bool, onlyIndex bool) error {
	cur := indexFiles(idx)
	var paths []string
	for p := range cur {
		if matchSpec(specs, p) {
			paths = append(paths, p)
		}
	}
	for p := range target {
		if _, ok := cur[p]; !ok && matchSpec(specs, p) {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	for _, p := range paths {
		t, inTarget := target[p]
		if !inTarget {
			unstage(idx, p)
			if worktree {
				if err := g.wfs.Remove(g.file(p)); err != nil && !isNotExist(err) {
					return err
				}
				g.removeEmptyDirs(parentDir(p))
			}
			continue
		}
		if worktree {
			if err := g.writeWorkFile(p, t); err != nil {
				return err
			}
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
		changed := e.Hash != t.hash || e.Mode != t.mode
		e.Hash, e.Mode = t.hash, t.mode
		if worktree {
			if at, err := g.wfs.Lstat(g.file(p)); err == nil {
				statEntry(e, at)
			}
		} else if changed || onlyIndex {
			// stat data no longer describes the file: force a hash
			e.ModifiedAt = time.Time{}
			e.Size = 0
			if at, err := g.wfs.Lstat(g.file(p)); err == nil {
				if h, _, err := g.hashFile(p, at); err == nil && h == t.hash {
					statEntry(e, at)
				}
			}
		}
	}
	return nil
}

// writeWorkFile writes a blob to the work tree unless it already holds it.
func (g *gitCmd) writeWorkFile(p string, t treeFile) error {
	fp := g.file(p)
	if at, err := g.wfs.Lstat(fp); err == nil {
		if m, ok := modeOf(at); ok && m == t.mode {
			if h, _, err := g.hashFile(p, at); err == nil && h == t.hash {
				return nil
			}
		}
		if at.IsDir() {
			if err := g.wfs.RemoveAllContext(g.ctx, fp); err != nil {
				return err
			}
		} else if err := g.wfs.Remove(fp); err != nil {
			return err
		}
	}
	data, err := g.blob(t.hash)
	if err != nil {
		return err
	}
	if err := g.mkdirs(parentDir(p)); err != nil {
		return err
	}
	if t.mode == filemode.Symlink {
		return g.wfs.Symlink(string(data), fp)
	}
	perm := uint32(0o644)
	if t.mode == filemode.Executable {
		perm = 0o755
	}
	if err := g.wfs.WriteFile(fp, data, perm); err != nil {
		return err
	}
	return g.wfs.Chmod(fp, perm)
}

// mkdirs makes the directories of a repository path, replacing a file in
// the way.
func (g *gitCmd) mkdirs(dir string) error {
	if dir == "" {
		return nil
	}
	if at, err := g.wfs.Lstat(g.file(dir)); err == nil {
		if at.IsDir() {
			return nil
		}
		if err := g.wfs.Remove(g.file(dir)); err != nil {
			return err
		}
	}
	if err := g.mkdirs(parentDir(dir)); err != nil {
		return err
	}
	return g.wfs.Mkdir(g.file(dir), 0o755)
}

func gitReset(g *gitCmd) int {
	a := g.a
	mode := "--mixed"
	for _, f := range a.order {
		if f == "--soft" || f == "--mixed" || f == "--hard" {
			mode = f
		}
	}
	rev := "HEAD"
	args := a.args
	if len(args) > 0 && (!a.dash || a.nDash > 0) {
		if _, err := g.resolve(args[0]); err == nil {
			rev, args = args[0], args[1:]
		} else if a.dash && a.nDash > 0 {
			return g.badRev(args[0], err)
		}
	}
	specs, err := g.pathspecs(args)
	if err != nil {
		return g.fatal("%v", err)
	}
	if len(specs) > 0 && mode != "--mixed" {
		return g.fatal("Cannot do %s reset with paths.", strings.TrimPrefix(mode, "--"))
	}
	head, _, err := g.head()
	if err != nil {
		return g.fatal("%v", err)
	}
	var target *object.Commit
	if head != nil || rev != "HEAD" {
		if target, err = g.resolveCommit(rev); err != nil {
			return g.badRev(rev, err)
		}
	}
	tf, err := treeFilesOf(target)
	if err != nil {
		return g.fatal("%v", err)
	}
	idx, err := g.readIndex()
	if err != nil {
		return g.fatal("%v", err)
	}
	if len(specs) > 0 {
		for i, s := range specs {
			hit := false
			for p := range tf {
				hit = hit || matchSpec([]string{s}, p)
			}
			for _, e := range idx.Entries {
				hit = hit || matchSpec([]string{s}, e.Name)
			}
			if !hit {
				if _, err := g.wfs.Lstat(g.file(s)); err != nil {
					return g.badRev(a.args[len(a.args)-len(specs)+i], err)
				}
			}
		}
		if err := g.checkoutFiles(idx, filterFiles(tf, specs), specs, false, false); err != nil {
			return g.fatal("%v", err)
		}
		if err := g.writeIndex(idx); err != nil {
			return g.fatal("%v", err)
		}
		return g.unstagedAfterReset(idx)
	}
	if mode != "--soft" {
		if err := g.checkoutFiles(idx, tf, nil, mode == "--hard", false); err != nil {
			return g.fatal("%v", err)
		}
		if err := g.writeIndex(idx); err != nil {
			return g.fatal("%v", err)
		}
	}
	if target != nil && (head == nil || target.Hash != head.Hash) {
		if err := g.moveHead(target.Hash, "reset: moving to "+rev, object.Signature{}); err != nil {
			return g.fatal("%v", err)
		}
	}
	switch mode {
	case "--hard":
		if !a.has("--quiet") && target != nil {
			subj, _ := subjectBody(target.Message)
			fmt.Fprintf(g.out, "HEAD is now at %s %s\n", g.abbrev(target.Hash), subj)
		}
	case "--mixed":
		return g.unstagedAfterReset(idx)
	}
	return 0
}

func (g *gitCmd) unstagedAfterReset(idx *index.Index) int {
	if g.a.has("--quiet") {
		return 0
	}
	w, err := g.scanWorktree(idx, nil)
	if err != nil {
		return g.fatal("%v", err)
	}
	cs := w.changes(indexFiles(idx))
	if len(cs) == 0 {
		return 0
	}
	g.out.WriteString("Unstaged changes after reset:\n")
	for _, c := range cs {
		fmt.Fprintf(g.out, "%c\t%s\n", c.kind(), quotePath(c.path()))
	}
	return 0
}

func gitRestore(g *gitCmd) int {
	a := g.a
	if len(a.args) == 0 {
		g.out.Flush()
		fmt.Fprint(g.stderr, "fatal: you must specify path(s) to restore\n")
		return 128
	}
	staged, worktree := a.has("--staged"), a.has("--worktree") || !a.has("--staged")
	specs, err := g.pathspecs(a.args)
	if err != nil {
		return g.fatal("%v", err)
	}
	idx, err := g.readIndex()
	if err != nil {
		return g.fatal("%v", err)
	}
	source := ""
	if a.has("--source") {
		source = a.val("--source")
	} else if staged {
		source = "HEAD"
	}
	var src map[string]treeFile
	if source == "" {
		src = indexFiles(idx)
	} else {
		head, _, _ := g.head()
		if head == nil && source == "HEAD" {
			src = map[string]treeFile{}
		} else if src, err = g.revFiles(source); err != nil {
			return g.fatal("could not resolve %s", source)
		}
	}
	for i, s := range specs {
		hit := false
		for p := range src {
			hit = hit || matchSpec([]string{s}, p)
		}
		if staged {
			for _, e := range idx.Entries {
				hit = hit || matchSpec([]string{s}, e.Name)
			}
		}
		if !hit {
			g.out.Flush()
			fmt.Fprintf(g.stderr, "error: pathspec '%s' did not match any file(s) known to git\n", a.args[i])
			return 1
		}
	}
	if staged {
		// the index from the source; the work tree too with --worktree
		if err := g.checkoutFiles(idx, filterFiles(src, specs), specs, worktree, false); err != nil {
			return g.fatal("%v", err)
		}
		if err := g.writeIndex(idx); err != nil {
			return g.fatal("%v", err)
		}
		return 0
	}
	// work tree only: write the source's files, leave the index alone
	for p, f := range filterFiles(src, specs) {
		if err := g.writeWorkFile(p, f); err != nil {
			return g.fatal("%v", err)
		}
		if source == "" {
			for _, e := range idx.Entries {
				if e.Name == p {
					if at, err := g.wfs.Lstat(g.file(p)); err == nil {
						statEntry(e, at)
					}
				}
			}
		}
	}
	if source == "" { // renewed stat data
		if err := g.writeIndex(idx); err != nil {
			return g.fatal("%v", err)
		}
	}
	return 0
}

// switchTo checks out a commit and points HEAD at branch (or detaches).
func (g *gitCmd) switchTo(target *object.Commit, branch string, create bool, force bool, from string) int {
	head, cur, err := g.head()
	if err != nil {
		return g.fatal("%v", err)
	}
	if !create && branch != "" && branch == cur {
		if !g.a.has("--quiet") {
			g.out.Flush()
			fmt.Fprintf(g.stderr, "Already on '%s'\n", branch)
			g.trackingInfo(branch, head)
		}
		return 0
	}
	idx, err := g.readIndex()
	if err != nil {
		return g.fatal("%v", err)
	}
	if target != nil && (head == nil || target.Hash != head.Hash) {
		hf, err := treeFilesOf(head)
		if err != nil {
			return g.fatal("%v", err)
		}
		tf, err := treeFilesOf(target)
		if err != nil {
			return g.fatal("%v", err)
		}
		diff := compareFiles(hf, tf)
		ixf := indexFiles(idx)
		w, err := g.scanWorktree(idx, nil)
		if err != nil {
			return g.fatal("%v", err)
		}
		var conflicts []string
		touched := map[string]bool{}
		for _, c := range diff {
			p := c.path()
			touched[p] = true
			local := ixf[p] != hf[p]
			if _, ok := w.files[p]; ok {
				local = true
			}
			if local && !force {
				conflicts = append(conflicts, p)
			}
		}
		if len(conflicts) > 0 {
			g.out.Flush()
			fmt.Fprint(g.stderr, "error: Your local changes to the following files would be overwritten by checkout:\n")
			for _, p := range conflicts {
				fmt.Fprintf(g.stderr, "\t%s\n", p)
			}
			fmt.Fprint(g.stderr, "Please commit your changes or stash them before you switch branches.\nAborting\n")
			return 1
		}
		var paths []string
		for p := range touched {
			paths = append(paths, p)
		}
		if force {
			paths = nil
			for p := range ixf {
				paths = append(paths, p)
			}
			for p := range tf {
				paths = append(paths, p)
			}
		}
		sort.Strings(paths)
		if err := g.checkoutFiles(idx, filterFiles(tf, paths), dedup(paths), true, false); err != nil {
			return g.fatal("%v", err)
		}
		if err := g.writeIndex(idx); err != nil {
			return g.fatal("%v", err)
		}
	}
	old := plumbing.ZeroHash
	if head != nil {
		old = head.Hash
	}
	who, _ := g.identity("COMMITTER")
	if branch == "" {
		if err := g.repo.Storer.SetReference(plumbing.NewHashReference(plumbing.HEAD, target.Hash)); err != nil {
			return g.fatal("%v", err)
		}
		g.reflog(plumbing.HEAD, old, target.Hash, "checkout: moving from "+from+" to "+target.Hash.String(), who)
		if !g.a.has("--quiet") {
			subj, _ := subjectBody(target.Message)
			if cur == "" && head != nil {
				fmt.Fprintf(g.stderr, "Previous HEAD position was %s %s\n", g.abbrev(head.Hash), subjectOf(head))
			}
			fmt.Fprintf(g.stderr, "HEAD is now at %s %s\n", g.abbrev(target.Hash), subj)
		}
		return 0
	}
	ref := plumbing.NewBranchReferenceName(branch)
	if create && target != nil {
		if err := g.repo.Storer.SetReference(plumbing.NewHashReference(ref, target.Hash)); err != nil {
			return g.fatal("%v", err)
		}
		g.reflog(ref, plumbing.ZeroHash, target.Hash, "branch: Created from "+from, who)
		if code := g.setTracking(branch); code != 0 {
			return code
		}
	}
	if err := g.repo.Storer.SetReference(plumbing.NewSymbolicReference(plumbing.HEAD, ref)); err != nil {
		return g.fatal("%v", err)
	}
	if target != nil {
		g.reflog(plumbing.HEAD, old, target.Hash, "checkout: moving from "+orHEAD(cur, head, g)+" to "+branch, who)
	}
	if g.a.has("--quiet") {
		return 0
	}
	g.out.Flush()
	if create {
		fmt.Fprintf(g.stderr, "Switched to a new branch '%s'\n", branch)
	} else {
		if cur == "" && head != nil && target != nil && head.Hash != target.Hash {
			fmt.Fprintf(g.stderr, "Previous HEAD position was %s %s\n", g.abbrev(head.Hash), subjectOf(head))
		}
		fmt.Fprintf(g.stderr, "Switched to branch '%s'\n", branch)
		g.trackingInfo(branch, target)
	}
	return 0
}

func orHEAD(branch string, head *object.Commit, g *gitCmd) string {
	if branch != "" {
		return branch
	}
	if head != nil {
		return head.Hash.String()
	}
	return "HEAD"
}

func subjectOf(c *object.Commit) string {
	s, _ := subjectBody(c.Message)
	return s
}

// trackingInfo prints what git checkout says of the branch's upstream.
func (g *gitCmd) trackingInfo(branch string, c *object.Commit) {
	up, uc, gone := g.upstream(branch)
	if up == "" || c == nil {
		return
	}
	o := g.out
	if gone {
		fmt.Fprintf(o, "Your branch is based on '%s', but the upstream is gone.\n  (use \"git branch --unset-upstream\" to fixup)\n", up)
		return
	}
	ah, bh, err := g.aheadBehind(c, uc)
	if err != nil {
		return
	}
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

func (g *gitCmd) branchExists(name string) bool {
	_, err := g.repo.Storer.Reference(plumbing.NewBranchReferenceName(name))
	return err == nil
}

func validBranch(name string) bool {
	if name == "" || strings.HasPrefix(name, "-") || strings.HasSuffix(name, "/") || strings.HasSuffix(name, ".lock") || strings.Contains(name, "..") || name == "HEAD" || strings.Contains(name, "@{") {
		return false
	}
	for _, r := range name {
		if r <= ' ' || strings.ContainsRune("~^:?*[\\\x7f", r) {
			return false
		}
	}
	return true
}

func (g *gitCmd) createBranchTarget(name, start string, force bool) (*object.Commit, int) {
	if !validBranch(name) {
		return nil, g.fatal("'%s' is not a valid branch name", name)
	}
	if g.branchExists(name) && !force {
		return nil, g.fatal("a branch named '%s' already exists", name)
	}
	if start == "" {
		head, _, err := g.head()
		if err != nil || head == nil {
			return nil, g.fatal("not a valid object name: '%s'", "HEAD")
		}
		return head, 0
	}
	c, err := g.resolveCommit(start)
	if err != nil {
		return nil, g.fatal("'%s' is not a commit and a branch '%s' cannot be created from it", start, name)
	}
	return c, 0
}

// createAndSwitch is switch -c/-C and checkout -b/-B: create the branch
// (or, with force, reset it) at the start point, if one is given, and
// switch to it. ok reports that one of the two flags was given.
func (g *gitCmd) createAndSwitch(create, force, from string) (code int, ok bool) {
	a := g.a
	for _, f := range []string{create, force} {
		if !a.has(f) {
			continue
		}
		name := a.val(f)
		start := ""
		if len(a.args) > 0 {
			start = a.args[0]
		}
		c, code := g.createBranchTarget(name, start, f == force)
		if c == nil {
			return code, true
		}
		if start != "" {
			from = start
			g.track = g.remoteTracking(start)
		}
		return g.switchTo(c, name, true, a.has("--force"), from), true
	}
	return 0, false
}

func gitSwitch(g *gitCmd) int {
	a := g.a
	from := "HEAD"
	if _, cur, _ := g.head(); cur != "" {
		from = cur
	}
	if code, ok := g.createAndSwitch("--create", "--force-create", from); ok {
		return code
	}
	if len(a.args) != 1 {
		return g.fatal("missing branch or commit argument")
	}
	name := a.args[0]
	if name == "-" || name == "@{-1}" {
		if name = g.previousCheckout(); name == "" {
			return g.fatal("invalid reference: @{-1}")
		}
		if !g.branchExists(name) {
			c, err := g.resolveCommit(name)
			if err != nil {
				return g.fatal("invalid reference: @{-1}")
			}
			return g.switchTo(c, "", false, a.has("--force"), from)
		}
	}
	if a.has("--detach") {
		c, err := g.resolveCommit(name)
		if err != nil {
			return g.fatal("invalid reference: %s", name)
		}
		return g.switchTo(c, "", false, a.has("--force"), from)
	}
	if !g.branchExists(name) {
		if c, ok := g.remoteBranch(name); ok {
			return g.trackNew(name, c, from)
		}
		if _, err := g.resolve(name); err == nil {
			g.out.Flush()
			fmt.Fprintf(g.stderr, "fatal: a branch is expected, got '%s'\nhint: If you want to detach HEAD at the commit, try again with the --detach option.\n", name)
			return 128
		}
		return g.fatal("invalid reference: %s", name)
	}
	c, err := g.resolveCommit(plumbing.NewBranchReferenceName(name).String())
	if err != nil {
		return g.fatal("%v", err)
	}
	return g.switchTo(c, name, false, a.has("--force"), from)
}

// remoteBranch finds origin/NAME for the automatic tracking branch of
// git switch NAME and git checkout NAME.
func (g *gitCmd) remoteBranch(name string) (*object.Commit, bool) {
	cfg := g.config()
	found := 0
	var c *object.Commit
	for r := range cfg.Remotes {
		ref, err := g.repo.Storer.Reference(plumbing.NewRemoteReferenceName(r, name))
		if err != nil {
			continue
		}
		if cc, err := g.commitObject(ref.Hash()); err == nil {
			c = cc
			found++
		}
	}
	return c, found == 1
}

func (g *gitCmd) trackNew(name string, c *object.Commit, from string) int {
	for r := range g.config().Remotes {
		if _, err := g.repo.Storer.Reference(plumbing.NewRemoteReferenceName(r, name)); err == nil {
			g.track = r + "/" + name
		}
	}
	return g.switchTo(c, name, true, false, g.track)
}

// remoteTracking names the upstream of a branch created from start when
// start is a remote-tracking branch (origin/x), as branch.autoSetupMerge
// does by default; "" otherwise.
func (g *gitCmd) remoteTracking(start string) string {
	start = strings.TrimPrefix(strings.TrimPrefix(start, "refs/"), "remotes/")
	remote, branch, ok := strings.Cut(start, "/")
	if !ok || branch == "" {
		return ""
	}
	if _, ok := g.config().Remotes[remote]; !ok {
		return ""
	}
	r, err := g.repo.Storer.Reference(plumbing.NewRemoteReferenceName(remote, branch))
	if err != nil || r.Type() != plumbing.HashReference {
		return ""
	}
	return start
}

// setTracking records the upstream g.track (origin/x) of a new branch in
// the configuration and says so, as git does when it creates a branch
// from a remote-tracking branch.
func (g *gitCmd) setTracking(name string) int {
	if g.track == "" {
		return 0
	}
	remote, branch, _ := strings.Cut(g.track, "/")
	cfg := g.config()
	cfg.Branches[name] = &config.Branch{Name: name, Remote: remote, Merge: plumbing.NewBranchReferenceName(branch)}
	if err := g.st.SetConfig(cfg); err != nil {
		return g.fatal("%v", err)
	}
	if !g.a.has("--quiet") {
		fmt.Fprintf(g.out, "branch '%s' set up to track '%s'.\n", name, g.track)
	}
	return 0
}

func gitCheckout(g *gitCmd) int {
	a := g.a
	from := "HEAD"
	if _, cur, _ := g.head(); cur != "" {
		from = cur
	}
	if code, ok := g.createAndSwitch("-b", "-B", from); ok {
		return code
	}
	// checkout [<tree-ish>] -- <paths>, checkout <paths>, checkout <branch>
	before := a.args[:argsBeforeDash(a)]
	paths := a.args[argsBeforeDash(a):]
	if !a.dash && len(before) == 1 && (before[0] == "-" || before[0] == "@{-1}") {
		prev := g.previousCheckout()
		if prev == "" {
			return g.fatal("invalid reference: @{-1}")
		}
		before = []string{prev}
	}
	if !a.dash && len(before) == 1 {
		name := before[0]
		if g.branchExists(name) {
			c, err := g.resolveCommit(plumbing.NewBranchReferenceName(name).String())
			if err != nil {
				return g.fatal("%v", err)
			}
			return g.switchTo(c, name, false, a.has("--force"), from)
		}
		if c, err := g.resolveCommit(name); err == nil {
			return g.switchTo(c, "", false, a.has("--force"), from)
		}
		if c, ok := g.remoteBranch(name); ok {
			return g.trackNew(name, c, from)
		}
	}
	if !a.dash {
		paths, before = before, nil
	}
	if len(before) > 1 {
		return g.usage("checkout of more than one revision is not supported")
	}
	specs, err := g.pathspecs(paths)
	if err != nil {
		return g.fatal("%v", err)
	}
	if len(specs) == 0 {
		return g.fatal("you must specify path(s) to restore")
	}
	idx, err := g.readIndex()
	if err != nil {
		return g.fatal("%v", err)
	}
	src := indexFiles(idx)
	if len(before) == 1 {
		if src, err = g.revFiles(before[0]); err != nil {
			return g.badRev(before[0], err)
		}
	}
	for i, s := range specs {
		hit := false
		for p := range src {
			hit = hit || matchSpec([]string{s}, p)
		}
		if !hit {
			g.out.Flush()
			fmt.Fprintf(g.stderr, "error: pathspec '%s' did not match any file(s) known to git\n", paths[i])
			return 1
		}
	}
	n := 0
	for p, f := range filterFiles(src, specs) {
		if err := g.writeWorkFile(p, f); err != nil {
			return g.fatal("%v", err)
		}
		n++
		found := false
		for _, e := range idx.Entries {
			if e.Name == p {
				found = true
				e.Hash, e.Mode = f.hash, f.mode
				if at, err := g.wfs.Lstat(g.file(p)); err == nil {
					statEntry(e, at)
				}
			}
		}
		if !found {
			e := &index.Entry{Name: p, Hash: f.hash, Mode: f.mode}
			if at, err := g.wfs.Lstat(g.file(p)); err == nil {
				statEntry(e, at)
			}
			idx.Entries = append(idx.Entries, e)
		}
	}
	if err := g.writeIndex(idx); err != nil {
		return g.fatal("%v", err)
	}
	if !a.has("--quiet") {
		g.out.Flush()
		fmt.Fprintf(g.stderr, "Updated %d %s from %s\n", n, plural(n, "path", "paths"), map[bool]string{true: "the index", false: "the tree"}[len(before) == 0])
	}
	return 0
}

func gitBranch(g *gitCmd) int {
	a := g.a
	head, cur, err := g.head()
	if err != nil {
		return g.fatal("%v", err)
	}
	switch {
	case a.has("--show-current"):
		if cur != "" {
			fmt.Fprintln(g.out, cur)
		}
		return 0
	case a.has("--delete") || a.has("-D"):
		if len(a.args) == 0 {
			return g.fatal("branch name required")
		}
		for _, name := range a.args {
			ref := plumbing.NewBranchReferenceName(name)
			r, err := g.repo.Storer.Reference(ref)
			if err != nil {
				g.out.Flush()
				fmt.Fprintf(g.stderr, "error: branch '%s' not found.\n", name)
				return 1
			}
			if name == cur {
				g.out.Flush()
				fmt.Fprintf(g.stderr, "error: Cannot delete branch '%s' checked out at '%s'\n", name, g.root)
				return 1
			}
			if !a.has("-D") && !(a.has("--force")) {
				c, err := g.commitObject(r.Hash())
				if err == nil && head != nil {
					reach, err := g.reachable(head)
					if err == nil && !reach[c.Hash] {
						g.out.Flush()
						fmt.Fprintf(g.stderr, "error: The branch '%s' is not fully merged.\nIf you are sure you want to delete it, run 'git branch -D %s'.\n", name, name)
						return 1
					}
				}
			}
			if err := g.repo.Storer.RemoveReference(ref); err != nil {
				return g.fatal("%v", err)
			}
			g.wfs.Remove(g.file(".git/logs/" + ref.String()))
			if !a.has("--quiet") {
				fmt.Fprintf(g.out, "Deleted branch %s (was %s).\n", name, g.abbrev(r.Hash()))
			}
		}
		return 0
	case a.has("--move"):
		var from, to string
		switch len(a.args) {
		case 1:
			from, to = cur, a.args[0]
		case 2:
			from, to = a.args[0], a.args[1]
		case 0:
			return g.fatal("branch name required")
		default:
			return g.fatal("too many arguments for a rename operation")
		}
		r, err := g.repo.Storer.Reference(plumbing.NewBranchReferenceName(from))
		if err != nil {
			return g.fatal("No branch named '%s'.", from)
		}
		if !validBranch(to) {
			return g.fatal("'%s' is not a valid branch name", to)
		}
		if g.branchExists(to) && !a.has("--force") {
			return g.fatal("a branch named '%s' already exists", to)
		}
		if err := g.repo.Storer.SetReference(plumbing.NewHashReference(plumbing.NewBranchReferenceName(to), r.Hash())); err != nil {
			return g.fatal("%v", err)
		}
		g.repo.Storer.RemoveReference(r.Name())
		if from == cur {
			g.repo.Storer.SetReference(plumbing.NewSymbolicReference(plumbing.HEAD, plumbing.NewBranchReferenceName(to)))
		}
		cfg := g.config()
		if b, ok := cfg.Branches[from]; ok {
			delete(cfg.Branches, from)
			b.Name = to
			cfg.Branches[to] = b
			cfg.Raw.Section("branch").RemoveSubsection(from)
			g.st.SetConfig(cfg)
		}
		return 0
	case len(a.args) > 0 && !a.has("--list"):
		name := a.args[0]
		start := ""
		if len(a.args) > 1 {
			start = a.args[1]
		}
		if len(a.args) > 2 {
			return g.usage("too many arguments")
		}
		c, code := g.createBranchTarget(name, start, a.has("--force"))
		if c == nil {
			return code
		}
		if name == cur && a.has("--force") {
			return g.fatal("cannot force update the current branch.")
		}
		if err := g.repo.Storer.SetReference(plumbing.NewHashReference(plumbing.NewBranchReferenceName(name), c.Hash)); err != nil {
			return g.fatal("%v", err)
		}
		if start == "" {
			start = orHEAD(cur, head, g)
		}
		g.reflog(plumbing.NewBranchReferenceName(name), plumbing.ZeroHash, c.Hash, "branch: Created from "+start, object.Signature{})
		g.track = g.remoteTracking(start)
		return g.setTracking(name)
	}
	// list
	type row struct {
		name, shown string
		hash        plumbing.Hash
		current     bool
		symref      string
		remote      bool
	}
	var rows []row
	if cur == "" && head != nil && !a.has("--remotes") {
		rows = append(rows, row{name: "", shown: fmt.Sprintf("(HEAD detached at %s)", g.abbrev(head.Hash)), hash: head.Hash, current: true})
	}
	refs, err := g.repo.Storer.IterReferences()
	if err != nil {
		return g.fatal("%v", err)
	}
	var branches, remotes []row
	refs.ForEach(func(r *plumbing.Reference) error {
		n := r.Name()
		switch {
		case n.IsBranch() && !a.has("--remotes"):
			branches = append(branches, row{name: n.Short(), shown: n.Short(), hash: r.Hash(), current: n.Short() == cur})
		case n.IsRemote() && (a.has("--remotes") || a.has("--all")):
			shown := n.Short()
			if a.has("--all") {
				shown = "remotes/" + shown
			}
			rw := row{name: n.Short(), shown: shown, hash: r.Hash(), remote: true}
			if r.Type() == plumbing.SymbolicReference {
				rw.symref = r.Target().Short()
			}
			remotes = append(remotes, rw)
		}
		return nil
	})
	sort.Slice(branches, func(i, j int) bool { return branches[i].name < branches[j].name })
	sort.Slice(remotes, func(i, j int) bool { return remotes[i].name < remotes[j].name })
	rows = append(append(rows, branches...), remotes...)
	var filtered []row
	for _, r := range rows {
		if a.has("--list") && len(a.args) > 0 {
			ok := false
			for _, p := range a.args {
				if m, _ := path.Match(p, r.name); m {
					ok = true
				}
			}
			if !ok {
				continue
			}
		}
		filtered = append(filtered, r)
	}
	width := 0
	for _, r := range filtered {
		width = max(width, len(r.shown))
	}
	for _, r := range filtered {
		mark := "  "
		if r.current {
			mark = "* "
		}
		if r.symref != "" {
			if a.has("--verbose") {
				fmt.Fprintf(g.out, "%s%-*s -> %s\n", mark, width, r.shown, r.symref)
			} else {
				fmt.Fprintf(g.out, "%s%s -> %s\n", mark, r.shown, r.symref)
			}
			continue
		}
		if a.has("--verbose") {
			subj := ""
			if c, err := g.commitObject(r.hash); err == nil {
				subj = subjectOf(c)
			}
			track := ""
			if r.name != "" && !r.remote {
				track = g.branchTracking(r.name, len(a.opts["--verbose"]) > 1)
			}
			fmt.Fprintf(g.out, "%s%-*s %s %s%s\n", mark, width, r.shown, g.abbrev(r.hash), track, subj)
			continue
		}
		fmt.Fprintf(g.out, "%s%s\n", mark, r.shown)
	}
	return 0
}

// branchTracking is what git branch -v ("[ahead 1] ") and -vv
// ("[origin/main: ahead 1] ") say of a branch's upstream.
func (g *gitCmd) branchTracking(branch string, vv bool) string {
	up, uc, gone := g.upstream(branch)
	if up == "" {
		return ""
	}
	var what string
	if gone {
		what = "gone"
	} else if c, err := g.resolveCommit(plumbing.NewBranchReferenceName(branch).String()); err == nil {
		ah, bh, err := g.aheadBehind(c, uc)
		if err != nil {
			return ""
		}
		var parts []string
		if ah > 0 {
			parts = append(parts, fmt.Sprintf("ahead %d", ah))
		}
		if bh > 0 {
			parts = append(parts, fmt.Sprintf("behind %d", bh))
		}
		what = strings.Join(parts, ", ")
	}
	switch {
	case vv && what == "":
		return "[" + up + "] "
	case vv:
		return "[" + up + ": " + what + "] "
	case what == "":
		return ""
	}
	return "[" + what + "] "
}

func gitInit(g *gitCmd) int {
	a := g.a
	dir := g.dir
	if len(a.args) > 1 {
		return g.usage("too many arguments")
	}
	if len(a.args) == 1 {
		dir = strings.TrimSuffix(g.host.Abs(g.dir, a.args[0]), "/")
	}
	if dir != Root && !strings.HasPrefix(dir, Root+"/") {
		return g.usage("a repository outside /workspace is not supported")
	}
	g.wfs = g.call.FS
	g.root = dir
	if err := g.wfs.MkdirAll(g.wsPath(dir), 0o755); err != nil {
		return g.fatal("cannot mkdir %s: %s", dir, g.host.ErrText(err))
	}
	if _, err := g.wfs.Lstat(g.file(".git/HEAD")); err == nil {
		if !a.has("--quiet") {
			fmt.Fprintf(g.out, "Reinitialized existing Git repository in %s/.git/\n", dir)
		}
		return 0
	}
	branch := "master"
	if a.has("--initial-branch") {
		branch = a.val("--initial-branch")
		if !validBranch(branch) {
			return g.fatal("invalid initial branch name: '%s'", branch)
		}
	}
	files := map[string]string{
		"HEAD":         "ref: refs/heads/" + branch + "\n",
		"config":       "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n",
		"description":  "Unnamed repository; edit this file 'description' to name the repository.\n",
		"info/exclude": "# git ls-files --others --exclude-from=.git/info/exclude\n# Lines that start with '#' are comments.\n# For a project mostly in C, the following would be a good set of\n# exclude patterns (uncomment them if you want to use them):\n# *.[oa]\n# *~\n",
	}
	for _, d := range []string{"objects/info", "objects/pack", "refs/heads", "refs/tags", "info", "hooks", "branches"} {
		if err := g.wfs.MkdirAll(g.file(".git/"+d), 0o755); err != nil {
			return g.fatal("%v", err)
		}
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := g.wfs.WriteFile(g.file(".git/"+n), []byte(files[n]), 0o644); err != nil {
			return g.fatal("%v", err)
		}
	}
	if !a.has("--quiet") {
		if !a.has("--initial-branch") {
			g.out.Flush()
			fmt.Fprint(g.stderr, initHint)
		}
		fmt.Fprintf(g.out, "Initialized empty Git repository in %s/.git/\n", dir)
	}
	return 0
}

const initHint = `hint: Using 'master' as the name for the initial branch. This default branch name
hint: is subject to change. To configure the initial branch name to use in all
hint: of your new repositories, which will suppress this warning, call:
hint: 
hint: 	git config --global init.defaultBranch <name>
hint: 
hint: Names commonly chosen instead of 'master' are 'main', 'trunk' and
hint: 'development'. The just-created branch can be renamed via this command:
hint: 
hint: 	git branch -m <name>
`

// previousCheckout is what "git switch -" goes back to: the branch or
// commit HEAD was moved from by the last checkout, from HEAD's reflog.
func (g *gitCmd) previousCheckout() string {
	data, err := g.wfs.ReadFile(g.file(".git/logs/HEAD"))
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		_, msg, ok := strings.Cut(lines[i], "\t")
		if !ok {
			continue
		}
		if rest, ok := strings.CutPrefix(msg, "checkout: moving from "); ok {
			if from, _, ok := strings.Cut(rest, " to "); ok {
				return from
			}
		}
	}
	return ""
}
