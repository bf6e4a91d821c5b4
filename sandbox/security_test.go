package sandbox_test

import (
	"crypto/sha256"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/computerfs/computerfs/internal/testmount"
	"github.com/computerfs/computerfs/sandbox"
)

// The security suite: each check is an attempted escape that must fail.
// Commands print ESCAPED when an attempt succeeds. Each runs as the
// default user and as root inside the sandbox (who is not root outside:
// the workspace's agent, as the default user is).

// users to try escapes as.
var users = map[string]*sandbox.User{"user": nil, "root": {UID: 0, GID: 0}}

// attempt runs command in the sandbox as each user, in a new sandbox and
// in a pre-started one (a Pool's), and fails the test if it prints
// ESCAPED or any of the secrets.
func attempt(t *testing.T, opts sandbox.Options, command string, secrets ...string) {
	t.Helper()
	for _, m := range []*mode{cold, warm} {
		for name, u := range users {
			name += " (" + m.name + ")"
			opts.User = u
			opts.Args = []string{"/bin/bash", "-c", command}
			o := m.run(t, opts)
			if o.err != nil {
				t.Errorf("as %s: %s: %v", name, command, o.err)
				continue
			}
			out := o.stdout + o.stderr
			if strings.Contains(out, "ESCAPED") {
				t.Errorf("as %s: escaped: %s\n%v", name, command, o)
			}
			for _, s := range secrets {
				if strings.Contains(out, s) {
					t.Errorf("as %s: %s: the secret %q leaked\n%v", name, command, s, o)
				}
			}
		}
	}
}

// perlSyscall is a command that makes a raw system call (x86-64 numbers)
// and prints ESCAPED if it succeeds.
func perlSyscall(nr int, args ...string) string {
	a := append([]string{fmt.Sprint(nr)}, args...)
	return fmt.Sprintf(`perl -e '$r = syscall(%s); print $r == -1 ? "syscall %d: errno ".($!+0)."\n" : "ESCAPED syscall %d\n"'`,
		strings.Join(a, ", "), nr, nr)
}

func TestSecurity(t *testing.T) {
	// As the daemon runs it: the sandbox's user, and root inside, is the
	// workspace's agent on the host.
	ws, agent := agentWorkspace(t)
	opts := sandbox.Options{Workspace: ws, HostUser: &agent}

	// Secrets on the host, outside the root file system: in /tmp (a fresh
	// tmpfs in the sandbox; the file is readable by anyone on the host),
	// /root, /var and /run (not in the sandbox at all).
	// What the files hold; their names are not secret (commands and their
	// errors show them).
	secret := fmt.Sprintf("content-%d-%d", os.Getpid(), time.Now().UnixNano())
	name := fmt.Sprintf(".sandbox-test-%d", os.Getpid())
	tmpDir := testmount.PublicDir(t, "sandbox-secret-")
	var planted []string
	for _, dir := range []string{tmpDir, "/root", "/var/tmp", "/run"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(secret), 0o644); err != nil {
			t.Fatal(err)
		}
		planted = append(planted, p)
		t.Cleanup(func() { os.Remove(p) })
	}

	t.Run("HostFiles", func(t *testing.T) {
		cmd := ""
		for _, p := range planted {
			cmd += fmt.Sprintf("cat %s; ", p)
		}
		cmd += "ls -a /tmp /root /home /run /var 2>&1; grep -rs " + secret + " /etc /opt /tmp 2>/dev/null; true"
		attempt(t, opts, cmd, secret)
	})

	t.Run("WorkspaceSymlinks", func(t *testing.T) {
		links := map[string]string{"link-file": planted[0], "link-root": "/root", "link-up": "../../../../../../" + planted[0]}
		for name, target := range links {
			if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
				t.Fatal(err)
			}
		}
		attempt(t, opts, "cat /workspace/link-file link-up; ls -a /workspace/link-root/ 2>&1; cat link-root/"+name, secret)
	})

	t.Run("ReadOnlyRoot", func(t *testing.T) {
		name := "sandbox-escape" + name
		var cmd string
		for _, dir := range []string{"/", "/usr/bin", "/etc", "/bin", "/lib", "/opt", "/workspace/.."} {
			cmd += fmt.Sprintf("touch %s/%s && echo ESCAPED %s; ", dir, name, dir)
		}
		cmd += "echo evil >> /etc/passwd && echo ESCAPED passwd; chmod 777 /usr/bin && echo ESCAPED chmod"
		attempt(t, opts, cmd)
		for _, dir := range []string{"/", "/usr/bin", "/etc", "/opt"} {
			if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
				t.Errorf("%s/%s was made on the host", dir, name)
				os.Remove(filepath.Join(dir, name))
			}
		}
	})

	t.Run("Network", func(t *testing.T) {
		ln, err := net.Listen("tcp", "0.0.0.0:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		var accepted atomic.Int32
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				accepted.Add(1)
				c.Write([]byte("hello from the host\n"))
				c.Close()
			}
		}()
		port := ln.Addr().(*net.TCPAddr).Port
		addrs := []string{"127.0.0.1"}
		ifaddrs, _ := net.InterfaceAddrs()
		for _, a := range ifaddrs {
			if ip, ok := a.(*net.IPNet); ok && ip.IP.To4() != nil && !ip.IP.IsLoopback() {
				addrs = append(addrs, ip.IP.String())
			}
		}
		cmd := "cat /proc/net/dev | grep -v -E '^ *(lo|Inter|face)' | grep : && echo ESCAPED interfaces; "
		for _, a := range addrs {
			cmd += fmt.Sprintf("timeout 2 bash -c 'exec 3<>/dev/tcp/%s/%d && echo ESCAPED %s && cat <&3'; ", a, port, a)
		}
		attempt(t, opts, cmd, "hello from the host")
		if n := accepted.Load(); n != 0 {
			t.Errorf("the host accepted %d connections from sandboxes", n)
		}
		// The same with the host's network does connect: the check works.
		hostOpts := opts
		hostOpts.Network = sandbox.NetworkHost
		hostOpts.Args = []string{"bash", "-c", fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d && cat <&3", port)}
		if o := run(t, hostOpts); o.stdout != "hello from the host\n" {
			t.Errorf("with the host's network:\n%v", o)
		}
	})

	t.Run("MountAndNamespaces", func(t *testing.T) {
		attempt(t, opts, strings.Join([]string{
			"mount -t tmpfs none /tmp 2>&1 && echo ESCAPED mount",
			"mount --bind /workspace /tmp 2>&1 && echo ESCAPED bind",
			"umount /workspace 2>&1 && echo ESCAPED umount",
			"umount -l /proc 2>&1 && echo ESCAPED umount proc",
			perlSyscall(272, "0x00020000"),       // unshare(CLONE_NEWNS)
			perlSyscall(272, "0x40000000"),       // unshare(CLONE_NEWNET)
			perlSyscall(161, `"/tmp"`),           // chroot
			perlSyscall(155, `"/tmp"`, `"/tmp"`), // pivot_root
		}, "; "))
	})

	t.Run("HostProcesses", func(t *testing.T) {
		token, pid := hostProcess(t)
		attempt(t, opts, fmt.Sprintf(`cat /proc/[0-9]*/cmdline | tr '\0' ' ' | sed s/ESCAPED/-/g; echo; `+
			`n=$(ls -d /proc/[0-9]* | wc -l); [ $n -gt 6 ] && echo ESCAPED $n processes; `+
			`kill -0 %d 2>/dev/null && echo ESCAPED kill; `+
			perlSyscall(101, "16", fmt.Sprint(pid), "0", "0")+"; "+ // ptrace(PTRACE_ATTACH, pid)
			perlSyscall(101, "16", "1", "0", "0"), // pid 1 of the sandbox: not ours to trace either
			pid), token)
		if len(processesWith(token)) != 1 {
			t.Errorf("the host process is gone")
		}
	})

	t.Run("KernelModules", func(t *testing.T) {
		attempt(t, opts, strings.Join([]string{
			perlSyscall(175, "0", "0", `""`),                               // init_module
			perlSyscall(313, "0", `""`, "0"),                               // finit_module
			perlSyscall(176, `"loop"`, "0"),                                // delete_module
			perlSyscall(246, "0", "0", "0", "0"),                           // kexec_load
			perlSyscall(169, "0xfee1dead", "672274793", "0x4321fedc", "0"), // reboot (power off)
			"modprobe dummy 2>&1 && echo ESCAPED modprobe",
			"echo h > /proc/sysrq-trigger && echo ESCAPED sysrq",
		}, "; "))
	})

	t.Run("SandboxBinary", func(t *testing.T) {
		exe, _ := os.Executable()
		before, err := os.ReadFile(exe)
		if err != nil {
			t.Fatal(err)
		}
		attempt(t, opts, "echo evil >> /proc/1/exe && echo ESCAPED pid1; echo evil >> /proc/self/exe && echo ESCAPED self; "+
			"cp /bin/true /proc/1/exe 2>&1 && echo ESCAPED cp")
		after, err := os.ReadFile(exe)
		if err != nil || sha256.Sum256(before) != sha256.Sum256(after) {
			t.Errorf("the sandbox binary %s changed", exe)
		}
	})

	t.Run("LeakedFdsAndCwd", func(t *testing.T) {
		for _, m := range []*mode{cold, warm} {
			o := m.run(t, sandbox.Options{Workspace: ws, HostUser: &agent, Args: []string{"sh", "-c",
				"ls /proc/self/fd | tr '\\n' ' '; echo; readlink /proc/self/cwd /proc/self/root; for f in /proc/1/fd/*; do readlink $f; done"}})
			lines := strings.Split(strings.TrimSpace(o.stdout), "\n")
			if o.err != nil || len(lines) < 3 {
				t.Fatalf("%s: %v", m.name, o)
			}
			// ls has the directory it lists open as fd 3.
			if lines[0] != "0 1 2 3 " {
				t.Errorf("%s: fds of a sandboxed program: %q, want 0 1 2 (and ls's own 3)", m.name, lines[0])
			}
			if lines[1] != "/workspace" || lines[2] != "/" {
				t.Errorf("%s: cwd and root: %q %q", m.name, lines[1], lines[2])
			}
			// Pid 1 holds only pipes, /dev/null, the Go runtime's own
			// descriptors and (warm) the socket its command came on:
			// nothing of the host's file system.
			for _, l := range lines[3:] {
				if !strings.HasPrefix(l, "pipe:") && !strings.HasPrefix(l, "anon_inode:") && l != "/dev/null" &&
					!(m == warm && strings.HasPrefix(l, "socket:")) {
					t.Errorf("%s: pid 1 of the sandbox holds %q", m.name, l)
				}
			}
		}
	})

	t.Run("Hostname", func(t *testing.T) {
		before, _ := os.Hostname()
		attempt(t, opts, `[ "$(hostname)" = sandbox ] || echo ESCAPED not our hostname: $(hostname); `+
			"hostname evil 2>&1 && echo ESCAPED hostname; "+perlSyscall(170, `"evil"`, "4")+"; "+
			"domainname evil 2>&1 && echo ESCAPED domainname")
		if after, _ := os.Hostname(); after != before {
			t.Errorf("the host's name changed from %q to %q", before, after)
		}
	})

	t.Run("Privileges", func(t *testing.T) {
		attempt(t, opts, `grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb):' /proc/self/status | grep -v '0000000000000000$' && echo ESCAPED caps; `+
			`grep -q '^NoNewPrivs:.1' /proc/self/status || echo ESCAPED no_new_privs; `+
			// 65536 inside ids, none of them host root, one the agent.
			`for m in /proc/self/uid_map /proc/self/gid_map; do awk -v a=`+strconv.FormatUint(uint64(agent.UID), 10)+` '$2 == 0 || $2 < 100000 && $2 != a {print "ESCAPED mapped", $0} {n += $3} END {if (n != 65536) print "ESCAPED ids", n}' $m; done`)
	})

	t.Run("Devices", func(t *testing.T) {
		o := run(t, sandbox.Options{Workspace: ws, Args: []string{"ls", "/dev"}})
		got := strings.Fields(o.stdout)
		sort.Strings(got)
		want := []string{"console", "core", "fd", "full", "mqueue", "null", "ptmx", "pts", "random", "shm", "stderr", "stdin", "stdout", "tty", "urandom", "zero"}
		for _, d := range got {
			if !contains(want, d) {
				t.Errorf("/dev/%s in the sandbox (all: %v)", d, got)
			}
		}
		attempt(t, opts, "mknod /dev/shm/disk b 254 0 2>&1 && echo ESCAPED mknod; "+
			"mknod /tmp/mem c 1 1 2>&1 && head -c1 /tmp/mem >/dev/null && echo ESCAPED mem; "+
			"ls /dev/vda /dev/sda /dev/kmsg /dev/mem 2>/dev/null && echo ESCAPED device")
	})
}

// A mode is how a sandbox is started.
type mode struct {
	name string
	run  func(*testing.T, sandbox.Options) output
}

var (
	cold = &mode{"cold", run}
	warm = &mode{"warm", runWarm}
)

// runWarm runs opts in a pool's pre-started sandbox (of this binary's
// state directory) and fails the test if it was not.
func runWarm(t *testing.T, opts sandbox.Options) output {
	t.Helper()
	opts.StateDir = stateDir
	opts.NoSeccomp = opts.NoSeccomp || !sandbox.SeccompSupported
	p, err := sandbox.NewPool(sandbox.PoolOptions{Options: opts, Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	o := poolRun(t, p, opts)
	if !o.res.Warm {
		t.Errorf("not run warm: %v", o)
	}
	return o
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
