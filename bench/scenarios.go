package bench

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Benchmarks returns the suite: the workload scenarios, then the
// syscall-level benchmarks.
func Benchmarks(s Sizes) []Benchmark {
	return append(Scenarios(s), SyscallBenchmarks(s)...)
}

// Shell snippets shared by the scenarios. $1 is the number of files.
const (
	listFiles  = `seq -f 'f%05.0f' 1 "$1"`
	makeFiles  = listFiles + ` | xargs touch`
	statFiles  = listFiles + ` | xargs stat >/dev/null`
	rmFiles    = listFiles + ` | xargs rm`
	listTree   = `awk -v n="$1" 'BEGIN { for (a = 0; a < n; a++) for (b = 0; b < n; b++) for (c = 0; c < n; c++) print "d" a "/d" b "/d" c }'`
	makeTree   = listTree + ` | xargs mkdir -p`
	writeBig   = `dd if="$1" of=big bs=1M conv=fsync status=none`
	zeroBig    = `dd if=/dev/zero of=big bs=1M count="$1" conv=fsync status=none`
	overwrite  = `dd if="$1" of=big bs=1M conv=notrunc,fsync status=none`
	gitCommit  = `git init -q && git add -A && git commit -q -m bench`
	gitClone   = `git clone -q --no-local "$1" clone`
	untar      = `tar -xf "$1"`
	readBig    = `cat big >/dev/null`
	copyBig    = `cp big big2 && sync big2`
	findTree   = `find . >/dev/null`
	removeTree = `rm -rf src`
)

// Scenarios are the workload benchmarks: real commands run with sh -c,
// timed by wall clock (so the time includes starting the commands, as it
// does for users).
func Scenarios(s Sizes) []Benchmark {
	nFiles := strconv.Itoa(s.Files)
	nTree := strconv.Itoa(s.TreeFanout)
	treeDirs := s.TreeFanout + s.TreeFanout*s.TreeFanout + s.TreeFanout*s.TreeFanout*s.TreeFanout
	mib := strconv.Itoa(s.BigMiB)
	src := strings.Join(s.SrcDirs, ",")
	return []Benchmark{
		{
			Name: "files/create", Unit: "s", Better: LowerIsBetter,
			Desc: fmt.Sprintf("create %d empty files (seq | xargs touch)", s.Files),
			Func: func(ctx context.Context, e *Env) (float64, error) {
				d, err := e.Sh(ctx, makeFiles, nFiles)
				if err != nil {
					return 0, err
				}
				return seconds(d), expectEntries(e.Dir, s.Files)
			},
		},
		{
			Name: "files/stat", Unit: "s", Better: LowerIsBetter,
			Desc: fmt.Sprintf("stat %d files just created (xargs stat)", s.Files),
			Func: func(ctx context.Context, e *Env) (float64, error) {
				if _, err := e.Sh(ctx, makeFiles, nFiles); err != nil {
					return 0, err
				}
				d, err := e.Sh(ctx, statFiles, nFiles)
				return seconds(d), err
			},
		},
		{
			Name: "files/rm", Unit: "s", Better: LowerIsBetter,
			Desc: fmt.Sprintf("remove %d files (xargs rm)", s.Files),
			Func: func(ctx context.Context, e *Env) (float64, error) {
				if _, err := e.Sh(ctx, makeFiles, nFiles); err != nil {
					return 0, err
				}
				d, err := e.Sh(ctx, rmFiles, nFiles)
				if err != nil {
					return 0, err
				}
				return seconds(d), expectEntries(e.Dir, 0)
			},
		},
		{
			Name: "tree/mkdir", Unit: "s", Better: LowerIsBetter,
			Desc: fmt.Sprintf("mkdir -p a %dx%dx%d tree (%d dirs)", s.TreeFanout, s.TreeFanout, s.TreeFanout, treeDirs),
			Func: func(ctx context.Context, e *Env) (float64, error) {
				d, err := e.Sh(ctx, makeTree, nTree)
				if err != nil {
					return 0, err
				}
				return seconds(d), expectEntries(e.Dir, treeDirs)
			},
		},
		{
			Name: "tree/find", Unit: "s", Better: LowerIsBetter,
			Desc: fmt.Sprintf("find over that tree, warm (%d dirs)", treeDirs),
			Func: func(ctx context.Context, e *Env) (float64, error) {
				if _, err := e.Sh(ctx, makeTree, nTree); err != nil {
					return 0, err
				}
				d, err := e.Sh(ctx, findTree)
				return seconds(d), err
			},
		},
		{
			Name: "big/write", Unit: "s", Better: LowerIsBetter,
			Desc: fmt.Sprintf("write a %d MiB file (dd bs=1M conv=fsync)", s.BigMiB),
			Func: func(ctx context.Context, e *Env) (float64, error) {
				rnd, err := e.warmRandom()
				if err != nil {
					return 0, err
				}
				d, err := e.Sh(ctx, writeBig, rnd)
				if err != nil {
					return 0, err
				}
				return seconds(d), expectSize(filepath.Join(e.Dir, "big"), int64(s.BigMiB)<<20)
			},
		},
		{
			Name: "big/read", Unit: "s", Better: LowerIsBetter,
			Desc: fmt.Sprintf("read a fresh %d MiB file, cold cache (cat)", s.BigMiB),
			Func: func(ctx context.Context, e *Env) (float64, error) {
				rnd, err := e.warmRandom()
				if err != nil {
					return 0, err
				}
				if _, err := e.Sh(ctx, writeBig, rnd); err != nil {
					return 0, err
				}
				e.DropCaches()
				d, err := e.Sh(ctx, readBig)
				return seconds(d), err
			},
		},
		{
			Name: "big/copy", Unit: "s", Better: LowerIsBetter,
			Desc: fmt.Sprintf("copy a %d MiB file (cp, then sync the copy)", s.BigMiB),
			Func: func(ctx context.Context, e *Env) (float64, error) {
				rnd, err := e.warmRandom()
				if err != nil {
					return 0, err
				}
				if _, err := e.Sh(ctx, writeBig, rnd); err != nil {
					return 0, err
				}
				d, err := e.Sh(ctx, copyBig)
				if err != nil {
					return 0, err
				}
				return seconds(d), expectSize(filepath.Join(e.Dir, "big2"), int64(s.BigMiB)<<20)
			},
		},
		{
			Name: "big/overwrite", Unit: "s", Better: LowerIsBetter,
			Desc: fmt.Sprintf("overwrite a %d MiB file in place (dd conv=notrunc,fsync)", s.BigMiB),
			Func: func(ctx context.Context, e *Env) (float64, error) {
				if _, err := e.Sh(ctx, zeroBig, mib); err != nil {
					return 0, err
				}
				rnd, err := e.warmRandom()
				if err != nil {
					return 0, err
				}
				d, err := e.Sh(ctx, overwrite, rnd)
				if err != nil {
					return 0, err
				}
				return seconds(d), expectSize(filepath.Join(e.Dir, "big"), int64(s.BigMiB)<<20)
			},
		},
		{
			Name: "git/commit", Unit: "s", Better: LowerIsBetter,
			Desc: fmt.Sprintf("git init, add and commit %d files", s.GitFiles),
			Func: func(ctx context.Context, e *Env) (float64, error) {
				if err := sourceFiles(e.Dir, s.GitFiles, 7); err != nil {
					return 0, err
				}
				d, err := e.Sh(ctx, gitCommit)
				if err != nil {
					return 0, err
				}
				out, err := e.Output(ctx, "git", "ls-files")
				if err != nil {
					return 0, err
				}
				if n := strings.Count(out, "\n"); n != s.GitFiles {
					return 0, fmt.Errorf("git ls-files: %d files, want %d", n, s.GitFiles)
				}
				return seconds(d), nil
			},
		},
		{
			Name: "git/clone", Unit: "s", Better: LowerIsBetter,
			Desc: fmt.Sprintf("git clone --no-local of a repository with %d files", s.CloneFiles),
			Func: func(ctx context.Context, e *Env) (float64, error) {
				repo, err := e.fx.cloneSource(ctx)
				if err != nil {
					return 0, err
				}
				d, err := e.Sh(ctx, gitClone, repo)
				if err != nil {
					return 0, err
				}
				n, err := countFiles(filepath.Join(e.Dir, "clone"), ".git")
				if err == nil && n != s.CloneFiles {
					err = fmt.Errorf("clone has %d files, want %d", n, s.CloneFiles)
				}
				return seconds(d), err
			},
		},
		{
			Name: "src/untar", Unit: "s", Better: LowerIsBetter, Reps: 3,
			Desc: "untar Go's " + src + " tree (tar -xf)",
			Func: func(ctx context.Context, e *Env) (float64, error) {
				tb, err := e.fx.srcTarball(ctx)
				if err != nil {
					return 0, err
				}
				d, err := e.Sh(ctx, untar, tb.path)
				if err != nil {
					return 0, err
				}
				n, err := countEntries(e.Dir)
				if err == nil && n < tb.entries {
					err = fmt.Errorf("untarred %d entries, want %d", n, tb.entries)
				}
				return seconds(d), err
			},
		},
		{
			Name: "src/rm", Unit: "s", Better: LowerIsBetter, Reps: 3,
			Desc: "rm -rf that tree",
			Func: func(ctx context.Context, e *Env) (float64, error) {
				tb, err := e.fx.srcTarball(ctx)
				if err != nil {
					return 0, err
				}
				if _, err := e.Sh(ctx, untar, tb.path); err != nil {
					return 0, err
				}
				d, err := e.Sh(ctx, removeTree)
				if err != nil {
					return 0, err
				}
				return seconds(d), expectEntries(e.Dir, 0)
			},
		},
	}
}

// warmRandom returns the random data file, in the page cache.
func (e *Env) warmRandom() (string, error) {
	path, err := e.fx.randomFile()
	if err != nil {
		return "", err
	}
	return path, warm(path)
}

// countEntries counts the files, directories and links under dir.
func countEntries(dir string) (int, error) {
	n := -1 // not dir itself
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		n++
		return err
	})
	return n, err
}

// countFiles counts the regular files under dir, skipping directories
// named skip.
func countFiles(dir, skip string) (int, error) {
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == skip {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			n++
		}
		return nil
	})
	return n, err
}

func expectEntries(dir string, want int) error {
	n, err := countEntries(dir)
	if err != nil {
		return err
	}
	if n != want {
		return fmt.Errorf("%s has %d entries, want %d", dir, n, want)
	}
	return nil
}

func expectSize(path string, want int64) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.Size() != want {
		return fmt.Errorf("%s is %d bytes, want %d", path, fi.Size(), want)
	}
	return nil
}
