package shell

import (
	"bufio"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

func init() {
	register(cmdSort, "sort")
	register(cmdUniq, "uniq")
	register(cmdCut, "cut")
	register(cmdTr, "tr")
	register(cmdComm, "comm")
	register(cmdPaste, "paste")
	register(cmdBase64, "base64")
	register(cmdHash, "md5sum", "sha1sum", "sha256sum", "sha512sum")
	register(cmdXargs, "xargs")
}

type sortKey struct {
	f1, c1, f2, c2        int
	numeric, rev, fold, h bool
	blanks                bool
}

func cmdSort(c *cmd) int {
	opts, files, ok := c.flags("nrufk:t:hbVsdgMo:zcC", "numeric-sort", "reverse", "unique", "ignore-case", "key=", "field-separator=",
		"human-numeric-sort", "ignore-leading-blanks", "version-sort", "stable", "output=", "general-numeric-sort", "check?", "dictionary-order")
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

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

func cmdUniq(c *cmd) int {
	opts, files, ok := c.flags("cdDuif:s:w:", "count", "repeated", "all-repeated?", "unique", "ignore-case", "skip-fields=", "skip-chars=", "check-chars=")
	if !ok {
		return 1
	}
	var count, repeated, unique, fold bool
	skipF, skipC, checkC := 0, 0, -1
	for _, o := range opts {
		switch o.name {
		case "c", "count":
			count = true
		case "d", "repeated", "D", "all-repeated":
			repeated = true
		case "u", "unique":
			unique = true
		case "i", "ignore-case":
			fold = true
		case "f", "skip-fields":
			skipF, _ = strconv.Atoi(o.val)
		case "s", "skip-chars":
			skipC, _ = strconv.Atoi(o.val)
		case "w", "check-chars":
			checkC, _ = strconv.Atoi(o.val)
		}
	}
	in := files
	var outName string
	if len(files) > 1 {
		in, outName = files[:1], files[1]
	}
	var lines []string
	status := c.eachInput(in, func(name string, r io.Reader) error {
		ls, err := c.readLines(r)
		for _, l := range ls {
			lines = append(lines, strings.TrimSuffix(l, "\n"))
		}
		return err
	})
	if status != 0 {
		return 1
	}
	key := func(l string) string {
		for i := 0; i < skipF; i++ {
			l = strings.TrimLeft(l, " \t")
			j := strings.IndexAny(l, " \t")
			if j < 0 {
				l = ""
				break
			}
			l = l[j:]
		}
		if skipC > 0 {
			l = l[min(skipC, len(l)):]
		}
		if checkC >= 0 && checkC < len(l) {
			l = l[:checkC]
		}
		if fold {
			l = strings.ToLower(l)
		}
		return l
	}
	var w io.Writer = c.out
	if outName != "" {
		f, err := c.create(outName)
		if err != nil {
			c.fail(outName, err)
			return 1
		}
		defer f.Close()
		w = f
	}
	for i := 0; i < len(lines); {
		j := i + 1
		for j < len(lines) && key(lines[j]) == key(lines[i]) {
			j++
		}
		n := j - i
		if (!repeated || n > 1) && (!unique || n == 1) {
			if count {
				io.WriteString(w, fmt.Sprintf("%7d ", n))
			}
			io.WriteString(w, lines[i]+"\n")
		}
		i = j
	}
	return 0
}

// parseList reads cut's LIST: 1,3-5,7-.
func parseList(s string) (func(int) bool, bool) {
	type rng struct{ a, b int }
	var rs []rng
	for _, part := range strings.Split(s, ",") {
		a, b, isRange := strings.Cut(part, "-")
		r := rng{1, 1 << 30}
		var err error
		if a != "" {
			if r.a, err = strconv.Atoi(a); err != nil || r.a < 1 {
				return nil, false
			}
		}
		if !isRange {
			r.b = r.a
		} else if b != "" {
			if r.b, err = strconv.Atoi(b); err != nil {
				return nil, false
			}
		}
		if a == "" && !isRange {
			return nil, false
		}
		rs = append(rs, r)
	}
	return func(i int) bool {
		for _, r := range rs {
			if i >= r.a && i <= r.b {
				return true
			}
		}
		return false
	}, true
}

func cmdCut(c *cmd) int {
	opts, files, ok := c.flags("d:f:c:b:sz", "delimiter=", "fields=", "characters=", "bytes=", "only-delimited", "complement", "output-delimiter=")
	if !ok {
		return 1
	}
	delim, mode, list, only, complement, outDelim := "\t", byte(0), "", false, false, "\x00"
	for _, o := range opts {
		switch o.name {
		case "d", "delimiter":
			delim = o.val
			if len(delim) != 1 {
				c.errorf("the delimiter must be a single character")
				return 1
			}
		case "f", "fields":
			mode, list = 'f', o.val
		case "c", "characters", "b", "bytes":
			mode, list = 'c', o.val
		case "s", "only-delimited":
			only = true
		case "complement":
			complement = true
		case "output-delimiter":
			outDelim = o.val
		}
	}
	if mode == 0 {
		c.errorf("you must specify a list of bytes, characters, or fields")
		return 1
	}
	sel, ok := parseList(list)
	if !ok {
		c.errorf("invalid field value '%s'", list)
		return 1
	}
	want := func(i int) bool { return sel(i) != complement }
	return c.eachInput(files, func(name string, r io.Reader) error {
		br := bufio.NewReader(r)
		for {
			l, err := c.readLine(br)
			if l == "" && err != nil {
				if err == io.EOF {
					return nil
				}
				return err
			}
			l = strings.TrimSuffix(l, "\n")
			if mode == 'c' {
				var b strings.Builder
				for i := 0; i < len(l); i++ {
					if want(i + 1) {
						b.WriteByte(l[i])
					}
				}
				c.out.WriteString(b.String() + "\n")
				continue
			}
			if !strings.Contains(l, delim) {
				if !only {
					c.out.WriteString(l + "\n")
				}
				continue
			}
			od := delim
			if outDelim != "\x00" {
				od = outDelim
			}
			var out []string
			for i, f := range strings.Split(l, delim) {
				if want(i + 1) {
					out = append(out, f)
				}
			}
			c.out.WriteString(strings.Join(out, od) + "\n")
		}
	})
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
	opts, sets, ok := c.flags("dscC", "delete", "squeeze-repeats", "complement")
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

func cmdComm(c *cmd) int {
	opts, files, ok := c.flags("123", "check-order", "nocheck-order", "output-delimiter=")
	if !ok {
		return 1
	}
	hide := map[string]bool{}
	delim := "\t"
	for _, o := range opts {
		if o.name == "output-delimiter" {
			delim = o.val
		} else {
			hide[o.name] = true
		}
	}
	if len(files) != 2 {
		c.errorf("missing operand")
		return 1
	}
	var a, b []string
	for i, f := range files {
		data, err := c.readFile(f)
		if err != nil {
			c.fail(f, err)
			return 1
		}
		ls := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
		if len(data) == 0 {
			ls = nil
		}
		if i == 0 {
			a = ls
		} else {
			b = ls
		}
	}
	col := func(n int, s string) {
		if hide[strconv.Itoa(n)] {
			return
		}
		pre := ""
		for i := 1; i < n; i++ {
			if !hide[strconv.Itoa(i)] {
				pre += delim
			}
		}
		c.out.WriteString(pre + s + "\n")
	}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j >= len(b) || i < len(a) && a[i] < b[j]:
			col(1, a[i])
			i++
		case i >= len(a) || b[j] < a[i]:
			col(2, b[j])
			j++
		default:
			col(3, a[i])
			i++
			j++
		}
	}
	return 0
}

func cmdPaste(c *cmd) int {
	opts, files, ok := c.flags("d:s", "delimiters=", "serial")
	if !ok {
		return 1
	}
	delims, serial := "\t", false
	for _, o := range opts {
		switch o.name {
		case "d", "delimiters":
			delims, _ = unescape(o.val, false)
		case "s", "serial":
			serial = true
		}
	}
	if len(files) == 0 {
		files = []string{"-"}
	}
	var cols [][]string
	for _, f := range files {
		data, err := c.readFile(f)
		if err != nil {
			c.fail(f, err)
			return 1
		}
		s := strings.TrimSuffix(string(data), "\n")
		if len(data) == 0 {
			cols = append(cols, nil)
		} else {
			cols = append(cols, strings.Split(s, "\n"))
		}
	}
	d := func(i int) string {
		if delims == "" {
			return ""
		}
		return string([]rune(delims)[i%len([]rune(delims))])
	}
	if serial {
		for _, col := range cols {
			var b strings.Builder
			for i, v := range col {
				if i > 0 {
					b.WriteString(d(i - 1))
				}
				b.WriteString(v)
			}
			c.out.WriteString(b.String() + "\n")
		}
		return 0
	}
	n := 0
	for _, col := range cols {
		n = max(n, len(col))
	}
	for i := 0; i < n; i++ {
		var b strings.Builder
		for j, col := range cols {
			if j > 0 {
				b.WriteString(d(j - 1))
			}
			if i < len(col) {
				b.WriteString(col[i])
			}
		}
		c.out.WriteString(b.String() + "\n")
	}
	return 0
}

func cmdBase64(c *cmd) int {
	opts, files, ok := c.flags("dw:i", "decode", "wrap=", "ignore-garbage")
	if !ok {
		return 1
	}
	decode, wrap := false, 76
	for _, o := range opts {
		switch o.name {
		case "d", "decode":
			decode = true
		case "w", "wrap":
			wrap, _ = strconv.Atoi(o.val)
		}
	}
	if len(files) > 1 {
		c.errorf("extra operand '%s'", files[1])
		return 1
	}
	return c.eachInput(files, func(name string, r io.Reader) error {
		data, err := c.readAll(r)
		if err != nil {
			return err
		}
		if decode {
			clean := strings.Map(func(r rune) rune {
				if r == '\n' || r == '\r' || r == ' ' {
					return -1
				}
				return r
			}, string(data))
			out, err := base64.StdEncoding.DecodeString(clean)
			c.out.Write(out)
			if err != nil {
				c.out.Flush()
				c.errorf("invalid input")
				return errSilent
			}
			return nil
		}
		enc := base64.StdEncoding.EncodeToString(data)
		if wrap <= 0 {
			c.out.WriteString(enc)
			if enc != "" {
				c.out.WriteString("\n")
			}
			return nil
		}
		for len(enc) > wrap {
			c.out.WriteString(enc[:wrap] + "\n")
			enc = enc[wrap:]
		}
		if enc != "" {
			c.out.WriteString(enc + "\n")
		}
		return nil
	})
}

func cmdHash(c *cmd) int {
	opts, files, ok := c.flags("cbtwz", "check", "binary", "text", "tag", "quiet", "status", "strict", "warn", "zero")
	if !ok {
		return 1
	}
	var newHash func() hash.Hash
	switch c.name {
	case "md5sum":
		newHash = md5.New
	case "sha1sum":
		newHash = sha1.New
	case "sha256sum":
		newHash = sha256.New
	default:
		newHash = sha512.New
	}
	check := false
	for _, o := range opts {
		if o.name == "c" || o.name == "check" {
			check = true
		}
	}
	if check {
		status := 0
		c.eachInput(files, func(name string, r io.Reader) error {
			lines, _ := c.readLines(r)
			for _, l := range lines {
				sum, file, ok := strings.Cut(strings.TrimSuffix(l, "\n"), "  ")
				if !ok {
					continue
				}
				f, err := c.open(file)
				res := "FAILED"
				if err == nil {
					h := newHash()
					io.Copy(h, f)
					f.Close()
					if hex.EncodeToString(h.Sum(nil)) == sum {
						res = "OK"
					}
				} else {
					res = "FAILED open or read"
				}
				if res != "OK" {
					status = 1
				}
				c.out.WriteString(file + ": " + res + "\n")
			}
			return nil
		})
		return status
	}
	return c.eachInput(files, func(name string, r io.Reader) error {
		h := newHash()
		if _, err := io.Copy(h, r); err != nil {
			return err
		}
		c.out.WriteString(hex.EncodeToString(h.Sum(nil)) + "  " + name + "\n")
		return nil
	})
}

func cmdXargs(c *cmd) int {
	// options stop at the first operand (the command)
	args := c.args[1:]
	maxArgs, replace, delim, nullSep, noRunEmpty, maxProcs, trace := 0, "", "", false, false, 1, false
	_ = maxProcs
	for len(args) > 0 && strings.HasPrefix(args[0], "-") && args[0] != "-" {
		a := args[0]
		val := func() (string, bool) {
			if len(a) > 2 && !strings.HasPrefix(a, "--") {
				return a[2:], true
			}
			if i := strings.IndexByte(a, '='); i > 0 {
				return a[i+1:], true
			}
			if len(args) < 2 {
				c.errorf("option requires an argument -- '%s'", strings.TrimLeft(a, "-"))
				return "", false
			}
			args = args[1:]
			return args[0], true
		}
		switch {
		case a == "--":
			args = args[1:]
			goto run
		case a == "-0" || a == "--null":
			nullSep = true
		case a == "-r" || a == "--no-run-if-empty":
			noRunEmpty = true
		case a == "-t" || a == "--verbose":
			trace = true
		case strings.HasPrefix(a, "-n") || strings.HasPrefix(a, "--max-args"):
			v, ok := val()
			if !ok {
				return 1
			}
			maxArgs, _ = strconv.Atoi(v)
		case strings.HasPrefix(a, "-L"):
			v, ok := val()
			if !ok {
				return 1
			}
			maxArgs, _ = strconv.Atoi(v)
		case a == "-I" || strings.HasPrefix(a, "-I"):
			v, ok := val()
			if !ok {
				return 1
			}
			replace = v
		case strings.HasPrefix(a, "-i"):
			replace = "{}"
			if len(a) > 2 {
				replace = a[2:]
			}
		case strings.HasPrefix(a, "-d") || strings.HasPrefix(a, "--delimiter"):
			v, ok := val()
			if !ok {
				return 1
			}
			delim, _ = unescape(v, false)
		case strings.HasPrefix(a, "-P") || strings.HasPrefix(a, "--max-procs"):
			if _, ok := val(); !ok {
				return 1
			}
		case strings.HasPrefix(a, "-s"):
			if _, ok := val(); !ok {
				return 1
			}
		case a == "-x" || a == "-p":
		default:
			c.errorf("invalid option -- '%s'", strings.TrimLeft(a, "-"))
			return 1
		}
		args = args[1:]
	}
run:
	if len(args) == 0 {
		args = []string{"echo"}
	}
	data, err := c.readAll(c.stdin)
	if err != nil {
		return 1
	}
	var items []string
	switch {
	case nullSep:
		for _, s := range strings.Split(string(data), "\x00") {
			if s != "" {
				items = append(items, s)
			}
		}
	case delim != "":
		items = strings.Split(string(data), delim)
		if n := len(items); n > 0 && items[n-1] == "" {
			items = items[:n-1]
		}
	case replace != "":
		for _, l := range strings.Split(string(data), "\n") {
			l = strings.TrimLeft(l, " \t")
			if l != "" {
				items = append(items, l)
			}
		}
	default:
		items = xargsSplit(string(data))
	}
	if len(items) == 0 && (noRunEmpty || replace != "") {
		return 0
	}
	status := 0
	runOne := func(argv []string) bool {
		if trace {
			c.out.Flush()
			io.WriteString(c.stderr, strings.Join(argv, " ")+"\n")
		}
		code := c.run(argv, strings.NewReader(""), c.out)
		if code == 255 {
			status = 124
			return false
		}
		if code == 127 || code == 126 {
			status = code
			return false
		}
		if code != 0 {
			status = 123
		}
		return !c.canceled()
	}
	if replace != "" {
		for _, it := range items {
			argv := make([]string, len(args))
			for i, a := range args {
				argv[i] = strings.ReplaceAll(a, replace, it)
			}
			if !runOne(argv) {
				break
			}
		}
		return status
	}
	if maxArgs <= 0 {
		maxArgs = 5000
	}
	if len(items) == 0 {
		runOne(append([]string(nil), args...))
		return status
	}
	for i := 0; i < len(items); i += maxArgs {
		end := min(i+maxArgs, len(items))
		argv := append(append([]string(nil), args...), items[i:end]...)
		if !runOne(argv) {
			break
		}
	}
	return status
}

// xargsSplit splits xargs input: blanks and newlines separate, quotes
// and backslashes escape.
func xargsSplit(s string) []string {
	var out []string
	var cur strings.Builder
	in := false
	quote := byte(0)
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case quote != 0:
			if ch == quote {
				quote = 0
			} else {
				cur.WriteByte(ch)
			}
		case ch == '\'' || ch == '"':
			quote, in = ch, true
		case ch == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			in = true
		case ch == ' ' || ch == '\t' || ch == '\n':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(ch)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}
