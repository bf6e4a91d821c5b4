package shell

import (
	"bytes"
	"context"
	"sort"
	"strings"
	"testing"
	"time"
)

// BenchmarkCorpus times every corpus command on the fast path (Exec on a
// store with the fixture) and with bash -c and GNU coreutils on a tmpfs
// copy of the same tree, alternating, and reports the median over
// commands of each command's median latency, and their ratio.
//
//	go test -run '^$' -bench Corpus -benchtime 1x ./sandbox/shell
func BenchmarkCorpus(b *testing.B) {
	entries := readCorpus(b)
	s, fs := newShell(b)
	writeFixtureStore(b, fs)
	ws, tmp, remove := tmpfsFixture(b, "shellbench-")
	defer remove()
	const runs = 5
	var fastMed, bashMed []float64
	for i := 0; i < b.N; i++ {
		fastMed, bashMed = fastMed[:0], bashMed[:0]
		for _, e := range entries {
			if strings.Contains(e.cmd, "sleep") || strings.HasPrefix(e.cmd, "tree") {
				continue
			}
			var f, g []float64
			for r := 0; r < runs; r++ {
				var out bytes.Buffer
				start := time.Now()
				s.Exec(context.Background(), e.cmd, ExecOptions{Stdout: &out, Stderr: &out, Timeout: 10 * time.Second})
				f = append(f, time.Since(start).Seconds())

				cmd := bashCommand(ws, tmp, e.cmd)
				cmd.Stdout, cmd.Stderr = &out, &out
				start = time.Now()
				cmd.Run()
				g = append(g, time.Since(start).Seconds())
			}
			fastMed = append(fastMed, median(f))
			bashMed = append(bashMed, median(g))
		}
	}
	fm, bm := median(fastMed), median(bashMed)
	b.ReportMetric(fm*1e6, "fast-µs/cmd")
	b.ReportMetric(bm*1e6, "bash-µs/cmd")
	b.ReportMetric(bm/fm, "bash/fast")
	b.Logf("%d commands: median latency fast path %.0f µs, bash + coreutils on tmpfs %.0f µs: fast path %.1fx faster",
		len(fastMed), fm*1e6, bm*1e6, bm/fm)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}
