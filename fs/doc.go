// Package fs serves a kv.Store to the kernel through FUSE (go-fuse's raw
// protocol API).
//
// # Node ids
//
// The FUSE node id of a file is its inode number in the store (the root is
// 1 in both), so the server keeps no tree of nodes: a request names an inode
// and the store answers. The only per-node state is the kernel's lookup
// count, kept in a map while it is non-zero. When the kernel forgets an
// inode that has no names left (unlinked while open), the store deletes it.
//
// # Caching
//
// All changes to a workspace pass through this process, so the kernel may
// cache entries and attributes for a long time (Config.EntryTimeout) and
// keep file pages across opens (FOPEN_KEEP_CACHE). Changes made by other
// paths into the store (the shell fast path, agent tools) must call the
// Notify* methods so the kernel drops what it cached.
//
// The kernel never updates access times of FUSE files itself. Reads that
// reach the server apply the relatime rule; an open for reading of a file
// whose access time is due for an update drops the cached pages so that the
// first read reaches the server.
//
// # Errors
//
// Store errors are mapped to errno values by kv.Errno in one place
// (status); an unexpected error is logged and returned as EIO.
//
// # Durability
//
// Closing a file that was written (FLUSH) hands the store's log to the
// operating system; fsync, fdatasync and fsyncdir write it to stable
// storage. See package kv for the exact rule.
package fs
