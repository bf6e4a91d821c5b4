package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/spec"
)

// grepMaxFile is the largest file grep searches.
const grepMaxFile = 32 << 20

// FindArgs are find's arguments.
type FindArgs struct {
	Path    string `json:"path,omitempty" jsonschema:"the directory to search under (default /workspace)"`
	Pattern string `json:"pattern" jsonschema:"a glob: *.go matches names at any depth; a pattern with a slash (src/**/*_test.go) matches paths relative to path; ** is any number of directories"`
	Offset  int    `json:"offset,omitempty" jsonschema:"matches to skip, for the next page (default 0)"`
	Limit   int    `json:"limit,omitempty" jsonschema:"matches to return at most (default 200, maximum 2000)"`
}

// FindResult is a page of the paths that match, in walk order
// (directories before their contents, names sorted).
type FindResult struct {
	Paths      []string `json:"paths"`
	NextOffset int      `json:"nextOffset,omitempty"`
}

func (r FindResult) summary() string {
	return withNext(fmt.Sprintf("%d paths", len(r.Paths)), r.NextOffset)
}

// Text is the result as a model reads it.
func (r FindResult) Text() string {
	if len(r.Paths) == 0 {
		return "(no matches)"
	}
	s := strings.Join(r.Paths, "\n")
	if r.NextOffset > 0 {
		s += fmt.Sprintf("\n[more matches: continue with offset=%d]", r.NextOffset)
	}
	return s
}

// skipDir tells whether a search skips a directory it meets: version
// control metadata, unless the search starts inside it.
func skipDir(name string) bool { return name == ".git" || name == ".hg" || name == ".svn" }

// Find lists paths under a directory that match a glob.
func (t *Tools) Find(ctx context.Context, a FindArgs) (FindResult, error) {
	return do(ctx, t, "find", a, func(c *call) (FindResult, error) {
		limit, err := limitArg("limit", a.Limit, FindDefault, FindMax)
		if err != nil {
			return FindResult{}, err
		}
		if a.Offset < 0 {
			return FindResult{}, errors.New("offset must be 0 or more")
		}
		if a.Pattern == "" {
			return FindResult{}, errors.New("pattern is empty (use * for everything)")
		}
		if _, err := path.Match(strings.ReplaceAll(a.Pattern, "**", "*"), ""); err != nil {
			return FindResult{}, fmt.Errorf("pattern %q: %v", a.Pattern, err)
		}
		root, err := t.resolveFor(c.fs, cmpOrStr(a.Path, Root), true, false)
		if err != nil {
			return FindResult{}, err
		}
		if at, err := c.fs.Stat(root); err != nil {
			return FindResult{}, showErr(err)
		} else if !at.IsDir() {
			return FindResult{}, fmt.Errorf("%s is not a directory", show(root))
		}
		pat := strings.TrimPrefix(a.Pattern, "./")
		if !strings.Contains(pat, "/") {
			pat = "**/" + pat
		}
		res := FindResult{Paths: []string{}}
		skip := a.Offset
		errFull := errors.New("full")
		err = t.walk(ctx, c.fs, root, true, func(q string, at kv.Attr) error {
			if at.IsDir() && skipDir(path.Base(q)) && !strings.Contains(a.Pattern, path.Base(q)) {
				return errSkipDir
			}
			rel := strings.TrimPrefix(strings.TrimPrefix(q, root), "/")
			if !spec.MatchGlob("/"+pat, "/"+rel) {
				return nil
			}
			if skip > 0 {
				skip--
				return nil
			}
			if len(res.Paths) == limit {
				res.NextOffset = a.Offset + limit
				return errFull
			}
			name := show(q)
			if at.IsDir() {
				name += "/"
			}
			res.Paths = append(res.Paths, name)
			return nil
		})
		if err != nil && err != errFull {
			return FindResult{}, err
		}
		return res, nil
	})
}

// GrepArgs are grep's arguments.
type GrepArgs struct {
	Path       string `json:"path,omitempty" jsonschema:"a file, or a directory to search recursively (default /workspace)"`
	Query      string `json:"query" jsonschema:"the text to look for (a regular expression, RE2 syntax, when regex is true)"`
	Regex      bool   `json:"regex,omitempty" jsonschema:"query is a regular expression"`
	IgnoreCase bool   `json:"ignoreCase,omitempty" jsonschema:"match regardless of case"`
	Include    string `json:"include,omitempty" jsonschema:"only files whose name (or path, if it has a slash) matches this glob, such as *.go"`
	Context    int    `json:"context,omitempty" jsonschema:"lines of context before and after each match (default 0, maximum 10)"`
	Offset     int    `json:"offset,omitempty" jsonschema:"matches to skip, for the next page (default 0)"`
	Limit      int    `json:"limit,omitempty" jsonschema:"matches to return at most (default 100, maximum 1000)"`
}

// Match is one matching line.
type Match struct {
	File   string   `json:"file"`
	Line   int      `json:"line"`
	Text   string   `json:"text"`
	Before []string `json:"before,omitempty"`
	After  []string `json:"after,omitempty"`
}

// GrepResult is a page of matches, files in walk order.
type GrepResult struct {
	Matches    []Match `json:"matches"`
	NextOffset int     `json:"nextOffset,omitempty"`
	// SkippedBinary counts binary files not searched, SkippedLarge files
	// over 32 MiB.
	SkippedBinary int `json:"skippedBinary,omitempty"`
	SkippedLarge  int `json:"skippedLarge,omitempty"`
}

func (r GrepResult) summary() string {
	return withNext(fmt.Sprintf("%d matches", len(r.Matches)), r.NextOffset)
}

// Text is the result as a model reads it: file:line:text, context lines
// as file-line-text, groups separated by --.
func (r GrepResult) Text() string {
	if len(r.Matches) == 0 {
		return "(no matches)"
	}
	var b strings.Builder
	ctx := false
	for i, m := range r.Matches {
		if len(m.Before)+len(m.After) > 0 {
			ctx = true
		}
		if ctx && i > 0 {
			b.WriteString("--\n")
		}
		for k, l := range m.Before {
			fmt.Fprintf(&b, "%s-%d-%s\n", m.File, m.Line-len(m.Before)+k, l)
		}
		fmt.Fprintf(&b, "%s:%d:%s\n", m.File, m.Line, m.Text)
		for k, l := range m.After {
			fmt.Fprintf(&b, "%s-%d-%s\n", m.File, m.Line+1+k, l)
		}
	}
	if r.NextOffset > 0 {
		fmt.Fprintf(&b, "[more matches: continue with offset=%d]\n", r.NextOffset)
	}
	if r.SkippedLarge > 0 {
		fmt.Fprintf(&b, "[%d files over 32 MiB not searched]\n", r.SkippedLarge)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func cutLine(s string) string {
	if utf8.RuneCountInString(s) > maxLineShown {
		r := []rune(s)
		return string(r[:maxLineShown]) + fmt.Sprintf(" [line cut: %d characters]", len(r))
	}
	return s
}

// Grep searches files for lines that match.
func (t *Tools) Grep(ctx context.Context, a GrepArgs) (GrepResult, error) {
	return do(ctx, t, "grep", a, func(c *call) (GrepResult, error) {
		limit, err := limitArg("limit", a.Limit, GrepDefault, GrepMax)
		if err != nil {
			return GrepResult{}, err
		}
		if a.Context < 0 || a.Context > GrepMaxContext {
			return GrepResult{}, fmt.Errorf("context must be 0 to %d", GrepMaxContext)
		}
		if a.Offset < 0 {
			return GrepResult{}, errors.New("offset must be 0 or more")
		}
		if a.Query == "" {
			return GrepResult{}, errors.New("query is empty")
		}
		expr := a.Query
		if !a.Regex {
			expr = regexp.QuoteMeta(expr)
		}
		if a.IgnoreCase {
			expr = "(?i)" + expr
		}
		re, err := regexp.Compile(expr)
		if err != nil {
			return GrepResult{}, fmt.Errorf("query is not a regular expression (RE2): %v", err)
		}
		if a.Include != "" {
			if _, err := path.Match(strings.ReplaceAll(a.Include, "**", "*"), ""); err != nil {
				return GrepResult{}, fmt.Errorf("include %q: %v", a.Include, err)
			}
		}
		root, err := t.resolveFor(c.fs, cmpOrStr(a.Path, Root), true, false)
		if err != nil {
			return GrepResult{}, err
		}
		at, err := c.fs.Stat(root)
		if err != nil {
			return GrepResult{}, showErr(err)
		}
		res := GrepResult{Matches: []Match{}}
		skip := a.Offset
		errFull := errors.New("full")
		include := a.Include
		if include != "" && !strings.Contains(include, "/") {
			include = "**/" + include
		}
		var literal []byte // a query to look for as is: files without it are skipped whole
		if !a.Regex && !a.IgnoreCase {
			literal = []byte(a.Query)
		}
		var buf []byte
		search := func(q string) error {
			fl, fa, err := openFile(c.fs, q)
			if err != nil {
				return nil // vanished or special: nothing to search
			}
			if fa.Size > grepMaxFile {
				res.SkippedLarge++
				return nil
			}
			if uint64(cap(buf)) < fa.Size {
				buf = make([]byte, fa.Size)
			}
			data := buf[:fa.Size]
			nr, err := fl.ReadAt(data, 0)
			if err != nil && err != io.EOF {
				if errors.Is(err, fs.ErrNotExist) {
					return nil // removed or replaced meanwhile
				}
				return showErr(err)
			}
			data = data[:nr]
			if looksBinary(data[:min(len(data), sniffLen)], len(data) <= sniffLen) {
				res.SkippedBinary++
				return nil
			}
			if literal != nil && !bytes.Contains(data, literal) {
				return nil
			}
			var before [][]byte
			var pending []int // matches still collecting after-context
			for n := 1; len(data) > 0; n++ {
				if n%4096 == 0 {
					if err := ctx.Err(); err != nil {
						return err
					}
				}
				line := data
				if i := bytes.IndexByte(data, '\n'); i >= 0 {
					line, data = data[:i], data[i+1:]
				} else {
					data = nil
				}
				line = bytes.TrimSuffix(line, []byte{'\r'})
				if len(pending) > 0 {
					text := cutLine(string(line))
					keep := pending[:0]
					for _, i := range pending {
						m := &res.Matches[i]
						m.After = append(m.After, text)
						if len(m.After) < a.Context {
							keep = append(keep, i)
						}
					}
					pending = keep
				}
				var hit bool
				if literal != nil {
					hit = bytes.Contains(line, literal)
				} else {
					hit = re.Match(line)
				}
				if hit {
					if skip > 0 {
						skip--
					} else {
						if len(res.Matches) == limit {
							res.NextOffset = a.Offset + limit
							return errFull
						}
						m := Match{File: show(q), Line: n, Text: cutLine(string(line))}
						for _, l := range before {
							m.Before = append(m.Before, cutLine(string(l)))
						}
						res.Matches = append(res.Matches, m)
						if a.Context > 0 {
							pending = append(pending, len(res.Matches)-1)
						}
					}
				}
				if a.Context > 0 {
					before = append(before, line)
					if len(before) > a.Context {
						before = before[1:]
					}
				}
			}
			return nil
		}
		if !at.IsDir() {
			err = search(root)
		} else {
			err = t.walk(ctx, c.fs, root, true, func(q string, at kv.Attr) error {
				if at.IsDir() {
					if skipDir(path.Base(q)) {
						return errSkipDir
					}
					return nil
				}
				if !at.IsRegular() {
					return nil
				}
				if include != "" && !spec.MatchGlob("/"+include, "/"+strings.TrimPrefix(strings.TrimPrefix(q, root), "/")) {
					return nil
				}
				return search(q)
			})
		}
		if err != nil && err != errFull {
			return GrepResult{}, err
		}
		return res, nil
	})
}
