package sandbox

import (
	"testing"
)

// Every inside id the map holds is mapped once, to the block or to the
// host user; no two inside ids share a host id; host root never appears;
// Inside and Host agree with the map.
func TestIDMaps(t *testing.T) {
	blocks := []IDs{{}, SharedIDs, {Base: 0x71000000, Count: 2048}, {Base: 0x71000000 + 5*2048, Count: 2048}, {Base: 200000, Count: 2}}
	users := []uint32{0, 1, 1000, 2046, 2047, 65533, nobody, 65535}
	hosts := []uint32{0, 0x70000005, 5000}
	for _, b := range blocks {
		if err := b.check(); err != nil {
			t.Fatalf("%v: %v", b, err)
		}
		for _, u := range users {
			for _, h := range hosts {
				m := b.maps(u, h)
				inside := map[uint32]uint32{}
				hostSeen := map[uint32]bool{}
				for i, e := range m {
					if i > 0 && m[i-1].ContainerID+m[i-1].Size > e.ContainerID {
						t.Fatalf("%v user %d host %d: overlapping or unsorted map %+v", b, u, h, m)
					}
					if e.Size == 0 || e.HostID == 0 {
						t.Fatalf("%v user %d host %d: bad entry %+v in %+v", b, u, h, e, m)
					}
					for k := uint32(0); k < e.Size && k < 4096; k++ {
						inside[e.ContainerID+k] = e.HostID + k
						if hostSeen[e.HostID+k] {
							t.Fatalf("%v user %d host %d: host id %d mapped twice: %+v", b, u, h, e.HostID+k, m)
						}
						hostSeen[e.HostID+k] = true
					}
				}
				if h != 0 && inside[u] != h {
					t.Fatalf("%v user %d host %d: the user is mapped to %d: %+v", b, u, h, inside[u], m)
				}
				for in, host := range inside {
					if in == u && h != 0 {
						continue
					}
					if got, ok := b.Host(in); !ok || got != host {
						t.Fatalf("%v: Host(%d) = %d %v, the map says %d", b, in, got, ok, host)
					}
					if got, ok := b.Inside(host); !ok || got != in {
						t.Fatalf("%v: Inside(%d) = %d %v, the map says %d", b, host, got, ok, in)
					}
				}
			}
		}
	}
	for _, b := range []IDs{{Base: 0, Count: 5}, {Base: 1 << 31, Count: 2048}, {Base: 10, Count: 1}, {Base: 10, Count: 70000}} {
		if b.check() == nil {
			t.Errorf("block %+v accepted", b)
		}
	}
	// A block's own ids: root, the system users and nobody, nothing else.
	b := IDs{Base: 0x71000000, Count: 2048}
	for _, c := range []struct {
		inside uint32
		host   uint32
		ok     bool
	}{{0, 0x71000000, true}, {2046, 0x71000000 + 2046, true}, {2047, 0, false}, {nobody, 0x71000000 + 2047, true}, {65535, 0, false}} {
		if h, ok := b.Host(c.inside); h != c.host || ok != c.ok {
			t.Errorf("Host(%d) = %d %v, want %d %v", c.inside, h, ok, c.host, c.ok)
		}
	}
}
