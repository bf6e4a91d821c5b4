package computerfs

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/computerfs/computerfs/internal/gittest"
	"github.com/computerfs/computerfs/internal/s3test"
	"github.com/computerfs/computerfs/internal/testmount"
	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/spec"
	"github.com/computerfs/computerfs/wsfs"
)

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func parseSpec(t testing.TB, yaml string) *spec.Spec {
	t.Helper()
	sp, err := spec.Parse([]byte(yaml), "test.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

func writeSpec(t testing.TB, yaml string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "workspace.yaml")
	if err := os.WriteFile(f, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func doImport(t testing.TB, sp *spec.Spec, store string) (bool, error) {
	return Import(context.Background(), ImportOptions{Spec: sp, Store: store, Logger: quietLog()})
}

// TestImportAllOrNothing: a failed import leaves neither a store nor a
// staging directory; one interrupted by a crash is thrown away by the next
// import; an imported store is never imported again; a store made without
// a spec is refused.
func TestImportAllOrNothing(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	dir := t.TempDir()
	store := filepath.Join(dir, "ws")
	bad := parseSpec(t, fmt.Sprintf(`sources:
  - path: /first
    content: "imported before the failure"
  - path: /data
    s3: {bucket: missing-bucket, endpoint: %q, path_style: true}
`, srv.Endpoint))
	if _, err := doImport(t, bad, store); err == nil || !strings.Contains(err.Error(), `bucket "missing-bucket" does not exist`) {
		t.Fatalf("import with a missing bucket: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("a failed import left %v behind", ents)
	}

	// A crash mid-import leaves a staging directory (with a store in it).
	if err := os.MkdirAll(store+".importing/db", 0o700); err != nil {
		t.Fatal(err)
	}
	good := parseSpec(t, "sources:\n  - path: /a/b\n    content: one\n")
	if done, err := doImport(t, good, store); err != nil || !done {
		t.Fatalf("import after an interrupted one: %v, %v", done, err)
	}
	if _, err := os.Stat(store + ".importing"); !os.IsNotExist(err) {
		t.Fatalf("staging directory survived: %v", err)
	}
	other := parseSpec(t, "sources:\n  - path: /other\n    content: two\n")
	if done, err := doImport(t, other, store); err != nil || done {
		t.Fatalf("second import: %v, %v (want nothing done)", done, err)
	}
	st, err := kv.Open(store, kv.Options{Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	fs := wsfs.New(st, wsfs.Owner{})
	if d, err := fs.ReadFile("/a/b"); err != nil || string(d) != "one" {
		t.Fatalf("imported file: %q %v", d, err)
	}
	if _, err := fs.Stat("/other"); err == nil {
		t.Fatal("a second import changed the store")
	}
	st.Close()

	plain := filepath.Join(dir, "plain")
	st, err = kv.Open(plain, kv.Options{Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if _, err := doImport(t, good, plain); !errors.Is(err, ErrNotImported) {
		t.Fatalf("import into a store made without a spec: %v", err)
	}
}

// TestImportIntoEmptyDir: a store directory made beforehand (empty) is
// left as it was by a failed import, and becomes the store when an import
// succeeds.
func TestImportIntoEmptyDir(t *testing.T) {
	store := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(store, 0o750); err != nil {
		t.Fatal(err)
	}
	bad := parseSpec(t, "sources:\n  - path: /first\n    content: x\n  - path: /n\n    dir: /nonexistent/dir\n")
	if _, err := doImport(t, bad, store); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("import of a missing directory: %v", err)
	}
	fi, err := os.Stat(store)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o750 {
		t.Fatalf("the store directory after a failed import: %v, %v (want it as it was, mode 0750)", fi, err)
	}
	if ents, err := os.ReadDir(store); err != nil || len(ents) != 0 {
		t.Fatalf("the store directory after a failed import holds %v, %v", ents, err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(store)); len(ents) != 1 {
		t.Fatalf("a failed import left %v beside the store", ents)
	}
	good := parseSpec(t, "sources:\n  - path: /a\n    content: one\n")
	if done, err := doImport(t, good, store); err != nil || !done {
		t.Fatalf("import into the empty directory: %v, %v", done, err)
	}
	st, err := kv.Open(store, kv.Options{Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if d, err := wsfs.New(st, wsfs.Owner{}).ReadFile("/a"); err != nil || string(d) != "one" {
		t.Fatalf("imported file: %q %v", d, err)
	}
}

func run(t testing.TB, dir string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), gittest.Env()...)
	if name == "git" {
		gittest.AsOwner(cmd, dir) // the agent's repository: as the agent
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %q in %s: %v\n%s", name, args, dir, err, out)
	}
	return string(out)
}

// TestMountGitSource: the git CLI on the mount sees a clean checkout right
// after import (by the git command line or by go-git), and diff, commit
// and log work on it.
func TestMountGitSource(t *testing.T) {
	t.Run("cli", testMountGitSource)
	t.Run("gogit", func(t *testing.T) {
		t.Setenv("COMPUTERFS_NO_GIT_CLI", "1")
		testMountGitSource(t)
	})
}

func testMountGitSource(t *testing.T) {
	repo := gittest.NewRepo(t, map[string]string{"README.md": "hello\n", "src/main.go": "package main\n"})
	gittest.Commit(t, repo, map[string]string{"src/main.go": "package main\n\nfunc main() {}\n"}, "second")
	specFile := writeSpec(t, fmt.Sprintf("sources:\n  - path: /repo\n    git: {url: %q}\n  - path: /BUG.md\n    content: \"crash\\n\"\n", repo))
	store := filepath.Join(t.TempDir(), "ws")
	m := testmount.Start(t, store, "--spec", specFile)
	wt := filepath.Join(m.Dir, "repo")
	if out := run(t, wt, "git", "status", "--porcelain"); out != "" {
		t.Fatalf("git status right after import:\n%s", out)
	}
	if out := run(t, wt, "git", "log", "--format=%s"); out != "second\ninitial\n" && !strings.HasPrefix(out, "second\n") {
		t.Fatalf("git log:\n%s", out)
	}
	if err := os.WriteFile(filepath.Join(wt, "README.md"), []byte("hello agent\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := run(t, wt, "git", "diff"); !strings.Contains(out, "+hello agent") {
		t.Fatalf("git diff:\n%s", out)
	}
	run(t, wt, "git", "commit", "-qam", "edited in the workspace")
	if out := run(t, wt, "git", "status", "--porcelain"); out != "" {
		t.Fatalf("git status after commit:\n%s", out)
	}
	if d, _ := os.ReadFile(filepath.Join(m.Dir, "BUG.md")); string(d) != "crash\n" {
		t.Fatalf("inline file: %q", d)
	}
	// Mounting again with the spec keeps the workspace: no second import.
	m.Unmount(t)
	m.Remount(t, "--spec", specFile)
	if out := run(t, wt, "git", "log", "-1", "--format=%s"); out != "edited in the workspace\n" {
		t.Fatalf("after remount, git log -1: %q", out)
	}
	run(t, wt, "git", "fsck", "--no-progress")
}

// TestMountLazyS3: listing, stat and find work on a lazy S3 source without
// fetching anything; a read fetches that one file; a file whose object is
// gone at the source fails with EIO and the workspace stays usable.
func TestMountLazyS3(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	bucket := srv.NewBucket(t)
	objects := map[string]string{"logs/a.log": "line a\n", "logs/b.log": strings.Repeat("b", 200000), "top.csv": "x,y\n1,2\n", "gone": "soon deleted"}
	for k, v := range objects {
		srv.Put(t, bucket, "triage/"+k, []byte(v))
	}
	specFile := writeSpec(t, fmt.Sprintf("sources:\n  - path: /data\n    s3: {bucket: %s, prefix: triage/, endpoint: %q, path_style: true}\n", bucket, srv.Endpoint))
	store := filepath.Join(t.TempDir(), "ws")
	m := testmount.Start(t, store, "--spec", specFile)
	data := filepath.Join(m.Dir, "data")
	out := run(t, data, "find", ".", "-type", "f", "-printf", "%p %s\n")
	for k, v := range objects {
		if !strings.Contains(out, fmt.Sprintf("./%s %d\n", k, len(v))) {
			t.Fatalf("find lists\n%s\nwithout %s of %d bytes", out, k, len(v))
		}
	}
	run(t, data, "ls", "-lR")
	run(t, data, "stat", "logs/b.log")
	remoteFiles := func() int {
		t.Helper()
		m.Unmount(t)
		st, err := kv.Open(store, kv.Options{Logger: quietLog()})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		n := 0
		fs := wsfs.New(st, wsfs.Owner{})
		for k := range objects {
			if a, err := fs.Stat("/data/" + k); err != nil {
				t.Fatal(err)
			} else if a.Flags&kv.FlagRemote != 0 {
				n++
			}
		}
		return n
	}
	if n := remoteFiles(); n != len(objects) {
		t.Fatalf("listing fetched content: %d of %d files still remote", n, len(objects))
	}
	m.Remount(t)
	if d, err := os.ReadFile(filepath.Join(data, "logs/b.log")); err != nil || string(d) != objects["logs/b.log"] {
		t.Fatalf("read of a lazy file: %d bytes, %v", len(d), err)
	}
	srv.Client(t).DeleteObject(context.Background(), deleteInput(bucket, "triage/gone"))
	_, err := os.ReadFile(filepath.Join(data, "gone"))
	if !errors.Is(err, errEIO) {
		t.Fatalf("read of a file whose object is gone: %v, want EIO", err)
	}
	if !strings.Contains(m.Log(), "changed at the source") {
		t.Fatalf("the failed fetch is not in the daemon's log:\n%s", m.Log())
	}
	if d, err := os.ReadFile(filepath.Join(data, "top.csv")); err != nil || string(d) != objects["top.csv"] {
		t.Fatalf("read after a failed fetch: %q, %v", d, err)
	}
	if n := remoteFiles(); n != 2 {
		t.Fatalf("%d files remote after reading 2 of 4 (one failed), want 2", n)
	}
}

// TestImportCommand: the command line's errors for bad input are clear and
// leave nothing behind.
func TestImportCommand(t *testing.T) {
	bin := testmount.Binary(t)
	dir := t.TempDir()
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown field", "sources:\n  - path: /a\n    dri: x\n", "workspace.yaml:3: unknown field dri in a source"},
		{"overlap", "sources:\n  - path: /a\n    content: x\n  - path: /a/b\n    content: y\n", "sources[1].path: /a/b overlaps /a of sources[0]"},
		{"missing ref", fmt.Sprintf("sources:\n  - path: /r\n    git: {url: %q, ref: nope}\n", gittest.NewRepo(t, map[string]string{"f": "x"})), `ref "nope" does not exist`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := filepath.Join(dir, tc.name)
			cmd := exec.Command(bin, "import", "--spec", writeSpec(t, tc.yaml), "--store", store)
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), tc.want) {
				t.Fatalf("computerfs import: %v\n%s\nwant %q", err, out, tc.want)
			}
			if _, err := os.Stat(store); !os.IsNotExist(err) {
				t.Fatalf("a failed import left the store: %v", err)
			}
		})
	}
}

var errEIO = syscall.EIO

func deleteInput(bucket, key string) *s3.DeleteObjectInput {
	return &s3.DeleteObjectInput{Bucket: &bucket, Key: &key}
}

// TestRefreshMounted: `computerfs refresh -w` on a mounted workspace brings
// upstream changes in through the daemon, and the mount shows them at once
// although the kernel had the old content cached; a path with local edits
// is kept and the command exits 3.
func TestRefreshMounted(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	bucket := srv.NewBucket(t)
	srv.Put(t, bucket, "p/data.csv", []byte("v1\n"))
	repo := gittest.NewRepo(t, map[string]string{"main.go": "package main // v1\n", "other.go": "package main\n"})
	specFile := writeSpec(t, fmt.Sprintf("sources:\n  - path: /repo\n    git: {url: %q}\n  - path: /data\n    s3: {bucket: %s, prefix: p/, endpoint: %q, path_style: true}\n",
		repo, bucket, srv.Endpoint))
	store := filepath.Join(t.TempDir(), "ws")
	m := testmount.Start(t, store, "--spec", specFile)
	bin := testmount.Binary(t)
	read := func(p string) string {
		t.Helper()
		d, err := os.ReadFile(filepath.Join(m.Dir, p))
		if err != nil {
			t.Fatal(err)
		}
		return string(d)
	}
	// Cache the old contents in the kernel, and keep the files open: the
	// open files must see the new contents too.
	if read("repo/main.go") != "package main // v1\n" || read("data/data.csv") != "v1\n" {
		t.Fatal("imported contents")
	}
	var open []*os.File
	for _, p := range []string{"repo/main.go", "data/data.csv"} {
		f, err := os.Open(filepath.Join(m.Dir, p))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		io.ReadAll(f)
		open = append(open, f)
	}
	gittest.Commit(t, repo, map[string]string{"main.go": "package main // v2\n", "added.go": "package main\n"}, "upstream v2")
	srv.Put(t, bucket, "p/data.csv", []byte("v2 longer\n"))

	out, err := exec.Command(bin, "refresh", "-w", m.Dir).CombinedOutput()
	if err != nil {
		t.Fatalf("computerfs refresh: %v\n%s", err, out)
	}
	for _, want := range []string{"updated  " + "/repo/main.go", "added    /repo/added.go", "updated  /data/data.csv", "fast-forwarded main"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("refresh output lacks %q:\n%s", want, out)
		}
	}
	for i, want := range []string{"package main // v2\n", "v2 longer\n"} {
		buf := make([]byte, 100)
		n, _ := open[i].ReadAt(buf, 0)
		if string(buf[:n]) != want {
			t.Fatalf("a file open during the refresh reads %q, want %q", buf[:n], want)
		}
	}
	if got := read("repo/main.go"); got != "package main // v2\n" {
		t.Fatalf("the mount shows %q after refresh", got)
	}
	if got := read("data/data.csv"); got != "v2 longer\n" {
		t.Fatalf("the mount shows %q after refresh", got)
	}
	if got := read("repo/added.go"); got != "package main\n" {
		t.Fatalf("added file: %q", got)
	}
	if st := run(t, filepath.Join(m.Dir, "repo"), "git", "status", "--porcelain"); st != "" {
		t.Fatalf("git status after refresh:\n%s", st)
	}
	if log := run(t, filepath.Join(m.Dir, "repo"), "git", "log", "-1", "--format=%s"); log != "upstream v2\n" {
		t.Fatalf("git log after refresh: %q", log)
	}
	// The refresh's changes are journaled as the refresh, with its id.
	id := onlyRequest(t, bin, m, "refresh", "/data/data.csv")
	if out := run(t, m.Dir, bin, "log", "-w", m.Dir, "--path", "/data/data.csv"); !strings.Contains(out, "refresh /data/data.csv size=10 by refresh #"+id+"\n") {
		t.Fatalf("computerfs log --path /data/data.csv:\n%s", out)
	}

	// A local edit is kept and reported; exit status 3.
	if err := os.WriteFile(filepath.Join(m.Dir, "repo/main.go"), []byte("agent's edit\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gittest.Commit(t, repo, map[string]string{"main.go": "package main // v3\n"}, "upstream v3")
	cmd := exec.Command(bin, "refresh", "-w", m.Dir)
	out, err = cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != 3 || !strings.Contains(string(out), "kept     /repo/main.go: edited here and changed upstream") {
		t.Fatalf("refresh over a local edit: %v\n%s", err, out)
	}
	if got := read("repo/main.go"); got != "agent's edit\n" {
		t.Fatalf("refresh overwrote a local edit: %q", got)
	}
	// The second refresh (it fetched) has an id of its own.
	if second := requestsOf(t, bin, m, "refresh"); len(second) != 2 {
		t.Fatalf("two refreshes journaled with ids %v, want two ids", second)
	}
	out, err = exec.Command(bin, "status", "-w", m.Dir).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "/repo") || !strings.Contains(string(out), "s3://"+bucket+"/p/") {
		t.Fatalf("computerfs status: %v\n%s", err, out)
	}
}

// onlyRequest checks that the journal's records made by entry carry one
// request id, a positive one, and that path is among the paths they
// changed; it returns the id.
func onlyRequest(t *testing.T, bin string, m *testmount.Mount, entry, path string) string {
	t.Helper()
	reqs := requestsOf(t, bin, m, entry)
	if len(reqs) != 1 {
		t.Fatalf("the %s records carry ids %v, want one", entry, reqs)
	}
	for id, paths := range reqs {
		if n, err := strconv.ParseUint(id, 10, 64); err != nil || n == 0 || !slices.Contains(paths, path) {
			t.Fatalf("%s #%s changed %v: want a positive id and %s among them", entry, id, paths, path)
		}
		return id
	}
	return ""
}

// requestsOf returns the paths of the journal's records made by entry
// (refresh, sync...), by request id, as `computerfs log --json` shows them.
func requestsOf(t *testing.T, bin string, m *testmount.Mount, entry string) map[string][]string {
	t.Helper()
	out := run(t, m.Dir, bin, "log", "-w", m.Dir, "--json")
	ids := map[string][]string{}
	dec := json.NewDecoder(strings.NewReader(out))
	for {
		var e LogEntry
		if err := dec.Decode(&e); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("computerfs log --json: %v\n%s", err, out)
		}
		if e.Actor.Entry == entry {
			ids[e.Actor.Request] = append(ids[e.Actor.Request], e.Path)
		}
	}
	return ids
}

// TestImportInterrupted stops `computerfs import` midway, by SIGINT (it
// cleans up and says so) and by SIGKILL (it cannot): either way no store
// appears, and the next import completes.
func TestImportInterrupted(t *testing.T) {
	src := t.TempDir()
	for d := range 16 {
		dir := filepath.Join(src, fmt.Sprintf("d%02d", d))
		os.Mkdir(dir, 0o755)
		for f := range 500 {
			os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%04d", f)), []byte(strings.Repeat("x", f)), 0o644)
		}
	}
	specFile := writeSpec(t, fmt.Sprintf("sources:\n  - path: /big\n    dir: %q\n", src))
	bin := testmount.Binary(t)
	store := filepath.Join(t.TempDir(), "ws")
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGKILL} {
		cmd := exec.Command(bin, "import", "--spec", specFile, "--store", store)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Wait until the import is under way, then stop it.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			if ents, _ := os.ReadDir(store + ".importing/db"); len(ents) > 3 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the import never started:\n%s", out.String())
			}
		}
		time.Sleep(10 * time.Millisecond)
		cmd.Process.Signal(sig)
		err := cmd.Wait()
		if err == nil {
			t.Fatalf("%v: the import finished before it was stopped; make it bigger", sig)
		}
		if _, err := os.Stat(store); !os.IsNotExist(err) {
			t.Fatalf("%v: a store appeared: %v", sig, err)
		}
		if sig == syscall.SIGINT {
			if !strings.Contains(out.String(), "import interrupted; the store was left as it was") {
				t.Fatalf("SIGINT: output\n%s", out.String())
			}
			if _, err := os.Stat(store + ".importing"); !os.IsNotExist(err) {
				t.Fatalf("SIGINT left the staging directory: %v", err)
			}
		}
	}
	out, err := exec.Command(bin, "import", "--spec", specFile, "--store", store).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "removing an interrupted import") {
		t.Fatalf("import after a killed one: %v\n%s", err, out)
	}
	st, err := kv.Open(store, kv.Options{Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fs := wsfs.New(st, wsfs.Owner{})
	if d, err := fs.ReadFile("/big/d07/f0499"); err != nil || len(d) != 499 {
		t.Fatalf("last file: %d bytes, %v", len(d), err)
	}
	if p, err := st.Check(10); err != nil || len(p) > 0 {
		t.Fatalf("fsck: %v %q", err, p)
	}
}

// TestRefreshStore: `computerfs refresh --store` refreshes a store that is
// not mounted, in its own process.
func TestRefreshStore(t *testing.T) {
	repo := gittest.NewRepo(t, map[string]string{"f": "1"})
	store := filepath.Join(t.TempDir(), "ws")
	sp := parseSpec(t, fmt.Sprintf("sources:\n  - path: /r\n    git: {url: %q}\n", repo))
	if _, err := doImport(t, sp, store); err != nil {
		t.Fatal(err)
	}
	gittest.Commit(t, repo, map[string]string{"f": "2"}, "two")
	out, err := exec.Command(testmount.Binary(t), "refresh", "--store", store, "--json").CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"updated": [`) {
		t.Fatalf("computerfs refresh --store: %v\n%s", err, out)
	}
	st, err := kv.Open(store, kv.Options{Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if d, _ := wsfs.New(st, wsfs.Owner{}).ReadFile("/r/f"); string(d) != "2" {
		t.Fatalf("f = %q after refresh", d)
	}
}

// TestJournalOnMount: changes through the mount are journaled with the
// caller's command and uid, big writes as one record; `computerfs log`
// filters by path and sequence. After a SIGKILL of the daemon, every file
// that survived has its creation in the journal (a change and its record
// are one batch).
func TestJournalOnMount(t *testing.T) {
	store := filepath.Join(t.TempDir(), "ws")
	m := testmount.Start(t, store)
	bin := testmount.Binary(t)
	run(t, m.Dir, "sh", "-c", "mkdir -m 777 shared && dd if=/dev/zero of=shared/big bs=64k count=64 status=none && mv shared/big shared/big2")
	// Another user: the agent (nobody else may enter the mount).
	agent := mountAgent(t, m.Dir)
	cmd := exec.Command("touch", "shared/by-user")
	cmd.Dir = m.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: agent.UID, Gid: agent.GID}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("touch as the agent: %v\n%s", err, out)
	}
	log := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, append([]string{"log", "-w", m.Dir}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("computerfs log %v: %v\n%s", args, err, out)
		}
		// Drop the timestamps: "TIME SEQ OP PATH ..."
		var lines []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if _, rest, ok := strings.Cut(l, " "); ok {
				lines = append(lines, rest)
			}
		}
		return strings.Join(lines, "\n")
	}
	got := log()
	for _, want := range []string{
		"1 mkdir /shared by pid ",
		"(mkdir) uid 0",
		"2 create /shared/big by pid ",
		"3 write /shared/big size=4194304 by pid ",
		"4 rename /shared/big -> /shared/big2 by pid ",
		"5 create /shared/by-user by pid ",
		fmt.Sprintf("(touch) uid %d", agent.UID),
	} {
		if !strings.Contains(got, want) {
			t.Fatalf("log lacks %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "\n") + 1; n != 6 { // touch: create, then utimensat
		t.Fatalf("%d records, want 6 (64 writes are one record):\n%s", n, got)
	}
	if got := log("--path", "/shared/big2"); !strings.HasPrefix(got, "4 rename") || strings.Count(got, "\n") != 0 {
		t.Fatalf("--path /shared/big2:\n%s", got)
	}
	if got := log("--since", "5"); !strings.HasPrefix(got, "5 create /shared/by-user") {
		t.Fatalf("--since 5:\n%s", got)
	}
	// --since a duration back from now, and an RFC 3339 time (records at
	// or after it: here the time of record 4, to the nanosecond).
	if got := log("--since", "10m"); strings.Count(got, "\n")+1 != 6 {
		t.Fatalf("--since 10m:\n%s", got)
	}
	if got := log("--since", "1ms"); got != "" {
		t.Fatalf("--since 1ms (everything is older):\n%s", got)
	}
	var rec4 LogEntry
	if err := json.NewDecoder(strings.NewReader(run(t, m.Dir, bin, "log", "-w", m.Dir, "--since", "4", "--json"))).Decode(&rec4); err != nil || rec4.Seq != 4 {
		t.Fatalf("record 4: %+v, %v", rec4, err)
	}
	if got := log("--since", rec4.Time.Format(time.RFC3339Nano)); !strings.HasPrefix(got, "4 rename") || strings.Count(got, "\n") != 2 {
		t.Fatalf("--since %s (record 4's time):\n%s", rec4.Time.Format(time.RFC3339Nano), got)
	}

	// Crash: files made right up to the kill each have their record.
	run(t, m.Dir, "sh", "-c", "mkdir c && for i in $(seq 200); do echo $i > c/f$i; done")
	m.Kill(t)
	m.Remount(t)
	ents, err := os.ReadDir(filepath.Join(m.Dir, "c"))
	if err != nil {
		t.Fatal(err)
	}
	got = log("--path", "/c")
	for _, e := range ents {
		if !strings.Contains(got, "create /c/"+e.Name()+" by") {
			t.Fatalf("%s survived the crash without its record", e.Name())
		}
	}
}

// TestExecShell: `computerfs exec` runs a command on the fast path in the
// daemon; its output streams back, its exit status is the command's, its
// writes show on the mount at once (even to a file read just before) and
// the journal names the shell and the request.
func TestExecShell(t *testing.T) {
	store := filepath.Join(t.TempDir(), "ws")
	m := testmount.Start(t, store)
	bin := testmount.Binary(t)
	if err := os.WriteFile(filepath.Join(m.Dir, "f"), []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The agent's file (root's would be read-only to the fast path).
	agent := mountAgent(t, m.Dir)
	if err := os.Chown(filepath.Join(m.Dir, "f"), int(agent.UID), int(agent.GID)); err != nil {
		t.Fatal(err)
	}
	if d, _ := os.ReadFile(filepath.Join(m.Dir, "f")); string(d) != "old\n" { // now in the kernel's cache
		t.Fatalf("f = %q", d)
	}
	exec1 := func(stdin string, args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"exec", "-w", m.Dir}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		cmd.Run()
		return out.String(), errb.String(), cmd.ProcessState.ExitCode()
	}
	// Looked up before they exist: the kernel caches that they do not,
	// and the shell's creates must drop that.
	for _, p := range []string{"d", "d/sorted"} {
		if _, err := os.Stat(filepath.Join(m.Dir, p)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("stat %s before exec: %v", p, err)
		}
	}
	out, errOut, code := exec1("", "--", "echo new > /workspace/f && mkdir -p d && printf 'b\\na\\n' | sort | tee d/sorted; echo warn >&2")
	if out != "a\nb\n" || errOut != "warn\n" || code != 0 {
		t.Fatalf("exec: stdout %q stderr %q exit %d", out, errOut, code)
	}
	if d, _ := os.ReadFile(filepath.Join(m.Dir, "f")); string(d) != "new\n" {
		t.Fatalf("the mount shows f = %q after exec wrote it", d)
	}
	if d, _ := os.ReadFile(filepath.Join(m.Dir, "d/sorted")); string(d) != "a\nb\n" {
		t.Fatalf("d/sorted = %q", d)
	}
	if out, _, code := exec1("piped input\n", "--", "wc -l"); strings.TrimSpace(out) != "1" || code != 0 {
		t.Fatalf("stdin: %q %d", out, code)
	}
	if _, _, code := exec1("", "--", "exit 7"); code != 7 {
		t.Fatalf("exit status %d, want 7", code)
	}
	if out, errOut, code := exec1("", "-v", "--", "gcc --version"); code != 0 || !strings.Contains(out, "gcc") || !strings.Contains(errOut, "backend sandbox (gcc is not built in)") {
		t.Fatalf("auto with a native program: exit %d, %q %q", code, out, errOut)
	}
	// The fast path never reaches a host file; auto sends a command that
	// names one to the sandbox, whose root file system it is.
	if out, errOut, code := exec1("", "--backend", "shell", "--", "cat /etc/passwd"); code == 0 || strings.Contains(out+errOut, "root:") {
		t.Fatalf("the fast path reached a host file: exit %d, %q %q", code, out, errOut)
	}
	if _, errOut, _ := exec1("", "-v", "--", "cat /etc/passwd"); !strings.Contains(errOut, "backend sandbox (/etc/passwd is the sandbox's)") {
		t.Fatalf("auto kept cat /etc/passwd on the fast path: %q", errOut)
	}
	logOut, err := exec.Command(bin, "log", "-w", m.Dir, "--path", "/d").CombinedOutput()
	if err != nil || !strings.Contains(string(logOut), "mkdir /d by shell #") {
		t.Fatalf("journal of exec's changes: %v\n%s", err, logOut)
	}
}

// mountAgent is the agent of the workspace mounted at dir: the owner of
// its root.
func mountAgent(t *testing.T, dir string) Agent {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	return Agent{UID: st.Uid, GID: st.Gid}
}

// TestImportDiskUse: an imported store takes on disk about what its data
// does. It kept Pebble's logs, each preallocated to 110% of the memtable
// and kept for reuse (four of them: 722 MB on disk for 161 MB of data),
// until the first open removed them.
func TestImportDiskUse(t *testing.T) {
	src := t.TempDir()
	const files, size = 768, 64 << 10 // 48 MiB, six memtables of 8 MiB
	buf := make([]byte, size)
	for i := range files {
		rand.Read(buf)
		d := filepath.Join(src, fmt.Sprintf("d%02d", i%16))
		os.MkdirAll(d, 0o755)
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%d", i)), buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	store := filepath.Join(t.TempDir(), "ws")
	sp := parseSpec(t, "sources:\n  - path: /data\n    dir: "+src+"\n")
	if _, err := Import(context.Background(), ImportOptions{Spec: sp, Store: store, Logger: quietLog(), MemTableSize: 8 << 20}); err != nil {
		t.Fatal(err)
	}
	var allocated int64
	var logs []string
	filepath.WalkDir(store, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			return err
		}
		allocated += st.Blocks * 512
		if strings.HasSuffix(p, ".log") {
			logs = append(logs, fmt.Sprintf("%s (%d bytes, %d allocated)", filepath.Base(p), st.Size, st.Blocks*512))
		}
		return nil
	})
	const data = files * size
	t.Logf("%d MiB of data take %.1f MiB on disk; logs %v", data>>20, float64(allocated)/(1<<20), logs)
	if allocated > data+data/8+4<<20 || len(logs) > 1 {
		t.Errorf("%d MiB of data take %.1f MiB on disk (want at most %d MiB); logs %v", data>>20, float64(allocated)/(1<<20), (data+data/8+4<<20)>>20, logs)
	}
	// The store is whole.
	st, err := kv.Open(store, kv.Options{Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	got, err := wsfs.New(st, wsfs.Owner{}).ReadFile(fmt.Sprintf("/data/d%02d/f%d", (files-1)%16, files-1))
	if err != nil || !bytes.Equal(got, buf) {
		t.Fatalf("the last file imported: %v, %d bytes", err, len(got))
	}
}
