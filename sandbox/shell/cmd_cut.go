package shell

import (
	"bufio"
	"io"
	"strconv"
	"strings"
)

func init() {
	register(&command{names: []string{"cut"}, run: cmdCut, opts: opts("d:f:c:b:sz", "delimiter=", "fields=", "characters=", "bytes=", "only-delimited", "complement", "output-delimiter="), ignored: []string{"z"}})
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
	opts, files, ok := c.flags()
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
