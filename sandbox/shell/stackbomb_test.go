package shell

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime/metrics"
	"strings"
	"testing"
	"time"
)

// A Go stack that overflows is a fatal error, not a panic: nothing
// recovers it and the daemon ends. Each parser of the fast path recurses
// on the nesting of what it reads (the shell's on brackets and on
// operators, expr's, find's, test's and bc's on their operands), so an
// agent that writes a million levels in one call ends its daemon unless
// every parser bounds its depth. stackBombs are such calls: a script
// with a million levels (made by the call itself, so that the script
// sent is small), or one given as it is.

// deepArgs makes, inside the call, $x: n words w.
func deepArgs(n int, w string) string {
	return fmt.Sprintf(`x=$(printf '%%0%dd' 0 | sed 's/0/%s /g'); `, n, w)
}

// deepFile makes, inside the call, the file p: n times s then tail.
func deepFile(n int, s, p, tail string) string {
	return fmt.Sprintf(`printf '%%0%dd' 0 | sed 's/0/%s/g' > %s; echo '%s' >> %s; `, n, s, p, tail, p)
}

var stackBombs = []string{
	// run-time operands of the built-ins
	deepArgs(600000, "(") + `expr $x 1`,
	deepArgs(600000, "length") + `expr $x 1`,
	deepArgs(1000000, "!") + `test $x 1`,
	deepArgs(1000000, "(") + `[ $x 1 ]`,
	deepArgs(500000, "1 -a") + `test $x 1`,
	deepArgs(500000, "1 -o") + `test $x 1`,
	deepArgs(1000000, "!") + `find . $x -name x`,
	deepArgs(1000000, "(") + `find . $x -name x`,
	deepFile(1000000, "(", "p", "1") + `bc < p`,
	deepFile(1000000, "- ", "p", "1") + `bc < p`,
	deepFile(800000, "1^", "p", "1") + `bc < p`,
	deepFile(800000, "a=", "p", "1") + `bc < p`,
	deepFile(1000000, "1+", "p", "1") + `bc < p`,
	deepFile(1000000, "sqrt(", "p", "1") + `bc < p`,
	deepFile(100000, "1+", "p", "1") + `awk "BEGIN { print $(cat p) }"`,
	deepFile(100000, "x=", "p", "1") + `awk "BEGIN { $(cat p) }"`,
	deepFile(100000, "!", "p", "1") + `awk "BEGIN { print $(cat p) }"`,
	deepFile(50000, "1?1:", "p", "1") + `awk "BEGIN { print $(cat p) }"`,
	deepFile(100000, "-", "p", "1") + `awk "BEGIN { print $(cat p) }"`,
	deepFile(100000, "1+", "p", "1") + `jq -n "$(cat p)"`,
	deepFile(100000, "1,", "p", "1") + `jq -n "[$(cat p)] | length"`,
	deepFile(3000, "1+", "p", "1") + `echo null | jq "$(cat p)"`,
	// values deeper than Go's stack, built by the filter in a loop
	// (gojq's ==, sort, flatten and encoder recurse on them): a value
	// 3,000,000 levels deep took `. == .` to a fatal stack overflow
	`jq -n 'reduce range(3000000) as $i (0; [.]) | . == .'`,
	`jq -n 'reduce range(3000000) as $i (0; {a: .}) | [.] | sort | length'`,
	`jq -n '[foreach range(3000000) as $i (0; [.])] | last | flatten | length'`,
	`jq -n 'def f(n): if n == 0 then 0 else [f(n - 1)] end; f(3000000) | tojson | length'`,
	`jq -n 'last(limit(3000000; 0 | recurse([.]))) | contains([])'`,
	`jq -n '0 | until(false; [.])'`,
	`jq -n 'last(limit(3000000; 0 | repeat([.])))|. < .'`,
	`f='reduce range(3000000) as $i (0; [.]) | . == .'; eval "jq -n '$f'"`,
	`jq -n '[range(3000000) | "a"] as $p | null | setpath($p; 1) | . == .'`,
	`jq -n 'fromstream([[range(3000000) | "a"], 1], [[range(1) | "a"]]) | . == .'`,
	`jq -n '[range(3000000) | "a"] as $p | null | getpath($p) = 1'`,
	// the key of a destructuring pattern is a query too
	`jq -n '. as {(reduce range(3000000) as $i (0; [.]) | . == . | "k"): $x} | $x'`,
	// scripts made at run time: eval, sh -c, source, a script file, trap
	deepArgs(1000000, "!") + `eval "[[ $x 1 ]]"`,
	deepFile(1000000, "1+", "p", "1") + `eval "echo \$(( $(cat p) ))"`,
	deepFile(1000000, "a=", "p", "1") + `eval "echo \$(( $(cat p) ))"`,
	deepFile(1000000, "!", "p", "1") + `eval "echo \$(( $(cat p) ))"`,
	deepFile(500000, "1?1:", "p", "1") + `eval "echo \$(( $(cat p) ))"`,
	deepFile(1000000, "1,", "p", "1") + `eval "echo \$(( $(cat p) ))"`,
	deepFile(500000, "true \\&\\& ", "p", "true") + `eval "$(cat p)"`,
	deepFile(500000, "true | ", "p", "true") + `eval "$(cat p)"`,
	deepFile(1000000, "! ", "p", "true") + `eval "$(cat p)"`,
	deepArgs(1000000, "!") + `bash -c "[[ $x 1 ]]"`,
	`(echo -n '[[ '; ` + deepFile(1000000, "! ", "q", "") + `cat q; echo ' 1 ]]') > deep.sh; source deep.sh`,
	`(echo -n '[[ '; ` + deepFile(1000000, "! ", "q", "") + `cat q; echo ' 1 ]]') > deep.sh; bash deep.sh`,
	deepArgs(1000000, "!") + `trap "[[ $x 1 ]]" EXIT`,
}

// stackBombsHeld already held before the fast path bounded every
// parser's depth: each must leave the daemon alive, whatever it prints.
var stackBombsHeld = []string{
	// a chain of -o, arithmetic of a variable's value, awk, sed, brackets
	deepArgs(500000, "-true -o") + `find . $x -name x`,
	deepFile(1000000, "1+", "p", "1") + `x=$(cat p); echo $(( x ))`,
	deepFile(1000000, "1+", "p", "1") + `x=$(cat p); echo $(( $x ))`,
	deepFile(1000000, "!", "p", "1") + `x=$(cat p); let y=$x`,
	deepFile(1000000, "(", "p", "1") + `x=$(cat p); eval "echo $x"`,
	deepFile(1000000, "{", "p", "p") + `echo a | sed -f p`,
	deepFile(100000, "(", "p", "1") + `awk -f p`,
	deepFile(100000, "1 ", "p", "1") + `awk "BEGIN { print $(cat p) }"`, // about 160 MiB of stack
}

// deepScripts are scripts sent as they are: routed (CanRunIn) and run.
func deepScripts() []string {
	return []string{
		"[[ " + strings.Repeat("! ", 1000000) + "1 ]]",
		"echo $(( " + strings.Repeat("1+", 1000000) + "1 ))",
		"echo $(( " + strings.Repeat("a=", 1000000) + "1 ))",
		"(( " + strings.Repeat("!", 1000000) + "1 ))",
		"x=$(( " + strings.Repeat("-", 1000000) + "1 ))",
		strings.Repeat("true && ", 400000) + "true",
		strings.Repeat("true || ", 400000) + "true",
		strings.Repeat("echo | ", 400000) + "cat",
		strings.Repeat("((", 1000000),
		"echo " + strings.Repeat("$(", 500000),
		"jq -n '" + strings.Repeat("1+", 3000) + "1'", // under the script's bounds; jqCanRun parsed it before it routed
	}
}

// TestStackBombs runs every stack bomb in a child test process (where
// the first that gets through ends the child, not the test binary), on
// the default memory budget, each routed as the daemon routes it and
// run: each must be refused or stopped, the child must live, and a
// command after them must run. Its Go stack must stay far below the
// gigabyte at which Go ends the process.
func TestStackBombs(t *testing.T) {
	if os.Getenv("COMPUTERFS_STACKBOMB_CHILD") == "1" {
		stackBombChild(t)
		return
	}
	runInMemCgroup(t, "TestStackBombs", "COMPUTERFS_STACKBOMB_CHILD", 6<<30)
}

func stackBombChild(t *testing.T) {
	waitForCgroup(t)
	s, fs := newShell(t)
	// the sizes of a goroutine stack, which a deep recursion grows
	sample := []metrics.Sample{{Name: "/memory/classes/heap/stacks:bytes"}}
	stacks := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	run := func(script string, mustFail bool) {
		t.Helper()
		var out bytes.Buffer
		start := time.Now()
		res, err := s.Exec(context.Background(), script, ExecOptions{Stdout: &out, Stderr: &out, Timeout: 2 * time.Minute, MaxOutput: 1 << 20})
		if err != nil {
			t.Fatalf("%.80q: %v", script, err)
		}
		text := strings.TrimSpace(out.String())
		t.Logf("%-70.70q %3d %-12s %5.1fs stacks %4d MiB  %.120q", script, res.ExitCode, res.Stopped, time.Since(start).Seconds(), stacks()>>20, text)
		if mustFail && res.ExitCode == 0 {
			t.Errorf("%.80q ran to the end: %q", script, text)
		}
	}
	for i, bomb := range append(stackBombs, stackBombsHeld...) {
		run(bomb, i < len(stackBombs))
		if err := fs.Remove("p"); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	for _, script := range deepScripts() {
		if ok, why := s.CanRunIn("", script); ok {
			t.Errorf("%.60q routed to the fast path", script)
		} else {
			t.Logf("%.60q routed: %.120s", script, why)
		}
		if ok, _ := CanRun(script); ok {
			t.Errorf("%.60q: CanRun says the fast path runs it", script)
		}
		run(script, true)
	}
	var out bytes.Buffer
	if res, err := s.Exec(context.Background(), "echo still here; seq 10000 | paste -sd+ | bc; expr '(' 1 + 2 ')' '*' 3; [ ! ! 1 ] && echo yes",
		ExecOptions{Stdout: &out, Stderr: &out, Timeout: time.Minute}); err != nil || res.ExitCode != 0 || out.String() != "still here\n50005000\n9\nyes\n" {
		t.Errorf("after the bombs: %+v %v %q", res, err, out.String())
	}
}
