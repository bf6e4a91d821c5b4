// Package syncer writes a workspace's changes back to where its sources
// came from, driven by the journal (kv/journal.go).
//
// # Model
//
// Each source with write-back has a cursor: a journal sequence number in
// store meta (sync/IDX/cursor). The pending work of a source is the set of
// paths under its directory that journal records after the cursor touch
// (both names of a rename; every file below a directory that was made,
// moved or removed), plus the paths left in conflict. A pass does not
// replay the records: for each pending path it compares the store as it is
// now with what the remote last held (the file's origin and the source's
// manifest, meta s3/IDX/KEY = ETag) and decides (Decide):
//
//   - a regular file that is new or changed: put it, on the condition that
//     the remote still holds the version the workspace last saw (If-Match),
//     or nothing at all for a new object (If-None-Match: *);
//   - a path that holds no regular file now but is in the manifest: delete
//     the object, on the same condition;
//   - anything else: nothing to do.
//
// A rename is therefore a put of the new name and a delete of the old one.
//
// # Durability
//
// After the remote confirms, the new version goes into the file's origin
// and the manifest, and the cursor advances past every record whose paths
// are all done, in one Pebble batch synced to disk (kv.Store.CommitSync).
// A crash before that batch leaves the cursor where it was: the next pass
// decides the same paths again. A put that reached the remote before the
// crash then fails its condition (the remote holds the new version, the
// manifest the old); the target compares the remote's ETag with the one
// the local content would have and takes the object as uploaded when they
// agree, so replay uploads nothing twice and never overwrites a version
// someone else wrote.
//
// Journal records up to the cursor are final: SealJournal stops writes
// from joining a record the syncer has read.
//
// # Conflicts
//
// A failed condition whose remote version is not the local content is a
// conflict: nothing is written, the path is recorded in meta
// (sync/IDX/conflict/REL) and reported by status and `computerfs sync`
// until a later pass finds the path in agreement (see README, "Sync back",
// for what resolves one). Conflicts are durable, so they do not hold the
// cursor back; failures (a remote that is down) do, and are retried with
// exponential backoff and jitter.
//
// # Debounce
//
// A path is taken once its newest record is older than the debounce
// (spec sync.debounce, default 1 s), or sooner when the file was closed
// after writing or fsynced after its last change (Syncer.Ready), or at
// once for an explicit Sync.
//
// # Targets
//
// A Target applies one pass's changes to one source's remote. S3Target
// does it object by object; a git target (later) will commit the changed
// paths and push. The syncer owns the cursor, the pending set, debounce,
// retries and the durable record; a target only talks to its remote.
package syncer
