package syncer

import (
	"encoding/binary"
	"fmt"
	"io/fs"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/computerfs/computerfs/internal/faultnet"
)

func (e *env) storedCursor() uint64 {
	v, err := e.st.GetMeta(cursorKey(0))
	if err != nil {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

// A remote that fails (500s, timeouts, refused connections) loses nothing:
// the cursor stays, the next sync does the work.
func TestSyncFaults(t *testing.T) {
	e := newEnv(t, envOpts{mode: Headers, objects: map[string]string{"a": "v1", "b": "v1"}})
	e.mustSync() // probes the mode, nothing to do
	before := e.storedCursor()
	e.write("/s/a", "new a")
	e.write("/s/c", "new c")
	check(t, e.fs.Remove("/s/b"))
	for _, fault := range []*faultnet.Rule{
		faultnet.MatchFunc(func(*http.Request) bool { return true }).Status(500),
		faultnet.MatchFunc(func(*http.Request) bool { return true }).Delay(200 * time.Millisecond),
		faultnet.MatchFunc(func(r *http.Request) bool { return r.Method == http.MethodDelete }).Fail(nil),
	} {
		r := e.ft.Add(fault)
		rep := e.syncTimeout(100 * time.Millisecond)
		e.ft.Remove(r)
		if len(rep.Errors) == 0 {
			t.Fatalf("sync through a fault: %+v", rep)
		}
		if c := e.storedCursor(); c != before && len(rep.Uploaded) == 0 {
			t.Fatalf("cursor moved from %d to %d though nothing was done", before, c)
		}
	}
	// The journal kept growing meanwhile; the next sync does it all.
	e.write("/s/d", "later")
	e.mustSync()
	e.same()
	if e.storedCursor() != e.st.LastSeq() {
		t.Fatalf("cursor %d, journal at %d", e.storedCursor(), e.st.LastSeq())
	}
}

// The background loop retries a failing remote with growing pauses, and
// catches up once it answers again.
func TestSyncBackoff(t *testing.T) {
	e := newEnv(t, envOpts{mode: Headers, debounce: 20 * time.Millisecond, objects: map[string]string{"a": "v1"}})
	all := e.ft.Add(faultnet.MatchFunc(func(*http.Request) bool { return true }).Status(503))
	e.sy.Start()
	e.write("/s/a", "v2")
	time.Sleep(1500 * time.Millisecond)
	n := all.Requests()
	// The SDK retries each request 4 times; MinBackoff is 10 ms, so with
	// doubling pauses 1.5 s hold about 8 passes, not a hundred.
	if n == 0 || n > 60 {
		t.Fatalf("%d requests in 1.5 s while the remote failed", n)
	}
	st := e.sy.Status()[0]
	if st.Pending != 1 || st.NextRetry == nil || st.Last.OK {
		t.Fatalf("status while failing: %+v", st)
	}
	e.ft.Remove(all)
	deadline := time.Now().Add(30 * time.Second)
	for string(e.bucketFiles()["a"]) != "v2" {
		if time.Now().After(deadline) {
			t.Fatalf("not synced after the remote came back: %+v", e.sy.Status())
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.same()
}

// TestSyncServerRestart: the S3 server is killed in the middle of a sync
// of many files and started again; nothing is lost and the bucket ends up
// matching the workspace.
func TestSyncServerRestart(t *testing.T) {
	e := newEnv(t, envOpts{mode: Headers, objects: map[string]string{"a": "v1"}})
	for i := range 300 {
		e.write(fmt.Sprintf("/s/d%d/f%d", i%7, i), strings.Repeat("x", i))
	}
	check(t, e.fs.Remove("/s/a"))
	done := make(chan SourceReport)
	go func() { done <- e.syncTimeout(time.Minute) }()
	// Stop the server once some objects are in (its posix backend keeps
	// them as files).
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		n := 0
		filepath.WalkDir(filepath.Join(e.srv.Root, e.bucket, "p"), func(_ string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				n++
			}
			return nil
		})
		if n >= 30 {
			break
		}
	}
	e.srv.Stop()
	r := <-done
	t.Logf("sync through the outage: %d uploaded, %d errors", len(r.Uploaded), len(r.Errors))
	if len(r.Errors) == 0 || len(r.Uploaded) == 0 {
		t.Fatal("no errors though the server stopped")
	}
	e.write("/s/during", "written while the server was down")
	e.srv.Restart(t)
	e.mustSync()
	e.same()
}

// TestDebounce: the background loop leaves a path alone until it has had
// no change for the debounce, unless the file is reported closed (Ready).
func TestDebounce(t *testing.T) {
	e := newEnv(t, envOpts{mode: Headers, debounce: 3 * time.Second, objects: map[string]string{"a": "v1"}})
	e.mustSync() // the mode probe, out of the way
	e.sy.Start()
	wait := func(key, want string, within time.Duration) time.Duration {
		t.Helper()
		start := time.Now()
		for time.Since(start) < within {
			if e.bucketFiles()[key] == want {
				return time.Since(start)
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("%s is not %q after %v: %+v", key, want, within, e.sy.Status())
		return 0
	}
	// Written in pieces, 100 ms apart: nothing goes up until it rests.
	start := time.Now()
	for i := range 5 {
		e.write("/s/slow", fmt.Sprint("piece ", i))
		time.Sleep(100 * time.Millisecond)
		if got, ok := e.bucketFiles()["slow"]; ok {
			t.Fatalf("uploaded %q while still being written", got)
		}
	}
	wait("slow", "piece 4", 20*time.Second)
	if d := time.Since(start); d < 3400*time.Millisecond {
		t.Fatalf("uploaded after %v: the debounce is 3 s after the last of 5 writes 100 ms apart", d)
	}
	// Reported closed: at once, while a file written with it but not
	// reported waits for the debounce.
	e.write("/s/open", "still open")
	e.write("/s/closed", "done")
	a, err := e.fs.Lstat("/s/closed")
	check(t, err)
	e.sy.Ready(a.Ino)
	wait("closed", "done", 20*time.Second)
	if _, ok := e.bucketFiles()["open"]; ok {
		t.Fatal("a file not reported closed went up with the closed one, before its debounce")
	}
	wait("open", "still open", 20*time.Second)
}
