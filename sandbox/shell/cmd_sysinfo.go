package shell

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
)

// nproc, whoami, hostname, uname and id: what the sandbox would say of
// itself, in the forms listed here (hostname NAME would set it).
func init() {
	register(&command{names: []string{"nproc"}, run: cmdNproc, ownArgs: true, check: forms("nproc", "")})
	register(&command{names: []string{"whoami"}, run: cmdWhoami, ownArgs: true, check: forms("whoami", "")})
	register(&command{names: []string{"hostname"}, run: cmdHostname, ownArgs: true, check: forms("hostname", "")})
	register(&command{names: []string{"uname"}, run: cmdUname, opts: opts("amrs", "all"), ownArgs: true,
		check: forms("uname", "", "-m", "-s")}) // -a and -r: the kernel's release is the host's, which the sandbox shares
	register(&command{names: []string{"id"}, run: cmdId, opts: opts("ugn"), ownArgs: true, check: forms("id", "", "-u", "-g", "-un")})
}

// forms is the check of a command that takes only these command lines
// (its arguments joined by spaces).
func forms(name string, lines ...string) func(args []string) string {
	return func(args []string) string {
		if slices.Contains(args, "") {
			return name + " with an argument computed at run time"
		}
		if slices.Contains(lines, strings.Join(args, " ")) {
			return ""
		}
		return name + " " + strings.Join(args, " ") + " is not built in"
	}
}

// cmdNproc says the CPUs the daemon may run on, as the sandbox, started
// by it with the same affinity, does.
func cmdNproc(c *cmd) int    { fmt.Fprintf(c.out, "%d\n", runtime.NumCPU()); return 0 }
func cmdWhoami(c *cmd) int   { c.out.WriteString(userName(c.r.sh.opts.UID) + "\n"); return 0 }
func cmdHostname(c *cmd) int { c.out.WriteString("sandbox\n"); return 0 }
func cmdUname(c *cmd) int {
	all := len(c.args) > 1 && (c.args[1] == "-a" || c.args[1] == "--all")
	switch {
	case all:
		c.out.WriteString("Linux sandbox 6.1.0 #1 SMP x86_64 GNU/Linux\n")
	case len(c.args) > 1 && c.args[1] == "-m":
		c.out.WriteString(machineName() + "\n")
	case len(c.args) > 1 && c.args[1] == "-r":
		c.out.WriteString("6.1.0\n")
	default:
		c.out.WriteString("Linux\n")
	}
	return 0
}

func cmdId(c *cmd) int {
	uid, gid := c.r.sh.opts.UID, c.r.sh.opts.GID
	switch {
	case len(c.args) > 1 && c.args[1] == "-u":
		fmt.Fprintf(c.out, "%d\n", uid)
	case len(c.args) > 1 && c.args[1] == "-g":
		fmt.Fprintf(c.out, "%d\n", gid)
	case len(c.args) > 1 && c.args[1] == "-un":
		fmt.Fprintf(c.out, "%s\n", userName(uid))
	default:
		fmt.Fprintf(c.out, "uid=%d(%s) gid=%d(%s) groups=%d(%s)\n", uid, userName(uid), gid, userName(gid), gid, userName(gid))
	}
	return 0
}

// machineName is uname -m's name for the machine the daemon (and the
// sandbox with it) runs on.
func machineName() string {
	switch runtime.GOARCH {
	case "amd64":
		return "x86_64"
	case "arm64":
		return "aarch64"
	case "386":
		return "i686"
	}
	return runtime.GOARCH
}
