package bench

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// cSource is the C program that does the syscall-level benchmarks (see the
// comment at its top for why it is not Go).
//
//go:embed csrc/cfsbench.c
var cSource []byte

// SyscallBenchmarks are measured by the C program, which times only the
// system calls (no process start-up) and prints the count of operations
// or bytes and the seconds taken.
func SyscallBenchmarks(s Sizes) []Benchmark {
	files := strconv.Itoa(s.SysFiles)
	fileRate := func(mode string) func(context.Context, *Env) (float64, error) {
		return func(ctx context.Context, e *Env) (float64, error) {
			n, secs, err := e.runC(ctx, mode, e.Dir, files)
			return n / secs, err
		}
	}
	return []Benchmark{
		{
			Name: "sys/create", Unit: "ops/s", Better: HigherIsBetter,
			Desc: fmt.Sprintf("open(O_CREAT)+close %d files in one dir", s.SysFiles),
			Func: fileRate("create"),
		},
		{
			Name: "sys/stat", Unit: "ops/s", Better: HigherIsBetter,
			Desc: fmt.Sprintf("stat those %d files, just created", s.SysFiles),
			Func: fileRate("stat"),
		},
		{
			Name: "sys/unlink", Unit: "ops/s", Better: HigherIsBetter,
			Desc: fmt.Sprintf("unlink those %d files", s.SysFiles),
			Func: fileRate("unlink"),
		},
		{
			Name: "sys/seqwrite", Unit: "MiB/s", Better: HigherIsBetter, Reps: 3,
			Desc: fmt.Sprintf("write %d MiB in 1 MiB blocks, then fsync", s.SeqMiB),
			Func: func(ctx context.Context, e *Env) (float64, error) {
				n, secs, err := e.runC(ctx, "write", filepath.Join(e.Dir, "seq"), strconv.Itoa(s.SeqMiB))
				return n / (1 << 20) / secs, err
			},
		},
		{
			Name: "sys/seqread", Unit: "MiB/s", Better: HigherIsBetter, Reps: 3,
			Desc: fmt.Sprintf("read %d MiB in 1 MiB blocks, cold cache", s.SeqMiB),
			Func: func(ctx context.Context, e *Env) (float64, error) {
				path := filepath.Join(e.Dir, "seq")
				if _, _, err := e.runC(ctx, "write", path, strconv.Itoa(s.SeqMiB)); err != nil {
					return 0, err
				}
				e.DropCaches()
				n, secs, err := e.runC(ctx, "read", path)
				if err == nil && int64(n) != int64(s.SeqMiB)<<20 {
					err = fmt.Errorf("read %.0f bytes, want %d", n, int64(s.SeqMiB)<<20)
				}
				return n / (1 << 20) / secs, err
			},
		},
		{
			Name: "sys/randread", Unit: "ops/s", Better: HigherIsBetter, Reps: 3,
			Desc: fmt.Sprintf("%d random 4 KiB preads over a warm %d MiB file", s.RandReads, s.RandMiB),
			Func: func(ctx context.Context, e *Env) (float64, error) {
				path := filepath.Join(e.Dir, "rand")
				if _, _, err := e.runC(ctx, "write", path, strconv.Itoa(s.RandMiB)); err != nil {
					return 0, err
				}
				n, secs, err := e.runC(ctx, "randread", path, strconv.Itoa(s.RandReads), "1")
				return n / secs, err
			},
		},
	}
}

// runC runs the C program and returns the count and seconds it prints.
func (e *Env) runC(ctx context.Context, args ...string) (count, secs float64, err error) {
	prog, err := e.fx.cProgram(ctx)
	if err != nil {
		return 0, 0, err
	}
	out, err := e.Output(ctx, prog, args...)
	if err != nil {
		return 0, 0, err
	}
	f := strings.Fields(out)
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("cfsbench %s: unexpected output %q", args[0], out)
	}
	if count, err = strconv.ParseFloat(f[0], 64); err == nil {
		secs, err = strconv.ParseFloat(f[1], 64)
	}
	if err == nil && (count <= 0 || secs <= 0) {
		err = fmt.Errorf("cfsbench %s: bad output %q", args[0], out)
	}
	return count, secs, err
}

// cProgram compiles the C program with gcc, once: the binary is cached
// under the cache directory, named by the hash of its source.
func (fx *fixtures) cProgram(ctx context.Context) (string, error) {
	return fx.cprog.get(func() (string, error) {
		sum := sha256.Sum256(cSource)
		bin := filepath.Join(fx.cacheDir, "cfsbench-"+hex.EncodeToString(sum[:8]))
		if fi, err := os.Stat(bin); err == nil && fi.Mode()&0o111 != 0 {
			return bin, nil
		}
		if err := os.MkdirAll(fx.cacheDir, 0o755); err != nil {
			return "", err
		}
		tmp, err := os.MkdirTemp(fx.cacheDir, "build-")
		if err != nil {
			return "", err
		}
		defer os.RemoveAll(tmp)
		src := filepath.Join(tmp, "cfsbench.c")
		if err := os.WriteFile(src, cSource, 0o644); err != nil {
			return "", err
		}
		out := filepath.Join(tmp, "cfsbench")
		fx.log("compiling %s", bin)
		cmd := exec.CommandContext(ctx, "gcc", "-O2", "-Wall", "-o", out, src)
		if msg, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("gcc (needed for the syscall benchmarks): %v\n%s", err, msg)
		}
		if err := os.Rename(out, bin); err != nil {
			return "", err
		}
		return bin, nil
	})
}
