package tools

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/wsfs"
)

// The audit counts in the workspace's quota (it was TestRedteamAuditOutgrowsQuota:
// 4000 failed calls left 15 MiB of audit in a workspace whose quota is
// 1 MiB, counted nowhere).

func quotaTools(t *testing.T, quota int64) (*Tools, *wsfs.FS) {
	t.Helper()
	s, err := kv.Open(t.TempDir()+"/store", kv.Options{Logger: slog.New(slog.DiscardHandler), Quota: quota})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	f := wsfs.New(s, wsfs.Owner{UID: 1000, GID: 1000})
	tl, err := New(f, Options{Run: shellRunner(f)})
	if err != nil {
		t.Fatal(err)
	}
	return tl, f
}

// bigEdits are the arguments of a failing edit whose audit record is as
// large as the audit keeps (4 KiB of arguments).
func bigEdits() []Edit {
	edits := make([]Edit, 0, 14)
	for i := 0; i < 14; i++ {
		edits = append(edits, Edit{OldText: fmt.Sprintf("%03d%s", i, strings.Repeat("x", 240)), NewText: "y"})
	}
	return edits
}

// auditBound is what the count may reach: the quota, its grace, and the
// rewrites of the records of a few calls under way.
func auditBound(quota int64) int64 { return quota + kv.QuotaGrace(quota) + 64<<10 }

// TestAuditWithinQuota: a loop of failing calls fills the audit up to the
// quota (full records), then its grace (short records), then calls are
// refused before they run with an error that says why (EDQUOT); the count
// never passes the quota and its grace; every call that ran has its
// record, done; freeing space (a file removed through the mount, as the
// sandbox would) lets calls run again, and a tool's delete works past the
// quota while the grace lasts.
func TestAuditWithinQuota(t *testing.T) {
	const quota = 1 << 20
	tl, f := quotaTools(t, quota)
	st := f.Store()
	must[WriteResult](t)(tl.Write(ctx, WriteArgs{Path: "big", Content: strings.Repeat("b", 400<<10)}))
	must[WriteResult](t)(tl.Write(ctx, WriteArgs{Path: "small", Content: "s"}))
	edits := bigEdits()
	ran, refused := 0, 0
	var refusal error
	for i := 0; i < 4000; i++ {
		_, err := tl.Edit(ctx, EditArgs{Path: "missing", Edits: edits})
		switch {
		case errors.Is(err, kv.ErrQuota):
			refused++
			refusal = err
		case err == nil:
			t.Fatal("an edit of a missing file worked")
		default:
			ran++
		}
		if u, _ := st.Usage(); u > auditBound(quota) {
			t.Fatalf("call %d: the count is %d KiB, past the quota and its grace (%d KiB)", i, u>>10, auditBound(quota)>>10)
		}
	}
	u := st.UsageDetail()
	t.Logf("%d calls ran, %d refused; count %+v; %v", ran, refused, u, refusal)
	if refused == 0 || ran == 0 || !strings.Contains(refusal.Error(), "edit was not run") || kv.Errno(refusal) != 122 /* EDQUOT */ {
		t.Fatalf("%d ran, %d refused (%v)", ran, refused, refusal)
	}
	// Every call that ran is on record, done; the ones past the quota in
	// short.
	var done, short, full int
	if err := st.ReadAudit(0, func(r kv.AuditRecord) bool {
		if !r.Done {
			t.Errorf("record %d (%s) not done", r.ID, r.Tool)
		}
		if r.Tool == "edit" {
			done++
			if strings.Contains(r.Args, "sha256") && !strings.Contains(r.Args, "edits") {
				short++
			} else {
				full++
			}
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if done != ran || short == 0 || full == 0 {
		t.Fatalf("%d edits ran, %d on record (%d full, %d short)", ran, done, full, short)
	}
	// Smaller calls fill what is left of the grace, then are refused too
	// (the daemon answers), until space is freed.
	for i := 0; ; i++ {
		if _, err := tl.Ls(ctx, LsArgs{}); err != nil {
			if !errors.Is(err, kv.ErrQuota) {
				t.Fatalf("ls past the quota: %v", err)
			}
			break
		}
		if u, _ := st.Usage(); u > auditBound(quota) || i > 5000 {
			t.Fatalf("ls %d: the count is %d KiB, past %d KiB", i, u>>10, auditBound(quota)>>10)
		}
	}
	if err := f.Remove("/big"); err != nil { // through the mount or the sandbox
		t.Fatalf("removing a file past the quota: %v", err)
	}
	if _, err := tl.Ls(ctx, LsArgs{}); err != nil {
		t.Fatalf("ls once space is freed: %v", err)
	}
	for { // to past the quota again, within the grace
		used, _ := st.Usage()
		if used > quota {
			break
		}
		if _, err := tl.Edit(ctx, EditArgs{Path: "missing", Edits: edits}); errors.Is(err, kv.ErrQuota) {
			t.Fatalf("refused at %d of %d", used, quota)
		}
	}
	if _, err := tl.Delete(ctx, DeleteArgs{Path: "small"}); err != nil {
		t.Fatalf("the delete tool past the quota, within its grace: %v", err)
	}
}

// TestAuditWithinQuotaMCP: the same through MCP: a refused call is a
// tool error that names the quota, the server keeps answering, and calls
// run again once space is freed.
func TestAuditWithinQuotaMCP(t *testing.T) {
	const quota = 1 << 20
	tl, f := quotaTools(t, quota)
	st := f.Store()
	must[WriteResult](t)(tl.Write(ctx, WriteArgs{Path: "big", Content: strings.Repeat("b", 400<<10)}))
	cs := connect(t, tl)
	var edits []any
	for _, e := range bigEdits() {
		edits = append(edits, map[string]any{"oldText": e.OldText, "newText": e.NewText})
	}
	refused := ""
	for i := 0; i < 4000 && refused == ""; i++ {
		text, isErr := callText(t, cs, "edit", map[string]any{"path": "missing", "edits": edits})
		if !isErr {
			t.Fatal("an edit of a missing file worked")
		}
		if strings.Contains(text, "quota") {
			refused = text
		}
		if u, _ := st.Usage(); u > auditBound(quota) {
			t.Fatalf("call %d: the count is %d KiB, past %d KiB", i, u>>10, auditBound(quota)>>10)
		}
	}
	if refused == "" || !strings.Contains(refused, "was not run") {
		t.Fatalf("no call refused: %q", refused)
	}
	t.Logf("refused: %s", refused)
	// Smaller calls fill what is left of the grace, then are refused too.
	for i := 0; ; i++ {
		text, isErr := callText(t, cs, "exec", map[string]any{"command": "echo hi"})
		if isErr {
			if !strings.Contains(text, "quota") {
				t.Fatalf("exec past the quota: %q", text)
			}
			break
		}
		if u, _ := st.Usage(); u > auditBound(quota) || i > 5000 {
			t.Fatalf("exec %d: the count is %d KiB, past %d KiB", i, u>>10, auditBound(quota)>>10)
		}
	}
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatalf("the server after refusals: %v", err)
	}
	if err := f.Remove("/big"); err != nil {
		t.Fatal(err)
	}
	if text, isErr := callText(t, cs, "exec", map[string]any{"command": "echo hi"}); isErr || !strings.Contains(text, "hi") {
		t.Fatalf("exec once space is freed: %q %v", text, isErr)
	}
	checkAudit(t, st)
}

// checkAudit: every record is done, and the store's count agrees with
// its records.
func checkAudit(t *testing.T, st *kv.Store) {
	t.Helper()
	if err := st.ReadAudit(0, func(r kv.AuditRecord) bool {
		if !r.Done {
			t.Errorf("record %d (%s) not done", r.ID, r.Tool)
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if p, err := st.Check(10); err != nil || len(p) > 0 {
		t.Fatalf("check: %v %v", p, err)
	}
}
