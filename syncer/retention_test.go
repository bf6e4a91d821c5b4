package syncer

import (
	"encoding/binary"
	"fmt"
	iofs "io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/wsfs"
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

// TestTrimLoop: the background loop trims the journal by itself (every
// TrimEvery), once the records are synced and older than the retention.
func TestTrimLoop(t *testing.T) {
	e := newEnv(t, envOpts{mode: Headers, debounce: 20 * time.Millisecond, retention: time.Nanosecond, trimEvery: 50 * time.Millisecond})
	e.sy.Start() // its first cycle trims at once: nothing is synced then
	for i := range 20 {
		e.write(fmt.Sprintf("/s/f%d", i), "x")
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		first, last, err := e.st.JournalSpan()
		check(t, err)
		if len(e.bucketFiles()) == 20 && first == last && last == e.st.LastSeq() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 20 s: %d objects, journal %d..%d of %d; want 20 objects and only the newest record", len(e.bucketFiles()), first, last, e.st.LastSeq())
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.same()
}

// recordBytes is the size of a journal record as the store keeps it: a
// 9-byte key and the value kv's Record.encode writes (version, op, varint
// time, uvarint ino, size, pid, uid, gid, then each string as uvarint
// length and bytes).
func recordBytes(r kv.Record) int {
	var buf [binary.MaxVarintLen64]byte
	n := 9 + 2 + binary.PutVarint(buf[:], r.Time)
	for _, v := range []uint64{r.Ino, r.Size, uint64(r.Actor.Pid), uint64(r.Actor.Uid), uint64(r.Actor.Gid)} {
		n += binary.PutUvarint(buf[:], v)
	}
	for _, s := range []string{r.Path, r.Path2, r.Actor.Comm, r.Actor.Sandbox, r.Actor.Entry, r.Actor.Request} {
		n += binary.PutUvarint(buf[:], uint64(len(s))) + len(s)
	}
	return n
}

// journalSize counts the journal's records and their bytes, and the bytes
// of their paths and actors' names (what a record holds beyond its fixed
// part).
func journalSize(t testing.TB, st *kv.Store) (records, bytes, names int) {
	t.Helper()
	check(t, st.ReadJournal(0, func(r kv.Record) bool {
		records++
		bytes += recordBytes(r)
		names += len(r.Path) + len(r.Path2) + len(r.Actor.Comm) + len(r.Actor.Sandbox) + len(r.Actor.Entry) + len(r.Actor.Request)
		return true
	}))
	return
}

// agentRound makes the changes of one round of an agent's work through fs
// (new files, edits, renames, removals, a directory) and returns how many.
func agentRound(t testing.TB, fs *wsfs.FS, round int) int {
	t.Helper()
	dir := fmt.Sprintf("/s/round%d", round)
	check(t, fs.MkdirAll(dir+"/src", 0o755))
	n := 2
	for i := range 40 {
		check(t, fs.WriteFile(fmt.Sprintf("%s/src/file%02d.go", dir, i), []byte(strings.Repeat("x", 100+i)), 0o644))
		n++
	}
	for i := range 20 {
		check(t, fs.WriteFile(fmt.Sprintf("%s/src/file%02d.go", dir, i), []byte("edited"), 0o644))
		n++
	}
	for i := 20; i < 30; i++ {
		check(t, fs.Rename(fmt.Sprintf("%s/src/file%02d.go", dir, i), fmt.Sprintf("%s/src/moved%02d.go", dir, i)))
		n++
	}
	for i := 30; i < 40; i++ {
		check(t, fs.Remove(fmt.Sprintf("%s/src/file%02d.go", dir, i)))
		n++
	}
	return n
}

// TestJournalGrowth measures what the journal costs per change and checks
// that it stays bounded: after each round of changes, a sync and a trim
// leave only the newest record, however many rounds went before. Run with
// -v for the figures.
func TestJournalGrowth(t *testing.T) {
	e := newEnv(t, envOpts{mode: Headers, debounce: time.Hour})
	// Changes as a process on the mount makes them: pid, uid, command name.
	fs := e.fs.As(kv.Actor{Pid: 4242, Uid: 1000, Gid: 1000, Comm: "python3"})
	for round := range 4 {
		changes := agentRound(t, fs, round)
		records, bytes, names := journalSize(t, e.st)
		if round == 0 {
			t.Logf("%d changes: %d records, %d bytes (%.1f a change, %.1f a record of which %.1f paths and names)",
				changes, records, bytes, float64(bytes)/float64(changes), float64(bytes)/float64(records), float64(names)/float64(records))
			// docs/journal.md's estimate: about 40 bytes plus the paths and names.
			if fixed := float64(bytes-names) / float64(records); fixed > 48 {
				t.Errorf("a record's fixed part is %.1f bytes, not about 40", fixed)
			}
		}
		if records < changes {
			t.Fatalf("round %d: %d changes made only %d records", round, changes, records)
		}
		e.mustSync()
		_, err := e.sy.Trim(time.Now().Add(8 * 24 * time.Hour)) // past the retention
		check(t, err)
		records, bytes, _ = journalSize(t, e.st)
		first, last, err := e.st.JournalSpan()
		check(t, err)
		if records != 1 || first != last || last != e.st.LastSeq() || bytes > 200 {
			t.Fatalf("round %d: after sync and trim the journal holds %d records (%d..%d, %d bytes), want only the newest", round, records, first, last, bytes)
		}
	}
	e.same()

	// On disk (uncompressed tables): the same round in a store with a
	// journal and in one without, both flushed; the difference is the
	// journal's.
	size := func(journal bool) (tables int64, changes int) {
		dir := t.TempDir()
		st, err := kv.Open(dir, kv.Options{Logger: quiet(), NoJournal: !journal})
		check(t, err)
		defer st.Close()
		changes = agentRound(t, wsfs.New(st, wsfs.Owner{}).As(kv.Actor{Pid: 4242, Uid: 1000, Gid: 1000, Comm: "python3"}), 0)
		check(t, st.WriteTables())
		check(t, filepath.WalkDir(dir, func(p string, d iofs.DirEntry, err error) error {
			if err == nil && strings.HasSuffix(p, ".sst") {
				info, err := d.Info()
				if err != nil {
					return err
				}
				tables += info.Size()
			}
			return err
		}))
		return tables, changes
	}
	with, changes := size(true)
	without, _ := size(false)
	t.Logf("tables on disk: %d bytes with the journal, %d without: %.1f bytes a change", with, without, float64(with-without)/float64(changes))
}
