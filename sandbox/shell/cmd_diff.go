package shell

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
)

func init() {
	register(&command{names: []string{"diff"}, run: cmdDiff, opts: opts("uU:qbwBiNraC:", "unified?", "brief", "ignore-space-change", "ignore-all-space", "ignore-blank-lines",
		"ignore-case", "new-file", "recursive", "text", "color?", "label=", "strip-trailing-cr"), ignored: []string{"B", "ignore-blank-lines", "C", "strip-trailing-cr"}})
}

// editOp is one line of an edit script: ' ' kept, '-' removed, '+' added.
type editOp struct {
	kind byte
	a, b int // line indexes in a and b
}

// lineDiff computes a shortest edit script (Myers' algorithm). Its trace
// is the command's memory, and it stops with the call (then it returns
// nil).
func (c *cmd) lineDiff(a, b []string) []editOp {
	n, m := len(a), len(b)
	max := n + m
	v := make([]int, 2*max+2)
	var trace [][]int
	for d := 0; d <= max; d++ {
		if c.canceled() || !c.grow(int64(8*len(v))) {
			return nil
		}
		vc := make([]int, len(v))
		copy(vc, v)
		trace = append(trace, vc)
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || k != d && v[max+k-1] < v[max+k+1] {
				x = v[max+k+1]
			} else {
				x = v[max+k-1] + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x++
				y++
			}
			v[max+k] = x
			if x >= n && y >= m {
				return backtrack(trace, a, b, d, max)
			}
		}
	}
	return nil
}

func backtrack(trace [][]int, a, b []string, d, max int) []editOp {
	x, y := len(a), len(b)
	var ops []editOp
	for ; d > 0; d-- {
		v := trace[d]
		k := x - y
		var pk int
		if k == -d || k != d && v[max+k-1] < v[max+k+1] {
			pk = k + 1
		} else {
			pk = k - 1
		}
		px := v[max+pk]
		py := px - pk
		for x > px && y > py {
			x--
			y--
			ops = append(ops, editOp{' ', x, y})
		}
		if x == px {
			y--
			ops = append(ops, editOp{'+', x, y})
		} else {
			x--
			ops = append(ops, editOp{'-', x, y})
		}
	}
	for x > 0 && y > 0 {
		x--
		y--
		ops = append(ops, editOp{' ', x, y})
	}
	for i, j := 0, len(ops)-1; i < j; i, j = i+1, j-1 {
		ops[i], ops[j] = ops[j], ops[i]
	}
	return ops
}

// gnuShift places the changes of an edit script where GNU diff puts
// them: among the equally short scripts it picks the one whose runs of
// changes are merged where they can be and moved as far down as they go,
// then back up to line up with a run of changes in the other file.
func gnuShift(a, b []string, ops []editOp) []editOp {
	// changed marks, with an unchanged sentinel line before and after
	ca := make([]bool, len(a)+2)
	cb := make([]bool, len(b)+2)
	for _, o := range ops {
		switch o.kind {
		case '-':
			ca[o.a+1] = true
		case '+':
			cb[o.b+1] = true
		}
	}
	shiftRuns(a, ca, cb)
	shiftRuns(b, cb, ca)
	var out []editOp
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && ca[i+1]:
			out = append(out, editOp{'-', i, j})
			i++
		case j < len(b) && cb[j+1]:
			out = append(out, editOp{'+', i, j})
			j++
		default:
			out = append(out, editOp{' ', i, j})
			i++
			j++
		}
	}
	return out
}

// shiftRuns slides the runs of changed lines of one file (lines, marks
// ch, 1-based with sentinels) while the other file's marks (other) say
// where its runs are.
func shiftRuns(lines []string, ch, other []bool) {
	n := len(lines)
	line := func(i int) string { return lines[i-1] }
	i, j := 1, 1
	for {
		for i <= n && !ch[i] {
			for other[j] {
				j++
			}
			j++
			i++
		}
		if i > n {
			return
		}
		start := i
		for ch[i] {
			i++
		}
		for other[j] {
			j++
		}
		corresponding := n + 1
		for {
			run := i - start
			// back, while the line before the run equals its last line
			for start > 1 && line(start-1) == line(i-1) {
				start--
				ch[start] = true
				i--
				ch[i] = false
				for ch[start-1] {
					start--
				}
				j--
				for other[j] {
					j--
				}
			}
			corresponding = n + 1
			if other[j-1] {
				corresponding = i
			}
			// forward, while the run's first line equals the line after it
			for i <= n && line(start) == line(i) {
				ch[start] = false
				start++
				ch[i] = true
				i++
				for ch[i] {
					i++
				}
				j++
				for other[j] {
					corresponding = i
					j++
				}
			}
			if run == i-start {
				break
			}
		}
		for corresponding < i {
			start--
			ch[start] = true
			i--
			ch[i] = false
			j--
			for other[j] {
				j--
			}
		}
	}
}

func cmdDiff(c *cmd) int {
	opts, args, ok := c.flags()
	if !ok {
		return 2
	}
	unified, ctx, brief, ignSpace, ignAll, ignCase, recursive, newFile := false, 3, false, false, false, false, false, false
	var labels []string
	for _, o := range opts {
		switch o.name {
		case "u":
			unified = true
		case "unified":
			unified = true
			if o.val != "" {
				ctx = atoiOr(o.val, 3)
			}
		case "U":
			unified, ctx = true, atoiOr(o.val, 3)
		case "q", "brief":
			brief = true
		case "b", "ignore-space-change":
			ignSpace = true
		case "w", "ignore-all-space":
			ignAll = true
		case "i", "ignore-case":
			ignCase = true
		case "r", "recursive":
			recursive = true
		case "N", "new-file":
			newFile = true
		case "label":
			labels = append(labels, o.val)
		}
	}
	if len(args) != 2 {
		if len(args) < 2 {
			c.errorf("missing operand after '%s'", strings.Join(append([]string{"diff"}, args...), " "))
		} else {
			c.errorf("extra operand '%s'", args[2])
		}
		fmt.Fprintf(c.stderr, "diff: Try 'diff --help' for more information.\n")
		return 2
	}
	norm := func(s string) string {
		if ignAll {
			s = strings.Join(strings.Fields(s), "")
		} else if ignSpace {
			s = strings.Join(strings.Fields(s), " ")
		}
		if ignCase {
			s = strings.ToLower(s)
		}
		return s
	}
	d := &differ{c: c, unified: unified, ctx: ctx, brief: brief, norm: norm, labels: labels, recursive: recursive, newFile: newFile}
	a, b := args[0], args[1]
	fa, errA := c.stat(a)
	fb, errB := c.stat(b)
	if errA == nil && fa.IsDir() && errB == nil && !fb.IsDir() {
		a = strings.TrimSuffix(a, "/") + "/" + baseName(b)
	} else if errB == nil && fb.IsDir() && errA == nil && !fa.IsDir() {
		b = strings.TrimSuffix(b, "/") + "/" + baseName(a)
	}
	return d.diff(a, b)
}

type differ struct {
	c                  *cmd
	unified, brief     bool
	recursive, newFile bool
	ctx                int
	norm               func(string) string
	labels             []string
}

func (d *differ) diff(a, b string) int {
	c := d.c
	fa, errA := c.stat(a)
	fb, errB := c.stat(b)
	if errA != nil && !(d.newFile && errB == nil) {
		c.fail(a, errA)
		return 2
	}
	if errB != nil && !(d.newFile && errA == nil) {
		c.fail(b, errB)
		return 2
	}
	if errA == nil && fa.IsDir() || errB == nil && fb.IsDir() {
		return d.diffDirs(a, b)
	}
	da, db := []byte{}, []byte{}
	var err error
	if errA == nil {
		if da, err = c.readFile(a); err != nil {
			c.fail(a, err)
			return 2
		}
	}
	if errB == nil {
		if db, err = c.readFile(b); err != nil {
			c.fail(b, err)
			return 2
		}
	}
	if string(da) == string(db) {
		return 0
	}
	la, lb := splitLines(string(da)), splitLines(string(db))
	na, nb := make([]string, len(la)), make([]string, len(lb))
	for i, l := range la {
		na[i] = d.norm(strings.TrimSuffix(l, "\n"))
	}
	for i, l := range lb {
		nb[i] = d.norm(strings.TrimSuffix(l, "\n"))
	}
	// a missing final newline makes lines differ
	if len(la) > 0 && !strings.HasSuffix(la[len(la)-1], "\n") {
		na[len(na)-1] += "\x00"
	}
	if len(lb) > 0 && !strings.HasSuffix(lb[len(lb)-1], "\n") {
		nb[len(nb)-1] += "\x00"
	}
	script := c.lineDiff(na, nb)
	if script == nil && len(na)+len(nb) > 0 {
		return 2 // stopped
	}
	ops := gnuShift(na, nb, script)
	changed := false
	for _, o := range ops {
		if o.kind != ' ' {
			changed = true
		}
	}
	if !changed {
		return 0
	}
	if d.brief {
		fmt.Fprintf(c.out, "Files %s and %s differ\n", a, b)
		return 1
	}
	if d.unified {
		la0, lb0 := a, b
		ta, tb := "", ""
		if errA == nil {
			ta = fmtStatTime(fa.mtime)
		} else {
			ta = "1970-01-01 00:00:00.000000000 +0000"
		}
		if errB == nil {
			tb = fmtStatTime(fb.mtime)
		} else {
			tb = "1970-01-01 00:00:00.000000000 +0000"
		}
		hA, hB := la0+"\t"+ta, lb0+"\t"+tb
		if len(d.labels) > 0 {
			hA = d.labels[0]
		}
		if len(d.labels) > 1 {
			hB = d.labels[1]
		}
		fmt.Fprintf(c.out, "--- %s\n+++ %s\n", hA, hB)
		d.unifiedHunks(ops, la, lb)
	} else {
		d.normal(ops, la, lb)
	}
	return 1
}

func (d *differ) diffDirs(a, b string) int {
	c := d.c
	if treeTooDeep(c.abs(a)) || treeTooDeep(c.abs(b)) {
		c.errorf("%s: %s", a, errText(syscall.ENAMETOOLONG))
		return 2
	}
	ea, _ := c.readDir(a)
	eb, _ := c.readDir(b)
	names := map[string]int{}
	for _, e := range ea {
		names[e.name] |= 1
	}
	for _, e := range eb {
		names[e.name] |= 2
	}
	var list []string
	for n := range names {
		list = append(list, n)
	}
	sortStrings(list)
	status := 0
	for _, n := range list {
		pa, pb := strings.TrimSuffix(a, "/")+"/"+n, strings.TrimSuffix(b, "/")+"/"+n
		switch names[n] {
		case 1:
			if d.newFile {
				status = max(status, d.diff(pa, pb))
			} else {
				fmt.Fprintf(c.out, "Only in %s: %s\n", a, n)
				status = max(status, 1)
			}
			continue
		case 2:
			if d.newFile {
				status = max(status, d.diff(pa, pb))
			} else {
				fmt.Fprintf(c.out, "Only in %s: %s\n", b, n)
				status = max(status, 1)
			}
			continue
		}
		fa, _ := c.stat(pa)
		fb, _ := c.stat(pb)
		if fa != nil && fb != nil && fa.IsDir() && fb.IsDir() {
			if d.recursive {
				status = max(status, d.diffDirs(pa, pb))
			} else {
				fmt.Fprintf(c.out, "Common subdirectories: %s and %s\n", pa, pb)
			}
			continue
		}
		if d.unified && !d.brief {
			// GNU prints the command for each pair
			da, _ := c.readFile(pa)
			db, _ := c.readFile(pb)
			if string(da) != string(db) {
				flag := "-u"
				if d.recursive {
					flag = "-u -r"
				}
				fmt.Fprintf(c.out, "diff %s %s %s\n", flag, pa, pb)
			}
		}
		status = max(status, d.diff(pa, pb))
	}
	return status
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func writeLine(c *cmd, prefix, l string) {
	c.out.WriteString(prefix + l)
	if !strings.HasSuffix(l, "\n") {
		c.out.WriteString("\n\\ No newline at end of file\n")
	}
}

// hunk is a unified diff's hunk: its edits, context included, and the
// lines it covers on each side.
type hunk struct {
	ops                        []editOp
	aStart, aLen, bStart, bLen int
}

// ranges is the hunk's header without the @@: "-a,n +b,m", the way diff
// -u and git write it.
func (h hunk) ranges() string {
	rng := func(s, n int) string {
		switch n {
		case 1:
			return strconv.Itoa(s + 1)
		case 0:
			return fmt.Sprintf("%d,0", s)
		}
		return fmt.Sprintf("%d,%d", s+1, n)
	}
	return "-" + rng(h.aStart, h.aLen) + " +" + rng(h.bStart, h.bLen)
}

// hunks groups edits into unified hunks with ctx lines of context;
// changes less than 2*ctx apart share a hunk.
func hunks(ops []editOp, ctx int) []hunk {
	var out []hunk
	i := 0
	for i < len(ops) {
		for i < len(ops) && ops[i].kind == ' ' {
			i++
		}
		if i >= len(ops) {
			break
		}
		start := max(0, i-ctx)
		end := i
		for j := i; j < len(ops); j++ {
			if ops[j].kind != ' ' {
				end = j
			} else if j-end > 2*ctx {
				break
			}
		}
		stop := min(len(ops), end+ctx+1)
		h := hunk{ops: ops[start:stop], aStart: -1, bStart: -1}
		for _, o := range h.ops {
			if o.kind != '+' {
				if h.aStart < 0 {
					h.aStart = o.a
				}
				h.aLen++
			}
			if o.kind != '-' {
				if h.bStart < 0 {
					h.bStart = o.b
				}
				h.bLen++
			}
		}
		if h.aStart < 0 {
			h.aStart = ops[start].a
		}
		if h.bStart < 0 {
			h.bStart = ops[start].b
		}
		out = append(out, h)
		i = stop
	}
	return out
}

func (d *differ) unifiedHunks(ops []editOp, la, lb []string) {
	c := d.c
	for _, h := range hunks(ops, d.ctx) {
		fmt.Fprintf(c.out, "@@ %s @@\n", h.ranges())
		for _, o := range h.ops {
			switch o.kind {
			case ' ':
				writeLine(c, " ", la[o.a])
			case '-':
				writeLine(c, "-", la[o.a])
			case '+':
				writeLine(c, "+", lb[o.b])
			}
		}
	}
}

func (d *differ) normal(ops []editOp, la, lb []string) {
	c := d.c
	i := 0
	for i < len(ops) {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		j := i
		var dels, adds []editOp
		for j < len(ops) && ops[j].kind != ' ' {
			if ops[j].kind == '-' {
				dels = append(dels, ops[j])
			} else {
				adds = append(adds, ops[j])
			}
			j++
		}
		rng := func(a, b int) string {
			if a == b {
				return fmt.Sprintf("%d", a)
			}
			return fmt.Sprintf("%d,%d", a, b)
		}
		switch {
		case len(adds) == 0:
			fmt.Fprintf(c.out, "%sd%d\n", rng(dels[0].a+1, dels[len(dels)-1].a+1), dels[0].b)
		case len(dels) == 0:
			fmt.Fprintf(c.out, "%da%s\n", adds[0].a, rng(adds[0].b+1, adds[len(adds)-1].b+1))
		default:
			fmt.Fprintf(c.out, "%sc%s\n", rng(dels[0].a+1, dels[len(dels)-1].a+1), rng(adds[0].b+1, adds[len(adds)-1].b+1))
		}
		for _, o := range dels {
			writeLine(c, "< ", la[o.a])
		}
		if len(dels) > 0 && len(adds) > 0 {
			c.out.WriteString("---\n")
		}
		for _, o := range adds {
			writeLine(c, "> ", lb[o.b])
		}
		i = j
	}
}
