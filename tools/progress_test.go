package tools

import (
	"bytes"
	"math/rand/v2"
	"sync"
	"testing"
)

// TestProgressTail: the tail taken is the last ProgressMaxTail bytes
// written since the last take, whatever the sizes of the writes.
func TestProgressTail(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	p := &progressTap{mu: &sync.Mutex{}}
	var all bytes.Buffer
	var total int64
	for round := range 2000 {
		b := make([]byte, []int{0, 1, 7, 100, ProgressMaxTail - 1, ProgressMaxTail, 3 * ProgressMaxTail}[rng.IntN(7)])
		for i := range b {
			b[i] = byte('a' + rng.IntN(26))
		}
		p.see(b)
		all.Write(b)
		total += int64(len(b))
		if rng.IntN(5) == 0 {
			want := all.Bytes()
			if len(want) > ProgressMaxTail {
				want = want[len(want)-ProgressMaxTail:]
			}
			if got := p.take(); !bytes.Equal(got, want) {
				t.Fatalf("round %d: tail %q, want %q", round, got, want)
			}
			all.Reset()
		}
	}
	if p.total != total {
		t.Fatalf("total %d, want %d", p.total, total)
	}
	if got := validTail([]byte("\x80\x80ok \x1b[31mred\xff\n\tend")); got != "ok .[31mred.\n\tend" {
		t.Fatalf("validTail: %q", got)
	}
}

// BenchmarkProgressSee: a byte at a time costs a byte's copy, not the
// tail's.
func BenchmarkProgressSee(b *testing.B) {
	p := &progressTap{mu: &sync.Mutex{}}
	one := []byte("x")
	for b.Loop() {
		p.see(one)
	}
}
