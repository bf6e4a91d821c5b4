package kv

import (
	"strings"
	"testing"
)

// TestJournalDeepPathsWithinQuota (was TestRedteamJournalOutgrowsQuota):
// deep in a tree of long names (which the kernel lets the sandbox make a
// level at a time, and which cost the quota only their names), each
// create or remove used to journal the whole path, uncounted: a workspace
// with a quota of 4 MiB wrote 78 MiB of paths in 800 changes. Now a record
// holds at most MaxRecordPath of a path, the journal counts, and the
// creates stop with EDQUOT while the removes go on.
func TestJournalDeepPathsWithinQuota(t *testing.T) {
	opts := quietOptions()
	opts.Quota = 4 << 20
	s, err := Open(t.TempDir()+"/store", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	name := strings.Repeat("n", MaxNameLen)
	dir := uint64(RootIno)
	for i := 0; i < 400; i++ {
		a, err := s.Create(dir, name, NewInode{Mode: S_IFDIR | 0o755})
		if err != nil {
			t.Fatalf("level %d: %v", i, err)
		}
		dir = a.Ino
	}
	start := s.LastSeq()
	refused := 0
	for i := 0; i < 4000; i++ {
		if _, err := s.Create(dir, "f", NewInode{Mode: S_IFREG | 0o644}); err != nil {
			wantQuotaErr(t, "create", err)
			refused++
			continue
		}
		if err := s.Unlink(dir, "f"); err != nil {
			t.Fatalf("unlink %d: %v", i, err)
		}
	}
	var journal int64
	if err := s.ReadJournal(start, func(r Record) bool {
		journal += int64(len(r.Path) + len(r.Path2))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	u := s.UsageDetail()
	t.Logf("count %d KiB of a %d KiB quota (journal %d KiB); the changes journaled %d KiB of paths; %d creates refused",
		u.Used>>10, u.Quota>>10, u.Journal>>10, journal>>10, refused)
	if u.Used > quotaBound(u.Quota) || journal > u.Journal || refused == 0 {
		t.Errorf("the journal holds %d KiB of paths, counted %d KiB, for a workspace whose quota is %d KiB (%d refused)",
			journal>>10, u.Journal>>10, u.Quota>>10, refused)
	}
}
