package computerfs_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/computerfs/computerfs"
	"github.com/computerfs/computerfs/internal/testmount"
	"github.com/computerfs/computerfs/kv"
)

// Slot files: a file of 4 KiB slots, each holding one uint64 repeated, so
// that a torn slot shows and the state is the slots' values.
const slotSize = 4096

func slotData(v uint64) []byte {
	b := make([]byte, slotSize)
	for i := 0; i < slotSize; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], v)
	}
	return b
}

// slots decodes a slot file; a slot that is not one value repeated fails.
func slots(t *testing.T, p string, n int) []uint64 {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != n*slotSize {
		t.Fatalf("%s: %d bytes, want %d", p, len(b), n*slotSize)
	}
	out := make([]uint64, n)
	for i := range out {
		s := b[i*slotSize : (i+1)*slotSize]
		out[i] = binary.LittleEndian.Uint64(s)
		if !bytes.Equal(s, slotData(out[i])) {
			t.Fatalf("%s: slot %d is torn", p, i)
		}
	}
	return out
}

func cfs(t *testing.T, args ...string) []byte {
	t.Helper()
	out, err := exec.Command(testmount.Binary(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("computerfs %v: %v\n%s", args, err, out)
	}
	return out
}

// slotOp is one write of a slot: which file, which slot, the value, and
// the clock ticks when it began and ended.
type slotOp struct {
	big        bool
	slot       int
	value      uint64
	start, end int64
}

// A mounted workspace is snapshotted (computerfs snapshot) while a program
// writes two files it keeps open, a big one (a blob the kernel writes
// directly through passthrough) and a small one (chunks, through the
// daemon). Each snapshot, forked (computerfs fork) and mounted, holds for
// both files together the state after some prefix of the writes, one
// that has every write that ended before the snapshot began and none that
// began after it ended. The forks have agents of their own, own their
// files, and writes in a fork reach neither the parent nor another fork
// of the same snapshot.
func TestSnapshotForkThroughMount(t *testing.T) {
	dir := t.TempDir()
	m := testmount.Start(t, filepath.Join(dir, "parent"), "--no-sandbox")
	const bigSlots, smallSlots = 512, 8 // 2 MiB: a blob; 32 KiB: chunks
	big, small := filepath.Join(m.Dir, "big"), filepath.Join(m.Dir, "small")
	if err := os.WriteFile(big, make([]byte, bigSlots*slotSize), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(small, make([]byte, smallSlots*slotSize), 0o644); err != nil {
		t.Fatal(err)
	}
	mustExec(t, m, "shell", "mkdir d && echo hi > d/agent.txt")
	fb, err := os.OpenFile(big, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := os.OpenFile(small, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var clock atomic.Int64
	var ops []slotOp
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for k := uint64(1); !stop.Load() || k < 200; k++ {
			op := slotOp{big: k%2 == 0, value: k}
			f, n := fs, smallSlots
			if op.big {
				f, n = fb, bigSlots
			}
			op.slot = int(k*7919) % n
			op.start = clock.Add(1)
			if _, err := f.WriteAt(slotData(k), int64(op.slot*slotSize)); err != nil {
				t.Errorf("write: %v", err)
				return
			}
			op.end = clock.Add(1)
			ops = append(ops, op)
		}
	}()
	type snap struct {
		name       string
		start, end int64
	}
	var snaps []snap
	for _, name := range []string{"s0", "s1", "s2", "s3"} {
		start := clock.Add(1)
		cfs(t, "snapshot", "-w", m.Dir, name)
		snaps = append(snaps, snap{name, start, clock.Add(1)})
	}
	stop.Store(true)
	wg.Wait()
	fb.Close()
	fs.Close()
	var list []computerfs.SnapshotInfo
	if err := json.Unmarshal(cfs(t, "snapshot", "-w", m.Dir, "--json"), &list); err != nil || len(list) != len(snaps) {
		t.Fatalf("snapshot list: %v %+v", err, list)
	}
	parentAgent := statusOf(t, m.Dir).Agent

	// state is the two files after the first n writes.
	state := func(n int) ([]uint64, []uint64) {
		b, s := make([]uint64, bigSlots), make([]uint64, smallSlots)
		for _, op := range ops[:n] {
			if op.big {
				b[op.slot] = op.value
			} else {
				s[op.slot] = op.value
			}
		}
		return b, s
	}
	equal := func(a, b []uint64) bool {
		for i := range a {
			if a[i] != b[i] {
				return false
			}
		}
		return len(a) == len(b)
	}
	forkOf := func(from, name string) *testmount.Mount {
		args := []string{"fork", "-w", m.Dir, "--store", filepath.Join(dir, name)}
		if from != "" {
			args = append(args, "--from", from)
		}
		cfs(t, args...)
		return testmount.Start(t, filepath.Join(dir, name), "--no-sandbox")
	}
	seen := map[string][]uint64{}
	for _, sn := range snaps {
		f := forkOf(sn.name, "fork-"+sn.name)
		gotB, gotS := slots(t, filepath.Join(f.Dir, "big"), bigSlots), slots(t, filepath.Join(f.Dir, "small"), smallSlots)
		seen[sn.name] = append(gotB, gotS...)
		lo, hi := 0, 0
		for i, op := range ops {
			if op.end < sn.start {
				lo = i + 1
			}
			if op.start < sn.end {
				hi = i + 1
			}
		}
		found := false
		for n := lo; n <= hi && !found; n++ {
			b, s := state(n)
			found = equal(b, gotB) && equal(s, gotS)
		}
		if !found {
			t.Errorf("%s: the fork's files are the state after none of the writes %d to %d", sn.name, lo, hi)
		}
		a := statusOf(t, f.Dir).Agent
		if a == parentAgent {
			t.Errorf("%s: the fork has the parent's agent %s", sn.name, a)
		}
		wantAgentOwns(t, f, a, "fork "+sn.name, ".", "d", "d/agent.txt")
		if uid, _ := owner(t, filepath.Join(f.Dir, "big")); uid != 0 {
			t.Errorf("%s: root's file big belongs to %d in the fork", sn.name, uid)
		}
		f.Unmount(t)
	}

	// Isolation: a fork's writes (passthrough and chunks) stay in it.
	wantB, wantS := state(len(ops))
	f1, f2 := forkOf("s1", "iso1"), forkOf("", "live")
	if got := slots(t, filepath.Join(f2.Dir, "big"), bigSlots); !equal(got, wantB) {
		t.Errorf("the fork of the live state differs from the parent")
	}
	for _, f := range []*testmount.Mount{f1, f2, m} {
		for _, p := range []string{"big", "small"} {
			h, err := os.OpenFile(filepath.Join(f.Dir, p), os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := h.WriteAt(slotData(1<<40+uint64(f.Pid)), 0); err != nil {
				t.Fatal(err)
			}
			h.Close()
		}
	}
	wantB[0], wantS[0] = 1<<40+uint64(m.Pid), 1<<40+uint64(m.Pid)
	if got := slots(t, big, bigSlots); !equal(got, wantB) {
		t.Errorf("parent: big holds a fork's writes")
	}
	if got := slots(t, small, smallSlots); !equal(got, wantS) {
		t.Errorf("parent: small holds a fork's writes")
	}
	for _, f := range []*testmount.Mount{f1, f2} {
		if got := slots(t, filepath.Join(f.Dir, "big"), bigSlots)[0]; got != 1<<40+uint64(f.Pid) {
			t.Errorf("fork %s: big slot 0 holds %d", f.Store, got)
		}
	}
	// The snapshot did not move.
	again := forkOf("s1", "iso2")
	got := append(slots(t, filepath.Join(again.Dir, "big"), bigSlots), slots(t, filepath.Join(again.Dir, "small"), smallSlots)...)
	if !equal(got, seen["s1"]) {
		t.Errorf("snapshot s1 holds the writes made after it")
	}

	// Forks of a store that is not mounted: from a snapshot, and live.
	m.Unmount(t)
	cfs(t, "fork", "--src", m.Store, "--from", "s0", "--store", filepath.Join(dir, "off-s0"))
	cfs(t, "fork", "--src", m.Store, "--store", filepath.Join(dir, "off-live"))
	off := testmount.Start(t, filepath.Join(dir, "off-live"), "--no-sandbox")
	if got := slots(t, filepath.Join(off.Dir, "big"), bigSlots); !equal(got, wantB) {
		t.Errorf("the fork of the unmounted store differs from it")
	}
	offs0 := testmount.Start(t, filepath.Join(dir, "off-s0"), "--no-sandbox")
	if got := slots(t, filepath.Join(offs0.Dir, "big"), bigSlots); !equal(got, seen["s0"][:bigSlots]) {
		t.Errorf("the fork of s0 of the unmounted store differs from s0")
	}
}

// Snapshots taken while the shell fast path (in the daemon) creates files
// one after another each hold a prefix of them: f1..fn, each with its
// content, but the last, which may hold a prefix of it (echo writes the
// number and the newline apart).
func TestSnapshotWhileFastPathWrites(t *testing.T) {
	dir := t.TempDir()
	m := testmount.Start(t, filepath.Join(dir, "ws"), "--no-sandbox")
	c, err := computerfs.Dial(m.Dir)
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	done := make(chan error, 1)
	go func() {
		_, _, _, err := execOn(t, m.Dir, computerfs.ExecRequest{Backend: "shell", Timeout: "5m",
			Command: fmt.Sprintf("mkdir fp; i=1; while [ $i -le %d ]; do echo $i > fp/f$i; i=$((i+1)); done", n)})
		done <- err
	}()
	var names []string
	for i := 0; ; i++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		default:
			name := fmt.Sprintf("fp%d", i)
			if _, err := c.Snapshot(context.Background(), name); err != nil {
				t.Fatal(err)
			}
			names = append(names, name)
			continue
		}
		break
	}
	t.Logf("%d snapshots while the fast path ran", len(names))
	for _, name := range names {
		dst := filepath.Join(dir, "fork-"+name)
		if _, err := computerfs.ForkStore(m.Store, dst, computerfs.ForkOptions{From: name}); err != nil {
			t.Fatal(err)
		}
		st, err := kv.Open(dst, kv.Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		d, err := st.Lookup(kv.RootIno, "fp")
		if err == kv.ErrNotFound {
			st.Close()
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		have := map[int]string{}
		st.ReadDir(d.Ino, "", func(e kv.Dirent) bool {
			var i int
			fmt.Sscanf(e.Name, "f%d", &i)
			a, _ := st.GetAttr(e.Ino)
			buf := make([]byte, a.Size)
			st.Read(e.Ino, 0, buf)
			have[i] = string(buf)
			return true
		})
		st.Close()
		for i := 1; i <= len(have); i++ {
			got, ok := have[i]
			switch {
			case !ok:
				t.Errorf("%s: has %d files but not f%d", name, len(have), i)
			case got != fmt.Sprintf("%d\n", i) && !(i == len(have) && strings.HasPrefix(fmt.Sprintf("%d\n", i), got)):
				t.Errorf("%s: f%d holds %q", name, i, got)
			}
		}
	}
}

// A snapshot survives a SIGKILL of the daemon right after it is taken,
// and the store it was taken of still mounts and forks.
func TestSnapshotSurvivesKill(t *testing.T) {
	dir := t.TempDir()
	m := testmount.Start(t, filepath.Join(dir, "ws"), "--no-sandbox")
	want := bytes.Repeat([]byte("snapshot "), 300000) // 2.7 MB: a blob
	if err := os.WriteFile(filepath.Join(m.Dir, "big"), want, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(m.Dir, "small"), []byte("small"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfs(t, "snapshot", "-w", m.Dir, "k")
	// A fork into the workspace's own mount or store is refused.
	for _, bad := range []string{filepath.Join(m.Dir, "fork"), filepath.Join(m.Store, "fork")} {
		if out, err := exec.Command(testmount.Binary(t), "fork", "-w", m.Dir, "--store", bad).CombinedOutput(); err == nil {
			t.Errorf("fork into %s worked: %s", bad, out)
		}
	}
	if err := os.WriteFile(filepath.Join(m.Dir, "big"), []byte("after"), 0o644); err != nil {
		t.Fatal(err)
	}
	m.Kill(t)
	// The store's snapshots, with no daemon: listed, taken, deleted.
	cfs(t, "snapshot", "--store", m.Store, "k2")
	var list []computerfs.SnapshotInfo
	if err := json.Unmarshal(cfs(t, "snapshot", "--store", m.Store, "--json"), &list); err != nil || len(list) != 2 || list[0].Name != "k" || list[1].Name != "k2" {
		t.Errorf("snapshot --store: %v %+v", err, list)
	}
	cfs(t, "snapshot", "--store", m.Store, "--delete", "k2")
	cfs(t, "fork", "--src", m.Store, "--from", "k", "--store", filepath.Join(dir, "fork"))
	f := testmount.Start(t, filepath.Join(dir, "fork"), "--no-sandbox")
	if got, err := os.ReadFile(filepath.Join(f.Dir, "big")); err != nil || !bytes.Equal(got, want) {
		t.Errorf("fork: big holds %d bytes (%v), want the snapshot's %d", len(got), err, len(want))
	}
	if got, _ := os.ReadFile(filepath.Join(f.Dir, "small")); string(got) != "small" {
		t.Errorf("fork: small holds %q", got)
	}
	m.Remount(t, "--no-sandbox")
	if got, _ := os.ReadFile(filepath.Join(m.Dir, "big")); string(got) != "after" {
		t.Errorf("parent after the kill: big holds %d bytes", len(got))
	}
}
