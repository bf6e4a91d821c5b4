package shell

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/itchyny/gojq"
)

func init() {
	register(&command{names: []string{"jq"}, run: cmdJq, opts: opts("rjcsneSRMa", "raw-output", "join-output", "compact-output", "slurp", "null-input",
		"exit-status", "sort-keys", "raw-input", "tab", "monochrome-output", "ascii-output", "indent=", "arg=", "argjson="), ownArgs: true, check: jqCheck})
}

// jqCheck is jqCanRun for a command line whose words are all literal.
func jqCheck(args []string) string {
	words := append([]string{"jq"}, args...)
	lits := make([]bool, len(words))
	for i := range lits {
		lits[i] = true
	}
	return jqCanRun(words, lits)
}

func cmdJq(c *cmd) int {
	args := c.args[1:]
	raw, compact, slurp, nullIn, exitStatus, sortKeys, join, tab, rawIn, ascii := false, false, false, false, false, false, false, false, false, false
	indent := 2
	var names []string
	var values []any
	filter, haveFilter := "", false
	var files []string
	for len(args) > 0 {
		a := args[0]
		args = args[1:]
		if !strings.HasPrefix(a, "-") || a == "-" {
			if !haveFilter {
				filter, haveFilter = a, true
			} else {
				files = append(files, a)
			}
			continue
		}
		switch a {
		case "-r", "--raw-output":
			raw = true
		case "-j", "--join-output":
			raw, join = true, true
		case "-c", "--compact-output":
			compact = true
		case "-s", "--slurp":
			slurp = true
		case "-n", "--null-input":
			nullIn = true
		case "-e", "--exit-status":
			exitStatus = true
		case "-S", "--sort-keys":
			sortKeys = true
		case "-R", "--raw-input":
			rawIn = true
		case "--tab":
			tab = true
		case "-a", "--ascii-output":
			ascii = true
		case "-M", "--monochrome-output", "-C", "--color-output":
		case "--indent":
			if len(args) == 0 {
				return 2
			}
			indent, _ = strconv.Atoi(args[0])
			args = args[1:]
		case "--arg", "--argjson":
			if len(args) < 2 {
				c.errorf("%s takes two parameters (e.g. %s varname value)", a, a)
				return 2
			}
			names = append(names, "$"+args[0])
			if a == "--arg" {
				values = append(values, args[1])
			} else {
				var v any
				if err := json.Unmarshal([]byte(args[1]), &v); err != nil {
					c.errorf("invalid JSON text passed to --argjson")
					return 2
				}
				values = append(values, jqRawJSON(args[1]))
			}
			args = args[2:]
		default:
			// bundled short flags like -rc
			if len(a) > 2 && a[1] != '-' && strings.Trim(a[1:], "rjcsneSRMa") == "" {
				for _, f := range a[1:] {
					args = append([]string{"-" + string(f)}, args...)
				}
				continue
			}
			c.errorf("Unknown option: %s", a)
			return 2
		}
	}
	if !haveFilter {
		filter = "."
	}
	order := &jqOrder{c: c}
	if tooNested(filter) {
		c.errorf("error: filter nests deeper than the fast path's limit of %d levels\ncompile error", maxNesting)
		return 3
	}
	if tooManyOperators(filter, maxJqOperators) {
		// gojq's parse and compile recurse on each operator and ignore
		// the call's end (100,000 took over 90 s through a 5 s timeout)
		c.errorf("error: filter has more than the fast path's limit of %d operators\ncompile error", maxJqOperators)
		return 3
	}
	if uq, err := gojq.Parse(filter); err == nil {
		// routing keeps these off the fast path; a filter made at run
		// time (eval, a script) comes here unseen
		if why := jqUnbounded(uq); why != "" {
			c.errorf("error: %s; run it in the sandbox (--backend sandbox)\ncompile error", why)
			return 3
		}
	}
	q, err := gojq.Parse(jqPrelude + jqBuiltins16 + filter)
	if err != nil {
		c.errorf("error: %v\ncompile error", err)
		return 3
	}
	for i, v := range values {
		values[i] = order.adopt(v)
	}
	jqPrune(q)
	jqRewrite(q)
	code, err := gojq.Compile(q, append(order.builtinFuncs(), gojq.WithVariables(names), gojq.WithEnvironLoader(func() []string { return exported(c.env) }),
		gojq.WithFunction(jqMulFunc, 2, 2, func(_ any, args []any) any { return c.jqMul(order, args[0], args[1]) }),
		gojq.WithFunction(jqAddFunc, 2, 2, func(_ any, args []any) any { return c.jqAdd(order, args[0], args[1]) }),
		gojq.WithFunction(jqSubFunc, 2, 2, func(_ any, args []any) any { return order.binop(jqSub, "subtracted", args[0], args[1]) }),
		gojq.WithFunction(jqDivFunc, 2, 2, func(_ any, args []any) any { return order.binop(jqDiv, "divided", args[0], args[1]) }),
		gojq.WithFunction(jqModFunc, 2, 2, func(_ any, args []any) any { return order.binop(jqMod, "divided", args[0], args[1]) }),
		gojq.WithFunction(jqNegFunc, 1, 1, func(_ any, args []any) any { return order.neg(args[0]) }),
		gojq.WithFunction(jqRowFormats["@csv"], 0, 0, func(v any, _ []any) any { return order.row("csv", v) }),
		gojq.WithFunction(jqRowFormats["@tsv"], 0, 0, func(v any, _ []any) any { return order.row("tsv", v) }),
		gojq.WithFunction(jqRowFormats["@sh"], 0, 0, func(v any, _ []any) any { return order.row("sh", v) }),
		gojq.WithFunction(jqValsFunc, 0, 0, func(v any, _ []any) any { return order.values(v, true) }),
		gojq.WithFunction(jqValsOptFunc, 0, 0, func(v any, _ []any) any { return order.values(v, false) }),
		gojq.WithFunction(jqIndexFunc, 2, 2, func(_ any, a []any) any { return order.index(a[0], a[1]) }),
		gojq.WithIterFunction(jqIndexOptFunc, 2, 2, func(_ any, a []any) gojq.Iter { return jqNoErr(order.index(a[0], a[1])) }),
		gojq.WithFunction(jqSliceFunc, 3, 3, func(_ any, a []any) any { return order.slice(a[0], a[1], a[2]) }),
		gojq.WithIterFunction(jqSliceOptFunc, 3, 3, func(_ any, a []any) gojq.Iter { return jqNoErr(order.slice(a[0], a[1], a[2])) }),
		gojq.WithFunction(jqKeysFunc, 0, 0, func(v any, _ []any) any { return order.keysOf(v, false) }),
		gojq.WithFunction(jqToJSONFunc, 0, 0, func(v any, _ []any) any {
			p := jqPrinter{order: order, compact: true}
			if s := p.encode(v); p.err == nil {
				return s
			}
			return p.err
		}),
		gojq.WithFunction(jqToStrFunc, 0, 0, func(v any, _ []any) any {
			if s, ok := v.(string); ok {
				return s
			}
			p := jqPrinter{order: order, compact: true}
			if s := p.encode(v); p.err == nil {
				return s
			}
			return p.err
		}),
		gojq.WithFunction(jqObjFunc, 1, 1, func(v any, args []any) any { return order.object(v, args[0]) }),
		gojq.WithFunction(jqMatchGuard, 0, 0, jqMatchCheck),
		gojq.WithFunction(jqRegexGuard, 2, 2, order.regexCheck))...)
	if err != nil {
		c.errorf("error: %v\ncompile error", err)
		return 3
	}
	// read inputs
	var data []byte
	if len(files) == 0 && !(nullIn && !strings.Contains(filter, "input")) {
		files = []string{"-"}
	}
	var starts []int64 // where each file's text begins in data
	for _, f := range files {
		b, err := c.readFile(f)
		if err != nil {
			c.errorf("error: Could not open file %s: %s", f, errText(err))
			return 2
		}
		starts = append(starts, int64(len(data)))
		data = append(data, b...)
	}
	// where jq 1.6 says an error was: the file it was reading and the
	// lines of it read (a line at a time) when the value was complete
	posAt := func(off int64) string {
		i := len(starts) - 1
		for i > 0 && starts[i] >= off {
			i--
		}
		start, end := starts[i], int64(len(data))
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		n := bytes.Count(data[start:off], []byte("\n"))
		if bytes.IndexByte(data[off:end], '\n') >= 0 {
			n++
		}
		name := files[i]
		if name == "-" {
			name = "<stdin>"
		}
		return fmt.Sprintf("%s:%d", name, n)
	}
	var inputs []any
	var ends []int64
	parseErr := ""
	if rawIn {
		if slurp {
			inputs = []any{string(data)}
			ends = []int64{int64(len(data))}
		} else if len(data) > 0 {
			off := int64(0)
			for _, l := range strings.SplitAfter(string(data), "\n") {
				if l == "" {
					continue
				}
				off += int64(len(l))
				inputs = append(inputs, strings.TrimSuffix(l, "\n"))
				ends = append(ends, off-1)
			}
		}
	} else {
		// decoded values take some times the size of their text
		if !c.grow(4 * int64(len(data))) {
			return 2
		}
		all, allEnds, perr := order.parse16(data)
		if order.fail {
			return 2
		}
		if perr != "" && !nullIn {
			parseErr = perr
			if slurp {
				c.out.Flush()
				fmt.Fprintf(c.stderr, "parse error: %s\n", parseErr)
				return 4
			}
		}
		if slurp {
			if all == nil {
				all = []any{}
			}
			inputs = []any{all}
			ends = []int64{int64(len(data))}
		} else {
			inputs, ends = all, allEnds
		}
	}
	if nullIn {
		inputs = []any{nil}
	}
	printer := &jqPrinter{order: order, compact: compact, indent: indent, tab: tab, ascii: ascii, S: sortKeys}
	// the status is jq 1.6's of the last input: 14 for no output, 11
	// for a last output null or false under -e, 0 for another, 5 for
	// an error; then 14 and 11 are 4 and 1 under -e, 0 without
	status := 0
	defer c.engine()()
	ctx := engineCtx{c.ctx, c.r.mem}
	for i, in := range inputs {
		status = 14
		iter := code.RunWithContext(ctx, in, values...)
		for {
			v, ok := iter.Next()
			if !ok {
				break
			}
			if err, ok := v.(error); ok {
				if he, ok := err.(*gojq.HaltError); ok && he.Value() == nil {
					return he.ExitCode()
				}
				if c.canceled() || order.fail {
					return 5
				}
				c.out.Flush()
				pos := "<unknown>"
				if !nullIn {
					pos = posAt(ends[i])
				}
				msg := ": " + jqErrText(err)
				if ve, ok := err.(gojq.ValueError); ok && !isJqErr(err) {
					switch x := ve.Value().(type) {
					case string:
						msg = ": " + x
					default:
						msg = " (not a string): " + order.compactOf(x)
					}
				}
				fmt.Fprintf(c.stderr, "jq: error (at %s)%s\n", pos, msg)
				status = 5
				break
			}
			if exitStatus {
				status = 0
				if v == nil || v == false {
					status = 11
				}
			}
			if s, ok := v.(string); ok && raw && !ascii {
				c.out.WriteString(s)
			} else {
				s := printer.encode(v)
				if printer.err != nil {
					return 5
				}
				c.out.WriteString(s)
			}
			if !join {
				c.out.WriteString("\n")
			}
		}
	}
	if parseErr != "" {
		// 1.6 answers the values before the one it cannot read
		c.out.Flush()
		fmt.Fprintf(c.stderr, "parse error: %s\n", parseErr)
		return 4
	}
	if status >= 10 {
		if exitStatus {
			return status - 10
		}
		return 0
	}
	return status
}

// jqNoErr is v, or no value for an error (x? of jq).
func jqNoErr(v any) gojq.Iter {
	if _, ok := v.(error); ok {
		return gojq.NewIter[any]()
	}
	return gojq.NewIter(v)
}

// jqStringFormats are the formats that take a value as its tostring.
var jqStringFormats = map[string]bool{"@base64": true, "@base64d": true, "@uri": true, "@html": true}

// jqRowFormats are the formats of a row, which the call's own functions
// print as 1.6 does (see jqOrder.row).
var jqRowFormats = map[string]string{"@csv": "_computerfs_csv", "@tsv": "_computerfs_tsv", "@sh": "_computerfs_sh"}

// jqMulFunc and jqAddFunc are what a * b and a + b of a jq filter call
// (see jqBoundMul); jqToStrFunc is the tostring the formats of
// jqStringFormats take.
const (
	jqMulFunc   = "_computerfs_mul"
	jqAddFunc   = "_computerfs_add"
	jqToStrFunc = "_computerfs_tostring"
)

// jqRewrite makes the parsed filter (jqPrelude's and the agent's) answer
// as jq 1.6 within the call's bounds: every a * b and a + b calls
// jqMulFunc and jqAddFunc, which check a string repeated a number of
// times, or two strings or arrays put together, against the call's
// memory budget before they are made ("x" * 1e9 is one allocation of a
// GB, and reduce range(40) as $i ("x"; . + .) doubles a string 40
// times); -, / and % call 1.6's error texts; objects keep their key
// order (jqOrderTerm); @csv, @tsv and @sh print as 1.6, the string
// formats take 1.6's tostring; -x keeps 1.6's -0; and the regular
// expression functions check their pattern and input first.
func jqRewrite(q *gojq.Query) {
	seen := map[*gojq.Term]bool{} // jqOrderTerm's
	done := map[*gojq.Term]bool{} // terms seen (a term may be reached twice)
	guarded := map[*gojq.Term]bool{}
	formats := map[*gojq.Term]bool{}
	binops := map[gojq.Operator]string{gojq.OpMul: jqMulFunc, gojq.OpAdd: jqAddFunc, gojq.OpSub: jqSubFunc, gojq.OpDiv: jqDivFunc, gojq.OpMod: jqModFunc}
	jqVisit(q, func(q *gojq.Query) bool {
		if name := binops[q.Op]; name != "" {
			l, r := q.Left, q.Right
			*q = gojq.Query{Term: &gojq.Term{Type: gojq.TermTypeFunc, Func: &gojq.Func{Name: name, Args: []*gojq.Query{l, r}}}}
		}
		return true
	}, func(t *gojq.Term) bool {
		if done[t] {
			return false
		}
		done[t] = true
		jqShorthand(t)
		jqIndexTerm(t)
		if t.Object != nil {
			for _, kv := range t.Object.KeyVals {
				if kv.KeyQuery != nil {
					// 1.6's words for a key that is not a string
					kv.KeyQuery = &gojq.Query{Left: kv.KeyQuery, Op: gojq.OpPipe, Right: &gojq.Query{Term: &gojq.Term{Type: gojq.TermTypeFunc, Func: &gojq.Func{Name: jqObjKeyFunc}}}}
				}
			}
		}
		jqOrderTerm(t, seen)
		if t.Type == gojq.TermTypeFormat && t.Str == nil && jqRowFormats[t.Format] != "" {
			// 1.6's numbers (1e+17) and error texts
			*t = gojq.Term{Type: gojq.TermTypeFunc, Func: &gojq.Func{Name: jqRowFormats[t.Format]}, SuffixList: t.SuffixList}
		}
		if t.Type == gojq.TermTypeFormat && t.Str == nil && jqStringFormats[t.Format] && !formats[t] {
			// gojq's formats print a value that is not a string with
			// its own tostring (keys sorted, no max depth): jqPrelude's
			f := &gojq.Term{Type: gojq.TermTypeFormat, Format: t.Format}
			formats[f] = true
			tostring := &gojq.Query{Term: &gojq.Term{Type: gojq.TermTypeFunc, Func: &gojq.Func{Name: jqToStrFunc}}}
			*t = gojq.Term{Type: gojq.TermTypeQuery, Query: &gojq.Query{Left: tostring, Op: gojq.OpPipe, Right: &gojq.Query{Term: f}}, SuffixList: t.SuffixList}
		}
		if t.Func != nil {
			global := jqMatchFuncs[t.Func.Name] || t.Func.Name == "split" && len(t.Func.Args) == 2
			if (global || t.Func.Name == "test" && len(t.Func.Args) > 0) && !guarded[t] {
				call := *t
				guarded[&call] = true
				var guards []*gojq.Query
				if global {
					guards = append(guards, &gojq.Query{Term: &gojq.Term{Type: gojq.TermTypeFunc, Func: &gojq.Func{Name: jqMatchGuard}}})
				}
				if len(call.Func.Args) > 0 {
					guards = append(guards, &gojq.Query{Term: &gojq.Term{Type: gojq.TermTypeFunc, Func: &gojq.Func{Name: jqRegexGuard, Args: []*gojq.Query{call.Func.Args[0], jqStringQuery(call.Func.Name + "/" + strconv.Itoa(len(call.Func.Args)))}}}})
				}
				right := &gojq.Query{Term: &call}
				for i := len(guards) - 1; i >= 0; i-- {
					right = &gojq.Query{Left: guards[i], Op: gojq.OpPipe, Right: right}
				}
				*t = gojq.Term{Type: gojq.TermTypeQuery, Query: right}
				return true // into the guards and the call (whose first argument the regex guard shares: done sees it once)
			}
		}
		if t.Unary != nil && t.Unary.Op == gojq.OpSub {
			// gojq's -x of an int 0 is 0; jq 1.6's numbers are
			// doubles, and -0 prints as -0
			arg := &gojq.Query{Term: t.Unary.Term}
			*t = gojq.Term{Type: gojq.TermTypeFunc, Func: &gojq.Func{Name: jqNegFunc, Args: []*gojq.Query{arg}}, SuffixList: t.SuffixList}
		}
		return true
	})
}

var jqMul, jqAdd, jqSub, jqDiv, jqMod = jqBinop("*"), jqBinop("+"), jqBinop("-"), jqBinop("/"), jqBinop("%")

func jqBinop(op string) *gojq.Code {
	q, err := gojq.Parse("$a " + op + " $b")
	if err != nil {
		panic(err)
	}
	code, err := gojq.Compile(q, gojq.WithVariables([]string{"$a", "$b"}))
	if err != nil {
		panic(err)
	}
	return code
}

// jqAdd is a + b, once what it makes fits the call's budget.
func (c *cmd) jqAdd(o *jqOrder, a, b any) any {
	size := 0
	switch x := a.(type) {
	case map[string]any:
		if y, ok := b.(map[string]any); ok {
			return o.merge(x, y, false)
		}
	case int:
		if y, ok := b.(int); ok {
			if v := x + y; (v >= x) == (y >= 0) {
				return v
			}
		}
	case float64:
		if y, ok := b.(float64); ok {
			return x + y
		}
	case string:
		if y, ok := b.(string); ok {
			size = len(x) + len(y)
		}
	case []any:
		if y, ok := b.([]any); ok {
			size = 16 * (len(x) + len(y))
		}
	}
	if size > 1<<20 && c.r.mem.over(int64(size)) {
		c.r.mem.exceed(c.name)
		return fmt.Errorf("result of %d bytes too large for the call's memory budget", size)
	}
	return o.binop(jqAdd, "added", a, b)
}

// jqMul is a * b, once a string repeated fits the call's budget.
func (c *cmd) jqMul(o *jqOrder, a, b any) any {
	if x, ok := a.(map[string]any); ok {
		if y, ok := b.(map[string]any); ok {
			return o.merge(x, y, true)
		}
	}
	s, n := a, b
	if _, ok := s.(string); !ok {
		s, n = b, a
	}
	if str, ok := s.(string); ok {
		var f float64
		switch x := n.(type) {
		case int:
			f = float64(x)
		case float64:
			f = x
		}
		if size := float64(len(str)) * f; size > 1<<20 && (size > float64(1<<62) || c.r.mem.over(int64(size))) {
			c.r.mem.exceed(c.name)
			return fmt.Errorf("repeat string result too large for the call's memory budget: %d bytes * %g", len(str), f)
		}
		if _, ok := toFloat(n); ok {
			// jq 1.6: n-1 more copies, null when n-1 is below 0 as an int
			more := math.Trunc(f - 1)
			if more < 0 || math.IsNaN(more) {
				return nil
			}
			return strings.Repeat(str, int(more)+1)
		}
	}
	return o.binop(jqMul, "multiplied", a, b)
}

// jqMatchGuard is called before the jq functions that match a regular
// expression globally (match, capture, scan, splits, sub, gsub, split/2):
// gojq counts the characters before every match from the start of the
// string, so a global match on one long string takes time quadratic in
// its length, inside one step that cannot be stopped.
const jqMatchGuard = "_computerfs_match_guard"

// jqMatchLimit is the longest string those functions take on the fast
// path.
const jqMatchLimit = 256 << 10

var jqMatchFuncs = map[string]bool{"match": true, "capture": true, "scan": true, "splits": true, "sub": true, "gsub": true, "_match": true}

// jqRegexGuard(re; "name/arity") is called before the jq functions
// that compile a regular expression: gojq compiles it without a look at
// the call's end (see maxRegex); and it fails with jq 1.6's words when
// the input or the expression is not a string.
const jqRegexGuard = "_computerfs_regex_guard"

// jqRegexOneArg are the forms whose 1.6 versions take a string or an
// array [re, flags] (sub/2 calls match/1).
var jqRegexOneArg = map[string]bool{"test/1": true, "match/1": true, "capture/1": true, "sub/2": true}

func (o *jqOrder) regexCheck(v any, args []any) any {
	form, _ := args[1].(string)
	re := args[0]
	if jqRegexOneArg[form] {
		switch re.(type) {
		case string, []any:
		default:
			return jqErr(jqTypeName(re) + " not a string or array")
		}
	}
	if _, ok := v.(string); !ok {
		return jqErr(o.preview(v) + " cannot be matched, as it is not a string")
	}
	if _, ok := re.(string); !ok && !jqRegexOneArg[form] {
		return jqErr(o.preview(re) + " is not a string")
	}
	return jqRegexCheck(v, args[:1])
}

func jqMatchCheck(v any, _ []any) any {
	if s, ok := v.(string); ok && len(s) > jqMatchLimit {
		return fmt.Errorf("regular expression match on a string of %d bytes: over the fast path's limit of %d bytes (gojq's match offsets take quadratic time)", len(s), jqMatchLimit)
	}
	return v
}
func jqRegexCheck(v any, args []any) any {
	if re, ok := args[0].(string); ok {
		if len(re) > maxRegex {
			return fmt.Errorf("%v: %d bytes, over the fast path's limit of %d", errRegexTooBig, len(re), maxRegex)
		}
		if s, ok := v.(string); ok {
			if err := matchBound(len(re), len(s), func() bool { return false }); err != nil {
				return err
			}
		}
	}
	return v
}
