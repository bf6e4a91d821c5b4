package shell

import (
	"strconv"
	"strings"
	"time"
)

func init() {
	register(&command{names: []string{"touch"}, run: cmdTouch, opts: opts("acmd:r:t:h", "no-create", "date=", "reference=", "no-dereference", "time="), ignored: []string{"a", "m", "h", "no-dereference"}})
}

func cmdTouch(c *cmd) int {
	opts, files, ok := c.flags()
	if !ok {
		return 1
	}
	noCreate := false
	when := c.now()
	for _, o := range opts {
		switch o.name {
		case "c", "no-create":
			noCreate = true
		case "d", "date":
			t, ok := parseDate(o.val, c.now())
			if !ok {
				c.errorf("invalid date format '%s'", o.val)
				return 1
			}
			when = t
		case "t":
			t, ok := parseTouchStamp(o.val, c.now())
			if !ok {
				c.errorf("invalid date format '%s'", o.val)
				return 1
			}
			when = t
		case "r", "reference":
			fi, err := c.stat(o.val)
			if err != nil {
				c.errorf("failed to get attributes of '%s': %s", o.val, errText(err))
				return 1
			}
			when = fi.mtime
		}
	}
	if len(files) == 0 {
		c.errorf("missing file operand")
		return 1
	}
	status := 0
	for _, f := range files {
		abs := c.abs(f)
		if _, err := c.r.sh.ns.stat(abs); err != nil {
			if noCreate {
				continue
			}
			fl, err := c.r.sh.ns.open(abs, O_WRONLY|O_CREATE, 0o666, nil, nil, nil)
			if err != nil {
				c.errorf("cannot touch '%s': %s", f, errText(err))
				status = 1
				continue
			}
			fl.Close()
		}
		if err := c.r.sh.ns.chtimes(abs, when, when); err != nil {
			c.errorf("setting times of '%s': %s", f, errText(err))
			status = 1
		}
	}
	return status
}

// parseTouchStamp reads touch -t's [[CC]YY]MMDDhhmm[.ss].
func parseTouchStamp(s string, now time.Time) (time.Time, bool) {
	sec := 0
	if i := strings.IndexByte(s, '.'); i >= 0 {
		v, err := strconv.Atoi(s[i+1:])
		if err != nil {
			return time.Time{}, false
		}
		sec, s = v, s[:i]
	}
	year := now.Year()
	switch len(s) {
	case 8:
	case 10:
		y, _ := strconv.Atoi(s[:2])
		if y < 69 {
			year = 2000 + y
		} else {
			year = 1900 + y
		}
		s = s[2:]
	case 12:
		year, _ = strconv.Atoi(s[:4])
		s = s[4:]
	default:
		return time.Time{}, false
	}
	v := func(i int) int { n, _ := strconv.Atoi(s[i : i+2]); return n }
	return time.Date(year, time.Month(v(0)), v(2), v(4), v(6), sec, 0, time.UTC), true
}
