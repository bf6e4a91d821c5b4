// Package policy enforces a spec's path rules (deny, read_only_paths,
// read_only) in one place for every way the agent reaches the workspace:
// the agent tools, the shell fast path (through a guarded wsfs.FS) and the
// FUSE mount (for requests of the agent's uids, package fs).
//
// A rule is matched on the path a file really has in the workspace: the
// names of the directories it is in, after every symbolic link and ".."
// is resolved, never on how an argument was spelled. A rule that matches
// a directory covers everything under it. A file with several names (hard
// links) is covered when any of its names is.
//
//   - deny: the path can be neither read (open, list, readlink, stat,
//     xattrs) nor changed nor created, and a path under a denied
//     directory cannot be reached at all. Creating a new name that matches
//     a deny rule is refused too (deny: ["**/*.pem"] refuses creating
//     x.pem), and no denied file can be linked, renamed or copied to a
//     name the rule does not cover.
//   - read_only_paths: the path can be read but not changed: no write
//     open, truncate, create, mkdir, unlink, rmdir, rename from or to it
//     (nor of a directory holding it), link to or from it, symlink made
//     in it, chmod, chown, utimes, setxattr, removexattr.
//   - read_only: every change anywhere is refused.
//
// Refusals are *Refusal errors that unwrap to EACCES (deny) or EROFS
// (read-only), so programs see "Permission denied" and "Read-only file
// system".
package policy

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/computerfs/computerfs/spec"
)

// Root is where the workspace appears to the agent.
const Root = "/workspace"

// Show turns a store path ("/a/b", "/") into the path agents see.
func Show(p string) string {
	if p == "/" || p == "" {
		return Root
	}
	return Root + p
}

// Refusal is an operation refused by a rule. Rule names it ("policy
// deny[0] \"/secrets\"", "policy read_only"...); Errno is what a program
// gets.
type Refusal struct {
	Rule  string
	Msg   string
	Errno syscall.Errno
}

func (r *Refusal) Error() string { return fmt.Sprintf("refused by %s: %s", r.Rule, r.Msg) }

// Unwrap lets errors.Is(err, syscall.EACCES) and errno mapping see it.
func (r *Refusal) Unwrap() error {
	if r.Errno == 0 {
		return syscall.EACCES
	}
	return r.Errno
}

// Checker is a policy's path rules, compiled. A nil *Checker allows
// everything; every method is safe for concurrent use.
type Checker struct {
	// deny holds the spec's deny rules, then the paths DenyPath added
	// (a git repository whose history holds a denied file); it is
	// replaced whole, never changed in place.
	deny     atomic.Pointer[[]glob]
	denyMu   sync.Mutex // DenyPath and Allow, one at a time
	ro       []glob
	readOnly bool
	paths    pathCache
}

// glob is one compiled pattern.
type glob struct {
	rule  string // "policy deny[0] \"/secrets\""
	parts []part
}

// part is one component of a pattern.
type part struct {
	kind byte   // see below
	s    string // literal, suffix, prefix or pattern
}

const (
	pAny     byte = iota // "**": any number of names
	pStar                // "*": any one name
	pLiteral             // no metacharacters
	pSuffix              // "*.go"
	pPrefix              // "Makefile*"
	pPattern             // anything else: path.Match
)

// New compiles p's path rules; nil (allow everything) when p has none.
// p must have been validated (spec.Parse does).
func New(p *spec.Policy) *Checker {
	if p == nil || len(p.Deny) == 0 && len(p.ReadOnlyPaths) == 0 && !p.ReadOnly {
		return nil
	}
	c := &Checker{readOnly: p.ReadOnly}
	var deny []glob
	for i, g := range p.Deny {
		deny = append(deny, compile(fmt.Sprintf("policy deny[%d] %q", i, g), g))
	}
	c.deny.Store(&deny)
	for i, g := range p.ReadOnlyPaths {
		c.ro = append(c.ro, compile(fmt.Sprintf("policy read_only_paths[%d] %q", i, g), g))
	}
	return c
}

func compile(rule, g string) glob {
	gl := glob{rule: rule}
	for _, s := range spec.GlobParts(g) {
		var pt part
		switch {
		case s == "**":
			pt.kind = pAny
			if n := len(gl.parts); n > 0 && gl.parts[n-1].kind == pAny {
				continue // "**/**" is "**"
			}
		case s == "*":
			pt.kind = pStar
		case !strings.ContainsAny(s, `*?[\`):
			pt = part{pLiteral, s}
		case s[0] == '*' && !strings.ContainsAny(s[1:], `*?[\`):
			pt = part{pSuffix, s[1:]}
		case s[len(s)-1] == '*' && !strings.ContainsAny(s[:len(s)-1], `*?[\`):
			pt = part{pPrefix, s[:len(s)-1]}
		default:
			pt = part{pPattern, s}
		}
		gl.parts = append(gl.parts, pt)
	}
	return gl
}

func (pt *part) match(name string) bool {
	switch pt.kind {
	case pStar:
		return true
	case pLiteral:
		return name == pt.s
	case pSuffix:
		return strings.HasSuffix(name, pt.s)
	case pPrefix:
		return strings.HasPrefix(name, pt.s)
	}
	ok, _ := path.Match(pt.s, name)
	return ok
}

// Names returns the names of the clean path p, as DeniedLeaf takes them.
func Names(p string) []string { return names(p, nil) }

// names splits a clean path into its names, in buf when they fit.
func names(p string, buf []string) []string {
	out := buf[:0]
	for len(p) > 0 {
		if p[0] == '/' {
			p = p[1:]
			continue
		}
		i := strings.IndexByte(p, '/')
		if i < 0 {
			i = len(p)
		}
		if n := p[:i]; n != "." {
			out = append(out, n)
		}
		p = p[i:]
	}
	return out
}

// covers tells whether pat matches names or one of its leading parts
// (an ancestor).
func covers(pat []part, names []string) bool {
	for len(pat) > 0 {
		if pat[0].kind == pAny {
			pat = pat[1:]
			if len(pat) == 0 {
				return true
			}
			for i := 0; i <= len(names); i++ {
				if covers(pat, names[i:]) {
					return true
				}
			}
			return false
		}
		if len(names) == 0 || !pat[0].match(names[0]) {
			return false
		}
		pat, names = pat[1:], names[1:]
	}
	return true
}

// matches tells whether pat matches names exactly (not an ancestor).
func matches(pat []part, names []string) bool {
	for len(pat) > 0 {
		if pat[0].kind == pAny {
			pat = pat[1:]
			if len(pat) == 0 {
				return true
			}
			// what follows "**" must match a tail of names
			for i := len(names) - len(minNames(pat)); i >= 0; i-- {
				if matches(pat, names[i:]) {
					return true
				}
			}
			return false
		}
		if len(names) == 0 || !pat[0].match(names[0]) {
			return false
		}
		pat, names = pat[1:], names[1:]
	}
	return len(names) == 0
}

// minNames is the parts of pat that match exactly one name each, up to
// its next "**": at least that many names must be left for it.
func minNames(pat []part) []part {
	for i, p := range pat {
		if p.kind == pAny {
			return pat[:i]
		}
	}
	return pat
}

// below tells whether pat could match some path strictly under names
// (or covers names itself).
func below(pat []part, names []string) bool {
	for len(pat) > 0 {
		if len(names) == 0 {
			return true // what is left can match names further down
		}
		if pat[0].kind == pAny {
			return true // "**" then anything: a deeper path may match
		}
		if !pat[0].match(names[0]) {
			return false
		}
		pat, names = pat[1:], names[1:]
	}
	return true
}

// firstCovering returns the first of globs that covers p, or nil.
func firstCovering(globs []glob, p string) *glob {
	if len(globs) == 0 {
		return nil
	}
	var buf [32]string
	ns := names(p, buf[:])
	for i := range globs {
		if covers(globs[i].parts, ns) {
			return &globs[i]
		}
	}
	return nil
}

// anyBelow tells whether one of globs may cover something under p.
func anyBelow(globs []glob, p string) bool {
	var buf [32]string
	ns := names(p, buf[:])
	for i := range globs {
		if below(globs[i].parts, ns) {
			return true
		}
	}
	return false
}

// Active tells whether there is any rule to enforce.
func (c *Checker) Active() bool { return c != nil }

// denies returns the deny rules in force.
func (c *Checker) denies() []glob {
	if p := c.deny.Load(); p != nil {
		return *p
	}
	return nil
}

// HasDeny tells whether there are deny rules.
func (c *Checker) HasDeny() bool { return c != nil && len(c.denies()) > 0 }

// DenyPath adds a deny rule for the store path p ("/repo/.git": it and
// everything under it, whatever metacharacters its names hold), named
// rule in refusals, to the rules in force: every request checked after
// it returns sees it. Adding a rule already there does nothing.
func (c *Checker) DenyPath(rule, p string) {
	c.denyMu.Lock()
	defer c.denyMu.Unlock()
	old := c.denies()
	for _, g := range old {
		if g.rule == rule {
			return
		}
	}
	g := glob{rule: rule}
	for _, n := range names(p, nil) {
		g.parts = append(g.parts, part{pLiteral, n})
	}
	deny := append(slices.Clip(old), g)
	c.deny.Store(&deny)
}

// Allow removes the rule DenyPath added as rule, if it is there.
func (c *Checker) Allow(rule string) {
	c.denyMu.Lock()
	defer c.denyMu.Unlock()
	old := c.denies()
	deny := slices.DeleteFunc(slices.Clone(old), func(g glob) bool { return g.rule == rule })
	c.deny.Store(&deny)
}

// ReadOnly tells whether the whole workspace is read-only.
func (c *Checker) ReadOnly() bool { return c != nil && c.readOnly }

// Denied returns the deny rule that covers the store path p ("/a/b",
// clean and resolved), or nil.
func (c *Checker) Denied(p string) *Refusal {
	if c == nil {
		return nil
	}
	if g := firstCovering(c.denies(), p); g != nil {
		return &Refusal{Rule: g.rule, Msg: Show(p) + " is denied", Errno: syscall.EACCES}
	}
	return nil
}

// DeniedLeaf is Denied for a path walked name by name, ns its names,
// whose every ancestor has been found not denied: only a rule that
// matches the path itself can cover it now, and the path's string is
// made only for the refusal. It is what a walk checks at each step
// (Denied of each prefix would match every rule against every ancestor
// again: quadratic in the depth).
func (c *Checker) DeniedLeaf(ns []string) *Refusal {
	if c == nil {
		return nil
	}
	deny := c.denies()
	for i := range deny {
		if matches(deny[i].parts, ns) {
			return &Refusal{Rule: deny[i].rule, Msg: Show("/"+strings.Join(ns, "/")) + " is denied", Errno: syscall.EACCES}
		}
	}
	return nil
}

// Read refuses reading p (its content, listing, target, attributes) when
// a deny rule covers it.
func (c *Checker) Read(p string) error {
	if r := c.Denied(p); r != nil {
		return r
	}
	return nil
}

// Write refuses changing, creating or removing p when a rule covers it.
func (c *Checker) Write(p string) error {
	if c == nil {
		return nil
	}
	if r := c.Denied(p); r != nil {
		return r
	}
	if c.readOnly {
		return &Refusal{Rule: "policy read_only", Msg: "the workspace is read-only", Errno: syscall.EROFS}
	}
	if g := firstCovering(c.ro, p); g != nil {
		return &Refusal{Rule: g.rule, Msg: Show(p) + " is read-only", Errno: syscall.EROFS}
	}
	return nil
}

// check is Read or Write.
func (c *Checker) check(p string, write bool) error {
	if write {
		return c.Write(p)
	}
	return c.Read(p)
}

// ReadOnlyBelow tells whether a read-only rule may cover something
// strictly under the directory p (so that moving p changes it).
func (c *Checker) ReadOnlyBelow(p string) bool {
	if c == nil {
		return false
	}
	return c.readOnly || anyBelow(c.ro, p)
}

// DeniedBelow tells whether a deny rule may cover something strictly under
// the directory p.
func (c *Checker) DeniedBelow(p string) bool {
	return c != nil && anyBelow(c.denies(), p)
}
