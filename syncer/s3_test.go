package syncer

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

var both = []Conditional{Headers, Head}

func TestSyncS3(t *testing.T) {
	for _, mode := range both {
		t.Run(string(mode), func(t *testing.T) { testSyncS3(t, mode) })
	}
}

func testSyncS3(t *testing.T, mode Conditional) {
	e := newEnv(t, envOpts{mode: mode, lazy: true, objects: map[string]string{
		"a": "v1 a", "dir/b": "v1 b", "c": "v1 c", "keep": "v1 keep", "lazy/old": "never fetched", "tree/x/y": "y", "tree/z": "z"}})
	e.write("/s/a", "local a")
	e.write("/s/new", "new file")
	e.write("/s/n/m/deep", "nested")
	check(t, e.fs.Remove("/s/c"))
	check(t, e.fs.MkdirAll("/s/e", 0o755))
	check(t, e.fs.Rename("/s/dir/b", "/s/e/b"))
	check(t, e.fs.Rename("/s/lazy/old", "/s/lazy/new")) // content never fetched
	check(t, e.fs.Rename("/s/tree", "/s/moved"))        // a directory
	check(t, e.fs.MkdirAll("/s/empty", 0o755))          // S3 has no directories: nothing to do
	r := e.mustSync()
	got := fmt.Sprintf("uploaded %v deleted %v", r.Uploaded, r.Deleted)
	want := "uploaded [/s/a /s/e/b /s/lazy/new /s/moved/x/y /s/moved/z /s/n/m/deep /s/new] deleted [/s/c /s/dir/b /s/lazy/old /s/tree/x/y /s/tree/z]"
	if got != want {
		t.Fatalf("sync:\n%s\nwant\n%s", got, want)
	}
	e.same()
	// A second sync has nothing to do.
	puts := e.countPuts()
	r = e.mustSync()
	if len(r.Uploaded)+len(r.Deleted) != 0 || puts.Requests() != 0 {
		t.Fatalf("second sync: %+v, %d puts", r, puts.Requests())
	}
	// Origins and manifest now name the uploaded versions: the file is in
	// agreement, and a refresh sees nothing to do.
	a, err := e.fs.Lstat("/s/a")
	check(t, err)
	o, err := e.st.Origin(a.Ino)
	check(t, err)
	head, err := e.srv.Client(t).HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: &e.bucket, Key: aws.String("p/a")})
	check(t, err)
	if o.Key != "p/a" || quote(o.ID) != aws.ToString(head.ETag) || o.Ctime != a.Ctime {
		t.Fatalf("origin %+v, remote ETag %s", o, aws.ToString(head.ETag))
	}
	// Changes after a sync: overwrite, chmod only (uploaded again: the
	// ctime moved), delete everything.
	e.write("/s/new", "newer")
	r = e.mustSync()
	if fmt.Sprint(r.Uploaded) != "[/s/new]" {
		t.Fatalf("sync after an edit: %+v", r)
	}
	e.same()
	check(t, e.fs.RemoveAll("/s/moved"))
	check(t, e.fs.Rename("/s/keep", "/s/n/keep"))
	e.mustSync()
	e.same()
}

func TestSyncMultipart(t *testing.T) {
	for _, mode := range both {
		t.Run(string(mode), func(t *testing.T) {
			e := newEnv(t, envOpts{mode: mode, partSize: 5 << 20, objects: map[string]string{"big": "small at first"}})
			big := strings.Repeat("0123456789abcdef", (12<<20)/16+3) // 12 MiB + 48 bytes: 3 parts
			e.write("/s/big", big)
			e.write("/s/big2", big[:5<<20+1])
			r := e.mustSync()
			if fmt.Sprint(r.Uploaded) != "[/s/big /s/big2]" {
				t.Fatalf("sync: %+v", r)
			}
			e.same()
			head, err := e.srv.Client(t).HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: &e.bucket, Key: aws.String("p/big")})
			check(t, err)
			if !strings.HasSuffix(aws.ToString(head.ETag), `-3"`) {
				t.Fatalf("ETag %s: not a 3-part upload", aws.ToString(head.ETag))
			}
			// Changed behind the workspace's back: a conflict, for parts too.
			e.write("/s/big", big+"more")
			e.srv.Put(t, e.bucket, "p/big", []byte("theirs"))
			r = e.sync()
			if len(r.Conflicts) != 1 || r.Conflicts[0].Path != "/s/big" {
				t.Fatalf("sync: %+v", r)
			}
			if got := string(e.srv.Get(t, e.bucket, "p/big")); got != "theirs" {
				t.Fatalf("remote overwritten: %q", short(got))
			}
		})
	}
}

// A change of attributes alone uploads nothing: the content's MD5 is the
// ETag the remote has.
func TestSyncAttrsOnly(t *testing.T) {
	e := newEnv(t, envOpts{mode: Headers, objects: map[string]string{"a": "v1"}})
	e.write("/s/b", "new")
	e.mustSync()
	check(t, e.fs.Chmod("/s/a", 0o600))
	check(t, e.fs.Chmod("/s/b", 0o600))
	puts := e.countPuts()
	r := e.mustSync()
	if len(r.Uploaded) != 0 || puts.Requests() != 0 {
		t.Fatalf("sync after chmod: %+v, %d puts", r, puts.Requests())
	}
	// ... and the files are in agreement again.
	for _, p := range []string{"a", "b"} {
		a, err := e.fs.Lstat("/s/" + p)
		check(t, err)
		o, err := e.st.Origin(a.Ino)
		check(t, err)
		if o.Ctime != a.Ctime {
			t.Fatalf("%s: origin ctime %d, file %d", p, o.Ctime, a.Ctime)
		}
	}
	e.same()
}
