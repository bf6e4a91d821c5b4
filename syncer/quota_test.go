package syncer

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/computerfs/computerfs/kv"
)

// TestSyncCutRecords: a removal in a workspace past its quota and its
// grace is journaled with a minimal record, its path cut to a short
// ancestor; sync back still finds what changed under it (the remote
// object goes), and files elsewhere in the source are left as they are.
func TestSyncCutRecords(t *testing.T) {
	// Deep enough that the removal's full record would take more than
	// the file frees (a short S3 key still: 600-odd bytes).
	d := strings.Repeat("d", 200)
	long := d + "/" + d + "/" + d
	e := newEnv(t, envOpts{mode: Headers, debounce: time.Millisecond,
		objects: map[string]string{long + "/victim": "v", long + "/kept": "k", "top": "t"}})
	e.write("/local/big", strings.Repeat("x", 1<<20)) // outside the source: the count, not the sync
	e.mustSync()
	e.st.SetQuota(1) // the operator lowered it: the workspace is past it and its grace
	if err := e.fs.Remove("/s/" + long + "/victim"); err != nil {
		t.Fatalf("removing a file past the quota: %v", err)
	}
	var last kv.Record
	check(t, e.st.ReadJournal(e.st.LastSeq()-1, func(r kv.Record) bool { last = r; return true }))
	if last.Op != kv.JUnlink || !last.PathCut || last.Path != "/s" {
		t.Fatalf("the removal's record: %+v, want a minimal one cut to /s", last)
	}
	r := e.mustSync()
	if fmt.Sprint(r.Deleted) != "[/s/"+long+"/victim]" || len(r.Uploaded) != 0 {
		t.Fatalf("sync: %+v", r)
	}
	if got := e.bucketFiles(); len(got) != 2 || got[long+"/kept"] != "k" || got["top"] != "t" {
		t.Fatalf("bucket after the sync: %v", got)
	}
	e.same()
}

// TestTrimNearQuota: within the retention, synced records stay while the
// workspace has room; once it holds 7/8 of its quota (the journal counts
// in it), every synced record goes at the next trim and the room comes
// back, while records not yet synced stay.
func TestTrimNearQuota(t *testing.T) {
	e := newEnv(t, envOpts{mode: Headers, debounce: time.Hour})
	for i := range 50 {
		e.write(fmt.Sprintf("/s/f%d", i), "x")
	}
	e.mustSync()
	synced := e.st.LastSeq()
	e.write("/s/later", "not synced yet") // debounced: stays pending
	if r := e.sy.pass(t.Context(), e.sy.srcs[0], false); r.Waiting != 1 {
		t.Fatalf("pass: %+v", r)
	}
	if n, err := e.sy.Trim(time.Now()); err != nil || n != 0 {
		t.Fatalf("trim within the retention, with room: %d, %v", n, err)
	}
	before := e.st.UsageDetail()
	e.st.SetQuota(before.Used + before.Used/16)
	n, err := e.sy.Trim(time.Now())
	check(t, err)
	first, _, err := e.st.JournalSpan()
	check(t, err)
	after := e.st.UsageDetail()
	t.Logf("trimmed %d records near the quota: journal %d -> %d bytes", n, before.Journal, after.Journal)
	if n == 0 || first != synced+1 || after.Journal >= before.Journal/2 {
		t.Fatalf("near the quota: trimmed %d, journal from %d (synced up to %d), %d -> %d bytes", n, first, synced, before.Journal, after.Journal)
	}
	r := e.mustSync()
	if fmt.Sprint(r.Uploaded) != "[/s/later]" {
		t.Fatalf("the record not synced was lost: %+v", r)
	}
	e.same()
}
