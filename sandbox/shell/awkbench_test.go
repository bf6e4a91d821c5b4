package shell

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkAwkGuard times awk programs as written and guarded (the
// rewrite of awkguard.go, with natives that charge an atomic counter as
// the real ones charge the call's budget), alternating, and reports the
// ratio guarded/written of each.
//
//	go test -run '^$' -bench AwkGuard -benchtime 5x ./sandbox/shell
func BenchmarkAwkGuard(b *testing.B) {
	var in strings.Builder
	for i := 0; i < 20000; i++ {
		fmt.Fprintf(&in, "w%d %d the quick brown fox %d.%d\n", i%997, i, i%13, i%7)
	}
	var charged atomic.Int64
	natives := awkNatives(&awkGuard{
		step:  func() error { charged.Add(0); return nil },
		alloc: func(n int64) error { charged.Add(n); return nil },
		room:  func() int64 { return 1 << 62 },
	})
	for _, c := range []struct{ name, src string }{
		{"concat-loop", `BEGIN { for (i = 0; i < 20000; i++) s = s "x"; print length(s) }`},
		{"concat-small", `BEGIN { for (i = 0; i < 200000; i++) s = "a" i "b"; print s }`},
		{"fields", `{ print $1 "," $2 }`},
		{"printf", `{ printf "%-8s %6d %10.3f\n", $1, $2, $NF }`},
		{"gsub", `{ n += gsub(/o/, "0") } END { print n }`},
		{"count", `{ c[$1]++ } END { for (w in c) n++; print n }`},
		{"array-100k", `BEGIN { for (i = 0; i < 100000; i++) a[i] = i; for (k in a) n += a[k]; print n }`},
	} {
		b.Run(c.name, func(b *testing.B) {
			guarded, err := guardAwk(c.src)
			if err != nil {
				b.Fatal(err)
			}
			var plain, guard float64
			for i := 0; i < b.N; i++ {
				plain += timeIt(func() { runAwkOn(b, c.src, in.String(), nil) })
				guard += timeIt(func() { runAwkOn(b, guarded, in.String(), natives) })
			}
			b.ReportMetric(plain/float64(b.N)*1e3, "written-ms")
			b.ReportMetric(guard/float64(b.N)*1e3, "guarded-ms")
			b.ReportMetric(guard/plain, "ratio")
		})
	}
}

func timeIt(f func()) float64 {
	start := time.Now()
	f()
	return time.Since(start).Seconds()
}
