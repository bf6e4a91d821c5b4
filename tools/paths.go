package tools

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/computerfs/computerfs/kv"
	rules "github.com/computerfs/computerfs/policy"
	"github.com/computerfs/computerfs/spec"
	"github.com/computerfs/computerfs/wsfs"
)

// Root is where the workspace appears to agents, as in exec and the sandbox.
const Root = "/workspace"

// maxLinks is how many symbolic links one path may go through.
const maxLinks = 40

// maxPath is the longest path argument (Linux's PATH_MAX).
const maxPath = 4096

// show turns a store path ("/a/b", "/") into the path agents see.
func show(p string) string {
	if p == "/" || p == "" {
		return Root
	}
	return Root + p
}

// Refusal is a call refused by the policy or by the confinement to
// /workspace. Rule names what refused it ("policy deny[0] \"/secrets\"",
// "policy read_only", "confinement to /workspace"...). It is the type the
// workspace's path rules refuse with everywhere (package policy).
type Refusal = rules.Refusal

func confinement(format string, args ...any) error {
	return &Refusal{Rule: "confinement to " + Root, Msg: fmt.Sprintf(format, args...)}
}

// spelled checks a path argument and returns its names: absolute under
// /workspace or relative to it, valid UTF-8, no NUL.
func spelled(p string) ([]string, error) {
	if !utf8.ValidString(p) {
		return nil, fmt.Errorf("path %q is not valid UTF-8", p)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return nil, fmt.Errorf("path %q contains a NUL byte", p)
	}
	if len(p) > maxPath {
		return nil, fmt.Errorf("path of %d bytes is longer than the %d allowed", len(p), maxPath)
	}
	if strings.HasPrefix(p, "/") {
		rest, ok := strings.CutPrefix(p, Root)
		if !ok || rest != "" && rest[0] != '/' {
			return nil, confinement("%s is outside %s (give a path under %s, or relative to it)", p, Root, Root)
		}
		p = rest
	}
	var names []string
	for _, n := range strings.Split(p, "/") {
		if n != "" && n != "." {
			names = append(names, n)
		}
	}
	return names, nil
}

// resolve turns a path argument into the store path of what it names,
// with every symbolic link on the way replaced by its target (and the
// last one too with followLast). A path that climbs out of the workspace
// (by "..", an absolute path elsewhere or a link that points outside) is
// refused. Names that do not exist yet are kept as spelled, so a path to
// create resolves too.
func resolve(f *wsfs.FS, arg string, followLast bool) (string, error) {
	names, err := spelled(arg)
	if err != nil {
		return "", err
	}
	st := f.Store()
	type step struct {
		ino  uint64
		path string
	}
	stack := []step{{kv.RootIno, "/"}} // the directories walked, innermost last
	links := 0
	for i := 0; i < len(names); i++ {
		n := names[i]
		last := i == len(names)-1
		cur := stack[len(stack)-1]
		if n == ".." {
			if len(stack) == 1 {
				return "", confinement("%s climbs out of %s (..)", arg, Root)
			}
			stack = stack[:len(stack)-1]
			continue
		}
		next := path.Join(cur.path, n)
		if len(n) > kv.MaxNameLen {
			return "", &fs.PathError{Op: "resolve", Path: show(next), Err: syscall.ENAMETOOLONG}
		}
		a, err := st.Lookup(cur.ino, n)
		if errors.Is(err, kv.ErrNotFound) {
			// The rest does not exist: it can hold no links.
			for _, m := range names[i+1:] {
				if m == ".." {
					return "", &fs.PathError{Op: "resolve", Path: show(next), Err: fs.ErrNotExist}
				}
			}
			return path.Join(append([]string{next}, names[i+1:]...)...), nil
		}
		if err != nil {
			return "", &fs.PathError{Op: "resolve", Path: show(next), Err: kv.Errno(err)}
		}
		if a.Mode&kv.S_IFMT == kv.S_IFLNK && (!last || followLast) {
			links++
			if links > maxLinks {
				return "", fmt.Errorf("%s: too many levels of symbolic links", arg)
			}
			target, err := st.Readlink(a.Ino)
			if err != nil {
				return "", &fs.PathError{Op: "readlink", Path: show(next), Err: kv.Errno(err)}
			}
			rest := names[i+1:]
			if strings.HasPrefix(target, "/") {
				r, ok := strings.CutPrefix(target, Root)
				if !ok || r != "" && r[0] != '/' {
					return "", confinement("%s is a symbolic link to %s, outside %s", show(next), target, Root)
				}
				target, stack = r, stack[:1]
			}
			var tn []string
			for _, m := range strings.Split(target, "/") {
				if m != "" && m != "." {
					tn = append(tn, m)
				}
			}
			names = append(tn, rest...)
			i = -1
			continue
		}
		if !last && !a.IsDir() {
			return "", &fs.PathError{Op: "resolve", Path: show(next), Err: syscall.ENOTDIR}
		}
		stack = append(stack, step{a.Ino, next})
	}
	return stack[len(stack)-1].path, nil
}

// policy is a spec.Policy ready to use.
type policy struct {
	p          spec.Policy
	paths      *rules.Checker // the path rules, shared with exec's backends
	maxWrite   int64
	maxRead    int64
	maxOutput  int64
	backends   map[string]bool // nil: all
	denyCmds   []*regexpRule
	network    string
	maxTimeout int64 // ms
}

type regexpRule struct {
	rule string
	re   interface{ MatchString(string) bool }
}

// check refuses access to the store path p when a rule covers it: deny
// rules always, read-only rules and read-only mode when write is set.
func (pl *policy) check(p string, write bool) error {
	if r := pl.paths.Denied(p); r != nil {
		return &Refusal{Rule: r.Rule, Msg: show(p) + " is denied to tools", Errno: r.Errno}
	}
	if !write {
		return nil
	}
	var r *Refusal
	if err := pl.paths.Write(p); err != nil && errors.As(err, &r) {
		if r.Rule == "policy read_only" {
			return &Refusal{Rule: r.Rule, Msg: "the workspace is read-only for tools", Errno: r.Errno}
		}
		return &Refusal{Rule: r.Rule, Msg: show(p) + " is read-only for tools", Errno: r.Errno}
	}
	return nil
}

// denied tells whether a listing should hide p.
func (pl *policy) denied(p string) bool { return pl.paths.Denied(p) != nil }

// resolveFor resolves a path argument and checks it against the policy,
// as spelled and as resolved (so a link can neither reach a covered path
// nor make one reachable).
func (t *Tools) resolveFor(f *wsfs.FS, arg string, followLast, write bool) (string, error) {
	if arg == "" {
		return "", errors.New("path is empty (give a path under /workspace, or relative to it)")
	}
	p, err := resolve(f, arg, followLast)
	if err != nil {
		return "", err
	}
	if names, err := spelled(arg); err == nil && !containsDotDot(names) {
		if err := t.pol.check(path.Join(append([]string{"/"}, names...)...), write); err != nil {
			return "", err
		}
	}
	if err := t.pol.check(p, write); err != nil {
		return "", err
	}
	return p, nil
}

func containsDotDot(names []string) bool {
	for _, n := range names {
		if n == ".." {
			return true
		}
	}
	return false
}
