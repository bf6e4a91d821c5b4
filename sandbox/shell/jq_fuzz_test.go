package shell

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// FuzzJq runs jq on the fast path with a fuzzed filter, input and
// options, as a script would (the filter and input through variables, so
// that no shell quoting is in the way), on a short timeout and a small
// memory budget: no call may panic (a panic in the pipeline's goroutine
// ends the process, which the fuzzer reports), and every call must end
// soon after its timeout, whatever the filter asks for (gojq's parse,
// jqBoundMul's rewrite, the order-keeping decoder and encoder, the
// registration table). CanRun must answer for the same command line.
func FuzzJq(f *testing.F) {
	seeds := [][3]string{
		{".", `{"b":1,"a":[1,2,{"d":null,"c":"x"}]}`, "-c"},
		{"keys_unsorted, to_entries, with_entries(.value |= 1)", `{"b":1,"a":2}`, "-c"},
		{`"\(.) \(1e17) \(-0)"`, `{"b":1.5,"a":-0}`, "-r"},
		{"reduce range(40) as $i (0; [., .])", "null", "-n"},
		{"reduce range(300) as $i (null; {a: ., b: [.]}) | tojson | length", "null", "-n"},
		{"[limit(1e9; repeat(1))]", "null", "-n"},
		{". * {a: {c: 1}} + {z: 2} | del(.b)", `{"b":1,"a":{"d":2}}`, "-S"},
		{".[] | -. , . % -3, 0 * -1, . / 7", "[1,-0,3.5,1e308]", "-c"},
		{`.x | tostring | test("a+$"), [match("(a)"; "g")]`, `{"x":"aaa"}`, "-a"},
		{"map(select(.a > 1)) | sort_by(.a) | group_by(.b)", `[{"a":2,"b":1},{"a":3,"b":1}]`, "--tab"},
		{"add, join(\",\"), from_entries", `[{"key":"b","value":1},{"key":"a","value":2}]`, "--indent 7"},
		{"input", "1 2", "-s"},
		{"$x + $y", "null", "--arg x 1 --argjson y {\"b\":1,\"a\":2}"},
		{strings.Repeat("[", 300) + strings.Repeat("]", 300), "null", "-c"},
		{".", strings.Repeat(`{"a":`, 3000) + "1" + strings.Repeat("}", 3000), "-c"},
		{"..|numbers", `[1,[2,{"b":3,"a":4}]]`, "-c"},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1], s[2])
	}
	s, fs := newShell(f)
	f.Fuzz(func(t *testing.T, filter, input, opts string) {
		if len(filter) > 4096 || len(input) > 1<<16 || len(opts) > 64 || strings.ContainsAny(opts, "'\"\\$`;|&<>()\n") {
			return
		}
		if err := fs.WriteFile("in.json", []byte(input), 0o644); err != nil {
			t.Fatal(err)
		}
		script := "jq " + opts + " \"$F\" in.json"
		CanRun("jq " + opts + " " + shellQuote(filter) + " in.json")
		var out bytes.Buffer
		start := time.Now()
		s.Exec(context.Background(), script, ExecOptions{Stdout: &out, Stderr: &out, Timeout: 2 * time.Second, MaxOutput: 1 << 16,
			MaxMemory: 64 << 20, Env: []string{"F=" + filter}})
		if d := time.Since(start); d > 30*time.Second {
			t.Fatalf("took %v for a 2 s timeout: jq %s %q < %.200q", d, opts, filter, input)
		}
	})
}

// TestJqCanRunBounds: a literal filter past cmdJq's bounds (which refuses
// it, unlike jq 1.6) routes to the sandbox before gojq parses it, and
// routing it takes no time; one within them stays.
func TestJqCanRunBounds(t *testing.T) {
	for _, c := range []struct {
		filter string
		ok     bool
	}{
		{strings.Repeat("1+", 100) + "1", true},
		{strings.Repeat("1+", maxJqOperators+1) + "1", false},
		{strings.Repeat("1,", 30000) + "1", false},
		{strings.Repeat("[", maxNesting+1) + strings.Repeat("]", maxNesting+1), false},
	} {
		start := time.Now()
		ok, why := CanRun("jq -n '" + c.filter + "'")
		if ok != c.ok || !ok && !strings.Contains(why, "bounds") && !strings.Contains(why, "nests") {
			t.Errorf("%.40s... (%d bytes): routed %v (%s), want %v", c.filter, len(c.filter), !ok, why, !c.ok)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%.40s...: routing took %v", c.filter, d)
		}
	}
}
