package shell

import (
	"context"
	"errors"
	"io"
	"runtime"
	"runtime/metrics"
	"sync"
	"time"
)

// Scripts on the fast path run inside the daemon: an endless input
// (/dev/zero, a pipe from `yes`) must stop when the script is stopped, and
// a script that holds too much (`sort /dev/zero`, `x=$(cat /dev/zero)`)
// must be stopped before it takes the daemon's memory.

var errMemoryLimit = errors.New("memory limit reached")

// stoppable makes reads fail with the script's stop cause once ctx ends,
// so that a built-in reading an endless input ends with the script.
type stoppable struct {
	vfile
	ctx context.Context
}

func (s stoppable) Read(p []byte) (int, error) { return stoppableReader{s.vfile, s.ctx}.Read(p) }

type stoppableReader struct {
	io.Reader
	ctx context.Context
}

func (s stoppableReader) Read(p []byte) (int, error) {
	if s.ctx.Err() != nil {
		return 0, context.Cause(s.ctx)
	}
	return s.Reader.Read(p)
}

// DefaultMaxMemory bounds how much the daemon's Go heap may grow while a
// script runs (ExecOptions.MaxMemory).
const DefaultMaxMemory = 512 << 20

// memWatch is the watchdog of the scripts that run: every few
// milliseconds it reads the size of the heap and stops each script under
// which it grew by more than that script's bound. The heap is the
// process's, so while several scripts run at once the one that crosses
// its bound is not necessarily the one that allocated; it is a guard for
// the daemon, not an accounting.
type memWatch struct {
	mu      sync.Mutex
	scripts map[*memScript]struct{}
}

type memScript struct {
	base, max uint64
	stop      func()
}

var watch = &memWatch{scripts: map[*memScript]struct{}{}}

const memTick = 5 * time.Millisecond

// staleHeap: above this live heap at a script's start, the watchdog
// collects garbage first to know where the script starts from. An idle
// daemon's heap is well below it.
const staleHeap = 96 << 20

// add watches a script whose heap bound is max bytes above the heap now;
// stop is called (once) when it is crossed. The returned func ends the
// watch.
func (w *memWatch) add(max uint64, stop func()) func() {
	base := heapLive()
	if base > staleHeap {
		// The last collection may have counted what an earlier script
		// held: collect now, or this script's bound would start that
		// much higher.
		runtime.GC()
		base = heapLive()
	}
	s := &memScript{base: base, max: max, stop: stop}
	w.mu.Lock()
	w.scripts[s] = struct{}{}
	if len(w.scripts) == 1 {
		go w.loop()
	}
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		delete(w.scripts, s)
		w.mu.Unlock()
	}
}

func (w *memWatch) loop() {
	t := time.NewTicker(memTick)
	defer t.Stop()
	for range t.C {
		w.mu.Lock()
		if len(w.scripts) == 0 {
			w.mu.Unlock()
			return
		}
		heap := heapObjects()
		var over []*memScript
		for s := range w.scripts {
			if heap > s.base+s.max {
				over = append(over, s)
			}
		}
		w.mu.Unlock()
		if len(over) == 0 {
			continue
		}
		// Garbage counts until it is collected: look again after a
		// collection before stopping anything.
		runtime.GC()
		heap = heapObjects()
		w.mu.Lock()
		for _, s := range over {
			if _, ok := w.scripts[s]; ok && heap > s.base+s.max {
				delete(w.scripts, s)
				s.stop()
			}
		}
		w.mu.Unlock()
	}
}

var heapSamples = []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/live:bytes"}}
var sampleMu sync.Mutex

// heapObjects is the bytes of heap objects, live or not yet collected.
func heapObjects() uint64 { return readHeap(0) }

// heapLive is the heap marked live by the last collection.
func heapLive() uint64 { return readHeap(1) }

func readHeap(i int) uint64 {
	sampleMu.Lock()
	defer sampleMu.Unlock()
	metrics.Read(heapSamples)
	if heapSamples[i].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return heapSamples[i].Value.Uint64()
}
