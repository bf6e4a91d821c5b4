package sources

import (
	"bufio"
	"compress/zlib"
	"encoding/binary"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/go-git/go-billy/v5"
)

// gitProgress reads git's progress messages, as `git clone --progress`
// writes them on stderr and as a server sends them to go-git on the
// sideband ("Receiving objects:  45% (450/1000), 1.20 MiB | 2.00 MiB/s",
// lines ended by \r while they are redrawn), and reports them on p as
// phases of the source name: fetch (objects and bytes received), resolve
// (deltas), and what the server says of its side first (remote count,
// remote compress). Only the numbers of the stages it knows are used: the
// text is the server's, and none of it reaches the terminal or the log.
// p rate-limits what is shown (a redraw every 200 ms, a log record every
// 5 s). What is not progress is kept, the last stderrKeep bytes of it, for
// an error message.
type gitProgress struct {
	mu    sync.Mutex // the sideband's writes, and packProgress
	p     *Progress
	name  string
	phase string
	part  []byte // the line so far, at most maxProgressLine bytes
	long  bool   // part overflowed: the rest of the line is dropped
	other []byte // what was not progress
}

const (
	maxProgressLine = 1 << 10
	stderrKeep      = 16 << 10
)

var progressLine = regexp.MustCompile(`^(?:remote: )?([A-Za-z ]+): +\d+% \((\d+)/(\d+)\)(?:, ([0-9.]+) (bytes|KiB|MiB|GiB))?`)

// progressPhases are the stages of git's progress that are shown, and as
// which phase.
var progressPhases = map[string]string{
	"Enumerating objects": "remote count",
	"Counting objects":    "remote count",
	"Compressing objects": "remote compress",
	"Receiving objects":   "fetch",
	"Resolving deltas":    "resolve",
}

func (g *gitProgress) Write(b []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range b {
		switch {
		case c == '\r' || c == '\n':
			g.line(c)
		case len(g.part) < maxProgressLine:
			g.part = append(g.part, c)
		default:
			g.long = true
		}
	}
	return len(b), nil
}

// line takes the line in part, ended by end.
func (g *gitProgress) line(end byte) {
	l := g.part
	g.part = g.part[:0]
	if g.long {
		g.long = false
		return
	}
	if m := progressLine.FindSubmatch(l); m != nil {
		if phase, ok := progressPhases[string(m[1])]; ok {
			g.report(phase, m)
			return
		}
	}
	if len(l) == 0 {
		return
	}
	if end == '\r' {
		// A redrawn line that is not progress: keep its last state only.
		return
	}
	g.other = append(g.other, l...)
	g.other = append(g.other, '\n')
	if len(g.other) > 2*stderrKeep {
		g.other = append(g.other[:0], g.other[len(g.other)-stderrKeep:]...)
	}
}

func (g *gitProgress) report(phase string, m [][]byte) {
	done, _ := strconv.ParseInt(string(m[2]), 10, 64)
	total, _ := strconv.ParseInt(string(m[3]), 10, 64)
	var bytes int64
	if len(m[4]) > 0 {
		f, _ := strconv.ParseFloat(string(m[4]), 64)
		unit := map[string]float64{"bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[string(m[5])]
		bytes = int64(f * unit)
	}
	g.enter(phase, total)
	g.p.Set(done, total, bytes)
}

// enter makes phase the one under way.
func (g *gitProgress) enter(phase string, total int64) {
	switch {
	case g.phase == "":
		g.p.Rename(phase, total) // the clone's placeholder
	case phase != g.phase:
		g.p.Begin(g.name, phase, total, 0)
	}
	g.phase = phase
}

// String is what git wrote that was not progress.
func (g *gitProgress) String() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := string(g.other)
	if len(g.part) > 0 && !progressLine.Match(g.part) {
		s += string(g.part)
	}
	return strings.TrimSpace(s)
}

// end ends the last phase.
func (g *gitProgress) end() { g.p.End() }

// packProgress counts what go-git receives of a pack as it writes it
// (objects/pack/tmp_pack_*): the bytes, the objects the pack's header
// announces, and the objects received so far, which it reads from a copy
// of the stream (each object's header, its data inflated and dropped), so
// that the fetch phase has objects of a total, bytes and an ETA, as git's
// "Receiving objects" has. A pack it cannot read is still counted in bytes.
type packProgress struct {
	g     *gitProgress
	pw    *io.PipeWriter
	done  chan struct{}
	bytes int64
}

func newPackProgress(g *gitProgress) *packProgress {
	pr, pw := io.Pipe()
	c := &packProgress{g: g, pw: pw, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		c.count(bufio.NewReaderSize(pr, 64<<10))
		io.Copy(io.Discard, pr) // the rest, or what it could not read
	}()
	return c
}

func (c *packProgress) write(b []byte) {
	c.bytes += int64(len(b))
	c.pw.Write(b)
	c.g.setBytes("fetch", c.bytes)
}

func (c *packProgress) close() {
	c.pw.Close()
	<-c.done
}

// count reads the objects of a pack: a header (PACK, version, count),
// then each object's type and size, a delta's base, its zlib data.
func (c *packProgress) count(r *bufio.Reader) {
	var hdr [12]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil || string(hdr[:4]) != "PACK" {
		return
	}
	total := int64(binary.BigEndian.Uint32(hdr[8:]))
	c.g.setObjects("fetch", 0, total)
	var zr io.ReadCloser
	for i := int64(0); i < total; i++ {
		b, err := r.ReadByte()
		if err != nil {
			return
		}
		typ := b >> 4 & 7
		for b&0x80 != 0 { // the size's continuation bytes
			if b, err = r.ReadByte(); err != nil {
				return
			}
		}
		switch typ {
		case 6: // OFS_DELTA: the base's offset
			for b, err = r.ReadByte(); err == nil && b&0x80 != 0; b, err = r.ReadByte() {
			}
		case 7: // REF_DELTA: the base's hash
			_, err = r.Discard(20)
		}
		if err != nil {
			return
		}
		if zr == nil {
			zr, err = zlib.NewReader(r)
		} else {
			err = zr.(zlib.Resetter).Reset(r, nil)
		}
		if err != nil {
			return
		}
		if _, err := io.Copy(io.Discard, zr); err != nil {
			return
		}
		c.g.setObjects("fetch", i+1, total)
	}
}

// setObjects and setBytes report the phase's counts from another
// goroutine than the sideband's.
func (g *gitProgress) setObjects(phase string, done, total int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.enter(phase, total)
	g.p.SetObjects(done, total)
}

func (g *gitProgress) setBytes(phase string, bytes int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.enter(phase, 0)
	g.p.SetBytes(bytes)
}

// packFS is the .git of a go-git clone, whose pack writes packProgress
// counts.
type packFS struct {
	billy.Filesystem
	g *gitProgress
}

func (f *packFS) TempFile(dir, prefix string) (billy.File, error) {
	fl, err := f.Filesystem.TempFile(dir, prefix)
	if err != nil || prefix != "tmp_pack_" || f.g.p == nil {
		return fl, err
	}
	return &packFile{File: fl, c: newPackProgress(f.g)}, nil
}

func (f *packFS) Chroot(p string) (billy.Filesystem, error) {
	fs, err := f.Filesystem.Chroot(p)
	if err != nil {
		return nil, err
	}
	return &packFS{Filesystem: fs, g: f.g}, nil
}

type packFile struct {
	billy.File
	c    *packProgress
	once sync.Once
}

func (f *packFile) Write(b []byte) (int, error) {
	n, err := f.File.Write(b)
	f.c.write(b[:n])
	return n, err
}

func (f *packFile) Close() error {
	f.once.Do(f.c.close)
	return f.File.Close()
}

func (f *packFS) Capabilities() billy.Capability { return billy.Capabilities(f.Filesystem) }
