package shell

import (
	"context"
	"io"
	"testing"
	"time"
)

// BenchmarkGuards times scripts whose statements expand variables with
// the expansion guards and without them, alternating in the same run,
// and reports the ratio.
//
//	go test -run '^$' -bench Guards ./sandbox/shell
func BenchmarkGuards(b *testing.B) {
	s, _ := newShell(b)
	for _, sc := range []struct{ name, script string }{
		{"loop", `for i in $(seq 1 2000); do x=$i; y="$x/$i"; echo "$y" > /dev/null; done`},
		{"words", `a=b; c=d; echo "$a" "$c" $a/$c > /dev/null`},
		{"literal", `echo hello world > /dev/null`},
		// unquoted words are globbed: their patterns are guarded
		{"globbed-loop", `for i in $(seq 1 2000); do echo $i > /dev/null; done`},
		{"case-loop", `p='1*'; for i in $(seq 1 2000); do case $i in $p) ;; esac; done`},
	} {
		b.Run(sc.name, func(b *testing.B) {
			var with, without time.Duration
			for i := 0; i < b.N; i++ {
				for _, off := range []bool{false, true} {
					guardsOff = off
					start := time.Now()
					res, err := s.Exec(context.Background(), sc.script, ExecOptions{Stdout: io.Discard, Stderr: io.Discard, Timeout: time.Minute})
					guardsOff = false
					if err != nil || res.ExitCode != 0 {
						b.Fatalf("%v %+v", err, res)
					}
					if !off {
						with += time.Since(start)
					} else {
						without += time.Since(start)
					}
				}
			}
			b.ReportMetric(float64(with.Microseconds())/float64(b.N), "µs/guarded")
			b.ReportMetric(float64(without.Microseconds())/float64(b.N), "µs/unguarded")
			b.ReportMetric(float64(with)/float64(without), "ratio")
		})
	}
}
