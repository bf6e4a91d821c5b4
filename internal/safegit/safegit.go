// Package safegit opens a git checkout of a workspace for the daemon's own
// work on it (refresh, push-back). The workspace belongs to the agent, who
// may write every byte of its .git: so nothing there may choose where the
// daemon connects, which other repository it reads, or how much memory it
// spends.
//
//   - The daemon never reads .git/config. The repository's configuration
//     is built here: no remotes but the one a caller makes from the spec
//     (Remote), so no url, pushurl, insteadOf, include, includeIf,
//     submodule or pack setting of the agent's has any effect. go-git
//     runs no hooks, fsmonitor or filters.
//   - The checkout's directory and its .git must be directories reached
//     through no symbolic link (a .git that is a "gitdir:" file or a link
//     to another repository is refused), and a .git with
//     objects/info/alternates (another object store) is refused; the
//     storage is also given an empty file system for alternates.
//   - Metadata files are read with a size limit (MaxMetaFile, and
//     MaxWorktreeMeta for .gitignore, .gitmodules and .gitattributes),
//     objects larger than LargeObject are streamed rather than held in
//     memory, and pushes send no deltas (which would hold objects whole).
package safegit

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/memfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/storage"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/wsfs"
)

// Limits on what is read from a checkout.
const (
	// MaxMetaFile bounds a file of .git other than objects (index, HEAD,
	// refs, packed-refs, shallow): a 100,000-file index is about 10 MiB.
	MaxMetaFile = 256 << 20
	// MaxWorktreeMeta bounds .gitignore, .gitmodules and .gitattributes
	// files of the work tree, and .git/info/exclude.
	MaxWorktreeMeta = 16 << 20
	// LargeObject is the size past which objects are streamed from the
	// object store instead of read into memory.
	LargeObject = 1 << 20
)

// RemoteName is the name the spec's remote has (origin, as a clone
// names it: the remote-tracking refs are refs/remotes/origin/...).
const RemoteName = "origin"

// Checkout is an opened checkout.
type Checkout struct {
	Repo *git.Repository
	st   *store
}

// Open opens the checkout at dir of the workspace. url is the spec's: the
// only remote the repository has.
func Open(f *wsfs.FS, dir, url string) (*Checkout, error) {
	if err := RealDir(f, dir); err != nil {
		return nil, err
	}
	dotgit := path.Join(dir, ".git")
	a, err := f.Lstat(dotgit)
	if err != nil {
		return nil, fmt.Errorf("git: %s: %w", dotgit, err)
	}
	if !a.IsDir() {
		return nil, fmt.Errorf("git: %s is not a directory (a symbolic link or a gitdir file): the daemon works only on a .git of the checkout's own", dotgit)
	}
	alt := path.Join(dotgit, "objects/info/alternates")
	if _, err := f.Lstat(alt); err == nil {
		return nil, fmt.Errorf("git: %s exists: the daemon reads no other object store; remove it (git repack -a -d first, to copy what it borrows)", alt)
	}
	gitFS := &limitFS{Billy: f.Billy(dotgit), limit: dotgitLimit}
	wt := &limitFS{Billy: f.Billy(dir), limit: worktreeLimit}
	fst := filesystem.NewStorageWithOptions(gitFS, cache.NewObjectLRUDefault(), filesystem.Options{
		LargeObjectThreshold: LargeObject,
		AlternatesFS:         memfs.New(),
	})
	st := &store{Storage: fst, url: url}
	repo, err := git.Open(st, wt)
	if err != nil {
		fst.Close()
		return nil, fmt.Errorf("git: open %s: %w", dir, err)
	}
	return &Checkout{Repo: repo, st: st}, nil
}

// Close releases the storage's files.
func (c *Checkout) Close() error { return c.st.Close() }

// Remote is the spec's remote, with the given fetch refspecs.
func (c *Checkout) Remote(fetch ...config.RefSpec) *git.Remote {
	return git.NewRemote(c.st, &config.RemoteConfig{Name: RemoteName, URLs: []string{c.st.url}, Fetch: fetch})
}

// RealDir checks that every component of the workspace path dir is a
// directory, not a symbolic link: what the daemon writes below a source's
// directory must land there.
func RealDir(f *wsfs.FS, dir string) error {
	p := "/"
	for _, name := range strings.Split(strings.Trim(path.Clean("/"+dir), "/"), "/") {
		if name == "" {
			continue
		}
		p = path.Join(p, name)
		a, err := f.Lstat(p)
		if err != nil {
			return err
		}
		if a.Mode&kv.S_IFMT == kv.S_IFLNK {
			return fmt.Errorf("%s is a symbolic link, not a directory", p)
		}
		if !a.IsDir() {
			return fmt.Errorf("%s is not a directory", p)
		}
	}
	return nil
}

// store is the checkout's storage with a configuration of the daemon's
// own instead of .git/config.
type store struct {
	*filesystem.Storage
	url string
}

var _ storage.Storer = (*store)(nil)

// Config returns the daemon's configuration: a non-bare repository with
// the spec's remote, and no deltas in packs it writes (a push).
func (s *store) Config() (*config.Config, error) {
	c := config.NewConfig()
	c.Core.IsBare = false
	c.Pack.Window = 0
	c.Remotes[RemoteName] = &config.RemoteConfig{Name: RemoteName, URLs: []string{s.url},
		Fetch: []config.RefSpec{config.RefSpec("+refs/heads/*:refs/remotes/" + RemoteName + "/*")}}
	return c, nil
}

// ErrConfig is what writing the configuration returns: the daemon leaves
// .git/config to the agent and never reads it.
var ErrConfig = errors.New("git: the daemon does not read or write .git/config")

// SetConfig refuses.
func (s *store) SetConfig(*config.Config) error { return ErrConfig }

// Module refuses: the daemon does not open submodules' repositories.
func (s *store) Module(name string) (storage.Storer, error) {
	return nil, fmt.Errorf("git: submodule %q: the daemon does not open submodules", name)
}

// dotgitLimit is the most the daemon reads of a file of .git (-1: no
// limit; 0: never).
func dotgitLimit(rel string) int64 {
	switch {
	case rel == "objects" || strings.HasPrefix(rel, "objects/"):
		return -1
	case rel == "config":
		return 0
	case rel == "info/exclude":
		return MaxWorktreeMeta
	}
	return MaxMetaFile
}

func worktreeLimit(rel string) int64 {
	if rel == ".git" || strings.HasPrefix(rel, ".git/") {
		return dotgitLimit(strings.TrimPrefix(strings.TrimPrefix(rel, ".git"), "/"))
	}
	switch path.Base(rel) {
	case ".gitignore", ".gitmodules", ".gitattributes":
		return MaxWorktreeMeta
	}
	return -1
}

// limitFS is a directory of the workspace whose files are read with a
// limit that depends on their path.
type limitFS struct {
	*wsfs.Billy
	rel   string // below the directory the limit is for
	limit func(rel string) int64
}

func (l *limitFS) Open(name string) (billy.File, error) {
	return l.OpenFile(name, os.O_RDONLY, 0)
}

func (l *limitFS) OpenFile(name string, flag int, perm os.FileMode) (billy.File, error) {
	rel := strings.TrimPrefix(path.Join(l.rel, path.Clean("/"+name)), "/")
	max := l.limit(rel)
	if max == 0 {
		if rel == "config" {
			return nil, &fs.PathError{Op: "open", Path: name, Err: ErrConfig}
		}
		return nil, &fs.PathError{Op: "open", Path: name, Err: errors.New("not read by the daemon")}
	}
	f, err := l.Billy.OpenFile(name, flag, perm)
	if err != nil || max < 0 {
		return f, err
	}
	return &limitFile{File: f, left: max, max: max}, nil
}

// MaxTreeDepth is the deepest work-tree directory, and index entry, the
// daemon's git takes; MaxPathLen bounds a path's length. The agent makes
// trees of any depth (a million directories through the mount, an index
// entry of the sandbox's `git update-index`), and go-git's status and
// commit recurse a level deep on each, hold a path (for the index, every
// prefix of it) a level, and check every leading directory of a path
// before each read: a cost that grows with the cube of the depth (a
// status 280 levels deep took 25 s). Past these bounds a push-back stops
// with ErrTooDeep before go-git runs (CheckTree, CheckIndex).
const (
	MaxTreeDepth = 128
	MaxPathLen   = 16 << 10
)

// ErrTooDeep is what a work tree or an index past MaxTreeDepth or
// MaxPathLen gets.
var ErrTooDeep = fmt.Errorf("git: a path deeper than %d levels or longer than %d bytes: the daemon's git does not take it", MaxTreeDepth, MaxPathLen)

// TooDeep reports whether the path p is past MaxTreeDepth or MaxPathLen.
func TooDeep(p string) bool {
	return len(p) > MaxPathLen || strings.Count(p, "/") >= MaxTreeDepth
}

// CheckTree returns ErrTooDeep if the work tree at dir (its .git aside)
// has a directory past the bounds. It reads each directory once, by
// inode, keeping those to read on a list, and stops at the first too deep.
func CheckTree(f *wsfs.FS, dir string) error {
	a, err := f.Lstat(dir)
	if err != nil {
		return err
	}
	st := f.Store()
	type at struct {
		ino   uint64
		depth int
		len   int
	}
	todo := []at{{a.Ino, 0, 0}}
	for len(todo) > 0 {
		d := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		var tooDeep bool
		err := st.ReadDir(d.ino, "", func(e kv.Dirent) bool {
			if e.Type != kv.S_IFDIR || d.depth == 0 && e.Name == ".git" {
				return true
			}
			n := d.len + 1 + len(e.Name)
			if d.depth+1 >= MaxTreeDepth || n > MaxPathLen {
				tooDeep = true
				return false
			}
			todo = append(todo, at{e.Ino, d.depth + 1, n})
			return true
		})
		if tooDeep {
			return fmt.Errorf("%w (in %s)", ErrTooDeep, dir)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// CheckIndex returns ErrTooDeep if an entry of idx is past the bounds:
// what go-git's status and commit read before they walk.
func CheckIndex(idx *index.Index) error {
	for _, e := range idx.Entries {
		if TooDeep(e.Name) {
			return fmt.Errorf("%w (an index entry)", ErrTooDeep)
		}
	}
	return nil
}

// ReadDir refuses a directory past the bounds, so that go-git's walks of
// the work tree stop there.
func (l *limitFS) ReadDir(name string) ([]os.FileInfo, error) {
	if TooDeep(path.Join(l.rel, name)) {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: ErrTooDeep}
	}
	return l.Billy.ReadDir(name)
}

func (l *limitFS) Create(name string) (billy.File, error) {
	return l.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
}

func (l *limitFS) Chroot(p string) (billy.Filesystem, error) {
	b, err := l.Billy.Chroot(p)
	if err != nil {
		return nil, err
	}
	return &limitFS{Billy: b.(*wsfs.Billy), rel: strings.TrimPrefix(path.Join(l.rel, path.Clean("/"+p)), "/"), limit: l.limit}, nil
}

// ErrTooLarge is what reading past a metadata file's limit returns.
var ErrTooLarge = errors.New("git: file too large for the daemon to read")

type limitFile struct {
	billy.File
	left, max int64
}

func (f *limitFile) Read(p []byte) (int, error) {
	if f.left <= 0 {
		// One byte more tells a file of exactly max bytes from a longer one.
		var b [1]byte
		if n, _ := f.File.Read(b[:]); n > 0 {
			return 0, fmt.Errorf("%s: %w (over %d bytes)", f.Name(), ErrTooLarge, f.max)
		}
		return 0, io.EOF
	}
	if int64(len(p)) > f.left {
		p = p[:f.left]
	}
	n, err := f.File.Read(p)
	f.left -= int64(n)
	return n, err
}

func (f *limitFile) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > f.max {
		return 0, fmt.Errorf("%s: %w (over %d bytes)", f.Name(), ErrTooLarge, f.max)
	}
	return f.File.ReadAt(p, off)
}
