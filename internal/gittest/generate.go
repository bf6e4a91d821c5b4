package gittest

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Generate makes a deterministic repository in dir (created if missing; it
// must be empty) with nCommits commits on main whose last tree holds
// nFiles files, checks main out and returns its commit id. The same
// arguments always give the same commit id.
//
// The first commit adds all the files, spread over nested directories;
// every later commit changes a few files, and some also delete one file
// and add another, so the number of files stays nFiles. About one file in
// fifty is executable, one in two hundred is a symbolic link (most of them
// dangling), one in a
// hundred is 20 to 100 KiB, the others are text of up to 4 KiB.
//
// The history is written with git fast-import: 10,000 files and 500
// commits take a few seconds.
func Generate(t testing.TB, dir string, nFiles, nCommits int, seed uint64) string {
	t.Helper()
	if nFiles < 1 || nCommits < 1 {
		t.Fatalf("gittest.Generate: need at least one file and one commit, got %d and %d", nFiles, nCommits)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	Git(t, dir, "init", "-q", "-b", "main")

	cmd := exec.Command("git", "fast-import", "--quiet", "--done")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), Env()...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g := &generator{
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		w:   bufio.NewWriterSize(stdin, 1<<20),
	}
	werr := g.stream(nFiles, nCommits)
	if werr == nil {
		werr = g.w.Flush()
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("git fast-import: %v\n%s", err, stderr.String())
	}
	if werr != nil {
		t.Fatalf("gittest.Generate: writing to git fast-import: %v", werr)
	}
	Git(t, dir, "reset", "-q", "--hard", "main")
	return Head(t, dir)
}

type generator struct {
	rng   *rand.Rand
	w     *bufio.Writer
	err   error
	next  int      // number for the next new file's name
	paths []string // the files of the current tree
}

var (
	words = strings.Fields(`alpha bravo charlie delta echo foxtrot golf hotel
		india juliett kilo lima mike november oscar papa quebec romeo sierra
		tango uniform victor whiskey xray yankee zulu func return if else for
		range struct type var const package import error nil true false`)
	exts = []string{".go", ".txt", ".md", ".json", ".c", ".h", ".py", ""}
)

func (g *generator) printf(format string, args ...any) {
	if g.err == nil {
		_, g.err = fmt.Fprintf(g.w, format, args...)
	}
}

// data writes a fast-import data command with b.
func (g *generator) data(b []byte) {
	g.printf("data %d\n", len(b))
	if g.err == nil {
		_, g.err = g.w.Write(b)
	}
	g.printf("\n")
}

// newPath returns the path of a new file: up to three directory levels,
// about 30 files a directory.
func (g *generator) newPath() string {
	i := g.next
	g.next++
	dir := fmt.Sprintf("d%02d", i%17)
	if i%5 != 0 {
		dir += fmt.Sprintf("/s%02d", (i/17)%13)
	}
	if i%3 == 0 {
		dir += fmt.Sprintf("/t%d", (i/221)%7)
	}
	return fmt.Sprintf("%s/f%05d%s", dir, i, exts[g.rng.IntN(len(exts))])
}

func (g *generator) content() []byte {
	size := g.rng.IntN(4097)
	if g.rng.IntN(100) == 0 {
		size = 20<<10 + g.rng.IntN(80<<10)
	}
	var b strings.Builder
	b.Grow(size + 16)
	for b.Len() < size {
		b.WriteString(words[g.rng.IntN(len(words))])
		if g.rng.IntN(9) == 0 {
			b.WriteByte('\n')
		} else {
			b.WriteByte(' ')
		}
	}
	return []byte(b.String()[:size])
}

// modify writes a fast-import file change setting path to new content.
func (g *generator) modify(path string) {
	switch r := g.rng.IntN(200); {
	case r == 0:
		// A symbolic link; its relative target usually does not exist.
		target := fmt.Sprintf("f%05d", g.rng.IntN(max(g.next, 1)))
		g.printf("M 120000 inline %s\n", path)
		g.data([]byte(target))
	case r <= 4:
		g.printf("M 100755 inline %s\n", path)
		g.data(append([]byte("#!/bin/sh\n"), g.content()...))
	default:
		g.printf("M 100644 inline %s\n", path)
		g.data(g.content())
	}
}

func (g *generator) stream(nFiles, nCommits int) error {
	for c := range nCommits {
		date := Epoch.Add(time.Duration(c) * time.Minute).Unix()
		g.printf("commit refs/heads/main\n")
		g.printf("author %s <%s> %d +0000\n", AuthorName, AuthorEmail, date)
		g.printf("committer %s <%s> %d +0000\n", CommitterName, CommitterEmail, date)
		if c == 0 {
			g.data([]byte("initial\n"))
			for range nFiles {
				p := g.newPath()
				g.paths = append(g.paths, p)
				g.modify(p)
			}
			continue
		}
		g.data(fmt.Appendf(nil, "commit %d\n", c))
		for range 1 + g.rng.IntN(10) {
			g.modify(g.paths[g.rng.IntN(len(g.paths))])
		}
		if g.rng.IntN(4) == 0 {
			// Replace a file by a new one.
			i := g.rng.IntN(len(g.paths))
			g.printf("D %s\n", g.paths[i])
			g.paths[i] = g.newPath()
			g.modify(g.paths[i])
		}
		if g.err != nil {
			return g.err
		}
	}
	g.printf("done\n")
	return g.err
}
