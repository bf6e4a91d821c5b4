package shell

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// jq16Parser reads JSON texts as jq 1.6's parser (jv_parse.c) does: the
// same texts taken (01, +1, .5 and 1. are numbers; nesting stops at 256
// levels) and refused, with its words and its line and column for the
// first it cannot read. It keeps the order of an object's keys
// (jqOrder.set). It is a loop over the bytes with a stack of its own.
type jq16Parser struct {
	o         *jqOrder
	line, col int
	stack     []any // *jqObj, *[]any, or a key (string) waiting for its value
	next      any
	hasNext   bool
	token     []byte // a literal, or a string's bytes
	inString  bool
	escaped   bool
	vals      []any
	ends      []int64
	lastEnd   int64
}

type jqObj struct {
	m    map[string]any
	keys []string
}

// jqMaxParseDepth is jq 1.6's MAX_PARSING_DEPTH.
const jqMaxParseDepth = 256

// parse16 reads data as jq 1.6 does: the values it reads (ends[i] is the
// offset just past the i-th), and then, if it stops short, its error
// text ("Unfinished JSON term at EOF at line 2, column 0").
func (o *jqOrder) parse16(data []byte) (vals []any, ends []int64, errText string) {
	p := &jq16Parser{o: o, line: 1}
	start := 0
	if strings.HasPrefix(string(data[:min(3, len(data))]), "\xef\xbb\xbf") {
		start = 3
	}
	for i := start; i < len(data); i++ {
		if msg := p.scan(data[i], i); msg != "" {
			return p.vals, p.ends, fmt.Sprintf("%s at line %d, column %d", msg, p.line, p.col)
		}
		if o.fail {
			return p.vals, p.ends, "input too large for the call's memory budget"
		}
	}
	if p.inString {
		return p.vals, p.ends, fmt.Sprintf("Unfinished string at EOF at line %d, column %d", p.line, p.col)
	}
	if msg := p.literal(); msg != "" {
		return p.vals, p.ends, fmt.Sprintf("%s at EOF at line %d, column %d", msg, p.line, p.col)
	}
	if len(p.stack) > 0 {
		return p.vals, p.ends, fmt.Sprintf("Unfinished JSON term at EOF at line %d, column %d", p.line, p.col)
	}
	if p.hasNext {
		p.vals = append(p.vals, p.next)
		p.ends = append(p.ends, p.lastEnd)
	}
	return p.vals, p.ends, ""
}

func (p *jq16Parser) scan(ch byte, at int) string {
	p.col++
	if ch == '\n' {
		p.line++
		p.col = 0
	}
	if p.inString {
		switch {
		case p.escaped:
			p.escaped = false
			p.token = append(p.token, ch)
		case ch == '\\':
			p.escaped = true
			p.token = append(p.token, ch)
		case ch == '"':
			p.inString = false
			s, msg := jq16String(p.token)
			p.token = p.token[:0]
			if msg != "" {
				return msg
			}
			if msg := p.value(s, int64(at+1)); msg != "" {
				return msg
			}
			p.done()
		default:
			p.token = append(p.token, ch)
		}
		return ""
	}
	switch ch {
	case ' ', '\t', '\r', '\n', '"', '[', ',', ']', '{', ':', '}':
	default:
		p.token = append(p.token, ch)
		p.lastEnd = int64(at + 1)
		return ""
	}
	if msg := p.literal(); msg != "" {
		return msg
	}
	emitted := len(p.vals)
	p.done()
	var msg string
	switch ch {
	case '"':
		p.inString = true
	case '[', '{':
		if p.hasNext {
			msg = "Expected separator between values"
		} else if len(p.stack) >= jqMaxParseDepth {
			msg = "Exceeds depth limit for parsing"
		} else if ch == '[' {
			p.stack = append(p.stack, &[]any{})
		} else {
			p.stack = append(p.stack, &jqObj{m: map[string]any{}})
		}
	case ':':
		msg = p.colon()
	case ',':
		msg = p.comma()
	case ']':
		msg = p.closeArray(at)
	case '}':
		msg = p.closeObject(at)
	}
	if msg != "" {
		// a value completed by this character is lost with it
		p.vals, p.ends = p.vals[:emitted], p.ends[:emitted]
		return msg
	}
	p.done()
	return ""
}

func (p *jq16Parser) top() any {
	if len(p.stack) == 0 {
		return nil
	}
	return p.stack[len(p.stack)-1]
}

func (p *jq16Parser) colon() string {
	if !p.hasNext {
		return "Expected string key before ':'"
	}
	if _, ok := p.top().(*jqObj); !ok {
		return "':' not as part of an object"
	}
	k, ok := p.next.(string)
	if !ok {
		return "Object keys must be strings"
	}
	if len(p.stack) >= jqMaxParseDepth {
		return "Exceeds depth limit for parsing"
	}
	p.stack = append(p.stack, k)
	p.next, p.hasNext = nil, false
	return ""
}

func (p *jq16Parser) comma() string {
	if !p.hasNext {
		return "Expected value before ','"
	}
	switch t := p.top().(type) {
	case nil:
		return "',' not as part of an object or array"
	case *[]any:
		*t = append(*t, p.next)
	case string:
		p.stack = p.stack[:len(p.stack)-1]
		p.setKey(p.top().(*jqObj), t, p.next)
	default:
		return "Objects must consist of key:value pairs"
	}
	p.next, p.hasNext = nil, false
	return ""
}

func (p *jq16Parser) setKey(obj *jqObj, k string, v any) {
	if _, dup := obj.m[k]; !dup {
		obj.keys = append(obj.keys, k)
	}
	obj.m[k] = v
}

func (p *jq16Parser) closeArray(at int) string {
	a, ok := p.top().(*[]any)
	if !ok {
		return "Unmatched ']'"
	}
	if p.hasNext {
		*a = append(*a, p.next)
	} else if len(*a) != 0 {
		return "Expected another array element"
	}
	p.stack = p.stack[:len(p.stack)-1]
	p.next, p.hasNext = *a, true
	p.lastEnd = int64(at + 1)
	return ""
}

func (p *jq16Parser) closeObject(at int) string {
	if len(p.stack) == 0 {
		return "Unmatched '}'"
	}
	if p.hasNext {
		k, ok := p.top().(string)
		if !ok {
			return "Objects must consist of key:value pairs"
		}
		p.stack = p.stack[:len(p.stack)-1]
		p.setKey(p.top().(*jqObj), k, p.next)
	} else {
		obj, ok := p.top().(*jqObj)
		if !ok {
			return "Unmatched '}'"
		}
		if len(obj.keys) != 0 {
			return "Expected another key-value pair"
		}
	}
	obj := p.top().(*jqObj)
	p.stack = p.stack[:len(p.stack)-1]
	if !p.o.set(obj.m, obj.keys) {
		return "input too large for the call's memory budget"
	}
	p.next, p.hasNext = obj.m, true
	p.lastEnd = int64(at + 1)
	return ""
}

// value makes v the value read, unless one is already there.
func (p *jq16Parser) value(v any, end int64) string {
	if p.hasNext {
		return "Expected separator between values"
	}
	p.next, p.hasNext = v, true
	p.lastEnd = end
	return ""
}

// done hands on a value read at the top level.
func (p *jq16Parser) done() {
	if len(p.stack) == 0 && p.hasNext {
		p.vals = append(p.vals, p.next)
		p.ends = append(p.ends, p.lastEnd)
		p.next, p.hasNext = nil, false
	}
}

// literal reads the literal gathered (true, false, null or a number).
func (p *jq16Parser) literal() string {
	if len(p.token) == 0 {
		return ""
	}
	tok := string(p.token)
	p.token = p.token[:0]
	var v any
	switch tok[0] {
	case 't', 'f', 'n':
		lits := map[byte]string{'t': "true", 'f': "false", 'n': "null"}
		if tok != lits[tok[0]] {
			return "Invalid literal"
		}
		v = map[string]any{"true": true, "false": false, "null": nil}[tok]
	default:
		if !jqNumberText(tok) {
			return "Invalid numeric literal"
		}
		v = jqNumber(strings.TrimPrefix(tok, "+"))
	}
	return p.value(v, p.lastEnd)
}

// jqNumberText is whether strtod takes all of s as a decimal number:
// [+-] digits [. digits] [e [+-] digits], with digits before or after
// the point.
func jqNumberText(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			digits++
		}
	}
	if digits == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		exp := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			exp++
		}
		if exp == 0 {
			return false
		}
	}
	return i == len(s)
}

// jq16String decodes a string's bytes (between its quotes) as 1.6 does.
func jq16String(b []byte) (string, string) {
	var out strings.Builder
	for i := 0; i < len(b); {
		c := b[i]
		i++
		if c == '\\' {
			if i >= len(b) {
				return "", "Expected escape character at end of string"
			}
			c = b[i]
			i++
			switch c {
			case '\\', '"', '/':
				out.WriteByte(c)
			case 'b':
				out.WriteByte('\b')
			case 'f':
				out.WriteByte('\f')
			case 'n':
				out.WriteByte('\n')
			case 'r':
				out.WriteByte('\r')
			case 't':
				out.WriteByte('\t')
			case 'u':
				if i+4 > len(b) {
					return "", "Invalid \\uXXXX escape"
				}
				cp, err := strconv.ParseUint(string(b[i:i+4]), 16, 32)
				if err != nil || strings.ContainsAny(string(b[i:i+4]), "+-") {
					return "", "Invalid characters in \\uXXXX escape"
				}
				i += 4
				if cp >= 0xd800 && cp <= 0xdbff {
					if i+6 > len(b) || b[i] != '\\' || b[i+1] != 'u' {
						return "", "Invalid \\uXXXX\\uXXXX surrogate pair escape"
					}
					lo, err := strconv.ParseUint(string(b[i+2:i+6]), 16, 32)
					if err != nil || lo < 0xdc00 || lo > 0xdfff {
						return "", "Invalid \\uXXXX\\uXXXX surrogate pair escape"
					}
					i += 6
					cp = 0x10000 + ((cp-0xd800)<<10 | (lo - 0xdc00))
				}
				out.WriteRune(rune(cp))
			default:
				return "", "Invalid escape"
			}
			continue
		}
		if c > 0 && c < 0x1f {
			return "", "Invalid string: control characters from U+0000 through U+001F must be escaped"
		}
		out.WriteByte(c)
	}
	s := out.String()
	if !utf8.ValidString(s) {
		var fixed strings.Builder
		for _, r := range s {
			fixed.WriteRune(r) // each invalid byte as U+FFFD
		}
		s = fixed.String()
	}
	return s, ""
}
