package fstest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Stress: goroutines and child processes create, rename, link and delete
// in the same few directories at once; afterwards the tree must be
// consistent.

// StressOptions tunes Stress. Zero fields take defaults.
type StressOptions struct {
	// Goroutines is the number of worker goroutines in this process
	// (default 4).
	Goroutines int
	// Procs is the number of worker child processes (default 2).
	Procs int
	// Duration bounds the run (default 2s).
	Duration time.Duration
	// OpsPerWorker bounds each worker's operations (default 0: only the
	// duration bounds them).
	OpsPerWorker int
	// Seed makes the workers' choices (they still race).
	Seed int64
}

const (
	stressDirs  = 3 // top directories d0..d2, never removed
	stressNames = 8 // n0..n7 in each, files or directories
	stressSub   = 2 // x0, x1 inside the n* directories
)

// Stress runs the workers in a fresh subdirectory of dir, then checks the
// tree: every listed entry stats with the listed type, no directory lists
// a name twice, the link count of every file equals the number of its
// names found, every directory's link count is 2 plus its subdirectories,
// and the tree can be removed completely.
func Stress(t *testing.T, dir string, opts StressOptions) {
	t.Helper()
	guardHelper()
	if opts.Goroutines <= 0 {
		opts.Goroutines = 4
	}
	if opts.Procs < 0 {
		opts.Procs = 0
	} else if opts.Procs == 0 {
		opts.Procs = 2
	}
	if opts.Duration <= 0 {
		opts.Duration = 2 * time.Second
	}
	root, err := os.MkdirTemp(dir, "stress-")
	if err != nil {
		t.Fatalf("stress: %v", err)
	}
	t.Cleanup(func() { removeAll(root) })
	for i := 0; i < stressDirs; i++ {
		if err := xMkdir(filepath.Join(root, fmt.Sprintf("d%d", i)), 0o777); err != nil {
			t.Fatalf("stress: %v", err)
		}
	}

	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []string
	total := 0
	report := func(who string, n int, es []string) {
		mu.Lock()
		defer mu.Unlock()
		total += n
		for _, e := range es {
			if len(errs) < 30 {
				errs = append(errs, who+": "+e)
			}
		}
	}
	for p := 0; p < opts.Procs; p++ {
		h, err := startHelper(nil, []hop{{Op: "stress", Path: root, Seed: opts.Seed*1000 + int64(p) + 500,
			Len: int64(opts.Duration), Off: int64(opts.OpsPerWorker)}})
		if err != nil {
			t.Fatalf("stress: starting a child: %v", err)
		}
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			who := fmt.Sprintf("process %d", p)
			r, err := h.next()
			if err != nil {
				report(who, 0, []string{err.Error()})
				h.kill()
				return
			}
			if err := h.wait(); err != nil {
				report(who, 0, []string{err.Error()})
			}
			report(who, r.Pid, r.Names)
		}(p)
	}
	for g := 0; g < opts.Goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			n, es := stressWorker(root, opts.Seed*1000+int64(g), opts.Duration, opts.OpsPerWorker)
			var s []string
			for _, e := range es {
				s = append(s, e.Error())
			}
			report(fmt.Sprintf("goroutine %d", g), n, s)
		}(g)
	}
	wg.Wait()
	for _, e := range errs {
		t.Errorf("stress: unexpected error: %s", e)
	}
	if total == 0 {
		t.Fatalf("stress: no operations ran")
	}
	t.Logf("stress: %d operations by %d goroutines and %d processes", total, opts.Goroutines, opts.Procs)
	for _, problem := range checkTree(root) {
		t.Errorf("stress: inconsistent tree: %s", problem)
	}
	if err := removeAll(root); err != nil {
		t.Errorf("stress: removing the tree: %v", err)
	}
	var st unix.Stat_t
	if err := xLstat(root, &st); !errors.Is(err, unix.ENOENT) {
		t.Errorf("stress: the tree is still there after removing it: %v", errString(err))
	}
}

// stressWorker runs random namespace operations below root until d has
// passed or maxOps operations ran (when maxOps > 0). It returns the number
// of operations and the unexpected errors (at most 10).
func stressWorker(root string, seed int64, d time.Duration, maxOps int) (int, []error) {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5354524553530000))
	deadline := time.Now().Add(d)
	top := func() string {
		return filepath.Join(root, fmt.Sprintf("d%d", rng.IntN(stressDirs)), fmt.Sprintf("n%d", rng.IntN(stressNames)))
	}
	deep := func() string { return filepath.Join(top(), fmt.Sprintf("x%d", rng.IntN(stressSub))) }
	var errs []error
	n := 0
	// Errors that races and random choices legitimately produce (ELOOP:
	// the symlinks all point to "n0", which may be a symlink itself).
	expected := []unix.Errno{unix.ENOENT, unix.EEXIST, unix.ENOTEMPTY, unix.ENOTDIR, unix.EISDIR, unix.ELOOP}
	check := func(what, p string, err error, extra ...unix.Errno) {
		if err == nil {
			return
		}
		for _, e := range append(expected, extra...) {
			if errors.Is(err, e) {
				return
			}
		}
		if len(errs) < 10 {
			errs = append(errs, fmt.Errorf("%s %s: %s", what, strings.TrimPrefix(p, root), errString(err)))
		}
	}
	data := make([]byte, 3000)
	for ; time.Now().Before(deadline) && (maxOps <= 0 || n < maxOps); n++ {
		switch k := rng.IntN(100); {
		case k < 20: // create or overwrite a file
			p := top()
			if rng.IntN(4) == 0 {
				p = deep()
			}
			fd, err := xOpen(p, unix.O_CREAT|unix.O_WRONLY|unix.O_TRUNC, 0o644)
			check("create", p, err)
			if err == nil {
				_, err = xWrite(fd, data[:rng.IntN(len(data))])
				check("write", p, err)
				unix.Close(fd)
			}
		case k < 30:
			p := top()
			if rng.IntN(3) == 0 {
				p = deep()
			}
			check("mkdir", p, xMkdir(p, 0o777))
		case k < 37:
			p := top()
			if rng.IntN(3) == 0 {
				p = deep()
			}
			check("rmdir", p, xRmdir(p))
		case k < 47:
			p := top()
			if rng.IntN(3) == 0 {
				p = deep()
			}
			check("unlink", p, xUnlink(p))
		case k < 65:
			a, b := top(), top()
			check("rename", a+" -> "+b, xRename(a, b))
		case k < 68:
			a, b := top(), top()
			check("exchange", a+" <-> "+b, xRename2(a, b, unix.RENAME_EXCHANGE))
		case k < 80:
			a, b := top(), top()
			if rng.IntN(3) == 0 {
				b = deep()
			}
			check("link", a+" -> "+b, xLink(a, b), unix.EPERM) // EPERM: a is a directory
		case k < 85:
			p := top()
			check("symlink", p, xSymlink("n0", p))
		case k < 95: // list and stat everything in one directory
			d := filepath.Join(root, fmt.Sprintf("d%d", rng.IntN(stressDirs)))
			names, err := listNames(d)
			check("readdir", d, err)
			for _, name := range names {
				var st unix.Stat_t
				check("lstat", name, xLstat(filepath.Join(d, name), &st))
			}
		default:
			p := top()
			check("truncate", p, xTruncate(p, int64(rng.IntN(5000))))
		}
	}
	return n, errs
}

// checkTree walks root and returns the inconsistencies found.
func checkTree(root string) []string {
	var problems []string
	bad := func(format string, args ...any) {
		if len(problems) < 30 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	names := map[uint64][]string{} // non-directory inode -> names
	nlinks := map[uint64]uint64{}
	var walk func(d string)
	walk = func(d string) {
		ents, err := listDir(d)
		if err != nil {
			bad("listing %s: %s", d, errString(err))
			return
		}
		seen := map[string]bool{}
		subdirs := 0
		for _, e := range ents {
			if seen[e.Name] {
				bad("%s lists %q twice", d, e.Name)
			}
			seen[e.Name] = true
			if e.Name == "." || e.Name == ".." {
				continue
			}
			p := filepath.Join(d, e.Name)
			var st unix.Stat_t
			if err := xLstat(p, &st); err != nil {
				bad("listed %s does not stat: %s", p, errString(err))
				continue
			}
			if e.Type != unix.DT_UNKNOWN && e.Type != dtypeOf(st.Mode) {
				bad("%s: d_type %d but lstat says %s", p, e.Type, typeOf(st.Mode))
			}
			if e.Ino != st.Ino {
				bad("%s: d_ino %d but lstat says %d", p, e.Ino, st.Ino)
			}
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				subdirs++
				walk(p)
				continue
			}
			names[st.Ino] = append(names[st.Ino], p)
			nlinks[st.Ino] = uint64(st.Nlink)
		}
		if !seen["."] || !seen[".."] {
			bad("%s does not list . and ..", d)
		}
		var st unix.Stat_t
		if err := xLstat(d, &st); err != nil {
			bad("lstat %s: %s", d, errString(err))
		} else if uint64(st.Nlink) != uint64(2+subdirs) {
			bad("%s has nlink %d with %d subdirectories", d, st.Nlink, subdirs)
		}
	}
	walk(root)
	inos := make([]uint64, 0, len(names))
	for ino := range names {
		inos = append(inos, ino)
	}
	sort.Slice(inos, func(i, j int) bool { return inos[i] < inos[j] })
	for _, ino := range inos {
		if uint64(len(names[ino])) != nlinks[ino] {
			bad("inode %d has nlink %d but %d names: %q", ino, nlinks[ino], len(names[ino]), names[ino])
		}
	}
	return problems
}
