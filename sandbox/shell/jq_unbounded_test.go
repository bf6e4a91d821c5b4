package shell

import "testing"

// TestJqUnboundedRoutes: a filter that can build a value of any depth
// (reduce, foreach, its own functions, recurse(f), until, while, repeat)
// goes to the sandbox's jq, whose stack is its own process's; filters
// whose values are bounded by their input stay on the fast path.
func TestJqUnboundedRoutes(t *testing.T) {
	for _, f := range []string{
		`reduce range(3000000) as $i (0; [.])`,
		`reduce .[] as $x (0; . + $x)`,
		`[foreach .[] as $x (0; . + 1)]`,
		`def f: [f]; f`,
		`recurse(.a)`,
		`recurse([.]; true)`,
		`0 | until(. > 3; . + 1)`,
		`[.[] | while(. < 3; . + 1)]`,
		`repeat(.)`,
		`.a | {b: (reduce .[] as $x (0; . + $x))}`,
		`if . then [.[] | reduce .[] as $x (0; 1)] else 0 end`,
		`."\(reduce range(2) as $i (0; 1))"`,
		`try (reduce . as $x (0; 1)) catch 0`,
		`. as {(reduce range(3) as $i (0; [.]) | "k"): $x} | $x`,
		`. as [$a, {b: {(def f: [f]; "k"): $c}}] | $a`,
		`.[] as {("\(reduce . as $x (0; 1))"): $v} | $v`,
	} {
		if ok, why := CanRun("jq '" + f + "'"); ok {
			t.Errorf("jq %q runs on the fast path", f)
		} else if testing.Verbose() {
			t.Logf("jq %q: %s", f, why)
		}
	}
	for _, f := range []string{`.`, `.a.b`, `.[] | .name`, `map(select(.a > 1)) | length`, `[.[] | {n: .name}]`, `keys`, `..`, `recurse`, `to_entries | map(.key)`, `limit(3; .[])`} {
		if ok, why := CanRun("jq '" + f + "' f.json"); !ok {
			t.Errorf("jq %q routed: %s", f, why)
		}
	}
	// made at run time, the filter reaches the fast path's jq unseen by
	// routing: it is refused there, never run
	s, _ := newShell(t)
	out, errs, code := sh(t, s, `f='reduce range(3) as $i (0; [.])'; eval "jq -n '$f'"`)
	if code != 3 || out != "" || errs == "" {
		t.Errorf("a filter made at run time: %q %q %d", out, errs, code)
	}
}
