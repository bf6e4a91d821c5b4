package spec

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"
	"time"
)

// Policy is what the agent may read, change and run. A spec without one
// allows everything, with the default limits.
//
// The path rules (Deny, ReadOnlyPaths, ReadOnly) hold for every way the
// agent reaches the workspace: the agent tools, exec on the shell fast
// path, and exec in the sandbox, whose programs the mount holds to them
// (package policy says exactly what each rule covers). They are matched
// on a file's real path in the workspace, after symbolic links and "..",
// and on every name of a file with hard links. A git source whose
// objects (its history, as imported or refreshed) hold a denied path has
// its .git denied too (see sources/history.go): the history would give the
// file back. git can still record a denied file's deletion.
type Policy struct {
	// ReadOnly refuses every change of the workspace through any backend,
	// and refuses the tools that change it (write, edit, mkdir, delete,
	// clone) and exec.
	ReadOnly bool `yaml:"read_only,omitempty" json:"read_only,omitempty"`
	// Deny lists path globs the agent may neither read (open, list,
	// stat, readlink, xattrs) nor change nor create, nor reach anything
	// under; no denied file can be linked, renamed or copied to a name the
	// rules do not deny. Creating a name a rule denies (x.pem under
	// "**/*.pem") is refused. On the mount, the names of denied entries
	// still show in a listing of their directory.
	Deny []string `yaml:"deny,omitempty" json:"deny,omitempty"`
	// ReadOnlyPaths lists path globs the agent may read but not change:
	// no write, truncate, create, mkdir, unlink, rmdir, rename from or to
	// (nor of a directory holding one), link to or from, chmod, chown,
	// utimes or xattr change.
	ReadOnlyPaths []string    `yaml:"read_only_paths,omitempty" json:"read_only_paths,omitempty"`
	Exec          *ExecPolicy `yaml:"exec,omitempty" json:"exec,omitempty"`
	Limits        *Limits     `yaml:"limits,omitempty" json:"limits,omitempty"`
	// GitCloneHosts are the hosts the git-clone tool may clone from, over
	// https or http ("github.com", or "host:port" for one port only). The
	// tool clones nothing else: no local path, file://, ssh or ext:: url,
	// and no credentials. Empty: the tool is refused.
	GitCloneHosts []string `yaml:"git_clone_hosts,omitempty" json:"git_clone_hosts,omitempty"`
	// Checkpoint "each-call" takes a checkpoint (a snapshot of the
	// workspace) before every tool call and exec, so that `computerfs undo`
	// can go back to before any of them; "" or "off": none.
	Checkpoint  string            `yaml:"checkpoint,omitempty" json:"checkpoint,omitempty"`
	Checkpoints *CheckpointPolicy `yaml:"checkpoints,omitempty" json:"checkpoints,omitempty"`
}

// CheckpointPolicy is how long checkpoints are kept, and whether the agent
// may use them.
type CheckpointPolicy struct {
	// Keep is how many checkpoints are kept, the newest (default 100).
	Keep int `yaml:"keep,omitempty" json:"keep,omitempty"`
	// MaxAge is how long one is kept (a Go duration; default 24h); the
	// newest is kept whatever its age.
	MaxAge string `yaml:"max_age,omitempty" json:"max_age,omitempty"`
	// AgentRestore gives the agent the tools checkpoints (list them) and
	// undo (go back to one); without it they are refused.
	AgentRestore bool `yaml:"agent_restore,omitempty" json:"agent_restore,omitempty"`
}

// Checkpoint retention defaults.
const (
	DefaultCheckpointKeep   = 100
	DefaultCheckpointMaxAge = 24 * time.Hour
)

// EachCall says whether the policy takes a checkpoint before each call.
func (p *Policy) EachCall() bool { return p != nil && p.Checkpoint == "each-call" }

// CheckpointKeep is how many checkpoints the policy keeps.
func (p *Policy) CheckpointKeep() int {
	if p == nil || p.Checkpoints == nil || p.Checkpoints.Keep == 0 {
		return DefaultCheckpointKeep
	}
	return p.Checkpoints.Keep
}

// CheckpointMaxAge is how long the policy keeps a checkpoint.
func (p *Policy) CheckpointMaxAge() time.Duration {
	if p == nil || p.Checkpoints == nil || p.Checkpoints.MaxAge == "" {
		return DefaultCheckpointMaxAge
	}
	d, _ := time.ParseDuration(p.Checkpoints.MaxAge)
	return d
}

// AgentRestore says whether the agent may list and restore checkpoints.
func (p *Policy) AgentRestore() bool {
	return p != nil && p.Checkpoints != nil && p.Checkpoints.AgentRestore
}

// ExecPolicy gates the exec tool.
type ExecPolicy struct {
	Disabled bool `yaml:"disabled,omitempty" json:"disabled,omitempty"` // no exec at all
	// Backends are the backends exec may use ("shell", "sandbox"; empty:
	// both).
	Backends []string `yaml:"backends,omitempty" json:"backends,omitempty"`
	// DenyCommands are regular expressions (RE2); an exec tool call whose
	// command text matches any of them is refused. It is a convenience
	// that keeps an agent from what it was told not to run (a deploy
	// script, curl), not a security boundary: a command can be spelled in
	// ways no pattern foresees (quotes, variables, eval, base64, a script
	// file, a program in the sandbox that runs it), and only the text of
	// the command line is matched. Keep secrets and the host safe with
	// deny, read_only_paths and the sandbox, never with this.
	DenyCommands []string `yaml:"deny_commands,omitempty" json:"deny_commands,omitempty"`
	// Network is the sandbox's network: "none" (the default) or "host".
	Network string `yaml:"network,omitempty" json:"network,omitempty"`
	// MaxTimeout bounds a command's timeout (a Go duration; default 10m).
	MaxTimeout string `yaml:"max_timeout,omitempty" json:"max_timeout,omitempty"`
}

// Limits are the tools' size limits (0: the default).
type Limits struct {
	MaxWrite  Size `yaml:"max_write,omitempty" json:"max_write,omitempty"`   // content write and edit may store (16 MiB)
	MaxRead   Size `yaml:"max_read,omitempty" json:"max_read,omitempty"`     // bytes one read returns (64 KiB)
	MaxOutput Size `yaml:"max_output,omitempty" json:"max_output,omitempty"` // exec's stdout and stderr kept (64 KiB)
}

// Default limits.
const (
	DefaultMaxWrite   = 16 << 20
	DefaultMaxRead    = 64 << 10
	DefaultMaxOutput  = 64 << 10
	DefaultMaxTimeout = 10 * time.Minute
)

// Exec backends a policy may name.
var execBackends = map[string]bool{"shell": true, "sandbox": true}

func (p *Policy) validate() *fieldError {
	for i, g := range p.Deny {
		if err := checkGlob(g); err != nil {
			return &fieldError{fmt.Sprintf("deny[%d]", i), err.Error()}
		}
	}
	for i, g := range p.ReadOnlyPaths {
		if err := checkGlob(g); err != nil {
			return &fieldError{fmt.Sprintf("read_only_paths[%d]", i), err.Error()}
		}
	}
	for i, h := range p.GitCloneHosts {
		if h == "" || strings.ContainsAny(h, "/@ \x00?#") {
			return &fieldError{fmt.Sprintf("git_clone_hosts[%d]", i), fmt.Sprintf("%q: want a host name or host:port", h)}
		}
	}
	if e := p.Exec; e != nil {
		for i, b := range e.Backends {
			if !execBackends[b] {
				return &fieldError{fmt.Sprintf("exec.backends[%d]", i), fmt.Sprintf("unknown backend %q (shell or sandbox)", b)}
			}
		}
		for i, c := range e.DenyCommands {
			if _, err := regexp.Compile(c); err != nil {
				return &fieldError{fmt.Sprintf("exec.deny_commands[%d]", i), fmt.Sprintf("not a regular expression: %v", err)}
			}
		}
		switch e.Network {
		case "", "none", "host":
		default:
			return &fieldError{"exec.network", fmt.Sprintf("%q: want none or host", e.Network)}
		}
		if e.MaxTimeout != "" {
			if d, err := time.ParseDuration(e.MaxTimeout); err != nil || d <= 0 {
				return &fieldError{"exec.max_timeout", fmt.Sprintf("%q is not a duration such as 10m", e.MaxTimeout)}
			}
		}
	}
	switch p.Checkpoint {
	case "", "off", "each-call":
	default:
		return &fieldError{"checkpoint", fmt.Sprintf("%q: want each-call or off", p.Checkpoint)}
	}
	if c := p.Checkpoints; c != nil {
		if c.Keep < 0 {
			return &fieldError{"checkpoints.keep", "must be 0 (the default, 100) or more"}
		}
		if c.MaxAge != "" {
			if d, err := time.ParseDuration(c.MaxAge); err != nil || d <= 0 {
				return &fieldError{"checkpoints.max_age", fmt.Sprintf("%q is not a duration such as 24h", c.MaxAge)}
			}
		}
	}
	if l := p.Limits; l != nil {
		for _, f := range []struct {
			name string
			v    Size
		}{{"max_write", l.MaxWrite}, {"max_read", l.MaxRead}, {"max_output", l.MaxOutput}} {
			if f.v < 0 {
				return &fieldError{"limits." + f.name, "must be 0 (the default) or more"}
			}
		}
	}
	return nil
}

// MaxTimeoutDuration is the longest timeout exec may ask for.
func (e *ExecPolicy) MaxTimeoutDuration() time.Duration {
	if e == nil || e.MaxTimeout == "" {
		return DefaultMaxTimeout
	}
	d, _ := time.ParseDuration(e.MaxTimeout)
	return d
}

// CheckGlob tells what is wrong with a path pattern of a policy, if
// anything.
func CheckGlob(g string) error { return checkGlob(g) }

func checkGlob(g string) error {
	if g == "" {
		return errors.New("empty pattern")
	}
	if strings.IndexByte(g, 0) >= 0 {
		return errors.New("contains a NUL byte")
	}
	for _, part := range GlobParts(g) {
		if part == ".." {
			return fmt.Errorf("%q: .. has no place in a pattern", g)
		}
		if _, err := path.Match(part, ""); err != nil {
			return fmt.Errorf("%q: bad pattern", g)
		}
	}
	return nil
}

// GlobParts normalises a pattern into components: "/workspace/a/*.go" and
// "/a/*.go" are rooted at the workspace; a pattern without a leading slash
// ("*.env", "secrets/**") matches at any depth, as in .gitignore.
func GlobParts(g string) []string {
	if rest, ok := strings.CutPrefix(g, "/workspace"); ok && (rest == "" || rest[0] == '/') {
		g = rest
	}
	rooted := strings.HasPrefix(g, "/")
	var parts []string
	if !rooted {
		parts = append(parts, "**")
	}
	for _, p := range strings.Split(g, "/") {
		if p != "" && p != "." {
			parts = append(parts, p)
		}
	}
	return parts
}

// MatchPath tells whether the workspace path p ("/a/b.go", clean) is
// matched by the glob g or lies under something g matches: "/secrets"
// covers "/secrets/key". "*" matches within a name, "**" any number of
// names.
func MatchPath(g, p string) bool {
	pat := GlobParts(g)
	var names []string
	for _, n := range strings.Split(p, "/") {
		if n != "" {
			names = append(names, n)
		}
	}
	for i := 0; i <= len(names); i++ {
		if matchParts(pat, names[:i]) {
			return true
		}
	}
	return false
}

// MatchGlob tells whether the workspace path p is matched by g itself
// (not by an ancestor): find's patterns.
func MatchGlob(g, p string) bool {
	var names []string
	for _, n := range strings.Split(p, "/") {
		if n != "" {
			names = append(names, n)
		}
	}
	return matchParts(GlobParts(g), names)
}

func matchParts(pat, names []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for len(pat) > 0 && pat[0] == "**" {
				pat = pat[1:]
			}
			if len(pat) == 0 {
				return true
			}
			for i := 0; i <= len(names); i++ {
				if matchParts(pat, names[i:]) {
					return true
				}
			}
			return false
		}
		if len(names) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], names[0]); !ok {
			return false
		}
		pat, names = pat[1:], names[1:]
	}
	return len(names) == 0
}
