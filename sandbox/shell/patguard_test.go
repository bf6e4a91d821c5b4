package shell

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// patternScript uses patterns made from expansions in every place the
// interpreter matches them; its output is bash's.
const patternScript = `p='*.go'; for f in $p; do printf '%s ' $f; done; echo
p='a*'; case abc in $p) echo m1;; esac; case abc in "$p") echo m2;; *) echo m3;; esac
x=b; [[ abc == a$x* ]] && echo t1; [[ abc == "a$x"* ]] && echo t2; [[ abc != *$x ]] && echo t3
y=a.tar.gz; e='.*'; echo ${y%$e} ${y%%$e} ${y#*.} ${y/$x/X}
z=hello; echo ${z^^[$x-l]}
q='@(a|b).go'; [[ b.go == $q ]] && echo t4
g='@(@(@(a)))'; [[ a == $g ]] && echo t5
echo $(echo '*.txt') "$(echo '*.txt')"
false; case $? in 1) echo st1;; esac; x=$(exit 3); case $(echo $?) in 3) echo st3;; esac
set -- '*.txt' b; echo $1 "$1"; f() { case c.txt in $1) echo arg;; esac; }; f '*.txt'
`

const patternWant = "a.go b.go \nm1\nm3\nt1\nt2\nt3\na.tar a tar.gz a.tar.gz\nHELLo\nt4\nt5\nc.txt *.txt\nst1\nst3\nc.txt *.txt\narg\n"

// TestPatternsLikeBash: the guards of patterns change nothing in
// ordinary ones (and bash agrees).
func TestPatternsLikeBash(t *testing.T) {
	s, fs := newShell(t)
	for _, f := range []string{"pg/a.go", "pg/b.go", "pg/c.txt"} {
		if err := fs.MkdirAll("pg", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := fs.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out, errb bytes.Buffer
	res, err := s.Exec(context.Background(), "cd pg\n"+patternScript, ExecOptions{Stdout: &out, Stderr: &errb, Timeout: time.Minute})
	if err != nil || res.ExitCode != 0 || out.String() != patternWant {
		t.Errorf("fast path: %v %+v\n%q\nwant %q\nstderr %q", err, res, out.String(), patternWant, errb.String())
	}
	dir := t.TempDir()
	for _, f := range []string{"a.go", "b.go", "c.txt"} {
		os.WriteFile(filepath.Join(dir, f), nil, 0o644)
	}
	cmd := exec.Command("bash", "-c", patternScript)
	cmd.Dir = dir
	got, err := cmd.Output()
	if err != nil || string(got) != patternWant {
		t.Errorf("bash: %v %q, the test wants %q", err, got, patternWant)
	}
}

// patternBombs make patterns that the interpreter's regexp translation
// cannot take: too big (regexp.MustCompile panics, and in a pipeline no
// one recovers it) or with extglob groups left open (exponential time,
// deaf to the call's end).
var patternBombs = []string{
	`x=$(head -c 4000000 /dev/zero | tr '\0' '?'); case b in $x) echo m;; esac`,
	`x=$(head -c 4000000 /dev/zero | tr '\0' '?'); [[ b == $x ]]`,
	`x=$(head -c 4000000 /dev/zero | tr '\0' '?'); [[ b != "$x" ]]`,
	`x=$(head -c 4000000 /dev/zero | tr '\0' 'a'); case b in "$x") ;; esac`,
	`x=$(head -c 4000000 /dev/zero | tr '\0' '?'); echo $x`,
	`x=$(head -c 4000000 /dev/zero | tr '\0' '?'); for f in $x; do :; done`,
	`x=$(head -c 4000000 /dev/zero | tr '\0' '?'); a=($x)`,
	`x=$(head -c 4000000 /dev/zero | tr '\0' '?'); y=b; echo ${y#$x}`,
	`x=$(head -c 4000000 /dev/zero | tr '\0' '?'); y=b; echo ${y//$x/c}`,
	`x=$(head -c 4000000 /dev/zero | tr '\0' '?'); y=b; echo ${y^^$x}`,
	`x=$(head -c 4000000 /dev/zero | tr '\0' '?'); y=b; z=${y%%"$x"}`,
	`x=$(head -c 4000000 /dev/zero | tr '\0' '?'); set -- "$x"; echo $1`,
	`x=$(head -c 4000000 /dev/zero | tr '\0' '?'); f() { case b in $1) ;; esac; }; f "$x"`,
	`x=$(head -c 4000000 /dev/zero | tr '\0' '?'); n=x; echo ${!n}`,
	`x=$(head -c 2000000 /dev/zero | tr '\0' '?'); echo $x$x`,
	`x=$(head -c 2000000 /dev/zero | tr '\0' '?'); echo "$x"*`,
	`echo $(head -c 4000000 /dev/zero | tr '\0' '?')`,
	`case b in $(head -c 4000000 /dev/zero | tr '\0' '?')) ;; esac`,
	`[[ b == "$(head -c 4000000 /dev/zero | tr '\0' a)" ]]`,
	`for f in $(false; echo $?; head -c 4000000 /dev/zero | tr '\0' '?'); do :; done`,
	`x=$(printf '@(%.0s' {1..40}); [[ b == $x ]]`,
	`x=$(printf '@(%.0s' {1..40}); case b in $x) ;; esac`,
	`x=$(printf '*(%.0s' {1..40}); y=b; echo ${y#$x}`,
	`[[ b == $(printf '!(%.0s' {1..40}) ]]`,
	`x=$(printf '?(%.0s' {1..20}); [[ b == $x$x ]]`,
	`x=$(printf '@(%.0s' {1..40}); eval 'case b in $x) ;; esac'`,
	`x=$(printf '@(%.0s' {1..40}); trap '[[ b == $x ]]' EXIT`,
}

// TestPatternBombs: each bomb, alone, in a pipeline and in the
// background, is stopped in time with a clear message, and the process
// lives (a panic here ends the test binary).
func TestPatternBombs(t *testing.T) {
	s, _ := newShell(t)
	for _, bomb := range patternBombs {
		forms := []string{"%s", "{ %s; } | cat", "( %s ) & wait"}
		if strings.Contains(bomb, "trap") {
			forms = forms[:1] // the interpreter runs no EXIT trap in a subshell
		}
		for _, form := range forms {
			script := strings.Replace(form, "%s", bomb, 1)
			var out bytes.Buffer
			start := time.Now()
			res, err := s.Exec(context.Background(), script, ExecOptions{Stdout: &out, Stderr: &out, Timeout: 20 * time.Second, MaxOutput: 1 << 20})
			took := time.Since(start)
			if err != nil || res.Stopped != "pattern limit" || !strings.Contains(out.String(), "more than the shell fast path matches") {
				t.Errorf("%.90s: not stopped for its pattern: %v %+v after %v: %.200q", script, err, res, took, out.String())
			}
		}
	}
	var out bytes.Buffer
	if res, err := s.Exec(context.Background(), `echo alive`, ExecOptions{Stdout: &out}); err != nil || res.ExitCode != 0 || out.String() != "alive\n" {
		t.Fatalf("after the bombs: %v %+v %q", err, res, out.String())
	}
}

// FuzzExecInPipeline runs scripts in a pipeline's goroutine, where a
// panic of the interpreter ends the process (the fuzzer reports it), with
// a short timeout that every call must keep.
func FuzzExecInPipeline(f *testing.F) {
	for _, seed := range []string{
		`x='*'; case a in $x) echo y;; esac`,
		`x='@(a|b)'; [[ a == $x ]]`,
		`y=abc; echo ${y#a*} ${y%%c} ${y/b/$y} ${y^^[a-b]} ${y:1:1}`,
		`a=(1 2 3); echo ${a[@]:1} ${#a[@]} ${!a[@]}`,
		`x=$((2**62)); echo ${x:0:$x}`,
		`echo {1..3}{a,b} $((1<<63)) $((-1/0))`,
		`shopt -s extglob nullglob; echo *.@(go|txt)`,
		`f() { f; }; f`,
		`read -a x <<< "a b"; printf '%s' "${x[@]}"`,
		`x=$'\x00'; echo "${x//?/a}"`,
	} {
		f.Add(seed)
	}
	s, _ := newShell(f)
	f.Fuzz(func(t *testing.T, script string) {
		var out bytes.Buffer
		start := time.Now()
		s.Exec(context.Background(), "{ "+script+"\n} | cat", ExecOptions{Stdout: &out, Stderr: &out, Timeout: 2 * time.Second, MaxOutput: 1 << 16})
		if d := time.Since(start); d > 30*time.Second {
			t.Fatalf("took %v for a 2 s timeout: %q", d, script)
		}
	})
}
