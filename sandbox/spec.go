package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/opencontainers/runc/libcontainer/configs"
	"github.com/opencontainers/runc/libcontainer/specconv"
	"github.com/opencontainers/runtime-spec/specs-go"
)

// initPids is what the pids limit allows the sandbox's pid 1 (its
// threads, 5 here) on top of the program's limit until pid 1 has started
// the program and moved to a pids cgroup of its own (initOutOfPids).
const initPids = 12

// cgroupParent is the cgroup (under every v1 controller) that holds one
// cgroup per sandbox of a state directory: "computerfs-sandbox" for the
// default one, with a hash of the directory for others, so that GC of one
// state directory leaves the sandboxes of another alone.
func cgroupParent(stateDir string) string {
	if filepath.Clean(stateDir) == DefaultStateDir {
		return "computerfs-sandbox"
	}
	h := sha256.Sum256([]byte(filepath.Clean(stateDir)))
	return "computerfs-sandbox-" + hex.EncodeToString(h[:6])
}

// ownerLabel is the container label that names the process that started a
// container ("pid:starttime"), for GC.
const ownerLabel = "computerfs.owner"

// Spec returns the OCI runtime spec of a sandbox for opts, with rootfs as
// its root: the same container Run creates, for runc or for a look at it.
// The process is opts.Args as given (Run starts its own init first) and
// there is no seccomp profile in it (Run loads its own filter).
func Spec(opts Options, rootfs string) (*specs.Spec, error) {
	r, err := newRun(&opts)
	if err != nil {
		return nil, err
	}
	return r.spec(rootfs), nil
}

func (r *run) spec(rootfs string) *specs.Spec {
	o := r.opts
	u := r.user()
	hostname := o.Hostname
	if hostname == "" {
		hostname = "sandbox"
	}
	s := &specs.Spec{
		Version:  specs.Version,
		Root:     &specs.Root{Path: rootfs, Readonly: true},
		Hostname: hostname,
		Process: &specs.Process{
			Args:            o.Args,
			Env:             r.env(),
			Cwd:             r.cwd(),
			User:            specs.User{UID: u.UID, GID: u.GID},
			NoNewPrivileges: true,
			// Every set empty: no capabilities at all.
			Capabilities: &specs.LinuxCapabilities{},
		},
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
			{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
			{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "mode=1777"}},
		},
		Annotations: map[string]string{ownerLabel: selfOwner()},
		Linux: &specs.Linux{
			UIDMappings: r.idMappings(u.UID, o.HostUser, func(h *User) uint32 { return h.UID }),
			GIDMappings: r.idMappings(u.GID, o.HostUser, func(h *User) uint32 { return h.GID }),
			CgroupsPath: "/" + cgroupParent(o.StateDir) + "/" + r.id,
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace},
				{Type: specs.IPCNamespace},
				{Type: specs.UTSNamespace},
				{Type: specs.MountNamespace},
				{Type: specs.UserNamespace},
				{Type: specs.CgroupNamespace},
			},
			// As runc's example spec has them.
			MaskedPaths: []string{
				"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys",
				"/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
				"/proc/sched_debug", "/proc/scsi", "/sys/firmware",
			},
			ReadonlyPaths: []string{
				"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
			},
			Resources: r.resources(),
		},
	}
	if o.Network != NetworkHost {
		s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.NetworkNamespace})
	}
	if o.Rootfs == "" {
		hostLayout()
		for _, d := range hostDirs {
			s.Mounts = append(s.Mounts, specs.Mount{
				Destination: "/" + d, Type: "bind", Source: "/" + d,
				Options: []string{"bind", "ro", "nosuid", "nodev"},
			})
		}
	}
	if files, err := o.gitConfigFiles(); o.GitConfig != "" && err == nil {
		s.Mounts = append(s.Mounts, specs.Mount{
			Destination: GitConfigDir, Type: "bind", Source: gitConfigSource(o.StateDir, files),
			Options: []string{"bind", "ro", "nosuid", "nodev", "noexec"},
		})
	}
	if o.Workspace != "" {
		s.Mounts = append(s.Mounts, specs.Mount{
			Destination: "/workspace", Type: "bind", Source: o.Workspace,
			Options: []string{"bind", "rw", "nosuid", "nodev"},
		})
	}
	if o.Cache != "" {
		s.Mounts = append(s.Mounts, specs.Mount{
			Destination: CacheDir, Type: "bind", Source: o.Cache,
			Options: []string{"bind", "rw", "nosuid", "nodev"},
		})
	}
	return s
}

// idMappings is the user namespace's map of one kind of id (of): the
// sandbox's block, with the user's inside id made the host user's, when
// there is one that the block does not give it already.
func (r *run) idMappings(inside uint32, host *User, of func(*User) uint32) []specs.LinuxIDMapping {
	b := r.opts.IDs
	var h uint32
	if host != nil {
		if same, ok := b.Host(inside); !ok || same != of(host) {
			h = of(host)
		}
	}
	return b.maps(inside, h)
}

func (r *run) resources() *specs.LinuxResources {
	l := r.opts.Limits
	res := &specs.LinuxResources{
		// Deny every device; the default devices are allowed on top.
		Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}},
	}
	if l.Memory > 0 {
		res.Memory = &specs.LinuxMemory{Limit: &l.Memory}
	}
	if l.Pids > 0 {
		// The limit is the program's: pid 1 (a Go program, several
		// threads) comes on top.
		limit := l.Pids + initPids
		res.Pids = &specs.LinuxPids{Limit: &limit}
	}
	if l.CPU > 0 {
		period := uint64(100000)
		quota := int64(l.CPU * float64(period))
		res.CPU = &specs.LinuxCPU{Period: &period, Quota: &quota}
	}
	return res
}

var specconvMu sync.Mutex

// config is the libcontainer configuration of this run.
func (r *run) config() (*configs.Config, error) {
	rootfs := r.opts.Rootfs
	if rootfs == "" {
		var err error
		if rootfs, err = hostSkeleton(r.opts.StateDir); err != nil {
			return nil, err
		}
	} else if err := checkRootfs(rootfs, r.opts.Workspace != "", r.opts.Cache != ""); err != nil {
		return nil, err
	}
	if err := r.checkMounts(); err != nil {
		return nil, err
	}
	if r.opts.GitConfig != "" {
		files, err := r.opts.gitConfigFiles()
		if err == nil {
			err = writeGitConfig(r.opts.StateDir, files)
		}
		if err != nil {
			return nil, err
		}
	}
	// specconv sets the owner of its shared default devices: one at a time.
	specconvMu.Lock()
	config, err := specconv.CreateLibcontainerConfig(&specconv.CreateOpts{
		CgroupName: r.id,
		Spec:       r.spec(rootfs),
	})
	if err == nil {
		// Copies of the shared devices, for this container alone.
		for i, d := range config.Devices {
			c := *d
			config.Devices[i] = &c
		}
		for i, rule := range config.Cgroups.Resources.Devices {
			c := *rule
			config.Cgroups.Resources.Devices[i] = &c
		}
	}
	specconvMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("sandbox: config: %w", err)
	}
	return config, nil
}

// selfOwner identifies this process for GC: its pid and start time, so
// that a reused pid is not taken for it.
func selfOwner() string {
	pid := os.Getpid()
	return strconv.Itoa(pid) + ":" + strconv.FormatUint(startTime(pid), 10)
}
