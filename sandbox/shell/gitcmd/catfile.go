package gitcmd

// git cat-file -t, -s, -e, -p and "git cat-file TYPE OBJECT": one object,
// streamed (a blob is never read whole).

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

func init() {
	gitSubs["cat-file"] = &gitSub{run: gitCatFile, flags: flags("-t", "-s", "-e", "-p")}
	gitChecks["cat-file"] = func(a *gitArgs) string {
		modes := 0
		for _, f := range []string{"-t", "-s", "-e", "-p"} {
			if a.has(f) {
				modes++
			}
		}
		switch {
		case modes == 1 && len(a.args) == 1 && !a.dash:
		case modes == 0 && len(a.args) == 2 && !a.dash && (a.args[0] == "blob" || a.args[0] == "commit" || a.args[0] == "tag"):
		default:
			return "only one of -t, -s, -e, -p with one object, or blob|commit|tag OBJECT, is supported"
		}
		return ""
	}
}

// objectName finds the object a cat-file argument names: REV:PATH, a
// full hash (which need not exist), a tag (not peeled) or a revision.
func (g *gitCmd) objectName(name string) (plumbing.Hash, error) {
	if rev, p, ok := strings.Cut(name, ":"); ok && rev != "" {
		c, err := g.resolveCommit(rev)
		if err != nil {
			return plumbing.ZeroHash, errBadName
		}
		t, err := c.Tree()
		if err != nil {
			return plumbing.ZeroHash, err
		}
		p = strings.Trim(p, "/")
		if p == "" {
			return t.Hash, nil
		}
		e, err := t.FindEntry(p)
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("path '%s' does not exist in '%s'", p, rev)
		}
		return e.Hash, nil
	}
	if len(name) == 40 && plumbing.IsHash(name) {
		return plumbing.NewHash(name), nil
	}
	if r, err := g.repo.Storer.Reference(plumbing.NewTagReferenceName(name)); err == nil && r.Type() == plumbing.HashReference {
		return r.Hash(), nil
	}
	h, err := g.resolve(name)
	if err != nil {
		return plumbing.ZeroHash, errBadName
	}
	return h, nil
}

var errBadName = errors.New("not a valid object name")

func gitCatFile(g *gitCmd) int {
	a := g.a
	name := a.args[len(a.args)-1]
	h, err := g.objectName(name)
	if err != nil {
		if err == errBadName {
			return g.fatal("Not a valid object name %s", name)
		}
		return g.fatal("%v", err)
	}
	obj, err := g.st.EncodedObject(plumbing.AnyObject, h)
	if err != nil {
		if a.has("-e") {
			return 1
		}
		if a.has("-p") || len(a.args) == 2 {
			return g.fatal("Not a valid object name %s", name)
		}
		return g.fatal("git cat-file: could not get object info")
	}
	switch {
	case a.has("-e"):
		return 0
	case a.has("-t"):
		fmt.Fprintln(g.out, obj.Type())
		return 0
	case a.has("-s"):
		fmt.Fprintln(g.out, obj.Size())
		return 0
	case len(a.args) == 2:
		if obj.Type().String() != a.args[0] {
			if a.args[0] == "blob" {
				return g.fatal("git cat-file %s: bad file", name)
			}
			return g.usage("reading an object as another type is not supported")
		}
	case obj.Type() == plumbing.TreeObject:
		t, err := object.DecodeTree(g.st, obj)
		if err != nil {
			return g.fatal("%v", err)
		}
		for _, e := range t.Entries {
			kind := "blob"
			switch e.Mode {
			case filemode.Dir:
				kind = "tree"
			case filemode.Submodule:
				kind = "commit"
			}
			fmt.Fprintf(g.out, "%06o %s %s\t%s\n", uint32(e.Mode), kind, e.Hash, quotePath(e.Name))
		}
		return 0
	}
	r, err := obj.Reader()
	if err != nil {
		return g.fatal("%v", err)
	}
	defer r.Close()
	if _, err := io.Copy(g.out, ctxReader{g.ctx, r}); err != nil {
		if g.host.OutputStopped(err) {
			return 1
		}
		return g.fatal("%v", err)
	}
	return 0
}

// ctxReader stops a long copy when the call is cancelled.
type ctxReader struct {
	ctx interface{ Err() error }
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
