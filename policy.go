package computerfs

import (
	"github.com/computerfs/computerfs/fs"
	"github.com/computerfs/computerfs/policy"
	"github.com/computerfs/computerfs/sandbox"
	"github.com/computerfs/computerfs/spec"
)

// The spec's path rules (deny, read_only_paths, read_only) hold for every
// way the agent reaches the workspace, each enforcing one compiled
// policy.Checker: the tools (package tools), the shell fast path (a
// wsfs.FS WithPolicy) and the mount, for the agent's uids (fs.AgentRules),
// which is what binds every program in the sandbox.

// pathRules are sp's path rules, or nil when it has none.
func pathRules(sp *spec.Spec) *policy.Checker {
	if sp == nil {
		return nil
	}
	return policy.New(sp.Policy)
}

// agentRules are what the mount enforces on the agent's requests.
func agentRules(sp *spec.Spec, a Agent) *fs.AgentRules {
	c := pathRules(sp)
	if c == nil {
		return nil
	}
	return &fs.AgentRules{Is: func(uid uint32) bool { return isAgentUID(a, uid) }, Policy: c}
}

// isAgentUID tells whether a host uid making a request on the mount is the
// agent's: the workspace's agent identity (what the sandbox runs as), any
// other id of its sandboxes' block (the ids a program in it could reach by
// some other means than its own user), or of the block every sandbox
// without one of its own shares (100000 to 165535). Root and the host's
// other users are not bound. This is the one place that decides.
func isAgentUID(a Agent, uid uint32) bool {
	if uid == a.UID {
		return true
	}
	if _, ok := a.sandboxIDs().Inside(uid); ok {
		return true
	}
	_, ok := sandbox.SharedIDs.Inside(uid)
	return ok
}
