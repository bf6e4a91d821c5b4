package shell

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/computerfs/computerfs/wsfs"
)

// scriptFixture makes a few scripts: some the fast path can run, some not.
func scriptFixture(t testing.TB, fs *wsfs.FS) {
	t.Helper()
	files := map[string]struct {
		data string
		mode uint32
	}{
		"ok.sh":        {"#!/bin/bash\nset -e\necho \"ok $# $1\"\n", 0o755},
		"noexec.sh":    {"#!/bin/sh\necho ran\n", 0o644},
		"native.sh":    {"#!/bin/sh\necho before\ngcc -o x x.c\necho after\n", 0o755},
		"py.py":        {"#!/usr/bin/env python3\nprint('hi')\n", 0o755},
		"calls-ok.sh":  {"#!/bin/sh\n./ok.sh from-calls\n", 0o755},
		"calls-bad.sh": {"#!/bin/sh\necho first\n./native.sh\n", 0o755},
		"cd-then.sh":   {"#!/bin/sh\ncd sub\n./ok.sh\n", 0o755},
		"self.sh":      {"#!/bin/sh\n./self.sh\n", 0o755},
		"lib.sh":       {"greet() { echo \"hello $1\"; }\n", 0o644},
		"env.sh":       {"#!/usr/bin/env bash\necho \"x=${X:-} y=${Y:-} pid-differs=$([ \"$$\" != \"$1\" ] && echo yes)\"\n", 0o755},
		"sub/ok.sh":    {"#!/bin/sh\necho sub\n", 0o755},
		"bin.sh":       {"\x7fELF\x00\x00binary", 0o755},
		"exit.sh":      {"echo a\nexit 4\necho b\n", 0o755},
		"loop.sh":      {"#!/bin/sh\nwhile true; do :; done\n", 0o755},
	}
	for p, f := range files {
		if strings.Contains(p, "/") {
			fs.MkdirAll(p[:strings.LastIndex(p, "/")], 0o755)
		}
		if err := fs.WriteFile(p, []byte(f.data), f.mode); err != nil {
			t.Fatal(err)
		}
		fs.Chmod(p, f.mode)
	}
}

func TestScripts(t *testing.T) {
	s, fs := newShell(t)
	scriptFixture(t, fs)
	cases := []struct {
		script, out string
		code        int
		stderr      string
	}{
		{"./ok.sh a", "ok 1 a\n", 0, ""},
		{"bash ok.sh a b", "ok 2 a\n", 0, ""},
		{"sh -c 'echo $0 $1; exit 3' n a", "n a\n", 3, ""},
		{"./noexec.sh", "", 126, "bash: line 1: ./noexec.sh: Permission denied\n"},
		{"sh noexec.sh", "ran\n", 0, ""},
		{"./py.py", "", 126, "python3 does not run on the shell fast path"},
		{"./bin.sh", "", 126, "cannot execute binary file"},
		{"./nosuch.sh", "", 127, "No such file or directory"},
		{"./sub", "", 126, "Is a directory"},
		{"./exit.sh; echo $?", "a\n4\n", 0, ""},
		{"./calls-ok.sh", "ok 1 from-calls\n", 0, ""},
		{"X=1; export Y=2; ./env.sh $$", "x= y=2 pid-differs=yes\n", 0, ""},
		{"bash -c 'cd sub; pwd'; pwd", "/workspace/sub\n/workspace\n", 0, ""},
		{"bash -c 'V=1'; echo \"[$V]\"", "[]\n", 0, ""},
		{"source lib.sh; greet you", "hello you\n", 0, ""},
		{"bash -e -c 'false; echo no'", "", 1, ""},
		{"bash -o pipefail -c 'false | true'", "", 1, ""},
		{"bash -q", "", 2, "bash: -q: invalid option"},
		{"./self.sh", "", 126, "maximum script nesting level exceeded (64)"},
		{"echo 'echo from stdin' | bash", "from stdin\n", 0, ""},
		{"find . -name ok.sh -exec sh -c 'echo found $1' _ {} \\;", "found ./ok.sh\nfound ./sub/ok.sh\n", 0, ""},
		{"echo x | xargs bash -c 'echo got $0'", "got x\n", 0, ""},
		{"env Z=3 bash -c 'echo $Z'", "3\n", 0, ""},
		{"exec ./ok.sh e; echo never", "ok 1 e\n", 0, ""},
		{"bash -c 'if then'", "", 2, ""},
	}
	for _, c := range cases {
		out, stderr, code := sh(t, s, c.script)
		if out != c.out || code != c.code || !strings.Contains(stderr, c.stderr) {
			t.Errorf("%q: got %q (status %d, stderr %q), want %q (status %d, stderr with %q)", c.script, out, code, stderr, c.out, c.code, c.stderr)
		}
	}
}

// TestScriptLimits: a script's commands count towards its caller's
// limits, and the timeout stops a script looping forever.
func TestScriptLimits(t *testing.T) {
	s, fs := newShell(t)
	scriptFixture(t, fs)
	var out bytes.Buffer
	res, err := s.Exec(context.Background(), "./loop.sh", ExecOptions{Stdout: &out, MaxCommands: 1000})
	if err != nil || res.ExitCode != ExitLimit || res.Stopped != "command limit" {
		t.Fatalf("command limit in a script: %+v %v", res, err)
	}
	start := time.Now()
	res, err = s.Exec(context.Background(), "bash -c 'sh loop.sh'", ExecOptions{Timeout: 200 * time.Millisecond, MaxCommands: -1})
	if err != nil || res.ExitCode != ExitTimeout || time.Since(start) > 5*time.Second {
		t.Fatalf("timeout in a script: %+v %v", res, err)
	}
	res, err = s.Exec(context.Background(), "seq 100000 > big; bash -c 'cat big; cat big'", ExecOptions{Stdout: &out, MaxOutput: 1000})
	if err != nil || res.ExitCode != ExitLimit || !res.Truncated {
		t.Fatalf("output limit in a script: %+v %v", res, err)
	}
}

func TestCanRunIn(t *testing.T) {
	s, fs := newShell(t)
	scriptFixture(t, fs)
	if _, _, code := sh(t, s, "printf 'echo tmp\\n' > /tmp/t.sh"); code != 0 {
		t.Fatal(code)
	}
	cases := []struct {
		script string
		ok     bool
		why    string
	}{
		{"./ok.sh a", true, ""},
		{"bash ok.sh | wc -l", true, ""},
		{"./calls-ok.sh", true, ""},
		{"./noexec.sh", true, ""}, // fails with 126 on either backend
		{"chmod +x noexec.sh && ./noexec.sh", true, ""},
		{"sh /tmp/t.sh", true, ""},
		{"bash -c './ok.sh'", true, ""},
		{"source lib.sh && greet x", true, ""},
		{"./native.sh", false, "gcc is not built in"},
		{"./calls-bad.sh", false, "gcc is not built in"},
		{"./py.py", false, "python3, which is not built in"},
		{"./nosuch.sh", false, "No such file"},
		{"./sub", false, "not a regular file"},
		{"cd sub && ./ok.sh", false, "change of directory"},
		{"./cd-then.sh", false, "change of directory"},
		{"for i in 1 2; do ./ok.sh; cd sub; done", false, "change of directory"},
		{"./self.sh", false, "nested too deep"},
		{"printf 'gcc x.c\\n' > ok.sh; ./ok.sh", false, "writes ok.sh"},
		{"cat > ok.sh <<'EOF'\ngcc x.c\nEOF\nbash ok.sh", false, "writes ok.sh"},
		{"echo x >> ./ok.sh && ./ok.sh", false, "writes ./ok.sh"},
		{"cp native.sh ok.sh && ./ok.sh", false, "cp may change"},
		{"mv native.sh sub/ && ./sub/ok.sh", false, "mv may change"},
		{"sed -i s/ok/gcc/ ok.sh && ./ok.sh", false, "sed may change"},
		{"tar -xf a.tar && ./ok.sh", false, "tar may extract"},
		{"gunzip ok.sh.gz && ./ok.sh", false, "gunzip may change"},
		{"F=ok.sh; echo gcc > $F; ./ok.sh", false, "computed at run time"},
		{"ls | xargs cp -t sub; ./sub/ok.sh", false, "xargs runs cp"},
		{"echo log > out.txt && ./ok.sh > run.log", true, ""},
		{"bash -c \"$X\"", false, "computed at run time"},
		{"echo 'ls' | bash", false, "stdin"},
		{"source nosuch.sh", false, "No such file"},
		{"diff <(ls) <(ls sub)", true, ""},
		{"diff <(./ok.sh) <(./native.sh)", false, "gcc is not built in"},
	}
	for _, c := range cases {
		ok, why := s.CanRunIn("", c.script)
		if ok != c.ok || !strings.Contains(why, c.why) {
			t.Errorf("CanRunIn(%q) = %v, %q; want %v, %q", c.script, ok, why, c.ok, c.why)
		}
	}
	// in another directory
	if ok, why := s.CanRunIn("sub", "./ok.sh"); !ok {
		t.Errorf("CanRunIn in sub: %s", why)
	}
	if ok, _ := s.CanRunIn("/workspace/sub", "./calls-ok.sh"); ok {
		t.Error("CanRunIn in sub accepted a script that is not there")
	}
	// CanRun, which cannot read files, refuses every script file
	for _, script := range []string{"./ok.sh", "bash ok.sh", "source lib.sh"} {
		if ok, why := CanRun(script); ok || !strings.Contains(why, "script file") {
			t.Errorf("CanRun(%q) = %v, %q", script, ok, why)
		}
	}
}

// FuzzCanRunIn: whatever CanRunIn accepts runs on the fast path without
// meeting a command it does not have: no script half-runs.
func FuzzCanRunIn(f *testing.F) {
	for _, seed := range []string{
		"./ok.sh", "./calls-ok.sh x", "./calls-bad.sh", "bash -c './native.sh'", "./ok.sh; cp native.sh ok.sh; ./ok.sh",
		"for i in 1 2; do ./ok.sh; cd sub; done", "source lib.sh; greet x", "sh -c 'sh -c \"./ok.sh\"'",
		"f() { ./native.sh; }; f", "eval './ok.sh'", "eval 'cd sub'; ./ok.sh", "cd sub; bash -c ./ok.sh",
		"tar -xf x.tar -C sub; ./sub/ok.sh", "./py.py", "env ./ok.sh", "command ./native.sh",
		"find . -name '*.sh' -exec {} \\;", "xargs -a list ./ok.sh",
	} {
		f.Add(seed)
	}
	s, fs := newShell(f)
	scriptFixture(f, fs)
	f.Fuzz(func(t *testing.T, script string) {
		ok, why := s.CanRunIn("", script)
		if ok == (why != "") {
			t.Fatalf("CanRunIn(%q) = %v, %q", script, ok, why)
		}
		if !ok {
			return
		}
		// run it on a copy: the fixture must stay as it is
		s2, fs2 := newShell(t)
		scriptFixture(t, fs2)
		var out, stderr bytes.Buffer
		s2.Exec(context.Background(), script, ExecOptions{Stdout: &out, Stderr: &stderr, Timeout: time.Second, MaxCommands: 10000})
		for _, bad := range []string{"command not found", "does not run on the shell fast path", "is not supported by the shell fast path"} {
			if strings.Contains(stderr.String(), bad) {
				t.Fatalf("CanRunIn accepted %q, which half-ran: %s", script, stderr.String())
			}
		}
	})
}
