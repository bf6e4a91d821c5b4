// Package gittest makes real git repositories for tests with the git
// command-line tool, and serves them over smart HTTP with git http-backend.
//
// Every git command runs with the environment of Env: the system and
// global configuration are ignored, and the author, committer and dates
// are fixed, so a repository built from the same files and messages has
// the same commit ids on every machine. Commits are on branch main.
package gittest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The identity of every commit and tag.
const (
	AuthorName     = "Gittest Author"
	AuthorEmail    = "author@gittest.invalid"
	CommitterName  = "Gittest Committer"
	CommitterEmail = "committer@gittest.invalid"
)

// Epoch is the date of a repository's first commit; commit n (counting
// from 0 along the first-parent history) is dated Epoch plus n minutes.
var Epoch = time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)

// Env returns the environment entries that make git independent of the
// machine's configuration and give it the fixed identity, dated Epoch.
// Append them after os.Environ() (later entries win).
func Env() []string { return envAt(Epoch) }

func envAt(date time.Time) []string {
	d := fmt.Sprintf("%d +0000", date.Unix())
	return []string{
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=" + os.DevNull,
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ASKPASS=",
		"SSH_ASKPASS=",
		"GIT_AUTHOR_NAME=" + AuthorName,
		"GIT_AUTHOR_EMAIL=" + AuthorEmail,
		"GIT_AUTHOR_DATE=" + d,
		"GIT_COMMITTER_NAME=" + CommitterName,
		"GIT_COMMITTER_EMAIL=" + CommitterEmail,
		"GIT_COMMITTER_DATE=" + d,
		"LC_ALL=C",
	}
}

// Git runs git with args in dir (the current directory when empty) and
// returns its standard output with surrounding white space trimmed. It
// fails the test, showing standard error, if git fails.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := run(dir, nil, nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// run runs git with the environment of Env plus extra.
func run(dir string, extra []string, stdin *bytes.Reader, args ...string) (string, error) {
	return runEnv(dir, append(Env(), extra...), stdin, args...)
}

func runEnv(dir string, env []string, stdin *bytes.Reader, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	AsOwner(cmd, dir)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("git %s (in %s): %v\n%s", strings.Join(args, " "), dir, err, stderr.Bytes())
	}
	return stdout.String(), nil
}

// AsOwner makes cmd, if this process is root, run as the owner of dir
// when that is another user: a workspace's repositories belong to its
// agent, and git refuses them to root ("dubious ownership"), as it must
// (their config is the agent's). HOME is then a directory that does not
// exist, so that git reads nothing of root's.
func AsOwner(cmd *exec.Cmd, dir string) {
	var st syscall.Stat_t
	if os.Geteuid() != 0 || syscall.Stat(dir, &st) != nil || st.Uid == 0 {
		return
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: st.Uid, Gid: st.Gid}}
	cmd.Env = append(cmd.Env, "HOME=/nonexistent-home")
}

// NewRepo creates a repository in a new temporary directory, commits files
// (path → content; paths use "/") on branch main with the message
// "initial", and returns the directory. With no files the commit is empty.
func NewRepo(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	Git(t, dir, "init", "-q", "-b", "main")
	Commit(t, dir, files, "initial")
	return dir
}

// WriteFiles writes files (path → content) into the work tree of dir,
// creating directories as needed.
func WriteFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Commit writes files into the work tree of dir, stages every change in it
// (so files removed, made executable or turned into symbolic links with the
// os package before the call are committed too) and commits with msg. The
// commit is made even if nothing changed. It returns the commit id.
func Commit(t testing.TB, dir string, files map[string]string, msg string) string {
	t.Helper()
	WriteFiles(t, dir, files)
	Git(t, dir, "add", "-A")
	n := 0
	if _, err := run(dir, nil, nil, "rev-parse", "-q", "--verify", "HEAD"); err == nil {
		n, err = strconv.Atoi(Git(t, dir, "rev-list", "--count", "--first-parent", "HEAD"))
		if err != nil {
			t.Fatal(err)
		}
	}
	date := Epoch.Add(time.Duration(n) * time.Minute)
	if _, err := runEnv(dir, envAt(date), nil, "commit", "-q", "--allow-empty", "--no-verify", "-m", msg); err != nil {
		t.Fatal(err)
	}
	return Head(t, dir)
}

// Head returns the commit id of HEAD in dir.
func Head(t testing.TB, dir string) string {
	t.Helper()
	return Git(t, dir, "rev-parse", "HEAD")
}

// Branch creates branch name at HEAD without checking it out.
func Branch(t testing.TB, dir, name string) {
	t.Helper()
	Git(t, dir, "branch", name)
}

// Tag creates the lightweight tag name at HEAD.
func Tag(t testing.TB, dir, name string) {
	t.Helper()
	Git(t, dir, "tag", name)
}

// AnnotatedTag creates the annotated tag name at HEAD with message msg,
// tagged by the committer at Epoch, and returns the tag object's id.
func AnnotatedTag(t testing.TB, dir, name, msg string) string {
	t.Helper()
	Git(t, dir, "tag", "-a", "-m", msg, name)
	return Git(t, dir, "rev-parse", "refs/tags/"+name)
}

// Bare makes a bare clone of the repository in dir, with all its branches
// and tags, and returns its path: a directory named repo.git in a new
// temporary directory.
func Bare(t testing.TB, dir string) string {
	t.Helper()
	bare := filepath.Join(t.TempDir(), "repo.git")
	Git(t, "", "clone", "-q", "--bare", "--", dir, bare)
	return bare
}
