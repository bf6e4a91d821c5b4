package computerfs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/computerfs/computerfs/fs"
	"github.com/computerfs/computerfs/hibernate"
	"github.com/computerfs/computerfs/internal/s3test"
	"github.com/computerfs/computerfs/internal/testmount"
	"github.com/computerfs/computerfs/kv"
)

// cfs runs the computerfs binary with the server's credentials and
// returns its stdout, stderr and error.
func cfs(t *testing.T, srv *s3test.Server, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(testmount.Binary(t), args...)
	cmd.Env = append(os.Environ(), srv.Env()...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// mountPoint returns a new mount point that is unmounted, if still
// mounted, when the test ends.
func mountPoint(t *testing.T) string {
	t.Helper()
	mp := testmount.PublicDir(t, "computerfs-hib-")
	t.Cleanup(func() {
		if ok, _ := fs.IsMounted(mp); ok {
			if out, err := exec.Command(testmount.Binary(t), "unmount", mp).CombinedOutput(); err != nil {
				syscall.Unmount(mp, syscall.MNT_DETACH)
				t.Errorf("unmount %s: %v\n%s", mp, err, out)
			}
		}
	})
	return mp
}

func mustRun(t *testing.T, srv *s3test.Server, args ...string) string {
	t.Helper()
	out, errs, err := cfs(t, srv, args...)
	if err != nil {
		t.Fatalf("computerfs %s: %v\n%s%s", strings.Join(args, " "), err, out, errs)
	}
	return out
}

// TestHibernateResume: two hosts (two store directories) and one bucket.
// A workspace hibernated on one resumes on the other with its files,
// blobs, journal and sync cursors; a resume elsewhere is fenced while the
// lease is held; a hibernate that failed is finished by running it again.
func TestHibernateResume(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	url := "s3://" + bucket + "/ws/one"
	hosts := t.TempDir()
	storeA := filepath.Join(hosts, "a")

	// A sync cursor, as the syncer keeps it in the store's meta.
	st, err := kv.Open(storeA, kv.Options{Ballast: -1, MinFree: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CommitSync(nil, map[string][]byte{"sync/test-cursor": []byte("42")}, nil); err != nil {
		t.Fatal(err)
	}
	st.Close()

	mpA := mountPoint(t)
	mustRun(t, srv, "mount", "--background", "--no-sandbox", "--store", storeA, mpA)
	big := bytes.Repeat([]byte("0123456789abcdef"), 3<<16) // 3 MiB: a blob
	if err := os.WriteFile(filepath.Join(mpA, "hello.txt"), []byte("hello from A\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mpA, "big.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	if blobs, _ := os.ReadDir(filepath.Join(storeA, "blobs")); len(blobs) == 0 {
		t.Fatal("no blob in the store: the test would not cover blobs")
	}

	// The server is down: the hibernate fails after the unmount, the
	// store stays; run again, it finishes.
	srv.Stop()
	if _, errs, err := cfs(t, srv, "hibernate", "-w", mpA, "--to", url, "--endpoint", srv.Endpoint); err == nil {
		t.Fatal("hibernate succeeded with the server down")
	} else if !strings.Contains(errs, "127.0.0.1") {
		t.Logf("hibernate with the server down: %s", errs)
	}
	if ok, _ := kv.IsStore(storeA); !ok {
		t.Fatal("a failed hibernate removed the store")
	}
	srv.Restart(t)
	out := mustRun(t, srv, "hibernate", "--store", storeA, "--to", url, "--endpoint", srv.Endpoint)
	t.Logf("hibernate: %s", out)
	if _, err := os.Stat(storeA); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the local store is still there: %v", err)
	}

	// Host B resumes it, and writes.
	storeB, mpB := filepath.Join(hosts, "b"), mountPoint(t)
	mustRun(t, srv, "resume", url, "--endpoint", srv.Endpoint, "--store", storeB, "--lease-ttl", "6s", "--background", "--no-sandbox", mpB)
	if b, err := os.ReadFile(filepath.Join(mpB, "hello.txt")); err != nil || string(b) != "hello from A\n" {
		t.Fatalf("hello.txt on B: %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(mpB, "big.bin")); err != nil || !bytes.Equal(b, big) {
		t.Fatalf("big.bin on B: %d bytes, %v", len(b), err)
	}
	if err := os.WriteFile(filepath.Join(mpB, "b.txt"), []byte("from B\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	// Host C is fenced while B holds it, and nothing is left at its store;
	// B's daemon renews the lease (it would have expired by now).
	time.Sleep(8 * time.Second)
	storeC, mpC := filepath.Join(hosts, "c"), mountPoint(t)
	_, errs, err := cfs(t, srv, "resume", url, "--endpoint", srv.Endpoint, "--store", storeC, "--background", "--no-sandbox", mpC)
	if err == nil || !strings.Contains(errs, "held by host") {
		t.Fatalf("resume on C while B holds it: %v\n%s", err, errs)
	}
	if _, err := os.Stat(storeC); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused resume left %s: %v", storeC, err)
	}

	// B hibernates (to where it resumed from, incrementally); C resumes.
	out = mustRun(t, srv, "hibernate", "-w", mpB)
	t.Logf("hibernate on B: %s", out)
	mustRun(t, srv, "resume", url, "--endpoint", srv.Endpoint, "--store", storeC, "--background", "--no-sandbox", mpC)
	for name, want := range map[string]string{"hello.txt": "hello from A\n", "b.txt": "from B\n"} {
		if b, err := os.ReadFile(filepath.Join(mpC, name)); err != nil || string(b) != want {
			t.Fatalf("%s on C: %q, %v", name, b, err)
		}
	}
	if err := os.WriteFile(filepath.Join(mpC, "c.txt"), []byte("from C\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// C hibernates and keeps its copy: a resume into another store of this
	// host is refused (the two would share an agent), and nothing is left.
	mustRun(t, srv, "hibernate", "-w", mpC, "--keep-local")
	storeD := filepath.Join(hosts, "d")
	if _, errs, err := cfs(t, srv, "resume", url, "--endpoint", srv.Endpoint, "--store", storeD, "--no-sandbox", mountPoint(t)); err == nil || !strings.Contains(errs, "is the agent of the store") {
		t.Fatalf("resume beside the kept copy: %v\n%s", err, errs)
	}
	if _, err := os.Stat(storeD); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused resume left %s: %v", storeD, err)
	}
	// The kept copy resumes as it is, without a download.
	_, errs, err = cfs(t, srv, "resume", url, "--endpoint", srv.Endpoint, "--store", storeC, "--background", "--no-sandbox", mpC)
	if err != nil {
		t.Fatalf("resume of the kept copy: %v\n%s", err, errs)
	}
	if b, err := os.ReadFile(filepath.Join(mpC, "c.txt")); err != nil || string(b) != "from C\n" {
		t.Fatalf("c.txt on C again: %q, %v", b, err)
	}
	mustRun(t, srv, "unmount", mpC)

	// C's store continues the journal from A and B, and keeps the cursor.
	st, err = kv.Open(storeC, kv.Options{Ballast: -1, MinFree: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if v, err := st.GetMeta("sync/test-cursor"); err != nil || string(v) != "42" {
		t.Fatalf("sync cursor on C: %q, %v", v, err)
	}
	var paths []string
	var last uint64
	err = st.ReadJournal(0, func(r kv.Record) bool {
		if r.Seq <= last {
			t.Errorf("journal goes back: %d after %d", r.Seq, last)
		}
		last = r.Seq
		paths = append(paths, r.Path)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(paths, " ")
	for _, p := range []string{"/hello.txt", "/big.bin", "/b.txt", "/c.txt"} {
		if !strings.Contains(joined, p) {
			t.Fatalf("the journal has no record of %s: %s", p, joined)
		}
	}
	if strings.Index(joined, "/hello.txt") > strings.Index(joined, "/b.txt") || strings.Index(joined, "/b.txt") > strings.Index(joined, "/c.txt") {
		t.Fatalf("the journal is out of order: %s", joined)
	}
}

// TestResumeRefusesDamage: the Go API refuses an image with a damaged
// object and leaves nothing at the store.
func TestResumeRefusesDamage(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	dir := t.TempDir()
	store := filepath.Join(dir, "a")
	st, err := kv.Open(store, kv.Options{Ballast: -1, MinFree: -1})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	where := Where{URL: "s3://" + bucket + "/x", Endpoint: srv.Endpoint}
	if _, err := Hibernate(context.Background(), HibernateOptions{Store: store, To: where, KeepLocal: true}); err != nil {
		t.Fatal(err)
	}
	m := srv.Get(t, bucket, "x/manifest.json")
	// Another version, signed (as a later computerfs of this host would).
	key, err := hibernate.LoadKey(hibernate.KeyFile(""))
	if err != nil {
		t.Fatal(err)
	}
	loc, _ := where.location()
	loc.Region = srv.Region
	c, err := hibernate.NewClient(context.Background(), loc, nil)
	if err != nil {
		t.Fatal(err)
	}
	v2 := bytes.Replace(m, []byte(`"version":1`), []byte(`"version":2`), 1)
	if _, err := c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: &bucket, Key: aws.String("x/manifest.json"), Body: bytes.NewReader(v2),
		Metadata: map[string]string{hibernate.MACMeta: hibernate.Sign(key, loc, v2)}}); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "b")
	if _, err := ResumeStore(context.Background(), ResumeOptions{From: where, Store: dst}); !errors.Is(err, hibernate.ErrFormat) {
		t.Fatalf("resume of another version: %v", err)
	}
	if _, err := os.Stat(dst); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused resume left %s", dst)
	}
	// The lease was given back: the store that wrote the image still can.
	srv.Put(t, bucket, "x/manifest.json", m)
	if _, err := ResumeStore(context.Background(), ResumeOptions{From: where, Store: store}); err != nil {
		t.Fatalf("resume into the kept copy: %v", err)
	}
}

// TestHibernateStaleCopy: a store whose image was hibernated since by
// another host (from its own resume) cannot overwrite it, and gives the
// lease back.
func TestHibernateStaleCopy(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	dir := t.TempDir()
	x, y := filepath.Join(dir, "x"), filepath.Join(dir, "y")
	st, err := kv.Open(x, kv.Options{Ballast: -1, MinFree: -1})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	where := Where{URL: "s3://" + bucket + "/ws", Endpoint: srv.Endpoint}
	ctx := context.Background()
	if _, err := Hibernate(ctx, HibernateOptions{Store: x, To: where, KeepLocal: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := ResumeStore(ctx, ResumeOptions{From: where, Store: y}); err != nil {
		t.Fatal(err)
	}
	// x, kept, cannot come back while y holds the lease.
	var held *hibernate.HeldError
	if _, err := Hibernate(ctx, HibernateOptions{Store: x, KeepLocal: true}); !errors.As(err, &held) {
		t.Fatalf("hibernate of x while y holds the lease: %v", err)
	}
	if _, err := Hibernate(ctx, HibernateOptions{Store: y, KeepLocal: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := Hibernate(ctx, HibernateOptions{Store: x, KeepLocal: true}); !errors.Is(err, hibernate.ErrImageChanged) {
		t.Fatalf("hibernate of a stale copy: %v", err)
	}
	if _, err := ResumeStore(ctx, ResumeOptions{From: where, Store: filepath.Join(dir, "z")}); err != nil {
		t.Fatalf("resume after the refused hibernate: %v", err)
	}
}

// TestHibernateKilled: `computerfs hibernate` killed at points of its
// run; running it again finishes the job, and the image resumes whole.
func TestHibernateKilled(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	url := "s3://" + bucket + "/ws"
	dir := t.TempDir()
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	for i, delay := range []time.Duration{0, 50 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond} {
		store := filepath.Join(dir, fmt.Sprintf("s%d", i))
		mp := mountPoint(t)
		mustRun(t, srv, "mount", "--background", "--no-sandbox", "--store", store, mp)
		data := bytes.Repeat([]byte{byte(i)}, 9<<20)
		if err := os.WriteFile(filepath.Join(mp, "big.bin"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(testmount.Binary(t), "hibernate", "-w", mp, "--to", url+fmt.Sprint(i), "--endpoint", srv.Endpoint)
		cmd.Env = append(os.Environ(), srv.Env()...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(delay)
		cmd.Process.Kill()
		cmd.Wait()
		// The daemon ends by itself once unmounted; until then the
		// store is open and a hibernate of it is refused.
		var errs string
		var err error
		for range 100 {
			if ok, _ := fs.IsMounted(mp); ok {
				_, errs, err = cfs(t, srv, "hibernate", "-w", mp, "--to", url+fmt.Sprint(i), "--endpoint", srv.Endpoint)
			} else if _, serr := os.Stat(store); errors.Is(serr, os.ErrNotExist) {
				err = nil // the killed run had finished
			} else {
				_, errs, err = cfs(t, srv, "hibernate", "--store", store, "--to", url+fmt.Sprint(i), "--endpoint", srv.Endpoint)
			}
			if err == nil || !strings.Contains(errs, "is open") {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("hibernate again after a kill at %v: %v\n%s", delay, err, errs)
		}
		back := filepath.Join(dir, fmt.Sprintf("r%d", i))
		if _, err := ResumeStore(context.Background(), ResumeOptions{From: Where{URL: url + fmt.Sprint(i), Endpoint: srv.Endpoint}, Store: back}); err != nil {
			t.Fatalf("resume after a kill at %v: %v", delay, err)
		}
		st, err := kv.Open(back, kv.Options{Ballast: -1, MinFree: -1})
		if err != nil {
			t.Fatal(err)
		}
		a, err := st.Lookup(kv.RootIno, "big.bin")
		if err == nil && a.Size != uint64(len(data)) {
			err = fmt.Errorf("size %d", a.Size)
		}
		st.Close()
		if err != nil {
			t.Fatalf("big.bin after a kill at %v: %v", delay, err)
		}
	}
}
