package computerfs

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
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
	if err := r.claim(got[5], filepath.Join(stores, "new")); err == nil {
		t.Fatalf("claimed %s of a live store", got[5])
	}
	os.RemoveAll(filepath.Join(stores, "5"))
	if err := r.claim(got[5], filepath.Join(stores, "new")); err != nil {
		t.Fatalf("%s of a removed store: %v", got[5], err)
	}
	os.Mkdir(filepath.Join(stores, "other"), 0o700)
	os.RemoveAll(filepath.Join(stores, "7"))
	// The lowest free identity is the one of the store that went.
	if a, err := r.allocate(filepath.Join(stores, "other")); err != nil || a != got[7] {
		t.Fatalf("after store 7 went: %s %v, want its %s", a, err, got[7])
	}
	if err := checkAgent(Agent{0, 5}); err == nil {
		t.Fatal("root accepted")
	}
}
