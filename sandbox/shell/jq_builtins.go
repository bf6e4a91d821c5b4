package shell

import (
	"fmt"
	"strings"

	"github.com/itchyny/gojq"
)

// jqBuiltins16 redefines, before the agent's filter, the builtins whose
// gojq versions fail with other words than jq 1.6's, or take values 1.6
// refuses (and the reverse): as 1.6's builtin.jq has them where it
// defines them in jq (reverse, transpose, index, join...), or as a check
// of the input's type with 1.6's words before gojq's own (kept as
// _computerfs_b_NAME, defined before NAME is). The indexes and
// iterations in them are jqRewrite's, with 1.6's words too.
const jqBuiltins16 = `def _computerfs_b_sort: sort;
def _computerfs_b_sort_by(f): sort_by(f);
def _computerfs_b_group_by(f): group_by(f);
def _computerfs_b_unique: unique;
def _computerfs_b_unique_by(f): unique_by(f);
def _computerfs_b_min: min;
def _computerfs_b_max: max;
def _computerfs_b_min_by(f): min_by(f);
def _computerfs_b_max_by(f): max_by(f);
def _computerfs_b_ascii_downcase: ascii_downcase;
def _computerfs_b_ascii_upcase: ascii_upcase;
def _computerfs_b_explode: explode;
def _computerfs_b_ltrimstr($x): ltrimstr($x);
def _computerfs_b_rtrimstr($x): rtrimstr($x);
def _computerfs_b_startswith($x): startswith($x);
def _computerfs_b_endswith($x): endswith($x);
def _computerfs_b_split($x): split($x);
def _computerfs_b_contains($x): contains($x);
def _computerfs_b_utf8bytelength: utf8bytelength;
def _computerfs_b_floor: floor;
def _computerfs_b_sqrt: sqrt;
def _computerfs_b_ceil: ceil;
def _computerfs_b_round: round;
def _computerfs_b_fabs: fabs;
def _computerfs_b_log: log;
def _computerfs_b_range($x): range($x);
def _computerfs_b_range($x; $y): range($x; $y);
def _computerfs_b_error: error;
def _computerfs_b_error($x): error($x);
def _computerfs_b_has($x): has($x);
def _computerfs_b_match(re): match(re);
def _computerfs_b_match(re; mode): match(re; mode);
def match(re): _computerfs_b_match(re) | _computerfs_match_order;
def match(re; mode): _computerfs_b_match(re; mode) | _computerfs_match_order;
def sort: _computerfs_want("array"; "cannot be sorted, as it is not an array") | _computerfs_b_sort;
def sort_by(f): if type == "array" then _computerfs_b_sort_by(f) else _computerfs_err2(map([f]); "cannot be sorted, as they are not both arrays") end;
def group_by(f): if type == "array" then _computerfs_b_group_by(f) else _computerfs_err2(map([f]); "cannot be sorted, as they are not both arrays") end;
def unique: if type == "array" then _computerfs_b_unique else group_by(.) end;
def unique_by(f): if type == "array" then _computerfs_b_unique_by(f) else group_by(f) end;
def min: if type == "array" then _computerfs_b_min else _computerfs_err2(.; "cannot be iterated over") end;
def max: if type == "array" then _computerfs_b_max else _computerfs_err2(.; "cannot be iterated over") end;
def min_by(f): if type == "array" then _computerfs_b_min_by(f) else _computerfs_err2(map([f]); "cannot be iterated over") end;
def max_by(f): if type == "array" then _computerfs_b_max_by(f) else _computerfs_err2(map([f]); "cannot be iterated over") end;
def tonumber: _computerfs_tonumber;
def ascii_downcase: if type == "string" then _computerfs_b_ascii_downcase else error("explode input must be a string") end;
def ascii_upcase: if type == "string" then _computerfs_b_ascii_upcase else error("explode input must be a string") end;
def explode: if type == "string" then _computerfs_b_explode else error("explode input must be a string") end;
def ltrimstr($x): if type == "string" and ($x | type) == "string" then _computerfs_b_ltrimstr($x) else . end;
def rtrimstr($x): if type == "string" and ($x | type) == "string" then _computerfs_b_rtrimstr($x) else . end;
def startswith($x): if type == "string" and ($x | type) == "string" then _computerfs_b_startswith($x) else error("startswith() requires string inputs") end;
def endswith($x): if type == "string" and ($x | type) == "string" then _computerfs_b_endswith($x) else error("endswith() requires string inputs") end;
def split($x): if type == "string" and ($x | type) == "string" then _computerfs_b_split($x) else error("split input and separator must be strings") end;
def indices($i): if type == "array" and ($i | type) == "array" then .[$i] elif type == "array" then .[[$i]] elif type == "string" and ($i | type) == "string" then _computerfs_strindices($i) else .[$i] end;
def index($i): indices($i) | .[0];
def rindex($i): indices($i) | .[-1:][0];
def contains($x): _computerfs_contains_check($x) | _computerfs_b_contains($x);
def inside(xs): . as $x | xs | contains($x);
def utf8bytelength: _computerfs_want("string"; "only strings have UTF-8 byte length") | _computerfs_b_utf8bytelength;
def floor: _computerfs_want("number"; "number required") | _computerfs_b_floor;
def sqrt: _computerfs_want("number"; "number required") | _computerfs_b_sqrt;
def ceil: _computerfs_want("number"; "number required") | _computerfs_b_ceil;
def round: _computerfs_want("number"; "number required") | _computerfs_b_round;
def fabs: _computerfs_want("number"; "number required") | _computerfs_b_fabs;
def log: _computerfs_want("number"; "number required") | _computerfs_b_log;
def range($x): if ($x | type) == "number" then _computerfs_b_range($x) else error("Range bounds must be numeric") end;
def range($x; $y): if ($x | type) == "number" and ($y | type) == "number" then _computerfs_b_range($x; $y) else error("Range bounds must be numeric") end;
def error: if . == null then empty else _computerfs_b_error end;
def error($x): if $x == null then empty else _computerfs_b_error($x) end;
def has($k): _computerfs_has($k);
def in(xs): . as $x | xs | has($x);
def keys: _computerfs_keys_sorted;
def fromjson: _computerfs_want("string"; "only strings can be parsed") | _computerfs_fromjson;
def flatten: _computerfs_flatten(-1);
def flatten($x): if $x < 0 then error("flatten depth must not be negative") else _computerfs_flatten($x) end;
def reverse: [.[length - 1 - range(0; length)]];
def transpose: if . == [] then [] else . as $in | (map(length) | max) as $max | [range(0; $max) as $j | [range(0; $in | length) as $i | $in[$i][$j]]] end;
def combinations: if length == 0 then [] else .[0][] as $x | (.[1:] | combinations) as $w | [$x] + $w end;
def combinations(n): . as $dot | [range(n)] | map($dot) | combinations;
def nth($n; f): if $n < 0 then error("nth doesn't support negative indices") else last(limit($n + 1; f)) end;
def any: reduce .[] as $x (false; . or $x);
def all: reduce .[] as $x (true; . and $x);
def any(f): reduce (.[] | f) as $x (false; . or $x);
def all(f): reduce (.[] | f) as $x (true; . and $x);
`

// want passes v on when its type is one of kinds (jq's type names, space
// separated), else fails with jq 1.6's "<preview> <what>".
func (o *jqOrder) want(v any, kinds, what any) any {
	k, _ := kinds.(string)
	w, _ := what.(string)
	for _, t := range strings.Fields(k) {
		if jqTypeName(v) == t {
			return v
		}
	}
	return jqErr(o.preview(v) + " " + w)
}

// err2 is jq 1.6's error of two values: "<preview> and <preview> <what>".
func (o *jqOrder) err2(a, b, what any) any {
	w, _ := what.(string)
	return jqErr(o.preview(a) + " and " + o.preview(b) + " " + w)
}

// jqKind is the kind of a value as jq 1.6 tells kinds apart (true and
// false are two).
func jqKind(v any) string {
	if b, ok := v.(bool); ok {
		if b {
			return "true"
		}
		return "false"
	}
	return jqTypeName(v)
}

// containsCheck fails as jq 1.6 does when a and b are not of one kind.
func (o *jqOrder) containsCheck(a, b any) any {
	if jqKind(a) != jqKind(b) {
		return o.err2(a, b, "cannot have their containment checked")
	}
	return a
}

// has is jq 1.6's has(k).
func (o *jqOrder) has(v, k any) any {
	switch x := v.(type) {
	case nil:
		return false
	case map[string]any:
		if s, ok := k.(string); ok {
			_, found := x[s]
			return found
		}
	case []any:
		if f, ok := toFloat(k); ok {
			i := int(f)
			return f >= 0 && i >= 0 && i < len(x)
		}
	}
	return jqErr("Cannot check whether " + jqTypeName(v) + " has a " + jqTypeName(k) + " key")
}

// flatten is jq 1.6's _flatten(depth): an object's values in order, the
// arrays among them flattened depth levels (all, for a negative depth).
func (o *jqOrder) flatten(v, depth any) any {
	vals := o.values(v, true)
	if err, ok := vals.(error); ok {
		return err
	}
	out := []any{}
	var walk func(vs []any, d any) error
	walk = func(vs []any, d any) error {
		for _, e := range vs {
			inner, ok := e.([]any)
			if !ok || d == 0 || d == 0.0 {
				out = append(out, e)
				continue
			}
			next := o.binop(jqSub, "subtracted", d, 1)
			if err, ok := next.(error); ok {
				return err
			}
			if err := walk(inner, next); err != nil {
				return err
			}
		}
		if len(out) > 1<<16 {
			return o.check(16 * len(out))
		}
		return nil
	}
	if err := walk(vals.([]any), depth); err != nil {
		return err
	}
	return out
}

// objKey passes on a computed object key that is a string, and fails as
// jq 1.6 does on any other.
func (o *jqOrder) objKey(k any) any {
	if _, ok := k.(string); ok {
		return k
	}
	return jqErr("Cannot use " + o.preview(k) + " as object key")
}

// jqBuiltinFuncs are the Go functions jqBuiltins16 and jqRewrite call.
func (o *jqOrder) builtinFuncs() []gojq.CompilerOption {
	return []gojq.CompilerOption{
		gojq.WithFunction("_computerfs_want", 2, 2, func(v any, a []any) any { return o.want(v, a[0], a[1]) }),
		gojq.WithFunction("_computerfs_err2", 2, 2, func(v any, a []any) any { return o.err2(v, a[0], a[1]) }),
		gojq.WithFunction("_computerfs_contains_check", 1, 1, func(v any, a []any) any { return o.containsCheck(v, a[0]) }),
		gojq.WithFunction("_computerfs_has", 1, 1, func(v any, a []any) any { return o.has(v, a[0]) }),
		gojq.WithFunction("_computerfs_flatten", 1, 1, func(v any, a []any) any { return o.flatten(v, a[0]) }),
		gojq.WithFunction("_computerfs_keys_sorted", 0, 0, func(v any, _ []any) any { return o.keysOf(v, true) }),
		gojq.WithFunction("_computerfs_fromjson", 0, 0, func(v any, _ []any) any {
			if s, ok := v.(string); ok {
				return o.fromJSON(s)
			}
			return o.want(v, "string", "only strings can be parsed")
		}),
		gojq.WithFunction("_computerfs_tonumber", 0, 0, func(v any, _ []any) any { return o.toNumber(v) }),
		gojq.WithFunction("_computerfs_match_order", 0, 0, func(v any, _ []any) any { return o.matchOrder(v) }),
		gojq.WithFunction("_computerfs_strindices", 1, 1, func(v any, a []any) any {
			s, ok1 := v.(string)
			sub, ok2 := a[0].(string)
			if !ok1 || !ok2 {
				return o.err2(v, a[0], "cannot be searched, as they are not both strings")
			}
			return jqStrIndices(s, sub)
		}),
		gojq.WithFunction(jqObjKeyFunc, 0, 0, func(v any, _ []any) any { return o.objKey(v) }),
	}
}

const jqObjKeyFunc = "_computerfs_objkey"

// fromJSON is jq 1.6's fromjson of a string (its jv_parse): its one
// value, keys in their order, or 1.6's error.
func (o *jqOrder) fromJSON(s string) any {
	vals, _, msg := o.parse16([]byte(s))
	switch {
	case len(vals) > 1:
		msg = "Unexpected extra JSON values"
	case msg != "":
	case len(vals) == 0:
		msg = "Expected JSON value"
	default:
		return vals[0]
	}
	return jqErr(fmt.Sprintf("%s (while parsing '%s')", msg, s))
}

// toNumber is jq 1.6's tonumber.
func (o *jqOrder) toNumber(v any) any {
	switch x := v.(type) {
	case string:
		r := o.fromJSON(x)
		if _, ok := r.(error); ok {
			return r
		}
		if _, ok := toFloat(r); ok {
			return r
		}
	case int, float64:
		return v
	}
	return jqErr(o.preview(v) + " cannot be parsed as a number")
}

// matchOrder gives a match object and its captures 1.6's key order.
func (o *jqOrder) matchOrder(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	if caps, ok := m["captures"].([]any); ok {
		for _, c := range caps {
			cm, ok := c.(map[string]any)
			if !ok {
				continue
			}
			order := []string{"offset", "length", "string", "name"}
			if cm["offset"] == -1 {
				order = []string{"offset", "string", "length", "name"} // 1.6's, for a group that did not take part
			}
			if !o.set(cm, order) {
				return jqErr("objects too large for the call's memory budget")
			}
		}
	}
	if !o.set(m, []string{"offset", "length", "string", "captures"}) {
		return jqErr("objects too large for the call's memory budget")
	}
	return m
}

// jqStrIndices is jq 1.6's _strindices: the byte offsets of the
// occurrences of sub in s that do not overlap (1.6 loops for ever on an
// empty sub; here it has none).
func jqStrIndices(s, sub string) any {
	out := []any{}
	if sub == "" {
		return out
	}
	for off := 0; ; {
		i := strings.Index(s[off:], sub)
		if i < 0 {
			return out
		}
		out = append(out, off+i)
		off += i + len(sub)
	}
}
