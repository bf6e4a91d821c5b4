package computerfs

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/computerfs/computerfs/hibernate"
	"github.com/computerfs/computerfs/internal/s3test"
)

// lazyFiles writes a workspace's files through its mount: small files
// and 5 MiB blobs of random content; it returns what each holds.
func lazyFiles(t *testing.T, mp string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{"TASK.md": []byte("resume me\n")}
	r := rand.New(rand.NewPCG(18, 1))
	for i := range 20 {
		files[fmt.Sprintf("src/%d.go", i)] = []byte(fmt.Sprintf("package src // %d\n", i))
	}
	for i := range 6 {
		b := make([]byte, 5<<20)
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		files[fmt.Sprintf("data/%d.bin", i)] = b
	}
	for name, b := range files {
		p := filepath.Join(mp, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// checkFiles reads every file through the mount, but those in skip.
func checkFiles(t *testing.T, mp string, files map[string][]byte, skip string) {
	t.Helper()
	if _, err := os.ReadDir(mp); err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		if name == skip {
			continue
		}
		b, err := os.ReadFile(filepath.Join(mp, name))
		if err != nil || sha256.Sum256(b) != sha256.Sum256(want) {
			t.Fatalf("%s through %s: %d bytes (want %d), %v", name, mp, len(b), len(want), err)
		}
	}
}

func daemonStatus(t *testing.T, srv *s3test.Server, mp string) Status {
	t.Helper()
	var st Status
	if err := json.Unmarshal([]byte(mustRun(t, srv, "status", "-w", mp, "--json")), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestLazyResumeMount: through the CLI and the real daemon on FUSE. A
// lazy resume mounts before the blobs are there, and every file reads as
// it was written; the daemon SIGKILLed while it fetches leaves no partial
// blob, and a mount of the store finishes the fetch; the workspace
// hibernates again and resumes (--eager) whole; a chunk with a byte
// flipped fails that file's reads with EIO (the others read right, the
// status names it); an image missing an object is refused before the mount.
func TestLazyResumeMount(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	url := "s3://" + bucket + "/ws/lazy"
	hosts := t.TempDir()
	storeA, mpA := filepath.Join(hosts, "a"), mountPoint(t)
	mustRun(t, srv, "mount", "--background", "--no-sandbox", "--store", storeA, mpA)
	files := lazyFiles(t, mpA)
	blobOf := map[string]string{} // workspace file -> its blob's path in the store
	for name, b := range files {
		if len(b) > 1<<20 {
			info, err := os.Stat(filepath.Join(mpA, name))
			if err != nil {
				t.Fatal(err)
			}
			blobOf[name] = fmt.Sprintf("blobs/%x", info.Sys().(*syscall.Stat_t).Ino)
		}
	}
	mustRun(t, srv, "hibernate", "-w", mpA, "--to", url, "--endpoint", srv.Endpoint)

	// B resumes lazily: every file reads right.
	storeB, mpB := filepath.Join(hosts, "b"), mountPoint(t)
	_, errs, err := cfs(t, srv, "resume", url, "--endpoint", srv.Endpoint, "--store", storeB, "--background", "--no-sandbox", mpB)
	if err != nil || !strings.Contains(errs, "the blobs follow in the background") {
		t.Fatalf("lazy resume: %v\n%s", err, errs)
	}
	if _, err := os.ReadFile(filepath.Join(mpB, "TASK.md")); err != nil {
		t.Fatal(err)
	}

	// SIGKILL of B's daemon (while it fetches, if it still does): every
	// blob file there is whole; mounting the store again finishes.
	pid := daemonStatus(t, srv, mpB).Pid
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for i := 0; syscall.Kill(pid, 0) == nil; i++ {
		if i > 6000 {
			t.Fatalf("daemon %d still runs after SIGKILL", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	syscall.Unmount(mpB, syscall.MNT_DETACH)
	whole := map[[32]byte]bool{}
	for _, b := range files {
		whole[sha256.Sum256(b)] = true
	}
	ents, _ := os.ReadDir(filepath.Join(storeB, "blobs"))
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(storeB, "blobs", e.Name()))
		if err != nil || !whole[sha256.Sum256(b)] {
			t.Fatalf("blob %s after the kill: %d bytes, not a whole blob (%v)", e.Name(), len(b), err)
		}
	}
	t.Logf("after the kill: %d of %d blobs there, list of blobs to fetch: %v", len(ents), len(blobOf), hibernate.HasPending(storeB))
	mustRun(t, srv, "mount", "--background", "--no-sandbox", "--store", storeB, mpB)
	checkFiles(t, mpB, files, "")
	if st := daemonStatus(t, srv, mpB); st.Fetch != nil && st.Fetch.Owed > 0 {
		t.Fatalf("every file was read, blobs are still owed: %+v", st.Fetch)
	}

	// Hibernate again after the lazy resume; C resumes it eagerly.
	mustRun(t, srv, "hibernate", "-w", mpB)
	storeC, mpC := filepath.Join(hosts, "c"), mountPoint(t)
	mustRun(t, srv, "resume", url, "--endpoint", srv.Endpoint, "--store", storeC, "--eager", "--background", "--no-sandbox", mpC)
	if hibernate.HasPending(storeC) {
		t.Fatal("an eager resume left blobs to fetch")
	}
	checkFiles(t, mpC, files, "")
	mustRun(t, srv, "hibernate", "-w", mpC)

	// A byte flipped in a chunk of data/3.bin's blob.
	var m hibernate.Manifest
	if err := json.Unmarshal(srv.Get(t, bucket, "ws/lazy/manifest.json"), &m); err != nil {
		t.Fatal(err)
	}
	chunkOf := func(p string) string {
		for _, f := range m.Files {
			if f.Path == p {
				return f.Chunks[0]
			}
		}
		t.Fatalf("%s is not in the image", p)
		return ""
	}
	bad := chunkOf(blobOf["data/3.bin"])
	obj := srv.Get(t, bucket, "ws/lazy/objects/"+bad)
	obj[100] ^= 1
	srv.Put(t, bucket, "ws/lazy/objects/"+bad, obj)
	storeD, mpD := filepath.Join(hosts, "d"), mountPoint(t)
	mustRun(t, srv, "resume", url, "--endpoint", srv.Endpoint, "--store", storeD, "--background", "--no-sandbox", mpD)
	if _, err := os.ReadFile(filepath.Join(mpD, "data/3.bin")); !errors.Is(err, syscall.EIO) {
		t.Fatalf("read of a corrupt blob: %v, want EIO", err)
	}
	checkFiles(t, mpD, files, "data/3.bin")
	st := daemonStatus(t, srv, mpD)
	if st.Fetch == nil || st.Fetch.Failed != 1 || !strings.Contains(st.Fetch.Error, bad) || !strings.Contains(st.Fetch.Error, "corrupt") {
		t.Fatalf("status after a corrupt blob: %+v", st.Fetch)
	}
	if out := mustRun(t, srv, "status", "-w", mpD); !strings.Contains(out, "1 failed") {
		t.Fatalf("status does not say a blob failed:\n%s", out)
	}
	// D hibernates with that blob still owed (named as it is).
	mustRun(t, srv, "hibernate", "-w", mpD)

	// An object missing: refused before the mount, nothing left.
	obj[100] ^= 1
	srv.Put(t, bucket, "ws/lazy/objects/"+bad, obj)
	gone := chunkOf(blobOf["data/4.bin"])
	c := srv.Client(t)
	if _, err := c.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String("ws/lazy/objects/" + gone)}); err != nil {
		t.Fatal(err)
	}
	storeE, mpE := filepath.Join(hosts, "e"), mountPoint(t)
	_, errs, err = cfs(t, srv, "resume", url, "--endpoint", srv.Endpoint, "--store", storeE, "--background", "--no-sandbox", mpE)
	if err == nil || !strings.Contains(errs, "incomplete") || !strings.Contains(errs, gone) {
		t.Fatalf("resume of an image missing an object: %v\n%s", err, errs)
	}
	if _, err := os.Stat(storeE); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused resume left %s", storeE)
	}
}
