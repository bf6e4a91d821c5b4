// Package spec reads workspace spec files: YAML documents that declare what
// a workspace holds (git repositories, S3 prefixes, local directories and
// inline files, each at a path inside the workspace). Parse checks
// everything that can be checked without touching the network and names
// the line and the field of every mistake.
package spec

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Spec is a parsed workspace spec.
type Spec struct {
	Sources []Source `yaml:"sources" json:"sources"`
	// Owner owns the imported files (default: the agent identity, so that
	// the agent can edit them; name another to keep them from it).
	Owner *Owner `yaml:"owner,omitempty" json:"owner,omitempty"`
	// Agent is the host uid and gid of the workspace's agent: what it
	// writes through any path (fast path, tools, sandbox, mount) belongs
	// to it (default: one allocated for the workspace; see
	// docs/security.md). Never root.
	Agent *Owner `yaml:"agent,omitempty" json:"agent,omitempty"`
	// Policy gates the agent tools (nil: everything allowed).
	Policy *Policy `yaml:"policy,omitempty" json:"policy,omitempty"`
	// Sync tunes the write-back of sources that have it.
	Sync *Sync `yaml:"sync,omitempty" json:"sync,omitempty"`
	// Quota bounds what the workspace holds (its files' logical sizes,
	// names, inodes, extended attributes; kv.Options.Quota), e.g. "10GiB";
	// 0: none. `computerfs mount --quota` overrides it.
	Quota Size `yaml:"quota,omitempty" json:"quota,omitempty"`
	// Name names the workspace: its git sources push to
	// computerfs/NAME unless they name a branch (default: the base name
	// of the store's directory).
	Name string `yaml:"name,omitempty" json:"name,omitempty"`
}

// Sync tunes write-back (S3 write_back, git push).
type Sync struct {
	// Debounce is how long a path must be left alone before it is written
	// back (default 1s); closing a written file or fsync ends it early.
	Debounce Duration `yaml:"debounce,omitempty" json:"debounce,omitempty"`
	// JournalRetention is how long journal records are kept once every
	// source has synced them (default 168h; "0s" drops them at once).
	JournalRetention *Duration `yaml:"journal_retention,omitempty" json:"journal_retention,omitempty"`
}

// Duration is a time span, written in YAML like Go's durations ("1s",
// "500ms", "168h").
type Duration time.Duration

// UnmarshalYAML parses a duration.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil || v < 0 {
		return fmt.Errorf("line %d: duration %q: want a non-negative span like 1s, 500ms or 168h", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// Owner is a numeric user and group.
type Owner struct {
	UID uint32 `yaml:"uid" json:"uid"`
	GID uint32 `yaml:"gid" json:"gid"`
}

// Source is one entry of sources: a path in the workspace and exactly one of
// Git, S3, Dir and Content.
type Source struct {
	// Path is where the source appears in the workspace, as an absolute,
	// clean path ("/repo" is MOUNTPOINT/repo and /workspace/repo).
	Path    string  `yaml:"path" json:"path"`
	Git     *Git    `yaml:"git,omitempty" json:"git,omitempty"`
	S3      *S3     `yaml:"s3,omitempty" json:"s3,omitempty"`
	Dir     string  `yaml:"dir,omitempty" json:"dir,omitempty"`         // a local directory, copied in
	Content *string `yaml:"content,omitempty" json:"content,omitempty"` // an inline file
	Mode    *Mode   `yaml:"mode,omitempty" json:"mode,omitempty"`       // of the inline file (default 0644)

	Line int `yaml:"-" json:"-"` // where the entry starts in the spec file
}

// Git is a git repository to check out.
type Git struct {
	URL   string `yaml:"url" json:"url"`                         // https, ssh, file URL or a local path
	Ref   string `yaml:"ref,omitempty" json:"ref,omitempty"`     // branch, tag or commit (default: the remote's HEAD)
	Depth int    `yaml:"depth,omitempty" json:"depth,omitempty"` // 0: the whole history
	// Push writes the workspace's commits back: `push: true` (the
	// defaults) or a mapping of PushOptions.
	Push Push `yaml:"push,omitempty" json:"push,omitzero"`
	// Branch is where pushes go, the same as push.branch (default
	// computerfs/NAME, NAME the workspace's: never the branch checked
	// out, which the agent's pushes would race).
	Branch string `yaml:"branch,omitempty" json:"branch,omitempty"`
	// Author signs the commits that push makes of the work tree's changes,
	// as "Name <email>" (default DefaultGitAuthor); it is the committer too.
	Author string `yaml:"author,omitempty" json:"author,omitempty"`
	// Message is the first line of those commits (default "computerfs:
	// update N files"); the changed paths follow it, one a line.
	Message string `yaml:"message,omitempty" json:"message,omitempty"`
	// TokenEnv names the environment variable holding an HTTPS token
	// (sent as the password of basic auth, user Username).
	TokenEnv string `yaml:"token_env,omitempty" json:"token_env,omitempty"`
	Username string `yaml:"username,omitempty" json:"username,omitempty"` // default "git"
	// SSHKey is a private key file for ssh URLs (default: the SSH agent).
	SSHKey string `yaml:"ssh_key,omitempty" json:"ssh_key,omitempty"`
	// MaxFileSize is the largest file push commits (default
	// DefaultGitMaxFileSize, a forge's limit); a larger one stays out of
	// the commit and is reported as a conflict.
	MaxFileSize Size `yaml:"max_file_size,omitempty" json:"max_file_size,omitempty"`
}

// DefaultGitMaxFileSize is git.max_file_size's default: 100 MiB, GitHub's
// limit for one file.
const DefaultGitMaxFileSize = 100 << 20

// DefaultS3MaxFileSize is s3.max_file_size's default: 5 GiB, the largest
// object one S3 PUT may write.
const DefaultS3MaxFileSize = 5 << 30

// S3 is a prefix of an S3 bucket. Credentials come from the standard AWS
// chain (environment, shared config and credentials files, profiles).
type S3 struct {
	Bucket    string `yaml:"bucket" json:"bucket"`
	Prefix    string `yaml:"prefix,omitempty" json:"prefix,omitempty"`
	Endpoint  string `yaml:"endpoint,omitempty" json:"endpoint,omitempty"` // any S3-compatible server
	Region    string `yaml:"region,omitempty" json:"region,omitempty"`
	PathStyle bool   `yaml:"path_style,omitempty" json:"path_style,omitempty"`
	Profile   string `yaml:"profile,omitempty" json:"profile,omitempty"` // AWS shared-config profile
	// Lazy (the default) lists the prefix at import and fetches each
	// object's content on its first read; eager downloads everything.
	Lazy       *bool `yaml:"lazy,omitempty" json:"lazy,omitempty"`
	WriteBack  bool  `yaml:"write_back,omitempty" json:"write_back,omitempty"`
	MaxBytes   Size  `yaml:"max_bytes,omitempty" json:"max_bytes,omitempty"`     // 0: no limit
	MaxObjects int64 `yaml:"max_objects,omitempty" json:"max_objects,omitempty"` // 0: no limit
	// Conditional says how write-back avoids overwriting a remote change:
	// "headers" (If-Match / If-None-Match on the write), "head" (a HEAD
	// request before it, for servers without conditional writes) or
	// "auto" (the default: probe the server once).
	Conditional string `yaml:"conditional,omitempty" json:"conditional,omitempty"`
	// MaxFileSize is the largest file write-back uploads (default
	// DefaultS3MaxFileSize); a larger one is reported as a conflict.
	MaxFileSize Size `yaml:"max_file_size,omitempty" json:"max_file_size,omitempty"`
}

// IsLazy tells whether content is fetched on first read.
func (s *S3) IsLazy() bool { return s.Lazy == nil || *s.Lazy }

// Kind names the source's kind: "git", "s3", "dir" or "content".
func (s *Source) Kind() string {
	switch {
	case s.Git != nil:
		return "git"
	case s.S3 != nil:
		return "s3"
	case s.Dir != "":
		return "dir"
	case s.Content != nil:
		return "content"
	}
	return ""
}

// Error is a mistake in a spec file, at a line and (when known) a field.
type Error struct {
	File  string
	Line  int
	Field string // e.g. sources[1].s3.bucket
	Msg   string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Load reads and parses a spec file. Relative dir: paths are resolved
// against the file's directory.
func Load(file string) (*Spec, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	return Parse(data, file, filepath.Dir(abs))
}

// maxSpecSize bounds the spec file; inline files belong in it, data does not.
const maxSpecSize = 16 << 20

// Parse parses a spec. name is used in errors; baseDir resolves relative
// dir: paths.
func Parse(data []byte, name, baseDir string) (*Spec, error) {
	if len(data) > maxSpecSize {
		return nil, &Error{File: name, Msg: fmt.Sprintf("spec is %d bytes, more than the %d allowed", len(data), maxSpecSize)}
	}
	var sp Spec
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&sp); err != nil {
		if err == io.EOF {
			return nil, &Error{File: name, Msg: "spec is empty (it needs a sources: list)"}
		}
		return nil, yamlError(name, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		return nil, &Error{File: name, Line: extra.Line, Msg: "more than one YAML document"}
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, yamlError(name, err)
	}
	pos := positions(&root)
	if err := sp.validate(name, baseDir, pos); err != nil {
		return nil, err
	}
	return &sp, nil
}

// yamlError turns the YAML library's errors ("yaml: line 3: ...", or a list
// of "line 3: field x not found in type spec.Git") into Errors.
func yamlError(name string, err error) error {
	var te *yaml.TypeError
	msgs := []string{strings.TrimPrefix(err.Error(), "yaml: ")}
	if errors.As(err, &te) {
		msgs = te.Errors
	}
	var errs []error
	for _, m := range msgs {
		e := &Error{File: name, Msg: m}
		if sub := lineRe.FindStringSubmatch(m); sub != nil {
			e.Line, _ = strconv.Atoi(sub[1])
			e.Msg = sub[2]
		}
		e.Msg = typeRe.ReplaceAllStringFunc(e.Msg, func(s string) string {
			return "in " + sectionName[typeRe.FindStringSubmatch(s)[1]]
		})
		e.Msg = strings.Replace(e.Msg, "field ", "unknown field ", 1)
		e.Msg = strings.Replace(e.Msg, " not found in ", " in ", 1)
		errs = append(errs, e)
	}
	return errors.Join(errs...)
}

var (
	lineRe      = regexp.MustCompile(`^line (\d+): (.*)$`)
	typeRe      = regexp.MustCompile(`in type spec\.(\w+)`)
	sectionName = map[string]string{"Spec": "the spec", "Source": "a source", "Git": "git", "S3": "s3", "Owner": "owner",
		"Policy": "policy", "ExecPolicy": "policy.exec", "Limits": "policy.limits", "Sync": "sync", "Push": "git.push"}
)

// positions maps field paths ("sources[1].s3.bucket") to their lines.
func positions(root *yaml.Node) map[string]int {
	pos := map[string]int{}
	var walk func(n *yaml.Node, p string)
	walk = func(n *yaml.Node, p string) {
		pos[p] = n.Line
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, p)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i].Value
				if p != "" {
					k = p + "." + k
				}
				walk(n.Content[i+1], k)
				pos[k] = n.Content[i].Line // the key's line reads best
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, fmt.Sprintf("%s[%d]", p, i))
			}
		}
	}
	walk(root, "")
	return pos
}

func (sp *Spec) validate(name, baseDir string, pos map[string]int) error {
	fail := func(field, format string, args ...any) error {
		line := pos[field]
		for f := field; line == 0 && f != ""; { // the nearest enclosing field with a line
			i := strings.LastIndexAny(f, ".[")
			if i < 0 {
				break
			}
			f = f[:i]
			line = pos[f]
		}
		return &Error{File: name, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	if len(sp.Sources) == 0 {
		return fail("sources", "no sources: the spec must list at least one")
	}
	for i := range sp.Sources {
		src := &sp.Sources[i]
		f := fmt.Sprintf("sources[%d]", i)
		src.Line = pos[f]
		p, err := CleanPath(src.Path)
		if err != nil {
			return fail(f+".path", "%v", err)
		}
		src.Path = p
		kinds := 0
		for _, set := range []bool{src.Git != nil, src.S3 != nil, src.Dir != "", src.Content != nil} {
			if set {
				kinds++
			}
		}
		if kinds != 1 {
			return fail(f, "a source needs exactly one of git, s3, dir and content (it has %d)", kinds)
		}
		if src.Mode != nil && src.Content == nil {
			return fail(f+".mode", "mode applies to inline files (content) only")
		}
		switch {
		case src.Git != nil:
			if err := src.Git.validate(); err != nil {
				return fail(f+".git."+err.field, "%s", err.msg)
			}
		case src.S3 != nil:
			if err := src.S3.validate(); err != nil {
				return fail(f+".s3."+err.field, "%s", err.msg)
			}
		case src.Dir != "":
			if !filepath.IsAbs(src.Dir) {
				src.Dir = filepath.Join(baseDir, src.Dir)
			}
		case src.Content != nil:
			if p == "/" {
				return fail(f+".path", "an inline file cannot be the workspace root")
			}
		}
	}
	// No source may sit inside another: each owns its whole subtree.
	order := make([]int, len(sp.Sources))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return sp.Sources[order[a]].Path < sp.Sources[order[b]].Path })
	for k := 1; k < len(order); k++ {
		for j := k - 1; j >= 0; j-- {
			a, b := sp.Sources[order[j]].Path, sp.Sources[order[k]].Path
			if a == b || a == "/" || strings.HasPrefix(b, a+"/") {
				first, second := min(order[j], order[k]), max(order[j], order[k])
				return fail(fmt.Sprintf("sources[%d].path", second), "%s overlaps %s of sources[%d]",
					sp.Sources[second].Path, sp.Sources[first].Path, first)
			}
		}
	}
	if sp.Policy != nil {
		if err := sp.Policy.validate(); err != nil {
			return fail("policy."+err.field, "%s", err.msg)
		}
	}
	if sp.Owner != nil && (sp.Owner.UID == 1<<32-1 || sp.Owner.GID == 1<<32-1) {
		return fail("owner", "uid and gid must be below 4294967295")
	}
	if a := sp.Agent; a != nil {
		switch {
		case a.UID == 1<<32-1 || a.GID == 1<<32-1:
			return fail("agent", "uid and gid must be below 4294967295")
		case a.UID == 0 || a.GID == 0:
			return fail("agent", "the agent is never root: give a uid and gid other than 0")
		}
	}
	return nil
}

type fieldError struct{ field, msg string }

func (g *Git) validate() *fieldError {
	if g.URL == "" {
		return &fieldError{"url", "required"}
	}
	if strings.ContainsAny(g.URL, "\x00\n") {
		return &fieldError{"url", "contains a control character"}
	}
	if g.Depth < 0 {
		return &fieldError{"depth", "must be 0 (the whole history) or more"}
	}
	if g.MaxFileSize < 0 {
		return &fieldError{"max_file_size", "must be 0 (the default, 100MiB) or more"}
	}
	if g.TokenEnv != "" && !envNameRe.MatchString(g.TokenEnv) {
		return &fieldError{"token_env", fmt.Sprintf("%q is not an environment variable name", g.TokenEnv)}
	}
	if strings.ContainsAny(g.Ref, " \x00~^:?*[\\") {
		return &fieldError{"ref", fmt.Sprintf("%q is not a valid ref", g.Ref)}
	}
	if strings.ContainsAny(g.Branch, " \x00~^:?*[\\") || strings.HasPrefix(g.Branch, "-") {
		return &fieldError{"branch", fmt.Sprintf("%q is not a valid branch name", g.Branch)}
	}
	if strings.ContainsAny(g.Push.Branch, " \x00~^:?*[\\") || strings.HasPrefix(g.Push.Branch, "-") {
		return &fieldError{"push.branch", fmt.Sprintf("%q is not a valid branch name", g.Push.Branch)}
	}
	if g.Push.Branch != "" && g.Branch != "" && g.Push.Branch != g.Branch {
		return &fieldError{"push.branch", fmt.Sprintf("%q and git.branch %q disagree: name the branch once", g.Push.Branch, g.Branch)}
	}
	switch g.Push.When {
	case "", PushAuto, PushOnSync:
	default:
		return &fieldError{"push.when", fmt.Sprintf("%q: want auto (push in the background after each change) or sync (only on computerfs sync)", g.Push.When)}
	}
	switch g.Push.Commit {
	case "", CommitAuto, CommitOnSync, CommitAgent:
	default:
		return &fieldError{"push.commit", fmt.Sprintf("%q: want sync (commit what the agent left uncommitted on computerfs sync), auto (in the background too) or agent (never: push only the agent's own commits)", g.Push.Commit)}
	}
	if g.Author != "" {
		if _, _, err := ParseAuthor(g.Author); err != nil {
			return &fieldError{"author", err.Error()}
		}
	}
	if strings.ContainsRune(g.Message, 0) {
		return &fieldError{"message", "contains a NUL byte"}
	}
	return nil
}

// Push is a git source's push-back. In YAML it is `push: true` (every
// option at its default), `push: false`, or a mapping of the options
// (which turns push on):
//
//	push:
//	  branch: fix-123  # default computerfs/NAME (or git.branch)
//	  when: sync       # auto (default): in the background; sync: only on computerfs sync
//	  commit: agent    # sync (default): commit what the agent left uncommitted on computerfs sync;
//	                   # auto: in the background too; agent: never, push only the agent's commits
type Push struct {
	On     bool   `yaml:"-" json:"-"`
	Branch string `yaml:"branch,omitempty" json:"branch,omitempty"`
	When   string `yaml:"when,omitempty" json:"when,omitempty"`
	Commit string `yaml:"commit,omitempty" json:"commit,omitempty"`
}

// push.when and push.commit.
const (
	PushAuto     = "auto"
	PushOnSync   = "sync"
	CommitAuto   = "auto"
	CommitOnSync = "sync"
	CommitAgent  = "agent"
)

// pushFields are Push's fields as a mapping.
type pushFields struct {
	Branch string `yaml:"branch,omitempty" json:"branch,omitempty"`
	When   string `yaml:"when,omitempty" json:"when,omitempty"`
	Commit string `yaml:"commit,omitempty" json:"commit,omitempty"`
}

// IsZero tells whether push is off (for omitempty).
func (p Push) IsZero() bool { return !p.On }

// UnmarshalYAML reads a boolean or a mapping.
func (p *Push) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		var on bool
		if err := n.Decode(&on); err != nil {
			return fmt.Errorf("line %d: push: want true, false or a mapping (branch, when, commit)", n.Line)
		}
		*p = Push{On: on}
		return nil
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			switch k := n.Content[i]; k.Value {
			case "branch", "when", "commit":
			default:
				return fmt.Errorf("line %d: field %s not found in type spec.Push", k.Line, k.Value)
			}
		}
		var f pushFields
		if err := n.Decode(&f); err != nil {
			return err
		}
		*p = Push{On: true, Branch: f.Branch, When: f.When, Commit: f.Commit}
		return nil
	}
	return fmt.Errorf("line %d: push: want true, false or a mapping (branch, when, commit)", n.Line)
}

// MarshalJSON writes true, false or the options.
func (p Push) MarshalJSON() ([]byte, error) {
	if !p.On || p == (Push{On: true}) {
		return json.Marshal(p.On)
	}
	return json.Marshal(pushFields{Branch: p.Branch, When: p.When, Commit: p.Commit})
}

// UnmarshalJSON reads what MarshalJSON writes (a stored spec: `true`
// from before the options is Push{On: true}, with the defaults of now).
func (p *Push) UnmarshalJSON(b []byte) error {
	var on bool
	if json.Unmarshal(b, &on) == nil {
		*p = Push{On: on}
		return nil
	}
	var f pushFields
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("push: %w", err)
	}
	*p = Push{On: true, Branch: f.Branch, When: f.When, Commit: f.Commit}
	return nil
}

// PushBranch is the branch a git source pushes to in the workspace
// called name: push.branch, git.branch, or computerfs/NAME.
func (g *Git) PushBranch(name string) string {
	if b := cmp.Or(g.Push.Branch, g.Branch); b != "" {
		return b
	}
	return "computerfs/" + BranchName(name)
}

// BranchName is name made fit for a git branch's last component: letters,
// digits, '.', '_' and '-' kept, anything else '-', at most 64 bytes,
// "workspace" when nothing is left.
func BranchName(name string) string {
	b := []byte(name)
	if len(b) > 64 {
		b = b[:64]
	}
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '-'
		}
	}
	s := strings.Trim(strings.ReplaceAll(string(b), "..", "-"), ".-")
	s = strings.TrimSuffix(s, ".lock")
	if s == "" {
		return "workspace"
	}
	return s
}

// commitRe is a full commit hash.
var commitRe = regexp.MustCompile(`^[0-9a-f]{40}$`)

// DefaultGitAuthor signs push commits when the spec names no author.
const DefaultGitAuthor = "computerfs <computerfs@localhost>"

// ParseAuthor splits "Name <email>" into its parts.
func ParseAuthor(s string) (name, email string, err error) {
	i, j := strings.IndexByte(s, '<'), strings.LastIndexByte(s, '>')
	if i < 0 || j != len(s)-1 || j < i || strings.ContainsAny(s, "\x00\n") ||
		strings.Count(s, "<") != 1 || strings.Count(s, ">") != 1 {
		return "", "", fmt.Errorf("%q: want \"Name <email>\"", s)
	}
	name, email = strings.TrimSpace(s[:i]), s[i+1:j]
	if name == "" || email == "" {
		return "", "", fmt.Errorf("%q: want \"Name <email>\" with both parts", s)
	}
	return name, email, nil
}

var envNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (s *S3) validate() *fieldError {
	if s.Bucket == "" {
		return &fieldError{"bucket", "required"}
	}
	if !bucketRe.MatchString(s.Bucket) {
		return &fieldError{"bucket", fmt.Sprintf("%q is not a valid bucket name", s.Bucket)}
	}
	if s.Endpoint != "" {
		u, err := url.Parse(s.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return &fieldError{"endpoint", fmt.Sprintf("%q is not an http(s) URL", s.Endpoint)}
		}
	}
	if s.MaxObjects < 0 {
		return &fieldError{"max_objects", "must be 0 (no limit) or more"}
	}
	if s.MaxFileSize < 0 {
		return &fieldError{"max_file_size", "must be 0 (the default, 5GiB) or more"}
	}
	switch s.Conditional {
	case "", "auto", "headers", "head":
	default:
		return &fieldError{"conditional", fmt.Sprintf("%q: want auto, headers or head", s.Conditional)}
	}
	if strings.ContainsRune(s.Prefix, 0) {
		return &fieldError{"prefix", "contains a NUL byte"}
	}
	return nil
}

// Bucket names as S3 allows them (dots included, for older buckets).
var bucketRe = regexp.MustCompile(`^[a-z0-9][a-z0-9.\-_]{1,61}[a-z0-9]$`)

// CleanPath turns a source path into the absolute, clean form the spec
// keeps ("repo", "/repo/" and "/repo/./" are all "/repo"). It refuses paths
// that climb out of the workspace and names the store cannot hold.
func CleanPath(p string) (string, error) {
	if p == "" {
		return "", errors.New("required")
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", errors.New("contains a NUL byte")
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return "", fmt.Errorf("%q leaves the workspace (..)", p)
		}
		if len(part) > 255 {
			return "", fmt.Errorf("%q has a name longer than 255 bytes", p)
		}
	}
	return path.Clean("/" + p), nil
}

// Mode is a file mode, written in YAML as an octal string ("0755") or a
// number (0o755, 493).
type Mode uint32

// UnmarshalYAML accepts "0755", "755", 0755 and 0o755.
func (m *Mode) UnmarshalYAML(n *yaml.Node) error {
	s := strings.TrimPrefix(strings.TrimPrefix(n.Value, "0o"), "0")
	if s == "" {
		s = "0"
	}
	v, err := strconv.ParseUint(s, 8, 32)
	if err != nil || v > 0o7777 {
		return fmt.Errorf("line %d: mode %q is not an octal file mode (like 0644)", n.Line, n.Value)
	}
	*m = Mode(v)
	return nil
}

// Size is a number of bytes, written in YAML as a number or with a unit:
// "10MB" (10^6), "10MiB" or "10M" (2^20), "1.5GiB".
type Size int64

// UnmarshalYAML parses a size.
func (s *Size) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseSize(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %v", n.Line, err)
	}
	*s = Size(v)
	return nil
}

// ParseSize parses a size with an optional unit (B, K, KB, KiB... up to T).
func ParseSize(str string) (int64, error) {
	s := strings.TrimSpace(str)
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := s, ""
	if i >= 0 {
		num, unit = s[:i], strings.TrimSpace(s[i:])
	}
	mult, ok := sizeUnits[strings.ToLower(unit)]
	if !ok || num == "" {
		return 0, fmt.Errorf("size %q: want a number of bytes, optionally with a unit (KB, MiB, GiB...)", str)
	}
	if !strings.Contains(num, ".") {
		v, err := strconv.ParseInt(num, 10, 64)
		if err != nil || v > (1<<63-1)/mult {
			return 0, fmt.Errorf("size %q is not a number of bytes or is too large", str)
		}
		return v * mult, nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f*float64(mult) >= 1<<63 {
		return 0, fmt.Errorf("size %q is not a number of bytes or is too large", str)
	}
	return int64(f * float64(mult)), nil
}

var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"k": 1 << 10, "kib": 1 << 10, "kb": 1e3,
	"m": 1 << 20, "mib": 1 << 20, "mb": 1e6,
	"g": 1 << 30, "gib": 1 << 30, "gb": 1e9,
	"t": 1 << 40, "tib": 1 << 40, "tb": 1e12,
}
