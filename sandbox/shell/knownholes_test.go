//go:build redteam

package shell

// knownHoleBombs are memory bombs the fast path does not yet contain: a
// single shell expansion that makes gigabytes. (The awk programs that
// were here are contained now: awkBombs in membomb_test.go.) Run them
// with: go test -tags 'seccomp redteam' -run TestKnownHoleBombs ./sandbox/shell/
var knownHoleBombs = []string{
	`x=aaaaaaaaaa; x=$x$x$x$x$x$x$x$x$x$x; x=$x$x$x$x$x$x$x$x$x$x; x=$x$x$x$x$x$x$x$x$x$x; x=$x$x$x$x$x$x$x$x$x$x; x=$x$x$x$x$x$x$x$x$x$x; x=$x$x$x$x$x$x$x$x$x$x; x=$x$x$x$x$x$x$x$x$x$x; x=$x$x$x$x$x$x$x$x$x$x; x=$x$x$x$x$x$x$x$x$x$x`,
	`x=$(yes | head -c 50000000); y=${x//y/yyyyyyyyyyyyyyyyyyyyyyyy}`,
}

func init() {
	memBombs = append(memBombs, knownHoleBombs...)
	for _, b := range knownHoleBombs {
		estimated[b] = true
	}
}
