package shell

import (
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
)

// The walk of rg: which files a directory search reaches, as ripgrep 13's
// ignore crate decides (its dir.rs), in `--sort path` order (entries by
// name, depth first). For an entry, in this order:
//
//  1. the -g globs (overrides) decide if one matches (the last that
//     does): a glob whitelists, a !glob ignores; with any whitelisting
//     glob, a file that none matches is ignored;
//  2. the ignore files: for each kind (.rgignore, then .ignore, then
//     .gitignore, then .git/info/exclude), the nearest directory whose
//     file has a matching pattern (its last) decides, and the first
//     kind that decides wins; .gitignore and exclude count only inside a
//     git repository (a .git in the directory or above) and only up to
//     its top;
//  3. the -t/-T types (files only);
//  4. a name starting with "." is hidden, unless 2 or 3 whitelisted it.
//
// Ignore files above the search root are read too, as ripgrep does.

// rgLevel is one directory's ignore files, linked to its parent's.
type rgLevel struct {
	parent                    *rgLevel
	hasGit                    bool
	custom, ignore, git, excl []gitignore.Pattern
	anyGit                    bool // this level or one above has .git
}

type rgWalker struct {
	c      *cmd
	o      *rgOpts
	levels map[string]*rgLevel // by absolute directory
}

func (w *rgWalker) readPatterns(file string, domain []string) []gitignore.Pattern {
	fi, err := w.c.stat(file)
	if err != nil || fi.IsDir() {
		return nil
	}
	data, err := w.c.readFile(file)
	if err != nil {
		return nil
	}
	var ps []gitignore.Pattern
	for _, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSuffix(l, "\r")
		if strings.HasPrefix(l, "#") {
			continue
		}
		if !strings.HasSuffix(l, `\ `) {
			l = strings.TrimRight(l, " ")
		}
		if l == "" {
			continue
		}
		// a pattern costs about this much besides its text: an ignore
		// file of millions of lines must meet the call's budget
		if !w.c.grow(int64(len(l)) + 160) {
			return ps
		}
		ps = append(ps, gitignore.ParsePattern(rgGlob(l), domain))
	}
	return ps
}

// level returns the ignore files of the absolute directory dir.
func (w *rgWalker) level(dir string) *rgLevel {
	if l, ok := w.levels[dir]; ok {
		return l
	}
	if w.c.canceled() {
		// each level reads its ignore files by a path as deep as it,
		// so the ancestors of a start thousands of levels down cost
		// the square of the depth: stop with the call, as the walk
		// does
		return &rgLevel{}
	}
	l := &rgLevel{}
	if dir != "/" && !treeTooDeep(dir) { // (the walk goes no deeper)
		l.parent = w.level(path.Dir(dir))
	}
	w.levels[dir] = l
	if _, err := w.c.lstat(path.Join(dir, ".git")); err == nil {
		l.hasGit = true
	}
	l.anyGit = l.hasGit || l.parent != nil && l.parent.anyGit
	if w.o.noIgnore {
		return l
	}
	domain := splitAbs(dir)
	l.custom = w.readPatterns(path.Join(dir, ".rgignore"), domain)
	l.ignore = w.readPatterns(path.Join(dir, ".ignore"), domain)
	if !w.o.noVCS {
		l.git = w.readPatterns(path.Join(dir, ".gitignore"), domain)
		if l.hasGit {
			l.excl = w.readPatterns(path.Join(dir, ".git/info/exclude"), domain)
		}
	}
	return l
}

func splitAbs(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

func lastMatch(ps []gitignore.Pattern, parts []string, isDir bool) gitignore.MatchResult {
	for i := len(ps) - 1; i >= 0; i-- {
		if r := ps[i].Match(parts, isDir); r != gitignore.NoMatch {
			return r
		}
	}
	return gitignore.NoMatch
}

// ignored answers for the ignore files: gitignore.Exclude (ignored),
// Include (whitelisted by a !pattern) or NoMatch.
func (w *rgWalker) ignored(abs string, isDir bool) gitignore.MatchResult {
	parts := splitAbs(abs)
	var custom, ign, git, excl gitignore.MatchResult
	anyGit := w.o.noRequireGit
	for l := w.level(path.Dir(abs)); l != nil; l = l.parent {
		anyGit = anyGit || l.anyGit
	}
	sawGit := false
	for l := w.level(path.Dir(abs)); l != nil; l = l.parent {
		if custom == gitignore.NoMatch {
			custom = lastMatch(l.custom, parts, isDir)
		}
		if ign == gitignore.NoMatch {
			ign = lastMatch(l.ignore, parts, isDir)
		}
		if anyGit && !sawGit && git == gitignore.NoMatch {
			git = lastMatch(l.git, parts, isDir)
		}
		if anyGit && !sawGit && excl == gitignore.NoMatch {
			excl = lastMatch(l.excl, parts, isDir)
		}
		sawGit = sawGit || l.hasGit
	}
	for _, r := range []gitignore.MatchResult{custom, ign, git, excl} {
		if r != gitignore.NoMatch {
			return r
		}
	}
	return gitignore.NoMatch
}

// rgMatch is how a filter answers: none, whitelisted or ignored.
type rgMatch int

const (
	rgNone rgMatch = iota
	rgWhite
	rgIgnore
)

// globbed answers for the -g globs; rel is the path from the working
// directory.
func (o *rgOpts) globbed(rel string, isDir bool) rgMatch {
	if len(o.globs) == 0 {
		return rgNone
	}
	parts := strings.Split(strings.TrimPrefix(rel, "./"), "/")
	switch lastMatch(o.globs, parts, isDir) {
	case gitignore.Exclude: // a glob: whitelisted
		return rgWhite
	case gitignore.Include: // a !glob
		return rgIgnore
	}
	if o.anyWhite && !isDir {
		return rgIgnore
	}
	return rgNone
}

// typed answers for -t and -T.
func (o *rgOpts) typed(name string, isDir bool) rgMatch {
	if isDir || len(o.types) == 0 {
		return rgNone
	}
	m, any := rgNone, false
	for _, t := range o.types {
		any = any || !t.not
		for _, g := range rgTypes[t.name] {
			if ok, _ := path.Match(g, name); ok {
				if t.not {
					m = rgIgnore
				} else {
					m = rgWhite
				}
				break
			}
		}
	}
	if m == rgNone && any {
		return rgIgnore
	}
	return m
}

// skip reports whether the walk leaves out the entry at display path p
// (absolute path abs).
func (w *rgWalker) skip(p, abs, name string, isDir bool) bool {
	if m := w.o.globbed(p, isDir); m != rgNone {
		return m == rgIgnore
	}
	white := false
	if !w.o.noIgnore {
		switch w.ignored(abs, isDir) {
		case gitignore.Exclude:
			return true
		case gitignore.Include:
			white = true
		}
	}
	switch w.o.typed(name, isDir) {
	case rgIgnore:
		return true
	case rgWhite:
		white = true
	}
	return !white && !w.o.hidden && strings.HasPrefix(name, ".")
}

// walk visits the files under the directory p (absolute abs) at depth
// depth, calling fn with each file's display path; up are the inodes of
// the directories above (with -L, a link back to one is a loop).
func (w *rgWalker) walk(p, abs string, depth int, up []uint64, fn func(p string) bool) bool {
	if w.o.maxDepth >= 0 && depth >= w.o.maxDepth {
		return true
	}
	ents, err := w.c.readDir(abs)
	if err != nil {
		w.o.errs = true
		w.c.rgError("%s: %s", p, rustErr(err))
		return !w.c.canceled()
	}
	sortEntries(ents)
	for _, e := range ents {
		if w.c.canceled() {
			return false
		}
		cp := e.name
		if p != "" {
			cp = strings.TrimSuffix(p, "/") + "/" + e.name
			if p == "/" {
				cp = "/" + e.name
			}
		}
		ca := path.Join(abs, e.name)
		isDir := e.typ.IsDir()
		ino := e.ino
		if e.typ&fs.ModeSymlink != 0 {
			if !w.o.follow {
				continue
			}
			fi, err := w.c.stat(ca)
			if err != nil {
				w.o.errs = true
				ep := cp
				if p == "" {
					ep = "./" + cp // ripgrep's root when given no path
				}
				w.c.rgError("%s: IO error for operation on %s: %s", ep, ep, rustErr(err))
				continue
			}
			isDir, ino = fi.IsDir(), fi.ino
			if !isDir && !fi.mode.IsRegular() {
				continue
			}
		} else if !isDir && !e.typ.IsRegular() {
			continue
		}
		if w.skip(cp, ca, e.name, isDir) {
			continue
		}
		if isDir {
			if slices.Contains(up, ino) || len(up) >= maxTreeDepth {
				w.o.errs = true
				w.c.rgError("File system loop found: %s points to an ancestor", cp)
				continue
			}
			if !w.walk(cp, ca, depth+1, append(up[:len(up):len(up)], ino), fn) {
				return false
			}
			continue
		}
		if !fn(cp) {
			return false
		}
	}
	return true
}

// rgTypes are ripgrep 13's definitions of the file types agents name
// (rg --type-list); another type goes to the sandbox.
var rgTypes = map[string][]string{
	"c":        {"*.[chH]", "*.[chH].in", "*.cats"},
	"cmake":    {"*.cmake", "CMakeLists.txt"},
	"cpp":      {"*.[ChH]", "*.[ChH].in", "*.[ch]pp", "*.[ch]pp.in", "*.[ch]xx", "*.[ch]xx.in", "*.cc", "*.cc.in", "*.hh", "*.hh.in", "*.inl"},
	"cs":       {"*.cs"},
	"csharp":   {"*.cs"},
	"css":      {"*.css", "*.scss"},
	"docker":   {"*Dockerfile*"},
	"go":       {"*.go"},
	"html":     {"*.ejs", "*.htm", "*.html"},
	"java":     {"*.java", "*.jsp", "*.jspx", "*.properties"},
	"js":       {"*.js", "*.jsx", "*.vue"},
	"json":     {"*.json", "composer.lock"},
	"kotlin":   {"*.kt", "*.kts"},
	"lua":      {"*.lua"},
	"make":     {"*.mak", "*.mk", "[Gg][Nn][Uu]makefile", "[Gg][Nn][Uu]makefile.am", "[Gg][Nn][Uu]makefile.in", "[Mm]akefile", "[Mm]akefile.am", "[Mm]akefile.in"},
	"markdown": {"*.markdown", "*.md", "*.mdown", "*.mkdn"},
	"md":       {"*.markdown", "*.md", "*.mdown", "*.mkdn"},
	"php":      {"*.php", "*.php3", "*.php4", "*.php5", "*.phtml"},
	"protobuf": {"*.proto"},
	"py":       {"*.py"},
	"ruby":     {"*.gemspec", "*.rb", "*.rbw", ".irbrc", "Gemfile", "Rakefile", "config.ru"},
	"rust":     {"*.rs"},
	"scala":    {"*.sbt", "*.scala"},
	"sh": {"*.bash", "*.bashrc", "*.csh", "*.cshrc", "*.ksh", "*.kshrc", "*.sh", "*.tcsh", "*.zsh", ".bash_login", ".bash_logout",
		".bash_profile", ".bashrc", ".cshrc", ".kshrc", ".login", ".logout", ".profile", ".tcshrc", ".zlogin", ".zlogout", ".zprofile",
		".zshenv", ".zshrc", "bash_login", "bash_logout", "bash_profile", "bashrc", "profile", "zlogin", "zlogout", "zprofile", "zshenv", "zshrc"},
	"sql":   {"*.psql", "*.sql"},
	"swift": {"*.swift"},
	"tf":    {"*.tf"},
	"toml":  {"*.toml", "Cargo.lock"},
	"ts":    {"*.ts", "*.tsx"},
	"txt":   {"*.txt"},
	"xml":   {"*.dtd", "*.rng", "*.sch", "*.xhtml", "*.xjb", "*.xml", "*.xml.dist", "*.xsd", "*.xsl", "*.xslt"},
	"yaml":  {"*.yaml", "*.yml"},
}
