package computerfs

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/computerfs/computerfs/sandbox/shell"
	"github.com/computerfs/computerfs/spec"
)

// gitIdentity is who the commits and reflog entries made in the workspace
// are by when the agent configured nobody (git config user.name in the
// repository, GIT_AUTHOR_NAME, -c), so that the agent's first `git
// commit` works on either backend: in a git source's repository (or one
// under it), the source's author:; anywhere else the author of the spec's
// first git source that names one, else spec.DefaultGitAuthor.
type gitIdentity struct {
	name, email string
	dirs        []shell.GitIdentity // the sources' (Dir in the sandbox's namespace)
}

func newGitIdentity(sp *spec.Spec) gitIdentity {
	var id gitIdentity
	if sp != nil {
		for _, s := range sp.Sources {
			if s.Git == nil || s.Git.Author == "" {
				continue
			}
			name, email, err := spec.ParseAuthor(s.Git.Author)
			if err != nil { // the spec was validated
				continue
			}
			if id.name == "" {
				id.name, id.email = name, email
			}
			id.dirs = append(id.dirs, shell.GitIdentity{Dir: path.Join("/workspace", s.Path), Name: name, Email: email})
		}
	}
	if id.name == "" {
		id.name, id.email, _ = spec.ParseAuthor(spec.DefaultGitAuthor)
	}
	// Shallower first: in git's configuration the last match wins.
	slices.SortStableFunc(id.dirs, func(a, b shell.GitIdentity) int { return len(a.Dir) - len(b.Dir) })
	return id
}

// sandboxConfig is the identity as the sandbox's git system
// configuration: the default, and an includeIf of its file for each git
// source's directory.
func (id gitIdentity) sandboxConfig() (string, map[string]string) {
	var b strings.Builder
	b.WriteString(userSection(id.name, id.email))
	includes := map[string]string{}
	for i, d := range id.dirs {
		file := fmt.Sprintf("source-%d", i)
		includes[file] = userSection(d.Name, d.Email)
		// The deeper directories come last and win, as the fast path's
		// longest match.
		fmt.Fprintf(&b, "[includeIf %s]\n\tpath = %s\n", gitQuote("gitdir:"+globEscape(d.Dir)+"/"), file)
	}
	return b.String(), includes
}

func userSection(name, email string) string {
	return "[user]\n\tname = " + gitQuote(name) + "\n\temail = " + gitQuote(email) + "\n"
}

// gitQuote makes s a quoted git configuration value (or subsection name)
// that reads back as s: ; and # are not comments, spaces stay, " and \
// are escaped. ParseAuthor refuses newlines and NUL, and a source path
// has neither.
func gitQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// globEscape makes a path match itself only in a gitdir: pattern.
func globEscape(p string) string {
	return strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`).Replace(p)
}
