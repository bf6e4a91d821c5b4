package shell

import (
	"strings"

	"mvdan.cc/sh/v3/expand"
)

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
