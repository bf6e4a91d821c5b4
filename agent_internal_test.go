package computerfs

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/computerfs/computerfs/internal/agentid"
	"github.com/computerfs/computerfs/sandbox"
)

// Concurrent allocations (each with its own lock, as separate daemons
// have) never hand out one identity twice; a store gets its identity back;
// a store that is gone frees its identity; a named one another store has
// is refused.
func TestAgentRegistry(t *testing.T) {
	reg := filepath.Join(t.TempDir(), "agents")
	stores := t.TempDir()
	const n = 24
	got := make([]Agent, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dir := filepath.Join(stores, fmt.Sprint(i))
			if err := os.Mkdir(dir, 0o700); err != nil {
				errs <- err
				return
			}
			r, err := openRegistry(reg)
			if err != nil {
				errs <- err
				return
			}
			defer r.close()
			if got[i], err = r.allocate(dir); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[uint32]bool{}
	for i, a := range got {
		if seen[a.UID] || a.UID < AgentBase || a.UID >= AgentBase+AgentCount || a.GID != a.UID {
			t.Fatalf("store %d got %s (seen before: %v)", i, a, seen[a.UID])
		}
		seen[a.UID] = true
	}
	r, err := openRegistry(reg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	if a, err := r.allocate(filepath.Join(stores, "3")); err != nil || a != got[3] {
		t.Fatalf("store 3 again: %s %v, want %s", a, err, got[3])
	}
	os.Mkdir(filepath.Join(stores, "new"), 0o700)
	if _, err := r.claim(got[5], filepath.Join(stores, "new")); err == nil {
		t.Fatalf("claimed %s of a live store", got[5])
	}
	os.RemoveAll(filepath.Join(stores, "5"))
	if _, err := r.claim(got[5], filepath.Join(stores, "new")); err != nil {
		t.Fatalf("%s of a removed store: %v", got[5], err)
	}
	os.Mkdir(filepath.Join(stores, "other"), 0o700)
	os.RemoveAll(filepath.Join(stores, "7"))
	// The lowest free identity is the one of the store that went.
	if a, err := r.allocate(filepath.Join(stores, "other")); err != nil || a != got[7] {
		t.Fatalf("after store 7 went: %s %v, want its %s", a, err, got[7])
	}
	if err := checkAgent(Agent{UID: 0, GID: 5}); err == nil {
		t.Fatal("root accepted")
	}
}

// Named agents (outside the range) get sandbox id blocks of their own:
// no two live stores' agents share one, a range agent's block (from its
// uid) is never given to a named agent nor the other way round, a store
// keeps its block, and a block that another store took meanwhile is
// replaced.
func TestAgentRegistryNamedBlocks(t *testing.T) {
	reg := filepath.Join(t.TempDir(), "agents")
	stores := t.TempDir()
	store := func(name string) string {
		d := filepath.Join(stores, name)
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		return d
	}
	r, err := openRegistry(reg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	ranged, err := r.allocate(store("ranged")) // block 0, by its uid
	if err != nil || ranged.UID != AgentBase {
		t.Fatalf("first allocation: %s %v", ranged, err)
	}
	a1, err := r.claim(Agent{UID: 1000, GID: 1000}, store("named1"))
	if err != nil {
		t.Fatal(err)
	}
	a2, err := r.claim(Agent{UID: 1001, GID: 1001}, store("named2"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[uint32]string{ranged.sandboxIDs().Base: "ranged"}
	for _, a := range []Agent{a1, a2} {
		ids := a.sandboxIDs()
		if a.Block == 0 || ids == sandbox.SharedIDs || ids.Count != agentid.SandboxCount {
			t.Fatalf("named agent %s: block %d, ids %+v", a, a.Block, ids)
		}
		if other, ok := blocks[ids.Base]; ok {
			t.Fatalf("named agent %s has the block of %s", a, other)
		}
		blocks[ids.Base] = a.String()
	}
	// The next range agent skips the uids whose blocks named agents hold.
	next, err := r.allocate(store("ranged2"))
	if err != nil {
		t.Fatal(err)
	}
	if other, ok := blocks[next.sandboxIDs().Base]; ok {
		t.Fatalf("range agent %s got the block of %s", next, other)
	}
	// Claimed again, a store keeps its block.
	if again, err := r.claim(a1, filepath.Join(stores, "named1")); err != nil || again != a1 {
		t.Fatalf("named1 again: %+v %v, want %+v", again, err, a1)
	}
	// A store whose recorded block another live store has (its registry
	// lost, a resume) gets another.
	os.RemoveAll(filepath.Join(stores, "named1"))
	a3, err := r.claim(Agent{UID: 1003, GID: 1003}, store("named3"))
	if err != nil || a3.Block != a1.Block {
		t.Fatalf("named3 after named1 went: %+v %v, want named1's free block %d", a3, err, a1.Block)
	}
	moved, err := r.claim(a1, store("named1"))
	if err != nil || moved.Block == a1.Block || moved.Block == a2.Block || moved.Block == 0 {
		t.Fatalf("named1 back with its block taken: %+v %v (named2 %d, named3 %d)", moved, err, a2.Block, a3.Block)
	}
	// The policy binds a named agent's block to its path rules.
	if !isAgentUID(a2, a2.sandboxIDs().Base) || isAgentUID(a2, a3.sandboxIDs().Base) {
		t.Fatal("isAgentUID does not follow the named agent's block")
	}
}
