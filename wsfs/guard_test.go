package wsfs

import (
	"bytes"
	"path"
	"strings"
	"testing"

	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/policy"
	"github.com/computerfs/computerfs/spec"
)

var guardRules = &spec.Policy{Deny: []string{"/secrets", "**/*.pem"}, ReadOnlyPaths: []string{"/ro"}}

// guardFixture is a workspace with a secret, a read-only file and links
// that lead to them every which way; it returns the workspace with and
// without the rules.
func guardFixture(t testing.TB) (guarded, raw *FS) {
	raw = newFS(t)
	raw.SetRootPrefix("/workspace")
	check(t, raw.MkdirAll("/secrets/sub", 0o755))
	check(t, raw.WriteFile("/secrets/token", []byte("SECRET"), 0o644))
	check(t, raw.WriteFile("/keys.pem", []byte("SECRET"), 0o644))
	check(t, raw.MkdirAll("/ro", 0o755))
	check(t, raw.WriteFile("/ro/c", []byte("RO"), 0o644))
	check(t, raw.MkdirAll("/ok/d", 0o755))
	check(t, raw.WriteFile("/ok/f", []byte("fine"), 0o644))
	for link, target := range map[string]string{"/ok/up": "..", "/abs": "/workspace/secrets", "/ok/s": "../secrets",
		"/ok/t": "/workspace/secrets/token", "/ok/r": "../ro", "/ok/loop": "loop", "/ok/dot": "."} {
		check(t, raw.Symlink(target, link))
	}
	return raw.WithPolicy(policy.New(guardRules)), raw
}

// guardWords are what fuzzed paths are made of.
var guardWords = []string{"secrets", "token", "ok", "up", "..", ".", "abs", "s", "t", "r", "ro", "c", "x.pem", "keys.pem",
	"new", "f", "d", "sub", "loop", "dot", "/workspace", ""}

func fuzzPath(b []byte) (string, []byte) {
	if len(b) == 0 {
		return "ok", b
	}
	n := int(b[0]%4) + 1
	b = b[1:]
	var parts []string
	for range n {
		if len(b) == 0 {
			break
		}
		parts = append(parts, guardWords[int(b[0])%len(guardWords)])
		b = b[1:]
	}
	return strings.Join(parts, "/"), b
}

// runGuardOps decodes ops from b and runs them on f, failing if any read
// returns the secret.
func runGuardOps(t *testing.T, f, raw *FS, b []byte) {
	denied := map[uint64]string{}
	for _, p := range []string{"/secrets/token", "/secrets/sub", "/keys.pem"} {
		a, err := raw.Lstat(p)
		check(t, err)
		denied[a.Ino] = p
	}
	for len(b) > 0 {
		op := b[0] % 13
		var p, q string
		p, b = fuzzPath(b[1:])
		q, b = fuzzPath(b)
		var got []byte
		switch op {
		case 0:
			got, _ = f.ReadFile(p)
		case 1:
			f.ReadDir(p, "", func(d kv.Dirent) bool {
				if denied[d.Ino] != "" {
					t.Fatalf("ReadDir %q listed %q, the denied %s", p, d.Name, denied[d.Ino])
				}
				return true
			})
		case 2:
			s, _ := f.Readlink(p)
			got = []byte(s)
		case 3:
			f.WriteFile(p, []byte("w"), 0o644)
		case 4:
			f.Mkdir(p, 0o755)
		case 5:
			f.Symlink(q, p)
		case 6:
			f.Link(p, q)
		case 7:
			f.Rename(p, q)
		case 8:
			f.Remove(p)
		case 9:
			f.RemoveAll(p)
		case 10:
			f.Chmod(p, 0o777)
		case 11:
			f.Truncate(p, 0)
		case 12:
			if fl, err := f.Open(p, O_RDWR, 0); err == nil {
				buf := make([]byte, 16)
				n, _ := fl.ReadAt(buf, 0)
				got = buf[:n]
				fl.WriteAt([]byte("x"), 0)
			}
		}
		if bytes.Contains(got, []byte("SECRET")) {
			t.Fatalf("op %d on %q read the secret", op, p)
		}
	}
}

// checkGuardHeld looks behind the rules: the secret is only at denied
// paths, the read-only file is as it was, no name a deny rule covers was
// made.
func checkGuardHeld(t *testing.T, raw *FS) {
	c := policy.New(guardRules)
	var walk func(dir string)
	walk = func(dir string) {
		var ents []kv.Dirent
		check(t, raw.ReadDir(dir, "", func(d kv.Dirent) bool { ents = append(ents, d); return true }))
		for _, d := range ents {
			p := path.Join(dir, d.Name)
			if c.Denied(p) != nil && p != "/secrets" && p != "/secrets/token" && p != "/secrets/sub" && p != "/keys.pem" {
				t.Fatalf("%s was made: a deny rule covers it", p)
			}
			if d.Type == kv.S_IFDIR {
				walk(p)
				continue
			}
			if d.Type == kv.S_IFREG {
				data, err := raw.ReadFile(p)
				check(t, err)
				if bytes.Contains(data, []byte("SECRET")) && c.Denied(p) == nil {
					t.Fatalf("the secret is readable at %s", p)
				}
			}
		}
	}
	walk("/")
	for p, want := range map[string]string{"/secrets/token": "SECRET", "/keys.pem": "SECRET", "/ro/c": "RO"} {
		if data, err := raw.ReadFile(p); err != nil || string(data) != want {
			t.Fatalf("%s is now %q, %v", p, data, err)
		}
	}
}

func TestGuardSequences(t *testing.T) {
	for _, ops := range [][]byte{
		{0, 2, 0, 1}, {7, 1, 0, 0, 0}, {6, 2, 14, 1, 0, 1, 20}, {6, 2, 2, 8, 1, 20}, {5, 1, 6, 1, 20, 0, 1, 20},
		{7, 2, 2, 8, 2, 2, 20}, {9, 1, 0}, {9, 1, 2}, {3, 1, 12}, {12, 2, 2, 8}, {7, 1, 10, 1, 20}, {7, 2, 2, 17, 1, 20},
	} {
		g, raw := guardFixture(t)
		runGuardOps(t, g, raw, ops)
		checkGuardHeld(t, raw)
	}
}

// FuzzGuard runs any sequence of operations through the rules, with paths
// spelled through links, "..", "." and absolute names: the secret is
// never read, never reachable at a path the rules do not deny, and the
// read-only file never changes.
func FuzzGuard(f *testing.F) {
	f.Add([]byte{0, 2, 0, 1})
	f.Add([]byte{7, 2, 2, 8, 1, 20, 0, 1, 20})
	f.Add([]byte{5, 1, 16, 1, 20, 6, 2, 20, 1, 1, 21})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 256 {
			return
		}
		g, raw := guardFixture(t)
		runGuardOps(t, g, raw, ops)
		checkGuardHeld(t, raw)
	})
}
