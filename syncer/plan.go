package syncer

import (
	"path"
	"sort"
	"strings"
	"time"

	"github.com/computerfs/computerfs/kv"
)

// The pure part of a pass: which paths are pending, which are ready, what
// each needs, and how far the cursor may move. No I/O here, so it is
// tested with tables (testdata/*.txt).

// Touch is a path (relative to the source's directory, "" for the
// directory itself) that journal records after the cursor name.
type Touch struct {
	Rel   string
	First uint64 // sequence number of the first record naming it
	Time  int64  // time of the newest record naming it (ns)
}

// Touches returns the paths below root that recs name, by relative path.
// Records for other places, and unlinked files ("(inode N, unlinked)"),
// are left out.
func Touches(root string, recs []kv.Record) map[string]*Touch {
	out := map[string]*Touch{}
	add := func(rel string, r *kv.Record) {
		t := out[rel]
		if t == nil {
			out[rel] = &Touch{Rel: rel, First: r.Seq, Time: r.Time}
			return
		}
		t.First = min(t.First, r.Seq)
		t.Time = max(t.Time, r.Time)
	}
	for i := range recs {
		r := &recs[i]
		if rel, ok := touchedRel(root, r.Path, r.PathCut); ok {
			add(rel, r)
		}
		if rel, ok := touchedRel(root, r.Path2, r.Path2Cut); ok && (r.Path2 != "" || r.Path2Cut) {
			add(rel, r)
		}
	}
	return out
}

// touchedRel returns the path relative to root that a record's path p
// names, if it is root or below it. A cut path (kv.Record.PathCut) is the
// nearest ancestor of what changed: when it is root or above it, the
// change may be anywhere in root ("").
func touchedRel(root, p string, cut bool) (string, bool) {
	if rel, ok := relPath(root, p); ok {
		return rel, true
	}
	if cut && strings.HasPrefix(p, "/") {
		if _, ok := relPath(p, root); ok {
			return "", true
		}
	}
	return "", false
}

// relPath returns p relative to root, if p is root or below it.
func relPath(root, p string) (string, bool) {
	if !strings.HasPrefix(p, "/") {
		return "", false
	}
	p = path.Clean(p) // journal paths are clean; be sure
	root = strings.TrimSuffix(root, "/")
	switch {
	case p == root || root == "" && p == "/":
		return "", true
	case strings.HasPrefix(p, root+"/"):
		return p[len(root)+1:], true
	}
	return "", false
}

// Ready tells whether a touched path may be written back now: its last
// change is older than the debounce, or the file was closed or fsynced
// (at closed, 0 for never) after its last change.
func Ready(t *Touch, now time.Time, debounce time.Duration, closed int64) bool {
	return now.UnixNano()-t.Time >= int64(debounce) || closed >= t.Time
}

// Advance returns the new cursor: last when every pending path is done,
// else just before the first record of the earliest path that is not.
func Advance(cursor, last uint64, notDone []uint64) uint64 {
	next := last
	for _, first := range notDone {
		if first > cursor && first-1 < next {
			next = first - 1
		}
	}
	return max(next, cursor)
}

// File is what the store holds at a pending path now.
type File struct {
	Exists  bool // a regular file is there
	Ino     uint64
	Size    int64
	Ctime   int64
	Origin  *kv.Origin // its origin, if it has one from this source
	Version string     // the manifest: the version the remote last had ("" none)
	// Conflict: the path was left in conflict by an earlier pass.
	Conflict bool
}

// Action is what a pending path needs.
type Action int

// The actions.
const (
	Nothing Action = iota // in agreement with the remote
	Put                   // upload, conditional on File.Version
	Delete                // delete, conditional on File.Version
	Recheck               // in conflict, absent here and unknown there: ask the remote
)

var actionNames = [...]string{"nothing", "put", "delete", "recheck"}

func (a Action) String() string { return actionNames[a] }

// Decide says what the path whose remote name is key needs.
func Decide(key string, f File) Action {
	switch {
	case f.Exists:
		o := f.Origin
		if o != nil && o.Key == key && o.Ctime == f.Ctime && o.ID == f.Version && f.Version != "" {
			return Nothing
		}
		return Put
	case f.Version != "":
		return Delete
	case f.Conflict:
		return Recheck
	}
	return Nothing
}

// sortedRels returns the keys of m in order.
func sortedRels[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
