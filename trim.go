package computerfs

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// trimMemory shrinks the daemon once it goes idle (a second without
// allocations after some work): it empties the store's block cache (dropCaches),
// returns the Go heap's and the C allocator's free memory to the system
// and lets the kernel drop the resident pages of the daemon's code (see
// pageOutCode). After a burst of
// work (a big file read, a listing) an idle workspace shrinks back within
// about two seconds instead of keeping its peak.
func trimMemory(stop <-chan struct{}, dropCaches func()) {
	const every = time.Second
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	t := time.NewTicker(every)
	defer t.Stop()
	var last uint64
	trimmed := false
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		metrics.Read(sample)
		allocs := sample[0].Value.Uint64()
		switch {
		case allocs != last: // busy: shrink once it stops
			trimmed = false
		case !trimmed:
			dropCaches()
			// Two collections: the first moves what sync.Pools hold (go-fuse's
			// 1 MiB request buffers, about 12 MiB after a big read) to their
			// victim caches, the second frees those.
			runtime.GC()
			debug.FreeOSMemory()
			trimC() // the C allocator's free memory (Pebble's cache), see malloc_cgo.go
			pageOutCode()
			trimmed = true
			metrics.Read(sample) // what trimming allocated is not work
			allocs = sample[0].Value.Uint64()
		}
		last = allocs
	}
}
