package spec

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

func TestExampleParses(t *testing.T) {
	sp, err := Load("../examples/workspace.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(sp.Sources) != 4 {
		t.Fatalf("%d sources, want 4", len(sp.Sources))
	}
	g, s3, dir, c := sp.Sources[0], sp.Sources[1], sp.Sources[2], sp.Sources[3]
	if g.Kind() != "git" || g.Path != "/repo" || g.Git.URL != "file:///srv/git/app.git" || g.Git.Ref != "main" || g.Line == 0 {
		t.Errorf("git source: %+v %+v", g, g.Git)
	}
	if s3.Kind() != "s3" || s3.S3.Bucket != "datasets" || !s3.S3.PathStyle || !s3.S3.IsLazy() ||
		s3.S3.MaxBytes != 50<<30 || s3.S3.MaxObjects != 100000 || s3.S3.Endpoint != "http://127.0.0.1:7070" {
		t.Errorf("s3 source: %+v", s3.S3)
	}
	abs, _ := filepath.Abs("../examples/notes")
	if dir.Kind() != "dir" || dir.Dir != abs {
		t.Errorf("dir source: %q, want %q", dir.Dir, abs)
	}
	if c.Kind() != "content" || !strings.HasPrefix(*c.Content, "# Crash on empty input\n") || c.Mode == nil || *c.Mode != 0o644 {
		t.Errorf("content source: %+v", c)
	}
}

func TestErrorsNameLineAndField(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		line       int
		want       string // substring of the error
	}{
		{"empty", "", 0, "spec is empty"},
		{"no sources", "sources: []\n", 1, "sources: no sources"},
		{"root agent", "agent: {uid: 0, gid: 0}\nsources:\n  - path: /a\n    content: x\n", 1, "agent: the agent is never root"},
		{"root group agent", "agent: {uid: 5, gid: 0}\nsources:\n  - path: /a\n    content: x\n", 1, "never root"},
		{"agent -1", "agent: {uid: 4294967295, gid: 5}\nsources:\n  - path: /a\n    content: x\n", 1, "agent: uid and gid"},
		{"unknown top field", "sourcez: []\n", 1, "unknown field sourcez in the spec"},
		{"unknown source field", "sources:\n  - path: /a\n    gti: {url: x}\n", 3, "unknown field gti in a source"},
		{"unknown git field", "sources:\n  - path: /a\n    git:\n      url: x\n      rev: main\n", 5, "unknown field rev in git"},
		{"wrong type", "sources:\n  - path: /a\n    git: {url: x, depth: deep}\n", 3, "cannot unmarshal"},
		{"bad yaml", "sources:\n  - path: /a\n\t- dir: x\n", 2, "found a tab character"},
		{"two kinds", "sources:\n  - path: /a\n    dir: x\n    content: y\n", 2, "sources[0]: a source needs exactly one"},
		{"no kind", "sources:\n  - path: /a\n", 2, "exactly one of git, s3, dir and content (it has 0)"},
		{"no path", "sources:\n  - dir: x\n", 2, "sources[0].path: required"},
		{"dotdot", "sources:\n  - dir: x\n    path: /a/../../etc\n", 3, "sources[0].path: \"/a/../../etc\" leaves the workspace"},
		{"missing url", "sources:\n  - path: /a\n    git: {ref: main}\n", 3, "sources[0].git.url: required"},
		{"negative depth", "sources:\n  - path: /a\n    git:\n      url: u\n      depth: -1\n", 5, "sources[0].git.depth: must be 0"},
		{"bad ref", "sources:\n  - path: /a\n    git:\n      url: u\n      ref: \"a b\"\n", 5, "sources[0].git.ref"},
		{"bad token env", "sources:\n  - path: /a\n    git: {url: u, token_env: \"1X\"}\n", 3, "token_env"},
		{"bad author", "sources:\n  - path: /a\n    git: {url: u, push: true, author: \"agent@example.com\"}\n", 3, "author"},
		{"author without name", "sources:\n  - path: /a\n    git: {url: u, push: true, author: \"<a@b>\"}\n", 3, "author"},
		{"bad branch", "sources:\n  - path: /a\n    git: {url: u, push: true, branch: \"a b\"}\n", 3, "branch"},
		{"bad push", "sources:\n  - path: /a\n    git: {url: u, push: maybe}\n", 3, "push: want true, false or a mapping"},
		{"bad push.when", "sources:\n  - path: /a\n    git:\n      url: u\n      push: {when: hourly}\n", 5, "sources[0].git.push.when: \"hourly\": want auto"},
		{"bad push.commit", "sources:\n  - path: /a\n    git:\n      url: u\n      push: {commit: all}\n", 5, "sources[0].git.push.commit: \"all\": want sync"},
		{"bad push.branch", "sources:\n  - path: /a\n    git:\n      url: u\n      push: {branch: \"-x\"}\n", 5, "sources[0].git.push.branch"},
		{"two branches", "sources:\n  - path: /a\n    git:\n      url: u\n      branch: a\n      push: {branch: b}\n", 6, "disagree"},
		{"unknown push field", "sources:\n  - path: /a\n    git:\n      url: u\n      push: {to: b}\n", 5, "unknown field to in git.push"},
		{"missing bucket", "sources:\n  - path: /d\n    s3: {prefix: p/}\n", 3, "sources[0].s3.bucket: required"},
		{"bad bucket", "sources:\n  - path: /d\n    s3: {bucket: Bad_Bucket}\n", 3, "not a valid bucket name"},
		{"bad endpoint", "sources:\n  - path: /d\n    s3:\n      bucket: b12\n      endpoint: \"127.0.0.1:9000\"\n", 5, "sources[0].s3.endpoint"},
		{"bad size", "sources:\n  - path: /d\n    s3:\n      bucket: b12\n      max_bytes: lots\n", 5, "size \"lots\""},
		{"bad mode", "sources:\n  - path: /f\n    content: x\n    mode: \"0999\"\n", 4, "not an octal file mode"},
		{"mode without content", "sources:\n  - path: /f\n    dir: x\n    mode: \"0644\"\n", 4, "mode applies to inline files"},
		{"content at root", "sources:\n  - path: /\n    content: x\n", 2, "cannot be the workspace root"},
		{"overlap", "sources:\n  - path: /a\n    dir: x\n  - path: /b\n    dir: y\n  - path: /a/c\n    content: z\n", 6, "sources[2].path: /a/c overlaps /a of sources[0]"},
		{"same path", "sources:\n  - path: /a\n    dir: x\n  - path: a/\n    dir: y\n", 4, "sources[1].path: /a overlaps /a of sources[0]"},
		{"root overlaps", "sources:\n  - path: /z\n    dir: x\n  - path: /\n    dir: y\n", 4, "sources[1].path: / overlaps"},
		{"bad conditional", "sources:\n  - path: /d\n    s3:\n      bucket: b12\n      conditional: maybe\n", 5, "sources[0].s3.conditional: \"maybe\""},
		{"bad debounce", "sources:\n  - path: /a\n    dir: x\nsync:\n  debounce: soon\n", 5, "duration \"soon\""},
		{"negative retention", "sources:\n  - path: /a\n    dir: x\nsync:\n  journal_retention: -1h\n", 5, "duration \"-1h\""},
		{"unknown sync field", "sources:\n  - path: /a\n    dir: x\nsync:\n  debounse: 1s\n", 5, "unknown field debounse in sync"},
		{"two documents", "sources:\n  - path: /a\n    dir: x\n---\nsources: []\n", 4, "more than one YAML document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), "ws.yaml", "/base")
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not contain %q", err, tc.want)
			}
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("error %T is not a *spec.Error", err)
			}
			if se.Line != tc.line {
				t.Fatalf("error %q names line %d, want %d", err, se.Line, tc.line)
			}
			if !strings.HasPrefix(err.Error(), "ws.yaml") {
				t.Fatalf("error %q does not name the file", err)
			}
		})
	}
}

// TestPushFromDetached: a tag or a commit checked out with push is fine,
// with a branch named or not: the push goes to computerfs/NAME by
// default, whatever HEAD is on.
func TestPushFromDetached(t *testing.T) {
	for _, ref := range []string{"refs/tags/v1", "0123456789abcdef0123456789abcdef01234567", "v1"} {
		for _, branch := range []string{", branch: fix", ""} {
			if _, err := Parse(fmt.Appendf(nil, "sources:\n  - path: /a\n    git: {url: u, ref: %q, push: true%s}\n", ref, branch), "ws.yaml", "/base"); err != nil {
				t.Errorf("%s%s: %v", ref, branch, err)
			}
		}
	}
}

// TestPushForms: push is a boolean or a mapping of options; the branch
// defaults to computerfs/NAME; a stored spec (JSON) keeps the options,
// and one stored as `"push": true` before they existed reads as push with
// the defaults.
func TestPushForms(t *testing.T) {
	for _, c := range []struct {
		yaml, branch string
		want         Push
		json         string
	}{
		{"push: true", "computerfs/my-ws", Push{On: true}, `true`},
		{"push: false", "computerfs/my-ws", Push{}, ``},
		{"push: {}", "computerfs/my-ws", Push{On: true}, `true`},
		{"branch: fix\n      push: true", "fix", Push{On: true}, `true`},
		{"push: {branch: fix, when: sync, commit: agent}", "fix", Push{On: true, Branch: "fix", When: "sync", Commit: "agent"}, `{"branch":"fix","when":"sync","commit":"agent"}`},
		{"push: {commit: sync}", "computerfs/my-ws", Push{On: true, Commit: "sync"}, `{"commit":"sync"}`},
		{"push:\n        when: auto\n        commit: auto", "computerfs/my-ws", Push{On: true, When: "auto", Commit: "auto"}, `{"when":"auto","commit":"auto"}`},
	} {
		sp, err := Parse([]byte("sources:\n  - path: /a\n    git:\n      url: u\n      "+c.yaml+"\n"), "ws.yaml", "/base")
		if err != nil {
			t.Fatalf("%s: %v", c.yaml, err)
		}
		g := sp.Sources[0].Git
		if g.Push != c.want || g.PushBranch("my ws") != c.branch {
			t.Errorf("%s: %+v to %s, want %+v to %s", c.yaml, g.Push, g.PushBranch("my ws"), c.want, c.branch)
		}
		js, err := json.Marshal(g)
		if err != nil {
			t.Fatal(err)
		}
		var back Git
		if err := json.Unmarshal(js, &back); err != nil || back.Push != c.want {
			t.Errorf("%s: %s read back as %+v (%v)", c.yaml, js, back.Push, err)
		}
		if c.json != "" && !strings.Contains(string(js), `"push":`+c.json) || c.json == "" && strings.Contains(string(js), "push") {
			t.Errorf("%s: JSON %s, want push %s", c.yaml, js, c.json)
		}
	}
	var old Git
	if err := json.Unmarshal([]byte(`{"url":"u","push":true}`), &old); err != nil || old.Push != (Push{On: true}) || old.PushBranch("ws") != "computerfs/ws" {
		t.Fatalf("a spec stored before the options: %+v %v", old.Push, err)
	}
	for name, want := range map[string]string{"ws": "ws", "a b/c": "a-b-c", "..": "workspace", "x.lock": "x", "": "workspace", "-lead": "lead", strings.Repeat("n", 100): strings.Repeat("n", 64)} {
		if got := BranchName(name); got != want {
			t.Errorf("BranchName(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestPathsAndDefaults(t *testing.T) {
	sp, err := Parse([]byte(`sources:
  - path: repo/
    git: {url: "https://example.com/r.git"}
  - path: /ab
    s3: {bucket: data, lazy: false}
  - path: /a
    dir: rel/dir
  - path: /abc/./x
    content: ""
`), "ws.yaml", "/base")
	if err != nil {
		t.Fatal(err)
	}
	got := []string{sp.Sources[0].Path, sp.Sources[1].Path, sp.Sources[2].Path, sp.Sources[3].Path}
	if strings.Join(got, " ") != "/repo /ab /a /abc/x" {
		t.Fatalf("paths %q", got)
	}
	if sp.Sources[1].S3.IsLazy() {
		t.Fatal("lazy: false ignored")
	}
	if sp.Sources[2].Dir != "/base/rel/dir" {
		t.Fatalf("relative dir resolved to %q", sp.Sources[2].Dir)
	}
	if sp.Sources[0].Git.Depth != 0 || sp.Sources[0].Git.Push.On {
		t.Fatal("git defaults")
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "10": 10, "10B": 10, "1k": 1024, "1KB": 1000, "1KiB": 1024,
		"2M": 2 << 20, "2MB": 2e6, "1.5GiB": 3 << 29, "1 TB": 1e12, "8T": 8 << 40} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "1X", "-1", "1..2M", "99999999999999999999", "9000000000T", "1e3"} {
		if v, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", in, v)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("sources:\n  - path: /a\n    git: {url: x, depth: 1}\n"))
	f.Add([]byte("sources:\n  - path: /d\n    s3: {bucket: b12, max_bytes: 1GiB}\n  - path: /e\n    content: x\n    mode: \"0755\"\n"))
	f.Add([]byte("sources:\n  - path: /a/../b\n    dir: x\n"))
	f.Add([]byte("sources:\n  - path: /a\n    content: x\npolicy:\n  read_only: true\n  deny: [/s, \"*.pem\"]\n  read_only_paths: [/w/**]\n" +
		"  exec: {backends: [shell], deny_commands: ['\\bcurl'], network: host, max_timeout: 1m}\n  limits: {max_write: 1MiB, max_read: 1k, max_output: 10}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		sp, err := Parse(data, "f.yaml", "/base")
		if err != nil {
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("error %v is %T, not a spec.Error", err, err)
			}
			return
		}
		// A spec that parses has clean, non-overlapping, absolute paths
		// and one kind per source.
		seen := map[string]bool{}
		for _, s := range sp.Sources {
			if c, err := CleanPath(s.Path); err != nil || c != s.Path || !strings.HasPrefix(s.Path, "/") {
				t.Fatalf("path %q not clean", s.Path)
			}
			if s.Kind() == "" {
				t.Fatalf("source without kind: %+v", s)
			}
			for p := range seen {
				if p == s.Path || p == "/" || s.Path == "/" || strings.HasPrefix(s.Path, p+"/") || strings.HasPrefix(p, s.Path+"/") {
					t.Fatalf("overlapping paths %q and %q accepted", p, s.Path)
				}
			}
			seen[s.Path] = true
		}
		// A policy that parses is one the tools can use: its globs and
		// expressions compile, and it survives the store's JSON copy.
		if p := sp.Policy; p != nil {
			if err := p.validate(); err != nil {
				t.Fatalf("accepted policy fails validation: %v", err)
			}
			js, err := json.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			var back Policy
			if err := json.Unmarshal(js, &back); err != nil || back.validate() != nil {
				t.Fatalf("policy does not survive JSON: %s: %v", js, err)
			}
		}
	})
}

func FuzzCleanPath(f *testing.F) {
	for _, s := range []string{"/a", "a/b/", "/../x", "/a/./b", "//a//b", "."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		c, err := CleanPath(p)
		if err != nil {
			return
		}
		if !strings.HasPrefix(c, "/") || strings.Contains(c, "/../") || strings.HasSuffix(c, "/..") || (len(c) > 1 && strings.HasSuffix(c, "/")) {
			t.Fatalf("CleanPath(%q) = %q", p, c)
		}
		if c2, err := CleanPath(c); err != nil || c2 != c {
			t.Fatalf("CleanPath not idempotent: %q -> %q -> %q (%v)", p, c, c2, err)
		}
	})
}

func TestPolicy(t *testing.T) {
	sp, err := Parse([]byte(`sources:
  - path: /a
    content: x
policy:
  read_only: true
  deny: ["/secrets", "*.pem"]
  read_only_paths: ["/workspace/vendor/**"]
  exec:
    backends: [shell]
    deny_commands: ['\bcurl\b']
    network: host
    max_timeout: 30s
  limits: {max_write: 1MiB, max_read: 10KB, max_output: 4096}
`), "ws.yaml", "/")
	if err != nil {
		t.Fatal(err)
	}
	p := sp.Policy
	if !p.ReadOnly || len(p.Deny) != 2 || p.Exec.Network != "host" || p.Exec.MaxTimeoutDuration().Seconds() != 30 ||
		p.Limits.MaxWrite != 1<<20 || p.Limits.MaxRead != 10000 || p.Limits.MaxOutput != 4096 {
		t.Fatalf("policy: %+v %+v %+v", p, p.Exec, p.Limits)
	}
	for _, tc := range []struct {
		yaml string
		line int
		want string
	}{
		{"policy:\n  deny: [\"a/../b\"]\n", 5, "policy.deny[0]: \"a/../b\": .. has no place"},
		{"policy:\n  read_only_paths: [\"[\"]\n", 5, "policy.read_only_paths[0]: \"[\": bad pattern"},
		{"policy:\n  exec:\n    backends: [docker]\n", 6, "policy.exec.backends[0]: unknown backend \"docker\""},
		{"policy:\n  exec:\n    deny_commands: [\"(\"]\n", 6, "policy.exec.deny_commands[0]: not a regular expression"},
		{"policy:\n  exec:\n    network: bridge\n", 6, "policy.exec.network"},
		{"policy:\n  exec:\n    max_timeout: soon\n", 6, "policy.exec.max_timeout"},
		{"policy:\n  limits:\n    max_write: lots\n", 6, "size \"lots\""},
		{"policy:\n  readonly: true\n", 5, "unknown field readonly in policy"},
	} {
		_, err := Parse([]byte("sources:\n  - path: /a\n    content: x\n"+tc.yaml), "ws.yaml", "/")
		var se *Error
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.As(err, &se) || se.Line != tc.line {
			t.Errorf("%q: error %v, want line %d and %q", tc.yaml, err, tc.line, tc.want)
		}
	}
}

func TestMatchPath(t *testing.T) {
	for _, tc := range []struct {
		glob, path string
		want       bool
	}{
		{"/secrets", "/secrets", true},
		{"/secrets", "/secrets/a/b", true},
		{"/secrets", "/secretsx", false},
		{"/workspace/secrets/**", "/secrets/k", true},
		{"*.pem", "/a/b/c.pem", true},
		{"*.pem", "/c.pem", true},
		{"*.pem", "/c.pem.txt", false},
		{"/a/**/z", "/a/z", true},
		{"/a/**/z", "/a/b/c/z", true},
		{"/a/*/z", "/a/b/c/z", false},
		{".env", "/x/.env", true},
		{"**", "/", true},
	} {
		if got := MatchPath(tc.glob, tc.path); got != tc.want {
			t.Errorf("MatchPath(%q, %q) = %v", tc.glob, tc.path, got)
		}
	}
}

func FuzzMatchPath(f *testing.F) {
	for _, s := range []string{"/a/**/b", "*.go", "**", "/x/*/y/**", "[a-"} {
		f.Add(s, "/a/x/b")
	}
	f.Fuzz(func(t *testing.T, g, p string) {
		if checkGlob(g) != nil {
			return
		}
		m := MatchPath(g, p)
		if MatchGlob(g, p) && !m {
			t.Fatalf("%q matches %q itself but not as a path", g, p)
		}
	})
}

func TestParseAuthor(t *testing.T) {
	for _, tc := range []struct{ in, name, email string }{
		{"Agent <agent@example.com>", "Agent", "agent@example.com"},
		{"  Jane Q. Doe   <jq@d.org>", "Jane Q. Doe", "jq@d.org"},
		{"x <y>", "x", "y"},
	} {
		n, e, err := ParseAuthor(tc.in)
		if err != nil || n != tc.name || e != tc.email {
			t.Errorf("ParseAuthor(%q) = %q, %q, %v", tc.in, n, e, err)
		}
	}
	for _, bad := range []string{"", "agent", "a@b", "<a@b>", "A <>", "A <a@b> x", "A <a<b>", "A >a@b<", "A <a@b>\n", "A\n <a@b>"} {
		if _, _, err := ParseAuthor(bad); err == nil {
			t.Errorf("ParseAuthor(%q): no error", bad)
		}
	}
	if _, _, err := ParseAuthor(DefaultGitAuthor); err != nil {
		t.Fatal(err)
	}
}

// FuzzParseAuthor: what ParseAuthor accepts has both parts, and written
// back as "name <email>" it parses to the same.
func FuzzParseAuthor(f *testing.F) {
	for _, s := range []string{"A <a@b>", "<a>", "a <b> <c>", "x\x00 <y>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, e, err := ParseAuthor(s)
		if err != nil {
			return
		}
		if n == "" || e == "" || strings.ContainsAny(n+e, "<>\x00\n") {
			t.Fatalf("ParseAuthor(%q) = %q, %q", s, n, e)
		}
		n2, e2, err := ParseAuthor(n + " <" + e + ">")
		if err != nil || n2 != n || e2 != e {
			t.Fatalf("round trip of %q: %q, %q, %v", s, n2, e2, err)
		}
	})
}

// TestQuota: the top-level quota takes a size with a unit, and refuses
// anything else with its line.
func TestQuota(t *testing.T) {
	sp, err := Parse([]byte("quota: 10GiB\nsources:\n  - path: /a\n    content: x\n"), "ws.yaml", "/base")
	if err != nil || sp.Quota != 10<<30 {
		t.Fatalf("quota: %v, %v", sp, err)
	}
	if _, err := Parse([]byte("quota: much\nsources:\n  - path: /a\n    content: x\n"), "ws.yaml", "/base"); err == nil || !strings.Contains(err.Error(), "ws.yaml:1") {
		t.Fatalf("a bad quota: %v", err)
	}
}

// TestExamplesLoad: every spec in examples/ is valid.
func TestExamplesLoad(t *testing.T) {
	files, err := filepath.Glob("../examples/*.yaml")
	if err != nil || len(files) < 3 {
		t.Fatalf("examples: %v %v", files, err)
	}
	for _, f := range files {
		if _, err := Load(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
