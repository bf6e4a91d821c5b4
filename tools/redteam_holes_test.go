//go:build redteam

package tools

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/wsfs"
)

// TestRedteamAuditOutgrowsQuota: every call leaves an audit record in the
// store (a few KiB at most since the audit keeps digests of large
// arguments), refused and failed calls too, and the audit counts toward
// no quota and is never trimmed: an agent that calls in a loop fills the
// disk past its workspace's quota.
func TestRedteamAuditOutgrowsQuota(t *testing.T) {
	s, err := kv.Open(t.TempDir()+"/store", kv.Options{Logger: slog.New(slog.DiscardHandler), Quota: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f := wsfs.New(s, wsfs.Owner{UID: 1000, GID: 1000})
	tl, err := New(f, Options{})
	if err != nil {
		t.Fatal(err)
	}
	edits := make([]Edit, 0, 14)
	for i := 0; i < 14; i++ {
		edits = append(edits, Edit{OldText: fmt.Sprintf("%03d%s", i, strings.Repeat("x", 240)), NewText: "y"})
	}
	for i := 0; i < 4000; i++ {
		tl.Edit(ctx, EditArgs{Path: "missing", Edits: edits})
	}
	var audit int64
	s.ReadAudit(0, func(r kv.AuditRecord) bool {
		audit += int64(len(r.Args) + len(r.Error) + len(r.Result) + 100)
		return true
	})
	used, quota := s.Usage()
	t.Logf("usage %d KiB of %d KiB; the audit holds %d KiB", used>>10, quota>>10, audit>>10)
	if audit > quota {
		t.Errorf("4000 failed calls left %d MiB of audit in a workspace whose quota is %d MiB", audit>>20, quota>>20)
	}
}
