package kv

import (
	"encoding/binary"
	"encoding/json"
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// The audit: every call of an agent tool leaves a record keyed 'A' id,
// ids counting from 1 in the order calls start. A call's record is written
// when it starts (Done false) and rewritten when it ends, so a call that a
// crash interrupted is still on record. The store does not interpret the
// record beyond its id: the tools layer (package tools) decides what goes
// in it.

// AuditRecord is one tool call.
type AuditRecord struct {
	ID    uint64 `json:"id"`
	Tool  string `json:"tool"`
	Args  string `json:"args"`  // the arguments as JSON, large values as size and hash
	Start int64  `json:"start"` // ns since the epoch
	Done  bool   `json:"done"`
	// The rest is known once the call has ended.
	DurationNs int64  `json:"duration_ns,omitempty"`
	Result     string `json:"result,omitempty"` // a summary
	Error      string `json:"error,omitempty"`
	Refused    string `json:"refused,omitempty"` // the policy rule that refused the call
	Backend    string `json:"backend,omitempty"` // exec's backend
	// The journal records the call caused: Journal of them, numbered
	// JournalFirst to JournalLast (other actors' records may lie between).
	JournalFirst uint64 `json:"journal_first,omitempty"`
	JournalLast  uint64 `json:"journal_last,omitempty"`
	Journal      int    `json:"journal,omitempty"`
	// Actor is who the journal names as the author of the call's changes.
	Actor Actor `json:"actor"`
	// Checkpoint is the checkpoint taken before the call (the policy's
	// checkpoint: each-call), "" if none.
	Checkpoint string `json:"checkpoint,omitempty"`
}

const auditVersion = 1

// auditState is the part of Store that numbers audit records.
type auditState struct {
	auditOnce sync.Once
	auditMu   sync.Mutex
	auditNext uint64
	auditErr  error
	// auditPutMu orders PutAudit's read of a record's old size and its
	// write (a call's two writes of its record never overlap, but be sure).
	auditPutMu sync.Mutex
}

func auditKey(id uint64) []byte { return binary.BigEndian.AppendUint64([]byte{pfxAudit}, id) }

func (s *Store) loadAudit() {
	s.auditNext = 1
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{pfxAudit}, UpperBound: []byte{pfxAudit + 1}})
	if err != nil {
		s.auditErr = err
		return
	}
	if it.Last() {
		s.auditNext = binary.BigEndian.Uint64(it.Key()[1:]) + 1
	}
	s.auditErr = it.Close()
}

// NewAuditID returns the id of a new audit record, never given before in
// this store.
func (s *Store) NewAuditID() (uint64, error) {
	s.enter()
	defer s.leave()
	s.auditOnce.Do(s.loadAudit)
	if s.auditErr != nil {
		return 0, s.auditErr
	}
	s.auditMu.Lock()
	defer s.auditMu.Unlock()
	id := s.auditNext
	s.auditNext++
	return id, nil
}

// PutAudit writes (or rewrites) the record r.ID, which NewAuditID gave.
// The audit's records count in the usage (usage.go): a new record that
// would take the count past the quota and its grace (QuotaGrace) fails
// with ErrQuota, and the call it is for must not run; a record rewritten
// (the end of a call that ran) always goes in. The caller keeps records
// small past the quota (AuditRoom).
func (s *Store) PutAudit(r *AuditRecord) error {
	s.enter()
	defer s.leave()
	if r.ID == 0 {
		return ErrInvalid
	}
	js, err := json.Marshal(r)
	if err != nil {
		return err
	}
	s.auditPutMu.Lock() // the old record's size and the new one's
	defer s.auditPutMu.Unlock()
	key := auditKey(r.ID)
	val := append([]byte{auditVersion}, js...)
	cost := recordBytes(len(key), len(val))
	old, err := s.valueLen(key)
	switch {
	case err == nil:
		cost -= recordBytes(len(key), old)
	case err != ErrNotFound:
		return err
	default:
		if quota := s.quota.Load(); quota > 0 {
			if u := s.usageNow(); u.total()+cost > quota+QuotaGrace(quota) {
				return s.quotaError(u, quota, "no room for the audit record of a tool call")
			}
		}
	}
	b := s.db.NewBatch()
	defer b.Close()
	b.Set(key, val, nil)
	s.accountTo(b, keyAuditUsage, cost)
	return s.commit(b)
}

// AuditRoom tells how a new audit record of cost bytes fits: within the
// quota (full), past it but within its grace (the caller keeps the record
// short), or not at all (PutAudit would refuse it).
func (s *Store) AuditRoom(cost int64) (full, fits bool) {
	s.enter()
	defer s.leave()
	quota := s.quota.Load()
	if quota <= 0 {
		return true, true
	}
	used := s.usageNow().total() + recordBytes(9, int(cost))
	return used <= quota, used <= quota+QuotaGrace(quota)
}

// ReadAudit calls fn for the records after id, in id order, until fn
// returns false.
func (s *Store) ReadAudit(after uint64, fn func(AuditRecord) bool) error {
	s.enter()
	defer s.leave()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: auditKey(after + 1), UpperBound: []byte{pfxAudit + 1}})
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		id := binary.BigEndian.Uint64(it.Key()[1:])
		v := it.Value()
		var r AuditRecord
		if len(v) < 1 || v[0] != auditVersion || json.Unmarshal(v[1:], &r) != nil || r.ID != id {
			it.Close()
			return corrupt("audit record %d: %q", id, v)
		}
		if !fn(r) {
			break
		}
	}
	return it.Close()
}
