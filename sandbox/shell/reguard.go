package shell

import (
	"errors"
	"fmt"
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

// Bounds on one match of the fast path's own commands (grep, sed, git
// grep). Go's regexp cannot be stopped inside a match either, and where
// it finds no literal prefix to skip by, a match costs up to the
// expression's length times the input's in the worst case (a 20 KB
// literal under -i on a 20 KB line of the same letter: two seconds).
// Inputs of ordinary expressions are not limited: an expression of
// matchCheckFrom bytes or more may not meet an input that makes that
// product pass maxMatchWork (about a second at worst); such a call is
// stopped for a pattern limit, as the interpreter's patterns are.
const (
	matchCheckFrom = 1 << 10
	maxMatchWork   = 1 << 28
)

// matchOver reports whether a match of an expression of re bytes on a
// subject of sub bytes may cost more than the fast path gives one match
// (sizes of 1<<62 and up are the guards' "unknown").
func matchOver(re, sub int64) bool {
	return re >= matchCheckFrom && re < 1<<62 && sub < 1<<62 && re*sub > maxMatchWork
}

// matchCost says what is over the bound of one match of a pattern of re
// bytes on a subject of sub bytes, or "" (the pattern guard's message).
func matchCost(re, sub int64) string {
	if matchOver(re, sub) {
		return fmt.Sprintf("a regular expression of %s on a string of %s", sizeText(re), sizeText(sub))
	}
	return ""
}

// matchBound is nil if a match of an expression of n bytes on an input of
// m bytes is bounded (literal: the expression is a plain string, known
// only if it is asked), else the error that ends awk's program.
func matchBound(n, m int, literal func() bool) error {
	if !matchOver(int64(n), int64(m)) || literal() {
		return nil
	}
	return fmt.Errorf("a regular expression of %d bytes on a string of %d bytes: more than the shell fast path matches in one step; run it in the sandbox", n, m)
}

// matchTooCostly reports whether matching re on an input of n bytes may
// cost more than the fast path gives one match, and if so stops the call.
func (c *cmd) matchTooCostly(re *regexp.Regexp, n int) bool {
	if re == nil || n == 0 {
		return false
	}
	l := len(re.String())
	if !matchOver(int64(l), int64(n)) {
		return false
	}
	if _, complete := re.LiteralPrefix(); complete {
		return false // a plain string search
	}
	c.r.stopPattern(fmt.Sprintf("a regular expression of %s on a line of %s", sizeText(int64(l)), sizeText(int64(n))))
	return true
}
