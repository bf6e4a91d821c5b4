package tools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode/utf8"
)

// EditArgs are edit's arguments.
type EditArgs struct {
	Path  string `json:"path" jsonschema:"the text file to edit: absolute under /workspace or relative to it"`
	Edits []Edit `json:"edits" jsonschema:"replacements (at most 1000), applied together or not at all"`
}

// Edit is one replacement.
type Edit struct {
	OldText string `json:"oldText" jsonschema:"text that occurs exactly once in the file as it is now (include enough surrounding lines to make it unique)"`
	NewText string `json:"newText" jsonschema:"what replaces it (may be empty, to delete)"`
}

// EditResult is what edit changed.
type EditResult struct {
	Path  string `json:"path"`
	Edits int    `json:"edits"`
	Diff  string `json:"diff"` // unified, 3 lines of context
}

func (r EditResult) summary() string {
	return fmt.Sprintf("edits: %d, diff lines: %d", r.Edits, strings.Count(r.Diff, "\n"))
}

// Text is the result as a model reads it.
func (r EditResult) Text() string {
	return fmt.Sprintf("Edited %s (%d replacements).\n%s", r.Path, r.Edits, r.Diff)
}

const bom = "\ufeff"

// MaxEdits is the most edits one call may make: each is searched for in
// the whole file (twice, to be sure it occurs once).
const MaxEdits = 1000

// applyEdits applies edits to text. Each OldText must occur exactly once
// in the original, and the edits may not overlap. A file whose line
// endings are all CRLF is matched and edited as if they were LF, and gets
// CRLF back; a byte-order mark is kept. It returns the new text and a
// unified diff of the change.
func applyEdits(ctx context.Context, name, text string, edits []Edit) (string, string, error) {
	if len(edits) == 0 {
		return "", "", errors.New("no edits given")
	}
	if len(edits) > MaxEdits {
		return "", "", fmt.Errorf("%d edits in one call is over the maximum %d (split them, or use write)", len(edits), MaxEdits)
	}
	if !utf8.ValidString(text) || strings.IndexByte(text, 0) >= 0 {
		return "", "", fmt.Errorf("%s is a binary file: edit changes text files only (use write to replace it)", name)
	}
	hasBOM := strings.HasPrefix(text, bom)
	body := strings.TrimPrefix(text, bom)
	crlf := strings.Contains(body, "\r\n") && strings.Count(body, "\r\n") == strings.Count(body, "\n")
	if crlf {
		body = strings.ReplaceAll(body, "\r\n", "\n")
	}
	type span struct {
		start, end int
		i          int
	}
	spans := make([]span, 0, len(edits))
	for i, e := range edits {
		if err := ctx.Err(); err != nil {
			return "", "", err
		}
		old, repl := e.OldText, e.NewText
		if crlf {
			old, repl = strings.ReplaceAll(old, "\r\n", "\n"), strings.ReplaceAll(repl, "\r\n", "\n")
			edits[i] = Edit{old, repl}
		}
		if old == "" {
			return "", "", fmt.Errorf("edits[%d]: oldText is empty", i)
		}
		first := strings.Index(body, old)
		if first < 0 {
			return "", "", fmt.Errorf("edits[%d]: oldText not found in %s (it must match exactly, whitespace included; read the file again)", i, name)
		}
		if second := strings.Index(body[first+1:], old); second >= 0 {
			line1 := strings.Count(body[:first], "\n") + 1
			line2 := strings.Count(body[:first+1+second], "\n") + 1
			return "", "", fmt.Errorf("edits[%d]: oldText occurs more than once in %s (lines %d and %d at least): add surrounding lines to make it unique", i, name, line1, line2)
		}
		spans = append(spans, span{first, first + len(old), i})
	}
	sort.Slice(spans, func(a, b int) bool { return spans[a].start < spans[b].start })
	for k := 1; k < len(spans); k++ {
		if spans[k].start < spans[k-1].end {
			return "", "", fmt.Errorf("edits[%d] and edits[%d] overlap in %s: merge them into one edit", spans[k-1].i, spans[k].i, name)
		}
	}
	var out strings.Builder
	prev := 0
	for _, s := range spans {
		out.WriteString(body[prev:s.start])
		out.WriteString(edits[s.i].NewText)
		prev = s.end
	}
	out.WriteString(body[prev:])
	nb := out.String()
	if nb == body {
		return "", "", errors.New("the edits change nothing (each newText equals its oldText)")
	}
	changes := make([]change, len(spans))
	for k, sp := range spans {
		changes[k] = change{sp.start, sp.end, len(edits[sp.i].NewText)}
	}
	diff := unifiedDiff(name, body, nb, changes)
	if crlf {
		nb = strings.ReplaceAll(nb, "\n", "\r\n")
	}
	if hasBOM {
		nb = bom + nb
	}
	return nb, diff, nil
}

// lines splits text into lines without their newline; a final newline
// ends the last line rather than starting an empty one.
func lines(text string) []string {
	if text == "" {
		return nil
	}
	l := strings.Split(text, "\n")
	if l[len(l)-1] == "" {
		l = l[:len(l)-1]
	}
	return l
}

// change is a replaced byte range of the old text and the length of
// what replaced it.
type change struct{ start, end, newLen int }

// unifiedDiff makes a unified diff of old and new, knowing the changed
// byte ranges of old (in order, not overlapping): the lines they touch are
// the changed lines, so no diff algorithm is needed.
func unifiedDiff(name, old, new string, changes []change) string {
	lineStart := func(off int) int { return strings.LastIndexByte(old[:off], '\n') + 1 }
	lineEnd := func(off int) int { // just past the newline of the line holding off-1
		if i := strings.IndexByte(old[off-1:], '\n'); i >= 0 {
			return off + i
		}
		return len(old)
	}
	// Regions: whole lines of old, changes on a shared line merged.
	type region struct{ s, e, grow int }
	var regs []region
	for _, c := range changes {
		r := region{lineStart(c.start), lineEnd(c.end), c.newLen - (c.end - c.start)}
		if n := len(regs); n > 0 && r.s < regs[n-1].e {
			regs[n-1].e = max(regs[n-1].e, r.e)
			regs[n-1].grow += r.grow
			continue
		}
		regs = append(regs, r)
	}
	type chunk struct{ oa, ob, na, nb int } // old lines [oa,ob), new lines [na,nb)
	var chunks []chunk
	delta, ldelta := 0, 0
	for _, r := range regs {
		oa := strings.Count(old[:r.s], "\n")
		on := len(lines(old[r.s:r.e]))
		nn := len(lines(new[r.s+delta : r.e+delta+r.grow]))
		chunks = append(chunks, chunk{oa, oa + on, oa + ldelta, oa + ldelta + nn})
		delta += r.grow
		ldelta += nn - on
	}
	ol, nl := lines(old), lines(new)
	const ctx = 3
	var b strings.Builder
	rel := strings.TrimPrefix(name, Root)
	fmt.Fprintf(&b, "--- a%s\n+++ b%s\n", rel, rel)
	for i := 0; i < len(chunks); {
		j := i
		for j+1 < len(chunks) && chunks[j+1].oa-chunks[j].ob <= 2*ctx {
			j++
		}
		first, last := chunks[i], chunks[j]
		os, oe := max(first.oa-ctx, 0), min(last.ob+ctx, len(ol))
		ns := first.na - (first.oa - os)
		ne := last.nb + (oe - last.ob)
		fmt.Fprintf(&b, "@@ -%s +%s @@\n", hunkRange(os, oe-os), hunkRange(ns, ne-ns))
		pos := os
		for k := i; k <= j; k++ {
			c := chunks[k]
			for ; pos < c.oa; pos++ {
				b.WriteString(" " + ol[pos] + "\n")
			}
			for x := c.oa; x < c.ob; x++ {
				b.WriteString("-" + ol[x] + "\n")
			}
			for x := c.na; x < c.nb; x++ {
				b.WriteString("+" + nl[x] + "\n")
			}
			pos = c.ob
		}
		for ; pos < oe; pos++ {
			b.WriteString(" " + ol[pos] + "\n")
		}
		i = j + 1
	}
	return b.String()
}

func hunkRange(start, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	if n == 1 {
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

// Edit replaces text in a file: every oldText must occur exactly once,
// the edits may not overlap, and they apply together or not at all.
func (t *Tools) Edit(ctx context.Context, a EditArgs) (EditResult, error) {
	return do(ctx, t, "edit", a, func(c *call) (EditResult, error) {
		p, err := t.resolveFor(c.fs, a.Path, true, true)
		if err != nil {
			return EditResult{}, err
		}
		fl, attr, err := openFile(c.fs, p)
		if err != nil {
			return EditResult{}, err
		}
		if int64(attr.Size) > t.pol.maxWrite {
			return EditResult{}, &Refusal{Rule: "policy limits.max_write", Msg: fmt.Sprintf("%s is %d bytes, over the limit of %d", show(p), attr.Size, t.pol.maxWrite)}
		}
		data, err := io.ReadAll(io.LimitReader(fl, t.pol.maxWrite+1))
		if err != nil {
			return EditResult{}, showErr(err)
		}
		edits := append([]Edit(nil), a.Edits...)
		nt, diff, err := applyEdits(ctx, show(p), string(data), edits)
		if err != nil {
			return EditResult{}, err
		}
		if int64(len(nt)) > t.pol.maxWrite {
			return EditResult{}, &Refusal{Rule: "policy limits.max_write", Msg: fmt.Sprintf("the result, %d bytes, is over the limit of %d", len(nt), t.pol.maxWrite)}
		}
		if _, err := t.replace(c, p, []byte(nt), false); err != nil {
			return EditResult{}, err
		}
		return EditResult{Path: show(p), Edits: len(a.Edits), Diff: diff}, nil
	})
}
