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
