package shell

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/computerfs/computerfs/wsfs"
)

// fixtureTime is the mtime of the fixture's files.
var fixtureTime = time.Date(2024, 3, 10, 12, 0, 0, 0, time.UTC)

type fixtureFile struct {
	content string
	mode    os.FileMode
	link    string
	mtime   time.Time
}

// fixture is a small project like those agents work on.
var fixture = map[string]fixtureFile{
	"README.md":                     {content: "# Demo\n\nA demo project for the shell fast path.\n\n## Usage\n\nRun `make build` then `./bin/app`.\n\nTODO: write more docs\n"},
	"go.mod":                        {content: "module example.com/demo\n\ngo 1.22\n"},
	"main.go":                       {content: "package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\n// main prints a greeting.\nfunc main() {\n\tname := \"world\"\n\tif len(os.Args) > 1 {\n\t\tname = os.Args[1]\n\t}\n\tfmt.Println(greet(name))\n}\n\nfunc greet(name string) string {\n\treturn \"Hello, \" + name + \"!\"\n}\n", mtime: fixtureTime.Add(48 * time.Hour)},
	"cmd/app/main.go":               {content: "package main\n\nimport \"example.com/demo/internal/util\"\n\nfunc main() {\n\tprintln(util.Reverse(\"abc\"))\n}\n"},
	"internal/util/strings.go":      {content: "package util\n\n// Reverse returns s reversed.\nfunc Reverse(s string) string {\n\tr := []rune(s)\n\tfor i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {\n\t\tr[i], r[j] = r[j], r[i]\n\t}\n\treturn string(r)\n}\n\n// TODO: handle combining characters\nfunc Upper(s string) string { return s }\n"},
	"internal/util/strings_test.go": {content: "package util\n\nimport \"testing\"\n\nfunc TestReverse(t *testing.T) {\n\tif Reverse(\"abc\") != \"cba\" {\n\t\tt.Fatal(\"bad\")\n\t}\n}\n"},
	"pkg/api/handler.go":            {content: "package api\n\nimport \"net/http\"\n\n// Handler serves the API.\nfunc Handler(w http.ResponseWriter, r *http.Request) {\n\tw.WriteHeader(http.StatusOK)\n\tw.Write([]byte(\"ok\"))\n}\n"},
	"pkg/api/handler_test.go":       {content: "package api\n\nimport \"testing\"\n\nfunc TestHandler(t *testing.T) {}\n"},
	"docs/guide.md":                 {content: "# Guide\n\nStep 1: install\nStep 2: configure\nStep 3: run\n\nerror handling is described below.\nERROR codes:\n  E1 bad input\n  E2 timeout\n"},
	"docs/notes.txt":                {content: "apple\nbanana\napple\ncherry\nbanana\napple\ndate\n"},
	"scripts/build.sh":              {content: "#!/bin/sh\nset -e\ngo build -o bin/app .\necho built\n", mode: 0o755},
	"scripts/check.sh":              {content: "#!/usr/bin/env bash\n# counts the lines of the files given\nset -euo pipefail\nsource scripts/lib.sh\nlog \"checking $# files\"\ntotal=0\nfor f in \"$@\"; do\n  n=$(wc -l < \"$f\")\n  printf '%-12s %4d\\n' \"$f\" \"$n\"\n  total=$((total + n))\ndone\nlog \"total $total\"\n[ \"$total\" -gt 0 ]\n", mode: 0o755},
	"scripts/lib.sh":                {content: "# helpers for the scripts\nlog() { echo \"[check] $*\"; }\nVERSION=1.2\n"},
	"data/users.json":               {content: "[\n  {\"age\": 30, \"name\": \"alice\", \"role\": \"admin\"},\n  {\"age\": 25, \"name\": \"bob\", \"role\": \"dev\"},\n  {\"age\": 35, \"name\": \"carol\", \"role\": \"dev\"}\n]\n"},
	"data/records.csv":              {content: "id,name,score,city\n1,alice,90,paris\n2,bob,72,berlin\n3,carol,85,paris\n4,dave,60,rome\n5,eve,99,berlin\n"},
	"data/log.txt":                  {content: "2024-03-01 INFO start\n2024-03-01 WARN disk low\n2024-03-02 ERROR failed to connect\n2024-03-02 INFO retry\n2024-03-03 ERROR timeout\n2024-03-03 INFO done\n"},
	"data/numbers.txt":              {content: "10\n2\n33\n4\n-5\n100\n7\n"},
	".gitignore":                    {content: "bin/\n*.log\n"},
	".env.example":                  {content: "PORT=8080\nDEBUG=false\n"},
	"src/app.py":                    {content: "import os\nfrom utils import helper\n\n\ndef main():\n    print(helper(os.getcwd()))\n\n\nif __name__ == \"__main__\":\n    main()\n"},
	"src/utils.py":                  {content: "def helper(x):\n    # TODO: validate\n    return x.upper()\n"},
	"src/__init__.py":               {content: ""},
	"web/index.html":                {content: "<html>\n<head><title>Demo</title></head>\n<body><h1>Hello</h1></body>\n</html>\n"},
	"web/app.js":                    {content: "function hello() {\n  console.log('hello');\n}\nhello();\n"},
	"config/settings.yaml":          {content: "server:\n  port: 8080\n  host: localhost\nlogging:\n  level: info\n"},
	"link-to-readme":                {link: "README.md"},
	"empty/":                        {},
	"space dir/file one.txt":        {content: "spaces in names\n"},
}

// fixturePaths lists the fixture's paths, directories included, sorted.
func fixturePaths() []string {
	set := map[string]bool{}
	for p := range fixture {
		q := strings.TrimSuffix(p, "/")
		set[q] = true
		for d := filepath.Dir(q); d != "."; d = filepath.Dir(d) {
			set[d] = true
		}
	}
	var out []string
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

func isFixtureDir(p string) bool {
	if _, ok := fixture[p+"/"]; ok {
		return true
	}
	_, file := fixture[p]
	return !file
}

// writeFixtureStore fills a workspace with the fixture.
func writeFixtureStore(t testing.TB, fs *wsfs.FS) {
	t.Helper()
	paths := fixturePaths()
	for _, p := range paths {
		if isFixtureDir(p) {
			if err := fs.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		f := fixture[p]
		if f.link != "" {
			if err := fs.Symlink(f.link, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		mode := f.mode
		if mode == 0 {
			mode = 0o644
		}
		if err := fs.WriteFile(p, []byte(f.content), uint32(mode)); err != nil {
			t.Fatal(err)
		}
		if err := fs.Chmod(p, uint32(mode)); err != nil {
			t.Fatal(err)
		}
	}
	// times last, deepest first, so directories keep theirs
	for i := len(paths) - 1; i >= 0; i-- {
		p := paths[i]
		if fixture[p].link != "" {
			continue
		}
		mt := fixture[p].mtime
		if mt.IsZero() {
			mt = fixtureTime
		}
		if err := fs.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
}

// writeFixtureDir makes the same tree on disk. On tmpfs a directory lists
// its newest entry first, so entries are made in reverse name order: then
// find and grep -r walk them in name order, as the store lists them.
func writeFixtureDir(t testing.TB, root string) {
	t.Helper()
	paths := fixturePaths()
	for i := len(paths) - 1; i >= 0; i-- {
		_ = i
	}
	var mk func(dir string)
	mk = func(dir string) {
		var kids []string
		for _, p := range paths {
			if filepath.Dir(p) == dir || dir == "" && !strings.Contains(p, "/") {
				kids = append(kids, p)
			}
		}
		sort.Sort(sort.Reverse(sort.StringSlice(kids)))
		for _, p := range kids {
			full := filepath.Join(root, p)
			if isFixtureDir(p) {
				if err := os.Mkdir(full, 0o755); err != nil {
					t.Fatal(err)
				}
				continue
			}
			f := fixture[p]
			if f.link != "" {
				if err := os.Symlink(f.link, full); err != nil {
					t.Fatal(err)
				}
				continue
			}
			mode := f.mode
			if mode == 0 {
				mode = 0o644
			}
			if err := os.WriteFile(full, []byte(f.content), mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(full, mode); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range kids {
			if isFixtureDir(p) {
				mk(p)
			}
		}
	}
	mk("")
	for i := len(paths) - 1; i >= 0; i-- {
		p := paths[i]
		if fixture[p].link != "" {
			continue
		}
		mt := fixture[p].mtime
		if mt.IsZero() {
			mt = fixtureTime
		}
		if err := os.Chtimes(filepath.Join(root, p), mt, mt); err != nil {
			t.Fatal(err)
		}
	}
}
