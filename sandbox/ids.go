package sandbox

import (
	"fmt"
	"slices"

	"github.com/opencontainers/runtime-spec/specs-go"
)

// IDs is the block of host ids that a sandbox's users are, apart from
// Options.HostUser: its root, the unprivileged users of its root file
// system, and whoever a program in it could become. Inside ids 0 to
// Count-2 are host ids Base to Base+Count-2, and nobody (inside 65534, the
// owner the kernel shows for every id the namespace does not map) is
// Base+Count-1. Other inside ids are not mapped. The zero value is
// SharedIDs.
//
// Two sandboxes with the same block share their users: a block of its own
// per workspace (computerfs gives each allocated agent's sandboxes one of
// 2048 ids: see internal/agentid) means that nothing a program of one
// workspace's sandbox can be owns anything of another's.
type IDs struct {
	Base, Count uint32
}

// SharedIDs is the block of sandboxes that are given none: host ids 100000
// to 165535 for inside ids 0 to 65535, the same for every such sandbox.
var SharedIDs = IDs{Base: 100000, Count: 65536}

// nobody is the inside id of nobody and nogroup.
const nobody = 65534

func (b IDs) or() IDs {
	if b.Count == 0 {
		return SharedIDs
	}
	return b
}

func (b IDs) check() error {
	b = b.or()
	if b.Base == 0 || b.Count < 2 || b.Count > SharedIDs.Count || b.Base+b.Count < b.Base || b.Base+b.Count-1 > 1<<31-1 {
		return fmt.Errorf("sandbox: id block %d+%d: not a block of 2 to %d host ids above root, below 2^31", b.Base, b.Count, SharedIDs.Count)
	}
	return nil
}

func (b IDs) String() string {
	b = b.or()
	return fmt.Sprintf("%d-%d", b.Base, b.Base+b.Count-1)
}

// Inside maps a host uid or gid to the id it has inside the sandbox, if
// the block holds it.
func (b IDs) Inside(host uint32) (uint32, bool) {
	b = b.or()
	if host < b.Base || host-b.Base >= b.Count {
		return 0, false
	}
	if b.Count == SharedIDs.Count {
		return host - b.Base, true
	}
	if host-b.Base == b.Count-1 {
		return nobody, true
	}
	return host - b.Base, true
}

// Host maps an id inside the sandbox to the host's id, if the block holds
// it.
func (b IDs) Host(inside uint32) (uint32, bool) {
	b = b.or()
	switch {
	case b.Count == SharedIDs.Count:
		return b.Base + inside, inside < b.Count
	case inside < b.Count-1:
		return b.Base + inside, true
	case inside == nobody:
		return b.Base + b.Count - 1, true
	}
	return 0, false
}

// maps is the user namespace's map of one kind of id: the block, with the
// inside id user replaced by host when host is not 0.
func (b IDs) maps(user, host uint32) []specs.LinuxIDMapping {
	b = b.or()
	var m []specs.LinuxIDMapping
	add := func(inside, hostID, size uint32) {
		if size > 0 {
			m = append(m, specs.LinuxIDMapping{ContainerID: inside, HostID: hostID, Size: size})
		}
	}
	// The block's linear part, cut around user.
	linear := b.Count
	if b.Count != SharedIDs.Count {
		linear = b.Count - 1
		add(nobody, b.Base+b.Count-1, 1)
	}
	if host != 0 && user < linear {
		add(0, b.Base, user)
		add(user+1, b.Base+user+1, linear-user-1)
	} else {
		add(0, b.Base, linear)
	}
	if host != 0 {
		if user == nobody && b.Count != SharedIDs.Count {
			m = slices.DeleteFunc(m, func(x specs.LinuxIDMapping) bool { return x.ContainerID == nobody })
		}
		add(user, host, 1)
	}
	slices.SortFunc(m, func(x, y specs.LinuxIDMapping) int { return int(x.ContainerID) - int(y.ContainerID) })
	return m
}

// InsideID maps a host uid or gid to the id it has inside a sandbox of
// the shared block (host ids 100000 to 165535).
func InsideID(host uint32) (uint32, bool) { return SharedIDs.Inside(host) }

// HostID maps an id inside a sandbox of the shared block to the host's id.
func HostID(inside uint32) (uint32, bool) { return SharedIDs.Host(inside) }
