package shell

import (
	"io"
)

func init() {
	register(&command{names: []string{"tee"}, run: cmdTee, opts: opts("ai", "append", "ignore-interrupts")})
}

func cmdTee(c *cmd) int {
	opts, files, ok := c.flags()
	if !ok {
		return 1
	}
	flag := O_WRONLY | O_CREATE | O_TRUNC
	for _, o := range opts {
		if o.name == "a" || o.name == "append" {
			flag = O_WRONLY | O_CREATE | O_APPEND
		}
	}
	writers := []io.Writer{c.out}
	status := 0
	for _, f := range files {
		fl, err := c.openFlags(f, flag, 0o666)
		if err != nil {
			c.fail(f, err)
			status = 1
			continue
		}
		defer fl.Close()
		writers = append(writers, fl)
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := c.stdin.Read(buf)
		if n > 0 {
			for _, w := range writers {
				w.Write(buf[:n])
			}
			c.out.Flush()
		}
		if err != nil {
			break
		}
	}
	return status
}
