// Package textsafe renders text that an agent controls (file names, process
// names, error messages that quote them) for a terminal or a log read by
// people. Such text may hold terminal escapes (which a terminal obeys:
// retitle the window, rewrite the screen, in some terminals even answer
// with input), newlines (which forge a line of output that looks like the
// program's own), bidirectional overrides (which show a name in an order
// other than its bytes') and bytes that are not UTF-8.
//
// Name is for a field that is a name: it is printed as it is when every
// rune in it is plainly visible, and Go-quoted otherwise, so that the
// quoted form is unambiguous and can be turned back into the bytes.
// Text is for free text: it keeps what is visible and writes the rest as
// escapes, without quotes around the whole.
package textsafe

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// plain reports whether r prints as itself, taking no control of the
// terminal and moving no other text: a graphic rune (letters, marks,
// numbers, punctuation, symbols, the plain space) that is not a format
// character.
func plain(r rune) bool {
	return r != utf8.RuneError && unicode.IsGraphic(r) && !unicode.Is(unicode.Cf, r) &&
		(r == ' ' || !unicode.IsSpace(r))
}

// safe reports whether s needs no escape: valid UTF-8 of plain runes only.
// (The loop meets an invalid byte as utf8.RuneError of width 1; a real
// U+FFFD in s is escaped too, which costs nothing and keeps it simple.)
func safe(s string) bool {
	for i := 0; i < len(s); {
		if c := s[i]; c >= 0x20 && c < 0x7f {
			i++
			continue
		}
		r, w := utf8.DecodeRuneInString(s[i:])
		if !plain(r) {
			return false
		}
		i += w
	}
	return true
}

// Name returns s as it is if it is plain, else Go-quoted. A name that
// starts with a double quote is quoted too, so that no plain name reads
// as a quoted one.
func Name(s string) string {
	if safe(s) && !strings.HasPrefix(s, `"`) {
		return s
	}
	return strconv.Quote(s)
}

// Text returns s with every rune that is not plain (control characters,
// newlines and tabs among them) and every byte that is not UTF-8 written
// as a Go escape (\n, \x1b, \u202e); the rest stays as it is.
func Text(s string) string {
	if safe(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && w == 1:
			b.WriteString(`\x` + strconv.FormatUint(uint64(s[i])|0x100, 16)[1:])
		case plain(r):
			b.WriteString(s[i : i+w])
		default:
			q := strconv.QuoteRuneToASCII(r) // '\n', '\x1b', '\u202e'
			b.WriteString(q[1 : len(q)-1])
		}
		i += w
	}
	return b.String()
}
