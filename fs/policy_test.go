package fs_test

import (
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/computerfs/computerfs/fs"
	"github.com/computerfs/computerfs/internal/testmount"
	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/policy"
	"github.com/computerfs/computerfs/spec"
)

// The agent's uid in these tests, and another unprivileged one.
const (
	agentUID = 101000
	otherUID = 102000
)

const helperEnv = "COMPUTERFS_POLICY_HELPER"

// A child of the test binary runs one file operation as a given uid on
// the mount and prints the errno (0: success) and what it read.
func init() {
	job := os.Getenv(helperEnv)
	if job == "" {
		return
	}
	uid, _ := strconv.Atoi(os.Getenv(helperEnv + "_UID"))
	if uid != 0 {
		if err := syscall.Setgroups(nil); err != nil {
			os.Exit(2)
		}
		if err := syscall.Setresgid(uid, uid, uid); err != nil {
			os.Exit(2)
		}
		if err := syscall.Setresuid(uid, uid, uid); err != nil {
			os.Exit(2)
		}
	}
	args := strings.Split(job, "\x1f")
	out, err := helperOp(args[0], args[1:])
	var e syscall.Errno
	if err != nil && !errors.As(err, &e) {
		e = syscall.EIO
	}
	fmt.Printf("%d %s", int(e), out)
	os.Exit(0)
}

func helperOp(op string, a []string) (string, error) {
	switch op {
	case "read":
		b, err := os.ReadFile(a[0])
		return string(b), err
	case "stat":
		var st unix.Stat_t
		return "", unix.Stat(a[0], &st)
	case "lstat":
		var st unix.Stat_t
		return "", unix.Lstat(a[0], &st)
	case "readlink":
		s, err := os.Readlink(a[0])
		return s, err
	case "list":
		ents, err := os.ReadDir(a[0])
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		return strings.Join(names, ","), err
	case "getxattr":
		buf := make([]byte, 64)
		n, err := unix.Getxattr(a[0], "user.k", buf)
		if err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case "listxattr":
		buf := make([]byte, 256)
		_, err := unix.Listxattr(a[0], buf)
		return "", err
	case "write":
		fd, err := unix.Open(a[0], unix.O_WRONLY, 0)
		if err == nil {
			_, err = unix.Write(fd, []byte("changed"))
			unix.Close(fd)
		}
		return "", err
	case "rdwr":
		fd, err := unix.Open(a[0], unix.O_RDWR, 0)
		if err == nil {
			unix.Close(fd)
		}
		return "", err
	case "trunc":
		fd, err := unix.Open(a[0], unix.O_WRONLY|unix.O_TRUNC, 0)
		if err == nil {
			unix.Close(fd)
		}
		return "", err
	case "truncate":
		return "", unix.Truncate(a[0], 0)
	case "create":
		fd, err := unix.Open(a[0], unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o644)
		if err == nil {
			unix.Close(fd)
		}
		return "", err
	case "mknod":
		return "", unix.Mknod(a[0], unix.S_IFIFO|0o644, 0)
	case "mkdir":
		return "", unix.Mkdir(a[0], 0o755)
	case "unlink":
		return "", unix.Unlink(a[0])
	case "rmdir":
		return "", unix.Rmdir(a[0])
	case "rename":
		return "", unix.Rename(a[0], a[1])
	case "exchange":
		return "", unix.Renameat2(unix.AT_FDCWD, a[0], unix.AT_FDCWD, a[1], unix.RENAME_EXCHANGE)
	case "link":
		return "", unix.Link(a[0], a[1])
	case "symlink":
		return "", unix.Symlink(a[0], a[1])
	case "chmod":
		return "", unix.Chmod(a[0], 0o777)
	case "utimes":
		return "", unix.UtimesNano(a[0], []unix.Timespec{{Sec: 1}, {Sec: 1}})
	case "setxattr":
		return "", unix.Setxattr(a[0], "user.k", []byte("x"), 0)
	case "removexattr":
		return "", unix.Removexattr(a[0], "user.k")
	case "tmpfile":
		fd, err := unix.Open(a[0], unix.O_TMPFILE|unix.O_WRONLY, 0o644)
		if err == nil {
			unix.Close(fd)
		}
		return "", err
	case "readtree": // read every file under a[0], a[1] times: ns of the first pass and of the others
		passes, _ := strconv.Atoi(a[1])
		var first, rest time.Duration
		for i := range passes {
			start := time.Now()
			err := filepath.WalkDir(a[0], func(p string, d iofs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				_, err = os.ReadFile(p)
				return err
			})
			if err != nil {
				return "", err
			}
			if i == 0 {
				first = time.Since(start)
			} else {
				rest += time.Since(start)
			}
		}
		return fmt.Sprintf("%d %d", first.Nanoseconds(), rest.Nanoseconds()/int64(max(passes-1, 1))), nil
	case "sh": // a shell line, for the tools a sandbox has
		out, err := exec.Command("sh", "-c", a[0]).CombinedOutput()
		if err != nil {
			return string(out), syscall.EPERM
		}
		return string(out), nil
	}
	return "", syscall.ENOSYS
}

// as runs op as uid in a child and returns its errno and output.
func as(t testing.TB, uid int, op string, args ...string) (syscall.Errno, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"="+strings.Join(append([]string{op}, args...), "\x1f"), helperEnv+"_UID="+strconv.Itoa(uid))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper %s %v: %v", op, args, err)
	}
	code, rest, _ := strings.Cut(string(out), " ")
	n, _ := strconv.Atoi(code)
	return syscall.Errno(n), rest
}

// policyMount serves a store with the agent's rules in this process; the
// test process itself never touches the mount (its children do).
func policyMount(t testing.TB, c *policy.Checker) (string, *kv.Store) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Fatal("these tests mount FUSE file systems and need root")
	}
	st, err := kv.Open(filepath.Join(t.TempDir(), "store"), kv.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	// The workspace: the agent owns the root and ok/; root made the rest.
	if _, err := st.SetAttr(kv.RootIno, kv.SetAttrRequest{Valid: kv.SetMode | kv.SetUid | kv.SetGid, Mode: 0o777, Uid: agentUID, Gid: agentUID}); err != nil {
		t.Fatal(err)
	}
	mk := func(p string, mode uint32, content, target string) uint64 {
		dir := uint64(kv.RootIno)
		names := strings.Split(p, "/")
		for i, n := range names {
			a, err := st.Lookup(dir, n)
			if err == kv.ErrNotFound {
				in := kv.NewInode{Mode: kv.S_IFDIR | 0o777, Uid: agentUID, Gid: agentUID}
				if i == len(names)-1 {
					in = kv.NewInode{Mode: mode, Uid: agentUID, Gid: agentUID, Data: []byte(content), Target: target}
				}
				a, err = st.Create(dir, n, in)
			}
			if err != nil {
				t.Fatal(err)
			}
			dir = a.Ino
		}
		return dir
	}
	reg := uint32(kv.S_IFREG | 0o666)
	tok := mk("secrets/token", reg, "TOPSECRET", "")
	mk("secrets/sub/deep", reg, "TOPSECRET", "")
	mk("keys/a.pem", reg, "TOPSECRET", "")
	mk("ro/conf", reg, "original", "")
	mk("ro/sub/f", reg, "original", "")
	mk("ok/file", reg, "fine", "")
	mk("ok/dir/f", reg, "fine", "")
	mk("ok/tolink", kv.S_IFLNK|0o777, "", "../secrets/token")
	mk("ok/dirlink", kv.S_IFLNK|0o777, "", "../secrets")
	mk("mod/go.mod", reg, "module m", "")
	for _, p := range []uint64{tok} {
		if err := st.SetXattr(p, "user.k", []byte("v"), 0); err != nil {
			t.Fatal(err)
		}
	}
	// A hard link of the secret made by root (or before the rule): the
	// rule follows the file, not the name.
	okDir, _ := st.Lookup(kv.RootIno, "ok")
	if _, err := st.Link(tok, okDir.Ino, "hardlink"); err != nil {
		t.Fatal(err)
	}
	mp := filepath.Join(testmount.PublicDir(t, "policy-mnt-"), "mnt")
	if err := os.Mkdir(mp, 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err := fs.Mount(st, mp, fs.MountOptions{Config: fs.Config{
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Agent:  &fs.AgentRules{Is: func(uid uint32) bool { return uid == agentUID }, Policy: c},
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
	return mp, st
}

func testRules() *policy.Checker {
	return policy.New(&spec.Policy{Deny: []string{"/secrets", "**/*.pem"}, ReadOnlyPaths: []string{"/ro", "**/go.mod"}})
}

// TestAgentRulesOnMount runs every operation as the agent, as another
// unprivileged user and as root: the rules bind the agent only, and hold
// for every operation that reaches the daemon.
func TestAgentRulesOnMount(t *testing.T) {
	mp, _ := policyMount(t, testRules())
	p := func(s string) string { return filepath.Join(mp, s) }
	// Root reads everything first, so that the kernel has the names,
	// attributes, pages and link targets cached: the agent's refusals
	// must not depend on what the kernel cached for someone else.
	for _, f := range []string{"secrets/token", "secrets/sub/deep", "keys/a.pem", "ok/hardlink", "ok/tolink"} {
		if e, out := as(t, 0, "read", p(f)); e != 0 || out != "TOPSECRET" {
			t.Fatalf("root reads %s: %v %q", f, e, out)
		}
	}
	as(t, 0, "list", p("secrets"))
	as(t, 0, "sh", "ls -laR "+mp+" >/dev/null") // READDIRPLUS: entries with attributes
	as(t, 0, "stat", p("secrets/token"))
	const (
		EACCES = syscall.EACCES
		EROFS  = syscall.EROFS
	)
	for _, tc := range []struct {
		op   string
		args []string
		want syscall.Errno
	}{
		// reading denied paths, by any name
		{"read", []string{"secrets/token"}, EACCES},
		{"read", []string{"secrets/sub/deep"}, EACCES},
		{"read", []string{"keys/a.pem"}, EACCES},
		{"read", []string{"ok/tolink"}, EACCES},
		{"read", []string{"ok/dirlink/token"}, EACCES},
		{"read", []string{"ok/hardlink"}, EACCES},
		{"read", []string{"ok/../secrets/token"}, EACCES},
		{"stat", []string{"secrets/token"}, EACCES},
		{"stat", []string{"secrets"}, EACCES},
		{"lstat", []string{"keys/a.pem"}, EACCES},
		{"list", []string{"secrets"}, EACCES},
		{"list", []string{"ok/dirlink"}, EACCES},
		{"getxattr", []string{"secrets/token"}, EACCES},
		{"listxattr", []string{"ok/hardlink"}, EACCES},
		{"stat", []string{"secrets/nonexistent"}, EACCES},
		// changing denied paths, or making names a deny rule covers
		{"write", []string{"ok/hardlink"}, EACCES},
		{"create", []string{"new.pem"}, EACCES},
		{"create", []string{"ok/b.pem"}, EACCES},
		{"mkdir", []string{"d.pem"}, EACCES},
		{"symlink", []string{"ok/file", "l.pem"}, EACCES},
		{"link", []string{"ok/file", "x.pem"}, EACCES},
		{"rename", []string{"ok/file", "ok/f.pem"}, EACCES},
		{"mknod", []string{"fifo.pem"}, EACCES},
		// moving or linking a denied file out
		{"link", []string{"ok/hardlink", "ok/stolen"}, EACCES},
		{"rename", []string{"ok/hardlink", "ok/stolen"}, EACCES},
		{"rename", []string{"keys/a.pem", "a.txt"}, EACCES},
		{"rename", []string{"keys", "keys2"}, 0}, // a.pem stays denied as keys2/a.pem
		{"rename", []string{"keys2", "keys"}, 0},
		{"exchange", []string{"ok/dir", "keys"}, 0}, // still denied either way
		{"exchange", []string{"ok/dir", "keys"}, 0},
		{"unlink", []string{"ok/hardlink"}, EACCES},
		// read-only paths: readable, never changed
		{"read", []string{"ro/conf"}, 0},
		{"list", []string{"ro"}, 0},
		{"write", []string{"ro/conf"}, EROFS},
		{"rdwr", []string{"ro/conf"}, EROFS},
		{"trunc", []string{"ro/conf"}, EROFS},
		{"truncate", []string{"ro/conf"}, EROFS},
		{"write", []string{"mod/go.mod"}, EROFS},
		{"create", []string{"ro/new"}, EROFS},
		{"mknod", []string{"ro/fifo"}, EROFS},
		{"mkdir", []string{"ro/d"}, EROFS},
		{"symlink", []string{"x", "ro/l"}, EROFS},
		{"link", []string{"ok/file", "ro/l"}, EROFS},
		{"link", []string{"ro/conf", "ok/l"}, EROFS},
		{"unlink", []string{"ro/conf"}, EROFS},
		{"rmdir", []string{"ro/sub"}, EROFS},
		{"rename", []string{"ro/conf", "ok/c"}, EROFS},
		{"rename", []string{"ok/file", "ro/conf"}, EROFS},
		{"rename", []string{"ro", "ro2"}, EROFS},
		{"rename", []string{"mod", "mod2"}, EROFS}, // holds a read-only go.mod
		{"exchange", []string{"ok/dir", "ro/sub"}, EROFS},
		{"chmod", []string{"ro/conf"}, EROFS},
		{"utimes", []string{"ro/conf"}, EROFS},
		{"setxattr", []string{"ro/conf"}, EROFS},
		{"removexattr", []string{"ro/conf"}, EROFS},
		{"tmpfile", []string{"ro"}, EROFS},
		// what the agent may do
		{"read", []string{"ok/file"}, 0},
		{"readlink", []string{"ok/tolink"}, 0}, // a name, not the content
		{"write", []string{"ok/file"}, 0},
		{"create", []string{"ok/new"}, 0},
		{"link", []string{"ok/new", "ok/new2"}, 0},
		{"rename", []string{"ok/new2", "ok/new3"}, 0},
		{"mkdir", []string{"ok/d"}, 0},
		{"rename", []string{"ok/d", "ok/d2"}, 0},
		{"setxattr", []string{"ok/file"}, 0},
		{"tmpfile", []string{"ok"}, 0},
		{"unlink", []string{"ok/new3"}, 0},
		{"sh", []string{"cd " + mp + " && cat ok/file > ok/copy && cp -r ok/dir ok/dir2 && ls ok >/dev/null"}, 0},
		// shell tools as the agent
		{"sh", []string{"cat " + p("secrets/token")}, syscall.EPERM},
		{"sh", []string{"cd " + p("secrets")}, syscall.EPERM},
		{"sh", []string{"cp -r " + p("secrets") + " " + p("ok/s")}, syscall.EPERM},
		{"sh", []string{"tar cf - -C " + mp + " secrets | tar tf - | grep token"}, syscall.EPERM},
		{"sh", []string{"grep -r TOPSECRET " + mp}, syscall.EPERM}, // grep exits 1 or 2: nothing found
		{"sh", []string{"find " + mp + " -type f -exec cat {} + | grep TOPSECRET"}, syscall.EPERM},
	} {
		args := make([]string, len(tc.args))
		for i, a := range tc.args {
			if tc.op == "symlink" && i == 0 || tc.op == "sh" {
				args[i] = a
			} else {
				args[i] = p(a)
			}
		}
		got, out := as(t, agentUID, tc.op, args...)
		if got != tc.want {
			t.Errorf("agent %s %v: %v, want %v (%q)", tc.op, tc.args, got, tc.want, out)
		}
		if strings.Contains(out, "TOPSECRET") {
			t.Errorf("agent %s %v: read the denied content", tc.op, tc.args)
		}
	}
	// Others are not bound: root and another user read what modes allow.
	for _, uid := range []int{0, otherUID} {
		if e, out := as(t, uid, "read", p("secrets/token")); e != 0 || out != "TOPSECRET" {
			t.Errorf("uid %d reads secrets/token: %v %q", uid, e, out)
		}
	}
	if e, _ := as(t, 0, "write", p("ro/conf")); e != 0 {
		t.Errorf("root writes ro/conf: %v", e)
	}
	// And after the others' reads, the agent is still refused.
	if e, _ := as(t, agentUID, "read", p("secrets/token")); e != EACCES {
		t.Errorf("agent reads secrets/token after root: %v", e)
	}
}

// A program the agent compiles and runs (here a C one) is held to the
// same rules by the mount: open(2), link(2), rename(2).
func TestAgentRulesNativeProgram(t *testing.T) {
	mp, _ := policyMount(t, testRules())
	src := filepath.Join(testmount.PublicDir(t, "policy-c-"), "steal.c")
	bin := strings.TrimSuffix(src, ".c")
	prog := `#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <errno.h>
#include <string.h>
int main(int argc, char **argv) {
	chdir(argv[1]);
	char buf[64] = {0};
	int fd = open("secrets/token", O_RDONLY);
	if (fd >= 0) { read(fd, buf, sizeof buf - 1); printf("read %s\n", buf); }
	else printf("open %s\n", strerror(errno));
	printf("link %d\n", link("ok/hardlink", "ok/out") == 0 ? 0 : errno);
	printf("rename %d\n", rename("keys/a.pem", "a.txt") == 0 ? 0 : errno);
	fd = open("ro/conf", O_WRONLY | O_TRUNC);
	printf("trunc %d\n", fd >= 0 ? 0 : errno);
	return 0;
}
`
	if err := os.WriteFile(src, []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cc", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	_, out := as(t, agentUID, "sh", bin+" "+mp)
	want := fmt.Sprintf("open Permission denied\nlink %d\nrename %d\ntrunc %d\n", syscall.EACCES, syscall.EACCES, syscall.EROFS)
	if out != want {
		t.Errorf("the program printed\n%s\nwant\n%s", out, want)
	}
}

// BenchmarkAgentRulesMount reads 1,000 small files (20 directories of 50,
// three levels down) through the mount as the agent, without path rules
// and with ten globs: the first pass (every name looked up) and the next
// ones (names cached; every open still reaches the daemon).
func BenchmarkAgentRulesMount(b *testing.B) {
	rules := &spec.Policy{
		Deny:          []string{"/secrets", "**/*.pem", "**/.env", "/private/**", "*.key"},
		ReadOnlyPaths: []string{"/vendor", "**/go.sum", "/.github", "/ro/**", "Makefile"},
	}
	for _, tc := range []struct {
		name string
		c    *policy.Checker
	}{{"none", nil}, {"rules", policy.New(rules)}} {
		b.Run(tc.name, func(b *testing.B) {
			var cold, warm time.Duration
			for b.Loop() {
				mp, st := policyMount(b, tc.c)
				src, err := st.Create(kv.RootIno, "src", kv.NewInode{Mode: kv.S_IFDIR | 0o755})
				if err != nil {
					b.Fatal(err)
				}
				for d := range 20 {
					pkg, err := st.Create(src.Ino, fmt.Sprintf("pkg%02d", d), kv.NewInode{Mode: kv.S_IFDIR | 0o755})
					if err != nil {
						b.Fatal(err)
					}
					sub, err := st.Create(pkg.Ino, "sub", kv.NewInode{Mode: kv.S_IFDIR | 0o755})
					if err != nil {
						b.Fatal(err)
					}
					for f := range 50 {
						if _, err := st.Create(sub.Ino, fmt.Sprintf("f%02d.go", f), kv.NewInode{Mode: kv.S_IFREG | 0o644, Data: []byte("package sub\n")}); err != nil {
							b.Fatal(err)
						}
					}
				}
				e, out := as(b, agentUID, "readtree", filepath.Join(mp, "src"), "6")
				if e != 0 {
					b.Fatalf("readtree: %v", e)
				}
				var c, w int64
				fmt.Sscan(out, &c, &w)
				cold += time.Duration(c)
				warm += time.Duration(w)
			}
			b.ReportMetric(float64(cold.Nanoseconds())/float64(b.N)/1000, "ns/file-cold")
			b.ReportMetric(float64(warm.Nanoseconds())/float64(b.N)/1000, "ns/file-warm")
		})
	}
}

// TestAgentListingHidesDenied: the agent's listings of the mount leave
// denied names out, whatever root listed before or after (the kernel
// keeps no listing for every caller when there are deny rules), and a
// long listing that resumes halfway (many getdents calls) gives every
// other name once.
func TestAgentListingHidesDenied(t *testing.T) {
	mp, st := policyMount(t, testRules())
	big, err := st.Create(kv.RootIno, "big", kv.NewInode{Mode: kv.S_IFDIR | 0o777, Uid: agentUID, Gid: agentUID})
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for i := range 3000 {
		name := fmt.Sprintf("f%04d", i)
		if i%7 == 3 {
			name += ".pem"
		} else {
			want++
		}
		if _, err := st.Create(big.Ino, name, kv.NewInode{Mode: kv.S_IFREG | 0o644, Uid: agentUID, Gid: agentUID}); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 2 {
		// root first, so that a listing the kernel kept would be root's
		if _, out := as(t, 0, "sh", "ls -a "+mp+" "+mp+"/keys; ls "+mp+"/big | wc -l"); !strings.Contains(out, "secrets") || !strings.Contains(out, "a.pem") || !strings.Contains(out, "3000") {
			t.Fatalf("round %d: root's listing: %q", round, out)
		}
		for _, cmd := range []string{"ls -a " + mp, "ls -a " + mp + "/keys", "ls -laR " + mp, "find " + mp, "ls -f " + mp + "/big"} {
			e, out := as(t, agentUID, "sh", cmd)
			if e != 0 && !strings.HasPrefix(cmd, "ls -laR") && !strings.HasPrefix(cmd, "find") {
				t.Errorf("round %d: agent: %s: %v %q", round, cmd, e, out)
			}
			for _, line := range strings.Split(out, "\n") {
				line, _, _ = strings.Cut(line, " -> ") // a link's target is its content, not a name
				if strings.Contains(line, "secrets") || strings.Contains(line, ".pem") {
					t.Errorf("round %d: agent: %s shows a denied name: %q", round, cmd, line)
				}
			}
		}
		// every other name of the big directory, once
		_, out := as(t, agentUID, "sh", "ls -f "+mp+"/big | grep -v '^\\.' | sort | uniq -d | wc -l; ls -f "+mp+"/big | grep -c '^f'")
		if got := strings.Fields(out); len(got) != 2 || got[0] != "0" || got[1] != strconv.Itoa(want) {
			t.Errorf("round %d: the agent's listing of big: duplicates and names %q, want 0 and %d", round, out, want)
		}
	}
}
