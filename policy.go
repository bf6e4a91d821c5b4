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
func agentRules(sp *spec.Spec) *fs.AgentRules {
	c := pathRules(sp)
	if c == nil {
		return nil
	}
	return &fs.AgentRules{Is: isAgentUID, Policy: c}
}

// isAgentUID tells whether a host uid making a request on the mount is the
// agent's: any uid the sandbox maps (host 100000 to 165535, which the
// sandbox's user, sandboxUser, is one of, whichever id inside it runs as).
// Root and the host's other users are not bound.
//
// TODO(agent identity): when a workspace has its own agent uid, it is
// the agent's too; this is the one place that decides.
func isAgentUID(uid uint32) bool {
	_, ok := sandbox.InsideID(uid)
	return ok
}
