package shell

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/itchyny/gojq"
)

func init() {
	register(&command{names: []string{"jq"}, run: cmdJq, opts: opts("rjcsneSRM", "raw-output", "join-output", "compact-output", "slurp", "null-input",
		"exit-status", "sort-keys", "raw-input", "tab", "monochrome-output", "indent=", "arg=", "argjson="), ownArgs: true, check: jqCheck})
}

// jqCheck routes the options that cmdJq's loop does not take, and -C and
// -a, which it takes and ignores (colours, \u escapes).
func jqCheck(args []string) string {
	for len(args) > 0 {
		a := args[0]
		args = args[1:]
		if !strings.HasPrefix(a, "-") || a == "-" {
			continue
		}
		switch a {
		case "-r", "--raw-output", "-j", "--join-output", "-c", "--compact-output", "-s", "--slurp", "-n", "--null-input",
			"-e", "--exit-status", "-S", "--sort-keys", "-R", "--raw-input", "--tab", "-M", "--monochrome-output":
		case "--indent":
			if len(args) > 0 {
				args = args[1:]
			}
		case "--arg", "--argjson":
			if len(args) > 1 {
				args = args[2:]
			}
		default:
			if len(a) > 2 && a[1] != '-' && strings.Trim(a[1:], "rjcsneSRM") == "" {
				continue
			}
			return "jq " + a + " is not built in"
		}
	}
	return ""
}

func cmdJq(c *cmd) int {
	args := c.args[1:]
	raw, compact, slurp, nullIn, exitStatus, sortKeys, join, tab, rawIn := false, false, false, false, false, false, false, false, false
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
		case "-M", "--monochrome-output", "-C", "--color-output", "-a", "--ascii-output":
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
				values = append(values, normJSON(v))
			}
			args = args[2:]
		default:
			// bundled short flags like -rc
			if len(a) > 2 && a[1] != '-' && strings.Trim(a[1:], "rjcsneSRM") == "" {
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
	_ = sortKeys // gojq always sorts object keys
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
	q, err := gojq.Parse(filter)
	if err != nil {
		c.errorf("error: %v\ncompile error", err)
		return 3
	}
	jqBoundMul(q)
	code, err := gojq.Compile(q, gojq.WithVariables(names), gojq.WithEnvironLoader(func() []string { return exported(c.env) }),
		gojq.WithFunction(jqMulFunc, 2, 2, func(_ any, args []any) any { return c.jqMul(args[0], args[1]) }),
		gojq.WithFunction(jqAddFunc, 2, 2, func(_ any, args []any) any { return c.jqAdd(args[0], args[1]) }),
		gojq.WithFunction(jqMatchGuard, 0, 0, jqMatchCheck),
		gojq.WithFunction(jqRegexGuard, 1, 1, jqRegexCheck))
	if err != nil {
		c.errorf("error: %v\ncompile error", err)
		return 3
	}
	// read inputs
	var data []byte
	if len(files) == 0 && !(nullIn && !strings.Contains(filter, "input")) {
		files = []string{"-"}
	}
	for _, f := range files {
		b, err := c.readFile(f)
		if err != nil {
			c.errorf("error: Could not open %s: %s", f, errText(err))
			return 2
		}
		data = append(data, b...)
	}
	var inputs []any
	if rawIn {
		lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
		if slurp {
			inputs = []any{string(data)}
		} else if len(data) > 0 {
			for _, l := range lines {
				inputs = append(inputs, l)
			}
		}
	} else {
		// decoded values take some times the size of their text
		if !c.grow(4 * int64(len(data))) {
			return 2
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var all []any
		for {
			var v any
			if err := dec.Decode(&v); err == io.EOF {
				break
			} else if err != nil {
				c.errorf("error (at <stdin>:0): %v", err)
				return 2
			}
			all = append(all, normJSON(v))
		}
		if slurp {
			if all == nil {
				all = []any{}
			}
			inputs = []any{all}
		} else {
			inputs = all
		}
	}
	if nullIn {
		inputs = []any{nil}
	}
	status := 0
	var last any = false
	produced := false
	defer c.engine()()
	ctx := engineCtx{c.ctx, c.r.mem}
	for _, in := range inputs {
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
				if c.canceled() {
					return 5
				}
				c.out.Flush()
				fmt.Fprintf(c.stderr, "jq: error (at <stdin>:0): %v\n", err)
				status = 5
				break
			}
			produced = true
			last = v
			if s, ok := v.(string); ok && raw {
				c.out.WriteString(s)
			} else {
				c.out.WriteString(jqEncode(v, compact, indent, tab))
			}
			if !join {
				c.out.WriteString("\n")
			}
		}
	}
	if status == 0 && exitStatus {
		if !produced {
			return 4
		}
		if last == nil || last == false {
			return 1
		}
	}
	return status
}

// normJSON turns json.Number into the int or float64 gojq works with.
func normJSON(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil && i >= -1<<53 && i <= 1<<53 {
			return int(i)
		}
		f, _ := x.Float64()
		return f
	case []any:
		for i := range x {
			x[i] = normJSON(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = normJSON(x[k])
		}
	}
	return v
}

// jqEncode prints a value as jq does (keys sorted, as gojq keeps them).
func jqEncode(v any, compact bool, indent int, tab bool) string {
	var b strings.Builder
	unit := strings.Repeat(" ", indent)
	if tab {
		unit = "\t"
	}
	if indent == 0 && !tab {
		compact = true
	}
	var enc func(v any, depth int)
	nl := func(depth int) {
		if !compact {
			b.WriteString("\n" + strings.Repeat(unit, depth))
		}
	}
	enc = func(v any, depth int) {
		switch x := v.(type) {
		case nil:
			b.WriteString("null")
		case bool:
			b.WriteString(strconv.FormatBool(x))
		case int:
			b.WriteString(strconv.Itoa(x))
		case float64:
			if x == float64(int64(x)) && x < 1e17 && x > -1e17 {
				b.WriteString(strconv.FormatInt(int64(x), 10))
			} else {
				b.WriteString(strconv.FormatFloat(x, 'g', 17, 64))
			}
		case string:
			b.WriteString(jsonString(x))
		case []any:
			if len(x) == 0 {
				b.WriteString("[]")
				return
			}
			b.WriteString("[")
			for i, e := range x {
				if i > 0 {
					b.WriteString(",")
				}
				nl(depth + 1)
				enc(e, depth+1)
			}
			nl(depth)
			b.WriteString("]")
		case map[string]any:
			if len(x) == 0 {
				b.WriteString("{}")
				return
			}
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sortStrings(keys)
			b.WriteString("{")
			for i, k := range keys {
				if i > 0 {
					b.WriteString(",")
				}
				nl(depth + 1)
				b.WriteString(jsonString(k))
				b.WriteString(":")
				if !compact {
					b.WriteString(" ")
				}
				enc(x[k], depth+1)
			}
			nl(depth)
			b.WriteString("}")
		default:
			out, _ := gojq.Marshal(x)
			b.Write(out)
		}
	}
	enc(v, 0)
	return b.String()
}

func jsonString(s string) string {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	e.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// jqMulFunc and jqAddFunc are what a * b and a + b of a jq filter call
// (see jqBoundMul).
const (
	jqMulFunc = "_computerfs_mul"
	jqAddFunc = "_computerfs_add"
)

// jqBoundMul makes every a * b and a + b of the filter call jqMulFunc
// and jqAddFunc, which check a string repeated a number of times, or two
// strings or arrays put together, against the call's memory budget
// before they are made ("x" * 1e9 is one allocation of a GB, and
// reduce range(40) as $i ("x"; . + .) doubles a string 40 times).
func jqBoundMul(q *gojq.Query) {
	var walkQ func(q *gojq.Query)
	var walkT func(t *gojq.Term)
	walkQ = func(q *gojq.Query) {
		if q == nil {
			return
		}
		for _, fd := range q.FuncDefs {
			walkQ(fd.Body)
		}
		walkQ(q.Left)
		walkQ(q.Right)
		walkT(q.Term)
		switch q.Op {
		case gojq.OpMul:
			l, r := q.Left, q.Right
			*q = gojq.Query{Term: &gojq.Term{Type: gojq.TermTypeFunc, Func: &gojq.Func{Name: jqMulFunc, Args: []*gojq.Query{l, r}}}}
		case gojq.OpAdd:
			l, r := q.Left, q.Right
			*q = gojq.Query{Term: &gojq.Term{Type: gojq.TermTypeFunc, Func: &gojq.Func{Name: jqAddFunc, Args: []*gojq.Query{l, r}}}}
		}
	}
	walkT = func(t *gojq.Term) {
		if t == nil {
			return
		}
		if t.Index != nil {
			walkQ(t.Index.Start)
			walkQ(t.Index.End)
			if t.Index.Str != nil {
				for _, q := range t.Index.Str.Queries {
					walkQ(q)
				}
			}
		}
		if t.Func != nil {
			for _, a := range t.Func.Args {
				walkQ(a)
			}
			global := jqMatchFuncs[t.Func.Name] || t.Func.Name == "split" && len(t.Func.Args) == 2
			if global || t.Func.Name == "test" && len(t.Func.Args) > 0 {
				call := *t
				var guards []*gojq.Query
				if global {
					guards = append(guards, &gojq.Query{Term: &gojq.Term{Type: gojq.TermTypeFunc, Func: &gojq.Func{Name: jqMatchGuard}}})
				}
				if len(call.Func.Args) > 0 {
					guards = append(guards, &gojq.Query{Term: &gojq.Term{Type: gojq.TermTypeFunc, Func: &gojq.Func{Name: jqRegexGuard, Args: call.Func.Args[:1]}}})
				}
				right := &gojq.Query{Term: &call}
				for i := len(guards) - 1; i >= 0; i-- {
					right = &gojq.Query{Left: guards[i], Op: gojq.OpPipe, Right: right}
				}
				*t = gojq.Term{Type: gojq.TermTypeQuery, Query: right}
				return
			}
		}
		if t.Object != nil {
			for _, kv := range t.Object.KeyVals {
				walkQ(kv.KeyQuery)
				if kv.Val != nil {
					walkQ(kv.Val)
				}
				if kv.KeyString != nil {
					for _, q := range kv.KeyString.Queries {
						walkQ(q)
					}
				}
			}
		}
		if t.Array != nil {
			walkQ(t.Array.Query)
		}
		if t.Unary != nil {
			walkT(t.Unary.Term)
		}
		if t.Str != nil {
			for _, q := range t.Str.Queries {
				walkQ(q)
			}
		}
		if t.If != nil {
			walkQ(t.If.Cond)
			walkQ(t.If.Then)
			for _, e := range t.If.Elif {
				walkQ(e.Cond)
				walkQ(e.Then)
			}
			walkQ(t.If.Else)
		}
		if t.Try != nil {
			walkQ(t.Try.Body)
			walkQ(t.Try.Catch)
		}
		if t.Reduce != nil {
			walkQ(t.Reduce.Query)
			walkQ(t.Reduce.Start)
			walkQ(t.Reduce.Update)
		}
		if t.Foreach != nil {
			walkQ(t.Foreach.Query)
			walkQ(t.Foreach.Start)
			walkQ(t.Foreach.Update)
			walkQ(t.Foreach.Extract)
		}
		if t.Label != nil {
			walkQ(t.Label.Body)
		}
		if t.Query != nil {
			walkQ(t.Query)
		}
		for _, s := range t.SuffixList {
			if s.Index != nil {
				walkQ(s.Index.Start)
				walkQ(s.Index.End)
			}
		}
	}
	walkQ(q)
}

var jqMul, jqAdd = jqBinop("*"), jqBinop("+")

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
func (c *cmd) jqAdd(a, b any) any {
	size := 0
	switch x := a.(type) {
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
	v, _ := jqAdd.Run(nil, a, b).Next()
	return v
}

// jqMul is a * b, once a string repeated fits the call's budget.
func (c *cmd) jqMul(a, b any) any {
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
	}
	v, _ := jqMul.Run(nil, a, b).Next()
	return v
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

// jqRegexGuard(re) is called before the jq functions that compile a
// regular expression: gojq compiles it without a look at the call's end
// (see maxRegex).
const jqRegexGuard = "_computerfs_regex_guard"

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

func jqMatchCheck(v any, _ []any) any {
	if s, ok := v.(string); ok && len(s) > jqMatchLimit {
		return fmt.Errorf("regular expression match on a string of %d bytes: over the fast path's limit of %d bytes (gojq's match offsets take quadratic time)", len(s), jqMatchLimit)
	}
	return v
}
