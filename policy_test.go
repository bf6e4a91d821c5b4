package computerfs_test

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/computerfs/computerfs"
	"github.com/computerfs/computerfs/internal/testmount"
)

const policySpec = `sources:
  - path: /secrets/token
    content: s3cr3t-token
  - path: /keys/a.pem
    content: s3cr3t-key
  - path: /ro/conf
    content: original
  - path: /ok/file
    content: fine
  - path: /ok/steal.c
    content: |
      #include <fcntl.h>
      #include <stdio.h>
      #include <unistd.h>
      int main(void) {
        char buf[64] = {0};
        int fd = open("/workspace/secrets/token", O_RDONLY);
        if (fd >= 0 && read(fd, buf, sizeof buf - 1) > 0) printf("%s\n", buf);
        fd = open("/workspace/ro/conf", O_WRONLY | O_TRUNC);
        if (fd >= 0) printf("truncated\n");
        if (link("/workspace/keys/a.pem", "/workspace/ok/k") == 0) printf("linked\n");
        return 0;
      }
policy:
  deny: ["/secrets", "**/*.pem"]
  read_only_paths: ["/ro"]
`

// Through exec, on both backends, the spec's path rules hold: the agent's
// programs in the sandbox (on the mount) and the fast path's commands
// can neither read a denied file nor change a read-only one, by any
// spelling, link, copy or rename, nor can a native program.
func TestExecPolicyAllBackends(t *testing.T) {
	m := mountWithSpecFile(t, policySpec)
	// The workspace's agent, whom the sandbox runs as, owns everything, so
	// that only the rules stand in the way.
	if out, err := exec.Command("chown", "-R", statusOf(t, m.Dir).Agent.String(), m.Dir).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v %s", err, out)
	}
	attacks := []string{
		`cat secrets/token`, `cat sec""rets/token`, `cat s*/t*`, `cd secrets && cat token`, `cat keys/*`,
		`ln -s secrets/token l1; cat l1`, `ln -s /workspace/secrets l2; cat l2/token`,
		`ln secrets/token hard; cat hard`, `mv secrets/token moved; cat moved`, `mv secrets s2; cat s2/token`,
		`cp secrets/token c; cat c`, `cp -r secrets cdir; cat cdir/token`, `tar cf - secrets | tar xOf -`,
		`grep -r s3cr3t .`, `find . -type f -exec cat {} +`, `mv keys/a.pem a.txt; cat a.txt`,
		`echo changed > ro/conf`, `: > ro/conf`, `rm -f ro/conf`, `mv ro ro2`, `touch new.pem`, `sed -i s/o/0/ ro/conf`,
	}
	for _, backend := range []string{"shell", "sandbox"} {
		for _, cmd := range attacks {
			_, out, errOut, err := execOn(t, m.Dir, computerfs.ExecRequest{Backend: backend, Command: cmd})
			if err != nil {
				t.Fatalf("%s %q: %v", backend, cmd, err)
			}
			if strings.Contains(out+errOut, "s3cr3t") {
				t.Errorf("%s %q: read the denied content:\n%s%s", backend, cmd, out, errOut)
			}
		}
	}
	res, out, errOut, err := execOn(t, m.Dir, computerfs.ExecRequest{Backend: "sandbox", Command: `gcc -o /tmp/steal ok/steal.c && /tmp/steal`})
	if err != nil || res.ExitCode != 0 || out != "" {
		t.Errorf("native program: %v %+v stdout %q stderr %q", err, res, out, errOut)
	}
	// What the agent may do still works, on both backends.
	for _, backend := range []string{"shell", "sandbox"} {
		res, out, errOut, err := execOn(t, m.Dir, computerfs.ExecRequest{Backend: backend,
			Command: `cat ok/file ro/conf && echo y > ok/new-` + backend + ` && cp ok/file ok/c-` + backend + ` && ln ok/c-` + backend + ` ok/h-` + backend + ` && mv ok/h-` + backend + ` ok/m-` + backend})
		if err != nil || res.ExitCode != 0 || out != "fineoriginal" {
			t.Errorf("%s: allowed work: %v %+v %q %q", backend, err, res, out, errOut)
		}
	}
	// Behind the agent's back (root on the mount): nothing denied moved
	// or leaked, nothing read-only changed.
	if b, err := os.ReadFile(filepath.Join(m.Dir, "secrets/token")); err != nil || string(b) != "s3cr3t-token" {
		t.Errorf("secrets/token: %q %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(m.Dir, "ro/conf")); err != nil || string(b) != "original" {
		t.Errorf("ro/conf: %q %v", b, err)
	}
	filepath.WalkDir(m.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(m.Dir, p)
		if strings.HasSuffix(rel, ".pem") && rel != "keys/a.pem" {
			t.Errorf("%s was made: a deny rule covers it", rel)
		}
		if strings.HasPrefix(rel, "secrets/") || rel == "keys/a.pem" || d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), "s3cr3t") {
			t.Errorf("the denied content is at %s", rel)
		}
		return nil
	})
}

// mountWithSpecFile mounts a workspace imported from yaml.
func mountWithSpecFile(t *testing.T, yaml string) *testmount.Mount {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "ws.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return testmount.Start(t, filepath.Join(dir, "store"), "--spec", file)
}
