package kv

import (
	"bytes"
	"testing"
)

// TestSetContent: SetContent and NewInode.Data replace or give a file its
// whole content in one batch and one journal record, with the size and
// blocks a write would leave.
func TestSetContent(t *testing.T) {
	s := newStore(t)
	big := bytes.Repeat([]byte("0123456789abcdef"), 3*ChunkSize/16+100) // three chunks and a bit
	a := must[Attr](t, "create")(s.Create(RootIno, "f", NewInode{Mode: S_IFREG | 0o644, Data: big}))
	if a.Size != uint64(len(big)) || a.Blocks != getattr(t, s, a.Ino).Blocks {
		t.Fatalf("create with data: %+v", a)
	}
	for _, data := range [][]byte{[]byte("short"), big[:ChunkSize+1], nil, big} {
		seq := s.LastSeq()
		got := must[Attr](t, "set content")(s.SetContent(a.Ino, data))
		if got.Size != uint64(len(data)) || s.LastSeq() != seq+1 {
			t.Fatalf("size %d (want %d), %d records", got.Size, len(data), s.LastSeq()-seq)
		}
		buf := make([]byte, len(data)+10)
		n, _, err := s.Read(a.Ino, 0, buf)
		if err != nil || !bytes.Equal(buf[:n], data) {
			t.Fatalf("read back %d bytes, want %d: %v", n, len(data), err)
		}
		// Blocks as a plain write of the same data leaves them.
		b := mkfile(t, s, RootIno, "cmp")
		if len(data) > 0 {
			write(t, s, b.Ino, 0, data)
		}
		if got.Blocks != getattr(t, s, b.Ino).Blocks {
			t.Fatalf("blocks %d, a write makes %d", got.Blocks, getattr(t, s, b.Ino).Blocks)
		}
		if err := s.Unlink(RootIno, "cmp"); err != nil {
			t.Fatal(err)
		}
	}
	s = reopen(t, s)
	if problems, err := s.Check(100); err != nil || len(problems) > 0 {
		t.Fatalf("check: %v %v", problems, err)
	}
	if _, err := s.SetContent(RootIno, nil); err != ErrIsDir {
		t.Fatalf("set content of a directory: %v", err)
	}
}
