package kv

import (
	"github.com/cockroachdb/pebble/v2"
)

// txn gathers one operation's writes: the attributes it changes, loaded
// once and written once, and everything else in one Pebble batch.
type txn struct {
	s     *Store
	b     *pebble.Batch
	attrs map[uint64]*Attr
	dirty []uint64
	// blobs of inodes the batch deletes: removed once it committed
	blobsGone []uint64
}

func (s *Store) newTxn() *txn {
	return &txn{s: s, b: s.db.NewBatch(), attrs: make(map[uint64]*Attr, 4)}
}

// attr returns the inode's attributes, loaded from the store the first time.
func (t *txn) attr(ino uint64) (*Attr, error) {
	if a, ok := t.attrs[ino]; ok {
		return a, nil
	}
	a, err := t.s.GetAttr(ino)
	if err != nil {
		return nil, err
	}
	t.attrs[ino] = &a
	return &a, nil
}

// dir is attr for an inode that must be a directory.
func (t *txn) dir(ino uint64) (*Attr, error) {
	a, err := t.attr(ino)
	if err != nil {
		return nil, err
	}
	if !a.IsDir() {
		return nil, ErrNotDir
	}
	return a, nil
}

// put adds a new inode's attributes.
func (t *txn) put(a *Attr) {
	t.attrs[a.Ino] = a
	t.touch(a.Ino)
}

// touch marks an inode's attributes as changed.
func (t *txn) touch(ino uint64) {
	for _, d := range t.dirty {
		if d == ino {
			return
		}
	}
	t.dirty = append(t.dirty, ino)
}

// forget drops an inode that the operation deleted.
func (t *txn) forget(ino uint64) {
	for i, d := range t.dirty {
		if d == ino {
			t.dirty = append(t.dirty[:i], t.dirty[i+1:]...)
			break
		}
	}
	delete(t.attrs, ino)
}

// commitRecord writes the changed attributes and commits the batch with
// its journal record.
func (t *txn) commitRecord(rec *Record, actor *Actor) error {
	return t.commitRecords([]*Record{rec}, actor)
}

// commitRecords is commitRecord for an operation of several records.
func (t *txn) commitRecords(recs []*Record, actor *Actor) error {
	for _, ino := range t.dirty {
		t.b.Set(attrKey(ino), t.attrs[ino].encode(), nil)
	}
	if err := t.s.commitRecords(t.b, recs, actor); err != nil {
		return err
	}
	for _, ino := range t.blobsGone {
		t.s.dropBlob(ino)
	}
	return nil
}

func (t *txn) close() { t.b.Close() }
