package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// Sizes are the sizes of the benchmarks' work: the full ones for the
// report, or small ones (quick mode) to exercise the harness in seconds.
type Sizes struct {
	Files      int      // files created, stat'ed and removed by shell commands
	TreeFanout int      // mkdir -p of a Fanout³ tree of directories
	BigMiB     int      // the file written, read, copied and overwritten with dd/cat/cp
	GitFiles   int      // files added and committed to a fresh git repository
	CloneFiles int      // files in the repository cloned by git clone
	SrcDirs    []string // parts of $(go env GOROOT) that are tarred, untarred and removed
	SysFiles   int      // files created, stat'ed and unlinked by the C program
	SeqMiB     int      // the file written and read sequentially by the C program
	RandMiB    int      // the file read at random by the C program
	RandReads  int      // number of random 4 KiB reads
}

// SizesFor returns the full sizes, or the quick ones.
func SizesFor(quick bool) Sizes {
	if quick {
		return Sizes{
			Files: 100, TreeFanout: 4, BigMiB: 16, GitFiles: 20, CloneFiles: 50,
			SrcDirs:  []string{"src/go"},
			SysFiles: 500, SeqMiB: 16, RandMiB: 16, RandReads: 5000,
		}
	}
	return Sizes{
		Files: 1000, TreeFanout: 10, BigMiB: 64, GitFiles: 100, CloneFiles: 500,
		SrcDirs:  []string{"src"},
		SysFiles: 10000, SeqMiB: 512, RandMiB: 512, RandReads: 200000,
	}
}

// fixtures are inputs made once per run, outside the targets, on demand.
type fixtures struct {
	dir      string
	sizes    Sizes
	cacheDir string
	log      func(format string, args ...any)

	random  lazy[string] // BigMiB of random bytes
	repo    lazy[string] // git repository with CloneFiles files
	tarball lazy[tarball]
	cprog   lazy[string] // the compiled C benchmark program
}

type tarball struct {
	path    string
	entries int // number of files, directories and links in it
}

// lazy makes a value once, on first use.
type lazy[T any] struct {
	once sync.Once
	v    T
	err  error
}

func (l *lazy[T]) get(make func() (T, error)) (T, error) {
	l.once.Do(func() { l.v, l.err = make() })
	return l.v, l.err
}

func makeFixtures(ctx context.Context, opts Options, sizes Sizes, log io.Writer) (*fixtures, error) {
	work := opts.WorkDir
	if work == "" {
		work = os.TempDir()
		if fi, err := os.Stat("/var/tmp"); err == nil && fi.IsDir() {
			work = "/var/tmp"
		}
	}
	dir, err := os.MkdirTemp(work, "computerfs-bench-fixtures-")
	if err != nil {
		return nil, err
	}
	cache := opts.CacheDir
	if cache == "" {
		if c, err := os.UserCacheDir(); err == nil {
			cache = filepath.Join(c, "computerfs-bench")
		} else {
			cache = filepath.Join(os.TempDir(), "computerfs-bench-cache")
		}
	}
	fx := &fixtures{dir: dir, sizes: sizes, cacheDir: cache,
		log: func(format string, args ...any) { fmt.Fprintf(log, "bench: "+format+"\n", args...) }}
	return fx, nil
}

func (fx *fixtures) remove() { os.RemoveAll(fx.dir) }

// randomFile returns the path of a file of BigMiB random bytes (random so
// that a compressing store gains nothing), read once so it is in the page
// cache. Callers that measure reading it should call warm first.
func (fx *fixtures) randomFile() (string, error) {
	return fx.random.get(func() (string, error) {
		path := filepath.Join(fx.dir, "random.bin")
		f, err := os.Create(path)
		if err != nil {
			return "", err
		}
		rng := rand.NewChaCha8([32]byte{'c', 'o', 'm', 'p', 'u', 't', 'e', 'r', 'f', 's'})
		if _, err := io.CopyN(f, rng, int64(fx.sizes.BigMiB)<<20); err != nil {
			f.Close()
			return "", err
		}
		return path, f.Close()
	})
}

// warm reads path so that it is in the page cache again (after a
// benchmark dropped the caches).
func warm(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(io.Discard, f)
	return err
}

// sourceFiles writes n files of source-like text, of varied sizes, into
// dir, spread over subdirectories of at most 25 files, deterministically.
func sourceFiles(dir string, n int, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 0x636673))
	words := strings.Fields("func return if else for range var const type struct interface map chan go defer select case switch package import nil err ctx int string byte error bool true false")
	for i := 0; i < n; i++ {
		sub := filepath.Join(dir, fmt.Sprintf("pkg%02d", i/25))
		if i%25 == 0 {
			if err := os.MkdirAll(sub, 0o755); err != nil {
				return err
			}
		}
		f, err := os.Create(filepath.Join(sub, fmt.Sprintf("file%03d.go", i)))
		if err != nil {
			return err
		}
		w := bufio.NewWriter(f)
		fmt.Fprintf(w, "package pkg%02d\n\n", i/25)
		size := 200 + rng.IntN(8000)
		for written := 0; written < size; {
			line := ""
			for k := 0; k < 1+rng.IntN(10); k++ {
				line += words[rng.IntN(len(words))] + " "
			}
			n, _ := fmt.Fprintf(w, "\t%s// %d\n", line, rng.IntN(1e6))
			written += n
		}
		if err := w.Flush(); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return nil
}

// cloneSource returns a git repository with CloneFiles files in three
// commits, to be cloned.
func (fx *fixtures) cloneSource(ctx context.Context) (string, error) {
	return fx.repo.get(func() (string, error) {
		dir := filepath.Join(fx.dir, "repo")
		fx.log("making a git repository with %d files in %s", fx.sizes.CloneFiles, dir)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return "", err
		}
		e := &Env{Dir: dir}
		if _, err := e.Output(ctx, "git", "init", "-q"); err != nil {
			return "", err
		}
		for c := 0; c < 3; c++ {
			if err := sourceFiles(dir, fx.sizes.CloneFiles, uint64(c)); err != nil {
				return "", err
			}
			if _, err := e.Output(ctx, "git", "add", "-A"); err != nil {
				return "", err
			}
			if _, err := e.Output(ctx, "git", "commit", "-q", "-m", fmt.Sprintf("commit %d", c)); err != nil {
				return "", err
			}
		}
		return dir, nil
	})
}

// srcTarball returns an uncompressed tarball of Sizes.SrcDirs of Go's own
// source tree, and the number of entries in it.
func (fx *fixtures) srcTarball(ctx context.Context) (tarball, error) {
	return fx.tarball.get(func() (tarball, error) {
		goroot := runtime.GOROOT()
		if out, err := exec.CommandContext(ctx, "go", "env", "GOROOT").Output(); err == nil {
			goroot = strings.TrimSpace(string(out))
		}
		if goroot == "" {
			return tarball{}, fmt.Errorf("cannot find GOROOT")
		}
		path := filepath.Join(fx.dir, "gosrc.tar")
		fx.log("making %s from %s/{%s}", path, goroot, strings.Join(fx.sizes.SrcDirs, ","))
		e := &Env{Dir: fx.dir}
		args := append([]string{"-C", goroot, "-cf", path}, fx.sizes.SrcDirs...)
		if _, err := e.Output(ctx, "tar", args...); err != nil {
			return tarball{}, err
		}
		list, err := e.Output(ctx, "tar", "-tf", path)
		if err != nil {
			return tarball{}, err
		}
		return tarball{path: path, entries: strings.Count(list, "\n")}, nil
	})
}
