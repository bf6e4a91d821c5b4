package computerfs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/computerfs/computerfs"
	"github.com/computerfs/computerfs/internal/testmount"
)

// forkSide is one workspace of TestForkIsolationFSX: its mount and the
// model of its directory x (file name -> content).
type forkSide struct {
	name  string
	dir   string // the mount's x
	model map[string][]byte
	held  *os.File // x/b0, open for writing all along (passthrough)
	rng   *rand.Rand
	ops   []string
}

// pwriteModel is pwrite(2) on a model file.
func pwriteModel(b []byte, off int64, data []byte) []byte {
	if end := off + int64(len(data)); end > int64(len(b)) {
		b = append(b, make([]byte, end-int64(len(b)))...)
	}
	copy(b[off:], data)
	return b
}

func (s *forkSide) fail(t *testing.T, format string, args ...any) {
	t.Helper()
	last := s.ops[max(0, len(s.ops)-10):]
	t.Errorf("%s, after %d operations (the last: %q): %s", s.name, len(s.ops), last, fmt.Sprintf(format, args...))
}

// check compares the file name with the model; false once it differs.
func (s *forkSide) check(t *testing.T, name string) bool {
	t.Helper()
	got, err := os.ReadFile(filepath.Join(s.dir, name))
	want, ok := s.model[name]
	switch {
	case !ok && errors.Is(err, os.ErrNotExist):
		return true
	case !ok:
		s.fail(t, "%s should not exist: %d bytes, %v", name, len(got), err)
	case err != nil:
		s.fail(t, "%s: %v", name, err)
	case !bytes.Equal(got, want):
		at := 0
		for at < min(len(got), len(want)) && got[at] == want[at] {
			at++
		}
		s.fail(t, "%s holds %d bytes, the model %d; they differ from byte %d", name, len(got), len(want), at)
	default:
		return true
	}
	return false
}

// checkAll compares the listing and every file with the model.
func (s *forkSide) checkAll(t *testing.T) bool {
	t.Helper()
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		s.fail(t, "readdir: %v", err)
		return false
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	want := slices.Sorted(maps.Keys(s.model))
	if !slices.Equal(got, want) {
		s.fail(t, "the directory lists %q, the model %q", got, want)
		return false
	}
	for _, n := range want {
		if !s.check(t, n) {
			return false
		}
	}
	return true
}

// step does one random operation on the side and checks the files it
// touched; false once the side differs from its model.
func (s *forkSide) step(t *testing.T) bool {
	t.Helper()
	r := s.rng
	names := []string{"b0", "b1", "b2", "f0", "f1", "f2", "f3"}
	name := names[r.IntN(len(names))]
	p := filepath.Join(s.dir, name)
	_, exists := s.model[name]
	data := make([]byte, 1+r.IntN(64<<10))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	switch op := r.IntN(10); {
	case op < 2: // through the descriptor held open since before the fork
		off := r.Int64N(4 << 20)
		s.ops = append(s.ops, fmt.Sprintf("pwrite b0 (held open) %d+%d", off, len(data)))
		if _, err := s.held.WriteAt(data, off); err != nil {
			s.fail(t, "pwrite b0: %v", err)
			return false
		}
		if _, ok := s.model["b0"]; ok {
			s.model["b0"] = pwriteModel(s.model["b0"], off, data)
		}
		name = "b0"
	case op < 5 && exists:
		off := r.Int64N(int64(len(s.model[name])) + 1)
		if name[0] == 'b' {
			off = r.Int64N(4 << 20)
		}
		s.ops = append(s.ops, fmt.Sprintf("pwrite %s %d+%d", name, off, len(data)))
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err == nil {
			_, err = f.WriteAt(data, off)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			s.fail(t, "pwrite %s: %v", name, err)
			return false
		}
		s.model[name] = pwriteModel(s.model[name], off, data)
	case op == 5 && exists:
		size := r.Int64N(int64(len(s.model[name])) + 1<<20)
		s.ops = append(s.ops, fmt.Sprintf("truncate %s %d", name, size))
		if err := os.Truncate(p, size); err != nil {
			s.fail(t, "truncate %s: %v", name, err)
			return false
		}
		if size <= int64(len(s.model[name])) {
			s.model[name] = s.model[name][:size]
		} else {
			s.model[name] = append(s.model[name], make([]byte, size-int64(len(s.model[name])))...)
		}
	case op == 6 && exists && name != "b0":
		to := names[r.IntN(len(names))]
		if to == "b0" || to == name {
			to = "f0"
		}
		if to == name {
			break
		}
		s.ops = append(s.ops, fmt.Sprintf("rename %s %s", name, to))
		if err := os.Rename(p, filepath.Join(s.dir, to)); err != nil {
			s.fail(t, "rename %s %s: %v", name, to, err)
			return false
		}
		s.model[to] = s.model[name]
		delete(s.model, name)
		if !s.check(t, to) {
			return false
		}
	case op == 7 && exists && name != "b0":
		s.ops = append(s.ops, "unlink "+name)
		if err := os.Remove(p); err != nil {
			s.fail(t, "unlink %s: %v", name, err)
			return false
		}
		delete(s.model, name)
	default:
		if name == "b0" {
			name = "f1"
			p = filepath.Join(s.dir, name)
		}
		s.ops = append(s.ops, fmt.Sprintf("write %s (%d bytes, truncated)", name, len(data)))
		if err := os.WriteFile(p, data, 0o644); err != nil {
			s.fail(t, "write %s: %v", name, err)
			return false
		}
		s.model[name] = data
	}
	return s.check(t, name)
}

// TestForkIsolationFSX forks a mounted workspace (live, while a blob is
// held open for writing through passthrough), mounts the fork, and runs
// random operations (writes through a descriptor held open since before
// the fork and through new ones, truncations growing and shrinking,
// renames, unlinks, whole-file writes, on blobs and small files alike) on
// parent and fork at once, each checked against a model of its own after
// every operation and in full every 25: no write in one ever shows in the
// other. The fork, mounted again, still matches its model.
func TestForkIsolationFSX(t *testing.T) {
	dir := t.TempDir()
	// --debug logs each request: the opens that went passthrough show.
	m := testmount.Start(t, filepath.Join(dir, "parent"), "--no-sandbox", "--debug")
	x := filepath.Join(m.Dir, "x")
	if err := os.Mkdir(x, 0o755); err != nil {
		t.Fatal(err)
	}
	init := map[string][]byte{}
	rng := rand.New(rand.NewPCG(18, 2))
	for _, n := range []string{"b0", "b1", "b2", "f0", "f1", "f2"} {
		size := 3 << 20 // blobs (past 1 MiB)
		if n[0] == 'f' {
			size = 1 + rng.IntN(200<<10)
		}
		b := make([]byte, size)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		if err := os.WriteFile(filepath.Join(x, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
		init[n] = b
	}
	time.Sleep(50 * time.Millisecond) // the RELEASEs of the writers, for passthrough
	held, err := os.OpenFile(filepath.Join(x, "b0"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	// A write through it before the fork: the fork has it.
	if _, err := held.WriteAt([]byte("before the fork"), 1<<20); err != nil {
		t.Fatal(err)
	}
	init["b0"] = pwriteModel(init["b0"], 1<<20, []byte("before the fork"))

	c, err := computerfs.Dial(m.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Fork(context.Background(), filepath.Join(dir, "fork"), ""); err != nil {
		t.Fatal(err)
	}
	fm := testmount.Start(t, filepath.Join(dir, "fork"), "--no-sandbox", "--debug")
	fheld, err := os.OpenFile(filepath.Join(fm.Dir, "x", "b0"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fheld.Close()

	sides := []*forkSide{
		{name: "parent", dir: x, model: maps.Clone(init), held: held, rng: rand.New(rand.NewPCG(1, 18))},
		{name: "fork", dir: filepath.Join(fm.Dir, "x"), model: maps.Clone(init), held: fheld, rng: rand.New(rand.NewPCG(2, 18))},
	}
	for _, s := range sides {
		for n, b := range s.model {
			s.model[n] = bytes.Clone(b)
		}
		if !s.checkAll(t) {
			t.FailNow()
		}
	}
	const ops = 400
	var wg sync.WaitGroup
	for _, s := range sides {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 1; i <= ops; i++ {
				if !s.step(t) || i%25 == 0 && !s.checkAll(t) {
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for _, s := range sides {
		if !s.checkAll(t) {
			t.FailNow()
		}
	}
	for _, mm := range []*testmount.Mount{m, fm} {
		if !strings.Contains(mm.Log(), "PASSTHROUGH") {
			t.Errorf("%s: no open was passthrough", mm.Store)
		}
	}
	// Persisted: the fork mounted again (its held descriptor closed).
	fheld.Close()
	fm.Unmount(t)
	fm.Remount(t, "--no-sandbox")
	sides[1].dir = filepath.Join(fm.Dir, "x")
	sides[1].checkAll(t)
	sides[0].checkAll(t)
	noRaceLog(t, m)
	noRaceLog(t, fm)
}
