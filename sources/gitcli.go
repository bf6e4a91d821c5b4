package sources

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"

	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/spec"
)

// The git command line clones several times faster than go-git here (its
// pack indexing is multi-threaded C). So a git source is cloned with it,
// without a checkout, into a scratch directory on local disk; its .git is
// copied into the store; the files of HEAD are streamed from git cat-file
// straight into the store; and the index is written from what the store
// made, so git on the mount finds the checkout clean without reading a
// file. Without a git binary, go-git clones straight into the store.

// gitBinary is the git command the import uses, or "" to use go-git
// (Importer.NoGitCLI or COMPUTERFS_NO_GIT_CLI=1 ask for go-git).
func (im *Importer) gitBinary() string {
	if im.NoGitCLI || os.Getenv("COMPUTERFS_NO_GIT_CLI") == "1" {
		return ""
	}
	p, err := exec.LookPath("git")
	if err != nil {
		return ""
	}
	return p
}

// cloneWithCLI clones into a scratch directory and moves the result into
// the store at src.Path.
func (im *Importer) cloneWithCLI(ctx context.Context, gitBin string, idx int, src *spec.Source, url string, target refTarget) error {
	g := src.Git
	scratch, err := os.MkdirTemp(im.ScratchDir, "computerfs-git-")
	if err != nil {
		return fmt.Errorf("scratch directory for the clone: %w", err)
	}
	defer os.RemoveAll(scratch)
	wt := scratch + "/wt"

	args, env, err := cliAuth(g, url)
	if err != nil {
		return err
	}
	// No templates (no hooks from the host), no prompts, no checkout.
	args = append(args, "clone", "--progress", "--template=", "--no-checkout")
	if g.Depth > 0 {
		// --no-local: a local path is cloned through the transport too,
		// which is what honours the depth.
		args = append(args, "--depth", fmt.Sprint(g.Depth), "--no-local")
	}
	if target.ref != "" {
		args = append(args, "--branch", target.ref.Short())
	}
	args = append(args, "--", url, wt)
	im.Progress.Begin(src.Path, "clone", 0, 0)
	prog := &gitProgress{p: im.Progress, name: src.Path}
	_, err = runGitStderr(ctx, gitBin, scratch, env, nil, prog, args...)
	prog.end()
	if err != nil {
		return fmt.Errorf("git clone %s: %w", g.URL, err)
	}
	if !target.hash.IsZero() { // a commit: a detached HEAD, as git checkout COMMIT leaves it
		if _, err := runGit(ctx, gitBin, wt, nil, nil, "update-ref", "--no-deref", "-m", "checkout: moving to "+target.hash.String(), "HEAD", target.hash.String()); err != nil {
			return fmt.Errorf("git %s: commit %s: %w", g.URL, target.hash, err)
		}
	}
	tree, err := runGit(ctx, gitBin, wt, nil, nil, "ls-tree", "-r", "-z", "--full-tree", "HEAD")
	if err != nil {
		return fmt.Errorf("git %s: list HEAD: %w", g.URL, err)
	}
	entries, err := parseLsTree(tree)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if _, err := im.Spec.TreeFile(idx, e.path); err != nil {
			return fmt.Errorf("git %s: the tree to check out has a path the workspace refuses: %w", g.URL, err)
		}
	}
	if err := im.fs.Mkdir(src.Path, 0o755); err != nil {
		return err
	}
	if err := im.copyTree(ctx, wt+"/.git", path.Join(src.Path, ".git"), nil); err != nil {
		return err
	}
	im.Progress.Begin(src.Path, "checkout", int64(len(entries)), 0)
	ix, err := im.checkoutBlobs(ctx, gitBin, wt, idx, src.Path, entries)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if err := index.NewEncoder(&out).Encode(ix); err != nil {
		return fmt.Errorf("git index: %w", err)
	}
	// Written after every file, so its time is later than theirs and git
	// trusts the stat data (no "racily clean" entries).
	return im.fs.WriteFile(path.Join(src.Path, ".git/index"), out.Bytes(), 0o644)
}

// treeEntry is one line of git ls-tree -r.
type treeEntry struct {
	mode filemode.FileMode
	hash plumbing.Hash
	path string
}

func parseLsTree(out []byte) ([]treeEntry, error) {
	var entries []treeEntry
	for _, line := range bytes.Split(out, []byte{0}) {
		if len(line) == 0 {
			continue
		}
		// <mode> SP <type> SP <hash> TAB <path>
		meta, p, ok := bytes.Cut(line, []byte{'\t'})
		f := strings.Fields(string(meta))
		if !ok || len(f) != 3 || len(f[2]) != 40 {
			return nil, fmt.Errorf("git ls-tree: unexpected line %q", line)
		}
		m, err := filemode.New(f[0])
		if err != nil {
			return nil, fmt.Errorf("git ls-tree: mode %q: %w", f[0], err)
		}
		entries = append(entries, treeEntry{mode: m, hash: plumbing.NewHash(f[2]), path: string(p)})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].path < entries[j].path })
	return entries, nil
}

// checkoutBlobs writes the files of entries under dst, their contents
// streamed by one git cat-file --batch, and returns the index describing
// them.
func (im *Importer) checkoutBlobs(ctx context.Context, gitBin, repo string, idx int, dst string, entries []treeEntry) (*index.Index, error) {
	cmd := exec.CommandContext(ctx, gitBin, append(confinedArgs(), "cat-file", "--batch")...)
	cmd.Dir = repo
	cmd.Env = gitEnv(nil)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer cmd.Wait()
	defer stdin.Close()
	go func() { // ask for every blob; cat-file answers in order
		w := bufio.NewWriterSize(stdin, 64<<10)
		for _, e := range entries {
			if e.mode != filemode.Submodule {
				fmt.Fprintf(w, "%s\n", e.hash)
			}
		}
		w.Flush()
		stdin.Close()
	}()
	r := bufio.NewReaderSize(stdout, 1<<20)
	ix := &index.Index{Version: 2}
	dirs := map[string]uint64{}
	root, _, err := im.fs.Resolve(dst)
	if err != nil {
		return nil, err
	}
	dirs[""] = root
	buf := make([]byte, 16*kv.ChunkSize)
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		parent, err := im.mkdirs(dirs, path.Dir(e.path))
		if err != nil {
			return nil, fmt.Errorf("checkout %s: %w", e.path, err)
		}
		name := path.Base(e.path)
		ie := &index.Entry{Hash: e.hash, Name: e.path, Mode: e.mode}
		if e.mode == filemode.Submodule { // an empty directory, as git leaves it
			if _, err := im.Store.Create(parent, name, kv.NewInode{Mode: kv.S_IFDIR | 0o755, Uid: im.owner.UID, Gid: im.owner.GID}); err != nil {
				return nil, err
			}
			ix.Entries = append(ix.Entries, ie)
			continue
		}
		size, err := catFileHeader(r, e.hash)
		if err != nil {
			return nil, fmt.Errorf("git cat-file: %w (%s)", err, strings.TrimSpace(stderr.String()))
		}
		a, err := im.writeBlob(r, parent, name, e.mode, size, buf)
		if err != nil {
			return nil, fmt.Errorf("checkout %s: %w", e.path, err)
		}
		if err := im.Store.SetOrigin(a.Ino, kv.Origin{Source: uint32(idx), Key: e.path, ID: e.hash.String()}); err != nil {
			return nil, err
		}
		if a, err = im.Store.GetAttr(a.Ino); err != nil {
			return nil, err
		}
		fillStat(ie, a)
		ix.Entries = append(ix.Entries, ie)
		im.Progress.Add(1, int64(size))
	}
	return ix, nil
}

// catFileHeader reads "<hash> blob <size>" and returns the size.
func catFileHeader(r *bufio.Reader, want plumbing.Hash) (int64, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != want.String() || f[1] != "blob" {
		return 0, fmt.Errorf("unexpected answer %q for %s", strings.TrimSpace(line), want)
	}
	return strconv.ParseInt(f[2], 10, 64)
}

// writeBlob creates one checked-out file from the next size bytes of r
// (and the newline after them).
func (im *Importer) writeBlob(r *bufio.Reader, parent uint64, name string, mode filemode.FileMode, size int64, buf []byte) (kv.Attr, error) {
	n := kv.NewInode{Uid: im.owner.UID, Gid: im.owner.GID}
	switch mode {
	case filemode.Symlink:
		target := make([]byte, size)
		if _, err := io.ReadFull(r, target); err != nil {
			return kv.Attr{}, err
		}
		n.Mode, n.Target = kv.S_IFLNK|0o777, string(target)
	case filemode.Executable:
		n.Mode = kv.S_IFREG | 0o755
	default:
		n.Mode = kv.S_IFREG | 0o644
	}
	a, err := im.Store.Create(parent, name, n)
	if err != nil {
		return a, err
	}
	if mode != filemode.Symlink {
		for off := int64(0); off < size; {
			chunk := buf[:min(int64(len(buf)), size-off)]
			if _, err := io.ReadFull(r, chunk); err != nil {
				return a, err
			}
			if a, err = im.Store.Write(a.Ino, off, chunk); err != nil {
				return a, err
			}
			off += int64(len(chunk))
		}
	}
	if _, err := r.Discard(1); err != nil { // the newline after the content
		return a, err
	}
	return a, nil
}

// runGit runs git in dir (a scratch directory of the daemon's, never the
// workspace) and returns its output. What steers it is the daemon's:
// the spec's url and credentials, confinedArgs and gitEnv.
func runGit(ctx context.Context, gitBin, dir string, env []string, stdin io.Reader, args ...string) ([]byte, error) {
	return runGitStderr(ctx, gitBin, dir, env, stdin, &bytes.Buffer{}, args...)
}

// runGitStderr is runGit with git's stderr going to stderr, whose String
// is the message of a failure.
func runGitStderr(ctx context.Context, gitBin, dir string, env []string, stdin io.Reader, stderr interface {
	io.Writer
	String() string
}, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, gitBin, append(confinedArgs(), args...)...)
	cmd.Dir = dir
	cmd.Env = gitEnv(env)
	cmd.Stdin = stdin
	cmd.Stderr = stderr
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			return nil, err
		}
		return nil, fmt.Errorf("%s (%w)", msg, err)
	}
	return out, nil
}

// cliAuth turns a git source's credentials into git options and
// environment: a token becomes an HTTP Authorization header given on the
// command line (so it is not written into .git/config), a key file an ssh
// command; the SSH agent needs nothing.
func cliAuth(g *spec.Git, url string) (args, env []string, err error) {
	auth, err := GitAuth(g, url)
	if err != nil {
		return nil, nil, err
	}
	switch a := auth.(type) {
	case *githttp.BasicAuth:
		cred := base64.StdEncoding.EncodeToString([]byte(a.Username + ":" + a.Password))
		args = append(args, "-c", "http.extraHeader=Authorization: Basic "+cred)
	case *gitssh.PublicKeys:
		env = append(env, "GIT_SSH_COMMAND=ssh -i '"+strings.ReplaceAll(g.SSHKey, "'", `'\''`)+"' -o IdentitiesOnly=yes -o BatchMode=yes")
	}
	return args, env, nil
}

// confinedArgs are the options every git command of the import starts
// with: no hooks, no fsmonitor, no ext:: or fd:: transports (only the
// protocols a spec's url may use), nothing run on the way.
func confinedArgs() []string {
	return []string{
		"-c", "core.hooksPath=/dev/null",
		"-c", "core.fsmonitor=false",
		"-c", "protocol.allow=never",
		"-c", "protocol.file.allow=always",
		"-c", "protocol.http.allow=always",
		"-c", "protocol.https.allow=always",
		"-c", "protocol.ssh.allow=always",
		"-c", "protocol.git.allow=always",
		"-c", "submodule.recurse=false",
		"-c", "credential.helper=",
		"-c", "core.askPass=",
	}
}

// keptGitEnv are the git variables of the daemon's environment that the
// import's git keeps (how to reach an ssh or https server); every other
// GIT_* variable is dropped.
var keptGitEnv = map[string]bool{"GIT_SSH": true, "GIT_SSH_COMMAND": true, "GIT_SSH_VARIANT": true,
	"GIT_SSL_CAINFO": true, "GIT_SSL_CAPATH": true}

// gitEnv is the environment of the import's git: the daemon's, without
// GIT_* variables other than keptGitEnv, with neither the system's nor a
// user's git configuration (no url.insteadOf, include or credential
// helper of the host's applies: the spec says where to connect), no
// prompts, then extra.
func gitEnv(extra []string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "GIT_") && !keptGitEnv[name] {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_SYSTEM=/dev/null", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=", "SSH_ASKPASS=", "LC_ALL=C",
		"GIT_ALLOW_PROTOCOL=file:http:https:ssh:git", "GIT_PROTOCOL_FROM_USER=0", "GIT_NO_REPLACE_OBJECTS=1")
	return append(env, extra...)
}

func timeFromNs(ns int64) time.Time { return time.Unix(0, ns) }
