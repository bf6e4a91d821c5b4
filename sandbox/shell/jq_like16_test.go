package shell

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestJqLike16 runs filters of each kind that fails on a value of the
// wrong type (indexing, iterating, slicing, the builtins that check
// their input) on inputs of every type, and input texts jq 1.6 cannot
// read: whatever routing keeps on the fast path must print what
// /usr/bin/jq (1.6) prints, stdout, stderr and status, error texts and
// their (at file:line) included.
func TestJqLike16(t *testing.T) {
	if _, err := os.Stat("/usr/bin/jq"); err != nil {
		t.Fatal("/usr/bin/jq (jq 1.6, scripts/packages.txt) is needed for the differential test")
	}
	filters := []string{
		`.x`, `.["x"]`, `.[0]`, `.[-1]`, `.[1.5]`, `.[1:2]`, `.[:-1]`, `.[]`, `.[]?`, `.x?`, `.x.y`, `.a?.b`, `.[0,1]`,
		`.[null]`, `.[[1]]`, `.["a_key_of_thirty_bytes_or_more"]`, `{x}`, `{"x"}`, `map(.x)`, `[.[] | .x?]`,
		`first`, `last`, `nth(0)`, `keys`, `length`, `has("x")`, `has(0)`, `in({})`, `to_entries`, `from_entries`,
		`with_entries(.)`, `add`, `any`, `all`, `join(",")`, `flatten`, `reverse`, `sort`, `sort_by(.x)`, `group_by(.)`,
		`unique`, `unique_by(.x)`, `min`, `max_by(.x)`, `tostring`, `tonumber`, `fromjson`, `ascii_downcase`,
		`explode`, `ltrimstr("a")`, `startswith("a")`, `split(",")`, `test("a")`, `match("a")`, `[scan("a")]`,
		`sub("a"; "b")`, `contains("a")`, `inside("a")`, `index("a")`, `indices(1)`, `utf8bytelength`, `floor`,
		`range(.)`, `transpose`, `-.`, `. + 1`, `. - 1`, `. * 2`, `. / 2`, `"a" * .`, `{(.): 1}`, `error`, `[nth(-1; .[]?)]`, `rindex(",")`,
	}
	inputs := []string{`null`, `true`, `1.5`, `"a,b"`, `"é,b,"`, `[1,2]`, `{"a":1,"x":{"y":2}}`, `[{"x":1},2]`, `[]`, `{}`, `[[1,2],[3]]`, "{\"x\":1}\n{\"x\":\"s\"}\n"}
	type run struct{ opts, filter, input string }
	var runs []run
	for _, f := range filters {
		for _, in := range inputs {
			runs = append(runs, run{"-c", f, in})
		}
	}
	for _, in := range []string{`{1:2}`, `[1:2]`, `{"a":1 "b":2}`, `{"a"}`, `1,2`, `}`, `[}`, `{"a":}`, `"\u12"`, `"\ud800"`, `"abc`,
		`{"a":1}}`, "1 [", `truex`, `nul`, `[1 2]`, `"a""b"`, `01 +1 .5 1. -`, "\"a\tb\"", `nan`, `[1,]`, `{"a":1,}`, `"\x"`,
		"1\n{a\n", "[1,\n2,\n", strings.Repeat("[", 257) + strings.Repeat("]", 257), "\xef\xbb\xbf{\"b\":1,\"a\":2}"} {
		runs = append(runs, run{"-c", ".", in}, run{"-e", ".a?", in})
	}
	for _, s := range []string{`"x"`, `"1 2"`, `""`, `"[1,2"`, `"{\"b\":1,\"a\":2}"`, `"01"`, `"nan"`, `"[1]"`, `" 5 "`} {
		runs = append(runs, run{"-c", "fromjson", s}, run{"-c", "tonumber", s})
	}
	for _, e := range []string{"1 null", "null 1", "1 2", "", `{"a":1} 1`, `1 {"a":1}`} {
		runs = append(runs, run{"-e", ".a?", e}, run{"-e", "empty", e}, run{"", ".a", e})
	}
	s, fs := newShell(t)
	dir := t.TempDir()
	same, routed := 0, 0
	for _, r := range runs {
		cmdline := "jq " + r.opts + " " + shellQuote(r.filter) + " in.json"
		if ok, _ := CanRun(cmdline); !ok {
			routed++
			continue
		}
		if err := fs.WriteFile("in.json", []byte(r.input), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dir+"/in.json", []byte(r.input), 0o644); err != nil {
			t.Fatal(err)
		}
		out, errs, code := sh(t, s, cmdline)
		c := exec.Command("bash", "-c", cmdline)
		c.Dir = dir
		o, e, want := runCmd(t, c)
		if out != o || errs != e || code != want {
			t.Errorf("%s < %q\n fast path %d: %q %q\n jq 1.6    %d: %q %q", cmdline, r.input, code, out, errs, want, o, e)
			continue
		}
		same++
	}
	t.Logf("%d runs: %d on the fast path and identical to jq 1.6, %d routed", len(runs), same, routed)
}
