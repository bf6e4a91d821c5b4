package sources

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/computerfs/computerfs/internal/attacker"
	"github.com/computerfs/computerfs/internal/gittest"
	"github.com/computerfs/computerfs/internal/s3test"
	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/wsfs"
)

// The agent writes every byte of its workspace, .git included. These
// tests play it: whatever it writes there, a refresh fetches from the
// spec's url with the spec's credentials, and reads nothing of the host's.

// snapshot is every file of the workspace: path -> kind and content hash.
func snapshot(t testing.TB, fs *wsfs.FS) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walkDir func(p string)
	walkDir = func(p string) {
		var ents []kv.Dirent
		if err := fs.ReadDir(p, "", func(d kv.Dirent) bool { ents = append(ents, d); return true }); err != nil {
			t.Fatal(err)
		}
		for _, d := range ents {
			cp := strings.TrimSuffix(p, "/") + "/" + d.Name
			switch d.Type {
			case kv.S_IFDIR:
				out[cp] = "dir"
				walkDir(cp)
			case kv.S_IFLNK:
				tg, _ := fs.Readlink(cp)
				out[cp] = "link " + tg
			default:
				b, err := fs.ReadFile(cp)
				if err != nil {
					t.Fatal(err)
				}
				out[cp] = fmt.Sprintf("file %x", sha256.Sum256(b))
			}
		}
	}
	walkDir("/")
	return out
}

// sameOutside fails if a workspace path outside the prefixes keep changed.
func sameOutside(t testing.TB, before, after map[string]string, keep ...string) {
	t.Helper()
	inKeep := func(p string) bool {
		for _, k := range keep {
			if p == k || strings.HasPrefix(p, k+"/") {
				return true
			}
		}
		return false
	}
	var diff []string
	for p, v := range after {
		if !inKeep(p) && before[p] != v {
			diff = append(diff, "+"+p)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok && !inKeep(p) {
			diff = append(diff, "-"+p)
		}
	}
	sort.Strings(diff)
	if len(diff) > 0 {
		t.Errorf("the workspace changed where it must not: %v", diff)
	}
}

// runRefresh runs a refresh and returns the report of source 0.
func runRefresh(t testing.TB, fs *wsfs.FS, yaml string) SourceReport {
	t.Helper()
	r := &Refresher{FS: fs, Spec: parse(t, yaml), Log: quiet()}
	rep, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rep.Sources[0]
}

// TestRefreshConnectsToSpecAttack: the agent rewrites the checkout's
// .git/config (remote url, pushurl, insteadOf, include of a host file
// that names the attacker) to send the daemon's fetch, and the spec's
// token, to a server of its own. The refresh still fetches from the
// spec's remote (the new upstream commit arrives) and the attacker sees
// no connection. Over file://, HTTP with a token, and ssh.
func TestRefreshConnectsToSpecAttack(t *testing.T) {
	evil := attacker.Listen(t)
	hostInclude := filepath.Join(t.TempDir(), "evil.gitconfig")
	if err := os.WriteFile(hostInclude, []byte("[remote \"origin\"]\n\turl = "+evil.URL+"/inc.git\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	configs := map[string]func(spec string) string{
		"url": func(string) string {
			return "[remote \"origin\"]\n\turl = " + evil.URL + "/x.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n"
		},
		"url-and-pushurl-and-fetch": func(string) string {
			return "[remote \"origin\"]\n\turl = " + evil.URL + "/x.git\n\tpushurl = " + evil.URL + "/p.git\n\tfetch = +refs/heads/*:refs/heads/*\n"
		},
		"insteadOf": func(spec string) string {
			return "[remote \"origin\"]\n\turl = " + spec + "\n[url \"" + evil.URL + "/\"]\n\tinsteadOf = " + spec + "\n"
		},
		"include": func(string) string { return "[include]\n\tpath = " + hostInclude + "\n" },
		"includeIf": func(string) string {
			return "[includeIf \"gitdir:/\"]\n\tpath = " + hostInclude + "\n"
		},
		"garbage": func(string) string { return strings.Repeat("[[[ not a config\n", 1000) },
		"huge":    func(string) string { return "[core]\n\tbare = true\n" + strings.Repeat("# padding\n", 2<<20) },
	}
	type upstreamKind struct {
		name string
		// make serves repo and returns the url, the spec's extra fields
		// and where to push repo's new commits ("" for repo itself).
		make func(t *testing.T, repo string) (url, extra, bare string)
	}
	kinds := []upstreamKind{
		{"file", func(t *testing.T, repo string) (string, string, string) { return "file://" + repo, "", "" }},
		{"http-token", func(t *testing.T, repo string) (string, string, string) {
			t.Setenv("ATTACK_TOKEN", "operator-secret-token")
			bare := gittest.Bare(t, repo)
			return gittest.ServeHTTPAuth(t, bare, "git", "operator-secret-token"), ", token_env: ATTACK_TOKEN", bare
		}},
		{"ssh", func(t *testing.T, repo string) (string, string, string) {
			t.Setenv("COMPUTERFS_NO_GIT_CLI", "1") // OpenSSH would read only the user's known_hosts
			keyFile, _, pub := gittest.NewSSHKey(t)
			bare := gittest.Bare(t, repo)
			srv := gittest.ServeSSH(t, filepath.Dir(bare), pub)
			t.Setenv("SSH_KNOWN_HOSTS", srv.KnownHosts)
			t.Setenv("SSH_AUTH_SOCK", "")
			return srv.URL(filepath.Base(bare)), fmt.Sprintf(", ssh_key: %q", keyFile), bare
		}},
	}
	for _, k := range kinds {
		for _, name := range []string{"url", "url-and-pushurl-and-fetch", "insteadOf", "include", "includeIf", "garbage", "huge"} {
			if k.name != "file" && name != "url" && name != "insteadOf" {
				continue // the other variants do not depend on the transport
			}
			t.Run(k.name+"/"+name, func(t *testing.T) {
				repo := gittest.NewRepo(t, map[string]string{"f": "1"})
				url, extra, bare := k.make(t, repo)
				yaml := fmt.Sprintf("sources:\n  - path: /r\n    git: {url: %q%s}\n", url, extra)
				_, fs := mustImport(t, parse(t, yaml), nil)
				if err := fs.WriteFile("/r/.git/config", []byte(configs[name](url)), 0o644); err != nil {
					t.Fatal(err)
				}
				gittest.Commit(t, repo, map[string]string{"new": "from the spec's remote"}, "upstream")
				if bare != "" {
					gittest.Git(t, repo, "push", "-q", bare, "main")
				}
				rep := runRefresh(t, fs, yaml)
				evil.Check(t)
				if rep.Error != "" {
					t.Fatalf("refresh: %s", rep.Error)
				}
				if d, _ := fs.ReadFile("/r/new"); string(d) != "from the spec's remote" {
					t.Fatalf("the refresh did not fetch from the spec's remote: new = %q (%+v)", d, rep)
				}
				if c, _ := fs.ReadFile("/r/.git/config"); string(c) != configs[name](url) {
					t.Fatal("the refresh rewrote the agent's .git/config")
				}
			})
		}
	}
}

// TestRefreshDotGitElsewhereAttack: a .git that is a "gitdir:" file
// naming another repository of the host, a symbolic link to another
// source's .git, or a .git whose objects/info/alternates borrows another
// repository's objects (one with a secret): the refresh refuses, reads
// nothing from there and changes nothing.
func TestRefreshDotGitElsewhereAttack(t *testing.T) {
	secretRepo := gittest.NewRepo(t, map[string]string{"secret.txt": "the other workspace's secret\n"})
	secretBlob := strings.TrimSpace(gittest.Git(t, secretRepo, "rev-parse", "HEAD:secret.txt"))
	for _, name := range []string{"gitdir-file", "symlink-to-sibling", "symlink-absolute-host", "alternates-abs", "alternates-rel", "source-dir-symlink"} {
		t.Run(name, func(t *testing.T) {
			repo := gittest.NewRepo(t, map[string]string{"f": "1"})
			other := gittest.NewRepo(t, map[string]string{"o": "other"})
			yaml := fmt.Sprintf("sources:\n  - path: /r\n    git: {url: %q}\n  - path: /other\n    git: {url: %q}\n", "file://"+repo, "file://"+other)
			_, fs := mustImport(t, parse(t, yaml), nil)
			check := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			switch name {
			case "gitdir-file":
				check(fs.RemoveAll("/r/.git"))
				check(fs.WriteFile("/r/.git", []byte("gitdir: "+secretRepo+"/.git\n"), 0o644))
			case "symlink-to-sibling":
				check(fs.RemoveAll("/r/.git"))
				check(fs.Symlink("../other/.git", "/r/.git"))
			case "symlink-absolute-host":
				check(fs.RemoveAll("/r/.git"))
				check(fs.Symlink(secretRepo+"/.git", "/r/.git"))
			case "alternates-abs":
				check(fs.WriteFile("/r/.git/objects/info/alternates", []byte(secretRepo+"/.git/objects\n"), 0o644))
			case "alternates-rel":
				check(fs.WriteFile("/r/.git/objects/info/alternates", []byte("../../../other/.git/objects\n"), 0o644))
			case "source-dir-symlink":
				check(fs.Rename("/r", "/r-moved"))
				check(fs.Symlink("/other", "/r"))
			}
			gittest.Commit(t, repo, map[string]string{"new": "upstream"}, "upstream")
			before := snapshot(t, fs)
			rep := runRefresh(t, fs, yaml)
			if rep.Error == "" {
				t.Fatalf("the refresh went ahead: %+v", rep)
			}
			t.Log(rep.Error)
			sameOutside(t, before, snapshot(t, fs))
			// Nothing of the secret repository's came in.
			if _, err := fs.Stat("/r/.git/objects/" + secretBlob[:2] + "/" + secretBlob[2:]); err == nil {
				t.Fatal("the secret's object is in the workspace")
			}
		})
	}
}

// evilNode is an entry of a tree made with go-git's plumbing, as git
// itself would never write it.
type evilNode struct {
	name     string
	mode     filemode.FileMode
	content  string // blob or link target
	children []evilNode
}

// writeEvilTree stores the tree and returns its hash.
func writeEvilTree(t testing.TB, r *git.Repository, nodes []evilNode) plumbing.Hash {
	t.Helper()
	tree := &object.Tree{}
	for _, n := range nodes {
		var h plumbing.Hash
		if n.mode == filemode.Dir {
			h = writeEvilTree(t, r, n.children)
		} else {
			obj := r.Storer.NewEncodedObject()
			obj.SetType(plumbing.BlobObject)
			w, _ := obj.Writer()
			w.Write([]byte(n.content))
			w.Close()
			var err error
			if h, err = r.Storer.SetEncodedObject(obj); err != nil {
				t.Fatal(err)
			}
		}
		tree.Entries = append(tree.Entries, object.TreeEntry{Name: n.name, Mode: n.mode, Hash: h})
	}
	// In git's order (a tree sorts as if its name ended in "/"), as a
	// tree from a forge would be; duplicates stay.
	key := func(e object.TreeEntry) string {
		if e.Mode == filemode.Dir {
			return e.Name + "/"
		}
		return e.Name
	}
	sort.SliceStable(tree.Entries, func(i, j int) bool { return key(tree.Entries[i]) < key(tree.Entries[j]) })
	obj := r.Storer.NewEncodedObject()
	if err := tree.Encode(obj); err != nil {
		t.Fatal(err)
	}
	h, err := r.Storer.SetEncodedObject(obj)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// evilCommit commits the tree nodes on top of repo's main.
func evilCommit(t testing.TB, repo string, nodes []evilNode) string {
	t.Helper()
	r, err := git.PlainOpen(repo)
	if err != nil {
		t.Fatal(err)
	}
	head, err := r.Head()
	if err != nil {
		t.Fatal(err)
	}
	sig := object.Signature{Name: "evil", Email: "evil@example.com", When: gittest.Epoch}
	c := &object.Commit{Author: sig, Committer: sig, Message: "evil\n", TreeHash: writeEvilTree(t, r, nodes), ParentHashes: []plumbing.Hash{head.Hash()}}
	obj := r.Storer.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		t.Fatal(err)
	}
	h, err := r.Storer.SetEncodedObject(obj)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Storer.SetReference(plumbing.NewHashReference(head.Name(), h)); err != nil {
		t.Fatal(err)
	}
	return h.String()
}

func file(name, content string) evilNode {
	return evilNode{name: name, mode: filemode.Regular, content: content}
}
func dir(name string, children ...evilNode) evilNode {
	return evilNode{name: name, mode: filemode.Dir, children: children}
}
func link(name, target string) evilNode {
	return evilNode{name: name, mode: filemode.Symlink, content: target}
}

// evilTrees are upstream trees with paths the workspace must refuse. host
// is a directory of the host that a tree aims at.
func evilTrees(host string) map[string][]evilNode {
	hook := "#!/bin/sh\ntouch " + host + "/hook-ran\n"
	return map[string][]evilNode{
		"dotdot-to-sibling":   {file("keep", "k"), dir("x", dir("..", dir("..", dir("other", file("planted", "x")))))},
		"dotdot-to-hooks":     {file("keep", "k"), dir("x", dir("..", dir(".git", dir("hooks", file("pre-commit", hook)))))},
		"dotgit-hooks":        {file("keep", "k"), dir(".git", dir("hooks", file("post-checkout", hook)))},
		"DOTGIT-config":       {file("keep", "k"), dir(".GIT", file("config", "[core]\n\tfsmonitor = touch "+host+"/fsmonitor-ran\n"))},
		"nested-dotgit":       {file("keep", "k"), dir("sub", dir(".Git", file("config", "x")))},
		"ntfs-dotgit":         {file("keep", "k"), dir("git~1", file("config", "x"))},
		"hfs-dotgit":          {file("keep", "k"), dir(".g\u200cit", file("config", "x"))},
		"trailing-dot":        {file("keep", "k"), dir(".git.", file("config", "x"))},
		"dot":                 {file("keep", "k"), dir(".", file("planted", "x"))},
		"dotdot-file":         {file("keep", "k"), file("..", "x")},
		"empty-name":          {file("keep", "k"), file("", "x")},
		"slash-name":          {file("keep", "k"), file("a/../../other/planted", "x")},
		"backslash":           {file("keep", "k"), file(`..\..\other\planted`, "x")},
		"link-then-write":     {file("keep", "k"), link("a", host), dir("a", file("planted", "x"))},
		"link-rel-then-write": {file("keep", "k"), link("a", "../other"), dir("a", file("planted", "x"))},
	}
}

// TestEvilTreeImportAttack: an upstream whose tree has such paths is not
// imported (with git's command line and with go-git), and the host gains
// no file.
func TestEvilTreeImportAttack(t *testing.T) {
	for _, mode := range []string{"cli", "gogit"} {
		host := t.TempDir()
		for name, nodes := range evilTrees(host) {
			t.Run(mode+"/"+name, func(t *testing.T) {
				if mode == "gogit" {
					t.Setenv("COMPUTERFS_NO_GIT_CLI", "1")
				}
				repo := gittest.NewRepo(t, map[string]string{"keep": "k"})
				evilCommit(t, repo, nodes)
				yaml := fmt.Sprintf("sources:\n  - path: /r\n    git: {url: %q}\n  - path: /other\n    content: \"other\"\n", "file://"+repo)
				if _, err := runImport(t, parse(t, yaml), nil); err == nil {
					t.Fatal("the import took the tree")
				} else {
					t.Log(err)
				}
				hostUnchanged(t, host)
			})
		}
	}
}

func hostUnchanged(t testing.TB, host string) {
	t.Helper()
	ents, err := os.ReadDir(host)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("the host gained %s", filepath.Join(host, e.Name()))
	}
}

// TestEvilTreeRefreshAttack: a refresh to such a tree is refused whole:
// the workspace (the source included) does not change, and the host
// gains no file.
func TestEvilTreeRefreshAttack(t *testing.T) {
	host := t.TempDir()
	for name, nodes := range evilTrees(host) {
		t.Run(name, func(t *testing.T) {
			repo := gittest.NewRepo(t, map[string]string{"keep": "k"})
			yaml := fmt.Sprintf("sources:\n  - path: /r\n    git: {url: %q}\n  - path: /other\n    content: \"other\"\n", "file://"+repo)
			_, fs := mustImport(t, parse(t, yaml), nil)
			before := snapshot(t, fs)
			evilCommit(t, repo, nodes)
			rep := runRefresh(t, fs, yaml)
			if rep.Error == "" {
				t.Fatalf("the refresh took the tree: %+v", rep)
			}
			t.Log(rep.Error)
			// Only the fetch's objects and refs may have changed.
			sameOutside(t, before, snapshot(t, fs), "/r/.git/objects", "/r/.git/refs", "/r/.git/packed-refs", "/r/.git/FETCH_HEAD", "/r/.git/shallow")
			hostUnchanged(t, host)
		})
	}
}

// TestRefreshNoWriteThroughLinkAttack: a directory of the checkout that is
// a symbolic link here (to another source, to the source's .git): a
// refresh that adds a file below it reports a conflict and writes
// nothing through the link, while the rest of the workspace stays.
func TestRefreshNoWriteThroughLinkAttack(t *testing.T) {
	for _, target := range []string{"/other", "../other", "/r/.git/hooks", ".git"} {
		t.Run(strings.ReplaceAll(target, "/", "_"), func(t *testing.T) {
			repo := gittest.NewRepo(t, map[string]string{"keep": "k"})
			yaml := fmt.Sprintf("sources:\n  - path: /r\n    git: {url: %q}\n  - path: /other\n    dir: %q\n", "file://"+repo, t.TempDir())
			_, fs := mustImport(t, parse(t, yaml), nil)
			if err := fs.Symlink(target, "/r/newdir"); err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, fs)
			gittest.Commit(t, repo, map[string]string{"newdir/pre-commit": "#!/bin/sh\n", "keep": "k2"}, "upstream")
			rep := runRefresh(t, fs, yaml)
			if len(rep.Conflicts) == 0 {
				t.Fatalf("no conflict: %+v", rep)
			}
			sameOutside(t, before, snapshot(t, fs), "/r/.git/objects", "/r/.git/refs", "/r/.git/packed-refs", "/r/.git/FETCH_HEAD")
		})
	}
}

// TestS3KeysAttack: object keys with a .git component (any case, NTFS
// short names), backslashes: import and refresh skip them, write nothing
// for them, and take the rest.
func TestS3KeysAttack(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	bucket := srv.NewBucket(t)
	evil := []string{"p/.git/config", "p/sub/.GIT/hooks/post-checkout", "p/a/git~1/x", `p/a\b`, "p/x/.Git/y", "p/y/.git"}
	for _, k := range append([]string{"p/ok"}, evil...) {
		srv.Put(t, bucket, k, []byte(k))
	}
	yaml := fmt.Sprintf("sources:\n  - path: /s\n    s3: {bucket: %s, prefix: p/, endpoint: %q, path_style: true}\n  - path: /other\n    content: x\n", bucket, srv.Endpoint)
	sp := parse(t, yaml)
	s, fs := mustImport(t, sp, nil)
	s.SetFetcher(NewFetcher(sp, nil).Fetch)
	var got []string
	walk(t, fs, "/s", func(p string, _ kv.Attr) { got = append(got, p) })
	if strings.Join(got, " ") != "/s/ok" {
		t.Fatalf("import: files %q", got)
	}
	// New keys of the same kinds at refresh, and one below a directory
	// the agent turned into a link to another source.
	for _, k := range []string{"p/new/.git/config", "p/NEW/.gIt/hooks/x", "p/ok2", "p/linked/f"} {
		srv.Put(t, bucket, k, []byte(k))
	}
	if err := fs.Symlink("/other-dir", "/s/linked"); err != nil {
		t.Fatal(err)
	}
	if err := fs.MkdirAll("/other-dir", 0o755); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, fs)
	rep := runRefresh(t, fs, yaml)
	if rep.Error != "" || len(rep.Added) != 1 || rep.Added[0] != "/s/ok2" {
		t.Fatalf("refresh: %+v", rep)
	}
	if len(rep.Conflicts) != 1 || rep.Conflicts[0].Path != "/s/linked/f" {
		t.Fatalf("refresh through a link: %+v", rep.Conflicts)
	}
	sameOutside(t, before, snapshot(t, fs), "/s/ok2")
}
