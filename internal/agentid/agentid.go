// Package agentid holds the host id ranges of computerfs's agent
// identities and of their sandboxes' users, for the packages and commands
// that must agree on them without depending on each other (the workspace
// and sandboxctl).
package agentid

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
)

// The range agent identities are allocated from: uid and gid Base+N for
// the Nth workspace, N < Count. It lies in the block systemd leaves unused
// (1879048192-2147352575: above regular and dynamic users, the
// 100000-165535 of the sandboxes' shared ids and systemd-nspawn's
// container ranges, below 2^31).
const (
	Base  = 0x70000000 // 1879048192
	Count = 1 << 16
)

// SandboxBase is where the id blocks of the agents' sandboxes start: the
// sandboxes of agent Base+N have the SandboxCount host ids from
// SandboxBase + N*SandboxCount for their root, their system users and
// nobody, so that nothing a program in one workspace's sandbox can become
// owns anything of another's. The last block ends at 0x79000000, in the
// same unused range.
const (
	SandboxBase  = 0x71000000
	SandboxCount = 2048
)

// SandboxBlock returns the first host id and the size of the block of the
// sandboxes of the agent with host uid uid, if it is one of the range.
func SandboxBlock(uid uint32) (base, count uint32, ok bool) {
	if uid < Base || uid-Base >= Count {
		return 0, 0, false
	}
	return SandboxBase + (uid-Base)*SandboxCount, SandboxCount, true
}

// BlockBase returns the first host id and the size of sandbox block
// block-1 (a named agent's block as the registry gives it: 1 + its index,
// 0 for none), if it is one.
func BlockBase(block uint32) (base, count uint32, ok bool) {
	if block == 0 || block > Count {
		return 0, 0, false
	}
	return SandboxBase + (block-1)*SandboxCount, SandboxCount, true
}

// DefaultRegistry is the host-wide registry of allocated agent identities
// (the root package keeps it): one file per uid, named by it, holding
// JSON with the store it belongs to and, for a named agent, its sandbox
// block. The environment variable COMPUTERFS_AGENTS_DIR replaces it.
const DefaultRegistry = "/var/lib/computerfs/agents"

// Registry returns dir, else $COMPUTERFS_AGENTS_DIR, else DefaultRegistry.
func Registry(dir string) string {
	if dir != "" {
		return dir
	}
	if d := os.Getenv("COMPUTERFS_AGENTS_DIR"); d != "" {
		return d
	}
	return DefaultRegistry
}

// RegisteredBlock returns the sandbox block the registry in dir gave the
// named agent uid (as BlockBase does), if it has one.
func RegisteredBlock(dir string, uid uint32) (base, count uint32, ok bool) {
	b, err := os.ReadFile(filepath.Join(Registry(dir), strconv.FormatUint(uint64(uid), 10)))
	if err != nil {
		return 0, 0, false
	}
	var e struct {
		Block uint32 `json:"block"`
	}
	if json.Unmarshal(b, &e) != nil {
		return 0, 0, false
	}
	return BlockBase(e.Block)
}
