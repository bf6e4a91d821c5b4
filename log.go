package computerfs

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/spec"
)

// LogEntry is one journal record, as `computerfs log` shows it.
type LogEntry struct {
	Seq   uint64    `json:"seq"`
	Time  time.Time `json:"time"`
	Op    string    `json:"op"`
	Ino   uint64    `json:"ino"`
	Path  string    `json:"path"`
	Path2 string    `json:"path2,omitempty"` // a rename's new path; an xattr's name
	Size  uint64    `json:"size"`
	Actor kv.Actor  `json:"actor"`
	// PathCut (Path2Cut): Path (Path2) is the nearest ancestor of the
	// path, which was too long for the record (kv.MaxRecordPath) or cut
	// short past the workspace's quota.
	PathCut  bool `json:"path_cut,omitempty"`
	Path2Cut bool `json:"path2_cut,omitempty"`
}

func (e LogEntry) String() string {
	r := kv.Record{Seq: e.Seq, Op: opByName[e.Op], Path: e.Path, Path2: e.Path2, Size: e.Size, Actor: e.Actor, PathCut: e.PathCut, Path2Cut: e.Path2Cut}
	return e.Time.UTC().Format("2006-01-02T15:04:05.000Z") + " " + r.String()
}

var opByName = func() map[string]kv.JournalOp {
	m := map[string]kv.JournalOp{}
	for op := kv.JCreate; op <= kv.JRollback; op++ {
		m[op.String()] = op
	}
	return m
}()

// LogQuery selects journal records.
type LogQuery struct {
	After uint64    // records after this sequence number
	Since time.Time // records at or after this time
	Path  string    // records whose path (or new path) is this path or under it
	Limit int       // at most this many (0: 1000)
	// Exclude leaves out the records whose path a glob of it matches or
	// lies under (spec.MatchPath: "/repo/.git/**", "*.lock"); a rename
	// only when its new path is left out too. At most MaxLogExcludes.
	Exclude []string
}

const maxLogLimit = 10000

// MaxLogExcludes bounds LogQuery.Exclude: globs, each at most 1024 bytes.
const MaxLogExcludes = 64

func (q LogQuery) checkExclude() error {
	if len(q.Exclude) > MaxLogExcludes {
		return fmt.Errorf("exclude: %d patterns (at most %d)", len(q.Exclude), MaxLogExcludes)
	}
	for _, g := range q.Exclude {
		if len(g) > 1024 {
			return fmt.Errorf("exclude: a pattern of %d bytes (at most 1024)", len(g))
		}
		if err := spec.CheckGlob(g); err != nil {
			return fmt.Errorf("exclude: %w", err)
		}
	}
	return nil
}

// excluded says whether a glob of q.Exclude matches p.
func (q LogQuery) excluded(p string) bool {
	for _, g := range q.Exclude {
		if spec.MatchPath(g, p) {
			return true
		}
	}
	return false
}

// ReadLog returns the journal records that q selects, oldest first.
func ReadLog(st *kv.Store, q LogQuery) ([]LogEntry, error) {
	if q.Limit <= 0 {
		q.Limit = 1000
	}
	q.Limit = min(q.Limit, maxLogLimit)
	if err := q.checkExclude(); err != nil {
		return nil, err
	}
	prefix := strings.TrimSuffix(q.Path, "/")
	under := func(p string, cut bool) bool {
		// A cut path stands for something at or under it.
		return p == prefix || strings.HasPrefix(p, prefix+"/") ||
			cut && (p == "/" || strings.HasPrefix(prefix, p+"/"))
	}
	out := []LogEntry{}
	err := st.ReadJournal(q.After, func(r kv.Record) bool {
		t := time.Unix(0, r.Time)
		if !q.Since.IsZero() && t.Before(q.Since) {
			return true
		}
		if q.Path != "" && !under(r.Path, r.PathCut) && !(r.Op == kv.JRename && under(r.Path2, r.Path2Cut)) {
			return true
		}
		if len(q.Exclude) > 0 && q.excluded(r.Path) && (r.Op != kv.JRename || q.excluded(r.Path2)) {
			return true
		}
		out = append(out, LogEntry{Seq: r.Seq, Time: t, Op: r.Op.String(), Ino: r.Ino, Path: r.Path, Path2: r.Path2, Size: r.Size, Actor: r.Actor,
			PathCut: r.PathCut, Path2Cut: r.Path2Cut})
		return len(out) < q.Limit
	})
	return out, err
}

func (q LogQuery) values() url.Values {
	v := url.Values{}
	v.Set("after", strconv.FormatUint(q.After, 10))
	if !q.Since.IsZero() {
		v.Set("since", q.Since.Format(time.RFC3339Nano))
	}
	if q.Path != "" {
		v.Set("path", q.Path)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	for _, g := range q.Exclude {
		v.Add("exclude", g)
	}
	return v
}

func parseLogQuery(v url.Values) (LogQuery, error) {
	var q LogQuery
	var err error
	if s := v.Get("after"); s != "" {
		if q.After, err = strconv.ParseUint(s, 10, 64); err != nil {
			return q, fmt.Errorf("after: %w", err)
		}
	}
	if s := v.Get("since"); s != "" {
		if q.Since, err = time.Parse(time.RFC3339Nano, s); err != nil {
			return q, fmt.Errorf("since: %w", err)
		}
	}
	if s := v.Get("limit"); s != "" {
		if q.Limit, err = strconv.Atoi(s); err != nil {
			return q, fmt.Errorf("limit: %w", err)
		}
	}
	q.Path = v.Get("path")
	q.Exclude = v["exclude"]
	return q, q.checkExclude()
}

func (w *Workspace) serveLog(rw http.ResponseWriter, r *http.Request) {
	q, err := parseLogQuery(r.URL.Query())
	if err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	entries, err := ReadLog(w.Store, q)
	if err != nil {
		http.Error(rw, err.Error(), http.StatusInternalServerError)
		return
	}
	writeJSON(rw, entries)
}

// Log asks the daemon for journal records.
func (c *Client) Log(ctx context.Context, q LogQuery) ([]LogEntry, error) {
	var out []LogEntry
	return out, c.call(ctx, http.MethodGet, "/v1/log?"+q.values().Encode(), &out)
}

// ParseSince reads a --since value: a sequence number ("120"), a duration
// back from now ("10m") or a time (RFC 3339).
func ParseSince(s string, now time.Time) (LogQuery, error) {
	var q LogQuery
	if n, err := strconv.ParseUint(s, 10, 64); err == nil {
		q.After = max(n, 1) - 1
		return q, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		q.Since = now.Add(-d)
		return q, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		q.Since = t
		return q, nil
	}
	return q, fmt.Errorf("--since %q: want a sequence number, a duration (10m) or a time (RFC 3339)", s)
}
