package shell

import (
	"fmt"
	"strings"
	"unicode"
)

// rg's patterns are Rust regex syntax (regex-syntax 0.6, ripgrep 13).
// It is close to Go's RE2 syntax; rustRE translates what differs and
// refuses what it cannot translate faithfully (the command then goes to
// the sandbox, see rgCheck):
//
//   - \d, \s and \w are Unicode in Rust, ASCII in Go: they become the
//     Unicode classes (\D, \S, \W too, outside a bracket);
//   - escapes: Rust accepts a backslash only before its meta characters
//     and a few letters; "\/" or "\<" is an error there, a literal in Go;
//   - nested classes and set operations ([a[b]], &&, --, ~~), x{,n},
//     (?x), (?u), \u and \U escapes, octal, a literal or escaped newline
//     (rg refuses those without -U): refused.
//
// \b and \B stay Go's: they differ from Rust's next to a non-ASCII
// letter only (docs/rg.md).

const (
	rgWordClass  = `\p{L}\p{Nl}\p{M}\p{Nd}\p{Pc}`
	rgSpaceClass = `\t\n\x0B\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}`
)

// rustMeta are the characters Rust lets a backslash escape.
const rustMeta = `\.+*?()|[]{}^$#&-~`

// rustRE translates a Rust regular expression into Go's syntax, or says
// why it cannot.
func rustRE(re string) (string, error) {
	var b strings.Builder
	inClass := false
	classStart := 0 // b.Len() after the opening [ or [^
	for i := 0; i < len(re); i++ {
		ch := re[i]
		switch {
		case ch == '\n':
			return "", fmt.Errorf("a newline in the pattern")
		case ch == '\\':
			if i+1 >= len(re) {
				return "", fmt.Errorf("a trailing backslash")
			}
			i++
			e := re[i]
			switch {
			case strings.IndexByte(rustMeta, e) >= 0, strings.IndexByte("tfvar", e) >= 0:
				b.WriteByte('\\')
				b.WriteByte(e)
			case e == 'd':
				b.WriteString(`\p{Nd}`)
			case e == 'D' && !inClass:
				b.WriteString(`\P{Nd}`)
			case e == 'w':
				if inClass {
					b.WriteString(rgWordClass)
				} else {
					b.WriteString("[" + rgWordClass + "]")
				}
			case e == 'W' && !inClass:
				b.WriteString("[^" + rgWordClass + "]")
			case e == 's':
				if inClass {
					b.WriteString(rgSpaceClass)
				} else {
					b.WriteString("[" + rgSpaceClass + "]")
				}
			case e == 'S' && !inClass:
				b.WriteString("[^" + rgSpaceClass + "]")
			case (e == 'b' || e == 'B' || e == 'A' || e == 'z') && !inClass:
				b.WriteByte('\\')
				b.WriteByte(e)
			case e == 'p' || e == 'P':
				// \pL or \p{Name}: Go knows the general categories and
				// scripts by their short names; a name it does not know
				// fails to compile, and the check routes that
				b.WriteByte('\\')
				b.WriteByte(e)
				if i+1 < len(re) && re[i+1] == '{' {
					end := strings.IndexByte(re[i:], '}')
					if end < 0 {
						return "", fmt.Errorf("an unclosed \\p{")
					}
					name := re[i+2 : i+end]
					if strings.ContainsAny(name, "=:^ ") {
						return "", fmt.Errorf("a \\p{} with a value")
					}
					b.WriteString(re[i+1 : i+end+1])
					i += end
				} else if i+1 < len(re) {
					i++
					b.WriteByte(re[i])
				}
			case e == 'x':
				b.WriteString(`\x`)
			default:
				return "", fmt.Errorf("the escape \\%c", e)
			}
		case inClass:
			switch {
			case ch == ']' && b.Len() > classStart:
				inClass = false
				b.WriteByte(']')
			case ch == '[' && i+1 < len(re) && re[i+1] == ':':
				end := strings.Index(re[i:], ":]")
				if end < 0 {
					return "", fmt.Errorf("a nested class")
				}
				b.WriteString(re[i : i+end+2])
				i += end + 1
			case ch == '[':
				return "", fmt.Errorf("a nested class")
			case (ch == '&' || ch == '-' || ch == '~') && i+1 < len(re) && re[i+1] == ch:
				return "", fmt.Errorf("a class set operation")
			default:
				b.WriteByte(ch)
			}
		case ch == '[':
			inClass = true
			b.WriteByte('[')
			if i+1 < len(re) && re[i+1] == '^' {
				b.WriteByte('^')
				i++
			}
			classStart = b.Len()
		case ch == '{':
			j := i + 1
			for j < len(re) && isDigit(re[j]) {
				j++
			}
			if j == i+1 {
				return "", fmt.Errorf("a { that is not a repetition")
			}
			if j < len(re) && re[j] == ',' {
				j++
				for j < len(re) && isDigit(re[j]) {
					j++
				}
			}
			if j >= len(re) || re[j] != '}' {
				return "", fmt.Errorf("a { that is not a repetition")
			}
			b.WriteString(re[i : j+1])
			i = j
		case ch == '(' && strings.HasPrefix(re[i:], "(?"):
			j := i + 2
			if j < len(re) && (re[j] == 'P' || re[j] == '<') {
				j = len(re) // a named group
			}
			for j < len(re) && re[j] != ')' && re[j] != ':' {
				if re[j] == 'x' || re[j] == 'u' {
					return "", fmt.Errorf("the flag %c", re[j])
				}
				j++
			}
			b.WriteByte('(')
		default:
			b.WriteByte(ch)
		}
	}
	if inClass {
		return "", fmt.Errorf("an unclosed class")
	}
	return b.String(), nil
}

// hasUpperLiteral reports whether a pattern holds an upper-case letter
// outside escapes (\W, \p{Lu}), as ripgrep's --smart-case asks.
func hasUpperLiteral(p string, fixed bool) bool {
	for i := 0; i < len(p); i++ {
		if p[i] == '\\' && !fixed {
			i++
			if i < len(p) && (p[i] == 'p' || p[i] == 'P') && i+1 < len(p) && p[i+1] == '{' {
				if end := strings.IndexByte(p[i:], '}'); end > 0 {
					i += end
				}
			}
			continue
		}
		r := rune(p[i])
		if r >= 0x80 {
			r, _ = decodeRune(p[i:])
		}
		if unicode.IsUpper(r) {
			return true
		}
	}
	return false
}

func decodeRune(s string) (rune, int) {
	for _, r := range s {
		return r, len(string(r))
	}
	return 0, 0
}
