package syncer

// BenchmarkGitPush (make bench-sync): a pass of git push-back that
// commits and pushes 10 changed files of a checkout of BENCH_GIT_FILES
// files (default 2,000) to a local bare repository, against the git CLI
// doing the same on a checkout on disk (git add -A, git commit, git push).
// Each iteration changes the same files in both, then times both back to
// back in alternating order; the ratio is of the medians.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/computerfs/computerfs/internal/gittest"
)

func BenchmarkGitPush(b *testing.B) {
	n := 2000
	if v, err := strconv.Atoi(os.Getenv("BENCH_GIT_FILES")); err == nil && v > 0 {
		n = v
	}
	src := filepath.Join(b.TempDir(), "src")
	gittest.Generate(b, src, n, 5, 1)
	e := newGitEnv(b, nil, gitOpts{src: src})

	// The baseline: a clone on disk pushing to its own bare copy.
	disk := filepath.Join(benchDisk(b), "clone")
	gittest.Git(b, "", "clone", "-q", gittest.Bare(b, src), disk)
	files := strings.Split(gittest.Git(b, disk, "ls-files"), "\n")
	var changed []string
	for i := 0; len(changed) < 10 && i < len(files); i += len(files)/10 + 1 {
		if fi, err := os.Lstat(filepath.Join(disk, files[i])); err == nil && fi.Mode().IsRegular() {
			changed = append(changed, files[i])
		}
	}
	cli := func(args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = disk
		cmd.Env = append(os.Environ(), gittest.Env()...)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	var base, target []time.Duration
	for i := 0; i < b.N; i++ {
		for _, f := range changed {
			data := fmt.Sprintf("iteration %d of %s\n", i, f)
			e.write("/r/"+f, data)
			if err := os.WriteFile(filepath.Join(disk, f), []byte(data), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		runSync := func() {
			t0 := time.Now()
			r := e.mustSync()
			target = append(target, time.Since(t0))
			if len(r.Committed) != len(changed) || r.Pushed == "" {
				b.Fatalf("sync %+v", r)
			}
		}
		runCLI := func() {
			t0 := time.Now()
			cli("add", "-A")
			cli("commit", "-q", "-m", "bench")
			cli("push", "-q", "origin", "main")
			base = append(base, time.Since(t0))
		}
		if i%2 == 0 {
			runSync()
			runCLI()
		} else {
			runCLI()
			runSync()
		}
	}
	mb, mt := medianOf(base), medianOf(target)
	b.ReportMetric(float64(mt)/float64(mb), "ratio")
	b.ReportMetric(mb.Seconds(), "git-cli-s")
	b.ReportMetric(mt.Seconds(), "sync-s")
	b.Logf("%d files, %d changed: sync pass %v, git add+commit+push on disk %v: %.2fx", len(files), len(changed),
		mt.Round(time.Millisecond), mb.Round(time.Millisecond), float64(mt)/float64(mb))
}
