//go:build cgo && linux

package computerfs

// #include <malloc.h>
import "C"

// Pebble allocates its block cache and memtables with the C allocator
// (which keeps them out of the Go heap and its garbage collector's
// pacing). glibc gives each thread that allocates an arena of its own and
// keeps what is freed there: after reading a few hundred MiB through a 16
// MiB cache, the daemon held 70 MiB. One arena and a trim when idle keep
// it near what is in use.
func init() { C.mallopt(C.M_ARENA_MAX, 1) }

func trimC() { C.malloc_trim(0) }
