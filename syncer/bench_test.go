package syncer

// Benchmarks of sync back against uploading the same files with the same
// SDK directly, measured in the same run and reported as ratios (make
// bench-sync):
//
//	BenchmarkSyncSmall  1,000 files of 4 KiB: Sync vs PutObject of each
//	                    file from disk, 16 at a time
//	BenchmarkSyncLarge  one file (BENCH_SYNC_LARGE MiB, default 256):
//	                    Sync vs a multipart upload from disk with the same
//	                    part size and parallelism
//
// Each iteration writes the files again (new content) and times the sync
// and the baseline back to back, in alternating order;
// the ratio is of the medians.

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"golang.org/x/sync/errgroup"

	"github.com/computerfs/computerfs/wsfs"
)

func medianOf(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func report(b *testing.B, what string, base, target []time.Duration, bytes int64) {
	mb, mt := medianOf(base), medianOf(target)
	b.ReportMetric(float64(mt)/float64(mb), what+"-ratio")
	b.ReportMetric(mb.Seconds(), what+"-sdk-s")
	b.ReportMetric(mt.Seconds(), what+"-sync-s")
	b.Logf("%s: sync %v (%.0f MB/s), SDK directly %v (%.0f MB/s): %.2fx", what, mt.Round(time.Millisecond),
		float64(bytes)/mt.Seconds()/1e6, mb.Round(time.Millisecond), float64(bytes)/mb.Seconds()/1e6, float64(mt)/float64(mb))
}

func benchDisk(b *testing.B) string {
	parent := os.Getenv("BENCH_WORKDIR")
	if parent == "" {
		parent = "/var/tmp"
	}
	dir, err := os.MkdirTemp(parent, "computerfs-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func BenchmarkSyncSmall(b *testing.B) {
	const n, size = 1000, 4096
	e := newEnv(b, envOpts{mode: Headers, debounce: time.Hour})
	client := e.target.Client
	disk := benchDisk(b)
	var base, target []time.Duration
	for i := 0; b.Loop(); i++ {
		data := make([]byte, size)
		for j := range n {
			for k := range data {
				data[k] = byte(i + j + k)
			}
			e.write(fmt.Sprintf("/s/d%d/f%d", j%20, j), string(data))
			check(b, os.WriteFile(filepath.Join(disk, strconv.Itoa(j)), data, 0o644))
		}
		syncIt := func() {
			start := time.Now()
			r := e.sy.Sync(context.Background()).Sources[0]
			target = append(target, time.Since(start))
			if len(r.Uploaded) != n || len(r.Errors)+len(r.Conflicts) != 0 {
				b.Fatalf("sync: %d uploaded, %v %v", len(r.Uploaded), r.Errors, r.Conflicts)
			}
		}
		baseline := func() {
			start := time.Now()
			var g errgroup.Group
			g.SetLimit(16)
			for j := range n {
				g.Go(func() error {
					f, err := os.Open(filepath.Join(disk, strconv.Itoa(j)))
					if err != nil {
						return err
					}
					defer f.Close()
					_, err = client.PutObject(context.Background(), &s3.PutObjectInput{Bucket: &e.bucket,
						Key: aws.String(fmt.Sprintf("base/%d", j)), Body: f, ContentLength: aws.Int64(size)})
					return err
				})
			}
			check(b, g.Wait())
			base = append(base, time.Since(start))
		}
		if i%2 == 0 {
			syncIt()
			baseline()
		} else {
			baseline()
			syncIt()
		}
	}
	report(b, "small", base, target, n*size)
}

func BenchmarkSyncLarge(b *testing.B) {
	mib := int64(256)
	if v, err := strconv.ParseInt(os.Getenv("BENCH_SYNC_LARGE"), 10, 64); err == nil && v > 0 {
		mib = v
	}
	size := mib << 20
	e := newEnv(b, envOpts{mode: Headers, debounce: time.Hour})
	client := e.target.Client
	disk := filepath.Join(benchDisk(b), "big")
	var base, target []time.Duration
	buf := make([]byte, 1<<20)
	for i := 0; b.Loop(); i++ {
		f, err := e.fs.Open("/s/big", wsfs.O_WRONLY|wsfs.O_CREATE|wsfs.O_TRUNC, 0o644)
		check(b, err)
		df, err := os.Create(disk)
		check(b, err)
		for off := int64(0); off < size; off += int64(len(buf)) {
			for k := 0; k < len(buf); k += 4096 {
				buf[k] = byte(i + int(off>>20) + k)
			}
			_, err := f.Write(buf)
			check(b, err)
			_, err = df.Write(buf)
			check(b, err)
		}
		f.Close()
		check(b, df.Close())
		// Both files are written before either upload starts; the order
		// alternates, so that neither always runs while the other's
		// writes are still being flushed.
		syncIt := func() {
			start := time.Now()
			r := e.sy.Sync(context.Background()).Sources[0]
			target = append(target, time.Since(start))
			if len(r.Uploaded) != 1 || len(r.Errors)+len(r.Conflicts) != 0 {
				b.Fatalf("sync: %+v", r)
			}
		}
		baseline := func() {
			start := time.Now()
			check(b, multipartFromDisk(client, e.bucket, "base/big", disk, size))
			base = append(base, time.Since(start))
		}
		if i%2 == 0 {
			syncIt()
			baseline()
		} else {
			baseline()
			syncIt()
		}
	}
	b.Logf("large file: %d MiB", mib)
	report(b, "large", base, target, size)
}

// multipartFromDisk uploads a file in parts as S3Target does: the same
// part size and parallelism.
func multipartFromDisk(c *s3.Client, bucket, key, file string, size int64) error {
	ctx := context.Background()
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	up, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &bucket, Key: &key})
	if err != nil {
		return err
	}
	ps := int64(DefaultPartSize)
	n := int((size + ps - 1) / ps)
	parts := make([]types.CompletedPart, n)
	var g errgroup.Group
	g.SetLimit(4)
	for i := range n {
		g.Go(func() error {
			off := int64(i) * ps
			l := min(ps, size-off)
			num := int32(i + 1)
			out, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: &bucket, Key: &key, UploadId: up.UploadId,
				PartNumber: &num, ContentLength: &l, Body: io.NewSectionReader(f, off, l)})
			if err != nil {
				return err
			}
			parts[i] = types.CompletedPart{ETag: out.ETag, PartNumber: &num}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	_, err = c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: &bucket, Key: &key,
		UploadId: up.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
	return err
}
