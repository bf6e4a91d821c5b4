package testmount

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// CFlags are the C exec client's compiler flags, as the Makefile's
// CEXEC_CFLAGS.
var CFlags = []string{"-O2", "-Wall", "-Wextra", "-Werror"}

// sanitizeFlags build the C client with the address and
// undefined-behaviour sanitizers, any finding fatal. (GCC 12 warns
// wrongly of a null format string under them, hence the -Wno.)
var sanitizeFlags = []string{"-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined",
	"-fno-sanitize-recover=all", "-Wall", "-Wextra", "-Werror", "-Wno-format-truncation"}

// SanitizerEnv is the environment a sanitized C client runs with: a
// finding ends it with status 99 and a report on stderr; leaks are not
// findings (the client leaves what it allocated to its exit).
var SanitizerEnv = []string{"ASAN_OPTIONS=detect_leaks=0:exitcode=99", "UBSAN_OPTIONS=halt_on_error=1:exitcode=99:print_stacktrace=1"}

// CClient returns the C exec client (clients/c/computerfs-exec.c) built
// with cc from this checkout, once per test binary: with the flags of
// `make build`, or if sanitize with the sanitizers (SanitizerEnv). It
// skips the test if sanitize and the compiler has no sanitizers.
func CClient(t testing.TB, sanitize bool) string {
	t.Helper()
	if !running {
		t.Fatal("testmount: call testmount.Run from TestMain, so that the binaries it builds are removed")
	}
	key := buildKey{"c:computerfs-exec", sanitize}
	buildsMu.Lock()
	b := builds[key]
	if b == nil {
		b = &build{}
		builds[key] = b
	}
	buildsMu.Unlock()
	b.once.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		src := filepath.Join(filepath.Dir(file), "..", "..", "clients", "c", "computerfs-exec.c")
		dir, err := os.MkdirTemp("", "computerfs-exec-c-bin-")
		if err != nil {
			b.err = err
			return
		}
		path := filepath.Join(dir, "computerfs-exec-c")
		flags := CFlags
		if sanitize {
			flags = sanitizeFlags
		}
		out, err := exec.Command("cc", append(flags, "-o", path, src)...).CombinedOutput()
		buildsMu.Lock()
		b.path = path
		buildsMu.Unlock()
		if err != nil {
			b.err = fmt.Errorf("cc %s: %v\n%s", src, err, out)
		}
	})
	if b.err != nil {
		if sanitize {
			t.Skipf("no sanitizers: %v", b.err)
		}
		t.Fatal(b.err)
	}
	return b.path
}
