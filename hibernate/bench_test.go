package hibernate

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"golang.org/x/sync/errgroup"

	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/wsfs"
)

// BenchmarkImage measures, for stores of 100 MiB and 1 GiB (6 MiB blobs
// and small files), a first hibernate, an incremental one after a 1 MiB
// change, a resume (download), and for comparison a plain parallel
// PutObject of every file of the store, with the bytes each moved.
// Run with -benchtime=1x: each step is timed once per iteration.
func BenchmarkImage(b *testing.B) {
	for _, mib := range []int{100, 1024} {
		b.Run(fmt.Sprintf("%dMiB", mib), func(b *testing.B) {
			e := newEnv(b)
			src := makeStore(b, mib)
			ctx := context.Background()
			for i := 0; b.Loop(); i++ {
				loc := e.loc
				loc.Prefix = fmt.Sprintf("bench/%d", i)
				t0 := time.Now()
				first, etag, err := Upload(ctx, e.c, loc, src, UploadOptions{StoreID: "s"})
				if err != nil {
					b.Fatal(err)
				}
				tFirst := time.Since(t0)

				ploc := loc
				ploc.Prefix = fmt.Sprintf("plain/%d", i)
				t0 = time.Now()
				plain := plainPut(b, e.c, ploc, src)
				tPlain := time.Since(t0)

				s, err := kv.Open(src, kv.Options{Ballast: -1, MinFree: -1})
				if err != nil {
					b.Fatal(err)
				}
				writeBig(b, wsfs.New(s, wsfs.Owner{}), fmt.Sprintf("change-%d.bin", i), 1<<20, rand.New(rand.NewPCG(uint64(i), 7)))
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
				t0 = time.Now()
				incr, _, err := Upload(ctx, e.c, loc, src, UploadOptions{StoreID: "s", BaseETag: etag})
				if err != nil {
					b.Fatal(err)
				}
				tIncr := time.Since(t0)

				dst := filepath.Join(b.TempDir(), "resumed")
				t0 = time.Now()
				_, _, down, err := Download(ctx, e.c, loc, dst, DownloadOptions{})
				if err != nil {
					b.Fatal(err)
				}
				tDown := time.Since(t0)
				os.RemoveAll(dst)

				b.ReportMetric(tFirst.Seconds(), "s/first")
				b.ReportMetric(float64(first.Moved)/(1<<20), "MiB/first")
				b.ReportMetric(tIncr.Seconds(), "s/incr")
				b.ReportMetric(float64(incr.Moved)/(1<<20), "MiB/incr")
				b.ReportMetric(float64(incr.Read)/(1<<20), "MiBread/incr")
				b.ReportMetric(tDown.Seconds(), "s/resume")
				b.ReportMetric(float64(down.Moved)/(1<<20), "MiB/resume")
				b.ReportMetric(tPlain.Seconds(), "s/plainput")
				b.ReportMetric(float64(plain)/(1<<20), "MiB/plainput")
			}
		})
	}
}

// plainPut uploads every file of the store whole, 8 at a time, and
// returns the bytes sent.
func plainPut(b *testing.B, c *s3.Client, loc Location, dir string) int64 {
	files, err := listStore(dir)
	if err != nil {
		b.Fatal(err)
	}
	var g errgroup.Group
	g.SetLimit(8)
	var total int64
	for _, f := range files {
		total += f.Size
		g.Go(func() error {
			r, err := os.Open(filepath.Join(dir, filepath.FromSlash(f.Path)))
			if err != nil {
				return err
			}
			defer r.Close()
			_, err = c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: &loc.Bucket, Key: aws.String(loc.key(f.Path)), Body: r, ContentLength: aws.Int64(f.Size)})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	return total
}
