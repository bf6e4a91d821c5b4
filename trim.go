package computerfs

import (
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// trimMemory returns memory the daemon no longer uses to the operating
// system every few seconds, once enough of it is free: after a burst of
// work (a big file read, a listing) an idle workspace shrinks back within
// seconds instead of the minutes Go's scavenger would take.
func trimMemory(stop <-chan struct{}) {
	const every, threshold = 2 * time.Second, 4 << 20
	sample := []metrics.Sample{{Name: "/memory/classes/heap/free:bytes"}}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		metrics.Read(sample)
		if sample[0].Value.Kind() == metrics.KindUint64 && sample[0].Value.Uint64() > threshold {
			debug.FreeOSMemory()
		}
		trimC() // the C allocator's free memory (Pebble's cache), see malloc_cgo.go
	}
}
