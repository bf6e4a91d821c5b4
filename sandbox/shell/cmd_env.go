package shell

import (
	"strings"

	"mvdan.cc/sh/v3/expand"
)

func init() {
	// env's options and the command it runs are routed in checkCommand
	register(&command{names: []string{"env"}, run: cmdEnv, opts: opts("iu:", "ignore-environment"), ownArgs: true})
	register(&command{names: []string{"printenv"}, run: cmdEnv, opts: opts("")})
}

// envOpts returns how many of env's arguments are its options and
// assignments (the command follows them), as cmdEnv reads them, or why
// the fast path cannot run them.
func envOpts(args []string) (int, string) {
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-i" || a == "-" || a == "--ignore-environment":
		case a == "-u" && i+1 < len(args):
			i++
		case strings.HasPrefix(a, "-u") && a != "-u":
		case a == "--":
		case strings.Contains(a, "=") && !strings.HasPrefix(a, "="):
		case strings.HasPrefix(a, "-"):
			return 0, "env " + a + " is not built in"
		default:
			return i, ""
		}
	}
	return i, ""
}

func cmdEnv(c *cmd) int {
	vars := exported(c.env)
	if c.name == "printenv" {
		if len(c.args) == 1 {
			for _, v := range vars {
				c.out.WriteString(v + "\n")
			}
			return 0
		}
		status := 0
		for _, n := range c.args[1:] {
			found := false
			for _, v := range vars {
				if k, val, _ := strings.Cut(v, "="); k == n {
					c.out.WriteString(val + "\n")
					found = true
				}
			}
			if !found {
				status = 1
			}
		}
		return status
	}
	args := c.args[1:]
	m := map[string]string{}
	for _, v := range vars {
		k, val, _ := strings.Cut(v, "=")
		m[k] = val
	}
	order := []string{}
	for _, v := range vars {
		k, _, _ := strings.Cut(v, "=")
		order = append(order, k)
	}
	for len(args) > 0 {
		a := args[0]
		switch {
		case a == "-i" || a == "-" || a == "--ignore-environment":
			m, order = map[string]string{}, nil
		case a == "-u" && len(args) > 1:
			delete(m, args[1])
			args = args[1:]
		case strings.HasPrefix(a, "-u"):
			delete(m, a[2:])
		case a == "--":
		case strings.Contains(a, "=") && !strings.HasPrefix(a, "="):
			k, v, _ := strings.Cut(a, "=")
			if _, ok := m[k]; !ok {
				order = append(order, k)
			}
			m[k] = v
		default:
			goto run
		}
		args = args[1:]
	}
run:
	if len(args) == 0 {
		for _, k := range order {
			if v, ok := m[k]; ok {
				c.out.WriteString(k + "=" + v + "\n")
			}
		}
		return 0
	}
	pairs := make([]string, 0, len(m))
	for _, k := range order {
		if v, ok := m[k]; ok {
			pairs = append(pairs, k+"="+v)
		}
	}
	sub := *c
	sub.env = expand.ListEnviron(pairs...)
	c.out.Flush()
	code := sub.run(args, c.stdin, c.out)
	return code
}
