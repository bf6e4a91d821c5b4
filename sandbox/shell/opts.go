package shell

import (
	"fmt"
	"strings"
)

// opt is one parsed option: a short letter or a long name, and its value.
type opt struct {
	name string
	val  string
}

// parseOpts parses GNU-style options: shorts like "nk:" (a colon after a
// letter that takes a value), longs like "lines=" (takes a value),
// "color?" (optional value) or "quiet". Options and operands may mix;
// "--" ends the options. Long names may be abbreviated.
func parseOpts(args []string, shorts string, longs ...string) ([]opt, []string, error) {
	return parseOptsIn(args, false, shorts, longs...)
}

// parseOptsIn is parseOpts; exact takes long names in full only, as CanRun
// does: an abbreviation that is one of the fast path's options may be
// ambiguous, or another option, among the real tool's (sort --version
// is not --version-sort).
func parseOptsIn(args []string, exact bool, shorts string, longs ...string) ([]opt, []string, error) {
	var opts []opt
	var operands []string
	takes := func(l byte) (bool, bool) {
		i := strings.IndexByte(shorts, l)
		if i < 0 {
			return false, false
		}
		return true, i+1 < len(shorts) && shorts[i+1] == ':'
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			operands = append(operands, args[i+1:]...)
			return opts, operands, nil
		case strings.HasPrefix(a, "--"):
			name, val, hasVal := strings.Cut(a[2:], "=")
			var match string
			kind := byte(0)
			for _, l := range longs {
				ln := strings.TrimRight(l, "=?")
				k := byte(0)
				if len(ln) < len(l) {
					k = l[len(l)-1]
				}
				if ln == name {
					match, kind = ln, k
					break
				}
				if strings.HasPrefix(ln, name) && !exact {
					if match != "" && match != ln {
						return nil, nil, fmt.Errorf("option '--%s' is ambiguous", name)
					}
					match, kind = ln, k
				}
			}
			if match == "" {
				return nil, nil, fmt.Errorf("unrecognized option '%s'", a)
			}
			switch kind {
			case '=':
				if !hasVal {
					if i+1 >= len(args) {
						return nil, nil, fmt.Errorf("option '--%s' requires an argument", match)
					}
					i++
					val = args[i]
				}
			case 0:
				if hasVal {
					return nil, nil, fmt.Errorf("option '--%s' doesn't allow an argument", match)
				}
			}
			opts = append(opts, opt{match, val})
		case len(a) > 1 && a[0] == '-':
			for j := 1; j < len(a); j++ {
				known, arg := takes(a[j])
				if !known {
					return nil, nil, fmt.Errorf("invalid option -- '%c'", a[j])
				}
				if !arg {
					opts = append(opts, opt{string(a[j]), ""})
					continue
				}
				val := a[j+1:]
				if val == "" {
					if i+1 >= len(args) {
						return nil, nil, fmt.Errorf("option requires an argument -- '%c'", a[j])
					}
					i++
					val = args[i]
				}
				opts = append(opts, opt{string(a[j]), val})
				break
			}
		default:
			operands = append(operands, a)
		}
	}
	return opts, operands, nil
}

// flags parses the options of c with its command's spec (the one CanRun
// routes by), reporting errors as GNU tools do (status 2 for some tools, 1
// for most: the caller picks).
func (c *cmd) flags() ([]opt, []string, bool) {
	s := builtins[c.name].opts
	o, rest, err := parseOpts(c.args[1:], s.shorts, s.longs...)
	if err != nil {
		c.errorf("%v", err)
		fmt.Fprintf(c.stderr, "Try '%s --help' for more information.\n", c.name)
		return nil, nil, false
	}
	return o, rest, true
}
