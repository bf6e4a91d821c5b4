package shell

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"syscall"
)

func init() {
	register(&command{names: []string{"gzip", "gunzip", "zcat"}, run: cmdGzip, opts: opts("cdfkltnNqvr123456789S:",
		"stdout", "to-stdout", "decompress", "uncompress", "force", "keep", "list", "test",
		"no-name", "name", "quiet", "verbose", "fast", "best", "suffix=", "recursive"), check: gzipCheck})
}

// gzipCheck: gzip -r is not built in.
func gzipCheck(args []string) string {
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "--recursive" || len(a) > 1 && a[0] == '-' && a[1] != '-' && strings.ContainsRune(a, 'r') && !strings.HasPrefix(a, "-S") {
			return "gzip -r is not built in"
		}
	}
	return ""
}

type gzipCmd struct {
	c          *cmd
	decompress bool
	stdout     bool
	keep       bool
	force      bool
	test       bool
	list       bool
	verbose    bool
	quiet      bool
	level      int
	suffix     string
	status     int
}

// gzip reports as "gzip" whatever name it was run by, as Debian's gunzip
// and zcat (scripts running gzip) do.
func (g *gzipCmd) errorf(status int, format string, a ...any) {
	g.c.out.Flush()
	fmt.Fprintf(g.c.stderr, "gzip: %s\n", fmt.Sprintf(format, a...))
	g.warn(status)
}

// warn raises the exit status: 1 for errors, 2 for warnings (an error
// wins over a warning).
func (g *gzipCmd) warn(status int) {
	if g.status != 1 {
		g.status = max(g.status, status)
	}
}

func cmdGzip(c *cmd) int {
	g := &gzipCmd{c: c, level: gzip.DefaultCompression, suffix: ".gz"}
	switch c.name {
	case "gunzip":
		g.decompress = true
	case "zcat":
		g.decompress, g.stdout = true, true
	}
	opts, files, ok := c.flags()
	if !ok {
		return 1
	}
	for _, o := range opts {
		switch o.name {
		case "c", "stdout", "to-stdout":
			g.stdout = true
		case "d", "decompress", "uncompress":
			g.decompress = true
		case "f", "force":
			g.force = true
		case "k", "keep":
			g.keep = true
		case "l", "list":
			g.list, g.decompress = true, true
		case "t", "test":
			g.test, g.decompress = true, true
		case "q", "quiet":
			g.quiet, g.verbose = true, false
		case "v", "verbose":
			g.verbose = true
		case "fast":
			g.level = 1
		case "best":
			g.level = 9
		case "S", "suffix":
			g.suffix = o.val
		case "r", "recursive":
			fmt.Fprintln(c.stderr, "gzip: -r is not supported by the shell fast path")
			return 1
		case "n", "no-name", "N", "name":
		default:
			g.level = int(o.name[0] - '0')
		}
	}
	if g.list {
		fmt.Fprintln(c.out, "         compressed        uncompressed  ratio uncompressed_name")
	}
	if len(files) == 0 {
		files = []string{"-"}
	}
	var totalIn, totalOut int64
	for _, f := range files {
		if c.canceled() {
			return 1
		}
		if g.list {
			in, out, ok := g.listOne(f)
			totalIn, totalOut = totalIn+in, totalOut+out
			_ = ok
			continue
		}
		if g.decompress {
			g.decompressOne(f)
		} else {
			g.compressOne(f)
		}
	}
	if g.list && len(files) > 1 {
		g.listLine(totalIn, totalOut, 0, "(totals)")
	}
	return g.status
}

// gzSuffixes are what gunzip takes off, and what it puts instead.
var gzSuffixes = [][2]string{{".gz", ""}, {"-gz", ""}, {".z", ""}, {"-z", ""}, {"_z", ""}, {".tgz", ".tar"}, {".taz", ".tar"}}

func (g *gzipCmd) plainName(name string) (string, bool) {
	if g.suffix != ".gz" {
		if strings.HasSuffix(name, g.suffix) && len(name) > len(g.suffix) {
			return strings.TrimSuffix(name, g.suffix), true
		}
	}
	lower := strings.ToLower(name)
	for _, s := range gzSuffixes {
		if strings.HasSuffix(lower, s[0]) && len(name) > len(s[0]) {
			return name[:len(name)-len(s[0])] + s[1], true
		}
	}
	return "", false
}

// input opens a file to read, with the checks gzip makes; nil if it is
// to be skipped (already reported).
func (g *gzipCmd) input(name string) (io.ReadCloser, *fileInfo) {
	c := g.c
	if name == "-" {
		return io.NopCloser(c.stdin), nil
	}
	fi, err := c.lstat(name)
	if err != nil && g.decompress && errno(err) == syscall.ENOENT {
		if _, ok := g.plainName(name); !ok {
			if fi2, err2 := c.lstat(name + g.suffix); err2 == nil {
				return g.input2(name+g.suffix, fi2)
			}
		}
	}
	if err != nil {
		g.errorf(1, "%s: %s", name, errText(err))
		return nil, nil
	}
	return g.input2(name, fi)
}

func (g *gzipCmd) input2(name string, fi *fileInfo) (io.ReadCloser, *fileInfo) {
	c := g.c
	if fi.mode&fs.ModeSymlink != 0 {
		if !g.force && !g.stdout {
			g.errorf(1, "%s: Too many levels of symbolic links", name)
			return nil, nil
		}
		var err error
		if fi, err = c.stat(name); err != nil {
			g.errorf(1, "%s: %s", name, errText(err))
			return nil, nil
		}
	}
	if fi.IsDir() {
		if !g.quiet {
			g.errorf(2, "%s is a directory -- ignored", name)
		} else {
			g.warn(2)
		}
		return nil, nil
	}
	if !fi.mode.IsRegular() && !g.stdout {
		g.errorf(2, "%s is not a directory or a regular file - ignored", name)
		return nil, nil
	}
	f, err := c.open(name)
	if err != nil {
		g.errorf(1, "%s: %s", name, errText(err))
		return nil, nil
	}
	return f, fi
}

// output makes the file a result goes to; nil if it exists and -f is not
// given (reported).
func (g *gzipCmd) output(name string, fi *fileInfo) vfile {
	c := g.c
	if _, err := c.lstat(name); err == nil {
		if !g.force {
			g.errorf(2, "%s already exists;\tnot overwritten", name)
			return nil
		}
		if err := c.r.sh.ns.remove(c.abs(name)); err != nil {
			g.errorf(1, "%s: %s", name, errText(err))
			return nil
		}
	}
	f, err := c.openFlags(name, O_WRONLY|O_CREATE|O_EXCL, uint32(fi.mode.Perm()))
	if err != nil {
		g.errorf(1, "%s: %s", name, errText(err))
		return nil
	}
	return f
}

// finish gives the output the input's mode and times, and removes the
// input unless -k.
func (g *gzipCmd) finish(in, out string, fi *fileInfo) {
	ns := g.c.r.sh.ns
	ns.chmod(g.c.abs(out), unixMode(fi.mode)&0o7777)
	ns.chtimes(g.c.abs(out), fi.atime, fi.mtime)
	if !g.keep {
		if err := ns.remove(g.c.abs(in)); err != nil {
			g.errorf(1, "%s: %s", in, errText(err))
		}
	}
}

func (g *gzipCmd) compressOne(name string) {
	c := g.c
	if name != "-" && !g.stdout {
		if _, ok := g.plainName(name); ok {
			if !g.quiet {
				g.errorf(2, "%s already has %s suffix -- unchanged", name, g.suffixOf(name))
			} else {
				g.warn(2)
			}
			return
		}
	}
	in, fi := g.input(name)
	if in == nil {
		return
	}
	defer in.Close()
	hdr := gzip.Header{OS: 3}
	if fi != nil {
		hdr.Name = path.Base(name)
		hdr.ModTime = fi.mtime
	}
	if name == "-" || g.stdout {
		zw, _ := gzip.NewWriterLevel(c.out, g.level)
		zw.Header = hdr
		_, err := io.Copy(zw, bufio.NewReaderSize(in, 64<<10))
		if err == nil {
			err = zw.Close()
		}
		if err != nil {
			g.errorf(1, "%s: %s", name, errText(err))
		}
		return
	}
	outName := name + g.suffix
	out := g.output(outName, fi)
	if out == nil {
		return
	}
	bw := bufio.NewWriterSize(out, 64<<10)
	zw, _ := gzip.NewWriterLevel(bw, g.level)
	zw.Header = hdr
	n, err := io.Copy(zw, bufio.NewReaderSize(in, 64<<10))
	if err == nil {
		err = zw.Close()
	}
	if err == nil {
		err = bw.Flush()
	}
	out.Close()
	if err != nil {
		g.errorf(1, "%s: %s", name, errText(err))
		g.c.r.sh.ns.remove(c.abs(outName))
		return
	}
	if g.verbose {
		size := int64(0)
		if ofi, err := c.stat(outName); err == nil {
			size = ofi.size
		}
		how := "replaced with"
		if g.keep {
			how = "created"
		}
		fmt.Fprintf(c.stderr, "%s:\t%s -- %s %s\n", name, gzRatio(n, size), how, outName)
	}
	g.finish(name, outName, fi)
}

func (g *gzipCmd) suffixOf(name string) string {
	lower := strings.ToLower(name)
	for _, s := range gzSuffixes {
		if strings.HasSuffix(lower, s[0]) {
			return s[0]
		}
	}
	return g.suffix
}

// gzRatio is gzip -v's saving: 1 - compressed/original, in percent.
func gzRatio(orig, comp int64) string {
	if orig == 0 {
		return "  0.0%"
	}
	return fmt.Sprintf("%5.1f%%", 100*(1-float64(comp)/float64(orig)))
}

// gzipError is what gzip says of data it cannot decompress.
func gzipError(err error) string {
	switch {
	case errors.Is(err, gzip.ErrHeader):
		return "not in gzip format"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "unexpected end of file"
	case errors.Is(err, gzip.ErrChecksum):
		return "invalid compressed data--crc error"
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return errText(err)
	}
	return "invalid compressed data--format violated"
}

func (g *gzipCmd) decompressOne(name string) {
	c := g.c
	outName := ""
	if name != "-" && !g.stdout && !g.test {
		n, ok := g.plainName(name)
		if !ok {
			if _, err := c.lstat(name); err != nil {
				if _, err2 := c.lstat(name + g.suffix); err2 != nil {
					g.errorf(1, "%s: %s", name, errText(err))
					return
				}
				name += g.suffix
				n = strings.TrimSuffix(name, g.suffix)
			} else {
				if !g.quiet {
					g.errorf(2, "%s: unknown suffix -- ignored", name)
				} else {
					g.warn(2)
				}
				return
			}
		}
		outName = n
	}
	in, fi := g.input(name)
	if in == nil {
		return
	}
	defer in.Close()
	shown := name
	if name == "-" {
		shown = "stdin"
	}
	zr, err := gzip.NewReader(bufio.NewReaderSize(in, 64<<10))
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		g.errorf(1, "%s: %s", shown, gzipError(err))
		return
	}
	if outName == "" {
		w := c.out
		if g.test {
			w = bufio.NewWriter(io.Discard)
		}
		if _, err := io.Copy(w, zr); err != nil {
			g.errorf(1, "%s: %s", shown, gzipError(err))
		}
		return
	}
	out := g.output(outName, fi)
	if out == nil {
		return
	}
	bw := bufio.NewWriterSize(out, 64<<10)
	_, err = io.Copy(bw, zr)
	if err == nil {
		err = bw.Flush()
	}
	out.Close()
	if err != nil {
		g.errorf(1, "%s: %s", name, gzipError(err))
		c.r.sh.ns.remove(c.abs(outName))
		return
	}
	if g.verbose {
		fmt.Fprintf(c.stderr, "%s:\t -- replaced with %s\n", name, outName)
	}
	g.finish(name, outName, fi)
}

// listOne prints gzip -l's line for one file.
func (g *gzipCmd) listOne(name string) (int64, int64, bool) {
	in, fi := g.input(name)
	if in == nil {
		return 0, 0, false
	}
	defer in.Close()
	cw := &countReader{r: in}
	zr, err := gzip.NewReader(bufio.NewReader(cw))
	if err != nil {
		g.errorf(1, "%s: %s", name, gzipError(err))
		return 0, 0, false
	}
	n, err := io.Copy(io.Discard, zr)
	if err != nil {
		g.errorf(1, "%s: %s", name, gzipError(err))
		return 0, 0, false
	}
	comp := cw.n
	if fi != nil {
		comp = fi.size
	}
	plain, ok := g.plainName(name)
	if !ok {
		plain = name
	}
	// the ratio counts the deflated data only: no header, no trailer
	over := int64(10 + 8)
	if zr.Name != "" {
		over += int64(len(zr.Name) + 1)
	}
	if zr.Comment != "" {
		over += int64(len(zr.Comment) + 1)
	}
	if len(zr.Extra) > 0 {
		over += int64(len(zr.Extra) + 2)
	}
	g.listLine(comp, n, over, plain)
	return comp, n, true
}

func (g *gzipCmd) listLine(comp, orig, over int64, name string) {
	ratio := 0.0
	if orig > 0 {
		ratio = 100 * float64(orig-(comp-over)) / float64(orig)
	}
	fmt.Fprintf(g.c.out, "%19d %19d %5.1f%% %s\n", comp, orig, ratio, name)
}

type countReader struct {
	r io.Reader
	n int64
}

func (r *countReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.n += int64(n)
	return n, err
}
