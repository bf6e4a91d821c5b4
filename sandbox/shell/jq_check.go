package shell

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/itchyny/gojq"
)

// jqPrelude redefines, as jq 1.6's builtin.jq has them, the functions
// whose gojq versions walk objects sorted or differ from 1.6 (limit(0),
// limit of a count that is not a number). limit of a positive count is
// gojq's own (_computerfs_limit, defined before limit is), as fast as it
// was: the 1.6 form, with its + through jqAdd, took twice as long, and a
// [limit(1e9; repeat(1))] reached its timeout before its memory budget.
// The .[] and + in them go through the call's ordered versions (see
// jqRewrite).
const jqPrelude = `def first: .[0];
def last: .[-1];
def nth($n): .[$n];
def recurse(f): def r: ., (f | r); r;
def recurse: recurse(.[]?);
def map(f): [.[] | f];
def add: reduce .[] as $x (null; . + $x);
def keys_unsorted: ` + jqKeysFunc + `;
def to_entries: [keys_unsorted[] as $k | {key: $k, value: .[$k]}];
def from_entries: map({(.key // .K // .Key): (if has("value") then .value else .v end)}) | add + {} // {};
def with_entries(f): to_entries | map(f) | from_entries;
def tojson: ` + jqToJSONFunc + `;
def tostring: if type == "string" then . else ` + jqToJSONFunc + ` end;
def _computerfs_limit($n; f): limit($n; f);
def limit($n; f): if $n < 0 then f elif ($n | type) == "number" and $n > 0 then _computerfs_limit($n; f) else label $out | foreach f as $item ($n; .-1; $item, if . <= 0 then break $out else empty end) end;
def join($x): reduce .[] as $i (null; (if .==null then "" else .+$x end) + ($i | if type=="boolean" or type=="number" then tojson elif .==null then "" else . end)) // "";
`

const (
	jqValsFunc    = "_computerfs_values"
	jqValsOptFunc = "_computerfs_values_opt"
	jqKeysFunc    = "_computerfs_keys"
	jqToJSONFunc  = "_computerfs_tojson"
	jqObjFunc     = "_computerfs_object"
	jqSubFunc     = "_computerfs_sub"
	jqDivFunc     = "_computerfs_div"
	jqModFunc     = "_computerfs_mod"
	jqNegFunc     = "_computerfs_neg"
)

// jqFuncs are the functions (name/arity) a filter may call on the fast
// path: those jq 1.6 has and gojq (or jqPrelude) answers as 1.6 does.
// Any other routes to the sandbox's jq: 1.7's (pick, abs, toarray,
// ltrimstr's changes, getpath/paths, splits/2, @base32d, have_literal_numbers,
// $__prog_args...), the ones that walk paths (path, paths, del, to_entries'
// update forms, setpath, tostream, walk, map_values), input/inputs/debug/
// stderr/input_filename/$__loc__/halt_error, and those whose errors or
// edge cases differ.
var jqFuncs = map[string]bool{
	"empty/0": true, "error/0": true, "error/1": true, "not/0": true, "length/0": true, "utf8bytelength/0": true,
	"keys/0": true, "keys_unsorted/0": true, "has/1": true, "in/1": true, "map/1": true, "select/1": true,
	"add/0": true, "any/0": true, "all/0": true, "any/1": true, "all/1": true, "range/1": true, "range/2": true,
	"floor/0": true, "sqrt/0": true, "min/0": true, "max/0": true, "min_by/1": true, "max_by/1": true,
	"unique/0": true, "unique_by/1": true, "group_by/1": true, "sort/0": true, "sort_by/1": true, "reverse/0": true,
	"contains/1": true, "inside/1": true, "startswith/1": true, "endswith/1": true, "ltrimstr/1": true, "rtrimstr/1": true,
	"explode/0": true, "split/1": true, "join/1": true, "ascii_downcase/0": true, "ascii_upcase/0": true,
	"recurse/0": true, "tostring/0": true, "tonumber/0": true, "type/0": true,
	"first/0": true, "last/0": true, "first/1": true, "last/1": true, "nth/1": true, "nth/2": true,
	"limit/2": true, "flatten/0": true, "flatten/1": true,
	"indices/1": true, "index/1": true, "rindex/1": true, "test/1": true, "test/2": true, "match/1": true, "match/2": true,
	"capture/1": true, "capture/2": true, "scan/1": true, "sub/2": true, "gsub/2": true, "splits/1": true,
	"tojson/0": true, "fromjson/0": true, "values/0": true, "nulls/0": true, "booleans/0": true, "numbers/0": true,
	"strings/0": true, "arrays/0": true, "objects/0": true, "iterables/0": true, "scalars/0": true,
	"to_entries/0": true, "from_entries/0": true, "with_entries/1": true, "transpose/0": true,
	"isnan/0": true, "infinite/0": true, "nan/0": true, "env/0": true, "$ENV/0": true, "true/0": true, "false/0": true, "null/0": true,
	"ascii_downcase": true, "tojson": true, "ceil/0": true, "round/0": true, "fabs/0": true, "pow/2": true, "log/0": true,
	"combinations/0": true, "combinations/1": true, "isinfinite/0": true, "isnormal/0": true, "halt/0": true,
	"splits": true, "min_by": true, "getpath/1": false, "input/0": false, "inputs/0": false,
}

// jqFormats are the @formats a filter may use on the fast path.
// (@base64d is not: gojq decodes what 1.6 refuses, and the reverse.)
var jqFormats = map[string]bool{"@csv": true, "@tsv": true, "@sh": true, "@base64": true, "@uri": true, "@html": true}

// jqUnbounded says why a filter (the agent's, without jqPrelude) could
// build a value of any depth, or "" when it cannot: reduce, foreach, a
// function of its own (recursion), recurse(f), until, while and repeat
// can wrap a value once a turn (`reduce range(3000000) as $i (0; [.])`),
// setpath, fromstream and the update operators make one as deep as a
// path given as data (`setpath([range(3000000) | "a"]; 1)`),
// and gojq compares, sorts, flattens and prints values by recursing on
// Go's stack, whose overflow ends the daemon: no budget sees it (a value
// 3,000,000 levels deep took `. == .` past Go's 1 GB stack limit in
// 20 s, within the call's memory budget). Without them a filter's values
// are at most as deep as its input (encoding/json stops at 10,000
// levels) plus its own nesting, which the parse bounds. Such a filter
// runs in the sandbox's jq, whose stack is its own process's.
func jqUnbounded(q *gojq.Query) string {
	why := ""
	jqVisit(q, func(q *gojq.Query) bool {
		if why != "" {
			return false
		}
		if len(q.FuncDefs) > 0 {
			why = "function definitions (recursion)"
			return false
		}
		if jqIsUpdate(q.Op) {
			why = "updates (" + q.Op.String() + ")" // setpath, with paths made from data
			return false
		}
		return true
	}, func(t *gojq.Term) bool {
		if why != "" {
			return false
		}
		switch {
		case t.Reduce != nil:
			why = "reduce"
		case t.Foreach != nil:
			why = "foreach"
		case t.Type == gojq.TermTypeFunc:
			switch t.Func.Name + "/" + strconv.Itoa(len(t.Func.Args)) {
			case "recurse/1", "recurse/2", "recurse_down/0", "until/2", "while/2", "repeat/1", "repeat/2", "walk/1",
				// paths as data: setpath and fromstream build a value as
				// deep as a path is long, and gojq recurses on its length
				"setpath/2", "fromstream/1", "delpaths/1", "getpath/1", "del/1", "paths/0", "paths/1",
				"leaf_paths/0", "path/1", "pick/1", "tostream/0", "input/0", "inputs/0":
				why = t.Func.Name
			}
		}
		return why == ""
	})
	if why != "" {
		why += ": can build a value deeper than the fast path's stack"
	}
	return why
}

// jqIsUpdate is whether op is one of the update operators (=, |=, +=...).
func jqIsUpdate(op gojq.Operator) bool {
	switch op {
	case gojq.OpAssign, gojq.OpModify, gojq.OpUpdateAdd, gojq.OpUpdateSub, gojq.OpUpdateMul, gojq.OpUpdateDiv, gojq.OpUpdateMod, gojq.OpUpdateAlt:
		return true
	}
	return false
}

// jqFilterCheck says why a parsed filter must run in the sandbox's jq
// 1.6, or "" when the fast path answers it as 1.6 does.
func jqFilterCheck(q *gojq.Query) string {
	if why := jqUnbounded(q); why != "" {
		return why
	}
	why := ""
	defs := map[string]bool{}
	jqVisit(q, func(q *gojq.Query) bool {
		switch {
		case why != "":
		case q.Meta != nil || len(q.Imports) > 0:
			why = "modules"
		case len(q.Patterns) > 1:
			why = "?// (jq 1.7)"
		case len(q.Patterns) == 1 && q.Patterns[0].Name == "":
			why = "destructuring (gojq's error texts)"
		case jqIsUpdate(q.Op):
			why = "updates (" + q.Op.String() + ")"
		case (q.Op == gojq.OpDiv || q.Op == gojq.OpMod) && q.Right != nil && q.Right.Term != nil &&
			(q.Right.Term.Type == gojq.TermTypeNumber || q.Right.Term.Type == gojq.TermTypeUnary):
			// jq folds constants and fails 1/0 at compile time
			why = "division by a constant"
		default:
			for _, fd := range q.FuncDefs {
				defs[fd.Name+"/"+strconv.Itoa(len(fd.Args))] = true
				for _, a := range fd.Args {
					defs[strings.TrimPrefix(a, "$")+"/0"] = true
				}
			}
		}
		return why == ""
	}, func(t *gojq.Term) bool {
		if why == "" {
			why = jqTermCheck(t, defs)
		}
		return why == ""
	})
	return why
}

// jqTermCheck says why one term of a filter must run in the sandbox's
// jq, or "" (its parts are jqVisit's to walk); defs are the filter's own
// functions.
func jqTermCheck(t *gojq.Term, defs map[string]bool) string {
	switch t.Type {
	case gojq.TermTypeFunc:
		name := t.Func.Name + "/" + strconv.Itoa(len(t.Func.Args))
		if strings.HasPrefix(t.Func.Name, "$") {
			if strings.HasPrefix(t.Func.Name, "$__") {
				return t.Func.Name
			}
			if t.Func.Name != "$ENV" {
				break // a variable
			}
		}
		if !defs[name] && !jqFuncs[name] {
			return name
		}
		if (name == "env/0" || name == "$ENV/0") && (len(t.SuffixList) == 0 || t.SuffixList[0].Index == nil || t.SuffixList[0].Index.Name == "" && t.SuffixList[0].Index.Str == nil) {
			return "the whole environment"
		}
	case gojq.TermTypeFormat:
		if !jqFormats[t.Format] || t.Str != nil {
			return t.Format
		}
	case gojq.TermTypeIf:
		if t.If.Else == nil {
			return "if without else (jq 1.7)"
		}
	case gojq.TermTypeTry:
		if t.Try.Catch != nil {
			return "try/catch (error texts)"
		}
	case gojq.TermTypeObject:
		for _, kv := range t.Object.KeyVals {
			if (kv.KeyQuery != nil || kv.KeyString != nil && kv.KeyString.Queries != nil) && len(t.Object.KeyVals) > 1 {
				return "objects with computed keys"
			}
			if strings.HasPrefix(kv.Key, "$__") {
				return kv.Key
			}
		}
	}
	if t.Index != nil && t.Index.Str != nil && t.Index.Str.Queries != nil {
		return "computed keys"
	}
	for _, s := range t.SuffixList {
		if s.Index != nil && s.Index.Str != nil && s.Index.Str.Queries != nil {
			return "computed keys"
		}
	}
	return ""
}

// jqCanRun routes what the fast path's jq does not answer as jq 1.6:
// options it does not take, a filter that is not a literal word, or one
// that jqFilterCheck refuses.
func jqCanRun(words []string, lits []bool) string {
	filter, have := "", false
	raw, ascii := false, false
	for i := 1; i < len(words); i++ {
		a := words[i]
		if !lits[i] {
			if !have {
				return "jq with a filter computed at run time is not built in"
			}
			continue
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			if !have {
				filter, have = a, true
			}
			continue
		}
		if lits[i] && strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") {
			raw = raw || strings.ContainsAny(a, "rj")
			ascii = ascii || strings.Contains(a, "a")
		}
		raw = raw || a == "--raw-output" || a == "--join-output"
		ascii = ascii || a == "--ascii-output"
		switch a {
		case "-r", "--raw-output", "-j", "--join-output", "-c", "--compact-output", "-s", "--slurp", "-n", "--null-input",
			"-e", "--exit-status", "-S", "--sort-keys", "--tab", "-M", "--monochrome-output", "-R", "--raw-input", "-a", "--ascii-output":
		case "--indent":
			if i+1 >= len(words) || !lits[i+1] {
				return "jq --indent is not built in"
			}
			if n, err := strconv.Atoi(words[i+1]); err != nil || n < 0 || n > 7 {
				return "jq --indent " + words[i+1] + " is not built in"
			}
			i++
		case "--arg", "--argjson":
			if i+2 >= len(words) {
				return "jq " + a + " without its two words is not built in"
			}
			if a == "--argjson" {
				var v any
				if !lits[i+2] || json.Unmarshal([]byte(words[i+2]), &v) != nil {
					return "jq --argjson with a value that may not be JSON is not built in"
				}
			}
			i += 2
		default:
			if len(a) > 2 && a[1] != '-' && strings.Trim(a[1:], "rjcsneSMRa") == "" {
				continue
			}
			return "jq " + a + " is not built in"
		}
	}
	if !have {
		return "jq without a filter is not built in"
	}
	if raw && ascii {
		// 1.6 prints a string raw under -a as JSON, and then corrupts
		// its heap (malloc_consolidate(): unaligned fastbin chunk)
		return "jq -r with -a is not built in (jq 1.6 aborts on it)"
	}
	if tooNested(filter) || tooManyOperators(filter, maxJqOperators) {
		// cmdJq refuses it (gojq's parse recurses on each level and
		// operator): jq 1.6 answers it
		return "jq with a filter past the fast path's bounds of nesting and operators is not built in"
	}
	q, err := gojq.Parse(filter)
	if err != nil {
		return "jq: syntax error: routed for jq 1.6's message"
	}
	if why := jqFilterCheck(q); why != "" {
		return fmt.Sprintf("jq %s is not built in (the fast path answers it unlike jq 1.6)", why)
	}
	return ""
}
