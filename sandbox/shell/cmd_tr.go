package shell

import (
	"strings"
	"unicode"
)

func init() {
	register(&command{names: []string{"tr"}, run: cmdTr, opts: opts("dscC", "delete", "squeeze-repeats", "complement")})
}

// trSet expands a tr set: ranges, escapes, classes.
func trSet(s string) []rune {
	var out []rune
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		if r == '[' && i+1 < len(rs) && rs[i+1] == ':' {
			if j := strings.Index(string(rs[i:]), ":]"); j > 0 {
				class := string(rs[i+2 : i+j])
				i += j + 1
				for ch := rune(0); ch < 128; ch++ {
					if inClass(class, ch) {
						out = append(out, ch)
					}
				}
				continue
			}
		}
		if r == '\\' && i+1 < len(rs) {
			i++
			switch rs[i] {
			case 'n':
				r = '\n'
			case 't':
				r = '\t'
			case 'r':
				r = '\r'
			case '\\':
				r = '\\'
			case '0':
				r = 0
			default:
				r = rs[i]
			}
		}
		if i+2 < len(rs) && rs[i+1] == '-' {
			end := rs[i+2]
			i += 2
			if end == '\\' && i+1 < len(rs) {
				i++
				end = rs[i]
			}
			for ch := r; ch <= end; ch++ {
				out = append(out, ch)
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

func inClass(class string, ch rune) bool {
	switch class {
	case "alpha":
		return unicode.IsLetter(ch)
	case "digit":
		return ch >= '0' && ch <= '9'
	case "alnum":
		return unicode.IsLetter(ch) || ch >= '0' && ch <= '9'
	case "upper":
		return ch >= 'A' && ch <= 'Z'
	case "lower":
		return ch >= 'a' && ch <= 'z'
	case "space":
		return ch == ' ' || ch >= '\t' && ch <= '\r'
	case "blank":
		return ch == ' ' || ch == '\t'
	case "punct":
		return ch > ' ' && ch < 127 && !unicode.IsLetter(ch) && !unicode.IsDigit(ch)
	case "print":
		return ch >= ' ' && ch < 127
	case "graph":
		return ch > ' ' && ch < 127
	case "cntrl":
		return ch < ' ' || ch == 127
	case "xdigit":
		return isHex(byte(ch))
	}
	return false
}

func cmdTr(c *cmd) int {
	opts, sets, ok := c.flags()
	if !ok {
		return 1
	}
	del, squeeze, comp := false, false, false
	for _, o := range opts {
		switch o.name {
		case "d", "delete":
			del = true
		case "s", "squeeze-repeats":
			squeeze = true
		case "c", "C", "complement":
			comp = true
		}
	}
	if len(sets) == 0 || !del && !squeeze && len(sets) < 2 {
		c.errorf("missing operand")
		return 1
	}
	s1 := trSet(sets[0])
	in1 := map[rune]bool{}
	for _, r := range s1 {
		in1[r] = true
	}
	member := func(r rune) bool { return in1[r] != comp }
	var s2 []rune
	if len(sets) > 1 {
		s2 = trSet(sets[1])
	}
	mapping := map[rune]rune{}
	if !del && len(s2) > 0 && !comp {
		for i, r := range s1 {
			j := min(i, len(s2)-1)
			mapping[r] = s2[j]
		}
	}
	sqSet := map[rune]bool{}
	if squeeze {
		src := s1
		if len(sets) > 1 && !del || del && len(sets) > 1 {
			src = s2
		}
		for _, r := range src {
			sqSet[r] = true
		}
	}
	data, err := c.readAll(c.stdin)
	if err != nil {
		return 1
	}
	var b strings.Builder
	last := rune(-1)
	for _, r := range string(data) {
		if del && member(r) {
			continue
		}
		if !del {
			if comp && member(r) && len(s2) > 0 {
				r = s2[len(s2)-1]
			} else if m, ok := mapping[r]; ok {
				r = m
			}
		}
		if squeeze && r == last && (sqSet[r] || len(sets) == 1 && !del && member(r)) {
			continue
		}
		b.WriteRune(r)
		last = r
	}
	c.out.WriteString(b.String())
	return 0
}
