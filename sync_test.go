package computerfs

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/computerfs/computerfs/internal/s3test"
	"github.com/computerfs/computerfs/internal/testmount"
)

// bucketFiles lists and reads every object below prefix with the SDK.
func bucketFiles(t testing.TB, srv *s3test.Server, bucket, prefix string) map[string]string {
	t.Helper()
	c := srv.Client(t)
	out := map[string]string{}
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			g, err := c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: &bucket, Key: o.Key})
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(g.Body)
			g.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			out[strings.TrimPrefix(aws.ToString(o.Key), prefix)] = string(b)
		}
	}
	return out
}

// dirFiles reads every regular file below dir (on the mount).
func dirFiles(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameFiles(t testing.TB, bucket, ws map[string]string) {
	t.Helper()
	var diffs []string
	for k, v := range ws {
		if b, ok := bucket[k]; !ok {
			diffs = append(diffs, "missing in the bucket: "+k)
		} else if b != v {
			diffs = append(diffs, fmt.Sprintf("%s: bucket has %d bytes, workspace %d", k, len(b), len(v)))
		}
	}
	for k := range bucket {
		if _, ok := ws[k]; !ok {
			diffs = append(diffs, "only in the bucket: "+k)
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 0 {
		if len(diffs) > 20 {
			diffs = append(diffs[:20], fmt.Sprintf("... %d in all", len(diffs)))
		}
		t.Fatalf("bucket and workspace differ:\n%s", strings.Join(diffs, "\n"))
	}
}

func syncSpec(t testing.TB, srv *s3test.Server, bucket, debounce string) string {
	return writeSpec(t, fmt.Sprintf("sources:\n  - path: /data\n    s3: {bucket: %s, prefix: p/, endpoint: %q, path_style: true, write_back: true}\nsync:\n  debounce: %s\n",
		bucket, srv.Endpoint, debounce))
}

// TestSyncMounted: edits through the FUSE mount reach the bucket: a closed
// file at once (the debounce is an hour), an fsynced one too while it is
// still open, a rename with `computerfs sync`;
// status shows pending paths and conflicts; sync exits 1 on a conflict.
func TestSyncMounted(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	bucket := srv.NewBucket(t)
	for k, v := range map[string]string{"a": "v1 a", "d/b": "v1 b", "c": "v1 c"} {
		srv.Put(t, bucket, "p/"+k, []byte(v))
	}
	store := filepath.Join(t.TempDir(), "ws")
	m := testmount.Start(t, store, "--spec", syncSpec(t, srv, bucket, "1h"))
	bin := testmount.Binary(t)
	data := filepath.Join(m.Dir, "data")
	cli := workspaceCLI(t, bin, m)

	// Close after writing: uploaded without waiting for the debounce.
	if err := os.WriteFile(filepath.Join(data, "a"), []byte("closed a"), 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for bucketFiles(t, srv, bucket, "p/")["a"] != "closed a" {
		if time.Now().After(deadline) {
			t.Fatalf("a closed file was not uploaded:\n%s", m.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// fsync of a file still open: uploaded without waiting for the
	// debounce or the close.
	f, err := os.OpenFile(filepath.Join(data, "fsynced"), os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("fsynced, still open"); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(20 * time.Second)
	for bucketFiles(t, srv, bucket, "p/")["fsynced"] != "fsynced, still open" {
		if time.Now().After(deadline) {
			t.Fatalf("an fsynced file was not uploaded:\n%s", m.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	// A rename and a removal wait for the debounce; status shows them.
	if err := os.Rename(filepath.Join(data, "d/b"), filepath.Join(data, "e")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(data, "c")); err != nil {
		t.Fatal(err)
	}
	if out := cli(false, "status"); !strings.Contains(out, "3 pending") {
		t.Fatalf("status:\n%s", out)
	}
	out := cli(false, "sync")
	if !strings.Contains(out, "/data (s3): 1 uploaded, 2 deleted, 0 conflicts, 0 errors") {
		t.Fatalf("sync:\n%s", out)
	}
	sameFiles(t, bucketFiles(t, srv, bucket, "p/"), dirFiles(t, data))
	if out := cli(false, "status"); !strings.Contains(out, "0 pending") || !strings.Contains(out, "1 uploaded, 2 deleted") {
		t.Fatalf("status after sync:\n%s", out)
	}

	// A conflict: reported, exit 1, remote and local untouched, shown by
	// status until resolved.
	srv.Put(t, bucket, "p/e", []byte("theirs"))
	f, err = os.OpenFile(filepath.Join(data, "e"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(" mine") // still open: the debounce holds it
	out = cli(true, "sync")
	f.Close()
	if !strings.Contains(out, "conflict /data/e: changed at the remote") {
		t.Fatalf("sync with a conflict:\n%s", out)
	}
	if got := string(srv.Get(t, bucket, "p/e")); got != "theirs" {
		t.Fatalf("remote overwritten: %q", got)
	}
	if b, _ := os.ReadFile(filepath.Join(data, "e")); string(b) != "v1 b mine" {
		t.Fatalf("local changed: %q", b)
	}
	if out := cli(false, "status"); !strings.Contains(out, "conflict /data/e") {
		t.Fatalf("status:\n%s", out)
	}
	// Keep theirs: remove it here, sync, refresh.
	os.Remove(filepath.Join(data, "e"))
	cli(true, "sync") // still in conflict until the refresh brings it in
	cli(false, "refresh")
	cli(false, "sync")
	if out := cli(false, "status"); strings.Contains(out, "conflict") || !strings.Contains(out, "0 pending") {
		t.Fatalf("status after resolving:\n%s", out)
	}
	sameFiles(t, bucketFiles(t, srv, bucket, "p/"), dirFiles(t, data))
}

// TestSyncCrash: the daemon is killed (SIGKILL) at random points while it
// syncs 1,000 files; after each restart a sync finishes the work, with no
// conflict (a put that reached the bucket before the kill is recognised,
// not taken for a remote change), and the bucket matches the workspace.
func TestSyncCrash(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	bucket := srv.NewBucket(t)
	srv.Put(t, bucket, "p/seed", []byte("seed"))
	store := filepath.Join(t.TempDir(), "ws")
	spec := syncSpec(t, srv, bucket, "1h")
	m := testmount.Start(t, store, "--spec", spec)
	bin := testmount.Binary(t)
	data := filepath.Join(m.Dir, "data")
	rng := rand.New(rand.NewPCG(1, 2))
	n, rounds := 1000, 3
	if testing.Short() {
		n, rounds = 200, 2
	}
	start := time.Now()
	for round := range rounds {
		t.Logf("round %d at %v", round, time.Since(start))
		// Each round changes the workspace: new files, edits, renames,
		// deletions.
		for i := range n {
			p := filepath.Join(data, fmt.Sprintf("d%d/f%04d", i%10, i))
			switch {
			case round == 0 || rng.IntN(4) == 0:
				os.MkdirAll(filepath.Dir(p), 0o755)
				if err := os.WriteFile(p, fmt.Appendf(nil, "round %d file %d", round, i), 0o644); err != nil {
					t.Fatal(err)
				}
			case rng.IntN(8) == 0:
				os.Rename(p, p+".moved")
			case rng.IntN(8) == 0:
				os.Remove(p)
			}
		}
		// Sync, and kill the daemon somewhere in the middle.
		t.Logf("round %d: changed at %v", round, time.Since(start))
		cmd := exec.Command(bin, "sync", "-w", m.Dir)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
		m.Kill(t)
		cmd.Wait()
		m.Remount(t)
		t.Logf("round %d: remounted at %v", round, time.Since(start))
		out, err := exec.Command(bin, "sync", "-w", m.Dir).CombinedOutput()
		if err != nil {
			t.Fatalf("round %d: sync after a crash: %v\n%s", round, err, out)
		}
		if !strings.Contains(string(out), " 0 conflicts, 0 errors") {
			t.Fatalf("round %d: replay after a crash made conflicts:\n%s", round, out)
		}
		sameFiles(t, bucketFiles(t, srv, bucket, "p/"), dirFiles(t, data))
		t.Logf("round %d: %s (%v)", round, strings.SplitN(string(out), "\n", 2)[0], time.Since(start))
	}
}

// workspaceCLI returns a function that runs `bin ARGS -w MOUNT` against the
// mount m, fails the test unless it fails exactly when wantErr says, and
// returns its output.
func workspaceCLI(t *testing.T, bin string, m *testmount.Mount) func(wantErr bool, args ...string) string {
	return func(wantErr bool, args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, append(args, "-w", m.Dir)...).CombinedOutput()
		if (err != nil) != wantErr {
			t.Fatalf("computerfs %v: %v\n%s\ndaemon log:\n%s", args, err, out, m.Log())
		}
		return string(out)
	}
}
