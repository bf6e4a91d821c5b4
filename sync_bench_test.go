package computerfs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/computerfs/computerfs/internal/s3test"
	"github.com/computerfs/computerfs/internal/testmount"
)

// BenchmarkSyncLatency measures the time from close() of a changed file on
// the mount (a daemon without the race detector, debounce 1 s) to the new
// object being visible in S3 (HEAD shows its new size, unique to each
// version; polled every millisecond): median and p99 over 100 closes per iteration.
func BenchmarkSyncLatency(b *testing.B) {
	srv := s3test.Start(b)
	srv.SetEnv(b)
	bucket := srv.NewBucket(b)
	srv.Put(b, bucket, "p/f", []byte("v0"))
	store := filepath.Join(b.TempDir(), "ws")
	m := testmount.StartPlain(b, store, "--spec", syncSpec(b, srv, bucket, "1s"))
	c := srv.Client(b)
	var lat []time.Duration
	p := filepath.Join(m.Dir, "data", "f")
	round := 0
	for b.Loop() {
		round++
		for i := range 100 {
			// A size of its own for each version: HEAD tells them apart.
			data := fmt.Appendf(nil, "%0*d", 1000*round+i+10, i)
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := f.Write(data); err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			if err := f.Close(); err != nil {
				b.Fatal(err)
			}
			for {
				h, err := c.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: &bucket, Key: aws.String("p/f")})
				if err == nil && aws.ToInt64(h.ContentLength) == int64(len(data)) {
					break
				}
				if time.Since(start) > 30*time.Second {
					b.Fatalf("not visible after 30 s:\n%s", m.Log())
				}
				time.Sleep(time.Millisecond)
			}
			lat = append(lat, time.Since(start))
			time.Sleep(5 * time.Millisecond)
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	med, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
	b.ReportMetric(float64(med.Microseconds())/1000, "close-to-s3-median-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "close-to-s3-p99-ms")
	b.Logf("close to visible in S3 (%d closes): median %v, p99 %v", len(lat), med.Round(100*time.Microsecond), p99.Round(100*time.Microsecond))
}
