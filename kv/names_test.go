package kv

import (
	"slices"
	"testing"
)

func TestNamesAndDirMoves(t *testing.T) {
	s := newStore(t)
	d, err := s.Create(RootIno, "d", NewInode{Mode: S_IFDIR | 0o755})
	if err != nil {
		t.Fatal(err)
	}
	f, err := s.Create(d.Ino, "f", NewInode{Mode: S_IFREG | 0o644})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Link(f.Ino, RootIno, "g"); err != nil {
		t.Fatal(err)
	}
	var names []string
	if err := s.Names(f.Ino, func(dir uint64, name string) bool {
		names = append(names, name)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"f", "g"}) {
		t.Errorf("names of a file with two: %v", names)
	}
	g := s.DirMoves()
	if err := s.Rename(RootIno, "g", RootIno, "h", 0); err != nil {
		t.Fatal(err)
	}
	if s.DirMoves() != g {
		t.Errorf("a file's rename counted as a directory's move")
	}
	if err := s.Rename(RootIno, "d", RootIno, "e", 0); err != nil {
		t.Fatal(err)
	}
	if got := s.DirMoves(); got != g+2 || got&1 != 0 {
		t.Errorf("DirMoves after a directory's move: %d, want %d", got, g+2)
	}
}
