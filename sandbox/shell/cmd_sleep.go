package shell

import (
	"math"
	"strconv"
	"strings"
	"time"
)

func init() {
	register(&command{names: []string{"sleep"}, run: cmdSleep, opts: opts("")})
}

func cmdSleep(c *cmd) int {
	if len(c.args) < 2 {
		c.usage("missing operand")
		return 1
	}
	var total time.Duration
	for _, a := range c.args[1:] {
		mult := time.Second
		switch {
		case strings.HasSuffix(a, "s"):
			a = a[:len(a)-1]
		case strings.HasSuffix(a, "m"):
			a, mult = a[:len(a)-1], time.Minute
		case strings.HasSuffix(a, "h"):
			a, mult = a[:len(a)-1], time.Hour
		case strings.HasSuffix(a, "d"):
			a, mult = a[:len(a)-1], 24*time.Hour
		}
		v, err := strconv.ParseFloat(a, 64)
		if err != nil || v < 0 {
			c.usage("invalid time interval ‘%s’", a)
			return 1
		}
		if d := v * float64(mult); d >= float64(math.MaxInt64-total) {
			total = math.MaxInt64 // sleep infinity: until the call is stopped
		} else {
			total += time.Duration(d)
		}
	}
	t := time.NewTimer(total)
	defer t.Stop()
	select {
	case <-t.C:
		return 0
	case <-c.ctx.Done():
		return 1
	}
}
