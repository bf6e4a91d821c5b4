//go:build seccomp && cgo

package sandbox_test

import (
	"strings"
	"testing"

	"github.com/computerfs/computerfs/sandbox"
)

// With seccomp, what the kernel would let an unprivileged user do but
// Docker's default profile does not: new user namespaces (the way to get
// capabilities back), and the like.
func TestSeccomp(t *testing.T) {
	ws, agent := agentWorkspace(t)
	opts := sandbox.Options{Workspace: ws, HostUser: &agent}
	attempt(t, opts, strings.Join([]string{
		`grep -q '^Seccomp:.2' /proc/self/status || echo ESCAPED no seccomp`,
		"unshare -U -r true 2>&1 && echo ESCAPED unshare",
		perlSyscall(272, "0x10000000"),                      // unshare(CLONE_NEWUSER)
		perlSyscall(321, "0", "0", "0"),                     // bpf
		perlSyscall(298, "0", "0", "-1", "-1", "0"),         // perf_event_open
		perlSyscall(248, `"user"`, `"k"`, `"v"`, "1", "-3"), // add_key
	}, "; "))

	// Without the filter the same user namespace can be made: the check
	// above tests the filter, not something else.
	for _, m := range []*mode{cold, warm} {
		o := m.run(t, sandbox.Options{Workspace: ws, HostUser: &agent, NoSeccomp: true, Args: []string{"unshare", "-U", "-r", "id", "-u"}})
		if o.err != nil || o.stdout != "0\n" {
			t.Errorf("%s, without seccomp:\n%v", m.name, o)
		}
	}
}
