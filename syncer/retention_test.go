package syncer

import (
	"fmt"
	"testing"
	"time"
)

// TestRetention: synced records older than the retention go, unsynced
// ones and the newest stay, the numbering goes on after a restart, and
// fsck finds the trimmed journal sound. Growth is bounded by what the
// retention window holds.
func TestRetention(t *testing.T) {
	e := newEnv(t, envOpts{mode: Headers, debounce: time.Hour, objects: map[string]string{"a": "v1"}})
	for i := range 50 {
		e.write(fmt.Sprintf("/s/f%d", i), "x")
	}
	e.mustSync()
	synced := e.st.LastSeq()
	e.write("/s/later", "not synced yet") // debounced: stays pending
	r := e.sy.pass(t.Context(), e.sy.srcs[0], false)
	if r.Waiting != 1 {
		t.Fatalf("pass: %+v", r)
	}
	// Within the retention nothing goes.
	if n, err := e.sy.Trim(time.Now()); err != nil || n != 0 {
		t.Fatalf("trim within retention: %d, %v", n, err)
	}
	n, err := e.sy.Trim(time.Now().Add(8 * 24 * time.Hour))
	check(t, err)
	first, last, err := e.st.JournalSpan()
	check(t, err)
	if n == 0 || first != synced+1 || last != e.st.LastSeq() {
		t.Fatalf("trimmed %d: journal now %d..%d, synced up to %d, last %d", n, first, last, synced, e.st.LastSeq())
	}
	problems, err := e.st.Check(10)
	check(t, err)
	if len(problems) > 0 {
		t.Fatalf("fsck after trim: %v", problems)
	}
	// The unsynced record survives a restart and is synced then.
	e.restart(envOpts{mode: Headers})
	e.write("/s/more", "y")
	if s := e.st.LastSeq(); s <= last {
		t.Fatalf("numbering restarted: %d after %d", s, last)
	}
	r = e.mustSync()
	if fmt.Sprint(r.Uploaded) != "[/s/later /s/more]" {
		t.Fatalf("sync after restart: %+v", r)
	}
	e.same()
	// Everything synced: all but the newest record can go.
	_, err = e.sy.Trim(time.Now().Add(8 * 24 * time.Hour))
	check(t, err)
	first, last, _ = e.st.JournalSpan()
	if first != last || last != e.st.LastSeq() {
		t.Fatalf("journal %d..%d after trimming everything synced", first, last)
	}
}
