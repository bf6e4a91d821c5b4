package computerfs

import (
	"context"
	"log/slog"
	"time"

	"github.com/computerfs/computerfs/fs"
	"github.com/computerfs/computerfs/policy"
	"github.com/computerfs/computerfs/sandbox"
	"github.com/computerfs/computerfs/sources"
	"github.com/computerfs/computerfs/spec"
	"github.com/computerfs/computerfs/wsfs"
)

// The spec's path rules (deny, read_only_paths, read_only) hold for every
// way the agent reaches the workspace, all enforcing one compiled
// policy.Checker (Workspace.rules): the tools (package tools), the shell fast path (a
// wsfs.FS WithPolicy) and the mount, for the agent's uids (fs.AgentRules),
// which is what binds every program in the sandbox.

// pathRules are sp's path rules, or nil when it has none.
func pathRules(sp *spec.Spec) *policy.Checker {
	if sp == nil {
		return nil
	}
	return policy.New(sp.Policy)
}

// agentRules are what the mount enforces on the agent's requests: c.
func agentRules(c *policy.Checker, a Agent) *fs.AgentRules {
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

// mountHistoryCheck bounds a history check made at mount.
const mountHistoryCheck = 2 * time.Minute

// historyRules returns the spec's path rules with the .git of every git
// source whose objects hold a path the rules deny (sources.CheckHistory),
// as recorded by the import or the last refresh; a source with no record
// for these rules (a store from before, a spec's rules changed) or whose
// check did not finish is checked now and recorded.
func historyRules(ctx context.Context, f *wsfs.FS, sp *spec.Spec, log *slog.Logger) (*policy.Checker, error) {
	c := pathRules(sp)
	if !c.HasDeny() {
		return c, nil
	}
	key := sources.RulesKey(sp.Policy)
	specRules := pathRules(sp) // the spec's alone, without the denies added below
	for i := range sp.Sources {
		src := &sp.Sources[i]
		if !sources.HasHistory(src) {
			continue
		}
		rec, ok, err := sources.ReadHistory(f.Store(), i)
		if err != nil {
			return nil, err
		}
		if !ok || rec.Rules != key || rec.Unsure {
			// The agent may have written this .git since: a check that
			// takes too long holds the mount no longer than this, and
			// counts as exposed (checked again at the next mount).
			cctx, cancel := context.WithTimeout(ctx, mountHistoryCheck)
			rec = sources.CheckSourceHistory(cctx, f, src, specRules, key)
			cancel()
			if err := sources.WriteHistory(f.Store(), i, rec); err != nil {
				return nil, err
			}
		}
		rec.Apply(c)
		for _, r := range rec.Exposed {
			log.Warn("the git history holds what the policy denies: it is denied to the agent", "git_dir", r.Dir, "reason", r.Reason())
		}
	}
	return c, nil
}
