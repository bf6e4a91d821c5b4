package computerfs

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/computerfs/computerfs/internal/s3test"
	"github.com/computerfs/computerfs/internal/testmount"
	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/wsfs"
)

// benchStore makes a closed store of about mib MiB: small files and 8 MiB
// blobs of random content, written as files created through the mount
// are.
func benchStore(b *testing.B, mib int) string {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "src")
	st, err := kv.Open(dir, kv.Options{Ballast: -1, MinFree: -1})
	if err != nil {
		b.Fatal(err)
	}
	w := wsfs.New(st, wsfs.Owner{})
	if err := w.MkdirAll("src", 0o755); err != nil {
		b.Fatal(err)
	}
	if err := w.WriteFile("TASK.md", []byte("resume me\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	for i := range 100 {
		if err := w.WriteFile(fmt.Sprintf("src/%d.go", i), []byte(fmt.Sprintf("package src // %d\n", i)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.MkdirAll("data", 0o755); err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(uint64(mib), 2))
	buf := make([]byte, 1<<20)
	for i := 0; i < mib; i += 8 {
		// Made a blob before its first byte, as the mount does for a
		// file created with O_TRUNC (cp, dd, compilers): its data never
		// goes through Pebble.
		p := fmt.Sprintf("data/%d.bin", i)
		if err := w.WriteFile(p, nil, 0o644); err != nil {
			b.Fatal(err)
		}
		a, err := w.Stat(p)
		if err != nil {
			b.Fatal(err)
		}
		if ok, err := st.MakeBlob(a.Ino); !ok || err != nil {
			b.Fatalf("make blob: %v %v", ok, err)
		}
		f, err := w.Open(p, wsfs.O_WRONLY, 0)
		if err != nil {
			b.Fatal(err)
		}
		for range min(8, mib-i) {
			for j := 0; j < len(buf); j += 8 {
				v := r.Uint64()
				for k := range 8 {
					buf[j+k] = byte(v >> (8 * k))
				}
			}
			if _, err := f.Write(buf); err != nil {
				b.Fatal(err)
			}
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
	return dir
}

// BenchmarkResume measures, for images of 100 MiB and 1 GiB (mostly 8
// MiB blobs), the time from the start of a resume to the mount answering
// `ls` and to reading a small file, and (lazy) to a first read of a blob
// and the background fetch's end, for the lazy resume and the eager one
// (the whole image downloaded first) in the same run. Run with
// -benchtime=1x.
func BenchmarkResume(b *testing.B) {
	for _, mib := range []int{100, 1024} {
		b.Run(fmt.Sprintf("%dMiB", mib), func(b *testing.B) {
			srv := s3test.Start(b)
			bucket := srv.NewBucket(b)
			for _, kv := range srv.Env() {
				k, v, _ := strings.Cut(kv, "=")
				b.Setenv(k, v)
			}
			src := benchStore(b, mib)
			ctx := context.Background()
			for i := 0; b.Loop(); i++ {
				for _, mode := range []string{"eager", "lazy"} {
					where := Where{URL: fmt.Sprintf("s3://%s/%s%d", bucket, mode, i), Endpoint: srv.Endpoint}
					if _, err := Hibernate(ctx, HibernateOptions{Store: src, To: where, KeepLocal: true}); err != nil {
						b.Fatal(err)
					}
					store := filepath.Join(b.TempDir(), "resumed")
					mp := testmount.PublicDir(b, "computerfs-resume-")
					t0 := time.Now()
					w, st, err := Resume(ctx, ResumeOptions{From: where, Store: store, Eager: mode == "eager"}, MountOptions{Mountpoint: mp})
					if err != nil {
						b.Fatal(err)
					}
					if _, err := os.ReadDir(mp); err != nil {
						b.Fatal(err)
					}
					tLs := time.Since(t0)
					if _, err := os.ReadFile(filepath.Join(mp, "TASK.md")); err != nil {
						b.Fatal(err)
					}
					tSmall := time.Since(t0)
					if _, err := os.ReadFile(filepath.Join(mp, "data/8.bin")); err != nil {
						b.Fatal(err)
					}
					tBlob := time.Since(t0)
					if w.blobFetch != nil {
						w.blobFetch.Wait()
					}
					tAll := time.Since(t0)
					if err := w.Unmount(); err != nil {
						b.Fatal(err)
					}
					os.RemoveAll(store)
					b.ReportMetric(tLs.Seconds(), "s/ls-"+mode)
					b.ReportMetric(tSmall.Seconds(), "s/small-"+mode)
					b.ReportMetric(tBlob.Seconds(), "s/blob-"+mode)
					b.ReportMetric(tAll.Seconds(), "s/all-"+mode)
					b.ReportMetric(float64(st.Moved)/(1<<20), "MiBfirst-"+mode)
				}
			}
		})
	}
}
