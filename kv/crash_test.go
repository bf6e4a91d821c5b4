package kv

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The crash test runs a child process (this test binary, running
// TestCrashChild) that applies a deterministic sequence of operations to a
// store and reports on stdout how many have completed and how many were
// flushed or synced. The parent kills it with SIGKILL at a random moment,
// reopens the store and checks that it holds exactly the state after some
// prefix of the sequence, at least as long as the flushed part.

const (
	crashDirEnv  = "COMPUTERFS_KV_CRASH_DIR"
	crashSeedEnv = "COMPUTERFS_KV_CRASH_SEED"
)

// crashOps is the deterministic operation sequence for a seed.
type crashOps struct{ r *rand.Rand }

func newCrashOps(seed int64) *crashOps { return &crashOps{rand.New(rand.NewSource(seed))} }

func (c *crashOps) next() op {
	b := make([]byte, 4)
	c.r.Read(b)
	return decodeOps(b)[0]
}

// crashDurability says what the child does after operation n (1-based).
func crashDurability(n int) string {
	switch {
	case n%211 == 100:
		return "synced"
	case n%37 == 20:
		return "flushed"
	}
	return ""
}

// TestCrashChild is the child's side. Without the environment variable it
// does nothing (it is not a skip: CI counts those).
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		return
	}
	seed, err := strconv.ParseInt(os.Getenv(crashSeedEnv), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	opts := quietOptions()
	opts.FlushInterval = time.Hour // only explicit flushes and syncs count
	opts.SyncInterval = time.Hour
	if seed%2 == 0 {
		// Files move to blobs halfway: the crash can catch a move, a blob
		// written past its recorded size, a blob not yet removed.
		opts.BlobThreshold = 2 * ChunkSize
	}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	out := bufio.NewWriterSize(os.Stdout, 64)
	say := func(format string, args ...any) {
		fmt.Fprintf(out, format+"\n", args...)
		out.Flush()
	}
	say("ready")
	m := newModel()
	gen := newCrashOps(seed)
	for n := 1; n <= 1_000_000; n++ {
		r := apply(t, s, m, gen.next(), n-1)
		if !r.skipped && r.store != r.model {
			say("mismatch %d %v: store %v, model %v", n, r.op, r.store, r.model)
			os.Exit(3)
		}
		say("done %d", n)
		switch crashDurability(n) {
		case "synced":
			if err := s.Sync(); err != nil {
				t.Fatal(err)
			}
			say("synced %d", n)
		case "flushed":
			if err := s.Flush(); err != nil {
				t.Fatal(err)
			}
			say("flushed %d", n)
		}
	}
	say("finished")
}

func TestCrash(t *testing.T) {
	delays := []time.Duration{5, 30, 80, 150, 250, 400}
	if testing.Short() {
		delays = delays[2:4]
	}
	if longTests() {
		for i := 0; i < 40; i++ {
			delays = append(delays, time.Duration(10+i*25))
		}
	}
	r := rand.New(rand.NewSource(time.Now().UnixNano()))
	for round, d := range delays {
		seed := int64(round + 1)
		delay := d*time.Millisecond + time.Duration(r.Int63n(int64(20*time.Millisecond)))
		t.Run(fmt.Sprintf("seed%d-%v", seed, delay), func(t *testing.T) {
			crashRound(t, seed, delay)
		})
	}
}

func crashRound(t *testing.T, seed int64, delay time.Duration) {
	dir := t.TempDir() + "/store"
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1", "-test.timeout=60s")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashSeedEnv+"="+strconv.FormatInt(seed, 10))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	var mu sync.Mutex
	var lines []string
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(stdout)
		first := true
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, sc.Text())
			mu.Unlock()
			if first && sc.Text() == "ready" {
				close(ready)
				first = false
			}
		}
		if first {
			close(ready)
		}
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the child did not start")
	}
	time.Sleep(delay)
	cmd.Process.Kill()
	<-readDone
	werr := cmd.Wait()

	done, durable := 0, 0
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		n, _ := strconv.Atoi(f[1])
		switch f[0] {
		case "done":
			done = n
		case "flushed", "synced":
			durable = n
		case "mismatch":
			t.Fatalf("the child found the store and the model disagreeing: %s", l)
		}
	}
	if strings.Contains(strings.Join(lines, "\n"), "finished") {
		t.Fatalf("the child finished every operation before it was killed")
	}
	if ws, ok := cmd.ProcessState.Sys().(interface{ Signaled() bool }); !ok || !ws.Signaled() {
		t.Fatalf("the child was not killed: %v\nstdout tail: %q\nstderr: %s", werr, tail(lines), stderr.String())
	}
	t.Logf("killed after %v: %d operations done, %d flushed or synced", delay, done, durable)

	s := openStore(t, dir)
	checkInvariants(t, s, checkOpts{})
	got := storeView(t, s, RootIno, false)

	// Find the prefix, at least as long as the durable part, whose state the
	// store shows: cheaply without file contents first, then in full. Files
	// kept in blobs are written in place, so their data may also hold
	// writes of operations after that prefix (docs/durability.md):
	// each of their bytes must be one that the file held after the prefix
	// or after a later operation.
	blobs := blobPaths(t, s)
	withData := storeView(t, s, RootIno, true)
	m := newModel()
	gen := newCrashOps(seed)
	// The operation under way at the kill (done+1) may have committed.
	var later []view // the states after durable, durable+1, ..., done+1
	var candidates []int
	for k := 0; k <= done+1; k++ {
		if k > 0 {
			apply(t, nil, m, gen.next(), k-1)
		}
		if k < durable {
			continue
		}
		later = append(later, m.view(true))
		if m.view(false).equal(got) {
			candidates = append(candidates, k)
		}
	}
	full := -1
	for _, k := range candidates {
		if matchesWithBlobs(withData, later[k-durable:], blobs) {
			full = k
			break
		}
	}
	if full < 0 {
		m := newModel()
		gen := newCrashOps(seed)
		for k := 0; k <= done; k++ {
			if k > 0 {
				apply(t, nil, m, gen.next(), k-1)
			}
			if k == durable {
				t.Logf("difference to the state after the %d durable operations:\n%s", durable, m.view(true).diff(withData))
			}
		}
		t.Fatalf("the store after the crash is not the state after any prefix of at least %d operations "+
			"(prefixes whose metadata it matches: %v; blobs: %v); difference to the state after all %d done:\n%s",
			durable, candidates, blobs, done, m.view(true).diff(withData))
	}
	t.Logf("the store holds the state after %d operations", full)
}

func tail(lines []string) []string {
	if len(lines) > 5 {
		return lines[len(lines)-5:]
	}
	return lines
}

// blobPaths returns the paths of the regular files of s kept in blobs.
func blobPaths(t *testing.T, s *Store) map[string]bool {
	t.Helper()
	paths := map[string]bool{}
	var walk func(dir uint64, prefix string)
	walk = func(dir uint64, prefix string) {
		if err := s.ReadDir(dir, "", func(d Dirent) bool {
			p := path.Join(prefix, d.Name)
			a, err := s.GetAttr(d.Ino)
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if a.IsDir() {
				walk(d.Ino, p)
			} else if a.Flags&FlagBlob != 0 {
				paths[p] = true
			}
			return true
		}); err != nil {
			t.Fatal(err)
		}
	}
	walk(RootIno, "")
	return paths
}

// matchesWithBlobs tells whether got is states[0], but for the data of
// the files in blobs, each byte of which may come from any of states.
func matchesWithBlobs(got view, states []view, blobs map[string]bool) bool {
	want := states[0]
	if len(got) != len(want) {
		return false
	}
	for p, e := range got {
		w, ok := want[p]
		if !ok {
			return false
		}
		if !blobs[p] || e.Linkto != "" {
			if e != w {
				return false
			}
			continue
		}
		e.Data, w.Data = "", ""
		if e != w {
			return false
		}
		data := got[p].Data
	nextByte:
		for i := 0; i < len(data); i++ {
			for _, st := range states {
				var b byte
				if d := st[p].Data; i < len(d) {
					b = d[i]
				}
				if b == data[i] {
					continue nextByte
				}
			}
			return false
		}
	}
	return true
}
