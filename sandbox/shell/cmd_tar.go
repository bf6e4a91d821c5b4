package shell

import (
	"archive/tar"
	"bufio"
	"compress/bzip2"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func init() {
	register(&command{names: []string{"tar"}, run: cmdTar, opts: opts(tarShorts, tarLongs...), ownArgs: true, check: tarCheck})
}

// tarCheck says which tar forms the fast path cannot run: other
// compressions than gzip (bzip2 only to read), appending, updating.
func tarCheck(args []string) string {
	args = tarOldStyle(args)
	create, bz := false, false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			i = len(args)
		case strings.HasPrefix(a, "--"):
			name, _, _ := strings.Cut(a[2:], "=")
			long, _, err := matchLong(name, tarLongs)
			if err != nil {
				return "tar " + a + " is not built in"
			}
			switch long {
			case "xz", "lzma", "zstd", "lzip", "lzop", "use-compress-program", "absolute-names":
				return "tar --" + long + " is not built in"
			case "bzip2":
				bz = true
			case "create":
				create = true
			}
		case len(a) > 1 && a[0] == '-':
			for j := 1; j < len(a); j++ {
				l := a[j]
				if strings.IndexByte("JZPXruAd", l) >= 0 || strings.IndexByte(tarShorts, l) < 0 {
					return fmt.Sprintf("tar -%c is not built in", l)
				}
				if strings.IndexByte(tarShortValue, l) >= 0 {
					val := a[j+1:]
					if val == "" && i+1 < len(args) {
						i++
						val = args[i]
					}
					if l == 'f' {
						for _, ext := range []string{".xz", ".txz", ".zst", ".tzst", ".lz", ".lzma", ".tlz", ".Z", ".lzo"} {
							if strings.HasSuffix(val, ext) {
								return "tar of a " + ext + " archive is not built in"
							}
						}
					}
					break
				}
				switch l {
				case 'j':
					bz = true
				case 'c':
					create = true
				}
			}
		}
	}
	if bz && create {
		return "tar -cj is not built in"
	}
	return ""
}

// tarOldStyle expands the old style, "tar czf out.tgz dir": a first word
// without a dash is a bundle of letters whose values follow in order.
func tarOldStyle(args []string) []string {
	if len(args) == 0 || args[0] == "" || args[0][0] == '-' {
		return args
	}
	var na []string
	rest := args[1:]
	for _, l := range args[0] {
		na = append(na, "-"+string(l))
		if strings.ContainsRune(tarShortValue, l) && len(rest) > 0 {
			na = append(na, rest[0])
			rest = rest[1:]
		}
	}
	return append(na, rest...)
}

// tarOperand is a file to archive and the directory (-C) it is taken in.
type tarOperand struct{ name, dir string }

type tarCmd struct {
	c        *cmd
	mode     byte // 'c', 'x' or 't'
	file     string
	gzip     bool
	bzip2    bool // reading only: compress/bzip2 cannot write
	auto     bool
	verbose  int
	dir      string // the last -C, where -x extracts
	excludes []string
	strip    int
	toStdout bool
	keepOld  bool
	skipOld  bool
	deref    bool
	numeric  bool
	owner    string
	group    string
	operands []tarOperand
	failed   bool
	// names of leading prefixes already reported as removed
	removed map[string]bool
	listW   io.Writer // where -v lists: stdout, or stderr when the archive is stdout
}

// Short options of tar that take a value.
const tarShortValue = "fCX"

// tarShorts are the short options that tarCmd.short takes (without the
// ones it refuses: JZPXruAd).
const tarShorts = "cxtfCzjavOkhpom"

// tarUsage ends an invocation error as GNU tar does.
func (t *tarCmd) usage(format string, a ...any) int {
	t.c.errorf(format, a...)
	fmt.Fprintln(t.c.stderr, "Try 'tar --help' or 'tar --usage' for more information.")
	return 2
}

// fatal reports an error tar cannot go on after.
func (t *tarCmd) fatal(format string, a ...any) int {
	t.c.errorf(format, a...)
	t.c.errorf("Error is not recoverable: exiting now")
	return 2
}

// warn reports an error about one member and goes on; tar then exits 2.
func (t *tarCmd) warn(format string, a ...any) {
	t.c.errorf(format, a...)
	t.failed = true
}

func (t *tarCmd) status() int {
	if t.failed {
		t.c.errorf("Exiting with failure status due to previous errors")
		return 2
	}
	return 0
}

func cmdTar(c *cmd) int {
	t := &tarCmd{c: c, removed: map[string]bool{}, dir: ""}
	args := tarOldStyle(c.args[1:])
	setMode := func(m byte) bool {
		if t.mode != 0 && t.mode != m {
			return false
		}
		t.mode = m
		return true
	}
	const modeErr = "You may not specify more than one '-Acdtrux', '--delete' or  '--test-label' option"
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			for _, o := range args[i+1:] {
				t.operands = append(t.operands, tarOperand{o, t.dir})
			}
			i = len(args)
		case strings.HasPrefix(a, "--"):
			name, val, hasVal := strings.Cut(a[2:], "=")
			long, kind, err := matchLong(name, tarLongs)
			if err != nil {
				return t.usage("%s", strings.Replace(err.Error(), "--"+name, a, 1))
			}
			if kind == '=' && !hasVal {
				if i+1 >= len(args) {
					return t.usage("option '--%s' requires an argument", long)
				}
				i++
				val = args[i]
			} else if kind == 0 && hasVal {
				return t.usage("option '--%s' doesn't allow an argument", long)
			}
			if short, ok := tarLongShort[long]; ok {
				if r := t.short(short, val, setMode); r != "" {
					if r == "mode" {
						return t.usage(modeErr)
					}
					return t.usage("%s", r)
				}
				continue
			}
			switch long {
			case "exclude":
				t.excludes = append(t.excludes, val)
			case "exclude-vcs":
				t.excludes = append(t.excludes, ".git", ".svn", ".hg", ".bzr", "CVS", ".gitignore", ".gitattributes", ".gitmodules")
			case "strip-components":
				n, err := strconv.Atoi(val)
				if err != nil || n < 0 {
					return t.usage("Invalid number of elements: %s", val)
				}
				t.strip = n
			case "skip-old-files":
				t.skipOld = true
			case "numeric-owner":
				t.numeric = true
			case "owner":
				t.owner = val
			case "group":
				t.group = val
			case "xz", "lzma", "zstd", "lzip", "lzop", "use-compress-program":
				return t.usage("--%s is not supported by the shell fast path", long)
			}
			// the rest (--sort, --same-owner, --overwrite...) change
			// nothing here
		case len(a) > 1 && a[0] == '-':
			for j := 1; j < len(a); j++ {
				l := a[j]
				val := ""
				if strings.IndexByte(tarShortValue, l) >= 0 {
					val = a[j+1:]
					if val == "" {
						if i+1 >= len(args) {
							return t.usage("option requires an argument -- '%c'", l)
						}
						i++
						val = args[i]
					}
					j = len(a)
				}
				if r := t.short(l, val, setMode); r != "" {
					if r == "mode" {
						return t.usage(modeErr)
					}
					return t.usage("%s", r)
				}
			}
		default:
			t.operands = append(t.operands, tarOperand{a, t.dir})
		}
	}
	if t.mode == 0 {
		return t.usage("You must specify one of the '-Acdtrux', '--delete' or '--test-label' options")
	}
	switch t.mode {
	case 'c':
		if t.bzip2 {
			return t.usage("-j is not supported by the shell fast path when creating")
		}
		return t.create()
	default:
		return t.read()
	}
}

// tarLongs are tar's long options (see matchLong).
var tarLongs = []string{
	"create", "extract", "get", "list", "file=", "gzip", "gunzip", "ungzip", "verbose",
	"directory=", "exclude=", "exclude-vcs", "strip-components=", "to-stdout", "auto-compress",
	"keep-old-files", "skip-old-files", "dereference", "numeric-owner", "owner=", "group=",
	"same-owner", "no-same-owner", "same-permissions", "no-same-permissions",
	"preserve-permissions", "overwrite", "sort=", "totals", "touch", "no-recursion",
	"bzip2", "xz", "lzma", "zstd", "lzip", "lzop", "use-compress-program=",
	"absolute-names", "wildcards", "no-wildcards", "anchored", "no-anchored", "mode=", "mtime=",
}

// tarLongShort maps long options to their short letter.
var tarLongShort = map[string]byte{
	"create": 'c', "extract": 'x', "get": 'x', "list": 't', "file": 'f', "gzip": 'z',
	"gunzip": 'z', "ungzip": 'z', "bzip2": 'j', "verbose": 'v', "directory": 'C', "to-stdout": 'O',
	"auto-compress": 'a', "keep-old-files": 'k', "dereference": 'h', "absolute-names": 'P',
	"same-permissions": 'p', "preserve-permissions": 'p', "touch": 'm', "no-same-owner": 'o',
}

// short applies one short option; it returns an error text, or "mode"
// for a second operation mode.
func (t *tarCmd) short(l byte, val string, setMode func(byte) bool) string {
	switch l {
	case 'c', 'x', 't':
		if !setMode(l) {
			return "mode"
		}
	case 'f':
		t.file = val
	case 'C':
		t.dir = val
	case 'z':
		t.gzip = true
	case 'j':
		t.bzip2 = true
	case 'a':
		t.auto = true
	case 'v':
		t.verbose++
	case 'O':
		t.toStdout = true
	case 'k':
		t.keepOld = true
	case 'h':
		t.deref = true
	case 'p', 'o', 'm':
		// permissions and owners are kept as root keeps them
	case 'J', 'Z', 'P', 'X', 'r', 'u', 'A', 'd':
		return fmt.Sprintf("-%c is not supported by the shell fast path", l)
	default:
		return fmt.Sprintf("invalid option -- '%c'", l)
	}
	return ""
}

// matchLong finds the long option name (or an unambiguous abbreviation of
// it) among longs, and what it takes: '=' a value, 0 none.
func matchLong(name string, longs []string) (string, byte, error) {
	var match string
	kind := byte(0)
	for _, l := range longs {
		ln := strings.TrimRight(l, "=?")
		k := byte(0)
		if len(ln) < len(l) {
			k = l[len(l)-1]
		}
		if ln == name {
			return ln, k, nil
		}
		if strings.HasPrefix(ln, name) {
			if match != "" && match != ln {
				return "", 0, fmt.Errorf("option '--%s' is ambiguous", name)
			}
			match, kind = ln, k
		}
	}
	if match == "" {
		return "", 0, fmt.Errorf("unrecognized option '--%s'", name)
	}
	return match, kind, nil
}

// stripName removes what GNU tar removes from a member name: leading
// slashes and everything up to the last ".." component. It returns the
// rest and the prefix removed.
func stripName(name string) (rest, prefix string) {
	i := 0
	cut := 0
	for i < len(name) {
		for i < len(name) && name[i] == '/' {
			i++
		}
		if cut == 0 && i > 0 && strings.Trim(name[:i], "/") == "" {
			cut = i
		}
		j := strings.IndexByte(name[i:], '/')
		comp := name[i:]
		if j >= 0 {
			comp = name[i : i+j]
		}
		if comp == ".." {
			k := i + 2
			for k < len(name) && name[k] == '/' {
				k++
			}
			cut = k
		}
		if j < 0 {
			break
		}
		i += j + 1
	}
	return name[cut:], name[:cut]
}

// hasDotDot reports whether a name has a ".." component.
func hasDotDot(name string) bool {
	for _, c := range strings.Split(name, "/") {
		if c == ".." {
			return true
		}
	}
	return false
}

// excluded reports whether name (or any of its trailing parts) matches an
// --exclude pattern; * matches / as GNU tar's exclusions do.
func (t *tarCmd) excluded(name string) bool {
	if len(t.excludes) == 0 {
		return false
	}
	name = strings.TrimSuffix(name, "/")
	for _, p := range t.excludes {
		p = strings.TrimSuffix(p, "/")
		for i := 0; ; {
			if tarMatch(p, name[i:]) {
				return true
			}
			j := strings.IndexByte(name[i:], '/')
			if j < 0 {
				break
			}
			i += j + 1
		}
	}
	return false
}

// tarMatch matches a shell pattern in which * and ? also match "/".
func tarMatch(pattern, name string) bool {
	if pattern == name {
		return true
	}
	ok, err := path.Match(strings.ReplaceAll(pattern, "/", "\x00"), strings.ReplaceAll(name, "/", "\x00"))
	return err == nil && ok
}

func (t *tarCmd) removing(prefix string) {
	if prefix != "" && !t.removed[prefix] {
		t.removed[prefix] = true
		t.c.errorf("Removing leading `%s' from member names", prefix)
	}
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (w *countWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	w.n += int64(n)
	return n, err
}

// tarRecord is GNU tar's record size: archives are padded to a multiple.
const tarRecord = 10240

func (t *tarCmd) create() int {
	c := t.c
	if len(t.operands) == 0 {
		return t.usage("Cowardly refusing to create an empty archive")
	}
	var out io.Writer
	t.listW = c.out
	var archive vfile
	archiveAbs := ""
	if t.file == "" || t.file == "-" {
		out = c.out
		t.listW = c.stderr
	} else {
		f, err := c.create(t.file)
		if err != nil {
			return t.fatal("%s: Cannot open: %s", t.file, errText(err))
		}
		archive = f
		archiveAbs = c.abs(t.file)
		defer f.Close()
		out = f
		if t.auto && (strings.HasSuffix(t.file, ".gz") || strings.HasSuffix(t.file, ".tgz") || strings.HasSuffix(t.file, ".taz")) {
			t.gzip = true
		}
	}
	bw := bufio.NewWriterSize(out, 64<<10)
	var gz *gzip.Writer
	var sink io.Writer = bw
	if t.gzip {
		gz, _ = gzip.NewWriterLevel(bw, gzip.DefaultCompression)
		gz.OS = 3 // Unix, as gzip writes
		sink = gz
	}
	cw := &countWriter{w: sink}
	tw := tar.NewWriter(cw)
	var archiveInfo *fileInfo
	if archive != nil {
		archiveInfo, _ = c.r.sh.ns.stat(archiveAbs)
	}
	w := &tarWalk{t: t, tw: tw, links: map[uint64]string{}, archive: archiveInfo, archiveAbs: archiveAbs}
	for _, op := range t.operands {
		if c.canceled() {
			return 1
		}
		dir := c.dir
		if op.dir != "" {
			dir = absPath(c.dir, op.dir)
		}
		w.add(absPath(dir, op.name), op.name, true)
	}
	err := tw.Close()
	if err == nil {
		if pad := cw.n % tarRecord; pad != 0 {
			_, err = cw.Write(make([]byte, tarRecord-pad))
		}
	}
	if err == nil && gz != nil {
		err = gz.Close()
	}
	if err == nil {
		err = bw.Flush()
	}
	if err != nil && !w.writeErr {
		return t.fatal("%s: Cannot write: %s", t.fileName(), errText(err))
	}
	if w.writeErr {
		return 2
	}
	return t.status()
}

func (t *tarCmd) fileName() string {
	if t.file == "" {
		return "-"
	}
	return t.file
}

// tarWalk adds files to an archive.
type tarWalk struct {
	t          *tarCmd
	tw         *tar.Writer
	links      map[uint64]string // inode -> first member name, for hard links
	archive    *fileInfo
	archiveAbs string
	writeErr   bool
}

func sameRoot(a, b string) bool {
	root := func(p string) string {
		if strings.HasPrefix(p, tmpRoot+"/") || p == tmpRoot {
			return tmpRoot
		}
		return wsRoot
	}
	return root(a) == root(b)
}

// add archives the file at abs under the member name (as the user spelled
// it); top is set for operands, whose symbolic links -h follows.
func (w *tarWalk) add(abs, name string, top bool) {
	t, c := w.t, w.t.c
	if w.writeErr || c.canceled() {
		return
	}
	if t.excluded(name) {
		return
	}
	fi, err := c.r.sh.ns.lstat(abs)
	if err == nil && t.deref && fi.mode&fs.ModeSymlink != 0 {
		fi, err = c.r.sh.ns.stat(abs)
	}
	if err != nil {
		t.warn("%s: Cannot stat: %s", name, errText(err))
		return
	}
	if w.archive != nil && fi.ino == w.archive.ino && !fi.IsDir() && sameRoot(abs, w.archiveAbs) {
		c.errorf("%s: file is the archive; not dumped", name)
		return
	}
	member, prefix := stripName(name)
	t.removing(prefix)
	if member == "" {
		member = "."
	}
	hdr := &tar.Header{
		Name:    member,
		Mode:    int64(unixMode(fi.mode) & 0o7777),
		Uid:     int(fi.uid),
		Gid:     int(fi.gid),
		ModTime: fi.mtime.Truncate(time.Second),
		Format:  tar.FormatGNU,
	}
	if fi.uid == 0 {
		hdr.Uname = "root"
	}
	if fi.gid == 0 {
		hdr.Gname = "root"
	}
	if t.owner != "" {
		hdr.Uname, hdr.Uid = tarIdent(t.owner)
	}
	if t.group != "" {
		hdr.Gname, hdr.Gid = tarIdent(t.group)
	}
	var content vfile
	switch {
	case fi.IsDir():
		hdr.Typeflag = tar.TypeDir
		if !strings.HasSuffix(hdr.Name, "/") {
			hdr.Name += "/"
		}
	case fi.mode&fs.ModeSymlink != 0:
		target, err := c.r.sh.ns.readlink(abs)
		if err != nil {
			t.warn("%s: Cannot readlink: %s", name, errText(err))
			return
		}
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
	case fi.mode.IsRegular():
		if first, ok := w.links[fi.ino]; ok && fi.nlink > 1 {
			hdr.Typeflag, hdr.Linkname = tar.TypeLink, first
			break
		}
		f, err := c.r.sh.ns.open(abs, O_RDONLY, 0, nil, nil, nil)
		if err != nil {
			t.warn("%s: Cannot open: %s", name, errText(err))
			return
		}
		defer f.Close()
		content = f
		hdr.Typeflag, hdr.Size = tar.TypeReg, fi.size
		if fi.nlink > 1 {
			w.links[fi.ino] = hdr.Name
		}
	default:
		c.errorf("%s: socket ignored", name)
		return
	}
	if err := w.tw.WriteHeader(hdr); err != nil {
		hdr.Format = tar.FormatUnknown
		if err = w.tw.WriteHeader(hdr); err != nil {
			w.writeErr = true
			t.fatal("%s: Cannot write: %s", t.fileName(), err)
			return
		}
	}
	if t.verbose > 0 {
		t.list(t.listW, hdr, hdr.Name)
	}
	if content != nil {
		n, err := io.Copy(w.tw, io.LimitReader(content, hdr.Size))
		if err == nil && n < hdr.Size {
			// the file shrank: pad as GNU tar does, and say so
			_, err = w.tw.Write(make([]byte, hdr.Size-n))
			c.errorf("%s: File shrank by %d bytes; padding with zeros", name, hdr.Size-n)
			t.failed = true
		}
		if err != nil {
			if errors.Is(err, tar.ErrWriteTooLong) {
				return
			}
			w.writeErr = true
			t.fatal("%s: Cannot write: %s", t.fileName(), errText(err))
			return
		}
	}
	if !fi.IsDir() {
		return
	}
	if treeTooDeep(abs) {
		t.warn("%s: Cannot open: %s", name, errText(syscall.ENAMETOOLONG))
		return
	}
	ents, err := c.readDir(abs)
	if err != nil {
		t.warn("%s: Cannot open: %s", name, errText(err))
		return
	}
	sortEntries(ents)
	base := name
	if !strings.HasSuffix(base, "/") {
		base += "/"
	}
	for _, e := range ents {
		w.add(abs+"/"+e.name, base+e.name, false)
	}
}

// tarIdent reads --owner/--group: a name, a number, or NAME:NUMBER.
func tarIdent(s string) (string, int) {
	name, num, ok := strings.Cut(s, ":")
	if ok {
		n, _ := strconv.Atoi(num)
		return name, n
	}
	if n, err := strconv.Atoi(strings.TrimPrefix(s, "+")); err == nil {
		if n == 0 {
			return "root", 0
		}
		return "", n
	}
	if s == "root" {
		return s, 0
	}
	return s, 0
}

// list prints one member: its name, or a long line as GNU tar's (-tv,
// -cvv, -xvv).
func (t *tarCmd) list(w io.Writer, h *tar.Header, name string) {
	long := t.verbose >= 2 || t.verbose == 1 && t.mode == 't'
	if !long {
		fmt.Fprintln(w, quoteTar(name))
		return
	}
	user, group := h.Uname, h.Gname
	if user == "" || t.numeric {
		user = strconv.Itoa(h.Uid)
	}
	if group == "" || t.numeric {
		group = strconv.Itoa(h.Gid)
	}
	size := strconv.FormatInt(h.Size, 10)
	switch h.Typeflag {
	case tar.TypeChar, tar.TypeBlock:
		size = fmt.Sprintf("%d,%d", h.Devmajor, h.Devminor)
	case tar.TypeLink, tar.TypeSymlink, tar.TypeDir:
		size = "0"
	}
	pad := len(user) + 1 + len(group) + 1 + len(size)
	width := max(19, pad)
	line := fmt.Sprintf("%s %s/%s %*s %s %s", tarMode(h), user, group, width-pad+len(size), size,
		h.ModTime.UTC().Format("2006-01-02 15:04"), quoteTar(name))
	switch h.Typeflag {
	case tar.TypeSymlink:
		line += " -> " + quoteTar(h.Linkname)
	case tar.TypeLink:
		line += " link to " + quoteTar(h.Linkname)
	}
	fmt.Fprintln(w, line)
}

// tarMode is the -rwxr-xr-x of a member, with 'h' for hard links.
func tarMode(h *tar.Header) string {
	b := []byte("----------")
	switch h.Typeflag {
	case tar.TypeDir:
		b[0] = 'd'
	case tar.TypeSymlink:
		b[0] = 'l'
	case tar.TypeLink:
		b[0] = 'h'
	case tar.TypeChar:
		b[0] = 'c'
	case tar.TypeBlock:
		b[0] = 'b'
	case tar.TypeFifo:
		b[0] = 'p'
	}
	const rwx = "rwxrwxrwx"
	for i := 0; i < 9; i++ {
		if h.Mode&(1<<(8-i)) != 0 {
			b[i+1] = rwx[i]
		}
	}
	if h.Mode&0o4000 != 0 {
		b[3] = "Ss"[boolInt(h.Mode&0o100 != 0)]
	}
	if h.Mode&0o2000 != 0 {
		b[6] = "Ss"[boolInt(h.Mode&0o010 != 0)]
	}
	if h.Mode&0o1000 != 0 {
		b[9] = "Tt"[boolInt(h.Mode&0o001 != 0)]
	}
	return string(b)
}

// quoteTar quotes a name as GNU tar's default (escape) style does.
func quoteTar(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == '\\' || r == 0x7f }) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch ch {
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if ch < 0x20 || ch == 0x7f {
				fmt.Fprintf(&b, `\%03o`, ch)
			} else {
				b.WriteByte(ch)
			}
		}
	}
	return b.String()
}

// delayedLink is a symbolic link whose target could lead out of the
// extraction directory: a placeholder file stands in for it until every
// other member is out, as GNU tar does, so no member is written through it.
type delayedLink struct {
	abs, target string
	ino         uint64
}

type delayedDir struct {
	abs   string
	mode  uint32
	mtime time.Time
}

func (t *tarCmd) read() int {
	c := t.c
	t.listW = c.out
	var in io.Reader
	if t.file == "" || t.file == "-" {
		in = c.stdin
	} else {
		f, err := c.open(t.file)
		if err != nil {
			return t.fatal("%s: Cannot open: %s", t.file, errText(err))
		}
		defer f.Close()
		if fi, err := c.stat(t.file); err == nil && fi.IsDir() {
			return t.fatal("%s: Cannot read: Is a directory", t.file)
		}
		in = f
	}
	br := bufio.NewReaderSize(in, 64<<10)
	magic, _ := br.Peek(3)
	isBz := string(magic) == "BZh"
	isGz := len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b
	var src io.Reader = br
	switch {
	case t.bzip2 && !isBz:
		// the explicit compression is used, and fails as bzip2 would
		if len(magic) == 0 {
			fmt.Fprintln(c.stderr, "bzip2: (stdin): file ends unexpectedly")
		} else {
			fmt.Fprintln(c.stderr, "bzip2: (stdin) is not a bzip2 file.")
		}
		c.errorf("Child returned status 2")
		c.errorf("Error is not recoverable: exiting now")
		return 2
	case t.gzip && !isGz:
		if len(magic) == 0 {
			fmt.Fprintln(c.stderr, "gzip: stdin: unexpected end of file")
		} else {
			fmt.Fprintln(c.stderr, "gzip: stdin: not in gzip format")
		}
		c.errorf("Child returned status 1")
		c.errorf("Error is not recoverable: exiting now")
		return 2
	case isBz:
		src = bzip2.NewReader(br)
	case isGz:
		gz, err := gzip.NewReader(br)
		if err != nil {
			return t.fatal("%s: Cannot read: %s", t.fileName(), err)
		}
		defer gz.Close()
		src = gz
	}
	dest := c.dir
	if t.dir != "" {
		dest = absPath(c.dir, t.dir)
		if t.mode == 'x' {
			if fi, err := c.r.sh.ns.stat(dest); err != nil || !fi.IsDir() {
				if err == nil {
					err = syscall.ENOTDIR
				}
				return t.fatal("%s: Cannot open: %s", t.dir, errText(err))
			}
		}
	}
	if t.toStdout {
		t.listW = c.stderr
	}
	matched := make([]bool, len(t.operands))
	tr := tar.NewReader(src)
	var links []delayedLink
	var dirs []delayedDir
	n := 0
	for {
		if c.canceled() {
			return 1
		}
		h, err := tr.Next()
		if err == io.EOF {
			if n == 0 {
				t.warn("This does not look like a tar archive")
			}
			break
		}
		if err != nil {
			switch {
			case n == 0:
				t.warn("This does not look like a tar archive")
			case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
				return t.fatal("Unexpected EOF in archive")
			default:
				t.warn("Skipping to next header")
			}
			break
		}
		n++
		if h.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		if !t.selected(h.Name, matched) || t.excluded(h.Name) {
			continue
		}
		if t.mode == 't' {
			_, prefix := stripName(h.Name)
			t.removing(prefix)
			t.list(c.out, h, h.Name)
			continue
		}
		if err := t.extract(tr, h, dest, &links, &dirs); err != nil {
			if errors.Is(err, errTarFatal) {
				return 2
			}
		}
	}
	// the delayed links, then the directories' modes and times, deepest first
	for _, l := range links {
		fi, err := c.r.sh.ns.lstat(l.abs)
		if err != nil || !fi.mode.IsRegular() || fi.ino != l.ino || fi.size != 0 {
			continue
		}
		if err := c.r.sh.ns.remove(l.abs); err == nil {
			if err := c.r.sh.ns.symlink(l.target, l.abs); err != nil {
				t.warn("%s: Cannot create symlink to '%s': %s", l.abs, l.target, errText(err))
			}
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		d := dirs[i]
		c.r.sh.ns.chmod(d.abs, d.mode)
		c.r.sh.ns.chtimes(d.abs, d.mtime, d.mtime)
	}
	for i, op := range t.operands {
		if !matched[i] {
			t.warn("%s: Not found in archive", op.name)
		}
	}
	return t.status()
}

var errTarFatal = errors.New("tar: fatal")

// selected reports whether a member is one of the names asked for (all
// when none are): the name itself or a directory above it.
func (t *tarCmd) selected(name string, matched []bool) bool {
	if len(t.operands) == 0 {
		return true
	}
	n := strings.TrimSuffix(name, "/")
	ok := false
	for i, op := range t.operands {
		o := strings.TrimSuffix(op.name, "/")
		if n == o || strings.HasPrefix(n, o+"/") || tarMatch(o, n) {
			matched[i] = true
			ok = true
		}
	}
	return ok
}

// extract writes one member under dest.
func (t *tarCmd) extract(tr *tar.Reader, h *tar.Header, dest string, links *[]delayedLink, dirs *[]delayedDir) error {
	c := t.c
	ns := c.r.sh.ns
	name, prefix := stripName(h.Name)
	t.removing(prefix)
	if hasDotDot(h.Name) {
		t.warn("%s: Member name contains '..'", quoteTar(h.Name))
		return nil
	}
	if t.strip > 0 {
		parts := strings.Split(strings.Trim(name, "/"), "/")
		if len(parts) <= t.strip {
			return nil
		}
		name = strings.Join(parts[t.strip:], "/")
	}
	if t.verbose > 0 {
		t.list(t.listW, h, h.Name)
	}
	if t.toStdout {
		switch h.Typeflag {
		case tar.TypeReg, tar.TypeRegA, tar.TypeGNUSparse: // holes read as zeros, as GNU tar prints them
			if _, err := io.Copy(c.out, stoppableReader{tr, c.ctx}); err != nil {
				return err
			}
		}
		return nil
	}
	trimmed := strings.TrimSuffix(name, "/")
	if trimmed == "" || trimmed == "." {
		if h.Typeflag == tar.TypeDir {
			*dirs = append(*dirs, delayedDir{dest, uint32(h.Mode & 0o7777), h.ModTime})
		}
		return nil
	}
	abs := absPath(dest, trimmed)
	shown := quoteTar(h.Name)
	if parent := path.Dir(abs); parent != dest {
		if err := t.mkdirs(parent); err != nil {
			t.warn("%s: Cannot open: %s", shown, errText(err))
			return nil
		}
	}
	old, oerr := ns.lstat(abs)
	exists := oerr == nil
	if exists && h.Typeflag != tar.TypeDir {
		if t.skipOld {
			return nil
		}
		if t.keepOld {
			t.warn("%s: Cannot open: File exists", shown)
			return nil
		}
		if old.IsDir() {
			if err := ns.remove(abs); err != nil {
				t.warn("%s: Cannot open: Is a directory", shown)
				return nil
			}
		} else if err := ns.remove(abs); err != nil {
			t.warn("%s: Cannot unlink: %s", shown, errText(err))
			return nil
		}
	}
	mode := uint32(h.Mode & 0o7777)
	switch h.Typeflag {
	case tar.TypeDir:
		if exists && !old.IsDir() {
			if err := ns.remove(abs); err != nil {
				t.warn("%s: Cannot mkdir: %s", shown, errText(err))
				return nil
			}
			exists = false
		}
		if !exists {
			if err := ns.mkdir(abs, 0o700); err != nil {
				t.warn("%s: Cannot mkdir: %s", shown, errText(err))
				return nil
			}
		}
		*dirs = append(*dirs, delayedDir{abs, mode, h.ModTime})
	case tar.TypeReg, tar.TypeRegA, tar.TypeGNUSparse:
		f, err := ns.open(abs, O_WRONLY|O_CREATE|O_EXCL, 0o600, nil, nil, nil)
		if err != nil {
			t.warn("%s: Cannot open: %s", shown, errText(err))
			return nil
		}
		// block by block, stopping with the call, holes kept: a sparse
		// member of a TiB in a 10 KB archive was written out, zeros
		// and all, minutes past the call's end
		err = c.copyData(stoppable{f, c.ctx}, tr)
		f.Close()
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, gzip.ErrChecksum) || errors.Is(err, io.EOF) {
				t.fatal("Unexpected EOF in archive")
				return errTarFatal
			}
			if !c.canceled() {
				t.warn("%s: Cannot write: %s", shown, errText(err))
			}
			return nil
		}
		ns.chmod(abs, mode)
		ns.chtimes(abs, h.ModTime, h.ModTime)
	case tar.TypeSymlink:
		if path.IsAbs(h.Linkname) || hasDotDot(h.Linkname) {
			f, err := ns.open(abs, O_WRONLY|O_CREATE|O_EXCL, 0, nil, nil, nil)
			if err != nil {
				t.warn("%s: Cannot open: %s", shown, errText(err))
				return nil
			}
			f.Close()
			fi, err := ns.lstat(abs)
			if err == nil {
				*links = append(*links, delayedLink{abs, h.Linkname, fi.ino})
			}
			return nil
		}
		if err := ns.symlink(h.Linkname, abs); err != nil {
			t.warn("%s: Cannot create symlink to '%s': %s", shown, quoteTar(h.Linkname), errText(err))
		}
	case tar.TypeLink:
		target, lprefix := stripName(h.Linkname)
		if lprefix != "" && !t.removed["link "+lprefix] {
			t.removed["link "+lprefix] = true
			t.c.errorf("Removing leading `%s' from hard link targets", lprefix)
		}
		if t.strip > 0 {
			parts := strings.Split(target, "/")
			if len(parts) <= t.strip {
				return nil
			}
			target = strings.Join(parts[t.strip:], "/")
		}
		if err := ns.link(absPath(dest, target), abs); err != nil {
			t.warn("%s: Cannot hard link to ‘%s’: %s", shown, quoteTar(target), errText(err))
		}
	default:
		t.warn("%s: Cannot mknod: Operation not permitted", shown)
	}
	return nil
}

// mkdirs makes the missing directories above a member (0755, as tar makes
// them with the usual umask).
func (t *tarCmd) mkdirs(abs string) error {
	if t.c.canceled() {
		return context.Cause(t.c.ctx)
	}
	if treeTooDeep(abs) { // a member's name can be megabytes of a/a/a/...
		return syscall.ENAMETOOLONG
	}
	ns := t.c.r.sh.ns
	fi, err := ns.stat(abs)
	if err == nil {
		if !fi.IsDir() {
			return syscall.ENOTDIR
		}
		return nil
	}
	if errno(err) != syscall.ENOENT {
		return err
	}
	if parent := path.Dir(abs); parent != abs {
		if err := t.mkdirs(parent); err != nil {
			return err
		}
	}
	if err := ns.mkdir(abs, 0o755); err != nil && errno(err) != syscall.EEXIST {
		return err
	}
	return nil
}
