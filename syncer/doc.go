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
// until a later pass finds the path in agreement (see docs/sync.md,
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
// A Target applies one pass's changes to one source's remote, path by
// path: S3Target does it object by object. The syncer owns the cursor,
// the pending set, debounce, retries and the durable record; a target only
// talks to its remote.
//
// # Git
//
// Git's unit is a commit, not a path, so a git source has a RepoTarget
// (GitTarget) instead, and its pass (repoPass) is shaped differently: the
// records after the cursor only say whether there is work. A change in
// the work tree asks for a commit and a push; a change below .git only
// (the agent committed, rebased, moved a branch) for a push. The target
// then, working on the checkout in the store through wsfs:
//
//   - walks the work tree once (go-git status) and stages every change as
//     git add -A would (new, changed and deleted files, modes, symbolic
//     links; .gitignore respected); if anything is staged, commits it,
//     author and committer from the spec (git.author), the message's
//     first line from git.message, then the changed paths ("M a.go");
//   - asks the remote for the branch (GitTarget.Branch: the daemon gives
//     git.branch or computerfs/NAME, never the branch HEAD is on, which
//     the agent's own pushes would race) and pushes HEAD's commit there
//     when the remote branch is absent or an ancestor of it. Anything
//     else is a conflict (recorded
//     at sync/IDX/conflict/.git): nothing is pushed, nothing forced, the
//     commit stays local. The push also requires the remote to still hold
//     what was checked, so a push arriving between the check and ours is
//     a conflict too. Commits the agent made are pushed as they are: the
//     target only ever adds one commit on top.
//
// Two options of a Source change this: OnSync (git push.when: sync)
// leaves it out of the background loop, so only an explicit Sync writes
// it back; AgentCommits (push.commit: agent) never commits the work tree:
// a pass starts only for changes below .git and pushes what the agent
// committed; CommitOnSync (push.commit: sync, the daemon's default) is
// AgentCommits in the background, and commits the work tree in an
// explicit Sync.
//
// The syncer's own writes (objects, index, refs; the remote-tracking ref
// after a push) are journaled as the actor "sync" and ignored when a
// git pass looks for work, so a pass never starts another. A git pass
// waits for the debounce after the newest change, and not for closes: an
// agent's burst of edits becomes one commit, not one per file. It also
// waits while .git/index.lock exists (git is at work in the workspace).
//
// Replay is harmless: after a crash between the commit and the push the
// work tree is clean, so the next pass commits nothing and pushes the
// commit; after a crash between the push and the cursor, the remote
// already holds HEAD and the pass does nothing.
package syncer
