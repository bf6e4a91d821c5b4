package kv

import (
	"fmt"
	"testing"
)

// BenchmarkJournalCost measures what the journal adds to the store's own
// work for the commonest changes (the FUSE round trip, which dwarfs both,
// is left out): compare on=true with on=false.
func BenchmarkJournalCost(b *testing.B) {
	for _, op := range []string{"create", "write4k", "unlink"} {
		for _, on := range []bool{true, false} {
			b.Run(fmt.Sprintf("%s/on=%v", op, on), func(b *testing.B) {
				o := quietOptions()
				o.NoJournal = !on
				s, err := Open(b.TempDir()+"/s", o)
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				d, _ := s.Create(RootIno, "d", NewInode{Mode: S_IFDIR | 0o755})
				x := s.As(&Actor{Pid: 1, Comm: "bench"})
				y := s.As(&Actor{Pid: 2, Comm: "bench"}) // alternating writers: no joined records
				f, _ := s.Create(d.Ino, "file", NewInode{Mode: S_IFREG | 0o644})
				data := make([]byte, 4096)
				if op == "unlink" {
					for i := range b.N {
						x.Create(d.Ino, fmt.Sprint("f", i), NewInode{Mode: S_IFREG | 0o644})
					}
				}
				b.ResetTimer()
				for i := range b.N {
					switch op {
					case "create":
						_, err = x.Create(d.Ino, fmt.Sprint("f", i), NewInode{Mode: S_IFREG | 0o644})
					case "write4k":
						w := x
						if i%2 == 1 {
							w = y
						}
						_, err = w.Write(f.Ino, int64(i%256)*4096, data)
					case "unlink":
						err = x.Unlink(d.Ino, fmt.Sprint("f", i))
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
