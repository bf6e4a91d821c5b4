// Package benchtab runs benchmark variants interleaved, round by round,
// and reports them as ratios of the same round: on a noisy machine the
// variants of one round see the same load, so their ratio is steadier
// than the ratio of medians taken at different times.
package benchtab

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Interleave runs each of n variants once per round, starting each round
// one variant later, after one untimed warm-up round: runs[round][variant].
func Interleave[S any](n, rounds int, run func(v int) S) [][]S {
	for v := range n {
		run(v)
	}
	runs := make([][]S, rounds)
	for r := range runs {
		runs[r] = make([]S, n)
		for i := range n {
			v := (r + i) % n
			runs[r][v] = run(v)
		}
	}
	return runs
}

// Pair is the ratio of variant A's metric to variant B's; with C >= 0, it
// is divided by the ratio of C's to D's (a ratio of ratios).
type Pair struct{ A, B, C, D int }

// Of is the pair a/b.
func Of(a, b int) Pair { return Pair{a, b, -1, -1} }

// Ratios are the sorted ratios p of the variants' metric, round by round.
func Ratios[S any](runs [][]S, p Pair, metric func(S) time.Duration) []float64 {
	q := make([]float64, len(runs))
	for i, rr := range runs {
		q[i] = float64(metric(rr[p.A])) / float64(metric(rr[p.B]))
		if p.C >= 0 {
			q[i] /= float64(metric(rr[p.C])) / float64(metric(rr[p.D]))
		}
	}
	slices.Sort(q)
	return q
}

// Median is the median of variant v's metric.
func Median[S any](runs [][]S, v int, metric func(S) time.Duration) time.Duration {
	d := make([]time.Duration, len(runs))
	for r := range runs {
		d[r] = metric(runs[r][v])
	}
	slices.Sort(d)
	return d[len(d)/2]
}

// Row is one workload's runs: Runs[round][variant].
type Row[S any] struct {
	Name string
	Runs [][]S
}

// Table is a Markdown table: each workload's median per variant, then for
// each of pairs the median of the ratios of the same round, [p25-p75].
func Table[S any](title string, names []string, rows []Row[S], pairs []Pair, metric func(S) time.Duration) string {
	var t strings.Builder
	fmt.Fprintf(&t, "%s: median per variant; ratio: median of the ratios in one round [p25-p75]\n\n| workload |", title)
	for _, n := range names {
		fmt.Fprintf(&t, " %s |", n)
	}
	for _, p := range pairs {
		if p.C >= 0 {
			fmt.Fprintf(&t, " (%s / %s) / (%s / %s) |", names[p.A], names[p.B], names[p.C], names[p.D])
		} else {
			fmt.Fprintf(&t, " %s / %s |", names[p.A], names[p.B])
		}
	}
	t.WriteString("\n|---|" + strings.Repeat("---:|", len(names)+len(pairs)) + "\n")
	for _, row := range rows {
		fmt.Fprintf(&t, "| %s |", row.Name)
		for v := range names {
			fmt.Fprintf(&t, " %v |", Median(row.Runs, v, metric).Round(10*time.Microsecond))
		}
		for _, p := range pairs {
			q := Ratios(row.Runs, p, metric)
			n := len(q)
			fmt.Fprintf(&t, " %.3f [%.2f-%.2f] |", q[n/2], q[n/4], q[(3*n)/4])
		}
		t.WriteString("\n")
	}
	return t.String()
}
