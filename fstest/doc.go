// Package fstest is a POSIX conformance suite for a filesystem, given as a
// directory. It holds a filesystem to what Linux local filesystems (tmpfs,
// ext4) do, down to the errno values, so the same checks run against a
// tmpfs directory, where all of them pass, and against a computerfs mount.
//
// # Running it
//
// There are three entry points, each called from an ordinary test:
//
//	func TestConformance(t *testing.T) {
//		fstest.Run(t, mnt, fstest.Options{Skip: map[string]string{
//			"file/seek_data_hole": "holes are not tracked yet",
//		}})
//	}
//
//	func TestFSX(t *testing.T) {
//		fstest.FSX(t, mnt, twinTmpfsDir, seed, 2000)
//	}
//
//	func TestStress(t *testing.T) {
//		fstest.Stress(t, mnt, fstest.StressOptions{Duration: 5 * time.Second})
//	}
//
// Run runs every check as a subtest named area/leaf (TestConformance/
// rename/noreplace), each in a fresh subdirectory of the directory, which
// it removes afterwards (Options.KeepFailed keeps those of failed checks).
// Checks() lists the names.
//
// FSX applies a long seeded random sequence of writes, reads, truncates,
// mmap reads and writes, fallocate, copy_file_range, renames, exchanges,
// hard links, unlinks of files still open, and I/O through those open
// descriptors to the same names in the directory under test and in a
// reference twin directory (a tmpfs), and compares results, errno values,
// contents, sizes, link counts, listings and hard link groups after every
// operation (the names it touched) and every few operations (everything).
// The sequence depends only on the seed and on the twin, so a failure,
// which reports the seed, the operation number and the operations before
// it, is replayed by running FSX again with that seed and count.
//
// Stress runs goroutines and child processes that create, write, rename,
// exchange, link, symlink, truncate and delete in the same few directories
// for a bounded time, then walks the tree: every listed entry must stat
// with the listed type and inode number, no directory may list a name
// twice, the link count of every file must equal the number of names found
// for it, every directory must have 2 plus its subdirectories as link
// count, and the tree must then be removable.
//
// # The skip list
//
// Options.Skip maps check names to reasons. It documents where the
// filesystem knowingly differs from tmpfs: a skipped check is reported as
// skipped with the reason. A key that is not a check name, or an empty
// reason, makes Run fail (ValidateSkip checks a list), so the list cannot
// go stale silently. There is no other switch: a filesystem without POSIX
// ACLs skips "xattr/acl_access" and "xattr/acl_default", one mounted
// noatime skips "time/atime_relatime", and so on. Checks are fine grained
// so that a skip covers exactly one behaviour. Some checks accept every
// behaviour that Linux local filesystems show (O_DIRECT may be refused with
// EINVAL; xattr values beyond 3000 bytes may fail with ENOSPC as on ext4);
// everything else is a hard expectation.
//
// # What the directory must be like
//
// The suite runs as root (it chowns, makes device nodes, uses trusted.*
// attributes and acts as other users). The directory must be writable by
// root, and the unprivileged users (Options.UID/GID, default 1000:1000,
// and Options.OtherUID/OtherGID, default 1001:1001, with Options.ExtraGID,
// default 1002, as a supplementary group; they need not exist in
// /etc/passwd) must be able to reach it: every ancestor directory needs
// the search bit for others (t.TempDir makes 0700 directories: chmod them
// 0755), and a FUSE filesystem must be mounted with allow_other. Run
// checks this first (preflight) and fails with one clear message
// otherwise. Each check directory is made mode 0777. The filesystem should
// have a few GiB of address space for sparse files (one check writes at
// 5 GiB) but needs little real space.
//
// # The helper process
//
// Checks that need another user, or another process (POSIX record locks
// belong to processes), re-execute the running test binary
// (os.Executable) with the environment variable FSTEST_HELPER_JOB holding
// a JSON job: an identity and a list of operations. The child starts as
// root, sees the variable in this package's init function, before the
// testing package starts, switches identity with setgroups, setresgid and
// setresuid, runs the operations and prints one JSON result (errno, data,
// stat, lock) per operation on stdout, then exits. A "wait" operation
// blocks until the parent writes a line to the child's stdin, which lets a
// child hold a lock while the parent looks at it. Because the child
// changes identity itself, the test binary does not need to be readable by
// the other users.
//
// Any test binary that imports fstest therefore works as a helper with no
// further setup, and a TestMain that mounts the filesystem never runs in a
// child. A TestMain may call MaybeRunHelper first thing, which documents
// the mechanism and is harmless:
//
//	func TestMain(m *testing.M) {
//		fstest.MaybeRunHelper()
//		os.Exit(m.Run())
//	}
//
// # System calls
//
// All system calls go through small wrappers that repeat a call failing
// with EINTR: against a FUSE filesystem the Go runtime's preemption
// signals can interrupt slow requests, and the x/sys/unix wrappers return
// EINTR as is. The suite does not change process-wide state (the umask is
// read from /proc, not set), so it can run next to other tests.
package fstest
