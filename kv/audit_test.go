package kv

import "testing"

func TestAuditIDsSurviveReopen(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	for want := uint64(1); want <= 3; want++ {
		id, err := s.NewAuditID()
		if err != nil || id != want {
			t.Fatalf("id %d, %v; want %d", id, err, want)
		}
		if err := s.PutAudit(&AuditRecord{ID: id, Tool: "read", Args: `{"path":"a"}`}); err != nil {
			t.Fatal(err)
		}
	}
	// A record is rewritten in place when its call ends.
	if err := s.PutAudit(&AuditRecord{ID: 2, Tool: "read", Done: true, Result: "ok"}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutAudit(&AuditRecord{}); err == nil {
		t.Fatal("a record without an id was written")
	}
	s.Close()
	s = openStore(t, dir)
	defer s.Close()
	if id, _ := s.NewAuditID(); id != 4 {
		t.Fatalf("after reopen: id %d, want 4", id)
	}
	var got []AuditRecord
	if err := s.ReadAudit(1, func(r AuditRecord) bool { got = append(got, r); return true }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != 2 || !got[0].Done || got[0].Result != "ok" || got[1].ID != 3 || got[1].Args != `{"path":"a"}` {
		t.Fatalf("records: %+v", got)
	}
}
