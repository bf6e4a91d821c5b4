package gitcmd

// git clean -n / -f, with -d (directories) and -x (ignored files too), on
// the whole work tree or the working directory's part of it.

import (
	"fmt"
	"sort"
	"strings"
	"syscall"

	"github.com/go-git/go-git/v5/plumbing/format/index"

	"github.com/computerfs/computerfs/kv"
)

func init() {
	gitSubs["clean"] = &gitSub{run: gitClean, flags: flags("--dry-run|-n", "--force|-f", "-d", "-x", "--quiet|-q")}
	gitChecks["clean"] = func(a *gitArgs) string {
		if len(a.args) > 0 || a.dash {
			return "git clean with paths is not supported"
		}
		if len(a.opts["--force"]) > 1 {
			return "git clean -ff is not supported"
		}
		return ""
	}
}

func gitClean(g *gitCmd) int {
	a := g.a
	dry := a.has("--dry-run")
	if !dry && !a.has("--force") && g.config().Raw.Section("clean").Option("requireforce") != "false" {
		return g.fatal("clean.requireForce defaults to true and neither -i, -n, nor -f given; refusing to clean")
	}
	idx, err := g.readIndex()
	if err != nil {
		return g.fatal("%v", err)
	}
	c := &cleaner{g: g, dirs: a.has("-d"), all: a.has("-x"), ig: newIgnorer(g)}
	c.index(idx)
	start := strings.TrimSuffix(g.prefix, "/")
	if start != "" && !c.trackedDir(start) {
		return g.usage("cleaning from a directory that holds no tracked file is not supported")
	}
	if err := c.walk(start, false); err != nil {
		return g.fatal("%v", err)
	}
	sort.Strings(c.out)
	for _, p := range c.out {
		shown := g.rel(p)
		if strings.HasSuffix(p, "/") {
			shown = g.rel(strings.TrimSuffix(p, "/")) + "/"
		}
		shown = quotePath(shown)
		if dry {
			fmt.Fprintf(g.out, "Would remove %s\n", shown)
			continue
		}
		if err := g.wfs.RemoveAllContext(g.ctx, g.file(strings.TrimSuffix(p, "/"))); err != nil {
			g.out.Flush()
			fmt.Fprintf(g.stderr, "warning: failed to remove %s: %s\n", shown, g.host.ErrText(err))
			continue
		}
		if !a.has("--quiet") {
			fmt.Fprintf(g.out, "Removing %s\n", shown)
		}
	}
	if c.failed {
		return 1
	}
	return 0
}

type cleaner struct {
	g         *gitCmd
	dirs, all bool // -d, -x
	ig        *ignorer
	names     []string // the index's paths, sorted
	out       []string // what to remove; directories end in "/"
	failed    bool     // a directory's entries could not be stat'ed: exit 1
}

func (c *cleaner) index(idx *index.Index) {
	for _, e := range idx.Entries {
		c.names = append(c.names, e.Name)
	}
	sort.Strings(c.names)
}

func (c *cleaner) tracked(p string) bool {
	i := sort.SearchStrings(c.names, p)
	return i < len(c.names) && c.names[i] == p
}

func (c *cleaner) trackedDir(d string) bool {
	i := sort.SearchStrings(c.names, d+"/")
	return i < len(c.names) && strings.HasPrefix(c.names[i], d+"/")
}

func (c *cleaner) entries(dir string) ([]kv.Dirent, error) {
	m, err := c.g.listDir(dir)
	if err != nil {
		return nil, err
	}
	ents := make([]kv.Dirent, 0, len(m))
	for _, d := range m {
		if d.Name != ".git" {
			ents = append(ents, d)
		}
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name < ents[j].Name })
	return ents, nil
}

func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// walk collects what git clean removes under dir; untracked: dir is not
// in the index (and holds something clean must keep).
func (c *cleaner) walk(dir string, untracked bool) error {
	ents, err := c.entries(dir)
	if err != nil {
		return err
	}
	for _, d := range ents {
		if err := c.g.ctx.Err(); err != nil {
			return err
		}
		p := join(dir, d.Name)
		if d.Type != kv.S_IFDIR {
			if !c.tracked(p) && (c.all || !c.ig.ignored(p, false)) {
				c.out = append(c.out, p)
			}
			continue
		}
		if c.tracked(p) || c.isRepo(p) {
			continue // a submodule or a nested repository
		}
		if c.trackedDir(p) {
			if err := c.walk(p, false); err != nil {
				return err
			}
			continue
		}
		if !c.dirs || !c.all && c.ig.ignored(p, true) {
			continue
		}
		if unstattable, err := c.unstattable(p); err != nil || unstattable {
			if err != nil {
				return err
			}
			continue
		}
		keep, err := c.keeps(p)
		if err != nil {
			return err
		}
		if !keep {
			c.out = append(c.out, p+"/")
			continue
		}
		if err := c.walk(p, true); err != nil {
			return err
		}
	}
	return nil
}

// unstattable reports whether the untracked directory dir lists entries
// the agent may not stat (it may read it, not search it): git warns of
// each ("could not lstat"), keeps the directory and exits 1.
func (c *cleaner) unstattable(dir string) (bool, error) {
	di, err := c.g.dirInfo(dir)
	if err != nil || di.err != nil || di.d.Search() == nil || len(di.ents) == 0 {
		return false, err
	}
	c.ig.dirPatterns(dir) // git reads its .gitignore as it enters it
	names := make([]string, 0, len(di.ents))
	for n := range di.ents {
		names = append(names, n)
	}
	sort.Strings(names)
	c.g.out.Flush()
	for _, n := range names {
		fmt.Fprintf(c.g.stderr, "warning: could not lstat %s/%s\n: %s\n", dir, n, c.g.host.ErrText(syscall.EACCES))
	}
	c.failed = true
	return true, nil
}

// keeps reports whether an untracked directory holds something clean
// keeps (an ignored file without -x, a nested repository), so that it
// is not removed whole.
func (c *cleaner) keeps(dir string) (bool, error) {
	ents, err := c.entries(dir)
	if err != nil {
		return false, err
	}
	for _, d := range ents {
		if err := c.g.ctx.Err(); err != nil {
			return false, err
		}
		p := join(dir, d.Name)
		isDir := d.Type == kv.S_IFDIR
		if !c.all && c.ig.ignored(p, isDir) {
			return true, nil
		}
		if isDir {
			if c.isRepo(p) {
				return true, nil
			}
			if k, err := c.keeps(p); err != nil || k {
				return k, err
			}
		}
	}
	return false, nil
}

// isRepo looks dir/.git up, as git does (a stat, not a listing: a
// directory the agent may search but not list is still seen as a
// repository, and one it may not search is not opened).
func (c *cleaner) isRepo(dir string) bool {
	_, err := c.g.lstatWork(dir + "/.git")
	return err == nil
}
