package syncer

import (
	"context"
	"errors"
	"io"
)

// Target is the remote end of one source with write-back.
//
// Apply is called from one goroutine at a time, with the changes of one
// pass; it may work on them in parallel. It returns one Result per change,
// in order. A change whose Data fails with ErrChanged (the file changed
// while it was being read) must not leave a partial object behind; its
// Result carries that error and the syncer tries again later. Apply must
// treat a change that the remote already holds (a replay after a crash)
// as done, and must never write over a version other than Change.Expect.
type Target interface {
	Apply(ctx context.Context, changes []Change) []Result
}

// Change is one path to write back.
type Change struct {
	Rel    string // path below the source's directory
	Key    string // name at the remote
	Delete bool
	// Expect is the version the workspace last saw at Key ("" when it saw
	// none: a put must create the object, a delete has nothing to check).
	Expect string
	Size   int64
	// Data is the content to put: reads see the file as it was when the
	// pass looked at it, or fail with ErrChanged.
	Data io.ReaderAt
}

// Result is what became of a Change.
type Result struct {
	Version string // the remote's version after a put
	// Same: the remote already held this content (a put found nothing to
	// send: only the file's attributes changed, or a replay).
	Same bool
	// Conflict, if not empty, says why the remote was left alone: it holds
	// Remote ("" for nothing) rather than what the workspace expected.
	Conflict string
	Remote   string
	Err      error
}

// ErrChanged is returned by a Change's Data when the file changed after
// the pass looked at it.
var ErrChanged = errors.New("the file changed while it was being uploaded")
