package shell

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

func init() {
	register(&command{names: []string{"uniq"}, run: cmdUniq, opts: opts("cdDuif:s:w:", "count", "repeated", "all-repeated?", "unique", "ignore-case", "skip-fields=", "skip-chars=", "check-chars=")})
}

func cmdUniq(c *cmd) int {
	opts, files, ok := c.flags()
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
