//go:build cgo && linux

package computerfs

/*
#include <malloc.h>

// Before any thread allocates: a thread that got an arena of its own
// while Go's runtime and the packages' init functions were starting
// threads would keep it (and what is freed in it) for good.
static void __attribute__((constructor)) computerfs_one_arena(void) { mallopt(M_ARENA_MAX, 1); }
*/
import "C"

// Pebble allocates its block cache and memtables with the C allocator
// (which keeps them out of the Go heap and its garbage collector's
// pacing). glibc gives each thread that allocates an arena of its own and
// keeps what is freed there: after reading a few hundred MiB through a 16
// MiB cache, the daemon held 70 MiB. One arena and a trim when idle keep
// it near what is in use. The limit is set by a C constructor, when the
// binary is loaded.

func trimC() { C.malloc_trim(0) }
