package computerfs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/computerfs/computerfs"
	"github.com/computerfs/computerfs/internal/testmount"
	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/wsfs"
)

// A model-checked test of snapshots under load. Writers of three kinds
// work at once in directories of their own: a program on the mount (slot
// writes in a file it keeps open, one of them a blob the kernel writes
// through passthrough; files replaced by a rename, removed; directories
// made and removed), the shell fast path (files replaced by printf and mv,
// renamed, removed) and the agent's tools (write, edit, delete). Each
// operation is logged with the ticks of a global clock taken just before
// it began and just after it ended, and the writer's files after it.
// Snapshots are taken meanwhile; each, forked and read (through a mount of
// the fork, or wsfs on its store), must be the state after some
// linearization of the operations consistent with those ticks: for each
// writer a prefix of its operations, and one instant T inside the
// snapshot's own ticks such that every operation in a prefix began before
// T and every one left out ended after it.

// modelOp is one operation of a writer: what it did, its clock ticks, and
// the writer's files after it.
type modelOp struct {
	what       string
	start, end int64
	after      map[string]string
}

// modelWriter is one writer: the directory it owns, its files before its
// first operation, and its operations in order.
type modelWriter struct {
	dir  string
	init map[string]string
	ops  []modelOp
}

func (w *modelWriter) state(k int) map[string]string {
	if k == 0 {
		return w.init
	}
	return w.ops[k-1].after
}

// mine is the part of tree under the writer's directory.
func (w *modelWriter) mine(tree map[string]string) map[string]string {
	out := map[string]string{}
	for p, v := range tree {
		if p == w.dir || strings.HasPrefix(p, w.dir+"/") {
			out[p] = v
		}
	}
	return out
}

// linearize finds, for a tree read from a snapshot taken between the
// ticks start and end, a prefix length per writer and an instant T that
// explain it (see above); ok is false when there is none.
func linearize(ws []*modelWriter, tree map[string]string, start, end int64) (prefixes []int, ok bool) {
	cands := make([][]int, len(ws))
	for i, w := range ws {
		got := w.mine(tree)
		for k := 0; k <= len(w.ops); k++ {
			if maps.Equal(got, w.state(k)) {
				cands[i] = append(cands[i], k)
			}
		}
	}
	// lo < T < hi: T after the start of the last operation taken and
	// before the end of the first one left out, for every writer.
	var try func(i int, lo, hi int64) bool
	try = func(i int, lo, hi int64) bool {
		if lo >= hi {
			return false
		}
		if i == len(ws) {
			return true
		}
		for _, k := range cands[i] {
			l, h := lo, hi
			if k > 0 {
				l = max(l, ws[i].ops[k-1].start)
			}
			if k < len(ws[i].ops) {
				h = min(h, ws[i].ops[k].end)
			}
			prefixes = append(prefixes, k)
			if try(i+1, l, h) {
				return true
			}
			prefixes = prefixes[:len(prefixes)-1]
		}
		return false
	}
	return prefixes, try(0, start, end)
}

// modelSlots renders a slot file's values as the tree holds them.
func modelSlots(v []uint64) string { return fmt.Sprint(v) }

// readTree reads the files and directories under the given top
// directories of a mount (dot files left out: a writer's temporary files).
// The slot files are decoded (a torn slot fails).
func readTree(t *testing.T, root string, tops []string, slotFiles map[string]int) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, top := range tops {
		err := filepath.WalkDir(filepath.Join(root, top), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			if strings.HasPrefix(d.Name(), ".") {
				return nil
			}
			if d.IsDir() {
				out[rel] = "dir"
				return nil
			}
			if n, ok := slotFiles[rel]; ok {
				out[rel] = modelSlots(slots(t, p, n))
				return nil
			}
			b, err := os.ReadFile(p)
			out[rel] = string(b)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// readStoreTree is readTree on a store that is not mounted, through wsfs.
func readStoreTree(t *testing.T, store string, tops []string, slotFiles map[string]int) map[string]string {
	t.Helper()
	st, err := kv.Open(store, kv.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	f := wsfs.New(st, wsfs.Owner{})
	out := map[string]string{}
	var walk func(p string)
	walk = func(p string) {
		a, err := f.Lstat("/" + p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if !a.IsDir() {
			b, err := f.ReadFile("/" + p)
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if n, ok := slotFiles[p]; ok {
				tmp := filepath.Join(t.TempDir(), "slots")
				if err := os.WriteFile(tmp, b, 0o600); err != nil {
					t.Fatal(err)
				}
				out[p] = modelSlots(slots(t, tmp, n))
				return
			}
			out[p] = string(b)
			return
		}
		out[p] = "dir"
		var names []string
		if err := f.ReadDir("/"+p, "", func(e kv.Dirent) bool { names = append(names, e.Name); return true }); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		for _, n := range names {
			if !strings.HasPrefix(n, ".") {
				walk(path.Join(p, n))
			}
		}
	}
	for _, top := range tops {
		walk(top)
	}
	return out
}

// step is one operation a writer chose: what, how, and what it makes of
// the writer's state once it succeeded.
type step struct {
	what  string
	do    func() error
	apply func()
}

// runWriter runs steps until stop, logging each with the clock.
func runWriter(t *testing.T, w *modelWriter, clock *atomic.Int64, stop *atomic.Bool, next func() step, view func() map[string]string) {
	for n := 0; !stop.Load() || n < 5; n++ {
		s := next()
		start := clock.Add(1)
		err := s.do()
		end := clock.Add(1)
		if err != nil {
			t.Errorf("%s: %s: %v", w.dir, s.what, err)
			return
		}
		s.apply()
		w.ops = append(w.ops, modelOp{s.what, start, end, view()})
	}
}

func TestSnapshotModelUnderLoad(t *testing.T) {
	dir := t.TempDir()
	m := testmount.Start(t, filepath.Join(dir, "ws"), "--no-sandbox")
	c, err := computerfs.Dial(m.Dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const bigSlots, smallSlots = 512, 8 // 2 MiB: a blob; 32 KiB: chunks
	slotFiles := map[string]int{"m/big": bigSlots, "m/slots": smallSlots}
	if err := os.Mkdir(filepath.Join(m.Dir, "m"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, n := range slotFiles {
		if err := os.WriteFile(filepath.Join(m.Dir, name), make([]byte, n*slotSize), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mustExec(t, m, "shell", "mkdir s t")
	time.Sleep(50 * time.Millisecond) // the RELEASE of big's writer, for passthrough
	fb, err := os.OpenFile(filepath.Join(m.Dir, "m/big"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	fsm, err := os.OpenFile(filepath.Join(m.Dir, "m/slots"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fsm.Close()

	var value atomic.Uint64 // every value written is new
	names := func(prefix string, n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("%s%d", prefix, i))
		}
		return out
	}

	// The program on the mount.
	mw := &modelWriter{dir: "m"}
	mBig, mSmall := make([]uint64, bigSlots), make([]uint64, smallSlots)
	mFiles := map[string]string{} // m/fN -> content; m/dN -> "dir"
	mView := func() map[string]string {
		v := maps.Clone(mFiles)
		v["m"] = "dir"
		v["m/big"], v["m/slots"] = modelSlots(mBig), modelSlots(mSmall)
		return v
	}
	mw.init = mView()
	mRng := rand.New(rand.NewPCG(1, 1))
	mNext := func() step {
		v := value.Add(1)
		switch r := mRng.IntN(10); {
		case r < 6:
			f, arr := fsm, mSmall
			if r < 3 {
				f, arr = fb, mBig
			}
			slot := mRng.IntN(len(arr))
			return step{fmt.Sprintf("write %d in slot %d of %s", v, slot, f.Name()),
				func() error { _, err := f.WriteAt(slotData(v), int64(slot*slotSize)); return err },
				func() { arr[slot] = v }}
		case r < 8:
			name := "m/" + names("f", 4)[mRng.IntN(4)]
			if _, ok := mFiles[name]; ok && r == 7 {
				return step{"remove " + name, func() error { return os.Remove(filepath.Join(m.Dir, name)) },
					func() { delete(mFiles, name) }}
			}
			content := fmt.Sprintf("mount %d\n", v)
			return step{"replace " + name + " by a rename", func() error {
				tmp := filepath.Join(m.Dir, "m", ".tmp")
				if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
					return err
				}
				return os.Rename(tmp, filepath.Join(m.Dir, name))
			}, func() { mFiles[name] = content }}
		default:
			name := "m/" + names("d", 2)[mRng.IntN(2)]
			if _, ok := mFiles[name]; ok {
				return step{"rmdir " + name, func() error { return os.Remove(filepath.Join(m.Dir, name)) },
					func() { delete(mFiles, name) }}
			}
			return step{"mkdir " + name, func() error { return os.Mkdir(filepath.Join(m.Dir, name), 0o755) },
				func() { mFiles[name] = "dir" }}
		}
	}

	// The shell fast path, in the daemon.
	sw := &modelWriter{dir: "s"}
	sFiles := map[string]string{}
	sView := func() map[string]string {
		v := maps.Clone(sFiles)
		v["s"] = "dir"
		return v
	}
	sw.init = sView()
	sRng := rand.New(rand.NewPCG(2, 2))
	shell := func(command string) func() error {
		return func() error {
			res, err := c.Exec(ctx, computerfs.ExecRequest{Backend: "shell", Timeout: "1m", Command: command}, io.Discard, io.Discard)
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("exit %d", res.ExitCode)
			}
			return err
		}
	}
	sNext := func() step {
		v := value.Add(1)
		a, b := "s/"+names("f", 4)[sRng.IntN(4)], "s/"+names("f", 4)[sRng.IntN(4)]
		_, aOK := sFiles[a]
		switch r := sRng.IntN(4); {
		case aOK && r == 0:
			return step{"rm " + a, shell("rm /workspace/" + a), func() { delete(sFiles, a) }}
		case aOK && r == 1 && a != b:
			return step{"mv " + a + " " + b, shell(fmt.Sprintf("mv /workspace/%s /workspace/%s", a, b)),
				func() { sFiles[b] = sFiles[a]; delete(sFiles, a) }}
		default:
			content := fmt.Sprintf("shell %d", v)
			return step{"replace " + a + " by printf and mv",
				shell(fmt.Sprintf("printf '%%s' '%s' > /workspace/s/.tmp && mv /workspace/s/.tmp /workspace/%s", content, a)),
				func() { sFiles[a] = content }}
		}
	}

	// The agent's tools.
	tw := &modelWriter{dir: "t"}
	tFiles := map[string]string{}
	tTail := map[string]uint64{}
	tView := func() map[string]string {
		v := maps.Clone(tFiles)
		v["t"] = "dir"
		return v
	}
	tw.init = tView()
	tRng := rand.New(rand.NewPCG(3, 3))
	tool := func(name string, args any) func() error {
		return func() error {
			b, err := json.Marshal(args)
			if err != nil {
				return err
			}
			_, err = c.Call(ctx, name, b)
			return err
		}
	}
	tNext := func() step {
		v := value.Add(1)
		p := "t/" + names("f", 4)[tRng.IntN(4)]
		_, ok := tFiles[p]
		switch r := tRng.IntN(3); {
		case ok && r == 0:
			return step{"delete " + p, tool("delete", map[string]any{"path": p}), func() { delete(tFiles, p); delete(tTail, p) }}
		case ok && r == 1:
			old := tTail[p]
			return step{"edit " + p, tool("edit", map[string]any{"path": p, "edits": []map[string]string{{"oldText": fmt.Sprintf("tail %d\n", old), "newText": fmt.Sprintf("tail %d\n", v)}}}),
				func() {
					tFiles[p] = strings.Replace(tFiles[p], fmt.Sprintf("tail %d\n", old), fmt.Sprintf("tail %d\n", v), 1)
					tTail[p] = v
				}}
		default:
			content := fmt.Sprintf("head %d\ntail %d\n", v, v)
			return step{"write " + p, tool("write", map[string]any{"path": p, "content": content}),
				func() { tFiles[p] = content; tTail[p] = v }}
		}
	}

	writers := []*modelWriter{mw, sw, tw}
	tops := []string{"m", "s", "t"}
	var clock atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	for i, next := range []func() step{mNext, sNext, tNext} {
		view := []func() map[string]string{mView, sView, tView}[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			runWriter(t, writers[i], &clock, &stop, next, view)
		}()
	}
	type snap struct {
		name       string
		start, end int64
	}
	var snaps []snap
	time.Sleep(200 * time.Millisecond)
	for i := range 6 {
		name := fmt.Sprintf("m%d", i)
		start := clock.Add(1)
		if _, err := c.Snapshot(ctx, name); err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, snap{name, start, clock.Add(1)})
		time.Sleep(time.Duration(50+rand.IntN(150)) * time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for _, w := range writers {
		t.Logf("writer %s: %d operations", w.dir, len(w.ops))
	}

	// The live workspace is the writers' last state.
	live := readTree(t, m.Dir, tops, slotFiles)
	if ks, ok := linearize(writers, live, clock.Add(1), math.MaxInt64); !ok || ks[0] != len(mw.ops) || ks[1] != len(sw.ops) || ks[2] != len(tw.ops) {
		t.Errorf("the live workspace is not the writers' last state: %v %v", ks, ok)
	}

	trees := map[string]map[string]string{}
	for i, sn := range snaps {
		dst := filepath.Join(dir, "fork-"+sn.name)
		if _, err := computerfs.ForkStore(m.Store, dst, computerfs.ForkOptions{From: sn.name, Logger: slog.New(slog.DiscardHandler)}); err != nil {
			t.Fatal(err)
		}
		var tree map[string]string
		how := "wsfs"
		if i%2 == 0 {
			how = "mount"
			f := testmount.Start(t, dst, "--no-sandbox")
			tree = readTree(t, f.Dir, tops, slotFiles)
			f.Unmount(t)
		} else {
			tree = readStoreTree(t, dst, tops, slotFiles)
		}
		trees[sn.name] = tree
		ks, ok := linearize(writers, tree, sn.start, sn.end)
		if !ok {
			t.Errorf("snapshot %s (%s, ticks %d-%d) is the state after no linearization of the operations", sn.name, how, sn.start, sn.end)
			for _, w := range writers {
				t.Logf("%s holds %v", w.dir, w.mine(tree))
			}
			continue
		}
		t.Logf("snapshot %s (%s): after %v operations of m, s, t", sn.name, how, ks)
	}

	// The check can fail: snapshots broken on purpose are caught.
	t.Run("broken", func(t *testing.T) {
		first := snaps[0]
		real := trees[first.name]
		if _, ok := linearize(writers, real, first.start, first.end); !ok {
			t.Skip("the real snapshot failed already")
		}
		// A mix: the mount's writer at its end, the shell's at its start,
		// though its first operation ended before the mount's last began.
		if sw.ops[0].end < mw.ops[len(mw.ops)-1].start {
			mix := maps.Clone(mw.state(len(mw.ops)))
			maps.Copy(mix, sw.state(0))
			maps.Copy(mix, tw.state(len(tw.ops)))
			if ks, ok := linearize(writers, mix, 0, math.MaxInt64); ok {
				t.Errorf("a mix of the start and the end is taken for the state after %v", ks)
			}
		}
		// A snapshot missing every operation that ended before it began.
		if mw.ops[0].end < first.start {
			early := maps.Clone(real)
			maps.Copy(early, mw.state(0))
			if ks, ok := linearize(writers, early, first.start, first.end); ok {
				t.Errorf("a snapshot without the writes that ended before it is taken for the state after %v", ks)
			}
		}
		// The writer's blob from its last state, its other files from the
		// snapshot: no prefix of its operations.
		later := maps.Clone(real)
		later["m/big"] = modelSlots(mBig)
		if maps.Equal(later, real) || maps.Equal(mw.mine(later), mw.state(len(mw.ops))) {
			t.Skip("the blob or the writer's other files did not change after the first snapshot")
		}
		if ks, ok := linearize(writers, later, first.start, first.end); ok {
			t.Errorf("a snapshot holding the blob's last state is taken for the state after %v", ks)
		}
	})
	noRaceLog(t, m)
}

// noRaceLog fails if the daemon's log reports a data race or a panic.
func noRaceLog(t *testing.T, m *testmount.Mount) {
	t.Helper()
	if log := m.Log(); strings.Contains(log, "DATA RACE") || strings.Contains(log, "panic:") {
		t.Errorf("the daemon reports a race or a panic:\n%s", log)
	}
}
