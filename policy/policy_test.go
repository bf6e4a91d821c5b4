package policy

import (
	"errors"
	"io"
	"log/slog"
	"path"
	"strings"
	"syscall"
	"testing"

	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/spec"
)

func pol(deny, ro []string) *spec.Policy { return &spec.Policy{Deny: deny, ReadOnlyPaths: ro} }

func TestCoversMatchesSpec(t *testing.T) {
	globs := []string{"/secrets", "secrets", "*.pem", "/a/**/b", "**", "/x/*/y/**", "a?c", "/w/[ab]*", ".env", "/workspace/s", "pre*", "/d/*.go"}
	paths := []string{"/", "/secrets", "/secrets/token", "/x/secrets/k", "/k.pem", "/a/k.pem/c", "/a/b", "/a/x/y/b/z",
		"/x/q/y", "/x/q/y/z", "/abc", "/w/bx", "/w/cx", "/.env", "/s", "/s/t", "/prefix", "/d/x.go", "/d/e/x.go"}
	for _, g := range globs {
		c := New(&spec.Policy{Deny: []string{g}})
		for _, p := range paths {
			want := spec.MatchPath(g, p)
			if got := c.Denied(p) != nil; got != want {
				t.Errorf("deny %q, path %q: denied %v, spec.MatchPath %v", g, p, got, want)
			}
			// below: if anything strictly under p is covered, below says so
			if spec.MatchPath(g, p+"/zz.pem") || spec.MatchPath(g, p+"/b") || spec.MatchPath(g, p+"/q/y") {
				if !c.DeniedBelow(p) {
					t.Errorf("deny %q: something under %q is denied but DeniedBelow says no", g, p)
				}
			}
		}
	}
}

func TestRefusalErrno(t *testing.T) {
	c := New(pol([]string{"/secrets"}, []string{"/ro"}))
	if err := c.Read("/secrets/x"); !errors.Is(err, syscall.EACCES) {
		t.Errorf("deny: %v", err)
	}
	if err := c.Write("/ro/x"); !errors.Is(err, syscall.EROFS) {
		t.Errorf("read-only: %v", err)
	}
	if err := c.Read("/ro/x"); err != nil {
		t.Errorf("reading a read-only path: %v", err)
	}
	if err := c.Write("/rox"); err != nil {
		t.Errorf("/rox is not under /ro: %v", err)
	}
	var nilc *Checker
	if nilc.Write("/secrets") != nil || nilc.Read("/x") != nil || nilc.Active() {
		t.Error("a nil checker refuses")
	}
	if New(&spec.Policy{}) != nil {
		t.Error("a policy without path rules compiles to a checker")
	}
}

func newStore(t testing.TB) *kv.Store {
	s, err := kv.Open(t.TempDir()+"/store", kv.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// mk makes p (a directory if it ends in /) and returns its inode.
func mk(t testing.TB, s *kv.Store, p string) uint64 {
	dir := uint64(kv.RootIno)
	names := strings.Split(strings.Trim(p, "/"), "/")
	for i, n := range names {
		a, err := s.Lookup(dir, n)
		if err == kv.ErrNotFound {
			mode := uint32(kv.S_IFDIR | 0o755)
			if i == len(names)-1 && !strings.HasSuffix(p, "/") {
				mode = kv.S_IFREG | 0o644
			}
			a, err = s.Create(dir, n, kv.NewInode{Mode: mode})
		}
		if err != nil {
			t.Fatal(err)
		}
		dir = a.Ino
	}
	return dir
}

func TestPathsAndIno(t *testing.T) {
	s := newStore(t)
	c := New(pol([]string{"/secrets"}, []string{"**/go.mod"}))
	tok := mk(t, s, "/secrets/token")
	d := mk(t, s, "/a/b/c/")
	if p, err := DirPath(s, d); err != nil || p != "/a/b/c" {
		t.Fatalf("DirPath = %q, %v", p, err)
	}
	// A hard link made behind the policy's back (by root, or before the
	// rule existed) does not make the file readable.
	if _, err := s.Link(tok, d, "x"); err != nil {
		t.Fatal(err)
	}
	if err := c.Ino(s, tok, false); !errors.Is(err, syscall.EACCES) {
		t.Errorf("reading a denied file through its hard link: %v", err)
	}
	mod := mk(t, s, "/m/go.mod")
	if err := c.Ino(s, mod, false); err != nil {
		t.Errorf("reading a read-only file: %v", err)
	}
	if err := c.Ino(s, mod, true); !errors.Is(err, syscall.EROFS) {
		t.Errorf("changing a read-only file: %v", err)
	}
	if err := c.Ino(s, kv.RootIno, true); err != nil {
		t.Errorf("changing the root: %v", err)
	}
}

func TestRenameTree(t *testing.T) {
	s := newStore(t)
	c := New(pol([]string{"**/*.pem", "/top/secret"}, []string{"**/go.mod"}))
	mk(t, s, "/src/k.pem")
	mk(t, s, "/top/secret")
	mk(t, s, "/mod/sub/go.mod")
	mk(t, s, "/plain/deep/er/file")
	lookup := func(p string) kv.Attr {
		dir := uint64(kv.RootIno)
		var a kv.Attr
		for _, n := range strings.Split(strings.Trim(p, "/"), "/") {
			var err error
			if a, err = s.Lookup(dir, n); err != nil {
				t.Fatal(err)
			}
			dir = a.Ino
		}
		return a
	}
	for _, tc := range []struct {
		from, to string
		errno    syscall.Errno
	}{
		{"/src", "/src2", 0},                 // k.pem stays denied as src2/k.pem
		{"/top", "/top2", syscall.EACCES},    // /top/secret would become /top2/secret
		{"/mod", "/mod2", syscall.EROFS},     // moves a read-only go.mod
		{"/plain", "/p2", 0},                 // nothing covered under it
		{"/src/k.pem", "/k", syscall.EACCES}, // the denied file itself
		{"/plain", "/x.pem", syscall.EACCES}, // to a denied name
	} {
		a := lookup(tc.from)
		err := c.Rename(s, tc.from, a.Ino, a.IsDir(), tc.to, false, 0, false)
		if tc.errno == 0 && err != nil || tc.errno != 0 && !errors.Is(err, tc.errno) {
			t.Errorf("rename %s %s: %v, want %v", tc.from, tc.to, err, tc.errno)
		}
	}
	// RENAME_EXCHANGE moves both ways.
	a, b := lookup("/plain"), lookup("/top")
	if err := c.Rename(s, "/plain", a.Ino, true, "/top", true, b.Ino, true); !errors.Is(err, syscall.EACCES) {
		t.Errorf("exchange with a directory holding a denied file: %v", err)
	}
}

// FuzzChecker checks the compiled matcher against spec.MatchPath, and
// DeniedBelow against what is really under a path, for any pattern and
// path.
func FuzzChecker(f *testing.F) {
	for _, s := range []string{"/a/**/b", "*.go", "**", "/x/*/y/**", "[a-c]x", "/workspace/s*", "a/**/**/b"} {
		f.Add(s, "/a/x/b", "c")
	}
	f.Fuzz(func(t *testing.T, g, p, child string) {
		if strings.ContainsAny(child, "/\x00") || child == "" || child == "." || child == ".." {
			return
		}
		if spec.CheckGlob(g) != nil {
			return
		}
		p = path.Clean("/" + p)
		c := New(pol([]string{g}, nil))
		if got, want := c.Denied(p) != nil, spec.MatchPath(g, p); got != want {
			t.Fatalf("deny %q, %q: denied %v, spec.MatchPath %v", g, p, got, want)
		}
		under := path.Join(p, child)
		if c.Denied(under) != nil && !c.DeniedBelow(p) {
			t.Fatalf("deny %q: %q is denied, but DeniedBelow(%q) is false", g, under, p)
		}
		if c.Denied(p) != nil && c.Denied(under) == nil {
			t.Fatalf("deny %q covers %q but not %q under it", g, p, under)
		}
		// A walk that checks each name with DeniedLeaf finds what
		// Denied finds, at the first name that is denied.
		var ns []string
		walked := c.DeniedLeaf(nil) != nil // the root
		for _, n := range strings.Split(strings.TrimPrefix(under, "/"), "/") {
			if n == "" {
				continue
			}
			ns = append(ns, n)
			if walked || c.DeniedLeaf(ns) != nil {
				walked = true
				break
			}
		}
		if want := c.Denied(under) != nil; walked != want {
			t.Fatalf("deny %q, %q: a walk with DeniedLeaf finds %v, Denied %v", g, under, walked, want)
		}
	})
}

// BenchmarkCheck is one path checked against ten globs of the usual kinds.
func BenchmarkCheck(b *testing.B) {
	c := New(&spec.Policy{
		Deny:          []string{"/secrets", "**/*.pem", "**/.env", "/private/**", "*.key"},
		ReadOnlyPaths: []string{"/vendor", "**/go.sum", "/.github", "/ro/**", "Makefile"},
	})
	b.ReportAllocs()
	for b.Loop() {
		if c.Write("/src/pkg07/sub/file_test.go") != nil {
			b.Fatal("refused")
		}
	}
}

// The checker's memory of paths follows renames by anyone: a directory
// moved under a denied one, a file renamed into one.
func TestCacheFollowsMoves(t *testing.T) {
	s := newStore(t)
	c := New(pol([]string{"/secrets"}, nil))
	mk(t, s, "/secrets/")
	x := mk(t, s, "/a/b/x")
	f := mk(t, s, "/ok/f")
	for _, ino := range []uint64{x, f} {
		if err := c.Ino(s, ino, false); err != nil {
			t.Fatalf("before: %v", err)
		}
	}
	sec, _ := s.Lookup(kv.RootIno, "secrets")
	ok, _ := s.Lookup(kv.RootIno, "ok")
	if err := s.Rename(kv.RootIno, "a", sec.Ino, "a", 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Rename(ok.Ino, "f", sec.Ino, "f", 0); err != nil {
		t.Fatal(err)
	}
	for _, ino := range []uint64{x, f} {
		if err := c.Ino(s, ino, false); !errors.Is(err, syscall.EACCES) {
			t.Errorf("inode %d moved under /secrets: %v", ino, err)
		}
	}
	b, _ := s.Lookup(sec.Ino, "a")
	if p, err := c.DirPath(s, b.Ino); err != nil || p != "/secrets/a" {
		t.Errorf("DirPath after the move: %q %v", p, err)
	}
}

// DenyPath adds a rule for a path and what is under it, its names taken
// literally; Allow takes it away; the rules in force change for checks
// made while others run (-race).
func TestDenyPath(t *testing.T) {
	c := New(pol([]string{"**/token"}, nil))
	const dot = "/r[1]/*.git"
	if c.Denied(dot+"/objects/pack/p.pack") != nil {
		t.Fatal("denied before the rule")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 1000 {
			c.Denied("/r[1]/*.git/HEAD")
			c.DeniedBelow("/r[1]")
		}
	}()
	c.DenyPath("held", dot)
	c.DenyPath("held", dot) // again: once
	c.DenyPath("for good", dot)
	<-done
	for _, p := range []string{dot, dot + "/HEAD", dot + "/objects/pack/p.pack"} {
		if r := c.Denied(p); r == nil || r.Rule != "held" {
			t.Errorf("%s: %v, want the rule held", p, r)
		}
	}
	for _, p := range []string{"/r1/x.git/HEAD", "/r[1]/a.git", "/r[1]"} {
		if r := c.Denied(p); r != nil {
			t.Errorf("%s: %v: the names are not patterns", p, r)
		}
	}
	if !c.DeniedBelow("/r[1]") || c.DeniedLeaf([]string{"r[1]", "*.git"}) == nil {
		t.Error("DeniedBelow/DeniedLeaf do not see the added rule")
	}
	c.Allow("held")
	if r := c.Denied(dot + "/HEAD"); r == nil || r.Rule != "for good" {
		t.Errorf("after Allow(held): %v", r)
	}
	c.Allow("for good")
	if r := c.Denied(dot + "/HEAD"); r != nil {
		t.Errorf("after both went: %v", r)
	}
	if r := c.Denied("/a/token"); r == nil {
		t.Error("the spec's rule went with them")
	}
}
