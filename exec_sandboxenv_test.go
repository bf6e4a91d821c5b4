package computerfs_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/computerfs/computerfs"
	"github.com/computerfs/computerfs/internal/testmount"
	"github.com/computerfs/computerfs/sandbox/backend"
)

// A sandboxed command without stdin in the request reads /dev/null, cold
// and warm: a program that reads a piped stdin (rg PATTERN with no path)
// must not take an empty pipe for its input. With stdin, it is a pipe.
func TestSandboxStdinIsDevNull(t *testing.T) {
	m := testmount.Start(t, filepath.Join(t.TempDir(), "ws"))
	const probe = `if [ -p /dev/stdin ]; then echo pipe; elif [ -c /dev/stdin ]; then echo chardev; fi; readlink /proc/self/fd/0; cat`
	for i, warm := range []bool{false, true} {
		res, out, errOut, err := execOn(t, m.Dir, computerfs.ExecRequest{Backend: "sandbox", Command: probe})
		if err != nil || res.ExitCode != 0 || res.Warm != warm || out != "chardev\n/dev/null\n" {
			t.Fatalf("command %d (warm %v): %v %+v stdout %q stderr %q, want /dev/null", i, warm, err, res, out, errOut)
		}
	}
	res, out, _, err := execOn(t, m.Dir, computerfs.ExecRequest{Backend: "sandbox", Command: probe, Stdin: []byte("given\n")})
	if err != nil || res.ExitCode != 0 || !strings.HasPrefix(out, "pipe\npipe:[") || !strings.HasSuffix(out, "]\ngiven\n") {
		t.Fatalf("with stdin: %v %+v %q", err, res, out)
	}
}

// PATH, HOME and ~ are the same on both backends, through the same exec
// entry point; and the routed command speaks bash on both.
func TestExecEnvAgrees(t *testing.T) {
	m := testmount.Start(t, filepath.Join(t.TempDir(), "ws"))
	const probe = `echo "$PATH $HOME" ~; [[ x == x ]] && cat <<< bash`
	outs := map[string]string{}
	for _, b := range []string{"shell", "sandbox"} {
		res, out, errOut, err := execOn(t, m.Dir, computerfs.ExecRequest{Backend: b, Command: probe})
		if err != nil || res.ExitCode != 0 || res.Backend != b {
			t.Fatalf("%s: %v %+v %q %q", b, err, res, out, errOut)
		}
		outs[b] = out
	}
	want := backend.DefaultPath + " /workspace /workspace\nbash\n"
	if outs["shell"] != want || outs["sandbox"] != want {
		t.Fatalf("echo $PATH $HOME ~:\nshell   %q\nsandbox %q\nwant    %q", outs["shell"], outs["sandbox"], want)
	}
}
