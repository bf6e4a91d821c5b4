// Package sandbox runs native programs in a container built with runc's
// libcontainer, with a workspace directory (normally a computerfs mount)
// at /workspace.
//
// Every run is one container: new mount, pid, ipc, uts, cgroup, user and
// (by default) network namespaces; the host's userland read-only as the
// root file system (or an unpacked root file system); a fresh tmpfs /tmp,
// a private /dev and a new /proc with runc's masked and read-only paths;
// an unprivileged user (the workspace's agent on the host, or a host id of
// the sandbox's id block: see IDs, a block per workspace or the shared
// 100000-165535); no new privileges, no capabilities, the default seccomp
// profile of moby/profiles (with the seccomp build tag) and a cgroup with
// the device rules and the limits asked for.
//
// Programs that use this package must call Init first thing in main (and
// in TestMain): libcontainer re-executes the binary to set up a container,
// and the sandbox's own pid 1 is the binary again (see Init).
//
// Inside the container, pid 1 is a small init of ours: it loads the
// seccomp filter (compiled once per process, not once per run), starts the
// program, forwards signals to it, reaps orphans and reports how the
// program ended. When the program ends, pid 1 exits and the kernel kills
// whatever the program left running.
//
// A Pool keeps sandboxes started ahead of their command, for a fixed set
// of options (workspace, root file system, user, network, cgroup limits,
// host name, seccomp): their pid 1 waits on a Unix socket for one command
// (arguments, environment, working directory and the program's stdin,
// stdout and stderr as SCM_RIGHTS), runs it as above and the sandbox is
// then destroyed; the pool starts another in the background. No sandbox
// runs two commands.
package sandbox
