package syncer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/computerfs/computerfs/internal/faultnet"
	"github.com/computerfs/computerfs/sources"
)

func (e *env) refresh() sources.SourceReport {
	e.t.Helper()
	r := &sources.Refresher{FS: e.fs, Spec: e.spec, Log: quiet()}
	rep, err := r.Run(context.Background())
	check(e.t, err)
	return rep.Sources[0]
}

func conflictPaths(cs []Conflict) string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Path+": "+c.Reason)
	}
	return fmt.Sprint(out)
}

func TestSyncConflicts(t *testing.T) {
	for _, mode := range both {
		t.Run(string(mode), func(t *testing.T) { testSyncConflicts(t, mode) })
	}
}

func testSyncConflicts(t *testing.T, mode Conditional) {
	e := newEnv(t, envOpts{mode: mode, objects: map[string]string{"edit": "v1", "gone": "v1", "fine": "v1"}})
	e.write("/s/edit", "mine")
	check(t, e.fs.Remove("/s/gone"))
	e.write("/s/made", "mine too")
	e.write("/s/fine", "fine here")
	// Behind the workspace's back:
	e.srv.Put(t, e.bucket, "p/edit", []byte("theirs"))
	e.srv.Put(t, e.bucket, "p/gone", []byte("theirs"))
	e.srv.Put(t, e.bucket, "p/made", []byte("theirs"))
	r := e.sync()
	want := "[/s/edit: changed at the remote since the workspace took it /s/gone: deleted here and changed at the remote /s/made: made here and exists at the remote]"
	if got := conflictPaths(r.Conflicts); got != want || fmt.Sprint(r.Uploaded) != "[/s/fine]" {
		t.Fatalf("sync: conflicts %s uploaded %v\nwant conflicts %s", got, r.Uploaded, want)
	}
	for k, v := range map[string]string{"edit": "theirs", "gone": "theirs", "made": "theirs", "fine": "fine here"} {
		if got := string(e.srv.Get(t, e.bucket, "p/"+k)); got != v {
			t.Errorf("remote %s = %q, want %q", k, got, v)
		}
	}
	for k, v := range map[string]string{"edit": "mine", "made": "mine too"} {
		if got, _ := e.fs.ReadFile("/s/" + k); string(got) != v {
			t.Errorf("local %s = %q, want %q", k, got, v)
		}
	}
	// The conflicts stay, in status and in later syncs, and survive a
	// restart; the cursor moved on.
	st := e.sy.Status()[0]
	if len(st.Conflicts) != 3 || st.Pending != 3 || st.Last.OK {
		t.Fatalf("status: %+v", st)
	}
	e.restart(envOpts{mode: mode})
	if r := e.sync(); len(r.Conflicts) != 3 || len(r.Uploaded)+len(r.Deleted) != 0 {
		t.Fatalf("sync after restart: %+v", r)
	}

	// Resolving. Keep theirs for gone: a refresh brings it in.
	rr := e.refresh()
	if fmt.Sprint(rr.Added) != "[/s/gone]" {
		t.Fatalf("refresh: %+v", rr)
	}
	// Keep theirs for made: delete it here, then refresh.
	check(t, e.fs.Remove("/s/made"))
	r = e.sync()
	rr = e.refresh()
	if fmt.Sprint(rr.Added) != "[/s/made]" {
		t.Fatalf("refresh: %+v (sync %+v)", rr, r)
	}
	// Keep mine for edit: move it aside, sync, refresh, move it back.
	check(t, e.fs.Rename("/s/edit", "/s/edit.mine"))
	e.sync()
	e.refresh()
	check(t, e.fs.Rename("/s/edit.mine", "/s/edit"))
	r = e.mustSync()
	if st := e.sy.Status()[0]; len(st.Conflicts) != 0 || st.Pending != 0 {
		t.Fatalf("status after resolving: %+v", st)
	}
	e.same()
	if got := string(e.srv.Get(t, e.bucket, "p/edit")); got != "mine" {
		t.Fatalf("edit = %q", got)
	}
	// A remote deletion of an edited file is a conflict as well.
	e.write("/s/fine", "again")
	_, err := e.srv.Client(t).DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: &e.bucket, Key: aws.String("p/fine")})
	check(t, err)
	r = e.sync()
	if got := conflictPaths(r.Conflicts); got != "[/s/fine: changed here and deleted at the remote]" {
		t.Fatalf("conflicts %s", got)
	}
}

// A put that reached the remote but whose confirmation was lost (a crash
// before the cursor moved, a cut connection) is found on the remote and
// not uploaded again.
func TestSyncReplay(t *testing.T) {
	for _, mode := range both {
		t.Run(string(mode), func(t *testing.T) {
			e := newEnv(t, envOpts{mode: mode, partSize: 5 << 20, objects: map[string]string{"a": "v1"}})
			e.write("/s/a", "changed")
			e.write("/s/new", "new")
			big := make([]byte, 11<<20)
			for i := range big {
				big[i] = byte(i * 7)
			}
			e.write("/s/big", string(big))
			// Every request gets through, but the answers are lost.
			lost := &lostTarget{Target: e.target}
			e.sy.srcs[0].Target = lost
			r := e.sync()
			if len(r.Errors) != 3 {
				t.Fatalf("sync with lost answers: %+v", r)
			}
			e.same()
			e.sy.srcs[0].Target = e.target
			puts := e.countPuts()
			r = e.mustSync()
			if fmt.Sprint(r.Uploaded) != "[/s/a /s/big /s/new]" || puts.Requests() != 0 && mode == Head {
				t.Fatalf("replay: %+v, %d puts", r, puts.Requests())
			}
			// Headers: one refused conditional put for each small file; a
			// multipart upload checks with HEAD first in both modes.
			if mode == Headers && puts.Requests() != 2 {
				t.Fatalf("replay sent %d puts, want 2 refused ones", puts.Requests())
			}
			e.same()
		})
	}
}

// lostTarget applies the changes and reports them failed.
type lostTarget struct{ Target }

func (l *lostTarget) Apply(ctx context.Context, c []Change) []Result {
	res := l.Target.Apply(ctx, c)
	for i := range res {
		res[i] = Result{Err: errors.New("answer lost")}
	}
	return res
}

// TestAutoMode: auto probes the server: versitygw honours If-None-Match
// (headers); a server that answers NotImplemented to it gets head.
func TestAutoMode(t *testing.T) {
	e := newEnv(t, envOpts{mode: Auto, objects: map[string]string{"a": "v1"}})
	if m := e.target.ModeName(); m != "auto" {
		t.Fatalf("mode before the probe: %s", m)
	}
	e.write("/s/a", "v2")
	e.mustSync()
	if m := e.target.ModeName(); m != "headers" {
		t.Fatalf("versitygw probed as %s", m)
	}
	if n := len(e.bucketFiles()); n != 1 {
		t.Fatalf("the probe object was left behind: %v", e.bucketFiles())
	}

	e2 := newEnv(t, envOpts{mode: Auto, objects: map[string]string{"a": "v1"}})
	e2.ft.Add(faultnet.MatchFunc(func(r *http.Request) bool { return r.Header.Get("If-None-Match") != "" }).
		StatusBody(501, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NotImplemented</Code><Message>no</Message></Error>`))
	e2.write("/s/a", "v2")
	e2.mustSync()
	if m := e2.target.ModeName(); m != "head" {
		t.Fatalf("a server without If-None-Match probed as %s", m)
	}
	e2.srv.Put(t, e2.bucket, "p/a", []byte("theirs"))
	e2.write("/s/a", "v3")
	if r := e2.sync(); len(r.Conflicts) != 1 {
		t.Fatalf("head mode after the probe: %+v", r)
	}
}
