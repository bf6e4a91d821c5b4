package gitcmd

import (
	"bytes"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	formatcfg "github.com/go-git/go-git/v5/plumbing/format/config"
)

func init() {
	gitSubs["remote"] = &gitSub{run: gitRemote, flags: flags("--verbose|-v")}
	gitChecks["remote"] = func(a *gitArgs) string {
		if len(a.args) > 0 {
			return "changing remotes is not supported"
		}
		return ""
	}
	gitSubs["tag"] = &gitSub{run: gitTag, flags: flags("--list|-l", "--delete|-d")}
	gitSubs["config"] = &gitSub{run: gitConfig, flags: flags("--get", "--local")}
	gitChecks["config"] = func(a *gitArgs) string {
		if len(a.args) == 0 || len(a.args) > 2 || a.has("--get") && len(a.args) != 1 {
			return "only reading or setting one key of the repository's configuration is supported"
		}
		sec, _, _, ok := splitConfigKey(a.args[0])
		if !ok {
			return ""
		}
		if len(a.args) == 2 && (sec == "remote" || sec == "branch" || sec == "submodule" || sec == "include" || sec == "includeif") {
			return "setting " + sec + ".* is not supported"
		}
		return ""
	}
}

func gitRemote(g *gitCmd) int {
	cfg := g.config()
	names := make([]string, 0, len(cfg.Remotes))
	for n := range cfg.Remotes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if !g.a.has("--verbose") {
			fmt.Fprintln(g.out, n)
			continue
		}
		r := cfg.Remotes[n]
		url := ""
		if len(r.URLs) > 0 {
			url = r.URLs[0]
		}
		push := cfg.Raw.Section("remote").Subsection(n).Option("pushurl")
		if push == "" {
			push = url
		}
		fmt.Fprintf(g.out, "%s\t%s (fetch)\n%s\t%s (push)\n", n, url, n, push)
	}
	return 0
}

func gitTag(g *gitCmd) int {
	a := g.a
	if a.has("--delete") {
		if len(a.args) == 0 {
			return g.usage("tag -d needs a name")
		}
		for _, n := range a.args {
			ref := plumbing.NewTagReferenceName(n)
			r, err := g.repo.Storer.Reference(ref)
			if err != nil {
				g.out.Flush()
				fmt.Fprintf(g.stderr, "error: tag '%s' not found.\n", n)
				return 1
			}
			if err := g.repo.Storer.RemoveReference(ref); err != nil {
				return g.fatal("%v", err)
			}
			fmt.Fprintf(g.out, "Deleted tag '%s' (was %s)\n", n, g.abbrev(r.Hash()))
		}
		return 0
	}
	if len(a.args) == 0 || a.has("--list") {
		refs, err := g.repo.Storer.IterReferences()
		if err != nil {
			return g.fatal("%v", err)
		}
		var names []string
		refs.ForEach(func(r *plumbing.Reference) error {
			if r.Name().IsTag() {
				names = append(names, r.Name().Short())
			}
			return nil
		})
		sort.Strings(names)
		for _, n := range names {
			ok := len(a.args) == 0
			for _, p := range a.args {
				if m, _ := path.Match(p, n); m {
					ok = true
				}
			}
			if ok {
				fmt.Fprintln(g.out, n)
			}
		}
		return 0
	}
	if len(a.args) > 2 {
		return g.usage("too many arguments")
	}
	name := a.args[0]
	if !validBranch(name) {
		return g.fatal("'%s' is not a valid tag name.", name)
	}
	rev := "HEAD"
	if len(a.args) == 2 {
		rev = a.args[1]
	}
	h, err := g.resolve(rev)
	if err != nil {
		return g.fatal("Failed to resolve '%s' as a valid ref.", rev)
	}
	ref := plumbing.NewTagReferenceName(name)
	if _, err := g.repo.Storer.Reference(ref); err == nil {
		return g.fatal("tag '%s' already exists", name)
	}
	if err := g.repo.Storer.SetReference(plumbing.NewHashReference(ref, h)); err != nil {
		return g.fatal("%v", err)
	}
	return 0
}

// splitConfigKey splits section.key or section.sub.section.key.
func splitConfigKey(k string) (sec, sub, key string, ok bool) {
	i, j := strings.IndexByte(k, '.'), strings.LastIndexByte(k, '.')
	if i <= 0 || j == len(k)-1 {
		return "", "", "", false
	}
	sec, key = strings.ToLower(k[:i]), strings.ToLower(k[j+1:])
	if i != j {
		sub = k[i+1 : j]
	}
	return sec, sub, key, true
}

// gitConfig reads or sets one key of .git/config (the repository's own
// configuration; the sandbox's global one is not seen here).
func gitConfig(g *gitCmd) int {
	a := g.a
	sec, sub, key, ok := splitConfigKey(a.args[0])
	if !ok {
		g.out.Flush()
		fmt.Fprintf(g.stderr, "error: key does not contain a section: %s\n", a.args[0])
		return 2
	}
	p := g.file(".git/config")
	data, err := g.wfs.ReadFile(p)
	if err != nil && !isNotExist(err) {
		return g.fatal("%v", err)
	}
	raw := formatcfg.New()
	if err := formatcfg.NewDecoder(bytes.NewReader(data)).Decode(raw); err != nil {
		return g.fatal("bad config file %s: %v", p, err)
	}
	opts := raw.Section(sec).Options
	if sub != "" {
		opts = raw.Section(sec).Subsection(sub).Options
	}
	if len(a.args) == 1 {
		if !opts.Has(key) {
			return 1
		}
		fmt.Fprintln(g.out, opts.Get(key))
		return 0
	}
	if sub != "" {
		raw.Section(sec).Subsection(sub).SetOption(key, a.args[1])
	} else {
		raw.Section(sec).SetOption(key, a.args[1])
	}
	var buf bytes.Buffer
	if err := formatcfg.NewEncoder(&buf).Encode(raw); err != nil {
		return g.fatal("%v", err)
	}
	lock := p + ".lock"
	if err := g.wfs.WriteFile(lock, buf.Bytes(), 0o644); err != nil {
		return g.fatal("could not lock config file %s: %s", p, g.host.ErrText(err))
	}
	if err := g.wfs.Rename(lock, p); err != nil {
		return g.fatal("%v", err)
	}
	return 0
}

// gitStashList prints the stash entries, newest first, from the reflog of
// refs/stash (which git stash in the sandbox writes).
