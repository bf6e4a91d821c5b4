package sandbox

// InsideID maps a host uid or gid to the id it has inside a sandbox, if
// the sandbox's user namespace maps it (host ids 100000 to 165535).
func InsideID(host uint32) (uint32, bool) {
	if host < hostIDBase || host-hostIDBase >= idCount {
		return 0, false
	}
	return host - hostIDBase, true
}

// HostID maps an id inside a sandbox to the host's id.
func HostID(inside uint32) (uint32, bool) {
	if inside >= idCount {
		return 0, false
	}
	return inside + hostIDBase, true
}
