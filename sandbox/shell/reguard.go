package shell

import (
	"errors"
	"regexp"
)

// Go's regexp compiles without a look at the call's end, in time and
// memory that grow with the expression: a literal of 1 MiB takes a second
// and over 200 MiB with (?i), 5 MB ten seconds and past the memory
// budget, and awk's parse of such a program took 47 s through a timeout
// of 20. So the fast path's commands compile no expression longer than
// maxRegex (about half a second and 60 MiB at most); a longer one is an
// error of the command ("regular expression too big", as GNU grep says
// of one its matcher cannot hold), exit 2. The interpreter's own patterns
// are bounded by the pattern guard (patguard.go).
//
// The match is not stopped either, and where regexp cannot use a literal
// prefix it costs up to the expression's length times the input's: a
// 20 KB expression on a 20 KB line takes two seconds. That is not bounded
// yet (docs/security.md, "Still open").
const maxRegex = 256 << 10

var errRegexTooBig = errors.New("regular expression too big")

// compileGo compiles a Go regular expression of at most maxRegex bytes.
func compileGo(expr string) (*regexp.Regexp, error) {
	if len(expr) > maxRegex {
		return nil, errRegexTooBig
	}
	return regexp.Compile(expr)
}
