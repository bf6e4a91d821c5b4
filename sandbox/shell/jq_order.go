package shell

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/big"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/itchyny/gojq"
	"unsafe"
)

// jq 1.6 keeps the keys of an object in the order they were put in; gojq
// keeps objects as Go maps and walks them sorted. jqOrder remembers the
// key order of every object the call decoded or built (by the map's
// address; it holds the map so that the address is not reused), and
// jqEncode, .[], keys_unsorted, to_entries and tojson follow it. An
// object it does not know (one gojq made, e.g. by an update the can-run
// check routes) is walked sorted.
type jqOrder struct {
	c    *cmd
	maps map[unsafe.Pointer]jqKeys
	fail bool // the budget ran out registering an object
}

type jqKeys struct {
	m    map[string]any
	keys []string
}

func mapAddr(m map[string]any) unsafe.Pointer { return reflect.ValueOf(m).UnsafePointer() }

// set records the key order of m, charged to the call's budget (the map
// stays alive as long as the call).
func (o *jqOrder) set(m map[string]any, keys []string) bool {
	if len(m) < 2 {
		return true
	}
	if !o.c.grow(int64(64 + 48*len(keys))) {
		o.fail = true
		return false
	}
	if o.maps == nil {
		o.maps = map[unsafe.Pointer]jqKeys{}
	}
	o.maps[mapAddr(m)] = jqKeys{m, keys}
	return true
}

// keys returns m's keys in jq's order (sorted when it is not known, or
// when sorted is asked for).
func (o *jqOrder) keys(m map[string]any, sorted bool) []string {
	if !sorted && o != nil {
		if k, ok := o.maps[mapAddr(m)]; ok && len(k.keys) == len(m) {
			good := true
			for _, s := range k.keys {
				if _, ok := m[s]; !ok {
					good = false
					break
				}
			}
			if good {
				return k.keys
			}
		}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// decodeAll decodes a stream of JSON texts, keeping key order; ends[i]
// is the offset just past the i-th value.
func (o *jqOrder) decodeAll(data []byte) (vals []any, ends []int64, err error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	for {
		v, err := o.decode(dec, 0)
		if err == io.EOF {
			return vals, ends, nil
		}
		if err != nil {
			return vals, ends, err
		}
		vals = append(vals, v)
		ends = append(ends, dec.InputOffset())
	}
}

func (o *jqOrder) decode(dec *json.Decoder, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if depth > 10000 {
		return nil, fmt.Errorf("Exceeds depth limit for parsing")
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			m := map[string]any{}
			var keys []string
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("object key is not a string")
				}
				v, err := o.decode(dec, depth+1)
				if err != nil {
					return nil, unexpectedEOF(err)
				}
				if _, dup := m[k]; !dup {
					keys = append(keys, k)
				}
				m[k] = v
			}
			if _, err := dec.Token(); err != nil {
				return nil, unexpectedEOF(err)
			}
			if !o.set(m, keys) {
				return nil, fmt.Errorf("input too large for the call's memory budget")
			}
			return m, nil
		case '[':
			a := []any{}
			for dec.More() {
				v, err := o.decode(dec, depth+1)
				if err != nil {
					return nil, unexpectedEOF(err)
				}
				a = append(a, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, unexpectedEOF(err)
			}
			return a, nil
		}
		return nil, fmt.Errorf("unexpected %v", t)
	case json.Number:
		return jqNumber(string(t)), nil
	default:
		return t, nil
	}
}

func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// jqNumber is a JSON number as jq 1.6 holds it: a double (an int when
// the double is one gojq can keep exact; -0 stays a double).
func jqNumber(s string) any {
	if i, err := strconv.ParseInt(s, 10, 64); err == nil && i >= -1<<53 && i <= 1<<53 && !(i == 0 && strings.HasPrefix(s, "-")) {
		return int(i)
	}
	f, _ := strconv.ParseFloat(s, 64)
	return f
}

// jqFormatNumber prints a number as jq 1.6 does: the shortest digits
// that read back as the double, %g-like exponents (1e+17, 1e-05) past
// 10^-5 and 10^(digits+15), infinities as the largest doubles.
func jqFormatNumber(f float64) string {
	switch {
	case math.IsNaN(f):
		return "null"
	case math.IsInf(f, 1):
		f = math.MaxFloat64
	case math.IsInf(f, -1):
		f = -math.MaxFloat64
	case f == 0:
		if math.Signbit(f) {
			return "-0"
		}
		return "0"
	}
	s := strconv.FormatFloat(f, 'e', -1, 64)
	sign := ""
	if s[0] == '-' {
		sign, s = "-", s[1:]
	}
	mant, e, _ := strings.Cut(s, "e")
	exp, _ := strconv.Atoi(e)
	digits := strings.Replace(mant, ".", "", 1)
	decpt := exp + 1
	switch {
	case decpt <= -4 || decpt > len(digits)+15:
		m := digits[:1]
		if len(digits) > 1 {
			m += "." + digits[1:]
		}
		es := "+"
		if exp < 0 {
			es, exp = "-", -exp
		}
		return fmt.Sprintf("%s%se%s%02d", sign, m, es, exp)
	case decpt <= 0:
		return sign + "0." + strings.Repeat("0", -decpt) + digits
	case decpt >= len(digits):
		return sign + digits + strings.Repeat("0", decpt-len(digits))
	default:
		return sign + digits[:decpt] + "." + digits[decpt:]
	}
}

// jqString quotes a string as jq 1.6 does: \b \f \n \r \t, \u00XX for
// the other control characters and DEL, the rest as it is (\uXXXX, with
// surrogate pairs, for non-ASCII under -a).
func jqString(b *strings.Builder, s string, ascii bool) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			b.WriteString(`\u00`)
			b.WriteByte(hex[r>>4])
			b.WriteByte(hex[r&15])
		case r < utf8.RuneSelf || !ascii:
			b.WriteRune(r)
		default:
			u := func(c rune) {
				b.WriteString(`\u`)
				for sh := 12; sh >= 0; sh -= 4 {
					b.WriteByte(hex[(c>>sh)&15])
				}
			}
			if r > 0xffff {
				r -= 0x10000
				u(0xd800 + (r >> 10))
				u(0xdc00 + (r & 0x3ff))
			} else {
				u(r)
			}
		}
	}
	b.WriteByte('"')
}

// jqPrinter prints values as jq 1.6 does under its options.
type jqPrinter struct {
	order         *jqOrder
	compact       bool
	indent        int
	tab, ascii, S bool
	// max, if set, is where encode may stop (a preview's few bytes).
	max int
	// err is why the last encode stopped short: the call's end, or its
	// memory budget (a value that shares its parts, reduce range(50) as
	// $i (0; [., .]), prints as 2^50 leaves).
	err  error
	mark int // b.Len() at the last check
}

// jqCheckEvery is how many bytes the printer writes between two looks
// at the call's end and budget.
const jqCheckEvery = 64 << 10

func (p *jqPrinter) encode(v any) string {
	var b strings.Builder
	p.err, p.mark = nil, 0
	p.enc(&b, v, 0)
	return b.String()
}

// check says why the printer must stop after n bytes: the call ended,
// or n bytes do not fit its memory budget.
func (o *jqOrder) check(n int) error {
	if o == nil || o.c == nil {
		return nil
	}
	if o.c.canceled() {
		return context.Cause(o.c.ctx)
	}
	if o.c.r.mem.over(int64(n)) {
		o.c.r.mem.exceed(o.c.name)
		return fmt.Errorf("output of %d bytes too large for the call's memory budget", n)
	}
	return nil
}

func (p *jqPrinter) nl(b *strings.Builder, depth int) {
	if p.compact || p.indent == 0 && !p.tab {
		return
	}
	b.WriteByte('\n')
	if p.tab {
		b.WriteString(strings.Repeat("\t", depth))
	} else {
		b.WriteString(strings.Repeat(" ", depth*p.indent))
	}
}

func (p *jqPrinter) pretty() bool { return !p.compact && (p.indent > 0 || p.tab) }

// jqMaxPrintDepth is jq 1.6's MAX_PRINT_DEPTH: a value nested deeper
// prints as jqStripped. It also bounds the encoder's recursion (a value
// nested a million times deep, 40 MB of arrays, took 512 MiB of stack).
const jqMaxPrintDepth = 256

const jqStripped = "<stripped: exceeds max depth>"

func (p *jqPrinter) enc(b *strings.Builder, v any, depth int) {
	if p.err != nil || p.max > 0 && b.Len() >= p.max {
		return
	}
	if b.Len()-p.mark >= jqCheckEvery {
		p.mark = b.Len()
		if p.err = p.order.check(b.Len()); p.err != nil {
			return
		}
	}
	if depth > jqMaxPrintDepth {
		b.WriteString(jqStripped)
		return
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case int:
		b.WriteString(jqFormatNumber(float64(x)))
	case float64:
		b.WriteString(jqFormatNumber(x))
	case *big.Int:
		f, _ := new(big.Float).SetInt(x).Float64()
		b.WriteString(jqFormatNumber(f))
	case json.Number:
		p.enc(b, jqNumber(string(x)), depth)
	case string:
		jqString(b, x, p.ascii)
	case []any:
		if len(x) == 0 {
			b.WriteString("[]")
			return
		}
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			p.nl(b, depth+1)
			p.enc(b, e, depth+1)
		}
		p.nl(b, depth)
		b.WriteByte(']')
	case map[string]any:
		if len(x) == 0 {
			b.WriteString("{}")
			return
		}
		b.WriteByte('{')
		for i, k := range p.order.keys(x, p.S) {
			if i > 0 {
				b.WriteByte(',')
			}
			p.nl(b, depth+1)
			jqString(b, k, p.ascii)
			b.WriteByte(':')
			if p.pretty() {
				b.WriteByte(' ')
			}
			p.enc(b, x[k], depth+1)
		}
		p.nl(b, depth)
		b.WriteByte('}')
	default:
		fmt.Fprint(b, x)
	}
}

// jqTypeName is jq's name of a value's type.
func jqTypeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case int, float64, *big.Int, json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "unknown"
}

// jqPreview is how jq 1.6 shows a value in an error: its type and its
// compact text cut to 11 bytes and "...".
func (o *jqOrder) preview(v any) string {
	p := jqPrinter{order: o, compact: true, max: 15}
	s := p.encode(v)
	if len(s) > 14 {
		s = s[:11] + "..."
	}
	return jqTypeName(v) + " (" + s + ")"
}

// jqOrderTerm rewrites one term of the filter so that objects keep their
// order: .[] (and ..) walk an object's values through jqValsFunc, an
// object built with more than one key registers its order through
// jqObjFunc.
func jqOrderTerm(t *gojq.Term, seen map[*gojq.Term]bool) {
	if seen[t] {
		return
	}
	seen[t] = true
	jqOrderTermFrom(t, 0, seen)
}

func jqOrderTermFrom(t *gojq.Term, from int, seen map[*gojq.Term]bool) {
	if t.Type == gojq.TermTypeRecurse {
		t.Type = gojq.TermTypeFunc
		t.Func = &gojq.Func{Name: "recurse"}
	}
	for i, s := range t.SuffixList {
		if i < from || !s.Iter {
			continue
		}
		head := *t
		head.SuffixList = t.SuffixList[:i:i]
		rest := append([]*gojq.Suffix{{Iter: true, Optional: s.Optional}}, t.SuffixList[i+1:]...)
		jqOrderTerm(&head, seen)
		name := jqValsFunc
		if i+1 < len(t.SuffixList) && t.SuffixList[i+1].Optional {
			name = jqValsOptFunc // .[]?
		}
		vals := &gojq.Query{Left: &gojq.Query{Term: &head}, Op: gojq.OpPipe, Right: &gojq.Query{Term: &gojq.Term{Type: gojq.TermTypeFunc, Func: &gojq.Func{Name: name}}}}
		*t = gojq.Term{Type: gojq.TermTypeQuery, Query: vals, SuffixList: rest}
		jqOrderTermFrom(t, 1, seen)
		return
	}
	if t.Type == gojq.TermTypeObject && len(t.Object.KeyVals) > 1 && len(t.SuffixList) == 0 {
		var keys []string
		for _, kv := range t.Object.KeyVals {
			switch {
			case kv.KeyString != nil && kv.KeyString.Queries == nil:
				keys = append(keys, kv.KeyString.Str)
			case kv.KeyQuery == nil && kv.KeyString == nil:
				keys = append(keys, strings.TrimPrefix(kv.Key, "$"))
			default:
				return // the can-run check routes these
			}
		}
		var list []*gojq.Query
		for _, k := range keys {
			list = append(list, &gojq.Query{Term: &gojq.Term{Type: gojq.TermTypeString, Str: &gojq.String{Str: k}}})
		}
		var arr *gojq.Query
		for _, e := range list {
			if arr == nil {
				arr = e
			} else {
				arr = &gojq.Query{Left: arr, Op: gojq.OpComma, Right: e}
			}
		}
		obj := *t
		seen[&obj] = true
		*t = gojq.Term{Type: gojq.TermTypeQuery, Query: &gojq.Query{Left: &gojq.Query{Term: &obj}, Op: gojq.OpPipe,
			Right: &gojq.Query{Term: &gojq.Term{Type: gojq.TermTypeFunc, Func: &gojq.Func{Name: jqObjFunc, Args: []*gojq.Query{{Term: &gojq.Term{Type: gojq.TermTypeArray, Array: &gojq.Array{Query: arr}}}}}}}}}
		// the object's own values are walked by the caller's walk of t.Query
	}
}

// jqErr is an error with jq 1.6's own words.
type jqErr string

func (e jqErr) Error() string { return string(e) }

func isJqErr(err error) bool { _, ok := err.(jqErr); return ok }

// jqErrText is an error's message as jq 1.6 words the common ones.
func jqErrText(err error) string {
	s := err.Error()
	for _, r := range jqErrWords {
		if m := r.re.FindStringSubmatch(s); m != nil {
			return r.re.ReplaceAllString(s, r.to)
		}
	}
	return s
}

var jqErrWords = []struct {
	re *regexp.Regexp
	to string
}{
	{regexp.MustCompile(`^cannot iterate over: null$`), "Cannot iterate over null (null)"},
	{regexp.MustCompile(`^cannot iterate over: (.*)$`), "Cannot iterate over $1"},
	{regexp.MustCompile(`^length cannot be applied to: (.*)$`), "$1 has no length"},
	{regexp.MustCompile(`^keys cannot be applied to: (.*)$`), "$1 has no keys"},
}

type jqRawJSON string

// adopt decodes an --argjson value with its keys' order.
func (o *jqOrder) adopt(v any) any {
	if s, ok := v.(jqRawJSON); ok {
		vals, _, _ := o.decodeAll([]byte(s))
		if len(vals) > 0 {
			return vals[0]
		}
		return nil
	}
	return v
}

func (o *jqOrder) compactOf(v any) string {
	p := jqPrinter{order: o, compact: true}
	return p.encode(v)
}

// values is an object's values in its order, for .[] to iterate (an
// array as it is); strict, anything else is jq 1.6's error, else it is
// passed on for .[]? to skip.
func (o *jqOrder) values(v any, strict bool) any {
	m, ok := v.(map[string]any)
	if !ok {
		if _, ok := v.([]any); strict && !ok {
			return jqErr("Cannot iterate over " + o.preview(v))
		}
		return v
	}
	keys := o.keys(m, false)
	out := make([]any, len(keys))
	for i, k := range keys {
		out[i] = m[k]
	}
	return out
}

func (o *jqOrder) keysOf(v any, sorted bool) any {
	switch x := v.(type) {
	case map[string]any:
		keys := o.keys(x, sorted)
		out := make([]any, len(keys))
		for i, k := range keys {
			out[i] = k
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = i
		}
		return out
	}
	return jqErr(o.preview(v) + " has no keys")
}

// object registers the order of an object the filter built.
func (o *jqOrder) object(v any, keys any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	var order []string
	seen := map[string]bool{}
	for _, k := range keys.([]any) {
		if s := k.(string); !seen[s] {
			if _, ok := m[s]; ok {
				order = append(order, s)
				seen[s] = true
			}
		}
	}
	if len(order) != len(m) {
		return v
	}
	if !o.set(m, order) {
		return jqErr("objects too large for the call's memory budget")
	}
	return m
}

// merge is a + b (deep, a * b) of two objects, in jq's order: a's keys,
// then b's new ones.
func (o *jqOrder) merge(a, b map[string]any, deep bool) any {
	out := make(map[string]any, len(a)+len(b))
	keys := append([]string(nil), o.keys(a, false)...)
	for _, k := range keys {
		out[k] = a[k]
	}
	for _, k := range o.keys(b, false) {
		old, had := out[k]
		if !had {
			keys = append(keys, k)
		}
		if x, ok := old.(map[string]any); ok && deep {
			if y, ok := b[k].(map[string]any); ok {
				m := o.merge(x, y, true)
				if err, ok := m.(error); ok {
					return err
				}
				out[k] = m
				continue
			}
		}
		out[k] = b[k]
	}
	if !o.set(out, keys) {
		return jqErr("objects too large for the call's memory budget")
	}
	return out
}

// binop is a op b as gojq computes it, with jq 1.6's words when the
// types do not go together.
func (o *jqOrder) binop(code *gojq.Code, verb string, a, b any) any {
	ta, tb := jqTypeName(a), jqTypeName(b)
	okTypes := false
	switch verb {
	case "added":
		okTypes = a == nil || b == nil || ta == tb && ta != "boolean"
	case "subtracted":
		okTypes = ta == tb && (ta == "number" || ta == "array")
	case "multiplied":
		okTypes = ta == "number" && tb == "number" || ta == "string" && tb == "number" || ta == "number" && tb == "string"
	case "divided":
		okTypes = ta == "number" && tb == "number" || ta == "string" && tb == "string" && code == jqDiv
		if okTypes && ta == "number" {
			f, _ := toFloat(b)
			if code == jqMod {
				f = float64(int64(f))
			}
			if f == 0 {
				return jqErr(o.preview(a) + " and " + o.preview(b) + " cannot be divided because the divisor is zero")
			}
		}
	}
	if !okTypes {
		return jqErr(o.preview(a) + " and " + o.preview(b) + " cannot be " + verb)
	}
	v, _ := code.Run(nil, a, b).Next()
	if z, ok := toFloat(v); ok && z == 0 && ta == "number" && tb == "number" {
		// a zero as jq 1.6's doubles sign it (gojq's ints have no -0)
		sa, sb := jqSignbit(a), jqSignbit(b)
		neg := false
		switch {
		case code == jqMul || code == jqDiv:
			neg = sa != sb
		case code == jqMod:
			neg = sa
		case code == jqAdd:
			neg = sa && sb
		case code == jqSub:
			neg = sa && !sb
		}
		if neg {
			return math.Copysign(0, -1)
		}
		return 0
	}
	return v
}

// jqSignbit is whether a number is negative or -0.
func jqSignbit(v any) bool {
	switch x := v.(type) {
	case int:
		return x < 0
	case float64:
		return math.Signbit(x)
	case *big.Int:
		return x.Sign() < 0
	}
	return false
}

// neg is -x as jq 1.6 computes it (-0 for 0).
func (o *jqOrder) neg(v any) any {
	switch x := v.(type) {
	case int:
		if x == 0 {
			return math.Copysign(0, -1)
		}
		if x == math.MinInt {
			return -float64(x)
		}
		return -x
	case float64:
		return -x
	case *big.Int:
		return new(big.Int).Neg(x)
	}
	return jqErr(o.preview(v) + " cannot be negated")
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case float64:
		return x, true
	case *big.Int:
		f, _ := new(big.Float).SetInt(x).Float64()
		return f, true
	}
	return 0, false
}

var (
	jqCSVEscaper = strings.NewReplacer(`"`, `""`)
	jqTSVEscaper = strings.NewReplacer("\t", `\t`, "\r", `\r`, "\n", `\n`, "\\", `\\`, "\x00", `\0`)
	jqShEscaper  = strings.NewReplacer("'", `'\''`)
)

// row is @csv, @tsv or @sh of v as jq 1.6 prints it: numbers as 1.6
// does, null empty (@sh: null), 1.6's error texts.
func (o *jqOrder) row(typ string, v any) any {
	vs, ok := v.([]any)
	if !ok {
		if typ != "sh" {
			return jqErr(o.preview(v) + " cannot be " + typ + "-formatted, only array")
		}
		vs = []any{v}
	}
	var b strings.Builder
	for i, e := range vs {
		if i > 0 {
			b.WriteString(map[string]string{"csv": ",", "tsv": "\t", "sh": " "}[typ])
		}
		switch x := e.(type) {
		case []any, map[string]any:
			if typ == "sh" {
				return jqErr(o.preview(x) + " can not be escaped for shell")
			}
			return jqErr(o.preview(x) + " is not valid in a csv row")
		case string:
			switch typ {
			case "csv":
				b.WriteString(`"` + jqCSVEscaper.Replace(x) + `"`)
			case "tsv":
				b.WriteString(jqTSVEscaper.Replace(x))
			default:
				b.WriteString("'" + jqShEscaper.Replace(x) + "'")
			}
		case nil:
			if typ == "sh" {
				b.WriteString("null")
			}
		default:
			b.WriteString(o.compactOf(x))
		}
		if b.Len() > 1<<20 {
			if err := o.check(b.Len()); err != nil {
				return err
			}
		}
	}
	return b.String()
}
