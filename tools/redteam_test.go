package tools

import (
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/wsfs"
)

// allocated returns the bytes fn allocated on the heap in all (every
// goroutine's: the tools run in the caller's).
func allocated(fn func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	fn()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// heapGuard ends the test process if its heap passes limit: a test of a
// memory bomb that regressed must not take the machine with it.
func heapGuard(t *testing.T, limit uint64) {
	stop := make(chan struct{})
	done := make(chan struct{})
	t.Cleanup(func() { close(stop); <-done })
	go func() {
		defer close(done)
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			metrics.Read(s) // no stop of the world, unlike ReadMemStats
			if h := s[0].Value.Uint64(); h > limit {
				panic(fmt.Sprintf("%s: the heap reached %d MiB (the guard is at %d MiB)", t.Name(), h>>20, limit>>20))
			}
		}
	}()
}

// heapPeak runs fn and returns how far the live heap rose above where it
// was before, sampled every 2ms.
func heapPeak(fn func()) uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	base := s[0].Value.Uint64()
	peak := base
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	fn()
	close(stop)
	<-done
	return peak - base
}

// sparseLine makes p a file of size bytes: a text start with no newline,
// then a hole (zeros) to the end, which costs the store nothing.
func sparseLine(t *testing.T, f *wsfs.FS, p string, size int64) {
	t.Helper()
	if err := f.WriteFile(p, []byte(strings.Repeat("a", 3*sniffLen)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(p, size); err != nil {
		t.Fatal(err)
	}
}

// TestRedteamReadOneHugeLine: read keeps only the part of a line it shows.
// A file whose first line never ends (text, then a sparse hole: free to
// make with truncate) held the whole line in memory: 256 MiB here, and a
// 1 TiB file took the daemon's memory until the kernel killed it.
func TestRedteamReadOneHugeLine(t *testing.T) {
	heapGuard(t, 2<<30)
	tl, f := newTools(t, nil)
	sparseLine(t, f, "huge", 256<<20)
	var r ReadResult
	var err error
	n := allocated(func() { r, err = tl.Read(ctx, ReadArgs{Path: "huge"}) })
	if err != nil {
		t.Fatal(err)
	}
	if n > 32<<20 {
		t.Errorf("read of a 256 MiB line allocated %d MiB", n>>20)
	}
	if r.Lines != 1 || !strings.Contains(r.Content, "[line cut:") {
		t.Errorf("read: %d lines, %.100q", r.Lines, r.Content)
	}

	// 1 TiB: the call ends at its deadline, and soon.
	sparseLine(t, f, "tib", 1<<40)
	c, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	start := time.Now()
	n = allocated(func() { _, err = tl.Read(c, ReadArgs{Path: "tib"}) })
	if d := time.Since(start); d > 7*time.Second {
		t.Errorf("read of a 1 TiB line returned after %v (deadline 2s)", d)
	}
	if n > 64<<20 {
		t.Errorf("read of a 1 TiB line allocated %d MiB", n>>20)
	}
	t.Logf("1 TiB line: %v, %v", time.Since(start), err)
}

// TestRedteamEditBatchWedges: edit's batch is checked against the file
// one edit at a time; a batch of many edits on a large file kept a core
// busy far past the call's deadline, since nothing looked at it.
func TestRedteamEditBatchWedges(t *testing.T) {
	tl, f := newTools(t, nil)
	var b strings.Builder
	const n = 20000
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "line %07d\n", i)
	}
	if err := f.WriteFile("big", []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	edits := make([]Edit, 0, n)
	for i := n - 1; i >= 0; i-- { // the last lines first: each search runs to the end
		edits = append(edits, Edit{OldText: fmt.Sprintf("line %07d\n", i), NewText: fmt.Sprintf("LINE %07d\n", i)})
	}
	c, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err := tl.Edit(c, EditArgs{Path: "big", Edits: edits})
	if d := time.Since(start); d > 7*time.Second {
		t.Errorf("an edit of %d replacements returned after %v (deadline 2s)", n, d)
	}
	if err == nil {
		t.Errorf("an edit of %d replacements was accepted", n)
	}
	if got, _ := f.ReadFile("big"); string(got) != b.String() {
		t.Error("the refused edit changed the file")
	}

	// As many edits as a call may make, on a file of 15 MiB: the searches
	// take longer than the deadline, which stops them.
	b.Reset()
	for i := 0; b.Len() < 15<<20; i++ {
		fmt.Fprintf(&b, "line %07d\n", i)
	}
	if err := f.WriteFile("big", []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	edits = edits[:0]
	for i := 0; i < MaxEdits; i++ {
		edits = append(edits, Edit{OldText: fmt.Sprintf("line %07d\n", 1200000-i), NewText: "x\n"})
	}
	c, cancel = context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	start = time.Now()
	_, err = tl.Edit(c, EditArgs{Path: "big", Edits: edits})
	if d := time.Since(start); d > 7*time.Second {
		t.Errorf("an edit of %d replacements on 15 MiB returned after %v (deadline 2s)", MaxEdits, d)
	}
	t.Logf("%d edits on 15 MiB: %v, %v", MaxEdits, time.Since(start), err)
}

// TestRedteamAuditArgsBounded: the audit keeps a call's arguments with
// large strings as size and hash, but many small ones were kept whole: a
// batch of small edits (or a long error message) wrote its whole size into
// the store, twice per call, outside any quota.
func TestRedteamAuditArgsBounded(t *testing.T) {
	tl, f := newTools(t, nil)
	if err := f.WriteFile("f", []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	edits := make([]Edit, 20000)
	for i := range edits {
		edits[i] = Edit{OldText: fmt.Sprintf("not there %d %s", i, strings.Repeat("y", 200)), NewText: "z"}
	}
	tl.Edit(ctx, EditArgs{Path: "f", Edits: edits})
	// A regular expression that does not compile is quoted in its error.
	tl.Grep(ctx, GrepArgs{Query: strings.Repeat("(", 1<<20), Regex: true})
	// A path's error names it.
	tl.Read(ctx, ReadArgs{Path: strings.Repeat("é", 2000)})
	err := tl.st.ReadAudit(0, func(r kv.AuditRecord) bool {
		if n := len(r.Args) + len(r.Error) + len(r.Result); n > 16<<10 {
			t.Errorf("audit record %d (%s) holds %d KiB", r.ID, r.Tool, n>>10)
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRedteamConcurrentGrepMemory: each grep reads a file whole (up to
// 32 MiB) into memory of its own; calls in parallel each took their own,
// with no bound on how many run at once.
func TestRedteamConcurrentGrepMemory(t *testing.T) {
	tl, f := newTools(t, nil)
	if err := f.WriteFile("big", []byte(strings.Repeat("some text without the word\n", (30<<20)/27)), 0o644); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	stop := make(chan struct{})
	var peak uint64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
		}
	}()
	var calls sync.WaitGroup
	for i := 0; i < 48; i++ {
		calls.Add(1)
		go func() {
			defer calls.Done()
			if _, err := tl.Grep(ctx, GrepArgs{Path: "big", Query: "needle"}); err != nil {
				t.Error(err)
			}
		}()
	}
	calls.Wait()
	close(stop)
	wg.Wait()
	grew := int64(peak) - int64(base.HeapInuse)
	t.Logf("48 greps of a 30 MiB file at once: heap grew by %d MiB at its peak", grew>>20)
	if grew > 512<<20 {
		t.Errorf("48 greps at once took %d MiB of heap", grew>>20)
	}
}

// deepTree makes a chain of depth directories named d under the directory
// top of f, through the store (as the mount makes it: one level at a
// time, relative to the last), with a file at the bottom.
func deepTree(t *testing.T, f *wsfs.FS, top string, depth int) {
	t.Helper()
	if err := f.Mkdir(top, 0o755); err != nil {
		t.Fatal(err)
	}
	st := f.Store()
	a, err := f.Stat(top)
	if err != nil {
		t.Fatal(err)
	}
	dir := a.Ino
	for i := 0; i < depth; i++ {
		a, err := st.Create(dir, "d", kv.NewInode{Mode: kv.S_IFDIR | 0o755, Uid: 1000, Gid: 1000})
		if err != nil {
			t.Fatal(err)
		}
		dir = a.Ino
	}
	fa, err := st.Create(dir, "needle.txt", kv.NewInode{Mode: kv.S_IFREG | 0o644, Uid: 1000, Gid: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Write(fa.Ino, 0, []byte("needle\n")); err != nil {
		t.Fatal(err)
	}
}

// TestRedteamDeepTree: a directory tree deeper than any path the tools
// take (the kernel lets the sandbox make one, a level at a time) is
// walked by find, grep and delete. The walk kept every level's path, and
// looked each entry up from the root: memory and time grew with the
// square of the depth (844 MiB in 5 s at 20000 levels, then the deadline).
func TestRedteamDeepTree(t *testing.T) {
	heapGuard(t, 3<<30)
	tl, f := newTools(t, nil)
	const depth = 5000
	deepTree(t, f, "deep", depth)
	f.Store().Flush()
	for _, call := range []struct {
		name string
		fn   func(context.Context) error
	}{
		{"find", func(c context.Context) error { _, err := tl.Find(c, FindArgs{Pattern: "needle.txt"}); return err }},
		{"grep", func(c context.Context) error { _, err := tl.Grep(c, GrepArgs{Query: "needle"}); return err }},
		{"delete", func(c context.Context) error {
			_, err := tl.Delete(c, DeleteArgs{Path: "deep", Recursive: true})
			return err
		}},
	} {
		c, cancel := context.WithTimeout(ctx, 20*time.Second)
		start := time.Now()
		var err error
		n := heapPeak(func() { err = call.fn(c) })
		cancel()
		d := time.Since(start)
		if (err != nil) != (call.name == "delete") {
			t.Errorf("%s on a tree %d deep: %v", call.name, depth, err)
		}
		t.Logf("%s on a tree %d deep: %v, heap +%d MiB, %.200v", call.name, depth, d, n>>20, err)
		if d > 25*time.Second {
			t.Errorf("%s on a tree %d deep returned after %v (deadline 20s)", call.name, depth, d)
		}
		if n > 128<<20 {
			t.Errorf("%s on a tree %d deep took %d MiB of heap", call.name, depth, n>>20)
		}
	}
}

// TestRedteamToolsReadAsTheAgent: the tools read what the agent's
// identity may read, as its programs on the mount do: not the
// operator's 0600 file nor the inside of its 0700 directory (read,
// grep and edit gave them), but anyone's 0644 file.
func TestRedteamToolsReadAsTheAgent(t *testing.T) {
	_, f := newTools(t, nil)
	ag := f.ForAgent()
	tl, err := New(ag, Options{Run: shellRunner(ag)})
	if err != nil {
		t.Fatal(err)
	}
	root := wsfs.New(f.Store(), wsfs.Owner{})
	if err := f.Lchown("/", 1000, 1000); err != nil {
		t.Fatal(err)
	}
	for _, step := range []error{
		root.WriteFile("netrc", []byte("hunter2 netrc\n"), 0o600), root.Mkdir("private", 0o700),
		root.WriteFile("private/f", []byte("hunter2 private\n"), 0o644), root.WriteFile("world", []byte("hunter3 world\n"), 0o644),
	} {
		if step != nil {
			t.Fatal(step)
		}
	}
	for _, p := range []string{"netrc", "private/f", "/workspace/private/f"} {
		if r, err := tl.Read(ctx, ReadArgs{Path: p}); err == nil || strings.Contains(fmt.Sprint(r), "hunter2") {
			t.Errorf("read %s: %+v, %v", p, r, err)
		}
		if r, err := tl.Edit(ctx, EditArgs{Path: p, Edits: []Edit{{"hunter2", "x"}}}); err == nil {
			t.Errorf("edit %s: %+v", p, r)
		}
	}
	if _, err := tl.Ls(ctx, LsArgs{Path: "private"}); err == nil {
		t.Error("ls of the operator's 0700 directory")
	}
	g, err := tl.Grep(ctx, GrepArgs{Query: "hunter"})
	if err != nil {
		t.Errorf("grep: %v", err)
	}
	if fd, err := tl.Find(ctx, FindArgs{Pattern: "*"}); err != nil || !strings.Contains(fmt.Sprint(fd), "world") {
		t.Errorf("find: %+v %v", fd, err)
	}
	if s := fmt.Sprint(g); strings.Contains(s, "hunter2") || !strings.Contains(s, "hunter3") {
		t.Errorf("grep: %s", s)
	}
	e, _ := tl.Exec(ctx, ExecArgs{Command: "cat netrc private/f world; grep -r hunter2 ."})
	if s := fmt.Sprint(e); strings.Contains(s, "hunter2") || !strings.Contains(s, "hunter3") {
		t.Errorf("exec: %s", s)
	}
	if b, _ := root.ReadFile("netrc"); string(b) != "hunter2 netrc\n" {
		t.Errorf("the operator's file changed: %q", b)
	}
}
