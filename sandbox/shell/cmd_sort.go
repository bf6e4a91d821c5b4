package shell

import (
	"bufio"
	"io"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

func init() {
	register(&command{names: []string{"sort"}, run: cmdSort, opts: opts("nrufk:t:hbVsdgMo:zcC", "numeric-sort", "reverse", "unique", "ignore-case", "key=", "field-separator=",
		"human-numeric-sort", "ignore-leading-blanks", "version-sort", "stable", "output=", "general-numeric-sort", "check?", "dictionary-order"), ignored: []string{"s", "stable", "d", "dictionary-order", "M", "z"}})
}

type sortKey struct {
	f1, c1, f2, c2        int
	numeric, rev, fold, h bool
	blanks                bool
}

func cmdSort(c *cmd) int {
	opts, files, ok := c.flags()
	if !ok {
		return 2
	}
	var numeric, rev, uniq, fold, human, blanks, version, check bool
	sep, output := "", ""
	var keys []sortKey
	for _, o := range opts {
		switch o.name {
		case "n", "numeric-sort", "g", "general-numeric-sort":
			numeric = true
		case "r", "reverse":
			rev = true
		case "u", "unique":
			uniq = true
		case "f", "ignore-case":
			fold = true
		case "h", "human-numeric-sort":
			human = true
		case "b", "ignore-leading-blanks":
			blanks = true
		case "V", "version-sort":
			version = true
		case "t", "field-separator":
			sep = o.val
		case "o", "output":
			output = o.val
		case "c", "C", "check":
			check = true
		case "k", "key":
			k, ok := parseKey(o.val)
			if !ok {
				c.errorf("invalid key '%s'", o.val)
				return 2
			}
			keys = append(keys, k)
		}
	}
	var lines []string
	status := c.eachInput(files, func(name string, r io.Reader) error {
		ls, err := c.readLines(r)
		for _, l := range ls {
			lines = append(lines, strings.TrimSuffix(l, "\n"))
		}
		return err
	})
	if status != 0 {
		return 2
	}
	global := sortKey{numeric: numeric, rev: rev, fold: fold, h: human, blanks: blanks}
	field := func(l string, k sortKey) string {
		if k.f1 == 0 {
			return l
		}
		var starts, ends []int
		if sep != "" {
			i := 0
			for _, f := range strings.Split(l, sep) {
				starts = append(starts, i)
				ends = append(ends, i+len(f))
				i += len(f) + len(sep)
			}
		} else {
			i := 0
			for i < len(l) {
				s := i
				for i < len(l) && (l[i] == ' ' || l[i] == '\t') {
					i++
				}
				for i < len(l) && l[i] != ' ' && l[i] != '\t' {
					i++
				}
				starts = append(starts, s)
				ends = append(ends, i)
			}
		}
		if k.f1 > len(starts) {
			return ""
		}
		b := starts[k.f1-1]
		if k.blanks || sep == "" && (k.numeric || k.h) {
			for b < len(l) && (l[b] == ' ' || l[b] == '\t') {
				b++
			}
		}
		if k.c1 > 0 {
			b = min(b+k.c1-1, len(l))
		}
		e := len(l)
		if k.f2 > 0 {
			if k.f2 <= len(ends) {
				e = ends[k.f2-1]
				if k.c2 > 0 {
					e = min(starts[k.f2-1]+k.c2, len(l))
				}
			}
		}
		if e < b {
			return ""
		}
		return l[b:e]
	}
	cmpKey := func(a, b string, k sortKey) int {
		if k.blanks {
			a, b = strings.TrimLeft(a, " \t"), strings.TrimLeft(b, " \t")
		}
		var r int
		switch {
		case k.numeric || k.h:
			fa, fb := numPrefix(a, k.h), numPrefix(b, k.h)
			switch {
			case fa < fb:
				r = -1
			case fa > fb:
				r = 1
			}
		case version:
			r = versionCmp(a, b)
		case k.fold:
			r = strings.Compare(strings.ToUpper(a), strings.ToUpper(b))
		default:
			r = strings.Compare(a, b)
		}
		if k.rev {
			r = -r
		}
		return r
	}
	cmp := func(a, b string) int {
		for _, k := range keys {
			if !k.numeric && !k.rev && !k.fold && !k.h && !k.blanks {
				k.numeric, k.rev, k.fold, k.h, k.blanks = global.numeric, global.rev, global.fold, global.h, global.blanks
			}
			if r := cmpKey(field(a, k), field(b, k), k); r != 0 {
				return r
			}
		}
		if len(keys) == 0 {
			if r := cmpKey(a, b, global); r != 0 {
				return r
			}
		}
		if uniq {
			return 0
		}
		// last resort: the whole line, bytewise
		r := strings.Compare(a, b)
		if rev {
			r = -r
		}
		return r
	}
	if check {
		for i := 1; i < len(lines); i++ {
			if cmp(lines[i-1], lines[i]) > 0 {
				c.errorf("-:%d: disorder: %s", i+1, lines[i])
				return 1
			}
		}
		return 0
	}
	sort.SliceStable(lines, func(i, j int) bool { return cmp(lines[i], lines[j]) < 0 })
	var w io.Writer = c.out
	if output != "" {
		f, err := c.create(output)
		if err != nil {
			c.errorf("open failed: %s: %s", output, errText(err))
			return 2
		}
		defer f.Close()
		bw := bufio.NewWriter(f)
		defer bw.Flush()
		w = bw
	}
	for i, l := range lines {
		if uniq && i > 0 && cmp(lines[i-1], l) == 0 {
			continue
		}
		io.WriteString(w, l+"\n")
	}
	return 0
}

func parseKey(s string) (sortKey, bool) {
	var k sortKey
	parse := func(p string) (int, int, string, bool) {
		i := 0
		for i < len(p) && p[i] >= '0' && p[i] <= '9' {
			i++
		}
		f, err := strconv.Atoi(p[:i])
		if err != nil {
			return 0, 0, "", false
		}
		ch := 0
		if i < len(p) && p[i] == '.' {
			j := i + 1
			for j < len(p) && p[j] >= '0' && p[j] <= '9' {
				j++
			}
			ch, _ = strconv.Atoi(p[i+1 : j])
			i = j
		}
		return f, ch, p[i:], true
	}
	a, b, _ := strings.Cut(s, ",")
	f, ch, flags, ok := parse(a)
	if !ok || f == 0 {
		return k, false
	}
	k.f1, k.c1 = f, ch
	all := flags
	if b != "" {
		f, ch, flags2, ok := parse(b)
		if !ok {
			return k, false
		}
		k.f2, k.c2 = f, ch
		all += flags2
	}
	for _, fl := range all {
		switch fl {
		case 'n', 'g':
			k.numeric = true
		case 'r':
			k.rev = true
		case 'f':
			k.fold = true
		case 'h':
			k.h = true
		case 'b':
			k.blanks = true
		}
	}
	return k, true
}

// numPrefix is the number at the start of s (0 if none), for sort -n/-h.
func numPrefix(s string, human bool) float64 {
	s = strings.TrimLeft(s, " \t")
	i := 0
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		i++
	}
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	v, _ := strconv.ParseFloat(s[:i], 64)
	if human && i < len(s) {
		if p := strings.IndexByte("KMGTPE", byte(unicode.ToUpper(rune(s[i])))); p >= 0 {
			for j := 0; j <= p; j++ {
				v *= 1024
			}
		}
	}
	return v
}

func versionCmp(a, b string) int {
	for a != "" && b != "" {
		if isDigit(a[0]) && isDigit(b[0]) {
			i, j := 0, 0
			for i < len(a) && isDigit(a[i]) {
				i++
			}
			for j < len(b) && isDigit(b[j]) {
				j++
			}
			na, _ := strconv.ParseUint(a[:i], 10, 64)
			nb, _ := strconv.ParseUint(b[:j], 10, 64)
			if na != nb {
				if na < nb {
					return -1
				}
				return 1
			}
			a, b = a[i:], b[j:]
			continue
		}
		if a[0] != b[0] {
			if a[0] < b[0] {
				return -1
			}
			return 1
		}
		a, b = a[1:], b[1:]
	}
	return len(a) - len(b)
}
