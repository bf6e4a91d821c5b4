package kv

import (
	"sync/atomic"
	"time"
)

// The gate lets a rollback of an open store (Store.Rollback) close the
// database and the blobs under its callers and open the new ones: every
// exported method of Store and Session passes it (enter at the start,
// leave at the end), and a rollback closes it, waits until no call is
// inside, swaps, and opens it again.
//
// A call costs two atomic additions and one atomic load, no lock: readers
// take no lock on the store otherwise, and a mutex shared by every reader
// would make them queue on one cache line. Calls nest (an exported method
// calling another, a ReadDir callback calling GetAttr), and a nested call
// cannot be told from a new one, so a closed gate that a nested call
// waited at would never see its outer call leave. The gate therefore
// stays closed for at most gateTry at a time: if calls are still inside
// then, it opens again, lets them finish, and tries again. A nested call
// is waited for only while its outer call runs, so the attempts end as
// soon as a moment comes with no call inside.

// gateTry bounds one attempt to close the gate; gatePause is the pause
// between attempts.
const (
	gateTry   = 20 * time.Millisecond
	gatePause = time.Millisecond
)

type gate struct {
	inside  atomic.Int64                  // calls inside the gate
	closing atomic.Bool                   // a rollback wants every call out
	opened  atomic.Pointer[chan struct{}] // closed when the gate opens again
	gen     atomic.Uint64                 // rollbacks done (Generation)
}

// enter lets a call in, waiting while a rollback holds the gate.
func (s *Store) enter() {
	g := &s.gate
	for {
		g.inside.Add(1)
		if !g.closing.Load() {
			return
		}
		g.inside.Add(-1)
		if ch := g.opened.Load(); ch != nil && g.closing.Load() {
			<-*ch
		}
	}
}

// leave is the end of a call that entered.
func (s *Store) leave() { s.gate.inside.Add(-1) }

// closeGate waits until no call is inside and keeps new ones out, until
// openGate. Only one rollback calls it at a time (rollMu).
func (s *Store) closeGate() {
	g := &s.gate
	for {
		ch := make(chan struct{})
		g.opened.Store(&ch)
		g.closing.Store(true)
		deadline := time.Now().Add(gateTry)
		for g.inside.Load() > 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Microsecond)
		}
		if g.inside.Load() == 0 {
			return
		}
		s.openGate() // let nested calls finish their outer ones
		time.Sleep(gatePause)
	}
}

// openGate lets calls in again.
func (s *Store) openGate() {
	g := &s.gate
	g.closing.Store(false)
	if ch := g.opened.Swap(nil); ch != nil {
		close(*ch)
	}
}

// Generation counts the rollbacks of the open store: what a caller holds
// from before a change of generation (a file handle, a cached listing)
// describes a state the store no longer has.
func (s *Store) Generation() uint64 { return s.gate.gen.Load() }
