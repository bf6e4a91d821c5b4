package shell

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/computerfs/computerfs/fs"
	"github.com/computerfs/computerfs/internal/gittest"
	"github.com/computerfs/computerfs/internal/testmount"
	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/policy"
	"github.com/computerfs/computerfs/spec"
	"github.com/computerfs/computerfs/wsfs"
)

// agentGit runs a script with bash and the git CLI in the copy as the
// agent's uid, as git runs on the mount in the sandbox.
func agentGit(t testing.TB, base, script string) (string, string, int) {
	t.Helper()
	ws := base + "/w"
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = ws + "/repo"
	cmd.Env = append([]string{"HOME=" + ws, "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "TZ=UTC", "TMPDIR=" + base + "/t"}, gittest.Env()...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: rtAgent, Gid: rtAgent, Groups: []uint32{}}}
	cmd.Stdin = strings.NewReader("")
	return runCmd(t, cmd)
}

// sortedLines is s's lines in order: git's warnings come in the order of
// readdir, which is the file system's (a hash on tmpfs, names on the
// mount).
func sortedLines(s string) string {
	l := strings.SplitAfter(s, "\n")
	sort.Strings(l)
	return strings.Join(l, "")
}

// TestGitSeesAsTheAgent: the fast path's git lists, stats and reads the
// work tree as the agent's programs do through the kernel. The operator's
// directories inside a repository (0700: neither listed nor searched;
// 0711: searched, not listed; 0744: listed, not searched), with tracked
// files changed in them and untracked files whose names are secret: the
// fast path's git status, ls-files, diff, clean -n and add give what the
// git CLI gives as the agent's uid on a copy with the same owners and
// modes (stdout and status byte for byte, the same warnings), and no
// name it could not list. Before, status listed the untracked files of
// a 0700 directory and reported its tracked files modified.
// agentRepo is a repository on the fast path (the agent's shell, with
// rules) and its copy on tmpfs for the git CLI as the agent's uid, with
// the same changes: modified tracked files and untracked ones, then the
// operator's directories (chown root, the modes given).
func agentRepo(t *testing.T, rules *policy.Checker, edits map[string]string, modes map[string]uint32) (*Shell, *wsfs.FS, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("needs root (files of two owners, git as the agent's uid)")
	}
	origin := buildGitOrigin(t)
	_, root := gitStore(t, origin)
	// The import's files are the agent's, as a workspace's are.
	var chown func(p string)
	chown = func(p string) {
		check(t, root.Lchown(p, rtAgent, rtAgent))
		var dirs []string
		check(t, root.ReadDir(p, "", func(d kv.Dirent) bool {
			if d.Type == kv.S_IFDIR {
				dirs = append(dirs, p+"/"+d.Name)
			} else {
				check(t, root.Lchown(p+"/"+d.Name, rtAgent, rtAgent))
			}
			return true
		}))
		for _, d := range dirs {
			chown(d)
		}
	}
	chown("repo")
	agent := wsfs.New(root.Store(), wsfs.Owner{UID: rtAgent, GID: rtAgent})
	s := New(agent.ForAgent().WithPolicy(rules), Options{UID: rtAgent, GID: rtAgent})
	base := gitCopy(t, origin)
	if out, err := exec.Command("chown", "-R", "200001:200001", base).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v %s", err, out)
	}
	ws := base + "/w/repo"
	// The same changes on both sides: as the agent, then the operator's
	// directories.
	for p, c := range edits {
		check(t, agent.MkdirAll("repo/"+filepath.Dir(p), 0o755))
		check(t, agent.WriteFile("repo/"+p, []byte(c), 0o644))
		check(t, os.MkdirAll(filepath.Dir(ws+"/"+p), 0o755))
		check(t, os.WriteFile(ws+"/"+p, []byte(c), 0o644))
		check(t, os.Lchown(filepath.Dir(ws+"/"+p), rtAgent, rtAgent))
		check(t, os.Lchown(ws+"/"+p, rtAgent, rtAgent))
	}
	for p, mode := range modes {
		check(t, root.Lchown("repo/"+p, 0, 0))
		check(t, root.Chmod("repo/"+p, mode))
		check(t, os.Lchown(ws+"/"+p, 0, 0))
		check(t, os.Chmod(ws+"/"+p, os.FileMode(mode)))
	}
	return s, root, base
}

func TestGitSeesAsTheAgent(t *testing.T) {
	s, _, base := agentRepo(t, nil, map[string]string{
		"docs/guide.md":            "the operator's now\n",
		"internal/util/strings.go": "package util\n",
		"secret/leak-name-1":       "x\n",
		"secret/sub/leak-name-2":   "x\n",
		"rdonly/listed-name":       "x\n",
		"search/hidden-name":       "x\n",
		"open/visible":             "x\n",
	}, map[string]uint32{"docs": 0o700, "secret": 0o700, "internal": 0o711, "search": 0o711, "rdonly": 0o744})
	sameAsAgentGit(t, s, base, agentGitScripts, func(l string) bool { return true })
}

// agentGitScripts are the command lines compared, in sequence (add and
// commit change both sides alike).
var agentGitScripts = []string{
	"git status",
	"git status --short",
	"git status --porcelain",
	"git status -s -uall",
	"git status --porcelain -- docs",
	"git status -s -- internal",
	"git ls-files -o --exclude-standard",
	"git ls-files -m",
	"git diff --stat",
	"git diff --name-only",
	"git diff",
	"git clean -n",
	"git add -n -A",
	"git add -A; git status --porcelain",
	"git add open; git status --porcelain",
	"git add -u; git status --porcelain",
	"git commit -qam wip; git status --porcelain; git log --stat -1 --format=%s",
	"git grep -n package",
	"git grep -n operator",
	"git log --oneline -- docs/guide.md internal",
	"git clean -nd",
	"echo x >> README.md; git stash; git status --porcelain; git stash pop",
	"git stash -u; git status --porcelain",
}

// sameAsAgentGit runs each script on the fast path and with the git CLI
// as the agent: stdout and status must be the same, and stderr's lines
// (those keep selects of git's) as a set; no output may name a file
// called leak-name or hidden-name.
func sameAsAgentGit(t *testing.T, s *Shell, base string, scripts []string, keep func(line string) bool) {
	t.Helper()
	run := func(script string) (string, string, int) {
		t.Helper()
		var out, errb bytes.Buffer
		res, err := s.Exec(context.Background(), script, ExecOptions{Cwd: "/workspace/repo", Env: gitIdentity(),
			Stdout: &out, Stderr: &errb, Timeout: 30 * time.Second})
		if err != nil {
			t.Fatalf("%q: %v", script, err)
		}
		return out.String(), errb.String(), res.ExitCode
	}
	for _, script := range scripts {
		if ok, why := s.CanRunIn("/workspace/repo", script); !ok {
			t.Errorf("%s: not on the fast path: %s", script, why)
			continue
		}
		got, gerr, gcode := run(script)
		want, werr, wcode := agentGit(t, base, script)
		var kept []string
		for _, l := range strings.SplitAfter(werr, "\n") {
			if l != "" && keep(l) {
				kept = append(kept, l)
			}
		}
		if got != want || gcode != wcode || sortedLines(gerr) != sortedLines(strings.Join(kept, "")) {
			t.Errorf("%s\n--- fast path status %d, stderr:\n%s--- git as the agent status %d, stderr:\n%s%s", script, gcode, gerr, wcode, werr, firstDiff(got, want))
		}
		if strings.Contains(got+gerr, "leak-name") || strings.Contains(got+gerr, "hidden-name") {
			t.Errorf("%s: named what the agent cannot list:\n%s%s", script, got, gerr)
		}
	}
}

// TestGitSeesAsTheAgentPolicy: with path rules, the fast path's git sees
// the work tree as the agent's programs see it on the mount: a denied
// directory's name is left out of its parent's listing, and a denied
// file cannot be stat'ed (EACCES). Compared with the git CLI as the
// agent on a copy where the denied untracked names are absent and the
// denied tracked directory is the operator's 0700 one (which git, seeing
// its name, warns it cannot open: the one line the mount does not give).
func TestGitSeesAsTheAgentPolicy(t *testing.T) {
	rules := policy.New(&spec.Policy{Deny: []string{"/repo/data", "/repo/vault", "**/*.secret"}})
	s, root, base := agentRepo(t, rules, map[string]string{
		"data/records.csv":         "the agent's change\n",
		"data/leak-name-new":       "x\n",
		"vault/leak-name-1":        "x\n",
		"open/leak-name.secret":    "x\n",
		"open/visible":             "x\n",
		"internal/util/strings.go": "package util\n",
	}, nil)
	_ = root
	ws := base + "/w/repo"
	check(t, os.RemoveAll(ws+"/vault"))
	check(t, os.Remove(ws+"/open/leak-name.secret"))
	check(t, os.Lchown(ws+"/data", 0, 0))
	check(t, os.Chmod(ws+"/data", 0o700))
	var scripts []string
	for _, sc := range agentGitScripts {
		scripts = append(scripts, strings.NewReplacer("-- docs", "-- data", "-- internal", "-- open").Replace(sc))
	}
	sameAsAgentGit(t, s, base, scripts, func(l string) bool { return !strings.Contains(l, "'data/'") })
}

// TestGitOnTheMount compares the fast path's git with the git CLI run as
// the agent's uid on the FUSE mount of the very same store, with the
// agent's rules enforced by the mount (denied names left out of
// listings, EACCES on lookups) and the operator's directories: the
// command lines that do not change the repository, stdout, status and
// the set of warnings alike.
func TestGitOnTheMount(t *testing.T) {
	rules := policy.New(&spec.Policy{Deny: []string{"/repo/data", "/repo/vault", "**/*.secret"}})
	s, root, _ := agentRepo(t, rules, map[string]string{
		"data/records.csv":         "the agent's change\n",
		"data/leak-name-new":       "x\n",
		"vault/leak-name-1":        "x\n",
		"open/leak-name.secret":    "x\n",
		"open/visible":             "x\n",
		"docs/guide.md":            "the operator's now\n",
		"internal/util/strings.go": "package util\n",
		"secret/leak-name-2":       "x\n",
		"rdonly/listed-name":       "x\n",
		"search/hidden-name":       "x\n",
	}, map[string]uint32{"docs": 0o700, "secret": 0o700, "internal": 0o711, "search": 0o711, "rdonly": 0o744})
	mp := filepath.Join(testmount.PublicDir(t, "gitmount-"), "mnt")
	check(t, os.Mkdir(mp, 0o755))
	srv, err := fs.Mount(root.Store(), mp, fs.MountOptions{Config: fs.Config{
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Agent:  &fs.AgentRules{Is: func(uid uint32) bool { return uid == rtAgent }, Policy: rules},
	}})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Wait()
	t.Cleanup(func() {
		if err := srv.Unmount(); err != nil {
			syscall.Unmount(mp, syscall.MNT_DETACH)
		}
	})
	for _, script := range []string{
		"git status", "git status --short", "git status --porcelain", "git status -s -uall",
		"git status --porcelain -- docs data", "git ls-files -o --exclude-standard", "git ls-files -m",
		"git diff --stat", "git diff --name-only", "git diff", "git clean -n", "git clean -nd",
		"git add -n -A", "git grep -n package", "git log --oneline -- docs/guide.md data",
	} {
		cmd := exec.Command("bash", "-c", script)
		cmd.Dir = mp + "/repo"
		cmd.Env = append([]string{"HOME=/nonexistent", "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "TZ=UTC"}, gittest.Env()...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: rtAgent, Gid: rtAgent, Groups: []uint32{}}}
		out, errb, wcode := runCmd(t, cmd)
		var fout, ferr bytes.Buffer
		res, err := s.Exec(context.Background(), script, ExecOptions{Cwd: "/workspace/repo", Env: gitIdentity(),
			Stdout: &fout, Stderr: &ferr, Timeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if fout.String() != out || res.ExitCode != wcode || sortedLines(ferr.String()) != sortedLines(errb) {
			t.Errorf("%s\n--- fast path status %d, stderr:\n%s--- git on the mount status %d, stderr:\n%s%s", script, res.ExitCode, ferr.String(), wcode, errb, firstDiff(fout.String(), out))
		}
		if strings.Contains(fout.String()+ferr.String(), "leak-name") || strings.Contains(fout.String()+ferr.String(), "hidden-name") {
			t.Errorf("%s: named what the agent cannot list:\n%s%s", script, fout.String(), ferr.String())
		}
	}
}
