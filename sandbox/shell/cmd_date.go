package shell

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

func init() {
	register(&command{names: []string{"date"}, run: cmdDate, opts: opts("d:r:uRIs:", "date=", "reference=", "utc", "universal", "rfc-2822", "iso-8601?", "rfc-3339=")})
}

// parseDate reads the date forms agents give date -d and touch -d.
func parseDate(s string, now time.Time) (time.Time, bool) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "@") {
		v, err := strconv.ParseFloat(s[1:], 64)
		if err != nil {
			return time.Time{}, false
		}
		return time.Unix(0, int64(v*1e9)).UTC(), true
	}
	switch s {
	case "now", "":
		return now, true
	case "today":
		return now, true
	case "yesterday":
		return now.AddDate(0, 0, -1), true
	case "tomorrow":
		return now.AddDate(0, 0, 1), true
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02", "2006/01/02", "Jan 2 2006", "Jan 2, 2006", "2 Jan 2006"} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, true
		}
	}
	// "N units ago", "+N days"
	f := strings.Fields(s)
	if len(f) >= 2 {
		n, err := strconv.Atoi(strings.TrimPrefix(f[0], "+"))
		if err == nil {
			if len(f) == 3 && f[2] == "ago" {
				n = -n
			} else if len(f) != 2 {
				return time.Time{}, false
			}
			unit := strings.TrimSuffix(f[1], "s")
			switch unit {
			case "second", "sec":
				return now.Add(time.Duration(n) * time.Second), true
			case "minute", "min":
				return now.Add(time.Duration(n) * time.Minute), true
			case "hour":
				return now.Add(time.Duration(n) * time.Hour), true
			case "day":
				return now.AddDate(0, 0, n), true
			case "week":
				return now.AddDate(0, 0, 7*n), true
			case "month":
				return now.AddDate(0, n, 0), true
			case "year":
				return now.AddDate(n, 0, 0), true
			}
		}
	}
	return time.Time{}, false
}

func cmdDate(c *cmd) int {
	opts, rest, ok := c.flags()
	if !ok {
		return 1
	}
	t := c.now().UTC()
	format := "+%a %b %e %H:%M:%S %Z %Y"
	for _, o := range opts {
		switch o.name {
		case "d", "date":
			v, ok := parseDate(o.val, t)
			if !ok {
				c.errorf("invalid date ‘%s’", o.val)
				return 1
			}
			t = v
		case "r", "reference":
			fi, err := c.stat(o.val)
			if err != nil {
				c.fail(o.val, err)
				return 1
			}
			t = fi.mtime
		case "R", "rfc-2822":
			format = "+%a, %d %b %Y %H:%M:%S %z"
		case "I", "iso-8601":
			switch o.val {
			case "seconds":
				format = "+%Y-%m-%dT%H:%M:%S%:z"
			case "minutes":
				format = "+%Y-%m-%dT%H:%M%:z"
			case "hours":
				format = "+%Y-%m-%dT%H%:z"
			case "ns":
				format = "+%Y-%m-%dT%H:%M:%S,%N%:z"
			default:
				format = "+%Y-%m-%d"
			}
		case "rfc-3339":
			switch o.val {
			case "seconds":
				format = "+%Y-%m-%d %H:%M:%S%:z"
			case "ns":
				format = "+%Y-%m-%d %H:%M:%S.%N%:z"
			default:
				format = "+%Y-%m-%d"
			}
		}
	}
	for _, r := range rest {
		if strings.HasPrefix(r, "+") {
			format = r
		} else {
			c.errorf("invalid date ‘%s’", r)
			return 1
		}
	}
	c.out.WriteString(strftime(format[1:], t.UTC()) + "\n")
	return 0
}

// strftime formats t as date(1) does.
func strftime(f string, t time.Time) string {
	var b strings.Builder
	for i := 0; i < len(f); i++ {
		if f[i] != '%' || i+1 >= len(f) {
			b.WriteByte(f[i])
			continue
		}
		i++
		pad := byte(0)
		if f[i] == '-' || f[i] == '_' || f[i] == '0' {
			pad = f[i]
			i++
			if i >= len(f) {
				break
			}
		}
		num := func(v, w int) string {
			switch pad {
			case '-':
				return strconv.Itoa(v)
			case '_':
				return fmt.Sprintf("%*d", w, v)
			}
			return fmt.Sprintf("%0*d", w, v)
		}
		switch f[i] {
		case 'Y':
			b.WriteString(strconv.Itoa(t.Year()))
		case 'y':
			b.WriteString(num(t.Year()%100, 2))
		case 'C':
			b.WriteString(num(t.Year()/100, 2))
		case 'm':
			b.WriteString(num(int(t.Month()), 2))
		case 'd':
			b.WriteString(num(t.Day(), 2))
		case 'e':
			if pad == 0 {
				pad = '_'
			}
			b.WriteString(num(t.Day(), 2))
		case 'H':
			b.WriteString(num(t.Hour(), 2))
		case 'I':
			h := t.Hour() % 12
			if h == 0 {
				h = 12
			}
			b.WriteString(num(h, 2))
		case 'M':
			b.WriteString(num(t.Minute(), 2))
		case 'S':
			b.WriteString(num(t.Second(), 2))
		case 'N':
			b.WriteString(fmt.Sprintf("%09d", t.Nanosecond()))
		case 'p':
			if t.Hour() < 12 {
				b.WriteString("AM")
			} else {
				b.WriteString("PM")
			}
		case 'a':
			b.WriteString(t.Format("Mon"))
		case 'A':
			b.WriteString(t.Format("Monday"))
		case 'b', 'h':
			b.WriteString(t.Format("Jan"))
		case 'B':
			b.WriteString(t.Format("January"))
		case 'j':
			b.WriteString(num(t.YearDay(), 3))
		case 'u':
			wd := int(t.Weekday())
			if wd == 0 {
				wd = 7
			}
			b.WriteString(strconv.Itoa(wd))
		case 'w':
			b.WriteString(strconv.Itoa(int(t.Weekday())))
		case 's':
			b.WriteString(strconv.FormatInt(t.Unix(), 10))
		case 'Z':
			name, _ := t.Zone()
			b.WriteString(name)
		case 'z':
			b.WriteString(t.Format("-0700"))
		case ':':
			if i+1 < len(f) && f[i+1] == 'z' {
				i++
				b.WriteString(t.Format("-07:00"))
			}
		case 'F':
			b.WriteString(t.Format("2006-01-02"))
		case 'T':
			b.WriteString(t.Format("15:04:05"))
		case 'D':
			b.WriteString(t.Format("01/02/06"))
		case 'R':
			b.WriteString(t.Format("15:04"))
		case 'c':
			b.WriteString(strftime("%a %b %e %H:%M:%S %Y", t))
		case 'x':
			b.WriteString(t.Format("01/02/06"))
		case 'X':
			b.WriteString(t.Format("15:04:05"))
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(f[i])
		}
	}
	return b.String()
}
