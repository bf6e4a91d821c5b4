package shell

import (
	"context"
	"math"
	"unicode/utf8"

	"github.com/itchyny/gojq"
)

// The functions jqIndexTerm makes a filter's .x, .[k], .[a:b] and {x}
// call: jq 1.6's indexing (its jv_get), with its error texts (Cannot
// index number with string "x"), where gojq's differ in texts and in
// values ("abc" | .[0] is an error in 1.6, [1,2] | .[1.5] is null). The
// _opt forms are the same followed by ?: an error is no value.
const (
	jqIndexFunc    = "_computerfs_index"
	jqIndexOptFunc = "_computerfs_index_opt"
	jqSliceFunc    = "_computerfs_slice"
	jqSliceOptFunc = "_computerfs_slice_opt"
)

// jqIndexTerm rewrites the indexes of one term (.a, .a.b, .[0], x[k],
// .[a:b], each maybe with ?) into calls of the functions above, whose
// first argument is what is indexed and the others the key (or the
// slice's end and start), all taken, as jq takes an index's key, of the
// term's input. Iterations ([]) and a ? after anything else stay
// suffixes. Paths (path(.a), .a |= f) are not kept; the filters that
// take them are routed (jqFilterCheck).
func jqIndexTerm(t *gojq.Term) {
	sufs := t.SuffixList
	head := *t
	head.SuffixList = nil
	if head.Type == gojq.TermTypeIndex {
		sufs = append([]*gojq.Suffix{{Index: head.Index}}, sufs...)
		head = gojq.Term{Type: gojq.TermTypeIdentity}
	}
	has := false
	for _, s := range sufs {
		has = has || s.Index != nil
	}
	if !has {
		return
	}
	cur := &head
	var rest []*gojq.Suffix
	for i := 0; i < len(sufs); i++ {
		s := sufs[i]
		if s.Index == nil {
			rest = append(rest, s)
			continue
		}
		opt := i+1 < len(sufs) && sufs[i+1].Optional
		if opt {
			i++
		}
		base := *cur
		base.SuffixList = rest
		rest = nil
		args := []*gojq.Query{{Term: &base}}
		name := jqIndexFunc
		x := s.Index
		switch {
		case x.Name != "":
			args = append(args, jqStringQuery(x.Name))
		case x.Str != nil:
			args = append(args, &gojq.Query{Term: &gojq.Term{Type: gojq.TermTypeString, Str: x.Str}})
		case !x.IsSlice:
			args = append(args, x.Start)
		default:
			name = jqSliceFunc
			null := func() *gojq.Query { return &gojq.Query{Term: &gojq.Term{Type: gojq.TermTypeNull}} }
			end, start := x.End, x.Start
			if end == nil {
				end = null()
			}
			if start == nil {
				start = null()
			}
			// gojq's order of the arguments of its own _slice
			args = append(args, end, start)
		}
		if opt {
			name += "_opt"
		}
		cur = &gojq.Term{Type: gojq.TermTypeFunc, Func: &gojq.Func{Name: name, Args: args}}
	}
	cur.SuffixList = rest
	*t = *cur
}

func jqStringQuery(s string) *gojq.Query {
	return &gojq.Query{Term: &gojq.Term{Type: gojq.TermTypeString, Str: &gojq.String{Str: s}}}
}

// jqShorthand makes {x} and {"x"} the {x: .x} they stand for, so that
// the index is jqIndexTerm's ({$x} is a variable; {"\(q)"} is left to
// gojq, which takes q once for the key and the index).
func jqShorthand(t *gojq.Term) {
	if t.Object == nil {
		return
	}
	for _, kv := range t.Object.KeyVals {
		if kv.Val != nil {
			continue
		}
		switch {
		case kv.Key != "" && kv.Key[0] != '$':
			kv.Val = &gojq.Query{Term: &gojq.Term{Type: gojq.TermTypeIndex, Index: &gojq.Index{Name: kv.Key}}}
		case kv.Key == "" && kv.KeyString != nil && kv.KeyString.Queries == nil:
			kv.Val = &gojq.Query{Term: &gojq.Term{Type: gojq.TermTypeIndex, Index: &gojq.Index{Str: &gojq.String{Str: kv.KeyString.Str}}}}
		}
	}
}

// index is jq 1.6's t[k].
func (o *jqOrder) index(t, k any) any {
	switch x := t.(type) {
	case map[string]any:
		if s, ok := k.(string); ok {
			return x[s]
		}
	case []any:
		switch y := k.(type) {
		case []any:
			return o.indices(x, y)
		case map[string]any:
			start, end, ok := jqSliceBounds(y, len(x))
			if !ok {
				return jqErr("Start and end indices of an array slice must be numbers")
			}
			return x[start:end]
		}
		if f, ok := toFloat(k); ok {
			if f != math.Trunc(f) || f > math.MaxInt32 || f < math.MinInt32 {
				return nil // jq 1.6's jv_is_integer
			}
			i := int(f)
			if i < 0 {
				i += len(x)
			}
			if i < 0 || i >= len(x) {
				return nil
			}
			return x[i]
		}
	case string:
		if y, ok := k.(map[string]any); ok {
			n := utf8.RuneCountInString(x)
			start, end, ok := jqSliceBounds(y, n)
			if !ok {
				return jqErr("Start and end indices of an string slice must be numbers")
			}
			if n == len(x) {
				return x[start:end]
			}
			r := []rune(x)
			return string(r[start:end])
		}
	case nil:
		switch k.(type) {
		case string, map[string]any:
			return nil
		}
		if _, ok := toFloat(k); ok {
			return nil
		}
	}
	if s, ok := k.(string); ok && len(s) < 30 {
		return jqErr("Cannot index " + jqTypeName(t) + " with string \"" + s + "\"")
	}
	return jqErr("Cannot index " + jqTypeName(t) + " with " + jqTypeName(k))
}

// slice is jq 1.6's t[start:end].
func (o *jqOrder) slice(t, end, start any) any {
	return o.index(t, map[string]any{"start": start, "end": end})
}

// jqSliceBounds are the bounds of a slice {start, end} of a value of n
// elements, as jq 1.6's parse_slice takes them: a missing start is 0, a
// missing end n, negative ones count from the end, all clamped, the
// start rounded down and the end up.
func jqSliceBounds(k map[string]any, n int) (int, int, bool) {
	sv, ok1 := k["start"]
	ev, ok2 := k["end"]
	if !ok1 || !ok2 {
		return 0, 0, false
	}
	if sv == nil {
		sv = 0
	}
	if ev == nil {
		ev = n
	}
	s, ok1 := toFloat(sv)
	e, ok2 := toFloat(ev)
	if !ok1 || !ok2 || math.IsNaN(s) || math.IsNaN(e) {
		return 0, 0, false
	}
	l := float64(n)
	if s < 0 {
		s += l
	}
	if e < 0 {
		e += l
	}
	s = math.Min(math.Max(s, 0), l)
	e = math.Min(e, l)
	if e < s {
		e = s
	}
	return int(s), int(math.Ceil(e)), true
}

// indices is jq 1.6's .[array]: where y starts in x (none for an empty
// y). It is one step of the filter, so it looks at the call's end as it
// goes (x and y of a million elements are 10^12 comparisons).
func (o *jqOrder) indices(x, y []any) any {
	out := []any{}
	if len(y) == 0 {
		return out
	}
	work := 0
	for i := 0; i+len(y) <= len(x); i++ {
		if work += len(y); work > 1<<20 {
			work = 0
			if o != nil && o.c != nil && o.c.canceled() {
				return context.Cause(o.c.ctx)
			}
		}
		match := true
		for j := range y {
			if gojq.Compare(x[i+j], y[j]) != 0 {
				match = false
				break
			}
		}
		if match {
			out = append(out, i)
		}
	}
	return out
}
