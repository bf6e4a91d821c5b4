package computerfs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/spec"
	"github.com/computerfs/computerfs/tools"
)

// Automatic checkpoints (the policy's `checkpoint: each-call`). Before
// each tool call and each exec, the workspace takes a checkpoint
// (kv.Store.Checkpoint: a snapshot named @SEQ after the journal's last
// record), and the audit records its name beside the call, so that
// `computerfs undo` can go back to before any call. What a call pays:
//
//   - nothing but a look at the journal's end (a stat) when nothing
//     changed since the last checkpoint: calls that only read share it;
//   - when a call changed something, the checkpoint of the state it left
//     is cut as soon as it returns, in the background (kv's cut: changes
//     held for some tens of microseconds); a call that starts before
//     that waits for the cut, never for the writing of the checkpoint
//     (Pebble's checkpoint, the blobs' links, the syncs and the rename),
//     which waits until the workspace is idle (see checkpointer.queue).
//
// Retention: after each new checkpoint the oldest past the policy's
// keep count (default 100) or older than its max_age (default 24h) are
// deleted, never the newest. A checkpoint costs the disk of what changed
// after it (copy-on-write of tables and blobs) and at most about 1 MiB of
// copied log.
//
// With calls running at once (several MCP sessions), a checkpoint is a
// consistent point between operations, which may hold part of a call
// that runs beside the one it was taken for.

// checkpointer takes a workspace's checkpoints.
type checkpointer struct {
	st     *kv.Store
	keep   int
	maxAge time.Duration
	log    *slog.Logger

	mu      sync.Mutex     // one Checkpoint at a time
	closed  bool           // the store is closing; guarded by mu
	pending sync.WaitGroup // checkpoints cut and not yet in place, and after calls under way
	pruneMu sync.Mutex

	// The writing of checkpoints cut (their finish) waits until no call
	// has run for ckptIdle, or ckptMaxPending are waiting, or someone
	// needs them (wait, close): calls back to back do not share the
	// machine with it.
	qmu     sync.Mutex
	queue   []func()
	calls   int       // calls running
	lastEnd time.Time // when the last call ended
	waiters int       // callers of wait: write them now
	worker  bool      // the writer goroutine runs
	kick    chan struct{}
}

// ckptIdle and ckptMaxPending: see checkpointer.queue.
const (
	ckptIdle       = 50 * time.Millisecond
	ckptMaxPending = 32
)

func newCheckpointer(st *kv.Store, p *spec.Policy, log *slog.Logger) *checkpointer {
	if !p.EachCall() {
		return nil
	}
	return &checkpointer{st: st, keep: p.CheckpointKeep(), maxAge: p.CheckpointMaxAge(), log: log, kick: make(chan struct{}, 1)}
}

// before takes the checkpoint for a call about to run (label says which)
// and returns its name; "" if it could not (the error is logged: the call
// runs anyway, so that a full disk does not stop the calls that free it).
func (c *checkpointer) before(label string) string {
	if c == nil {
		return ""
	}
	c.qmu.Lock()
	c.calls++
	c.qmu.Unlock()
	return c.take("before " + label)
}

// take takes a checkpoint, labelled label if it is a new one.
func (c *checkpointer) take(label string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ""
	}
	info, finish, err := c.st.Checkpoint(label)
	if err != nil {
		c.log.Warn("checkpoint: not taken", "call", label, "err", err)
		return ""
	}
	if finish != nil {
		c.pending.Add(1)
		c.enqueue(func() {
			if err := finish(); err != nil {
				c.log.Warn("checkpoint: not kept", "name", info.Name, "err", err)
			}
		})
	}
	return info.Name
}

// enqueue queues a checkpoint's finish for the writer goroutine (which
// calls pending.Done for it once the checkpoints written are pruned).
func (c *checkpointer) enqueue(f func()) {
	c.qmu.Lock()
	c.queue = append(c.queue, f)
	start := !c.worker
	c.worker = true
	c.qmu.Unlock()
	if start {
		go c.writer()
	}
	c.poke()
}

func (c *checkpointer) poke() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// writer runs the queued finishes when their time comes (see queue), in
// order, and ends when the queue is empty. (Not at a lower priority: it
// takes Pebble's locks that calls wait for, and a thread at nice 19 on a
// busy machine holding one would hold the calls.)
func (c *checkpointer) writer() {
	for {
		c.qmu.Lock()
		if len(c.queue) == 0 {
			c.worker = false
			c.qmu.Unlock()
			return
		}
		idle := time.Duration(0)
		if c.calls == 0 {
			idle = time.Since(c.lastEnd)
		}
		var run []func()
		if c.waiters > 0 || len(c.queue) >= ckptMaxPending || idle >= ckptIdle {
			run, c.queue = c.queue, nil
		}
		c.qmu.Unlock()
		if run == nil {
			wait := ckptIdle
			if idle > 0 {
				wait -= idle
			}
			select {
			case <-c.kick:
			case <-time.After(wait):
			}
			continue
		}
		// The first finish writes every checkpoint cut so far, at once
		// (kv: one Pebble checkpoint, one pass of syncs); the others find
		// theirs written. Then one pruning for them all.
		for _, f := range run {
			f()
		}
		c.prune()
		for range run {
			c.pending.Done()
		}
	}
}

// after is called when the call label ended: the checkpoint of the state
// it left is taken in the background (nothing if it changed nothing).
func (c *checkpointer) after(label string) {
	if c == nil {
		return
	}
	c.qmu.Lock()
	c.calls--
	c.lastEnd = time.Now()
	c.qmu.Unlock()
	c.pending.Add(1)
	go func() {
		defer c.pending.Done()
		c.take("after " + label)
	}()
}

// close writes the checkpoints under way and takes no more: the store is
// about to close.
func (c *checkpointer) close() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.wait()
}

// wait waits for the checkpoints being taken to be in place.
func (c *checkpointer) wait() {
	if c == nil {
		return
	}
	c.qmu.Lock()
	c.waiters++
	c.qmu.Unlock()
	c.poke()
	c.pending.Wait()
	c.qmu.Lock()
	c.waiters--
	c.qmu.Unlock()
}

func (c *checkpointer) prune() {
	c.pruneMu.Lock()
	defer c.pruneMu.Unlock()
	gone, err := c.st.PruneCheckpoints(c.keep, c.maxAge)
	if err != nil {
		c.log.Warn("checkpoint: pruning", "err", err)
	}
	if len(gone) > 0 {
		c.log.Debug("checkpoints pruned", "names", gone)
	}
}

// Checkpoints lists the workspace's checkpoints, oldest first.
func (w *Workspace) Checkpoints() ([]kv.CheckpointInfo, error) {
	w.ckpt.wait()
	return w.Store.Checkpoints()
}

// UndoResult describes an undo: the rollback, and the checkpoint it went
// back to.
type UndoResult struct {
	RollbackResult
	Checkpoint string `json:"checkpoint"`
	// Call is the audit id of the tool call undone, when one was named.
	Call uint64 `json:"call,omitempty"`
}

// undoMeta is the store's meta value that remembers the last undo: the
// journal record of its rollback and the checkpoint it went back to, so
// that undo again goes back one call further rather than to the same
// state.
const undoMeta = "checkpoint-undo"

type undoMark struct {
	Rollback uint64 `json:"rollback"` // the rollback's journal record
	To       uint64 `json:"to"`       // the checkpoint's SEQ
}

// ErrNoCheckpoint is Undo's answer when there is nothing to go back to.
var ErrNoCheckpoint = errors.New("no checkpoint to go back to")

// Undo puts the mounted workspace back to a checkpoint (as Rollback does
// to a snapshot). to is a checkpoint's name (@SEQ), the audit id of a tool
// call (the checkpoint taken before it), or "": before the last call that
// changed something (after an undo, the one before that).
func (w *Workspace) Undo(to string) (UndoResult, error) {
	if w.mount == nil {
		return UndoResult{}, ErrNotMounted
	}
	w.ckpt.wait()
	var res UndoResult
	switch {
	case kv.IsCheckpoint(to):
		res.Checkpoint = to
	case to != "":
		id, err := strconv.ParseUint(to, 10, 64)
		if err != nil {
			return UndoResult{}, fmt.Errorf("undo %q: want a checkpoint (@SEQ) or a tool call's id (as computerfs log --tools shows)", to)
		}
		var rec *kv.AuditRecord
		if err := w.Store.ReadAudit(id-1, func(r kv.AuditRecord) bool {
			if r.ID == id {
				rec = &r
			}
			return false
		}); err != nil {
			return UndoResult{}, err
		}
		if rec == nil {
			return UndoResult{}, fmt.Errorf("undo: no tool call %d", id)
		}
		if rec.Checkpoint == "" {
			return UndoResult{}, fmt.Errorf("undo: tool call %d has no checkpoint (the policy's checkpoint was not each-call, or it could not be taken)", id)
		}
		res.Checkpoint, res.Call = rec.Checkpoint, id
	default:
		name, err := w.lastChange()
		if err != nil {
			return UndoResult{}, err
		}
		res.Checkpoint = name
	}
	rb, err := w.Rollback(res.Checkpoint)
	if errors.Is(err, kv.ErrNoSnapshot) {
		return UndoResult{}, fmt.Errorf("undo: checkpoint %s is gone (pruned, or never finished)", res.Checkpoint)
	}
	if err != nil {
		return UndoResult{}, err
	}
	res.RollbackResult = rb
	mark, _ := json.Marshal(undoMark{Rollback: rb.Seq, To: checkpointSeq(res.Checkpoint)})
	if err := w.Store.SetMeta(undoMeta, mark); err != nil {
		w.log.Warn("undo: recording it", "err", err)
	}
	return res, nil
}

// lastChange is the checkpoint an undo without a target goes back to: the
// newest one older than the current state, the current state being the
// checkpoint the last undo went to while nothing changed since.
func (w *Workspace) lastChange() (string, error) {
	list, err := w.Store.Checkpoints()
	if err != nil {
		return "", err
	}
	now := w.Store.LastSeq()
	if raw, err := w.Store.GetMeta(undoMeta); err == nil && raw != nil {
		var m undoMark
		if json.Unmarshal(raw, &m) == nil && m.Rollback == now {
			now = m.To
		}
	}
	for i := len(list) - 1; i >= 0; i-- {
		if list[i].Seq < now {
			return list[i].Name, nil
		}
	}
	return "", ErrNoCheckpoint
}

func checkpointSeq(name string) uint64 {
	n, _ := strconv.ParseUint(name[1:], 10, 64)
	return n
}

// checkpointTools are the agent's checkpoint tools (tools.Checkpoints).
type checkpointTools struct{ w *Workspace }

func (c checkpointTools) List(ctx context.Context) ([]kv.CheckpointInfo, error) {
	return c.w.Checkpoints()
}

func (c checkpointTools) Undo(ctx context.Context, to string) (tools.UndoResult, error) {
	res, err := c.w.Undo(to)
	if err != nil {
		return tools.UndoResult{}, err
	}
	return tools.UndoResult{Checkpoint: res.Checkpoint, Seq: res.Seq}, nil
}

// serveCheckpoints adds the checkpoint endpoints to the control socket:
//
//	GET  /v1/checkpoints      the checkpoints, oldest first
//	POST /v1/undo?to=T        Undo(T)
func (w *Workspace) serveCheckpoints(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/checkpoints", func(rw http.ResponseWriter, r *http.Request) {
		list, err := w.Checkpoints()
		if err != nil {
			httpError(rw, err)
			return
		}
		if list == nil {
			list = []kv.CheckpointInfo{}
		}
		writeJSON(rw, list)
	})
	mux.HandleFunc("POST /v1/undo", func(rw http.ResponseWriter, r *http.Request) {
		res, err := w.Undo(r.URL.Query().Get("to"))
		if err != nil {
			httpError(rw, err)
			return
		}
		writeJSON(rw, res)
	})
}

// Checkpoints asks the daemon for its workspace's checkpoints.
func (c *Client) Checkpoints(ctx context.Context) ([]kv.CheckpointInfo, error) {
	var list []kv.CheckpointInfo
	return list, c.call(ctx, http.MethodGet, "/v1/checkpoints", &list)
}

// Undo asks the daemon to put its workspace back to a checkpoint (see
// Workspace.Undo).
func (c *Client) Undo(ctx context.Context, to string) (UndoResult, error) {
	var res UndoResult
	return res, c.call(ctx, http.MethodPost, "/v1/undo?"+url.Values{"to": {to}}.Encode(), &res)
}

// cutLabel is a command cut short for a checkpoint's label.
func cutLabel(cmd string) string {
	if len(cmd) > 200 {
		cmd = cmd[:200] + "..."
	}
	return strconv.Quote(cmd)
}
