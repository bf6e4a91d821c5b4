package shell

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

func init() {
	register(&command{names: []string{"timeout"}, run: cmdTimeout, opts: opts("k:s:v", "kill-after=", "signal=", "preserve-status", "verbose"),
		ownArgs: true, check: func(args []string) string { _, why := timeoutOpts(args); return why }})
}

// timeoutSignals are the signals timeout -s takes on the fast path: those
// whose default action ends the command. (CHLD, CONT, URG, WINCH are
// ignored by a program, STOP and TSTP stop it: a command that would go
// on or stop is the sandbox's.)
var timeoutSignals = map[string]int{"HUP": 1, "INT": 2, "QUIT": 3, "ILL": 4, "TRAP": 5, "ABRT": 6, "IOT": 6, "BUS": 7,
	"FPE": 8, "KILL": 9, "USR1": 10, "SEGV": 11, "USR2": 12, "PIPE": 13, "ALRM": 14, "TERM": 15, "STKFLT": 16,
	"XCPU": 24, "XFSZ": 25, "VTALRM": 26, "PROF": 27, "IO": 29, "POLL": 29, "PWR": 30, "SYS": 31}

// timeoutSignal reads -s's value as GNU's operand2sig does (a number, or
// a name in any case with or without SIG); the name it prints and its
// number, or false.
func timeoutSignal(v string) (string, int, bool) {
	if n, err := strconv.Atoi(v); err == nil {
		for name, num := range timeoutSignals {
			if num == n && name != "IOT" && name != "POLL" {
				return name, n, true
			}
		}
		return "", 0, false
	}
	name := strings.TrimPrefix(strings.ToUpper(v), "SIG")
	n, ok := timeoutSignals[name]
	switch name {
	case "IOT":
		name = "ABRT"
	case "POLL":
		name = "IO"
	}
	return name, n, ok
}

// timeoutDuration is the form of a duration the fast path reads: a
// decimal number and an optional unit (GNU's strtod also takes 1e3,
// 0x10, inf: those are routed).
var timeoutDuration = regexp.MustCompile(`^([0-9]+\.?[0-9]*|\.[0-9]+)[smhd]?$`)

// notDuration reports whether GNU's strtod reads no number at all from
// v, so that timeout fails with "invalid time interval" (the fast path
// says so too): it starts with a letter that is not inf's or nan's.
func notDuration(v string) bool {
	return v != "" && (v[0] >= 'a' && v[0] <= 'z' || v[0] >= 'A' && v[0] <= 'Z') && strings.IndexByte("iInN", v[0]) < 0
}

// parseTimeout reads a duration (0 is none, as GNU's).
func parseTimeout(v string) (time.Duration, bool) {
	if !timeoutDuration.MatchString(v) {
		return 0, false
	}
	mult := 1.0
	switch v[len(v)-1] {
	case 's':
		v = v[:len(v)-1]
	case 'm':
		v, mult = v[:len(v)-1], 60
	case 'h':
		v, mult = v[:len(v)-1], 3600
	case 'd':
		v, mult = v[:len(v)-1], 86400
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return 0, false
	}
	d := f * mult * float64(time.Second)
	if d >= math.MaxInt64 {
		return math.MaxInt64, true
	}
	if d > 0 && d < 1 {
		d = 1 // GNU rounds a positive interval up to its clock's resolution
	}
	return time.Duration(d), true
}

// timeoutFlags are timeout's options as the fast path takes them.
type timeoutFlags struct {
	sigName           string
	sigNum            int
	verbose, preserve bool
}

// timeoutOpts returns how many of timeout's arguments are its options
// (the duration follows them), or why the fast path cannot run them.
// Options stop at the first operand, as GNU's "+k:s:v".
func timeoutOpts(args []string) (int, string) {
	n, _, why := timeoutParse(args)
	if why == "" && n < len(args) {
		if _, ok := parseTimeout(args[n]); !ok && !notDuration(args[n]) {
			return 0, "timeout " + args[n] + ": the duration is not read as GNU reads it"
		}
	}
	return n, why
}

func timeoutParse(args []string) (int, timeoutFlags, string) {
	f := timeoutFlags{sigName: "TERM", sigNum: 15}
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") && args[i] != "-" {
		a := args[i]
		if a == "--" {
			i++
			break
		}
		var name, val string
		switch {
		case a == "--preserve-status":
			f.preserve = true
			i++
			continue
		case a == "--verbose":
			f.verbose = true
			i++
			continue
		case strings.HasPrefix(a, "--"):
			n, v, ok := strings.Cut(a[2:], "=")
			if n != "kill-after" && n != "signal" {
				return 0, f, "timeout " + a + " is not built in"
			}
			name = n[:1]
			if !ok {
				if i+1 >= len(args) {
					return 0, f, "timeout " + a + ": a value is missing"
				}
				i++
				v = args[i]
			}
			val = v
		default:
			j := 1
			for j < len(a) && a[j] == 'v' {
				f.verbose = true
				j++
			}
			if j == len(a) {
				i++
				continue
			}
			if a[j] != 'k' && a[j] != 's' {
				return 0, f, fmt.Sprintf("timeout -%c is not built in", a[j])
			}
			name, val = a[j:j+1], a[j+1:]
			if val == "" {
				if i+1 >= len(args) {
					return 0, f, "timeout " + a + ": a value is missing"
				}
				i++
				val = args[i]
			}
		}
		if val == "" {
			return 0, f, "timeout: an option's value is computed at run time"
		}
		if name == "k" {
			if _, ok := parseTimeout(val); !ok {
				return 0, f, "timeout -k " + val + ": the duration is not read as GNU reads it"
			}
		} else {
			var ok bool
			if f.sigName, f.sigNum, ok = timeoutSignal(val); !ok {
				return 0, f, "timeout -s " + val + ": the signal is not built in"
			}
		}
		i++
	}
	return i, f, ""
}

// timeoutRuns are the commands timeout runs besides the table's: it
// runs programs, and these are programs too (/usr/bin/echo...), while
// the shell's own builtins (cd, read, :) are not.
var timeoutRuns = map[string]bool{"echo": true, "printf": true, "true": true, "false": true, "test": true, "[": true, "pwd": true}

// timeoutCanRun routes timeout: its options and duration, then the
// command it runs, which must be one that cmd.run runs itself.
func timeoutCanRun(words []string, lits []bool, rt *router) string {
	n, why := timeoutOpts(words[1:])
	if why != "" {
		return why
	}
	cmd := 2 + n
	if cmd >= len(words) {
		return "" // usage error, as GNU's
	}
	if !lits[cmd] {
		return "timeout: the command is computed at run time"
	}
	name := commandName(words[cmd])
	if builtins[name] == nil && !timeoutRuns[name] {
		return "timeout " + words[cmd] + ": not a program the fast path runs"
	}
	return checkCommand(words[cmd:], lits[cmd:], nil, rt)
}

func cmdTimeout(c *cmd) int {
	usage := func() int {
		fmt.Fprintf(c.stderr, "Try 'timeout --help' for more information.\n")
		return 125
	}
	args := c.args[1:]
	n, f, why := timeoutParse(args)
	if why != "" {
		c.errorf("%s", why)
		return usage()
	}
	rest := args[n:]
	if len(rest) < 2 {
		return usage()
	}
	d, ok := parseTimeout(rest[0])
	if !ok {
		c.errorf("invalid time interval ‘%s’", rest[0])
		return usage()
	}
	ctx, cancel := c.ctx, context.CancelFunc(func() {})
	if d > 0 && d < math.MaxInt64 {
		ctx, cancel = context.WithTimeout(c.ctx, d)
	}
	defer cancel()
	sub := *c
	sub.ctx = ctx
	code := sub.run(rest[1:], stoppableReader{c.stdin, ctx}, c.out)
	if ctx.Err() == nil || c.ctx.Err() != nil {
		return code // it ended by itself, or the call is being stopped
	}
	c.out.Flush()
	if f.verbose {
		fmt.Fprintf(c.stderr, "timeout: sending signal %s to command ‘%s’\n", f.sigName, rest[1])
	}
	switch {
	case f.sigNum == 9:
		return 128 + 9 // timeout kills itself with its command
	case f.preserve:
		return 128 + f.sigNum
	}
	return 124
}
