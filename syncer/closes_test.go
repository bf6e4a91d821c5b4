package syncer

import (
	"testing"
	"time"
)

// Closes are remembered only while they can still matter: the map of
// them must not grow with every file the workspace ever wrote.
func TestClosesForgotten(t *testing.T) {
	s := &Syncer{opts: Options{Debounce: time.Second}, srcs: []*source{{}}, closed: map[uint64]int64{}}
	s.Ready(1)
	s.Ready(2)
	s.forgetCloses(time.Now())
	if s.closedAt(1) == 0 || s.closedAt(2) == 0 {
		t.Fatal("recent closes were forgotten")
	}
	s.forgetCloses(time.Now().Add(2 * time.Minute))
	if len(s.closed) != 0 {
		t.Fatalf("%d closes kept two minutes later", len(s.closed))
	}
	none := &Syncer{opts: Options{Debounce: time.Second}, closed: map[uint64]int64{}, kick: make(chan struct{}, 1)}
	none.Ready(3)
	if len(none.closed) != 0 {
		t.Fatal("a syncer with nothing to write back remembers closes")
	}
}
