package shell_test

import (
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/computerfs/computerfs"
	"github.com/computerfs/computerfs/internal/testmount"
	"github.com/computerfs/computerfs/sandbox/shell"
)

// BenchmarkExecBackends times the corpus's commands the way a client runs
// them, in one run: through a daemon's control socket on the shell fast
// path and in the sandbox, and with `bash -c` and GNU coreutils on a
// tmpfs copy of the same tree. It reports the median over commands of
// each command's median latency, their ratios, and the share of the
// corpus that auto routing sends to the fast path.
//
//	go test -run '^$' -bench ExecBackends -benchtime 1x ./sandbox/shell
func BenchmarkExecBackends(b *testing.B) {
	cmds := shell.CorpusCommands(b)
	m := testmount.Start(b, filepath.Join(b.TempDir(), "ws"))
	shell.WriteFixtureDir(b, m.Dir)
	c, err := computerfs.Dial(m.Dir)
	if err != nil {
		b.Fatal(err)
	}
	// The workspace's agent, whom the sandbox runs as, owns the tree (the
	// fixture was written as root), so that commands that write work
	// there too.
	st, err := c.Status(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	if out, err := exec.Command("chown", "-R", st.Agent.String(), m.Dir).CombinedOutput(); err != nil {
		b.Fatalf("chown: %v %s", err, out)
	}
	ws, tmp, remove := shell.TmpfsFixture(b, "execbench-")
	defer remove()

	ctx := context.Background()
	timeExec := func(backend, command string) float64 {
		start := time.Now()
		if _, err := c.Exec(ctx, computerfs.ExecRequest{Command: command, Backend: backend, Timeout: "10s"}, io.Discard, io.Discard); err != nil {
			b.Fatalf("%s: %q: %v", backend, command, err)
		}
		return time.Since(start).Seconds()
	}
	timeBash := func(command string) float64 {
		cmd := shell.BashCommand(ws, tmp, command)
		start := time.Now()
		cmd.Run()
		return time.Since(start).Seconds()
	}
	// The share auto keeps on the fast path, as the daemon routes (it
	// reads the scripts a command runs), each command on the fixture as
	// it is at the start.
	fast := 0
	for _, command := range cmds {
		res, err := c.Exec(ctx, computerfs.ExecRequest{Command: command, Backend: "auto", Timeout: "10s"}, io.Discard, io.Discard)
		if err != nil {
			b.Fatalf("auto: %q: %v", command, err)
		}
		if res.Backend == "shell" {
			fast++
		}
	}
	const runs = 3
	var fastMed, boxMed, bashMed []float64
	for i := 0; i < b.N; i++ {
		fastMed, boxMed, bashMed = fastMed[:0], boxMed[:0], bashMed[:0]
		for _, command := range cmds {
			if strings.Contains(command, "sleep") {
				continue
			}
			var f, s, g []float64
			for r := 0; r < runs; r++ {
				f = append(f, timeExec("shell", command))
				s = append(s, timeExec("sandbox", command))
				g = append(g, timeBash(command))
			}
			fastMed = append(fastMed, median(f))
			boxMed = append(boxMed, median(s))
			bashMed = append(bashMed, median(g))
		}
	}
	fm, sm, bm := median(fastMed), median(boxMed), median(bashMed)
	b.ReportMetric(fm*1e6, "fast-µs/cmd")
	b.ReportMetric(sm*1e6, "sandbox-µs/cmd")
	b.ReportMetric(bm*1e6, "bash-µs/cmd")
	b.ReportMetric(sm/fm, "sandbox/fast")
	b.ReportMetric(bm/fm, "bash/fast")
	b.ReportMetric(100*float64(fast)/float64(len(cmds)), "%auto-fast")
	b.Logf("%d commands: median latency through the control socket: fast path %.0f µs, sandbox %.0f µs (%.1fx the fast path); bash + coreutils on tmpfs %.0f µs (%.1fx); auto ran %d of %d corpus commands (%.1f%%) on the fast path",
		len(fastMed), fm*1e6, sm*1e6, sm/fm, bm*1e6, bm/fm, fast, len(cmds), 100*float64(fast)/float64(len(cmds)))
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
