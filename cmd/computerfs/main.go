// Command computerfs mounts and manages computerfs workspaces.
package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	_ "net/http/pprof"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/computerfs/computerfs/internal/execcli"
	"github.com/computerfs/computerfs/internal/textsafe"

	"github.com/computerfs/computerfs"
	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/sandbox"
	"github.com/computerfs/computerfs/spec"
)

func main() {
	sandbox.Init() // the sandbox backend starts this binary again as a sandbox's init
	msg, code := report(run(os.Args[1:], os.Stdout, os.Stderr))
	if msg != "" {
		fmt.Fprintln(os.Stderr, msg)
	}
	os.Exit(code)
}

// exitError ends the program with a status of its own (2 is a usage
// error, as usageError).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// parseInterleaved parses flags that may come before or after positional
// arguments ("mount MNT --store DIR" as well as "mount --store DIR MNT").
func parseInterleaved(fset *flag.FlagSet, args []string) ([]string, error) {
	return execcli.ParseInterleaved(fset, args)
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	o := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, o)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, o)), nil
	}
	return nil, fmt.Errorf("--log-format must be text or json, not %q", format)
}

func cmdMount(args []string, stdout, stderr io.Writer) error {
	fset := newFlags("mount")
	store := fset.String("store", "", "store directory (created if missing)")
	specFile := fset.String("spec", "", "workspace spec: import its sources into the store first, unless the store was imported already")
	owner := fset.String("owner", "", "with --spec, UID:GID that owns the imported files unless the spec says (default: the agent)")
	agent := fset.String("agent", "", "UID:GID of the workspace's agent identity, which owns what the agent writes and runs its sandboxed commands (default: the one the store recorded, else the spec's, else one allocated from "+fmt.Sprint(computerfs.AgentBase)+" up); a store keeps its agent for good")
	sharedRoot := fset.Bool("shared-root", false, "let other host users into the workspace as its root directory's mode says (default: the root is the agent's, shown as mode 0700 whatever chmod says, so only the agent and root enter)")
	agentsDir := fset.String("agents-dir", "", "the host-wide registry of agent identities (default "+computerfs.DefaultAgentsDir+")")
	background := fset.Bool("background", false, "run as a daemon; return once the mount answers")
	private := fset.Bool("private", false, "only the mounting user may use the mount (default: all users, kernel-checked permissions)")
	cacheMiB := fset.Int64("cache-size", 16, "Pebble block cache size in MiB (file pages are cached by the kernel; this caches metadata and chunks read)")
	minFreeMiB := fset.Int64("min-free", 0, "MiB the store keeps free on its file system: below it, writes and new names fail with ENOSPC, removing still works (0: twice --memtable-size plus 64; -1: none)")
	ballastMiB := fset.Int64("ballast", 0, "MiB of the ballast file the store keeps and gives up when its file system is full, so that its database can still write (0: twice --memtable-size plus 32; -1: none)")
	quotaFlag := fset.String("quota", "", "the workspace's disk quota, e.g. 10GiB: its files' logical sizes, names and extended attributes; past it writes fail with EDQUOT, and big files are written through the daemon (default: the spec's quota, if any; none)")
	memtableMiB := fset.Int64("memtable-size", 64, "largest Pebble memtable in MiB: up to two are in memory while big files are written (32 saves ~80 MiB of peak memory for ~10% of write throughput)")
	debug := fset.Bool("debug", false, "log every FUSE request")
	blobKiB := fset.Int64("blob-threshold", kv.DefaultBlobThreshold>>10, "size in KiB past which a file's data moves out of Pebble into a file of its own under the store (-1: never)")
	noJournal := fset.Bool("no-journal", false, "benchmarks only: keep no journal of changes (nothing can be audited or synced)")
	ptCreates := fset.Bool("passthrough-creates", true, "a file created with O_TRUNC (dd, cp, compilers, shell redirections) is a blob written by the kernel from its first byte, back in chunks at close if small (=false: written through the daemon until it is closed)")
	noPassthrough := fset.Bool("no-passthrough", false, "read and write big files through the daemon too, not by the kernel directly (FUSE passthrough)")
	level := fset.String("log-level", "info", "log level: debug, info, warn, error")
	format := fset.String("log-format", "text", "log format: text or json")
	logFile := fset.String("log-file", "", "with --background, the daemon's log file (default STORE/daemon.log)")
	readyFD := fset.Int("ready-fd", -1, "internal: file descriptor to report readiness on")
	noSandbox := fset.Bool("no-sandbox", false, "no sandbox backend for exec: only the shell fast path")
	sbRootfs := fset.String("sandbox-rootfs", "", "the sandbox's root file system: an unpacked tree (default: the host's userland, read-only)")
	sbNetwork := fset.Bool("sandbox-network", false, "let exec requests ask for the host's network in the sandbox (--network host)")
	sbMemory := fset.String("sandbox-memory", fmt.Sprintf("%dM", sandbox.DefaultLimits.Memory>>20), "memory limit of each sandboxed command, page cache and /tmp included (0: none)")
	sbWarm := fset.Int("sandbox-warm", 1, "sandboxes kept started, waiting for the next command (0: start one per command)")
	sbPids := fset.Int64("sandbox-pids", sandbox.DefaultLimits.Pids, "processes and threads of each sandboxed command at once (0: no limit)")
	sbCache := fset.String("sandbox-cache", fmt.Sprintf("%dM", sandbox.DefaultCacheSize>>20), "size of the workspace's cache volume, where sandboxed commands keep the Go, npm, pip and cargo caches from one command to the next (STORE/sandbox-cache.img, allocated in full at the first sandboxed command; 0: none)")
	sbState := fset.String("sandbox-state-dir", sandbox.DefaultStateDir, "where the sandboxes keep their state (sandboxctl's --state-dir)")
	pprofAddr := fset.String("pprof", "", "serve net/http/pprof and /debug/pebble (store metrics) on this address (e.g. 127.0.0.1:6060)")
	pos, err := parse(fset, args, stdout)
	if err != nil {
		return err
	}
	if err := needArgs(pos, "MOUNTPOINT"); err != nil {
		return err
	}
	if *store == "" {
		return usageErr("missing --store DIR")
	}
	if *cacheMiB <= 0 {
		return &exitError{2, fmt.Errorf("--cache-size must be positive, not %d", *cacheMiB)}
	}
	if *memtableMiB < 4 || *memtableMiB > 1024 {
		return &exitError{2, fmt.Errorf("--memtable-size must be between 4 and 1024 MiB, not %d", *memtableMiB)}
	}
	if *readyFD < 0 && computerfs.MountpointHidesFiles(pos[0]) {
		// Once, before an import or the daemon's start (whose log goes
		// elsewhere with --background).
		fmt.Fprintf(stderr, "computerfs mount: warning: %s is not empty: its files are hidden while the workspace is mounted over them (and untouched)\n", textsafe.Name(pos[0]))
	}
	var quota int64
	if *quotaFlag != "" {
		if quota, err = spec.ParseSize(*quotaFlag); err != nil {
			return &exitError{2, fmt.Errorf("--quota: %w", err)}
		}
	}
	log, err := newLogger(stderr, *level, *format)
	if err != nil {
		return &exitError{2, err}
	}
	var sb *computerfs.SandboxOptions
	if !*noSandbox {
		if *sbWarm < 0 || *sbWarm > 64 {
			return &exitError{2, fmt.Errorf("--sandbox-warm must be between 0 and 64, not %d", *sbWarm)}
		}
		sb = &computerfs.SandboxOptions{AllowNetwork: *sbNetwork, Warm: *sbWarm}
		sb.Base.Rootfs = *sbRootfs
		sb.Base.Limits.Pids = *sbPids
		sb.Base.StateDir = *sbState
		if sb.Base.Limits.Memory, err = spec.ParseSize(*sbMemory); err != nil || sb.Base.Limits.Memory < 0 {
			return &exitError{2, fmt.Errorf("--sandbox-memory %q: want a size such as 512M or 2G, or 0 for none", *sbMemory)}
		}
		switch size, err := spec.ParseSize(*sbCache); {
		case err != nil || size < 0 || size > 0 && size < sandbox.MinCacheSize:
			return &exitError{2, fmt.Errorf("--sandbox-cache %q: want a size of %dM or more such as 2G, or 0 for none", *sbCache, sandbox.MinCacheSize>>20)}
		case size == 0:
			sb.CacheSize = -1
		default:
			sb.CacheSize = size
		}
		if *sbPids < 0 {
			return &exitError{2, fmt.Errorf("--sandbox-pids must not be negative, not %d", *sbPids)}
		}
	}
	ag, err := parseAgent(*agent)
	if err != nil {
		return &exitError{2, err}
	}
	if *specFile != "" {
		o, err := parseOwner(*owner)
		if err != nil {
			return &exitError{2, err}
		}
		tune := importTuning{o, ag, *agentsDir, max(*cacheMiB<<20, 128<<20), max(uint64(*memtableMiB)<<20, 128<<20)}
		if _, err := importSpec(*specFile, *store, tune, log, stderr); err != nil {
			return err
		}
		// The daemon reads the spec from the store from now on.
		args = stripValueFlag(stripValueFlag(args, "spec"), "owner")
	}
	if *background {
		return daemonize(args, *store, *logFile)
	}
	if *pprofAddr != "" {
		go func() { log.Error("pprof server stopped", "err", http.ListenAndServe(*pprofAddr, nil)) }()
	}
	ready := readyReporter(*readyFD)
	// Signals are caught before the mount exists and before the parent of
	// --background is told it is ready, which may signal at once: one
	// that arrives meanwhile unmounts as soon as there is a mount, rather
	// than killing the daemon and leaving a dead mount behind.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	ws, err := computerfs.Mount(computerfs.MountOptions{
		Store: *store, Mountpoint: pos[0], Private: *private, Quota: quota, Ballast: minFree(*ballastMiB),
		CacheSize: *cacheMiB << 20, MemTableSize: uint64(*memtableMiB) << 20, MinFree: minFree(*minFreeMiB), BlobThreshold: blobThreshold(*blobKiB), Debug: *debug, Logger: log, NoJournal: *noJournal, NoPassthrough: *noPassthrough, NoPassthroughCreates: !*ptCreates,
		Sandbox: sb, Agent: ag, AgentsDir: *agentsDir, SharedRoot: *sharedRoot,
	})
	if err != nil {
		signal.Stop(sigs)
		ready(err)
		return err
	}
	if *pprofAddr != "" {
		http.HandleFunc("/debug/pebble", func(w http.ResponseWriter, _ *http.Request) {
			io.WriteString(w, ws.Store.Metrics())
		})
	}
	ready(nil)
	go func() {
		s := <-sigs
		log.Info("signal received; unmounting", "signal", s.String())
		if err := ws.Unmount(); err != nil {
			log.Error("unmount failed", "err", err)
		}
	}()
	return ws.Wait()
}

// readyReporter returns the function a background daemon calls once the
// mount answers (or failed): it writes "ok" or the error to the pipe its
// parent waits on.
func readyReporter(fd int) func(error) {
	if fd < 0 {
		return func(error) {}
	}
	f := os.NewFile(uintptr(fd), "ready")
	return func(err error) {
		msg := "ok\n"
		if err != nil {
			msg = err.Error() + "\n"
		}
		f.WriteString(msg)
		f.Close()
	}
}

func cmdUnmount(args []string, stdout, stderr io.Writer) error {
	fset := newFlags("unmount")
	timeout := fset.Duration("timeout", 30*time.Second, "how long to wait for the daemon to close its store")
	pos, err := parse(fset, args, stdout)
	if err != nil {
		return err
	}
	if err := needArgs(pos, "MOUNTPOINT"); err != nil {
		return err
	}
	return computerfs.Unmount(pos[0], *timeout)
}

func stripFlag(args []string, name string) []string {
	out := args[:0:0]
	for _, a := range args {
		if a == "-"+name || a == "--"+name || strings.HasPrefix(a, "--"+name+"=") || strings.HasPrefix(a, "-"+name+"=") {
			continue
		}
		out = append(out, a)
	}
	return out
}

// stripValueFlag removes a flag that takes a value ("--name V" or
// "--name=V") from args.
func stripValueFlag(args []string, name string) []string {
	out := args[:0:0]
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-"+name || a == "--"+name:
			i++ // and its value
		case strings.HasPrefix(a, "--"+name+"=") || strings.HasPrefix(a, "-"+name+"="):
		default:
			out = append(out, a)
		}
	}
	return out
}

func cmdFsck(args []string, stdout, stderr io.Writer) error {
	fset := newFlags("fsck")
	store := fset.String("store", "", "store directory")
	limit := fset.Int("max", 100, "stop after this many problems (0: all)")
	pos, err := parse(fset, args, stdout)
	if err != nil {
		return err
	}
	if err := needArgs(pos); err != nil {
		return err
	}
	if *store == "" {
		return usageErr("missing --store DIR")
	}
	s, err := computerfs.OpenExisting(*store, slog.New(slog.NewTextHandler(stderr, nil)))
	if err != nil {
		return mountedAdvice(err, func(string) string { return "unmount it first" })
	}
	defer s.Close()
	problems, err := s.Check(*limit)
	for _, p := range problems {
		fmt.Fprintln(stdout, textsafe.Text(p))
	}
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s: %d problems", *store, len(problems))
	}
	fmt.Fprintf(stdout, "%s: no problems\n", *store)
	return nil
}

// blobThreshold turns --blob-threshold (KiB, -1: never) into bytes for
// kv.Options (0 there means the default, so a threshold of 0 KiB is 1 byte).
func blobThreshold(kib int64) int64 {
	switch {
	case kib < 0:
		return -1
	case kib == 0:
		return 1
	}
	return kib << 10
}

// minFree turns --min-free or --ballast (MiB; -1: none) into
// kv.Options.MinFree or Ballast.
func minFree(mib int64) int64 {
	if mib < 0 {
		return -1
	}
	return mib << 20
}
