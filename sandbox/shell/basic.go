package shell

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"mvdan.cc/sh/v3/expand"
)

func init() {
	register(cmdCat, "cat")
	register(cmdHead, "head")
	register(cmdTail, "tail")
	register(cmdWc, "wc")
	register(cmdMkdir, "mkdir")
	register(cmdRmdir, "rmdir")
	register(cmdRm, "rm")
	register(cmdTouch, "touch")
	register(cmdBasename, "basename")
	register(cmdDirname, "dirname")
	register(cmdSeq, "seq")
	register(cmdSleep, "sleep")
	register(cmdEnv, "env", "printenv")
	register(cmdWhich, "which")
	register(cmdTac, "tac")
	register(cmdRev, "rev")
	register(cmdNl, "nl")
	register(cmdYes, "yes")
	register(cmdTee, "tee")
	register(cmdNproc, "nproc")
	register(cmdWhoami, "whoami")
	register(cmdHostname, "hostname")
	register(cmdUname, "uname")
	register(cmdId, "id")
	register(cmdTrueish, "sync")
}

// simpleBuiltin runs an interpreter builtin for xargs and find -exec.
func simpleBuiltin(c *cmd) int {
	if c.name == "echo" {
		return cmdEcho(c)
	}
	if c.name == "printf" {
		return cmdPrintf(c)
	}
	c.out.Flush()
	if err := c.hc.Builtin(c.ctx, c.args); err != nil {
		return 1
	}
	return 0
}

func cmdTrueish(c *cmd) int { return 0 }

// errSilent fails an input that the command reported already.
var errSilent = errors.New("reported")

// cmdEcho is bash's echo (for xargs and find -exec).
func cmdEcho(c *cmd) int {
	args := c.args[1:]
	newline, escapes := true, false
	for len(args) > 0 && len(args[0]) > 1 && args[0][0] == '-' && strings.Trim(args[0][1:], "neE") == "" {
		for _, f := range args[0][1:] {
			switch f {
			case 'n':
				newline = false
			case 'e':
				escapes = true
			case 'E':
				escapes = false
			}
		}
		args = args[1:]
	}
	for i, a := range args {
		if i > 0 {
			c.out.WriteByte(' ')
		}
		if escapes {
			s, stop := unescape(a, true)
			c.out.WriteString(s)
			if stop {
				return 0
			}
		} else {
			c.out.WriteString(a)
		}
	}
	if newline {
		c.out.WriteByte('\n')
	}
	return 0
}

// unescape expands backslash escapes as echo -e and printf %b do; stop
// reports \c.
func unescape(s string, echo bool) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if ch != '\\' || i+1 >= len(s) {
			b.WriteByte(ch)
			continue
		}
		i++
		switch s[i] {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'a':
			b.WriteByte(7)
		case 'b':
			b.WriteByte(8)
		case 'f':
			b.WriteByte(12)
		case 'v':
			b.WriteByte(11)
		case 'e', 'E':
			b.WriteByte(27)
		case '\\':
			b.WriteByte('\\')
		case 'c':
			return b.String(), true
		case '0', '1', '2', '3', '4', '5', '6', '7':
			j, n := i, 0
			max := 3
			if s[i] == '0' && echo {
				j++
				max = 4
			}
			for j < len(s) && j-i < max && s[j] >= '0' && s[j] <= '7' {
				n = n*8 + int(s[j]-'0')
				j++
			}
			b.WriteByte(byte(n))
			i = j - 1
		case 'x':
			j, n := i+1, 0
			for j < len(s) && j-i <= 2 && isHex(s[j]) {
				n = n*16 + hexVal(s[j])
				j++
			}
			if j == i+1 {
				b.WriteString("\\x")
				continue
			}
			b.WriteByte(byte(n))
			i = j - 1
		default:
			b.WriteByte('\\')
			b.WriteByte(s[i])
		}
	}
	return b.String(), false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func hexVal(c byte) int {
	switch {
	case c >= 'a':
		return int(c-'a') + 10
	case c >= 'A':
		return int(c-'A') + 10
	}
	return int(c - '0')
}

// eachInput calls fn with every operand opened ("-" or none: stdin);
// errors are reported and make the status 1.
func (c *cmd) eachInput(files []string, fn func(name string, r io.Reader) error) int {
	if len(files) == 0 {
		files = []string{"-"}
	}
	status := 0
	for _, f := range files {
		if c.canceled() {
			return 1
		}
		var r io.Reader
		if f == "-" {
			r = c.stdin
		} else {
			fi, err := c.stat(f)
			if err == nil && fi.IsDir() {
				err = syscall.EISDIR
			}
			var file vfile
			if err == nil {
				file, err = c.open(f)
			}
			if err != nil {
				c.fail(f, err)
				status = 1
				continue
			}
			r = file
			defer file.Close()
		}
		if err := fn(f, r); err != nil {
			if err == errSilent {
				status = 1
				continue
			}
			if err == errOutputLimit || errno(err) == syscall.EPIPE {
				return 1
			}
			c.fail(f, err)
			status = 1
		}
	}
	return status
}

func cmdCat(c *cmd) int {
	opts, files, ok := c.flags("nbsETAveut", "number", "number-nonblank", "squeeze-blank", "show-ends", "show-tabs", "show-all")
	if !ok {
		return 1
	}
	var number, nonblank, squeeze, ends, tabs bool
	for _, o := range opts {
		switch o.name {
		case "n", "number":
			number = true
		case "b", "number-nonblank":
			nonblank = true
		case "s", "squeeze-blank":
			squeeze = true
		case "E", "show-ends":
			ends = true
		case "T", "show-tabs":
			tabs = true
		case "A", "show-all":
			ends, tabs = true, true
		case "e":
			ends = true
		case "t":
			tabs = true
		}
	}
	plain := !number && !nonblank && !squeeze && !ends && !tabs
	line := 0
	prevBlank := false
	return c.eachInput(files, func(name string, r io.Reader) error {
		if plain {
			c.out.Flush()
			_, err := io.Copy(c.out, r)
			return err
		}
		br := bufio.NewReader(r)
		for {
			s, err := c.readLine(br)
			if s == "" && err != nil {
				if err == io.EOF {
					return nil
				}
				return err
			}
			body, nl := strings.CutSuffix(s, "\n")
			blank := body == ""
			if squeeze && blank && prevBlank {
				continue
			}
			prevBlank = blank
			if nonblank && !blank || number && !nonblank {
				line++
				fmt.Fprintf(c.out, "%6d\t", line)
			}
			if tabs {
				body = strings.ReplaceAll(body, "\t", "^I")
			}
			c.out.WriteString(body)
			if nl {
				if ends {
					c.out.WriteByte('$')
				}
				c.out.WriteByte('\n')
			}
		}
	})
}

// numArg turns "-5" into "-n 5" for head and tail.
func numArg(args []string) []string {
	out := append([]string(nil), args...)
	for i := 0; i < len(out); i++ {
		a := out[i]
		if a == "--" {
			break
		}
		if a == "-n" || a == "-c" || a == "--lines" || a == "--bytes" {
			i++
			continue
		}
		if len(a) > 1 && a[0] == '-' && a[1] >= '0' && a[1] <= '9' {
			out[i] = "-n" + a[1:]
		}
	}
	return out
}

// parseSize reads a count with GNU suffixes (K, M, G, KB, kB, b...).
func parseSize(s string) (int64, bool) {
	mult := int64(1)
	suffixes := []struct {
		s string
		m int64
	}{{"KiB", 1024}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"kB", 1000}, {"KB", 1000}, {"MB", 1000000}, {"GB", 1000000000},
		{"b", 512}, {"K", 1024}, {"k", 1024}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}}
	for _, suf := range suffixes {
		if strings.HasSuffix(s, suf.s) && len(s) > len(suf.s) {
			s, mult = s[:len(s)-len(suf.s)], suf.m
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false
	}
	return n * mult, true
}

// countsBytes says whether head's or tail's count option counts bytes
// (-c, --bytes) rather than lines.
func countsBytes(opt string) bool { return opt[0] == 'c' || opt == "bytes" }

// badCount is head's and tail's error for a count that does not parse.
func (c *cmd) badCount(o opt) int {
	what := "lines"
	if countsBytes(o.name) {
		what = "bytes"
	}
	c.errorf("invalid number of %s: '%s'", what, o.val)
	return 1
}

// fileHeader is the "==> name <==" line head and tail write before each
// of several inputs, after a blank line but for the first.
func (c *cmd) fileHeader(name string, first bool) {
	if !first {
		c.out.WriteByte('\n')
	}
	if name == "-" {
		name = "standard input"
	}
	fmt.Fprintf(c.out, "==> %s <==\n", name)
}

func cmdHead(c *cmd) int {
	c.args = append(c.args[:1], numArg(c.args[1:])...)
	opts, files, ok := c.flags("n:c:qvz", "lines=", "bytes=", "quiet", "silent", "verbose")
	if !ok {
		return 1
	}
	n, bytesMode, header := int64(10), false, len(files) > 1
	for _, o := range opts {
		switch o.name {
		case "n", "lines", "c", "bytes":
			v, ok := parseSize(o.val)
			if !ok {
				return c.badCount(o)
			}
			n, bytesMode = v, countsBytes(o.name)
		case "q", "quiet", "silent":
			header = false
		case "v", "verbose":
			header = true
		}
	}
	first := true
	return c.eachInput(files, func(name string, r io.Reader) error {
		if header {
			c.fileHeader(name, first)
		}
		first = false
		if bytesMode {
			if n >= 0 {
				_, err := io.CopyN(c.out, r, n)
				if err == io.EOF {
					err = nil
				}
				return err
			}
			data, err := c.readAll(r)
			if err != nil {
				return err
			}
			if int64(len(data)) > -n {
				c.out.Write(data[:int64(len(data))+n])
			}
			return nil
		}
		br := bufio.NewReader(r)
		if n >= 0 {
			for i := int64(0); i < n; i++ {
				s, err := c.readLine(br)
				c.out.WriteString(s)
				if err != nil {
					if err == io.EOF {
						return nil
					}
					return err
				}
			}
			return nil
		}
		lines, err := c.readLines(br)
		if err != nil {
			return err
		}
		for i := 0; i < len(lines)+int(n); i++ {
			c.out.WriteString(lines[i])
		}
		return nil
	})
}

func splitLines(s string) []string {
	var out []string
	for len(s) > 0 {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

func cmdTail(c *cmd) int {
	c.args = append(c.args[:1], numArg(c.args[1:])...)
	// tail +N is lines from N on
	for i := 1; i < len(c.args); i++ {
		a := c.args[i]
		if a == "-n" || a == "-c" {
			i++
			continue
		}
		if len(a) > 1 && a[0] == '+' && a[1] >= '0' && a[1] <= '9' {
			c.args[i] = "-n" + a
		}
	}
	opts, files, ok := c.flags("n:c:qvfF", "lines=", "bytes=", "quiet", "silent", "verbose", "follow?")
	if !ok {
		return 1
	}
	n, bytesMode, fromStart, header := int64(10), false, false, len(files) > 1
	for _, o := range opts {
		switch o.name {
		case "n", "lines", "c", "bytes":
			v := o.val
			fromStart = strings.HasPrefix(v, "+")
			v = strings.TrimPrefix(strings.TrimPrefix(v, "+"), "-")
			num, ok := parseSize(v)
			if !ok {
				return c.badCount(o)
			}
			n, bytesMode = num, countsBytes(o.name)
		case "q", "quiet", "silent":
			header = false
		case "v", "verbose":
			header = true
		}
	}
	first := true
	return c.eachInput(files, func(name string, r io.Reader) error {
		if header {
			c.fileHeader(name, first)
		}
		first = false
		data, err := c.readAll(r)
		if err != nil {
			return err
		}
		if bytesMode {
			switch {
			case fromStart && n > 0:
				if n-1 < int64(len(data)) {
					c.out.Write(data[n-1:])
				}
			case fromStart:
				c.out.Write(data)
			case n < int64(len(data)):
				c.out.Write(data[int64(len(data))-n:])
			default:
				c.out.Write(data)
			}
			return nil
		}
		lines := splitLines(string(data))
		start := 0
		if fromStart {
			start = int(n) - 1
			if start < 0 {
				start = 0
			}
		} else {
			start = len(lines) - int(n)
		}
		for i := max(start, 0); i < len(lines); i++ {
			c.out.WriteString(lines[i])
		}
		return nil
	})
}

func cmdWc(c *cmd) int {
	opts, files, ok := c.flags("lwcmL", "lines", "words", "bytes", "chars", "max-line-length")
	if !ok {
		return 1
	}
	var lines, words, bytesF, chars, maxlen bool
	for _, o := range opts {
		switch o.name {
		case "l", "lines":
			lines = true
		case "w", "words":
			words = true
		case "c", "bytes":
			bytesF = true
		case "m", "chars":
			chars = true
		case "L", "max-line-length":
			maxlen = true
		}
	}
	if !lines && !words && !bytesF && !chars && !maxlen {
		lines, words, bytesF = true, true, true
	}
	type counts struct{ l, w, m, c, L int64 }
	var results []counts
	var names []string
	var total counts
	// the width of the columns, as GNU wc computes it
	width, minWidth := int64(0), 1
	if len(files) == 0 {
		minWidth = 7
	}
	for _, f := range files {
		if fi, err := c.stat(f); err == nil && fi.mode.IsRegular() {
			width += fi.size
		} else if f == "-" || err == nil {
			minWidth = 7
		}
	}
	w := len(strconv.FormatInt(width, 10))
	if w < minWidth {
		w = minWidth
	}
	nOpts := 0
	for _, b := range []bool{lines, words, bytesF, chars, maxlen} {
		if b {
			nOpts++
		}
	}
	if nOpts == 1 && len(files) <= 1 {
		w = 1
	}
	print := func(k counts, name string) {
		var parts []string
		add := func(on bool, v int64) {
			if on {
				parts = append(parts, fmt.Sprintf("%*d", w, v))
			}
		}
		add(lines, k.l)
		add(words, k.w)
		add(chars, k.m)
		add(bytesF, k.c)
		add(maxlen, k.L)
		s := strings.Join(parts, " ")
		if name != "" {
			s += " " + name
		}
		c.out.WriteString(s + "\n")
	}
	status := c.eachInput(files, func(name string, r io.Reader) error {
		var k counts
		br := bufio.NewReaderSize(r, 64<<10)
		inWord := false
		var col int64
		for {
			ch, size, err := br.ReadRune()
			if err != nil {
				if err == io.EOF {
					break
				}
				return err
			}
			k.c += int64(size)
			k.m++
			switch ch {
			case '\n':
				k.l++
				k.L = max(k.L, col)
				col = 0
			case '\t':
				col += 8 - col%8
			default:
				col++
			}
			if ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r' || ch == '\v' || ch == '\f' {
				inWord = false
			} else if !inWord && (ch != 0xFFFD || size > 1) {
				inWord = true
				k.w++
			}
		}
		k.L = max(k.L, col)
		if len(files) > 0 {
			results = append(results, k)
			names = append(names, name)
			print(k, name)
		} else {
			print(k, "")
		}
		total.l += k.l
		total.w += k.w
		total.m += k.m
		total.c += k.c
		total.L = max(total.L, k.L)
		return nil
	})
	if len(files) > 1 {
		print(total, "total")
	}
	return status
}

func cmdMkdir(c *cmd) int {
	opts, dirs, ok := c.flags("pvm:", "parents", "verbose", "mode=")
	if !ok {
		return 1
	}
	parents, verbose, mode := false, false, uint32(0o777)
	for _, o := range opts {
		switch o.name {
		case "p", "parents":
			parents = true
		case "v", "verbose":
			verbose = true
		case "m", "mode":
			m, err := strconv.ParseUint(o.val, 8, 32)
			if err != nil {
				c.errorf("invalid mode '%s'", o.val)
				return 1
			}
			mode = uint32(m)
		}
	}
	if len(dirs) == 0 {
		c.errorf("missing operand")
		return 1
	}
	status := 0
	for _, d := range dirs {
		abs := c.abs(d)
		if parents {
			if err := c.mkdirAll(abs, mode, verbose); err != nil {
				c.errorf("cannot create directory '%s': %s", d, errText(err))
				status = 1
			}
			continue
		}
		if err := c.r.sh.ns.mkdir(abs, mode); err != nil {
			c.errorf("cannot create directory '%s': %s", d, errText(err))
			status = 1
		} else if verbose {
			fmt.Fprintf(c.out, "mkdir: created directory '%s'\n", d)
		}
	}
	return status
}

func (c *cmd) mkdirAll(abs string, mode uint32, verbose bool) error {
	if c.canceled() {
		return context.Cause(c.ctx)
	}
	abs = strings.TrimSuffix(abs, "/")
	if fi, err := c.r.sh.ns.stat(abs); err == nil {
		if !fi.IsDir() {
			return syscall.EEXIST
		}
		return nil
	}
	if parent := path.Dir(abs); parent != abs {
		if err := c.mkdirAll(parent, 0o777, verbose); err != nil {
			return err
		}
	}
	if c.canceled() { // a deep path takes a while: stop with the call
		return context.Cause(c.ctx)
	}
	err := c.r.sh.ns.mkdir(abs, mode)
	if err == nil && verbose {
		fmt.Fprintf(c.out, "mkdir: created directory '%s'\n", abs)
	}
	if errno(err) == syscall.EEXIST {
		return nil
	}
	return err
}

func cmdRmdir(c *cmd) int {
	opts, dirs, ok := c.flags("pv", "parents", "verbose", "ignore-fail-on-non-empty")
	if !ok {
		return 1
	}
	parents, ignore := false, false
	for _, o := range opts {
		switch o.name {
		case "p", "parents":
			parents = true
		case "ignore-fail-on-non-empty":
			ignore = true
		}
	}
	if len(dirs) == 0 {
		c.errorf("missing operand")
		return 1
	}
	status := 0
	for _, d := range dirs {
		for {
			fi, err := c.lstat(d)
			if err == nil && !fi.IsDir() {
				err = syscall.ENOTDIR
			}
			if err == nil {
				err = c.r.sh.ns.remove(c.abs(d))
			}
			if err != nil {
				if !(ignore && errno(err) == syscall.ENOTEMPTY) {
					c.errorf("failed to remove '%s': %s", d, errText(err))
					status = 1
				}
				break
			}
			if !parents {
				break
			}
			d = path.Dir(strings.TrimSuffix(d, "/"))
			if d == "." || d == "/" {
				break
			}
		}
	}
	return status
}

func cmdRm(c *cmd) int {
	opts, files, ok := c.flags("rRfivdI", "recursive", "force", "verbose", "dir", "interactive?", "no-preserve-root", "preserve-root?", "one-file-system")
	if !ok {
		return 1
	}
	recursive, force, verbose, dir := false, false, false, false
	for _, o := range opts {
		switch o.name {
		case "r", "R", "recursive":
			recursive = true
		case "f", "force":
			force = true
		case "v", "verbose":
			verbose = true
		case "d", "dir":
			dir = true
		}
	}
	if len(files) == 0 && !force {
		c.errorf("missing operand")
		return 1
	}
	status := 0
	for _, f := range files {
		base := path.Base(strings.TrimSuffix(f, "/"))
		if base == "." || base == ".." {
			c.errorf("refusing to remove '.' or '..' directory: skipping '%s'", f)
			status = 1
			continue
		}
		abs := c.abs(f)
		if abs == "/" || abs == wsRoot || abs == tmpRoot || abs == wsRoot+"/" || abs == tmpRoot+"/" {
			if abs == "/" {
				c.errorf("it is dangerous to operate recursively on '/'")
			} else {
				c.errorf("cannot remove '%s': Device or resource busy", f)
			}
			status = 1
			continue
		}
		fi, err := c.r.sh.ns.lstat(abs)
		if err != nil {
			if !(force && errno(err) == syscall.ENOENT) {
				c.errorf("cannot remove '%s': %s", f, errText(err))
				status = 1
			}
			continue
		}
		if fi.IsDir() {
			if !recursive && !dir {
				c.errorf("cannot remove '%s': Is a directory", f)
				status = 1
				continue
			}
			if recursive {
				if err := c.removeTree(abs, f, verbose); err != nil {
					status = 1
				}
				continue
			}
		}
		if err := c.r.sh.ns.remove(abs); err != nil {
			c.errorf("cannot remove '%s': %s", f, errText(err))
			status = 1
		} else if verbose {
			if fi.IsDir() {
				fmt.Fprintf(c.out, "removed directory '%s'\n", f)
			} else {
				fmt.Fprintf(c.out, "removed '%s'\n", f)
			}
		}
	}
	return status
}

func (c *cmd) removeTree(abs, shown string, verbose bool) error {
	ents, err := c.readDir(abs)
	if err != nil {
		c.errorf("cannot remove '%s': %s", shown, errText(err))
		return err
	}
	var firstErr error
	for _, e := range ents {
		if c.canceled() {
			return c.ctx.Err()
		}
		child, childShown := abs+"/"+e.name, strings.TrimSuffix(shown, "/")+"/"+e.name
		if e.typ.IsDir() {
			if err := c.removeTree(child, childShown, verbose); err != nil && firstErr == nil {
				firstErr = err
			}
			continue
		}
		if err := c.r.sh.ns.remove(child); err != nil {
			c.errorf("cannot remove '%s': %s", childShown, errText(err))
			if firstErr == nil {
				firstErr = err
			}
		} else if verbose {
			fmt.Fprintf(c.out, "removed '%s'\n", childShown)
		}
	}
	if firstErr != nil {
		return firstErr
	}
	if err := c.r.sh.ns.remove(abs); err != nil {
		c.errorf("cannot remove '%s': %s", shown, errText(err))
		return err
	}
	if verbose {
		fmt.Fprintf(c.out, "removed directory '%s'\n", shown)
	}
	return nil
}

func cmdTouch(c *cmd) int {
	opts, files, ok := c.flags("acmd:r:t:h", "no-create", "date=", "reference=", "no-dereference", "time=")
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

func cmdBasename(c *cmd) int {
	opts, names, ok := c.flags("as:z", "multiple", "suffix=", "zero")
	if !ok {
		return 1
	}
	multiple, suffix := false, ""
	for _, o := range opts {
		switch o.name {
		case "a", "multiple":
			multiple = true
		case "s", "suffix":
			suffix, multiple = o.val, true
		}
	}
	if len(names) == 0 {
		c.errorf("missing operand")
		return 1
	}
	if !multiple {
		if len(names) == 2 {
			suffix = names[1]
		} else if len(names) > 2 {
			c.errorf("extra operand '%s'", names[2])
			return 1
		}
		names = names[:1]
	}
	for _, n := range names {
		b := baseName(n)
		if suffix != "" && b != suffix && strings.HasSuffix(b, suffix) {
			b = b[:len(b)-len(suffix)]
		}
		c.out.WriteString(b + "\n")
	}
	return 0
}

func baseName(n string) string {
	t := strings.TrimRight(n, "/")
	if t == "" {
		if n == "" {
			return ""
		}
		return "/"
	}
	return path.Base(t)
}

func dirName(n string) string {
	t := strings.TrimRight(n, "/")
	if t == "" {
		if strings.HasPrefix(n, "/") {
			return "/"
		}
		return "."
	}
	i := strings.LastIndexByte(t, '/')
	if i < 0 {
		return "."
	}
	d := strings.TrimRight(t[:i], "/")
	if d == "" {
		return "/"
	}
	return d
}

func cmdDirname(c *cmd) int {
	_, names, ok := c.flags("z", "zero")
	if !ok {
		return 1
	}
	if len(names) == 0 {
		c.errorf("missing operand")
		return 1
	}
	for _, n := range names {
		c.out.WriteString(dirName(n) + "\n")
	}
	return 0
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
				c.errorf("option requires an argument -- '%c'", a[1])
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
			c.errorf("invalid option -- '%s'", strings.TrimLeft(a, "-"))
			return 1
		}
	}
	if len(args) == 0 || len(args) > 3 {
		c.errorf("missing operand")
		return 1
	}
	nums := make([]float64, len(args))
	prec := 0
	for i, a := range args {
		v, err := strconv.ParseFloat(a, 64)
		if err != nil {
			c.errorf("invalid floating point argument: '%s'", a)
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
		c.errorf("invalid Zero increment value: '%s'", args[1])
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

func cmdSleep(c *cmd) int {
	if len(c.args) < 2 {
		c.errorf("missing operand")
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
			c.errorf("invalid time interval '%s'", a)
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

// exported lists the exported variables, sorted by name.
func exported(env expand.Environ) []string {
	seen := map[string]string{}
	env.Each(func(name string, vr expand.Variable) bool {
		if vr.Exported && vr.IsSet() && vr.Kind == expand.String {
			seen[name] = vr.Str
		} else {
			delete(seen, name)
		}
		return true
	})
	var out []string
	for k, v := range seen {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
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

func cmdWhich(c *cmd) int {
	_, names, ok := c.flags("as", "all", "skip-alias")
	if !ok {
		return 1
	}
	status := 0
	for _, n := range names {
		if p, ok := builtinPath(n); ok && !strings.Contains(n, "/") {
			c.out.WriteString(p + "\n")
		} else {
			status = 1
		}
	}
	return status
}

func cmdTac(c *cmd) int {
	_, files, ok := c.flags("")
	if !ok {
		return 1
	}
	return c.eachInput(files, func(name string, r io.Reader) error {
		lines, err := c.readLines(r)
		if err != nil {
			return err
		}
		if n := len(lines); n > 0 && !strings.HasSuffix(lines[n-1], "\n") {
			// GNU tac glues an unterminated last line to the one before
			last := lines[n-1]
			lines = lines[:n-1]
			c.out.WriteString(last)
		}
		for i := len(lines) - 1; i >= 0; i-- {
			c.out.WriteString(lines[i])
		}
		return nil
	})
}

func cmdRev(c *cmd) int {
	_, files, ok := c.flags("")
	if !ok {
		return 1
	}
	return c.eachInput(files, func(name string, r io.Reader) error {
		lines, err := c.readLines(r)
		if err != nil {
			return err
		}
		for _, l := range lines {
			body, nl := strings.CutSuffix(l, "\n")
			rs := []rune(body)
			for i, j := 0, len(rs)-1; i < j; i, j = i+1, j-1 {
				rs[i], rs[j] = rs[j], rs[i]
			}
			c.out.WriteString(string(rs))
			if nl {
				c.out.WriteByte('\n')
			}
		}
		return nil
	})
}

func cmdNl(c *cmd) int {
	opts, files, ok := c.flags("b:w:s:v:i:n:", "body-numbering=", "number-width=", "number-separator=")
	if !ok {
		return 1
	}
	style, width, sep, start, incr, format := "t", 6, "\t", 1, 1, "rn"
	for _, o := range opts {
		switch o.name {
		case "b", "body-numbering":
			style = o.val
		case "w", "number-width":
			width, _ = strconv.Atoi(o.val)
		case "s", "number-separator":
			sep = o.val
		case "v":
			start, _ = strconv.Atoi(o.val)
		case "i":
			incr, _ = strconv.Atoi(o.val)
		case "n":
			format = o.val
		}
	}
	n := start
	return c.eachInput(files, func(name string, r io.Reader) error {
		lines, err := c.readLines(r)
		if err != nil {
			return err
		}
		for _, l := range lines {
			body := strings.TrimSuffix(l, "\n")
			if style == "a" || style == "t" && body != "" {
				var num string
				switch format {
				case "ln":
					num = fmt.Sprintf("%-*d", width, n)
				case "rz":
					num = fmt.Sprintf("%0*d", width, n)
				default:
					num = fmt.Sprintf("%*d", width, n)
				}
				c.out.WriteString(num + sep + l)
				n += incr
			} else {
				c.out.WriteString(strings.Repeat(" ", width+len(sep)) + l)
			}
		}
		if len(lines) > 0 && !strings.HasSuffix(lines[len(lines)-1], "\n") {
			c.out.WriteByte('\n')
		}
		return nil
	})
}

func cmdYes(c *cmd) int {
	s := "y"
	if len(c.args) > 1 {
		s = strings.Join(c.args[1:], " ")
	}
	line := []byte(s + "\n")
	buf := bytes.Repeat(line, max(1, 8192/len(line)))
	for !c.canceled() {
		if _, err := c.out.Write(buf); err != nil {
			return 1
		}
	}
	return 1
}

func cmdTee(c *cmd) int {
	opts, files, ok := c.flags("ai", "append", "ignore-interrupts")
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

func cmdNproc(c *cmd) int    { c.out.WriteString("2\n"); return 0 }
func cmdWhoami(c *cmd) int   { c.out.WriteString(userName(c.r.sh.opts.UID) + "\n"); return 0 }
func cmdHostname(c *cmd) int { c.out.WriteString("sandbox\n"); return 0 }
func cmdUname(c *cmd) int {
	all := len(c.args) > 1 && (c.args[1] == "-a" || c.args[1] == "--all")
	switch {
	case all:
		c.out.WriteString("Linux sandbox 6.1.0 #1 SMP x86_64 GNU/Linux\n")
	case len(c.args) > 1 && c.args[1] == "-m":
		c.out.WriteString("x86_64\n")
	case len(c.args) > 1 && c.args[1] == "-r":
		c.out.WriteString("6.1.0\n")
	default:
		c.out.WriteString("Linux\n")
	}
	return 0
}

func cmdId(c *cmd) int {
	uid, gid := c.r.sh.opts.UID, c.r.sh.opts.GID
	switch {
	case len(c.args) > 1 && c.args[1] == "-u":
		fmt.Fprintf(c.out, "%d\n", uid)
	case len(c.args) > 1 && c.args[1] == "-g":
		fmt.Fprintf(c.out, "%d\n", gid)
	case len(c.args) > 1 && c.args[1] == "-un":
		fmt.Fprintf(c.out, "%s\n", userName(uid))
	default:
		fmt.Fprintf(c.out, "uid=%d(%s) gid=%d(%s) groups=%d(%s)\n", uid, userName(uid), gid, userName(gid), gid, userName(gid))
	}
	return 0
}
