package tools

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/computerfs/computerfs/kv"
)

// The checkpoint tools: with the policy's `checkpoint: each-call` the
// workspace takes a checkpoint before every call (the root package's
// checkpoint.go); with `checkpoints: {agent_restore: true}` the agent may
// list them (checkpoints) and go back to one (undo). The workspace does
// the work (Checkpoints); the tools check the policy and audit the call.

// Checkpoints is what the workspace gives the checkpoint tools.
type Checkpoints interface {
	List(ctx context.Context) ([]kv.CheckpointInfo, error)
	Undo(ctx context.Context, to string) (UndoResult, error)
}

// CheckpointsArgs are the checkpoints tool's arguments (none).
type CheckpointsArgs struct{}

// CheckpointEntry is one checkpoint.
type CheckpointEntry struct {
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
	// Taken is when it was taken: "before CALL", or "after CALL" (the
	// state a call left, taken as it returned).
	Taken string `json:"taken,omitempty"`
}

// CheckpointsResult lists the checkpoints, oldest first.
type CheckpointsResult struct {
	Checkpoints []CheckpointEntry `json:"checkpoints"`
}

func (r CheckpointsResult) summary() string { return fmt.Sprintf("%d checkpoints", len(r.Checkpoints)) }

// Text is the result as a model reads it.
func (r CheckpointsResult) Text() string {
	if len(r.Checkpoints) == 0 {
		return "No checkpoints."
	}
	var b strings.Builder
	for _, c := range r.Checkpoints {
		fmt.Fprintf(&b, "%s  %s", c.Name, c.Created.UTC().Format(time.RFC3339))
		if c.Taken != "" {
			fmt.Fprintf(&b, "  %s", c.Taken)
		}
		b.WriteByte('\n')
	}
	b.WriteString("undo with to=NAME goes back to one; newer checkpoints stay, so an undo can be undone.\n")
	return b.String()
}

// UndoArgs are undo's arguments.
type UndoArgs struct {
	To string `json:"to,omitempty" jsonschema:"a checkpoint's name (@SEQ, from the checkpoints tool) or a tool call's id; empty: before the last call that changed something"`
}

// UndoResult is where undo went back to.
type UndoResult struct {
	Checkpoint string `json:"checkpoint"`
	Seq        uint64 `json:"seq"` // the rollback's journal record
}

func (r UndoResult) summary() string { return "back to " + r.Checkpoint }

// Text is the result as a model reads it.
func (r UndoResult) Text() string {
	return "The workspace is back to checkpoint " + r.Checkpoint + "; files changed since are as they were then."
}

func (t *Tools) checkpointsAllowed() error {
	if t.ckpts == nil {
		return &Refusal{Rule: "policy checkpoint", Msg: "the workspace takes no checkpoints (its policy's checkpoint is not each-call)"}
	}
	if !t.pol.p.AgentRestore() {
		return &Refusal{Rule: "policy checkpoints.agent_restore", Msg: "the policy does not let the agent list or restore checkpoints"}
	}
	return nil
}

// CheckpointList lists the workspace's checkpoints.
func (t *Tools) CheckpointList(ctx context.Context, a CheckpointsArgs) (CheckpointsResult, error) {
	return do(ctx, t, "checkpoints", a, func(c *call) (CheckpointsResult, error) {
		if err := t.checkpointsAllowed(); err != nil {
			return CheckpointsResult{}, err
		}
		list, err := t.ckpts.List(ctx)
		if err != nil {
			return CheckpointsResult{}, err
		}
		out := CheckpointsResult{Checkpoints: []CheckpointEntry{}}
		for _, c := range list {
			out.Checkpoints = append(out.Checkpoints, CheckpointEntry{Name: c.Name, Created: c.Created, Taken: c.Label})
		}
		return out, nil
	})
}

// Undo puts the workspace back to a checkpoint.
func (t *Tools) Undo(ctx context.Context, a UndoArgs) (UndoResult, error) {
	return do(ctx, t, "undo", a, func(c *call) (UndoResult, error) {
		if err := t.checkpointsAllowed(); err != nil {
			return UndoResult{}, err
		}
		if t.pol.p.ReadOnly {
			return UndoResult{}, &Refusal{Rule: "policy read_only", Msg: "the workspace is read-only for tools"}
		}
		return t.ckpts.Undo(ctx, a.To)
	})
}
