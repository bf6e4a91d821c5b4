package syncer

import (
	"path"
	"strings"
	"testing"

	"github.com/computerfs/computerfs/kv"
)

// FuzzPaths: a remote name that maps to a path maps back to itself (up to
// the slashes S3 sources drop after the prefix), the path has no empty,
// "." or ".." part, and workspace paths map below the source's directory
// only.
func FuzzPaths(f *testing.F) {
	for _, s := range []string{"p/a", "p//a", "p/../x", "p/a/", "q/a", "p/./a", "p/" + strings.Repeat("n", 300), "/s/a", "/sx/a", "/s"} {
		f.Add("p/", s)
		f.Add("", s)
	}
	f.Fuzz(func(t *testing.T, prefix, key string) {
		if prefix != "" && !strings.HasSuffix(prefix, "/") {
			prefix += "/"
		}
		src := &source{Source: Source{Prefix: prefix}}
		if rel, ok := src.rel(key); ok {
			for _, p := range strings.Split(rel, "/") {
				if p == "" || p == "." || p == ".." || len(p) > kv.MaxNameLen {
					t.Fatalf("rel(%q) = %q: bad part %q", key, rel, p)
				}
			}
			back, ok := src.rel(src.key(rel))
			if !ok || back != rel {
				t.Fatalf("rel(key(%q)) = %q, %v", rel, back, ok)
			}
		}
		if rel, ok := relPath("/s", key); ok {
			if clean := path.Clean(key); rel != "" && "/s/"+rel != clean || rel == "" && clean != "/s" {
				t.Fatalf("relPath(/s, %q) = %q", key, rel)
			}
		}
	})
}
