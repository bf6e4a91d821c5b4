package shell

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/computerfs/computerfs/internal/gittest"
)

// BenchmarkGit times git commands on the fast path (in-process git on the
// store) and with the git CLI on a tmpfs clone of the same repository of
// 1,000 files and 50 commits (git -C COPY ..., run with os/exec),
// alternating, and reports each command's median latency on both sides
// and their ratio. "dirty" runs after 20 files were edited on both sides.
//
//	go test -run '^$' -bench Git -benchtime 1x ./sandbox/shell
func BenchmarkGit(b *testing.B) {
	origin := filepath.Join(b.TempDir(), "origin")
	gittest.Generate(b, origin, 1000, 50, 7)
	p := &gitPair{}
	p.s, p.fs = gitStore(b, origin)
	p.base = gitCopy(b, origin)
	copyDir := p.base + "/w/repo"
	cmds := []struct{ name, script string }{
		{"status", "git status"},
		{"status-short", "git status --short"},
		{"diff", "git diff"},
		{"log-5", "git log -n 5"},
		{"log-oneline-20", "git log --oneline -n 20"},
		{"show-stat", "git show --stat"},
	}
	cpu := func() float64 {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
	}
	run := func(script string) (fast, cli, fastCPU, cliCPU float64) {
		const runs = 15
		var f, g, fc, gc []float64
		for r := 0; r < runs; r++ {
			var out bytes.Buffer
			start, c0 := time.Now(), cpu()
			res, err := p.s.Exec(context.Background(), script, ExecOptions{Cwd: "/workspace/repo", Stdout: &out, Stderr: &out})
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("%s: %v %d %s", script, err, res.ExitCode, out.String())
			}
			f = append(f, time.Since(start).Seconds())
			fc = append(fc, cpu()-c0)

			args := append([]string{"-C", copyDir}, splitWords(script)[1:]...)
			cmd := exec.Command("git", args...)
			cmd.Env = append(os.Environ(), gittest.Env()...)
			cmd.Stdout, cmd.Stderr = &out, &out
			start = time.Now()
			if err := cmd.Run(); err != nil {
				b.Fatalf("git %v: %v", args, err)
			}
			g = append(g, time.Since(start).Seconds())
			gc = append(gc, (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds())
		}
		return median(f), median(g), median(fc), median(gc)
	}
	for i := 0; i < b.N; i++ {
		for _, dirty := range []bool{false, true} {
			if dirty {
				// edit 20 tracked files on both sides
				out, _, _ := fastGit(b, p.s, "git ls-files | grep -v / | head -0; git ls-files | head -400 | tail -20")
				for _, f := range bytes.Fields([]byte(out)) {
					fastGit(b, p.s, "[ -L '"+string(f)+"' ] || echo edit >> '"+string(f)+"'")
					realGit(b, p.base, "[ -L '"+string(f)+"' ] || echo edit >> '"+string(f)+"'")
				}
			}
			for _, c := range cmds {
				fm, cm, fcpu, ccpu := run(c.script)
				name := c.name
				if dirty {
					name += "-dirty"
				}
				b.ReportMetric(fm*1e6, name+"-fast-µs")
				b.ReportMetric(cm*1e6, name+"-cli-µs")
				b.ReportMetric(cm/fm, name+"-cli/fast")
				b.ReportMetric(ccpu/fcpu, name+"-cpu-cli/fast")
				b.Logf("%-20s wall: fast path %6.0f µs, git CLI %6.0f µs, CLI/fast %.2fx; CPU: fast path %6.0f µs, git CLI %6.0f µs, CLI/fast %.2fx",
					name, fm*1e6, cm*1e6, cm/fm, fcpu*1e6, ccpu*1e6, ccpu/fcpu)
			}
		}
	}
}

// splitWords splits a simple command line on spaces.
func splitWords(s string) []string { return bytesFieldsString(s) }

func bytesFieldsString(s string) []string {
	var out []string
	for _, f := range bytes.Fields([]byte(s)) {
		out = append(out, string(f))
	}
	return out
}
