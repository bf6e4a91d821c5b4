package shell

import (
	"fmt"
	"strconv"
	"strings"
)

func init() {
	register(&command{names: []string{"seq"}, run: cmdSeq, opts: opts("ws:f:", "equal-width", "separator="), ownArgs: true, check: seqCheck})
}

// seqCheck routes the options that cmdSeq's own loop does not take.
func seqCheck(args []string) string {
	for len(args) > 0 && len(args[0]) > 1 && args[0][0] == '-' && !(args[0][1] >= '0' && args[0][1] <= '9' || args[0][1] == '.') {
		a := args[0]
		args = args[1:]
		switch {
		case a == "-w" || a == "--equal-width":
		case a == "-s" || a == "-f":
			if len(args) > 0 {
				args = args[1:]
			}
		case strings.HasPrefix(a, "-s"), strings.HasPrefix(a, "--separator="), strings.HasPrefix(a, "-f"), a == "--":
		default:
			return "seq " + a + " is not built in"
		}
	}
	return ""
}

func cmdSeq(c *cmd) int {
	// negative numbers are operands, not options
	args := c.args[1:]
	sep, format, width := "\n", "", false
	for len(args) > 0 && len(args[0]) > 1 && args[0][0] == '-' && !(args[0][1] >= '0' && args[0][1] <= '9' || args[0][1] == '.') {
		a := args[0]
		args = args[1:]
		switch {
		case a == "-w" || a == "--equal-width":
			width = true
		case a == "-s" || a == "-f":
			if len(args) == 0 {
				c.usage("option requires an argument -- '%c'", a[1])
				return 1
			}
			if a == "-s" {
				sep = args[0]
			} else {
				format = args[0]
			}
			args = args[1:]
		case strings.HasPrefix(a, "-s"):
			sep = a[2:]
		case strings.HasPrefix(a, "--separator="):
			sep = a[len("--separator="):]
		case strings.HasPrefix(a, "-f"):
			format = a[2:]
		case a == "--":
		default:
			c.usage("invalid option -- '%s'", strings.TrimLeft(a, "-"))
			return 1
		}
	}
	if len(args) == 0 || len(args) > 3 {
		c.usage("missing operand")
		return 1
	}
	nums := make([]float64, len(args))
	prec := 0
	for i, a := range args {
		v, err := strconv.ParseFloat(a, 64)
		if err != nil {
			c.usage("invalid floating point argument: ‘%s’", a)
			return 1
		}
		nums[i] = v
		if j := strings.IndexByte(a, '.'); j >= 0 && i != 2 || j >= 0 && len(args) == 3 && i != 2 {
			prec = max(prec, len(a)-j-1)
		}
	}
	first, step, last := 1.0, 1.0, nums[0]
	switch len(nums) {
	case 2:
		first, last = nums[0], nums[1]
	case 3:
		first, step, last = nums[0], nums[1], nums[2]
		if j := strings.IndexByte(args[1], '.'); j >= 0 {
			prec = max(prec, len(args[1])-j-1)
		}
	}
	if step == 0 {
		c.usage("invalid Zero increment value: ‘%s’", args[1])
		return 1
	}
	fmtNum := func(v float64) string {
		if format != "" {
			return sprintfC(format, v)
		}
		return strconv.FormatFloat(v, 'f', prec, 64)
	}
	w := 0
	if width {
		w = max(len(fmtNum(first)), len(fmtNum(last)))
	}
	count := 0
	for i := 0; ; i++ {
		v := first + float64(i)*step
		if step > 0 && v > last+1e-9 || step < 0 && v < last-1e-9 {
			break
		}
		if count > 0 {
			c.out.WriteString(sep)
		}
		s := fmtNum(v)
		if width && len(s) < w {
			if strings.HasPrefix(s, "-") {
				s = "-" + strings.Repeat("0", w-len(s)) + s[1:]
			} else {
				s = strings.Repeat("0", w-len(s)) + s
			}
		}
		c.out.WriteString(s)
		count++
		if count%1024 == 0 && c.canceled() {
			return 1
		}
	}
	if count > 0 {
		c.out.WriteString("\n")
	}
	return 0
}

// sprintfC formats one float with a C printf format (for seq -f).
func sprintfC(format string, v float64) string {
	i := strings.IndexByte(format, '%')
	if i < 0 {
		return format
	}
	j := i + 1
	for j < len(format) && strings.IndexByte("-+ #0123456789.", format[j]) >= 0 {
		j++
	}
	if j >= len(format) {
		return format
	}
	verb := format[j]
	spec := format[i:j]
	var s string
	switch verb {
	case 'g', 'G', 'e', 'E', 'f', 'F':
		s = fmt.Sprintf(spec+string(verb), v)
	case 'd', 'i':
		s = fmt.Sprintf(spec+"d", int64(v))
	default:
		s = fmt.Sprintf(spec+"g", v)
	}
	return format[:i] + s + format[j+1:]
}
