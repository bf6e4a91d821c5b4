//go:build redteam

package kv

import (
	"strings"
	"testing"
)

// TestRedteamJournalOutgrowsQuota: every change is journaled with the
// whole path of what it changed, and the journal counts toward no quota
// (kept 7 days even once synced). Deep in a tree of long names (which the
// kernel lets the sandbox make a level at a time, and which cost the
// quota only their names), each create or remove writes the whole path:
// a workspace with a quota of 4 MiB wrote far more than that to disk.
func TestRedteamJournalOutgrowsQuota(t *testing.T) {
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
	used, quota := s.Usage()
	start := s.LastSeq()
	for i := 0; i < 400; i++ {
		if _, err := s.Create(dir, "f", NewInode{Mode: S_IFREG | 0o644}); err != nil {
			t.Fatal(err)
		}
		if err := s.Unlink(dir, "f"); err != nil {
			t.Fatal(err)
		}
	}
	var journal int64
	if err := s.ReadJournal(start, func(r Record) bool {
		journal += int64(len(r.Path) + len(r.Path2))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("usage %d KiB of a %d KiB quota; 800 changes journaled %d MiB of paths", used>>10, quota>>10, journal>>20)
	if journal > quota {
		t.Errorf("the journal holds %d MiB for a workspace whose quota is %d MiB", journal>>20, quota>>20)
	}
}
