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
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/computerfs/computerfs/kv"
)

func newFS(t testing.TB) *FS {
	t.Helper()
	s, err := kv.Open(t.TempDir()+"/store", kv.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return New(s, Owner{UID: 1000, GID: 1000})
}

func check(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantErr(t testing.TB, what string, err error, errno syscall.Errno) {
	t.Helper()
	if !errors.Is(err, errno) {
		t.Fatalf("%s: got %v, want %v", what, err, errno)
	}
	var pe *fs.PathError
	var le *os.LinkError
	if !errors.As(err, &pe) && !errors.As(err, &le) {
		t.Fatalf("%s: %T is not a path error", what, err)
	}
}

// inBothModes runs a test on a plain FS and on one in exclusive use,
// which remembers directories: both must behave the same.
func inBothModes(t *testing.T, fn func(t *testing.T, f *FS)) {
	t.Run("shared", func(t *testing.T) { fn(t, newFS(t)) })
	t.Run("exclusive", func(t *testing.T) {
		f := newFS(t)
		f.SetExclusive()
		fn(t, f)
	})
}

func TestFilesAndDirectories(t *testing.T) { inBothModes(t, testFilesAndDirectories) }

func testFilesAndDirectories(t *testing.T, f *FS) {
	check(t, f.MkdirAll("/a/b/c", 0o755))
	check(t, f.MkdirAll("a/b/c/", 0o755)) // exists: fine
	check(t, f.WriteFile("/a/b/file", []byte("hello"), 0o640))
	a, err := f.Stat("a/./b//file")
	check(t, err)
	if a.Size != 5 || a.Mode != kv.S_IFREG|0o640 || a.Uid != 1000 || a.Gid != 1000 {
		t.Fatalf("stat: %+v", a)
	}
	wantErr(t, "mkdir over a file", f.MkdirAll("/a/b/file/x", 0o755), syscall.ENOTDIR)
	wantErr(t, "mkdir existing", f.Mkdir("/a", 0o755), syscall.EEXIST)
	if !errors.Is(f.Mkdir("/a", 0o755), fs.ErrExist) {
		t.Fatal("EEXIST is not fs.ErrExist")
	}
	_, err = f.Stat("/nope")
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}

	// Open flags.
	_, err = f.Open("/a/b/file", O_WRONLY|O_CREATE|O_EXCL, 0o644)
	wantErr(t, "O_EXCL on an existing file", err, syscall.EEXIST)
	_, err = f.Open("/a", O_WRONLY, 0)
	wantErr(t, "open a directory for writing", err, syscall.EISDIR)
	ap, err := f.Open("/a/b/file", O_WRONLY|O_APPEND, 0)
	check(t, err)
	_, err = ap.Write([]byte(" world"))
	check(t, err)
	check(t, ap.Close())
	ro, err := f.Open("/a/b/file", O_RDONLY, 0)
	check(t, err)
	_, err = ro.Write([]byte("x"))
	wantErr(t, "write to a read-only file", err, syscall.EBADF)
	got, err := io.ReadAll(ro)
	check(t, err)
	if string(got) != "hello world" {
		t.Fatalf("append: %q", got)
	}
	tr, err := f.Open("/a/b/file", O_RDWR|O_TRUNC, 0)
	check(t, err)
	if st, _ := tr.Stat(); st.Size != 0 {
		t.Fatalf("O_TRUNC left %d bytes", st.Size)
	}
	// Buffered sequential writes, then a write elsewhere, then reads.
	big := bytes.Repeat([]byte("0123456789abcdef"), 3*kv.ChunkSize/8+3)
	for i := 0; i < len(big); i += 1000 {
		_, err := tr.Write(big[i:min(i+1000, len(big))])
		check(t, err)
	}
	_, err = tr.WriteAt([]byte("XY"), 3)
	check(t, err)
	copy(big[3:], "XY")
	check(t, tr.Close())
	got, err = f.ReadFile("/a/b/file")
	check(t, err)
	if !bytes.Equal(got, big) {
		t.Fatal("buffered writes read back wrong")
	}

	// Rename, link, remove.
	check(t, f.Rename("/a/b/file", "/a/moved"))
	check(t, f.Link("/a/moved", "/a/hard"))
	if a, _ := f.Stat("/a/hard"); a.Nlink != 2 {
		t.Fatalf("nlink %d after link", a.Nlink)
	}
	wantErr(t, "rename missing", f.Rename("/a/none", "/a/x"), syscall.ENOENT)
	wantErr(t, "remove non-empty dir", f.Remove("/a"), syscall.ENOTEMPTY)
	check(t, f.RemoveAll("/a"))
	check(t, f.RemoveAll("/a")) // missing: fine
	var names []string
	check(t, f.ReadDir("/", "", func(d kv.Dirent) bool { names = append(names, d.Name); return true }))
	if len(names) != 0 {
		t.Fatalf("root after RemoveAll: %q", names)
	}
	if p, err := f.s.Check(10); err != nil || len(p) > 0 {
		t.Fatalf("fsck: %v %q", err, p)
	}
}

func TestRemoveAllLargeTree(t *testing.T) {
	f := newFS(t)
	for i := range 7 {
		check(t, f.MkdirAll(fmt.Sprintf("/t/d%d", i), 0o755))
	}
	for i := range 3000 {
		check(t, f.WriteFile(fmt.Sprintf("/t/d%d/%s%d", i%7, strings.Repeat("x", i%50), i), nil, 0o644))
	}
	check(t, f.RemoveAll("/t"))
	if _, err := f.Stat("/t"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("tree still there: %v", err)
	}
}

func TestSymlinksStayInside(t *testing.T) { inBothModes(t, testSymlinksStayInside) }

func testSymlinksStayInside(t *testing.T, f *FS) {
	check(t, f.MkdirAll("/a/b", 0o755))
	check(t, f.WriteFile("/f", []byte("top"), 0o644))
	check(t, f.WriteFile("/a/b/g", []byte("deep"), 0o644))
	for link, target := range map[string]string{
		"/up": "../../../..", "/abs": "/a/b", "/a/b/rel": "../../f", "/host": "/etc/passwd",
		"/loop": "loop", "/dangle": "nothing/here", "/dot": ".",
	} {
		check(t, f.Symlink(target, link))
	}
	read := func(p string) string {
		b, err := f.ReadFile(p)
		if err != nil {
			return "error: " + err.Error()
		}
		return string(b)
	}
	for p, want := range map[string]string{
		"/up/f":                "top",  // ".." stops at the workspace root
		"/up/up/up/a/b/g":      "deep", // and so on
		"/abs/g":               "deep",
		"/a/b/rel":             "top",
		"/dot/dot/a/b/g":       "deep",
		"/../../f":             "top",
		"/a/../../a/b/../../f": "top",
	} {
		if got := read(p); got != want {
			t.Errorf("%s: %q, want %q", p, got, want)
		}
	}
	_, err := f.Stat("/host")
	wantErr(t, "absolute link to a host path", err, syscall.ENOENT)
	_, err = f.Stat("/loop")
	wantErr(t, "link loop", err, syscall.ELOOP)
	if a, err := f.Lstat("/loop"); err != nil || a.Mode&kv.S_IFMT != kv.S_IFLNK {
		t.Fatalf("lstat of a link: %+v %v", a, err)
	}
	if tg, err := f.Readlink("/abs"); err != nil || tg != "/a/b" {
		t.Fatalf("readlink: %q %v", tg, err)
	}
	// O_CREATE through a dangling link creates its target, inside.
	check(t, f.MkdirAll("/nothing", 0o755))
	w, err := f.Open("/dangle", O_WRONLY|O_CREATE, 0o600)
	check(t, err)
	w.Write([]byte("made"))
	check(t, w.Close())
	if got := read("/nothing/here"); got != "made" {
		t.Fatalf("create through a dangling link: %q", got)
	}
	// Removing a link removes the link only.
	check(t, f.Remove("/abs"))
	if got := read("/a/b/g"); got != "deep" {
		t.Fatal("removing a link removed its target")
	}
}

// TestResolveMatchesKernel builds the same tree in the store and in a
// directory on disk, then resolves paths in both: the store by Stat, the
// disk by openat2 with RESOLVE_IN_ROOT, the kernel's own chroot-style
// resolution. They must agree on which file every path names.
func TestResolveMatchesKernel(t *testing.T) {
	f, root, paths := kernelTwin(t)
	for _, p := range paths {
		compareResolve(t, f, root, p)
	}
	f.SetExclusive()
	for range 2 { // the second pass starts from remembered directories
		for _, p := range paths {
			compareResolve(t, f, root, p)
		}
	}
}

func FuzzResolve(f *testing.F) {
	for _, p := range []string{"/a/b/../c", "l1/b", "l2/../../x", "loop", "a/up/up/f", "l3/l3/f", "/", ""} {
		f.Add(p)
	}
	fs, root, _ := kernelTwin(f)
	f.Fuzz(func(t *testing.T, p string) {
		if strings.IndexByte(p, 0) >= 0 || len(p) > 512 {
			return
		}
		compareResolve(t, fs, root, p)
	})
}

func kernelTwin(t testing.TB) (*FS, string, []string) {
	f := newFS(t)
	root := t.TempDir()
	dirs := []string{"a", "a/b", "a/b/c", "d"}
	files := []string{"f", "a/g", "a/b/h", "d/i"}
	links := map[string]string{
		"l1": "a", "l2": "/a/b", "l3": "..", "a/up": "..", "a/b/abs": "/f", "loop": "loop",
		"dangle": "zz", "d/rel": "../a/b/c", "d/chain": "../l1/b/abs", "self": ".", "a/b/c/top": "/",
	}
	for _, d := range dirs {
		check(t, f.Mkdir(d, 0o755))
		check(t, os.Mkdir(filepath.Join(root, d), 0o755))
	}
	for _, p := range files {
		check(t, f.WriteFile(p, []byte(p), 0o644))
		check(t, os.WriteFile(filepath.Join(root, p), []byte(p), 0o644))
	}
	var paths []string
	for l, target := range links {
		check(t, f.Symlink(target, l))
		check(t, os.Symlink(target, filepath.Join(root, l)))
		paths = append(paths, l, l+"/f", l+"/b", l+"/../f", l+"/g", l+"/b/h")
	}
	paths = append(paths, "/", "", ".", "..", "../../f", "a/b/c/top/d/i", "d/chain", "d/rel/../h",
		"a/up/a/up/l2/abs", "l3/l3/l1/b/c", "f/x", "a/b/h/..", "self/self/a")
	return f, root, paths
}

func compareResolve(t *testing.T, f *FS, root, p string) {
	t.Helper()
	ino, _, serr := f.Resolve(p)
	rootFd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY, 0)
	check(t, err)
	defer unix.Close(rootFd)
	rel := strings.TrimLeft(p, "/")
	if rel == "" {
		rel = "."
	}
	fd, kerr := unix.Openat2(rootFd, rel, &unix.OpenHow{Flags: unix.O_PATH, Resolve: unix.RESOLVE_IN_ROOT})
	if kerr != nil {
		if serr == nil {
			t.Fatalf("%q: the kernel says %v, the store resolves it", p, kerr)
		}
		if !errors.Is(serr, kerr) {
			t.Fatalf("%q: the kernel says %v, the store %v", p, kerr, serr)
		}
		return
	}
	defer unix.Close(fd)
	if serr != nil {
		t.Fatalf("%q: the kernel resolves it, the store says %v", p, serr)
	}
	real, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	check(t, err)
	want, _ := filepath.Rel(root, real)
	wantIno, _, err := f.Resolve(want)
	check(t, err)
	if ino != wantIno {
		t.Fatalf("%q: the kernel resolves it to %q (inode %d in the store), the store to inode %d", p, want, wantIno, ino)
	}
}

type recorder struct{ events []string }

func (r *recorder) Changed(ino uint64) { r.events = append(r.events, fmt.Sprintf("ino %d", ino)) }
func (r *recorder) EntryChanged(dir uint64, name string) {
	r.events = append(r.events, fmt.Sprintf("entry %d/%s", dir, name))
}

// TestNotifier: every change through the FS is announced, so the kernel's
// cache of a mounted workspace can be kept right.
func TestNotifier(t *testing.T) {
	f := newFS(t)
	check(t, f.Mkdir("/d", 0o755))
	d, _ := f.Stat("/d")
	r := &recorder{}
	f.SetNotifier(r)
	expect := func(what string, want ...string) {
		t.Helper()
		if strings.Join(r.events, ", ") != strings.Join(want, ", ") {
			t.Fatalf("%s: events %q, want %q", what, r.events, want)
		}
		r.events = nil
	}
	check(t, f.WriteFile("/d/f", []byte("x"), 0o644))
	a, _ := f.Stat("/d/f")
	file, dir := fmt.Sprintf("ino %d", a.Ino), fmt.Sprintf("ino %d", d.Ino)
	expect("create with content", fmt.Sprintf("entry %d/f", d.Ino), dir)
	check(t, f.WriteFile("/d/f", []byte("yz"), 0o644))
	expect("rewrite", file)
	check(t, f.Chmod("/d/f", 0o600))
	expect("chmod", file)
	check(t, f.Rename("/d/f", "/d/g"))
	expect("rename", fmt.Sprintf("entry %d/f", d.Ino), dir, fmt.Sprintf("entry %d/g", d.Ino), dir)
	check(t, f.Remove("/d/g"))
	expect("remove", fmt.Sprintf("entry %d/g", d.Ino), dir)
}

// TestRootPrefix: with the sandbox's view (/workspace), absolute links
// into the workspace work as they do in the sandbox, and links to other
// absolute paths lead nowhere.
func TestRootPrefix(t *testing.T) {
	f := newFS(t)
	f.SetRootPrefix("/workspace")
	check(t, f.MkdirAll("/src", 0o755))
	check(t, f.WriteFile("/src/x", []byte("x"), 0o644))
	check(t, f.Symlink("/workspace/src/x", "/abs"))
	check(t, f.Symlink("/workspace", "/root-link"))
	check(t, f.Symlink("/etc/passwd", "/host"))
	check(t, f.Symlink("/workspacefoo/x", "/near"))
	check(t, f.Symlink("/workspace/new", "/dangle"))
	if d, err := f.ReadFile("/abs"); err != nil || string(d) != "x" {
		t.Fatalf("link into the workspace: %q %v", d, err)
	}
	if d, err := f.ReadFile("/root-link/src/x"); err != nil || string(d) != "x" {
		t.Fatalf("link to the workspace root: %q %v", d, err)
	}
	for _, p := range []string{"/host", "/near"} {
		if _, err := f.Stat(p); !errors.Is(err, syscall.ENOENT) {
			t.Fatalf("%s: %v, want ENOENT", p, err)
		}
	}
	w, err := f.Open("/dangle", O_WRONLY|O_CREATE, 0o644)
	check(t, err)
	check(t, w.Close())
	if _, err := f.Stat("/new"); err != nil {
		t.Fatalf("create through /workspace/new: %v", err)
	}
	if _, err := f.Open("/host", O_WRONLY|O_CREATE, 0o644); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("create through a link out of the workspace: %v", err)
	}
	g := f.As(kv.Actor{Entry: "x"})
	if d, err := g.ReadFile("/abs"); err != nil || string(d) != "x" {
		t.Fatalf("As keeps the prefix: %q %v", d, err)
	}
}
