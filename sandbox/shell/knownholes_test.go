//go:build redteam

package shell

// knownHoleBombs are memory bombs the fast path does not yet contain: awk
// programs that
// double a string in a loop (stopped within a doubling or two of the
// watchdog seeing them, which a loaded machine may not be soon enough
// for). Run them with: go test -tags 'seccomp redteam' -run TestKnownHoleBombs ./sandbox/shell/
var knownHoleBombs = []string{
	`awk 'BEGIN{while(1) s=s s "x"}'`,
	`awk 'BEGIN { s = "x"; for (;;) s = s s }'`,
	`awk 'BEGIN { s = "x"; do s = s s; while (1) }'`,
	`awk 'function f(s) { return f(s s) } BEGIN { f("x") }'`,
	`awk 'BEGIN { s = "x"; while (1) gsub(/x/, "xxxxxxxx", s) }'`,
}

func init() {
	memBombs = append(memBombs, knownHoleBombs...)
	for _, b := range knownHoleBombs {
		estimated[b] = true
	}
}
