package shell

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/computerfs/computerfs/kv"
)

// TestEscapes tries to reach the host through the interpreter: paths with
// .., absolute host paths, /proc, links planted to host paths, host
// binaries, the environment, the daemon's pid, the interpreter's own
// temporary files. None may work.
func TestEscapes(t *testing.T) {
	s, fs := newShell(t)
	t.Setenv("COMPUTERFS_TEST_SECRET", "hunter2-secret")
	host, err := os.ReadFile("/etc/passwd")
	if err != nil {
		t.Fatal(err)
	}
	hostLine := strings.SplitN(string(host), "\n", 2)[0] // root:x:0:0:...
	// the interpreter's named pipes would live in the host's temporary
	// directory; a file there must stay out of reach
	fifoLike := filepath.Join(os.TempDir(), "sh-interp-computerfs-test")
	if err := os.WriteFile(fifoLike, []byte("hunter2-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(fifoLike)
	marker := filepath.Join(os.TempDir(), "computerfs-escape-marker-"+strconv.Itoa(os.Getpid()))
	defer os.Remove(marker)

	for _, l := range [][2]string{
		{"/etc/passwd", "abs-link"},
		{"../../../../../etc/passwd", "rel-link"},
		{"/proc/self/environ", "proc-link"},
		{"/", "root-link"},
	} {
		if err := fs.Symlink(l[0], l[1]); err != nil {
			t.Fatal(err)
		}
	}
	scripts := []string{
		"cat ../../etc/passwd",
		"cat /etc/passwd",
		"cat /workspace/../etc/passwd",
		"cd /; cat etc/passwd",
		"cd ../../..; cat etc/passwd; ls",
		"cat abs-link", "cat rel-link", "cat proc-link", "ls root-link/", "cat root-link/etc/passwd",
		"ln -s /etc/passwd /tmp/l; cat /tmp/l",
		"ln -s ../../etc/passwd /tmp/l2; cat /tmp/l2",
		"cp /etc/passwd x; cat x",
		"cat /proc/self/environ", "cat /proc/1/cmdline", "ls /proc", "ls /etc /usr/bin /home",
		"grep -r root /etc", "find /etc -name passwd", "head /etc/passwd", "sed p /etc/passwd",
		"awk '{print}' /etc/passwd", "awk 'BEGIN{while ((getline l < \"/etc/passwd\") > 0) print l}'",
		"awk 'BEGIN{system(\"cat /etc/passwd\")}'", "awk 'BEGIN{print \"x\" > \"" + marker + "\"}'",
		"awk 'BEGIN{\"cat /etc/passwd\" | getline x; print x}'",
		"jq -n env", "jq -n '$ENV'", "jq -n 'input' /etc/passwd",
		"source /etc/passwd", ". /etc/profile",
		"exec /bin/sh -c 'cat /etc/passwd'", "/bin/cat /etc/passwd", "bash -c 'cat /etc/passwd'",
		"sh -c 'touch " + marker + "'", "python3 -c 'print(1)'", "env sh -c id", "xargs sh -c id < /dev/null",
		"find . -exec sh -c 'touch " + marker + "' \\;",
		"/usr/bin/touch " + marker, "touch " + marker, "echo x > " + marker,
		"cat /tmp/sh-interp-computerfs-test", "cat " + fifoLike, "echo x > /dev/null/computerfs/sh-interp-1",
		"env", "set", "declare -p", "export", "echo $COMPUTERFS_TEST_SECRET", "printenv COMPUTERFS_TEST_SECRET",
		"type -p python3 gcc; command -v python3; which perl",
		"eval 'cat /etc/passwd'", "cat $(echo /etc/passwd)", "cat < /etc/passwd", "while read l; do echo $l; done < /etc/passwd",
		"cat /dev/stdin /dev/fd/0 /dev/tty", "ls /dev",
		"echo $$ $PPID $BASHPID",
		"cat <(cat /etc/passwd)", "diff <(cat /proc/self/environ) /dev/null", "cat /dev/fd/63",
		"echo x > >(cat > " + marker + ")", "cat <(ls /tmp; ls " + os.TempDir() + ")",
	}
	hostFifos := func() int {
		ents, _ := os.ReadDir(os.TempDir())
		n := 0
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "sh-interp-") && e.Name() != "sh-interp-computerfs-test" {
				n++
			}
		}
		return n
	}
	fifosBefore := hostFifos()
	pid, ppid := strconv.Itoa(os.Getpid()), strconv.Itoa(os.Getppid())
	for _, script := range scripts {
		out, errs, _ := sh(t, s, script)
		all := out + errs
		if strings.Contains(all, hostLine) || strings.Contains(all, "hunter2") {
			t.Errorf("%q reached the host:\n%s", script, all)
		}
		if strings.HasPrefix(script, "type -p") && out != "" {
			t.Errorf("%q found a host binary:\n%s", script, all)
		}
		for _, f := range strings.Fields(out) {
			if f == pid || f == ppid {
				t.Errorf("%q shows the daemon's pid: %q", script, out)
			}
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("%q ran a host program or wrote a host file", script)
		}
	}
	if hostFifos() != fifosBefore {
		t.Error("process substitution made a named pipe on the host")
	}
	// what the root of the namespace holds
	if out, _, _ := sh(t, s, "ls /"); out != "dev\ntmp\nworkspace\n" {
		t.Errorf("ls /: %q", out)
	}
	if out, _, _ := sh(t, s, "cd ../..; pwd"); out != "/\n" {
		t.Errorf("cd ../..: %q", out)
	}
	if out, _, code := sh(t, s, "exec /usr/bin/python3"); code != 127 || out != "" {
		t.Errorf("exec /usr/bin/python3: %d %q", code, out)
	}
	// sh and bash are the fast path's own nested interpreter: the same
	// namespace, no host program
	if out, _, _ := sh(t, s, "exec /bin/sh -c 'ls /; echo $0'"); out != "dev\ntmp\nworkspace\nsh\n" {
		t.Errorf("exec /bin/sh: %q", out)
	}
}

// TestTmpIsPrivate: /tmp belongs to one Shell, lasts across its Execs and
// never reaches the store.
func TestTmpIsPrivate(t *testing.T) {
	s, fs := newShell(t)
	if _, _, code := sh(t, s, "echo kept > /tmp/f; mkdir /tmp/d; mv /tmp/f /tmp/d/g"); code != 0 {
		t.Fatal(code)
	}
	if out, _, _ := sh(t, s, "cat /tmp/d/g; ls /workspace"); out != "kept\n" {
		t.Fatalf("/tmp across execs: %q", out)
	}
	n := 0
	fs.ReadDir("", "", func(kv.Dirent) bool { n++; return true })
	if n != 0 {
		t.Fatalf("/tmp reached the store: %d entries", n)
	}
	other := New(fs, Options{})
	if out, _, code := sh(t, other, "cat /tmp/d/g"); code == 0 || out != "" {
		t.Fatalf("another shell sees /tmp: %q", out)
	}
	// limited in size
	small := New(fs, Options{TmpLimit: 1000})
	if _, _, code := sh(t, small, "seq 1000 > /tmp/big"); code == 0 {
		t.Fatal("/tmp over its limit")
	}
	// moves across /tmp and /workspace copy
	if out, _, code := sh(t, s, "mv /tmp/d/g moved && cat /workspace/moved && ls /tmp/d"); code != 0 || out != "kept\n" {
		t.Fatalf("mv /tmp -> workspace: %q %d", out, code)
	}
	data, err := fs.ReadFile("moved")
	if err != nil || string(data) != "kept\n" {
		t.Fatalf("moved file in the store: %q %v", data, err)
	}
}
