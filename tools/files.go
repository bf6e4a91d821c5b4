package tools

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/wsfs"
)

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// Limits of the listing tools: the default and the largest a call may ask.
const (
	ReadDefaultLines = 2000
	ReadMaxLines     = 10000
	LsDefault        = 200
	LsMax            = 2000
	FindDefault      = 200
	FindMax          = 2000
	GrepDefault      = 100
	GrepMax          = 1000
	GrepMaxContext   = 10
	maxLineShown     = 2000 // characters of one line read and grep show
)

// limitArg applies a limit argument's default and maximum.
func limitArg(name string, v, def, max int) (int, error) {
	switch {
	case v < 0:
		return 0, fmt.Errorf("%s must be 0 (the default, %d) or more", name, def)
	case v == 0:
		return def, nil
	case v > max:
		return 0, fmt.Errorf("%s %d is over the maximum %d (page with offset)", name, v, max)
	}
	return v, nil
}

// ReadArgs are read's arguments.
type ReadArgs struct {
	Path   string `json:"path" jsonschema:"the file: absolute under /workspace or relative to it"`
	Offset int    `json:"offset,omitempty" jsonschema:"the first line to return, counting from 1 (default 1)"`
	Limit  int    `json:"limit,omitempty" jsonschema:"how many lines to return at most (default 2000, maximum 10000)"`
}

// ReadResult is a part of a text file, or the news that it is binary.
type ReadResult struct {
	Path string `json:"path"`
	// Content holds the lines, each as "NUMBER<TAB>TEXT".
	Content   string `json:"content"`
	FirstLine int    `json:"firstLine"`
	Lines     int    `json:"lines"` // lines returned
	Size      int64  `json:"size"`  // of the file, in bytes
	// NextOffset, when not 0, is where to continue: the content was
	// truncated (by limit or by the byte budget) before the file's end.
	NextOffset int    `json:"nextOffset,omitempty"`
	Binary     bool   `json:"binary,omitempty"`
	MediaType  string `json:"mediaType,omitempty"` // of a binary file
}

func (r ReadResult) summary() string {
	if r.Binary {
		return fmt.Sprintf("binary %s, %d bytes", r.MediaType, r.Size)
	}
	return withNext(fmt.Sprintf("lines %d-%d of %d bytes", r.FirstLine, r.FirstLine+r.Lines-1, r.Size), r.NextOffset)
}

// withNext adds a paginated result's next offset, if there is one, to its
// summary.
func withNext(s string, next int) string {
	if next > 0 {
		s += fmt.Sprintf(", next offset %d", next)
	}
	return s
}

// lean is the structured result over MCP: the lines are in the text
// content only (the JSON of a big read twice over cost the SDK 2 ms).
func (r ReadResult) lean() ReadResult {
	r.Content = ""
	return r
}

// Text is the result as a model reads it.
func (r ReadResult) Text() string {
	if r.Binary {
		return fmt.Sprintf("%s is a binary file (%s, %d bytes); not shown.", r.Path, r.MediaType, r.Size)
	}
	if r.Lines == 0 {
		if r.Size == 0 {
			return fmt.Sprintf("(%s is empty)", r.Path)
		}
		return fmt.Sprintf("(no lines from %d on in %s)", r.FirstLine, r.Path)
	}
	if r.NextOffset > 0 {
		return r.Content + fmt.Sprintf("\n[truncated: lines %d-%d shown; continue with offset=%d]", r.FirstLine, r.FirstLine+r.Lines-1, r.NextOffset)
	}
	return r.Content
}

// looksBinary: a NUL byte, or bytes that are not UTF-8, in the sample.
func looksBinary(sample []byte, atEOF bool) bool {
	if bytes.IndexByte(sample, 0) >= 0 {
		return true
	}
	if !atEOF {
		// A rune may be cut at the end of the sample.
		for i := 0; i < utf8.UTFMax && len(sample) > 0 && !utf8.Valid(sample); i++ {
			sample = sample[:len(sample)-1]
		}
	}
	return !utf8.Valid(sample)
}

const sniffLen = 8 << 10

// maxLineScan is the longest line read reads through: a file whose line
// goes on past it (a sparse hole after some text costs its writer
// nothing) ends read's result there.
const maxLineScan = 64 << 20

// aLine is one line of a file as read sees it: its first bytes, enough to
// show maxLineShown characters, and its length.
type aLine struct {
	kept    []byte
	n       int64 // bytes, the newline and a CR before it not counted
	runes   int64 // characters, as n
	tooLong bool  // longer than maxLineScan: the rest was not read
}

// text is the line as read shows it: cut after maxLineShown characters,
// with a note of its length.
func (l aLine) text() string {
	s := string(l.kept)
	if l.runes <= maxLineShown {
		return s
	}
	r := []rune(s)
	if len(r) > maxLineShown {
		r = r[:maxLineShown]
	}
	if l.tooLong {
		return string(r) + fmt.Sprintf(" [line cut: more than %d MiB; the rest of the file is not shown]", maxLineScan>>20)
	}
	return string(r) + fmt.Sprintf(" [line cut: %d characters]", l.runes)
}

// readLine reads the next line of br, keeping only its first bytes, and
// stops at ctx's end or after maxLineScan bytes of one line.
func readLine(ctx context.Context, br *bufio.Reader) (aLine, error) {
	var l aLine
	const keep = maxLineShown*utf8.UTFMax + 1
	crlf := false
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			body := chunk
			ended := body[len(body)-1] == '\n'
			if ended {
				body = body[:len(body)-1]
			}
			if crlf { // a CR held back from the last chunk, not the line's end
				l.add([]byte{'\r'}, keep)
				crlf = false
			}
			if n := len(body); n > 0 && body[n-1] == '\r' {
				body, crlf = body[:n-1], true
			}
			l.add(body, keep)
			if ended {
				return l, nil
			}
		}
		switch {
		case err == bufio.ErrBufferFull:
		case err != nil:
			if crlf {
				l.add([]byte{'\r'}, keep)
			}
			return l, err
		}
		if l.n > maxLineScan {
			l.tooLong = true
			return l, nil
		}
		if err := ctx.Err(); err != nil {
			return l, err
		}
	}
}

func (l *aLine) add(b []byte, keep int) {
	if room := keep - len(l.kept); room > 0 {
		l.kept = append(l.kept, b[:min(room, len(b))]...)
	}
	l.n += int64(len(b))
	for _, c := range b {
		if c&0xc0 != 0x80 {
			l.runes++
		}
	}
}

// openFile opens the regular file p for reading.
func openFile(f *wsfs.FS, p string) (*wsfs.File, kv.Attr, error) {
	a, err := f.Stat(p)
	if err != nil {
		return nil, a, showErr(err)
	}
	if a.IsDir() {
		return nil, a, fmt.Errorf("%s is a directory (use ls)", show(p))
	}
	if !a.IsRegular() {
		return nil, a, fmt.Errorf("%s is not a regular file", show(p))
	}
	fl, err := f.Open(p, wsfs.O_RDONLY, 0)
	if err != nil {
		return nil, a, showErr(err)
	}
	return fl, a, nil
}

// showErr rewrites a wsfs error's store path into a /workspace path.
func showErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		p := pe.Path
		if !strings.HasPrefix(p, Root) {
			p = show(path.Clean("/" + p))
		}
		return &fs.PathError{Op: pe.Op, Path: p, Err: pe.Err}
	}
	return err
}

// Read returns lines of a text file with their numbers.
func (t *Tools) Read(ctx context.Context, a ReadArgs) (ReadResult, error) {
	return do(ctx, t, "read", a, func(c *call) (ReadResult, error) {
		limit, err := limitArg("limit", a.Limit, ReadDefaultLines, ReadMaxLines)
		if err != nil {
			return ReadResult{}, err
		}
		if a.Offset < 0 {
			return ReadResult{}, errors.New("offset counts lines from 1")
		}
		first := max(a.Offset, 1)
		p, err := t.resolveFor(c.fs, a.Path, true, false)
		if err != nil {
			return ReadResult{}, err
		}
		fl, attr, err := openFile(c.fs, p)
		if err != nil {
			return ReadResult{}, err
		}
		res := ReadResult{Path: show(p), Size: int64(attr.Size), FirstLine: first}
		br := bufio.NewReaderSize(fl, 64<<10)
		sample, perr := br.Peek(sniffLen)
		if looksBinary(sample, perr != nil) {
			res.Binary = true
			res.MediaType = http.DetectContentType(sample)
			return res, nil
		}
		var out strings.Builder
		budget := t.pol.maxRead
		line := 0
		for {
			if err := ctx.Err(); err != nil {
				return ReadResult{}, err
			}
			l, err := readLine(ctx, br)
			if l.n == 0 && err != nil {
				if err != io.EOF {
					return ReadResult{}, showErr(err)
				}
				break
			}
			if err != nil && err != io.EOF {
				return ReadResult{}, showErr(err)
			}
			line++
			if line < first {
				if l.tooLong {
					return ReadResult{}, fmt.Errorf("line %d of %s is longer than %d MiB: read stops there (offset %d is after it)", line, res.Path, maxLineScan>>20, first)
				}
				continue
			}
			if res.Lines == limit {
				res.NextOffset = line
				break
			}
			text := l.text()
			entry := fmt.Sprintf("%6d\t%s\n", line, text)
			if int64(out.Len()+len(entry)) > budget && res.Lines > 0 {
				res.NextOffset = line
				break
			}
			out.WriteString(entry)
			res.Lines++
			if l.tooLong {
				break // what follows is not worth scanning for
			}
		}
		if line < first && !(line == 0 && first == 1) {
			return ReadResult{}, fmt.Errorf("offset %d is past the end of %s (%d lines)", first, res.Path, line)
		}
		res.Content = strings.TrimSuffix(out.String(), "\n")
		return res, nil
	})
}

// WriteArgs are write's arguments.
type WriteArgs struct {
	Path    string `json:"path" jsonschema:"the file: absolute under /workspace or relative to it; missing parent directories are made"`
	Content string `json:"content" jsonschema:"the whole new content of the file"`
}

// WriteResult says what write did.
type WriteResult struct {
	Path    string `json:"path"`
	Bytes   int    `json:"bytes"`
	Created bool   `json:"created"`
}

func (r WriteResult) summary() string {
	if r.Created {
		return fmt.Sprintf("created, %d bytes", r.Bytes)
	}
	return fmt.Sprintf("replaced, %d bytes", r.Bytes)
}

// Text is the result as a model reads it.
func (r WriteResult) Text() string {
	if r.Created {
		return fmt.Sprintf("Created %s (%d bytes).", r.Path, r.Bytes)
	}
	return fmt.Sprintf("Wrote %s (%d bytes).", r.Path, r.Bytes)
}

// Write replaces (or creates) a file with content, atomically.
func (t *Tools) Write(ctx context.Context, a WriteArgs) (WriteResult, error) {
	return do(ctx, t, "write", a, func(c *call) (WriteResult, error) {
		if int64(len(a.Content)) > t.pol.maxWrite {
			return WriteResult{}, &Refusal{Rule: "policy limits.max_write", Msg: fmt.Sprintf("content of %d bytes is over the limit of %d", len(a.Content), t.pol.maxWrite)}
		}
		p, err := t.resolveFor(c.fs, a.Path, true, true)
		if err != nil {
			return WriteResult{}, err
		}
		if p == "/" {
			return WriteResult{}, fmt.Errorf("%s is a directory", Root)
		}
		created, err := t.replace(c, p, []byte(a.Content), true)
		if err != nil {
			return WriteResult{}, err
		}
		return WriteResult{Path: show(p), Bytes: len(a.Content), Created: created}, nil
	})
}

// replace gives the file p the content data atomically, in one change of
// the store and one record of the journal (a write of p, or its create):
// readers, and the store after a crash, see the old content or the new.
// An existing file keeps its inode, mode and owner; one the agent may not
// write but whose directory it may is replaced as an editor saves it, by
// a temporary file beside it renamed over it (that file's records are in
// the journal then). With mkParents, missing directories are made.
func (t *Tools) replace(c *call, p string, data []byte, mkParents bool) (created bool, err error) {
	dir := path.Dir(p)
	mode := uint32(0o644)
	old, err := c.fs.Lstat(p)
	switch {
	case err == nil:
		if old.IsDir() {
			return false, fmt.Errorf("%s is a directory", show(p))
		}
		if !old.IsRegular() {
			return false, fmt.Errorf("%s is not a regular file", show(p))
		}
		mode = old.Mode & 0o7777
	case errors.Is(err, fs.ErrNotExist):
		created = true
		if mkParents {
			if err := t.mkdirAll(c, dir); err != nil {
				return false, err
			}
		}
	default:
		return false, showErr(err)
	}
	err = c.fs.WriteFile(p, data, mode)
	if err == nil {
		return created, nil
	}
	var refused *Refusal
	if created || errors.As(err, &refused) || !errors.Is(err, fs.ErrPermission) {
		return false, showErr(err)
	}
	tmp := path.Join(dir, fmt.Sprintf(".%s.tools-%d.tmp", path.Base(p), c.id))
	if len(path.Base(tmp)) > kv.MaxNameLen {
		tmp = path.Join(dir, fmt.Sprintf(".tools-%d.tmp", c.id))
	}
	fl, err := c.fs.Open(tmp, wsfs.O_WRONLY|wsfs.O_CREATE|wsfs.O_EXCL, 0o600)
	if err != nil {
		return false, showErr(err)
	}
	ok := false
	defer func() {
		if !ok {
			c.fs.Remove(tmp)
		}
	}()
	for off := 0; off < len(data); off += 1 << 20 {
		if _, err := fl.Write(data[off:min(off+1<<20, len(data))]); err != nil {
			return false, showErr(err)
		}
	}
	if err := c.fs.Chmod(tmp, mode); err != nil {
		return false, showErr(err)
	}
	if !created {
		// As an editor's save: a file that was not the agent's
		// becomes the agent's (the kernel would refuse it the owner).
		if err := c.fs.Lchown(tmp, old.Uid, old.Gid); err != nil && !errors.Is(err, syscall.EPERM) {
			return false, showErr(err)
		}
	}
	if err := c.fs.Rename(tmp, p); err != nil {
		return false, err
	}
	ok = true
	return created, nil
}

// mkdirAll makes the store directory p and its parents, checking each
// against the policy.
func (t *Tools) mkdirAll(c *call, p string) error {
	if a, err := c.fs.Stat(p); err == nil {
		if !a.IsDir() {
			return fmt.Errorf("%s is not a directory", show(p))
		}
		return nil
	}
	cur := "/"
	for _, n := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		cur = path.Join(cur, n)
		if a, err := c.fs.Stat(cur); err == nil {
			if !a.IsDir() {
				return fmt.Errorf("%s is not a directory", show(cur))
			}
			continue
		}
		if err := t.pol.check(cur, true); err != nil {
			return err
		}
		if err := c.fs.Mkdir(cur, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return showErr(err)
		}
	}
	return nil
}

// MkdirArgs are mkdir's arguments.
type MkdirArgs struct {
	Path string `json:"path" jsonschema:"the directory to make, with any missing parents (as mkdir -p)"`
}

// MkdirResult says what mkdir did.
type MkdirResult struct {
	Path    string `json:"path"`
	Existed bool   `json:"existed,omitempty"`
}

func (r MkdirResult) summary() string {
	if r.Existed {
		return "existed"
	}
	return "made"
}

// Text is the result as a model reads it.
func (r MkdirResult) Text() string {
	if r.Existed {
		return r.Path + " already exists."
	}
	return "Made " + r.Path + "."
}

// Mkdir makes a directory and its parents.
func (t *Tools) Mkdir(ctx context.Context, a MkdirArgs) (MkdirResult, error) {
	return do(ctx, t, "mkdir", a, func(c *call) (MkdirResult, error) {
		p, err := t.resolveFor(c.fs, a.Path, true, true)
		if err != nil {
			return MkdirResult{}, err
		}
		if st, err := c.fs.Stat(p); err == nil && st.IsDir() {
			return MkdirResult{Path: show(p), Existed: true}, nil
		}
		if err := t.mkdirAll(c, p); err != nil {
			return MkdirResult{}, err
		}
		return MkdirResult{Path: show(p)}, nil
	})
}

// LsArgs are ls's arguments.
type LsArgs struct {
	Path   string `json:"path,omitempty" jsonschema:"the directory (default /workspace)"`
	Offset int    `json:"offset,omitempty" jsonschema:"entries to skip, for the next page (default 0)"`
	Limit  int    `json:"limit,omitempty" jsonschema:"entries to return at most (default 200, maximum 2000)"`
}

// Entry is one entry of a directory.
type Entry struct {
	Name   string    `json:"name"`
	Type   string    `json:"type"` // file, dir, symlink, other
	Size   int64     `json:"size"`
	Mtime  time.Time `json:"mtime"`
	Target string    `json:"target,omitempty"` // a symlink's
}

// LsResult is a page of a directory's entries, in name order.
type LsResult struct {
	Path    string  `json:"path"`
	Entries []Entry `json:"entries"`
	// NextOffset, when not 0, is the offset of the next page.
	NextOffset int `json:"nextOffset,omitempty"`
}

func (r LsResult) summary() string {
	return withNext(fmt.Sprintf("%d entries", len(r.Entries)), r.NextOffset)
}

// Text is the result as a model reads it.
func (r LsResult) Text() string {
	var b strings.Builder
	for _, e := range r.Entries {
		name := e.Name
		switch e.Type {
		case "dir":
			name += "/"
		case "symlink":
			name += " -> " + e.Target
		}
		fmt.Fprintf(&b, "%-7s %10d  %s  %s\n", e.Type, e.Size, e.Mtime.UTC().Format("2006-01-02 15:04"), name)
	}
	if len(r.Entries) == 0 {
		b.WriteString("(empty)\n")
	}
	if r.NextOffset > 0 {
		fmt.Fprintf(&b, "[more entries: continue with offset=%d]\n", r.NextOffset)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func typeName(mode uint32) string {
	switch mode & kv.S_IFMT {
	case kv.S_IFREG:
		return "file"
	case kv.S_IFDIR:
		return "dir"
	case kv.S_IFLNK:
		return "symlink"
	}
	return "other"
}

// Ls lists a directory.
func (t *Tools) Ls(ctx context.Context, a LsArgs) (LsResult, error) {
	return do(ctx, t, "ls", a, func(c *call) (LsResult, error) {
		limit, err := limitArg("limit", a.Limit, LsDefault, LsMax)
		if err != nil {
			return LsResult{}, err
		}
		if a.Offset < 0 {
			return LsResult{}, errors.New("offset must be 0 or more")
		}
		p, err := t.resolveFor(c.fs, cmpOrStr(a.Path, Root), true, false)
		if err != nil {
			return LsResult{}, err
		}
		res := LsResult{Path: show(p), Entries: []Entry{}}
		skip := a.Offset
		n := 0
		var ierr error
		err = c.fs.ReadDir(p, "", func(d kv.Dirent) bool {
			if n%1024 == 0 && ctx.Err() != nil {
				ierr = ctx.Err() // a huge offset in a huge directory
				return false
			}
			full := path.Join(p, d.Name)
			if t.pol.denied(full) {
				return true
			}
			n++
			if skip > 0 {
				skip--
				return true
			}
			if len(res.Entries) == limit {
				res.NextOffset = a.Offset + limit
				return false
			}
			at, err := c.fs.Lstat(full)
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return true // removed meanwhile
				}
				ierr = err
				return false
			}
			e := Entry{Name: d.Name, Type: typeName(at.Mode), Size: int64(at.Size), Mtime: time.Unix(0, at.Mtime)}
			if e.Type == "dir" {
				e.Size = 0
			}
			if e.Type == "symlink" {
				e.Target, _ = c.fs.Readlink(full)
			}
			res.Entries = append(res.Entries, e)
			return true
		})
		if err == nil {
			err = ierr
		}
		if err != nil {
			if errors.Is(err, syscall.ENOTDIR) {
				return LsResult{}, fmt.Errorf("%s is not a directory (use read)", show(p))
			}
			return LsResult{}, showErr(err)
		}
		return res, nil
	})
}

func cmpOrStr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// DeleteArgs are delete's arguments.
type DeleteArgs struct {
	Path      string `json:"path" jsonschema:"the file or directory to delete (a symbolic link itself, not its target)"`
	Recursive bool   `json:"recursive,omitempty" jsonschema:"delete a directory and everything under it (as rm -rf); without it only an empty directory is deleted"`
}

// DeleteResult says what delete removed.
type DeleteResult struct {
	Path    string `json:"path"`
	Removed int    `json:"removed"` // files and directories
}

func (r DeleteResult) summary() string { return fmt.Sprintf("removed %d", r.Removed) }

// Text is the result as a model reads it.
func (r DeleteResult) Text() string {
	if r.Removed == 1 {
		return "Deleted " + r.Path + "."
	}
	return fmt.Sprintf("Deleted %s (%d files and directories).", r.Path, r.Removed)
}

// Delete removes a file, a symbolic link or a directory.
func (t *Tools) Delete(ctx context.Context, a DeleteArgs) (DeleteResult, error) {
	return do(ctx, t, "delete", a, func(c *call) (DeleteResult, error) {
		p, err := t.resolveFor(c.fs, a.Path, false, true)
		if err != nil {
			return DeleteResult{}, err
		}
		if p == "/" {
			return DeleteResult{}, &Refusal{Rule: "confinement to " + Root, Msg: "the workspace root itself cannot be deleted"}
		}
		at, err := c.fs.Lstat(p)
		if err != nil {
			return DeleteResult{}, showErr(err)
		}
		if !at.IsDir() {
			if err := c.fs.Remove(p); err != nil {
				return DeleteResult{}, showErr(err)
			}
			return DeleteResult{Path: show(p), Removed: 1}, nil
		}
		if !a.Recursive {
			if err := c.fs.Remove(p); err != nil {
				if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
					return DeleteResult{}, fmt.Errorf("%s is a directory that is not empty: set recursive to delete it and everything under it", show(p))
				}
				return DeleteResult{}, showErr(err)
			}
			return DeleteResult{Path: show(p), Removed: 1}, nil
		}
		// Refuse before removing anything if a rule covers something inside.
		n := 0
		if err := t.walk(ctx, c.fs, p, false, func(q string, at kv.Attr) error {
			n++
			return t.pol.check(q, true)
		}); err != nil {
			return DeleteResult{}, err
		}
		if err := c.fs.RemoveAll(p); err != nil {
			return DeleteResult{}, showErr(err)
		}
		return DeleteResult{Path: show(p), Removed: n + 1}, nil
	})
}

// walk calls fn for everything under the directory p (not p itself), in
// name order, directories before their contents, without following links,
// down to maxWalkDepth levels and paths of maxPath bytes (hidden: what
// lies deeper is left out; otherwise it is an error).
// With hide, denied paths are skipped silently; otherwise fn sees them.
// fn may return errSkipDir for a directory.
// unreadable reports whether err is the kernel's refusal of a directory
// the agent may not list or search (another user's 0700), not a policy's.
func unreadable(err error) bool {
	var r *Refusal
	return err != nil && errors.Is(err, syscall.EACCES) && !errors.As(err, &r)
}

func (t *Tools) walk(ctx context.Context, f *wsfs.FS, p string, hide bool, fn func(q string, a kv.Attr) error) error {
	// One level per directory being walked, innermost last: a loop, not a
	// recursion, so that a deep tree costs no stack.
	type level struct {
		p       string
		entries []kv.Dirent
		next    int    // the next of entries
		after   string // the name to read on from
	}
	stack := []*level{{p: p}}
	for len(stack) > 0 {
		top := stack[len(stack)-1]
		if top.next == len(top.entries) {
			top.entries, top.next = top.entries[:0], 0
			err := f.ReadDir(top.p, top.after, func(d kv.Dirent) bool {
				top.entries = append(top.entries, d)
				return len(top.entries) < 512
			})
			if err != nil && len(stack) > 1 && unreadable(err) {
				stack = stack[:len(stack)-1] // as grep -r: past it
				continue
			}
			if err != nil {
				return showErr(err)
			}
			if len(top.entries) == 0 {
				stack = stack[:len(stack)-1]
				continue
			}
			top.after = top.entries[len(top.entries)-1].Name
		}
		d := top.entries[top.next]
		top.next++
		if err := ctx.Err(); err != nil {
			return err
		}
		q := path.Join(top.p, d.Name)
		if hide && t.pol.denied(q) {
			continue
		}
		a, err := f.Lstat(q)
		if errors.Is(err, fs.ErrNotExist) || unreadable(err) {
			continue
		}
		if err != nil {
			return showErr(err)
		}
		err = fn(q, a)
		if err == errSkipDir {
			continue
		}
		if err != nil {
			return err
		}
		if !a.IsDir() {
			continue
		}
		if len(q) > maxPath || len(stack) >= maxWalkDepth {
			// Deeper than a walk goes (the kernel lets a tree be made a
			// level at a time, deeper than any path).
			if hide {
				continue
			}
			return fmt.Errorf("%s...: the tree goes deeper than %d levels or paths of %d bytes; use exec (rm -r) for it", show(q[:min(len(q), 256)]), maxWalkDepth, maxPath)
		}
		stack = append(stack, &level{p: q})
	}
	return nil
}

// maxWalkDepth is how many levels below its start a walk goes: each entry
// is looked up from the root, so a walk costs the square of the depth.
const maxWalkDepth = 128

var errSkipDir = errors.New("skip this directory")
