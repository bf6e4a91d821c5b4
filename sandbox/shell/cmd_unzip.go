package shell

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"
	"syscall"
	"time"
)

func init() {
	// -l -t -p -q, and zipinfo's -Z1; extraction is the sandbox's
	register(&command{names: []string{"unzip"}, run: cmdUnzip, opts: opts("lptqZ"), ownArgs: true, check: unzipCheck})
}

// unzipArgs is a command line of unzip the fast path runs: the options,
// then the archive, then names (patterns) of members.
type unzipArgs struct {
	mode     byte // 'l' list, '1' names (zipinfo -1), 'p' to stdout, 't' test
	quiet    bool
	zip      string
	patterns []string
	why      string
}

func parseUnzip(args []string) *unzipArgs {
	u := &unzipArgs{}
	i := 0
	set := func(m byte) bool {
		if u.mode != 0 && u.mode != m {
			u.why = "unzip with more than one of -l -p -t -Z is not built in"
			return false
		}
		u.mode = m
		return true
	}
	switch {
	case len(args) > 0 && args[0] == "-Z1":
		u.mode, i = '1', 1
	case len(args) > 1 && args[0] == "-Z" && args[1] == "-1":
		u.mode, i = '1', 2
	case len(args) > 0 && strings.HasPrefix(args[0], "-Z"):
		u.why = "zipinfo (unzip -Z) is built in as -Z1 only"
		return u
	}
	for ; u.mode != '1' && i < len(args); i++ {
		a := args[i]
		if len(a) < 2 || a[0] != '-' {
			break
		}
		for _, l := range a[1:] {
			switch l {
			case 'l', 'p', 't':
				if !set(byte(l)) {
					return u
				}
			case 'q':
				if u.quiet {
					u.why = "unzip -qq is not built in"
					return u
				}
				u.quiet = true
			default:
				u.why = fmt.Sprintf("unzip -%c is not built in (extraction runs in the sandbox)", l)
				return u
			}
		}
	}
	switch {
	case u.mode == 0:
		u.why = "unzip extracting files is not built in (it runs in the sandbox)"
	case i >= len(args):
		u.why = "unzip without an archive is not built in"
	default:
		u.zip, u.patterns = args[i], args[i+1:]
		for _, p := range u.patterns {
			if strings.HasPrefix(p, "-") || p == "" {
				u.why = "unzip options after the archive are not built in"
			}
		}
		if u.quiet && u.mode == 'p' {
			u.why = "unzip -pq is not built in"
		}
	}
	return u
}

func unzipCheck(args []string) string { return parseUnzip(args).why }

// zipEnd is what the end of central directory record says.
type zipEnd struct {
	entries, dirSize, dirOffset, at int64
	comment                         []byte
}

// findEnd reads the end records of a zip (zip64's too); ok false if
// there is no end of central directory signature.
func findEnd(r io.ReaderAt, size int64) (zipEnd, bool) {
	n := min(size, 22+65535)
	tail := make([]byte, n)
	if _, err := r.ReadAt(tail, size-n); err != nil && err != io.EOF {
		return zipEnd{}, false
	}
	i := bytes.LastIndex(tail, []byte("PK\x05\x06"))
	for i >= 0 && len(tail)-i < 22 {
		i = bytes.LastIndex(tail[:i], []byte("PK\x05\x06"))
	}
	if i < 0 {
		return zipEnd{}, false
	}
	e := tail[i:]
	le := binary.LittleEndian
	end := zipEnd{entries: int64(le.Uint16(e[10:])), dirSize: int64(le.Uint32(e[12:])),
		dirOffset: int64(le.Uint32(e[16:])), at: size - n + int64(i)}
	if cl := int(le.Uint16(e[20:])); 22+cl <= len(e) {
		end.comment = e[22 : 22+cl]
	}
	if end.entries == 0xffff || end.dirSize == 0xffffffff || end.dirOffset == 0xffffffff {
		loc := make([]byte, 20)
		if end.at >= 20 {
			if _, err := r.ReadAt(loc, end.at-20); err == nil && string(loc[:4]) == "PK\x06\x07" {
				off := int64(le.Uint64(loc[8:]))
				rec := make([]byte, 56)
				if off >= 0 && off < size {
					if _, err := r.ReadAt(rec, off); err == nil && string(rec[:4]) == "PK\x06\x06" {
						end.entries, end.dirSize = int64(le.Uint64(rec[32:])), int64(le.Uint64(rec[40:]))
						end.dirOffset, end.at = int64(le.Uint64(rec[48:])), off
					}
				}
			}
		}
	}
	return end, true
}

// zipName is a member's name as unzip prints it: its Unicode path
// field when that matches, control characters as ^X.
func zipName(f *zip.File) string {
	name := f.Name
	for ex := f.Extra; len(ex) >= 4; {
		id, n := binary.LittleEndian.Uint16(ex), int(binary.LittleEndian.Uint16(ex[2:]))
		if 4+n > len(ex) {
			break
		}
		d := ex[4 : 4+n]
		if id == 0x7075 && n > 5 && d[0] == 1 && binary.LittleEndian.Uint32(d[1:]) == crc32.ChecksumIEEE([]byte(f.Name)) {
			name = string(d[5:])
		}
		ex = ex[4+n:]
	}
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		switch ch := name[i]; {
		case ch < 0x20:
			b.WriteByte('^')
			b.WriteByte(ch + 64)
		default:
			b.WriteByte(ch)
		}
	}
	return b.String()
}

// zipTime is a member's time as unzip lists it: its Unix time field's
// (in UTC, the fast path's zone), else the DOS date and time.
func zipTime(f *zip.File) time.Time {
	for ex := f.Extra; len(ex) >= 4; {
		id, n := binary.LittleEndian.Uint16(ex), int(binary.LittleEndian.Uint16(ex[2:]))
		if 4+n > len(ex) {
			break
		}
		d := ex[4 : 4+n]
		switch {
		case id == 0x5455 && n >= 5 && d[0]&1 != 0:
			return time.Unix(int64(int32(binary.LittleEndian.Uint32(d[1:]))), 0).UTC()
		case id == 0x5855 && n >= 8:
			return time.Unix(int64(int32(binary.LittleEndian.Uint32(d[4:]))), 0).UTC()
		}
		ex = ex[4+n:]
	}
	d, t := f.ModifiedDate, f.ModifiedTime
	return time.Date(int(d>>9)+1980, time.Month(d>>5&15), int(d&31), int(t>>11), int(t>>5&63), int(t&31)*2, 0, time.UTC)
}

// zipLegacyName reports whether a name is in a DOS code page, which
// unzip converts (the fast path does not).
func zipLegacyName(f *zip.File) bool {
	if f.Flags&0x800 != 0 || f.CreatorVersion>>8 == 3 {
		return false
	}
	for i := 0; i < len(f.Name); i++ {
		if f.Name[i] >= 0x80 {
			return true
		}
	}
	return false
}

// unzipMatch is unzip's wildcard match: * and ? cross slashes, [...] is
// a set ([!...] or [^...] its complement).
func unzipMatch(p, s string) bool { return unzipMatchStop(p, s, nil) }

// unzipMatchStop is unzipMatch that gives up (false) once stop says so.
// It goes through the name once, going back only to the last * seen:
// each token but * takes one byte, so the last * can take over what an
// earlier one would have, and the cost is at most the pattern's length
// times the name's, never exponential (a recursion on each * took
// '*a*a*a*a*a*a*b' against a name of 300 a's past any timeout).
func unzipMatchStop(p, s string, stop func() bool) bool {
	pi, si := 0, 0
	starP, starS := -1, 0
	steps := 0
	for si < len(s) {
		if steps++; steps&0x3fff == 0 && stop != nil && stop() {
			return false
		}
		if pi < len(p) && p[pi] == '*' {
			starP, starS = pi, si
			pi++
			continue
		}
		if pi < len(p) {
			if next, ok := unzipOne(p, pi, s[si]); ok {
				pi, si = next, si+1
				continue
			}
		}
		if starP < 0 {
			return false
		}
		starS++
		pi, si = starP+1, starS
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// unzipOne matches the token of p at i (not a *) against the byte ch: it
// returns where the next token starts.
func unzipOne(p string, i int, ch byte) (int, bool) {
	switch p[i] {
	case '\\':
		if i+1 < len(p) {
			i++
		}
		return i + 1, p[i] == ch
	case '?':
		return i + 1, true
	case '[':
		end := strings.IndexByte(p[i+1:], ']')
		if end < 0 {
			return i + 1, ch == '['
		}
		set := p[i+1 : i+1+end]
		neg := strings.HasPrefix(set, "!") || strings.HasPrefix(set, "^")
		if neg {
			set = set[1:]
		}
		in := false
		for j := 0; j < len(set); j++ {
			if j+2 < len(set) && set[j+1] == '-' {
				if ch >= set[j] && ch <= set[j+2] {
					in = true
				}
				j += 2
			} else if set[j] == ch {
				in = true
			}
		}
		return i + 2 + end, in != neg
	}
	return i + 1, p[i] == ch
}

func cmdUnzip(c *cmd) int {
	u := parseUnzip(c.args[1:])
	if u.why != "" {
		c.errorf("%s", u.why)
		return 10
	}
	prog := "unzip"
	if u.mode == '1' {
		prog = "zipinfo"
	}
	// unzip tries the name, then with .zip and .ZIP
	var f vfile
	name := u.zip
	for _, n := range []string{u.zip, u.zip + ".zip", u.zip + ".ZIP"} {
		if fi, err := c.stat(n); err == nil && !fi.IsDir() {
			if file, err := c.open(n); err == nil {
				f, name = file, n
				break
			}
		}
	}
	if f == nil {
		fmt.Fprintf(c.stderr, "%s:  cannot find or open %s, %s.zip or %s.ZIP.\n", prog, u.zip, u.zip, u.zip)
		return 9
	}
	defer f.Close()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		c.fail(name, err)
		return 9
	}
	// where unzip reports: stdout when it tests, else stderr
	var msgW io.Writer = c.stderr
	if u.mode == 't' {
		msgW = c.out
	}
	report := func(format string, a ...any) {
		if msgW == c.stderr {
			c.out.Flush()
		}
		fmt.Fprintf(msgW, format, a...)
	}
	end, ok := findEnd(f, size)
	if !ok {
		if u.mode == 'l' || u.mode == 't' {
			fmt.Fprintf(c.out, "Archive:  %s\n", name)
		} else {
			report("[%s]\n", name)
		}
		report("  End-of-central-directory signature not found.  Either this file is not\n" +
			"  a zipfile, or it constitutes one disk of a multi-part archive.  In the\n" +
			"  latter case the central directory and zipfile comment will be found on\n" +
			"  the last disk(s) of this archive.\n")
		if u.mode != 'p' {
			report("%s:  cannot find zipfile directory in one of %s or\n%s%s.zip, and cannot find %s.ZIP, period.\n",
				prog, name, strings.Repeat(" ", len(prog)+3), name, name)
		}
		return 9
	}
	// the central directory, as archive/zip holds it: its bytes and a
	// File of some 400 bytes an entry
	if end.dirSize > size || end.entries > end.dirSize/46+1 {
		c.errorf("%s: the central directory's size is beyond the archive (a corrupt zip: not read on the fast path)", name)
		return 3
	}
	if !c.grow(2*end.dirSize + 400*end.entries) {
		return 3
	}
	zr, err := zip.NewReader(io.NewSectionReader(f, 0, size), size)
	if err != nil {
		if c.canceled() {
			return 1
		}
		c.errorf("%s: %v (a corrupt zip: not read on the fast path)", name, err)
		return 3
	}
	for _, zf := range zr.File {
		if zipLegacyName(zf) {
			c.errorf("%s: names in a DOS code page are not built in on the fast path", name)
			return 3
		}
	}
	status := 0
	if u.mode != '1' && u.mode != 'p' && !u.quiet {
		fmt.Fprintf(c.out, "Archive:  %s\n", name)
	}
	if extra := end.at - (end.dirOffset + end.dirSize); extra != 0 {
		report("warning [%s]:  %d extra bytes at beginning or within zipfile\n  (attempting to process anyway)\n", name, extra)
		status = 1
	}
	if len(zr.File) == 0 {
		if u.mode == '1' {
			c.out.WriteString("Empty zipfile.\n")
		} else {
			report("warning [%s]:  zipfile is empty\n", name)
		}
		return 1
	}
	if len(end.comment) > 0 && (u.mode == 'l' || u.mode == 't') && !u.quiet {
		c.out.Write(end.comment)
		c.out.WriteByte('\n')
	}
	// the members the patterns select, and the patterns that matched
	matched := make([]bool, len(u.patterns))
	var files []*zip.File
	for _, zf := range zr.File {
		if c.canceled() {
			return 1
		}
		sel := len(u.patterns) == 0
		for i, p := range u.patterns {
			if unzipMatchStop(p, zf.Name, c.canceled) {
				sel, matched[i] = true, true
			}
		}
		if sel {
			files = append(files, zf)
		}
	}
	switch u.mode {
	case '1':
		for _, zf := range files {
			c.out.WriteString(zipName(zf) + "\n")
		}
	case 'l':
		c.out.WriteString("  Length      Date    Time    Name\n---------  ---------- -----   ----\n")
		var total uint64
		for _, zf := range files {
			t := zipTime(zf)
			fmt.Fprintf(c.out, "%9d  %04d-%02d-%02d %02d:%02d   %s\n", zf.UncompressedSize64,
				t.Year(), int(t.Month()), t.Day(), t.Hour(), t.Minute(), zipName(zf))
			total += zf.UncompressedSize64
		}
		plural := "s"
		if len(files) == 1 {
			plural = ""
		}
		fmt.Fprintf(c.out, "---------                     -------\n%9d                     %d file%s\n", total, len(files), plural)
	case 'p', 't':
		bad := 0
		for _, zf := range files {
			if c.canceled() {
				return 1
			}
			if u.mode == 't' && !u.quiet {
				fmt.Fprintf(c.out, "    testing: %s ", padBytes(zipName(zf), 22))
			}
			var w io.Writer = io.Discard
			if u.mode == 'p' {
				w = c.out
			}
			err := unzipCopy(c, zf, w)
			switch {
			case err == nil:
				if u.mode == 't' && !u.quiet {
					c.out.WriteString("  OK\n")
				}
			case errors.Is(err, errOutputLimit) || errno(err) == syscall.EPIPE || c.canceled():
				return 1
			case errors.Is(err, zip.ErrChecksum):
				bad++
				crc := fmt.Sprintf("  bad CRC %08x  (should be %08x)\n", unzipCRC(c, zf), zf.CRC32)
				switch {
				case u.mode == 't' && !u.quiet:
					c.out.WriteString(crc)
				case u.mode == 't':
					fmt.Fprintf(c.out, "%s%s", padBytes(zipName(zf), 22), crc)
				default:
					c.out.Flush()
					fmt.Fprintf(c.stderr, "%s%s", padBytes(zipName(zf), 22), crc)
				}
			default:
				bad++
				c.out.Flush()
				fmt.Fprintf(c.stderr, "%s:  %s: %v (the fast path cannot say it as unzip does)\n", prog, zipName(zf), err)
			}
		}
		unmatched := 0
		for i, ok := range matched {
			if !ok {
				report("caution: filename not matched:  %s\n", u.patterns[i])
				unmatched++
			}
		}
		if u.mode == 't' {
			switch {
			case bad > 0 || unmatched > 0:
				fmt.Fprintf(c.out, "At least one error was detected in %s.\n", name)
			case len(u.patterns) > 0:
				plural := "s"
				if len(files) == 1 {
					plural = ""
				}
				fmt.Fprintf(c.out, "No errors detected in %s for the %d file%s tested.\n", name, len(files), plural)
			default:
				fmt.Fprintf(c.out, "No errors detected in compressed data of %s.\n", name)
			}
		}
		switch {
		case unmatched > 0:
			return 11
		case bad > 0:
			return 2
		}
		return status
	}
	if u.mode == '1' {
		for i, ok := range matched {
			if !ok {
				report("caution: filename not matched:  %s\n", u.patterns[i])
				status = 11
			}
		}
	}
	if len(u.patterns) > 0 && len(files) == 0 {
		return 11
	}
	return status
}

// unzipCopy writes a member's data to w, checked against its CRC.
func unzipCopy(c *cmd, zf *zip.File, w io.Writer) error {
	if zf.Mode().IsDir() && zf.UncompressedSize64 == 0 {
		return nil
	}
	r, err := zf.Open()
	if err != nil {
		return err
	}
	defer r.Close()
	_, err = io.Copy(w, stoppableReader{r, c.ctx})
	return err
}

// unzipCRC is the CRC of a member's data as it decompresses.
func unzipCRC(c *cmd, zf *zip.File) uint32 {
	r, err := zf.Open()
	if err != nil {
		return 0
	}
	defer r.Close()
	h := crc32.NewIEEE()
	io.Copy(h, stoppableReader{r, c.ctx})
	return h.Sum32()
}

// padBytes pads s with spaces to n bytes, as C's %-22s does.
func padBytes(s string, n int) string {
	if len(s) >= n {
		return s
	}
	return s + strings.Repeat(" ", n-len(s))
}
