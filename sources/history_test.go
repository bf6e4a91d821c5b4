package sources

import (
	"context"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"

	"github.com/computerfs/computerfs/internal/gittest"
	"github.com/computerfs/computerfs/policy"
	"github.com/computerfs/computerfs/spec"
)

// CheckHistory reads every commit of the object store, not only those
// the references reach (an agent may drop a ref and keep the objects),
// finds a denied directory as well as a file, and says nothing of a
// history that holds nothing denied.
func TestCheckHistory(t *testing.T) {
	dir := gittest.NewRepo(t, map[string]string{"README": "x\n"})
	gittest.Commit(t, dir, map[string]string{"deep/a/id_rsa": "key\n"}, "key")
	gittest.Git(t, dir, "reset", "-q", "--hard", "HEAD~1")
	gittest.Git(t, dir, "reflog", "expire", "--expire=now", "--all")
	if out := gittest.Git(t, dir, "log", "--all", "--format=%s"); out != "initial" {
		t.Fatalf("the key's commit is still reachable: %q", out)
	}
	repo, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		deny []string
		want string
	}{
		{[]string{"**/id_rsa"}, "/ws/deep/a/id_rsa"},
		{[]string{"/ws/deep/a"}, "/ws/deep/a"},
		{[]string{"**/*.pem"}, ""},
	}
	for _, c := range cases {
		p := &spec.Policy{Deny: c.deny}
		got, err := CheckHistory(context.Background(), repo, "/ws", policy.New(p))
		if got != c.want || err != nil {
			t.Errorf("deny %q: %q %v, want %q", c.deny, got, err, c.want)
		}
	}
	if RulesKey(&spec.Policy{Deny: []string{"a"}}) == RulesKey(&spec.Policy{Deny: []string{"b"}}) {
		t.Error("RulesKey does not tell rules apart")
	}
	// A cancelled check is not a clean one.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := &spec.Policy{Deny: []string{"**/none"}}
	big := gittest.NewRepo(t, nil)
	files := map[string]string{}
	for i := range 5000 {
		files["d/f"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+"/"+string(rune('a'+i/26%26))+"/n"+strings.Repeat("y", i%5)] = "z"
	}
	gittest.Commit(t, big, files, "many")
	brepo, err := git.PlainOpen(big)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := CheckHistory(ctx, brepo, "/ws", policy.New(p)); err == nil {
		t.Errorf("a cancelled check: %q, no error", got)
	}
}

// A tree object or a history's paths past their bounds is not read: the
// check fails, and the repository counts as exposed.
func TestCheckHistoryBounds(t *testing.T) {
	files := map[string]string{}
	deep := ""
	for i := range 15 {
		deep += strings.Repeat(string(rune('a'+i)), 200) + "/"
	}
	files[deep+"f"] = "x"
	for i := range 300 {
		files["wide/"+strings.Repeat("n", 100)+string(rune('a'+i%26))+string(rune('a'+i/26))] = "y"
	}
	repo, err := git.PlainOpen(gittest.NewRepo(t, files))
	if err != nil {
		t.Fatal(err)
	}
	p := &spec.Policy{Deny: []string{"**/none"}}
	if got, err := CheckHistory(context.Background(), repo, "/ws", policy.New(p)); got != "" || err != nil {
		t.Fatalf("within the bounds: %q %v", got, err)
	}
	defer func(paths int, tree int64) { maxHistoryPaths, maxTreeObject = paths, tree }(maxHistoryPaths, maxTreeObject)
	maxHistoryPaths = 10 << 10 // the deep chain's paths take about 24 KB
	if _, err := CheckHistory(context.Background(), repo, "/ws", policy.New(p)); err == nil || !strings.Contains(err.Error(), "paths") {
		t.Errorf("paths past the bound: %v", err)
	}
	maxHistoryPaths, maxTreeObject = 64<<20, 16<<10 // the wide tree is about 36 KB
	if _, err := CheckHistory(context.Background(), repo, "/ws", policy.New(p)); err == nil || !strings.Contains(err.Error(), "bytes, more than") {
		t.Errorf("a tree past the bound: %v", err)
	}
}
