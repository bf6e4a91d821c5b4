package tools

import (
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/computerfs/computerfs/internal/attacker"
	"github.com/computerfs/computerfs/internal/gittest"
	"github.com/computerfs/computerfs/spec"
)

// TestGitCloneURLsAttack: git-clone takes its url from the caller (the
// agent, through a harness). It must not read the host's repositories
// (local paths, file://, ext::), use the daemon's SSH agent, or reach a
// host the policy does not list.
func TestGitCloneURLsAttack(t *testing.T) {
	// A repository of the host's, with a secret, that the agent must not
	// read: another workspace's checkout, say.
	secret := gittest.NewRepo(t, map[string]string{"secret.txt": "the operator's secret\n"})
	base := servePublicRepo(t)
	u, _ := neturl.Parse(base)
	evil := attacker.Listen(t)
	tl, f := newTools(t, &spec.Policy{GitCloneHosts: []string{u.Host}})

	marker := filepath.Join(t.TempDir(), "ext-ran")
	for i, url := range []string{
		secret,
		secret + "/.git",
		"file://" + secret,
		"FILE://" + secret,
		"ext::sh -c touch% " + marker,
		"ext::sh -c 'touch " + marker + "'",
		"ssh://git@127.0.0.1:1/x",
		"git@127.0.0.1:x.git",
		evil.URL + "/x.git",
		"http://user:token@" + u.Host + "/pub",
		"git://" + u.Host + "/pub",
		"https://" + evil.Host + "/x.git",
		"http://" + u.Hostname() + ".evil.example/pub",
		"../../../" + secret,
		"",
	} {
		p := "clone" + string(rune('a'+i))
		_, err := tl.GitClone(ctx, GitCloneArgs{URL: url, Path: p})
		if err == nil {
			t.Errorf("git-clone %q was accepted", url)
		}
		if _, serr := f.Lstat(p); serr == nil {
			t.Errorf("git-clone %q left %s", url, p)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("an ext:: url ran a command on the host")
	}
	evil.Check(t)
	if r, err := tl.GitClone(ctx, GitCloneArgs{URL: base + "/pub", Path: "pub"}); err != nil || r.Branch != "main" {
		t.Fatalf("a listed host: %+v, %v", r, err)
	}
	if b, _ := f.ReadFile("pub/README"); string(b) != "public\n" {
		t.Fatalf("the allowed clone: %q", b)
	}

	// No hosts: the tool is off.
	off, _ := newTools(t, nil)
	_, err := off.GitClone(ctx, GitCloneArgs{URL: base + "/pub", Path: "pub"})
	wantRefused(t, err, "git_clone_hosts")
}

// TestGitCloneRedirectsAttack: a listed host that answers with a redirect
// does not send the clone on to a host the policy does not list (the
// metadata service of a cloud, a port on the host's loopback). A
// redirect to a listed host is followed.
func TestGitCloneRedirectsAttack(t *testing.T) {
	evil := attacker.Listen(t)
	real := servePublicRepo(t)
	realURL, _ := neturl.Parse(real)
	for _, code := range []int{301, 302, 307, 308} {
		to := evil.URL
		redir := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, to+r.URL.RequestURI(), code)
		}))
		u, _ := neturl.Parse(redir.URL)
		tl, f := newTools(t, &spec.Policy{GitCloneHosts: []string{u.Host, realURL.Host}})
		_, err := tl.GitClone(ctx, GitCloneArgs{URL: redir.URL + "/x.git", Path: "c"})
		if err == nil {
			t.Errorf("%d: a redirect to an unlisted host was followed", code)
		}
		if _, serr := f.Lstat("c"); serr == nil {
			t.Errorf("%d: the refused clone left its directory", code)
		}
		// to a listed host: followed
		to = real
		if r, err := tl.GitClone(ctx, GitCloneArgs{URL: redir.URL + "/pub", Path: "ok"}); err != nil || r.Branch != "main" {
			t.Errorf("%d: a redirect to a listed host: %+v %v", code, r, err)
		}
		redir.Close()
	}
	evil.Check(t)
}

// servePublicRepo serves, over HTTP, a repository "pub" with a README, and
// returns the server's base url.
func servePublicRepo(t *testing.T) string {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "pub"), 0o755)
	gittest.Git(t, filepath.Join(dir, "pub"), "init", "-q", "-b", "main")
	gittest.Commit(t, filepath.Join(dir, "pub"), map[string]string{"README": "public\n"}, "one")
	return gittest.ServeHTTP(t, dir)
}
