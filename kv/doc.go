// Package kv is the computerfs store: a POSIX file system's inodes,
// directories, file data and extended attributes kept in one Pebble
// database. It knows nothing of FUSE; the FUSE server (package fs), the
// shell fast path and the agent tools all call the same operations here, so
// every path into the workspace has the same semantics.
//
// # Key layout
//
// All integers are big-endian so that keys sort numerically. Everything that
// belongs to one inode shares the prefix 'I' ino, so deleting an inode is one
// range deletion and reading a directory is one prefix scan.
//
//	'M' name                      meta: format version, next inode number, inode count,
//	                              the usage count of files, journal and audit (usage.go)
//	'M' 'u:' name                 meta kept by the layers above (GetMeta, SetMeta)
//	'I' ino 'a'                   attributes (Attr, fixed-size binary)
//	'I' ino 'c' chunk             file data: bytes [chunk*ChunkSize, ...) of the file,
//	                              at most ChunkSize long; a missing or short chunk reads as zeros;
//	                              appends to it may be merge operands, which Pebble's default
//	                              merger concatenates (see write)
//	'I' ino 'd' name              directory entry: child ino (8 bytes) and file type (1 byte)
//	'I' ino 'l'                   symbolic link target
//	'I' ino 'o'                   origin: source, remote name and version of an imported file
//	'I' ino 'p' parent name       back reference: one name of ino (one per hard link),
//	                              used to find a directory's parent and an inode's paths
//	'I' ino 'x' name              extended attribute value
//	'O' ino                       orphan: nlink reached 0 while the inode was in use
//	'J' seq                       journal record (journal.go); the oldest are deleted by
//	                              TrimJournal once synced, the newest is always kept;
//	                              counted in the usage and the quota
//	'A' id                        audit record of an agent tool call (audit.go); counted
//	                              in the usage and the quota, never trimmed
//
// Inode numbers come from a persisted counter and are never reused, so the
// kernel's node ids can be the inode numbers themselves (the root is 1).
//
// # Atomicity and durability
//
// Every operation (create, write, rename...) is one Pebble batch: after any
// crash the store holds exactly the effect of some prefix of the operations,
// never half of one. A batch is committed without waiting for the disk; the
// write-ahead log then reaches the operating system at the latest after
// FlushInterval, or at once when a caller asks for it:
//
//   - Flush (called when a file that was written is closed) hands the log to
//     the operating system: everything done before it survives a crash of
//     the daemon (SIGKILL, panic), though not yet a power loss;
//   - Sync (fsync, fdatasync, syncfs) writes the log to stable storage:
//     everything done before it survives a power loss too;
//   - a background loop flushes every FlushInterval and syncs every
//     SyncInterval while there are changes.
//
// The difference between flush and sync is made by a thin vfs.FS wrapper
// (durable.go) that skips the write-ahead log's fsync unless a sync was
// asked for; Pebble's own files (tables, manifest) are always synced.
//
// # Locking
//
// Namespace operations (anything that adds, removes or moves a name) hold
// Store.nsMu, which serialises them and makes their read-check-write
// sequences atomic. Operations on one inode's attributes or data hold that
// inode's stripe lock; namespace operations take the stripe locks of the
// inodes whose attributes they change, always after nsMu and in inode order.
// Reads take no locks: Pebble gives each read a consistent view.
package kv
