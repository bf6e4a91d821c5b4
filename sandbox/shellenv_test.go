package sandbox_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/computerfs/computerfs/internal/testmount"
	"github.com/computerfs/computerfs/sandbox"
	"github.com/computerfs/computerfs/sandbox/backend"
)

// bashScript uses what bash has and dash has not; bashWant is its output.
const (
	bashScript = `[[ abc == a* ]] && echo glob; cat <<< here; diff <(echo a) <(echo a) && echo same; ` +
		`false | true; echo "${PIPESTATUS[*]}"; a=(x y); echo "${#a[@]}"`
	bashWant = "glob\nhere\nsame\n1 0\n2\n"
)

// backendExec runs command through the sandbox exec backend, cold or in
// pool's sandboxes.
func backendExec(t *testing.T, b *sandbox.Backend, command string, opts backend.Options) (backend.Result, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	opts.Stdout, opts.Stderr = &stdout, &stderr
	res, err := b.Exec(ctx, command, opts)
	if err != nil {
		t.Fatalf("%s: %v", command, err)
	}
	return res, stdout.String(), stderr.String()
}

// The sandbox runs commands with bash, as the shell fast path speaks it:
// cold, warm and through sandbox.Exec.
func TestExecIsBash(t *testing.T) {
	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Fatalf("the host has no /bin/bash: %v", err)
	}
	if got := sandbox.Shell(""); got != "/bin/bash" {
		t.Fatalf("Shell of the host's userland is %q, want /bin/bash", got)
	}
	ws := workspace(t)
	base := sandbox.Options{StateDir: stateDir, NoSeccomp: !sandbox.SeccompSupported}
	cold := &sandbox.Backend{Workspace: ws, Base: base}
	pool, pbase := newPool(t, sandbox.Options{Workspace: ws}, 1)
	warm := &sandbox.Backend{Workspace: ws, Base: pbase, Pool: pool}
	for name, b := range map[string]*sandbox.Backend{"cold": cold, "warm": warm} {
		res, out, errOut := backendExec(t, b, bashScript, backend.Options{})
		if res.ExitCode != 0 || out != bashWant {
			t.Errorf("%s: exit %d stdout %q stderr %q, want %q", name, res.ExitCode, out, errOut, bashWant)
		}
		if name == "warm" && !res.Warm {
			t.Errorf("warm: the command ran cold")
		}
		res, out, _ = backendExec(t, b, `echo "$0 $BASH_VERSION"`, backend.Options{})
		if res.ExitCode != 0 || !bytes.HasPrefix([]byte(out), []byte("/bin/bash 5")) {
			t.Errorf("%s: $0 $BASH_VERSION is %q", name, out)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout bytes.Buffer
	res, err := sandbox.Exec(ctx, bashScript, sandbox.Options{Workspace: ws, StateDir: stateDir, NoSeccomp: base.NoSeccomp, Stdout: &stdout})
	if err != nil || res.ExitCode != 0 || stdout.String() != bashWant {
		t.Errorf("sandbox.Exec: %v %+v %q", err, res, stdout.String())
	}
}

// A root file system without bash runs commands with /bin/sh.
func TestShellWithoutBash(t *testing.T) {
	root := testmount.PublicDir(t, "rootfs-")
	if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := sandbox.Shell(root); got != "/bin/sh" {
		t.Errorf("Shell of a root without bash: %q", got)
	}
	root2 := testmount.PublicDir(t, "rootfs-")
	if err := os.MkdirAll(filepath.Join(root2, "usr/bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root2, "usr/bin/bash"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := sandbox.Shell(root2); got != "/usr/bin/bash" {
		t.Errorf("Shell of a root with /usr/bin/bash: %q", got)
	}
}
