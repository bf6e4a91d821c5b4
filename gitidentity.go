package computerfs

import (
	"cmp"
	"strings"

	"github.com/computerfs/computerfs/spec"
)

// gitIdentity is who the commits and reflog entries made in the workspace
// are by when the agent configured nobody (git config user.name in the
// repository, GIT_AUTHOR_NAME, -c): the author of the spec's first git
// source that names one, else spec.DefaultGitAuthor, so that the agent's
// first `git commit` works on either backend.
func gitIdentity(sp *spec.Spec) (name, email string) {
	author := ""
	if sp != nil {
		for _, s := range sp.Sources {
			if s.Git != nil && s.Git.Author != "" {
				author = s.Git.Author
				break
			}
		}
	}
	name, email, err := spec.ParseAuthor(cmp.Or(author, spec.DefaultGitAuthor))
	if err != nil { // the spec was validated
		name, email, _ = spec.ParseAuthor(spec.DefaultGitAuthor)
	}
	return name, email
}

// gitConfig is an identity as the sandbox's git system configuration.
func gitConfig(name, email string) string {
	return "[user]\n\tname = " + gitQuote(name) + "\n\temail = " + gitQuote(email) + "\n"
}

// gitQuote makes s a git configuration value that reads back as s: quoted
// (so that ; and # are not comments and spaces stay), with " and \
// escaped. ParseAuthor refuses newlines and NUL.
func gitQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}
