package wsfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/computerfs/computerfs/kv"
)

// crashStore is a store that a test can "crash": Close it with files
// still open, as a SIGKILL would leave them, and open it again.
type crashStore struct {
	t   *testing.T
	dir string
	s   *kv.Store
}

func newCrashStore(t *testing.T) *crashStore {
	c := &crashStore{t: t, dir: filepath.Join(t.TempDir(), "store")}
	c.open()
	t.Cleanup(func() {
		if c.s != nil {
			c.s.Close()
		}
	})
	return c
}

func (c *crashStore) open() *FS {
	s, err := kv.Open(c.dir, kv.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		c.t.Fatal(err)
	}
	c.s = s
	return New(s, Owner{UID: 1000, GID: 1000})
}

func (c *crashStore) fs() *FS { return New(c.s, Owner{UID: 1000, GID: 1000}) }

// crash closes the store under open files (everything committed is
// kept, as after a SIGKILL once Pebble's WAL is written) and opens it again.
func (c *crashStore) crash() *FS {
	check(c.t, c.s.Close())
	c.s = nil
	return c.open()
}

func readString(t *testing.T, f *FS, p string) string {
	t.Helper()
	b, err := f.ReadFile(p)
	check(t, err)
	return string(b)
}

// TestBillyWholeFileWrites: a billy file opened with O_TRUNC, or
// truncated to nothing, changes at once at Close; readers see the old
// content until then, and a crash before Close leaves the old content, not
// an empty or half-written file.
func TestBillyWholeFileWrites(t *testing.T) {
	c := newCrashStore(t)
	f := c.fs()
	check(t, f.Mkdir("/r", 0o755))
	check(t, f.WriteFile("/r/index", []byte("old index"), 0o644))
	check(t, f.WriteFile("/r/ref", []byte("old ref\n"), 0o644))
	b := f.Billy("/r")

	// Create (O_TRUNC), half written.
	idx, err := b.Create("index")
	check(t, err)
	_, err = idx.Write([]byte("new "))
	check(t, err)
	if got := readString(t, f, "/r/index"); got != "old index" {
		t.Fatalf("a reader during the write: %q", got)
	}
	// What the writer reads back is what it wrote.
	rw, err := b.OpenFile("index2", os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	check(t, err)
	_, err = rw.Write([]byte("abcdef"))
	check(t, err)
	_, err = rw.Seek(-3, io.SeekEnd)
	check(t, err)
	got, _ := io.ReadAll(rw)
	if string(got) != "def" {
		t.Fatalf("read back %q", got)
	}
	if _, err := f.Stat("/r/index2"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a file made by Create exists before Close: %v", err)
	}
	check(t, rw.Close())
	if got := readString(t, f, "/r/index2"); got != "abcdef" {
		t.Fatalf("after Close: %q", got)
	}

	// A ref rewritten as go-git's setRef does: lock, read, truncate, write.
	ref, err := b.OpenFile("ref", os.O_RDWR|os.O_CREATE, 0o666)
	check(t, err)
	check(t, ref.Lock())
	got, _ = io.ReadAll(ref)
	if string(got) != "old ref\n" {
		t.Fatalf("ref read %q", got)
	}
	_, err = ref.Seek(0, io.SeekStart)
	check(t, err)
	check(t, ref.Truncate(0))
	_, err = ref.Write([]byte("new"))
	check(t, err)
	if got := readString(t, f, "/r/ref"); got != "old ref\n" {
		t.Fatalf("a reader during the ref's rewrite: %q", got)
	}

	// A new file, half written.
	nf, err := b.Create("refs/heads/new")
	check(t, err)
	_, err = nf.Write([]byte("0123"))
	check(t, err)

	// The daemon dies: none of the three was closed.
	f = c.crash()
	for p, want := range map[string]string{"/r/index": "old index", "/r/ref": "old ref\n", "/r/index2": "abcdef"} {
		if got := readString(t, f, p); got != want {
			t.Fatalf("%s after a crash during its rewrite: %q, want %q", p, got, want)
		}
	}
	if _, err := f.Stat("/r/refs/heads/new"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a file being made exists after a crash: %v", err)
	}

	// Closed, the whole new content is there, in one journal record.
	b = f.Billy("/r")
	before := c.s.LastSeq()
	idx, err = b.Create("index")
	check(t, err)
	for range 100 {
		_, err = idx.Write([]byte("0123456789"))
		check(t, err)
	}
	check(t, idx.Close())
	if got := readString(t, f, "/r/index"); got != strings.Repeat("0123456789", 100) {
		t.Fatalf("after Close: %d bytes", len(got))
	}
	if n := c.s.LastSeq() - before; n != 1 {
		t.Fatalf("a whole-file write made %d journal records, want 1", n)
	}
}

// TestBillyLargeWriteStreams: past BufferMax, a file opened with O_TRUNC
// is written as it comes instead of held in memory.
func TestBillyLargeWriteStreams(t *testing.T) {
	old := BufferMax
	BufferMax = 1000
	t.Cleanup(func() { BufferMax = old })
	f := newFS(t)
	b := f.Billy("/")
	w, err := b.Create("big")
	check(t, err)
	chunk := bytes.Repeat([]byte("x"), 300)
	for range 4 {
		_, err = w.Write(chunk)
		check(t, err)
	}
	if a, err := f.Stat("/big"); err != nil || a.Size != 1200 {
		t.Fatalf("past BufferMax, the file is not written as it comes: %v %v", a.Size, err)
	}
	_, err = w.Write(chunk)
	check(t, err)
	check(t, w.Close())
	if a, _ := f.Stat("/big"); a.Size != 1500 {
		t.Fatalf("size %d, want 1500", a.Size)
	}
}

// freezeFS stops the process, as far as one file is concerned, in the
// middle of writing it: a Write that would take the file past after bytes
// writes up to there and then never returns (nor is the file closed).
type freezeFS struct {
	billy.Filesystem
	target string
	after  int
	frozen chan struct{}
	once   sync.Once
}

func (z *freezeFS) Create(name string) (billy.File, error) {
	return z.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
}

func (z *freezeFS) OpenFile(name string, flag int, perm os.FileMode) (billy.File, error) {
	f, err := z.Filesystem.OpenFile(name, flag, perm)
	if err != nil || name != z.target {
		return f, err
	}
	return &freezeFile{File: f, z: z}, nil
}

type freezeFile struct {
	billy.File
	z *freezeFS
	n int
}

func (f *freezeFile) Write(p []byte) (int, error) {
	if f.n+len(p) <= f.z.after {
		n, err := f.File.Write(p)
		f.n += n
		return n, err
	}
	f.File.Write(p[:f.z.after-f.n])
	f.z.once.Do(func() { close(f.z.frozen) })
	select {} // the process is gone
}

// TestGoGitCrashMidWrite runs go-git's own writes of the index, a branch
// (replaced, and checked against its old value) and a new branch, and
// "kills" the process in the middle of each: the repository stays as it
// was, never with a truncated index or an empty ref.
func TestGoGitCrashMidWrite(t *testing.T) {
	c := newCrashStore(t)
	f := c.fs()
	wt := f.Billy("/repo")
	dot, _ := wt.Chroot(".git")
	repo, err := git.Init(filesystem.NewStorage(dot, cache.NewObjectLRUDefault()), wt)
	check(t, err)
	w, err := repo.Worktree()
	check(t, err)
	for _, n := range []string{"a", "b", "c"} {
		check(t, f.WriteFile("/repo/"+n, []byte(strings.Repeat(n, 100)), 0o644))
		_, err = w.Add(n)
		check(t, err)
	}
	sig := &object.Signature{Name: "t", Email: "t@x", When: time.Unix(1e9, 0)}
	first, err := w.Commit("first", &git.CommitOptions{Author: sig})
	check(t, err)
	oldIndex := readString(t, f, "/repo/.git/index")
	head, err := repo.Head()
	check(t, err)
	branch := head.Name()

	steps := []struct {
		file  string
		after int
		do    func(st *filesystem.Storage) error
	}{
		{"index", 40, func(st *filesystem.Storage) error {
			idx, err := st.Index()
			if err != nil {
				return err
			}
			idx.Entries = idx.Entries[:1]
			return st.SetIndex(idx)
		}},
		{branch.String(), 20, func(st *filesystem.Storage) error {
			return st.CheckAndSetReference(plumbing.NewHashReference(branch, plumbing.NewHash(strings.Repeat("1", 40))),
				plumbing.NewHashReference(branch, first))
		}},
		{branch.String(), 20, func(st *filesystem.Storage) error {
			return st.SetReference(plumbing.NewHashReference(branch, plumbing.NewHash(strings.Repeat("2", 40))))
		}},
		{"refs/heads/other", 20, func(st *filesystem.Storage) error {
			return st.SetReference(plumbing.NewHashReference("refs/heads/other", first))
		}},
	}
	for _, step := range steps {
		z := &freezeFS{Filesystem: f.Billy("/repo/.git"), target: step.file, after: step.after, frozen: make(chan struct{})}
		st := filesystem.NewStorage(z, cache.NewObjectLRUDefault())
		done := make(chan error, 1)
		go func() { done <- step.do(st) }()
		select {
		case <-z.frozen:
		case err := <-done:
			t.Fatalf("%s: the write finished without reaching byte %d: %v", step.file, step.after, err)
		}
		f = c.crash()

		if got := readString(t, f, "/repo/.git/index"); got != oldIndex {
			t.Fatalf("%s: the index after a crash is %d bytes, was %d", step.file, len(got), len(oldIndex))
		}
		wt = f.Billy("/repo")
		dot, _ = wt.Chroot(".git")
		repo, err := git.Open(filesystem.NewStorage(dot, cache.NewObjectLRUDefault()), wt)
		check(t, err)
		idx, err := repo.Storer.Index()
		if err != nil || len(idx.Entries) != 3 {
			t.Fatalf("%s: index after a crash: %v", step.file, err)
		}
		h, err := repo.Head()
		if err != nil || h.Hash() != first {
			t.Fatalf("%s: HEAD after a crash: %v %v", step.file, h, err)
		}
		if _, err := repo.Reference("refs/heads/other", false); !errors.Is(err, plumbing.ErrReferenceNotFound) {
			t.Fatalf("%s: a branch being made exists after a crash: %v", step.file, err)
		}
		if _, err := f.Stat("/repo/.git/refs/heads/other"); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s: the file of a branch being made exists after a crash: %v", step.file, err)
		}
		w, err := repo.Worktree()
		check(t, err)
		if st, err := w.Status(); err != nil || !st.IsClean() {
			t.Fatalf("%s: status after a crash: %v %v", step.file, st, err)
		}
	}
}

// BenchmarkGoGitSetIndex: go-git writing the index of a 2,000-file
// checkout through Billy, as the syncer does after staging.
func BenchmarkGoGitSetIndex(b *testing.B) {
	f := newFS(b)
	wt := f.Billy("/repo")
	dot, _ := wt.Chroot(".git")
	st := filesystem.NewStorage(dot, cache.NewObjectLRUDefault())
	if _, err := git.Init(st, wt); err != nil {
		b.Fatal(err)
	}
	idx, err := st.Index()
	check(b, err)
	for i := range 2000 {
		e := idx.Add(fmt.Sprintf("src/pkg%03d/file%04d.go", i%100, i))
		e.Hash = plumbing.NewHash(fmt.Sprintf("%040x", i))
		e.ModifiedAt = time.Unix(1e9, 0)
	}
	b.ResetTimer()
	for range b.N {
		check(b, st.SetIndex(idx))
	}
	if a, err := f.Stat("/repo/.git/index"); err == nil {
		b.ReportMetric(float64(a.Size), "index-bytes")
	}
}
