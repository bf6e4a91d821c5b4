package sources

// Benchmarks of imports against their baselines, measured in the same run
// and reported as ratios (make bench; machines here are too noisy for
// absolute times to mean much):
//
//	BenchmarkGitImport   `computerfs import` of a repository with its whole
//	                     history vs `git clone` of it to a plain directory
//	BenchmarkS3Lazy      a lazy S3 source: mount ready (listing only) vs
//	                     listing the prefix with the SDK; reading every file
//	                     through the mount vs downloading every object in
//	                     parallel with the SDK to a plain directory
//
// Each iteration runs the baseline and the target back to back; the
// reported ratio is of the medians.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"golang.org/x/sync/errgroup"

	"github.com/computerfs/computerfs/internal/gittest"
	"github.com/computerfs/computerfs/internal/s3test"
	"github.com/computerfs/computerfs/internal/testmount"
)

// benchDir is a directory on disk (not tmpfs) for stores and baselines.
func benchDir(b *testing.B) string {
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

// timings collects the baseline's and the target's times per iteration.
type timings struct{ base, target []time.Duration }

func med(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func (tm *timings) report(b *testing.B, what string) {
	base, target := med(tm.base), med(tm.target)
	ratio := float64(target) / float64(base)
	b.ReportMetric(ratio, what+"-ratio")
	b.ReportMetric(base.Seconds(), what+"-base-s")
	b.ReportMetric(target.Seconds(), what+"-cfs-s")
	b.Logf("%s: computerfs %v, baseline %v: %.2fx", what, target.Round(time.Millisecond), base.Round(time.Millisecond), ratio)
}

func timeCmd(b *testing.B, dir string, name string, args ...string) time.Duration {
	b.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	start := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(start)
	if err != nil {
		b.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return d
}

func dropCaches() {
	exec.Command("sync").Run()
	os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0)
}

func BenchmarkGitImport(b *testing.B) {
	root, _ := filepath.Abs("..")
	repos := map[string]func(dir string) string{
		"self": func(dir string) string { // this project, with its history
			bare := filepath.Join(dir, "self.git")
			gittest.Git(b, dir, "clone", "-q", "--bare", root, bare)
			return bare
		},
		"generated-10k-files-500-commits": func(dir string) string {
			gittest.Generate(b, filepath.Join(dir, "gen"), 10000, 500, 1)
			return gittest.Bare(b, filepath.Join(dir, "gen"))
		},
	}
	bin := testmount.PlainBinary(b)
	for _, name := range []string{"self", "generated-10k-files-500-commits"} {
		b.Run(name, func(b *testing.B) {
			dir := benchDir(b)
			bare := repos[name](dir)
			specFile := filepath.Join(dir, "ws.yaml")
			os.WriteFile(specFile, []byte(fmt.Sprintf("sources:\n  - path: /repo\n    git: {url: %q}\n", "file://"+bare)), 0o644)
			var tm timings
			b.ResetTimer()
			for i := range b.N {
				clone := filepath.Join(dir, fmt.Sprintf("clone%d", i))
				store := filepath.Join(dir, fmt.Sprintf("store%d", i))
				dropCaches()
				tm.base = append(tm.base, timeCmd(b, dir, "git", "clone", "-q", "file://"+bare, clone))
				dropCaches()
				tm.target = append(tm.target, timeCmd(b, dir, bin, "import", "--log-level", "warn", "--spec", specFile, "--store", store))
				os.RemoveAll(clone)
				os.RemoveAll(store)
			}
			tm.report(b, "import-vs-git-clone")
		})
	}
}

// s3Objects is how many objects BenchmarkS3Lazy puts in its prefix.
const s3Objects = 10000

func BenchmarkS3Lazy(b *testing.B) {
	srv := s3test.Start(b)
	srv.SetEnv(b)
	bucket := srv.NewBucket(b)
	client := srv.Client(b)
	ctx := context.Background()
	// Objects of 1 to 16 KiB, like a prefix of logs or records.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i := range s3Objects {
		g.Go(func() error {
			data := bytes.Repeat([]byte{byte(i)}, 1024*(1+i%16))
			_, err := client.PutObject(gctx, &s3.PutObjectInput{Bucket: aws.String(bucket),
				Key: aws.String(fmt.Sprintf("data/d%02d/obj%05d", i%50, i)), Body: bytes.NewReader(data)})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	dir := benchDir(b)
	specFile := filepath.Join(dir, "ws.yaml")
	os.WriteFile(specFile, []byte(fmt.Sprintf("sources:\n  - path: /data\n    s3: {bucket: %s, prefix: data/, endpoint: %q, path_style: true}\n",
		bucket, srv.Endpoint)), 0o644)
	testmount.PlainBinary(b) // built before the clock starts
	var ready, readAll timings
	var daemonCPU []time.Duration // the daemon's CPU time in each read phase
	b.ResetTimer()
	for i := range b.N {
		// Baseline: list the prefix.
		start := time.Now()
		keys := listAll(b, client, bucket)
		ready.base = append(ready.base, time.Since(start))
		if len(keys) != s3Objects {
			b.Fatalf("listed %d objects", len(keys))
		}
		// Target: import (listing) and mount, until the mount answers.
		store := filepath.Join(dir, fmt.Sprintf("store%d", i))
		start = time.Now()
		args := []string{"--spec", specFile}
		if benchPprof != "" {
			args = append(args, "--pprof", benchPprof)
		}
		args = append(args, strings.Fields(os.Getenv("BENCH_DAEMON_ARGS"))...)
		m := testmount.StartPlain(b, store, args...)
		ready.target = append(ready.target, time.Since(start))

		// Baseline: download every object in parallel to a plain directory.
		dl := filepath.Join(dir, fmt.Sprintf("download%d", i))
		start = time.Now()
		download(b, client, bucket, keys, dl)
		readAll.base = append(readAll.base, time.Since(start))
		// Target: read every file through the mount, in parallel.
		stopProfile := profileDaemon(b, fmt.Sprintf("read%d", i))
		cpu := cpuTime(b, m.Pid)
		start = time.Now()
		readTree(b, filepath.Join(m.Dir, "data"), keys)
		readAll.target = append(readAll.target, time.Since(start))
		daemonCPU = append(daemonCPU, cpuTime(b, m.Pid)-cpu)
		stopProfile()
		m.Unmount(b)
		os.RemoveAll(store)
		os.RemoveAll(dl)
	}
	ready.report(b, "mount-ready-vs-list")
	readAll.report(b, "read-all-vs-download")
	perFile := med(daemonCPU) / s3Objects
	b.ReportMetric(float64(perFile.Microseconds()), "daemon-cpu-us/file")
	b.Logf("daemon CPU per file read: %v", perFile)
}

// cpuTime is the CPU time (user and system) that process pid has used.
func cpuTime(b *testing.B, pid int) time.Duration {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command name (which may hold spaces).
	f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+2:]))
	var utime, stime int64
	fmt.Sscan(f[11], &utime)
	fmt.Sscan(f[12], &stime)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

// BENCH_DAEMON_ARGS adds flags to the daemon's command line in
// BenchmarkS3Lazy (experiments: "--cache-size 64").
//
// benchPprof (BENCH_PPROF=127.0.0.1:6061) makes BenchmarkS3Lazy start the
// daemon with --pprof there and save a CPU profile of each read phase in
// BENCH_PROFILE_DIR (default: the current directory) as read<i>.pprof (the
// first 3 seconds of the phase).
var benchPprof = os.Getenv("BENCH_PPROF")

// profileDaemon starts a CPU profile of the daemon (with BENCH_PPROF) and
// returns the function that ends it and saves it as name.pprof.
func profileDaemon(b *testing.B, name string) (stop func()) {
	if benchPprof == "" {
		return func() {}
	}
	dir := os.Getenv("BENCH_PROFILE_DIR")
	if dir == "" {
		dir = "."
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The first seconds of the reads (a profile cannot be cut short).
		resp, err := http.Get("http://" + benchPprof + "/debug/pprof/profile?seconds=3")
		if err != nil {
			b.Logf("profile: %v", err)
			return
		}
		defer resp.Body.Close()
		f, err := os.Create(filepath.Join(dir, name+".pprof"))
		if err == nil {
			io.Copy(f, resp.Body)
			f.Close()
		}
	}()
	return func() { <-done }
}

func listAll(b testing.TB, client *s3.Client, bucket string) []string {
	var keys []string
	p := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String("data/")})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		for _, o := range page.Contents {
			keys = append(keys, strings.TrimPrefix(aws.ToString(o.Key), "data/"))
		}
	}
	return keys
}

// parallelism of the download and of the reads through the mount.
var parallelism = max(16, 4*runtime.NumCPU())

func download(b *testing.B, client *s3.Client, bucket string, keys []string, dir string) {
	var mu sync.Mutex
	made := map[string]bool{}
	g, ctx := errgroup.WithContext(context.Background())
	g.SetLimit(parallelism)
	for _, k := range keys {
		g.Go(func() error {
			out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("data/" + k)})
			if err != nil {
				return err
			}
			defer out.Body.Close()
			p := filepath.Join(dir, k)
			mu.Lock()
			if !made[filepath.Dir(p)] {
				os.MkdirAll(filepath.Dir(p), 0o755)
				made[filepath.Dir(p)] = true
			}
			mu.Unlock()
			f, err := os.Create(p)
			if err != nil {
				return err
			}
			if _, err := io.Copy(f, out.Body); err != nil {
				f.Close()
				return err
			}
			return f.Close()
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
}

func readTree(b *testing.B, dir string, keys []string) {
	g := new(errgroup.Group)
	g.SetLimit(parallelism)
	for _, k := range keys {
		g.Go(func() error {
			_, err := os.ReadFile(filepath.Join(dir, k))
			return err
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
}
