package shell

import "testing"

// The forms the interpreter answers differently from bash are refused by
// the fast path and CanRun (so auto runs them in the sandbox); their
// look-alikes that agree with bash stay, and are checked against bash.
func TestDivergentRouted(t *testing.T) {
	for _, c := range []struct {
		script string
		routed bool
	}{
		{`time true`, true},
		{`x="a b'c"; echo ${x@Q}`, true},
		{`x=abc; echo ${x/#a/z}`, true},
		{`x=abc; echo ${x/%c/z}`, true},
		{`false | true; echo "${PIPESTATUS[@]}"`, true},
		{`x="a,,b"; IFS=,; arr=($x); echo ${#arr[@]}`, true},
		{`IFS=: read -r a b c <<< "1::3"; echo "$a|$b|$c"`, true},
		{`IFS=$',' read -r a b c <<< "1,,3"; echo "$a|$b|$c"`, true},
		{`let i++; let "i += 2"; echo $i`, true},
		{`x=abc; echo ${x/a/z} ${x#a} ${x%c}`, false},
		{`while IFS= read -r line; do echo "[$line]"; done <<< "  a  "`, false},
		{`IFS=$'\n' arr=($(printf 'a b\nc\n')); echo ${#arr[@]}`, false},
		{`IFS=$' \t\n'; x="a  b"; echo $x`, false},
		{`let i=1+2 j=i*2; echo $i $j`, false},
		{`echo hi | base64 -w0`, false},
		{`printf 'x%.0s' {1..100} | base64 -w 0; echo; printf abc | base64 -w4`, false},
		{`echo hi | base64 -w x`, false},
		// staticrisk.go
		{`echo $((1/0)); echo after`, true},
		{`echo $((5 % 0x0))`, true},
		{`x=0; echo $((10/x))`, true},
		{`(( y /= 0 )); echo $y`, true},
		{`echo $((10/2)) $((7%3))`, false},
		{`readonly r=1; r=2; echo $r`, true},
		{`declare -r B=2; B=3; echo $B`, true},
		{`f() { local -r c=1; (( c++ )); echo $c; }; f`, true},
		{`readonly R=1; read R <<< x; echo $R`, true},
		{`readonly R=1; for R in a; do :; done; echo $R`, true},
		{`UID=0; echo $UID`, true},
		{`readonly A=1; echo $A; B=2; echo $B`, false},
	} {
		got, stderr, code := fastRun(t, c.script)
		routed := code == 2 && stderr != "" && stderrSays(stderr, "is not supported by the shell fast path")
		if routed != c.routed {
			t.Errorf("%s: refused %v, want %v (status %d, stderr %q)", c.script, routed, c.routed, code, stderr)
			continue
		}
		if ok, why := CanRun(c.script); ok == c.routed {
			t.Errorf("%s: CanRun %v %q, want %v", c.script, ok, why, !c.routed)
		}
		if !c.routed {
			want, wantCode := bashRun(t, c.script)
			if got != want || code != wantCode {
				t.Errorf("%s: fast path %q (%d), bash %q (%d)", c.script, got, code, want, wantCode)
			}
		}
	}
}

func stderrSays(s, what string) bool {
	for i := 0; i+len(what) <= len(s); i++ {
		if s[i:i+len(what)] == what {
			return true
		}
	}
	return false
}
