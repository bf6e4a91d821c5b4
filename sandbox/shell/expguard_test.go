package shell

import (
	"bytes"
	"context"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// guardSame are scripts whose output must not change with the expansion
// guards in front of their statements: where a guard goes (a word of its
// own where words are split, the first part of a word elsewhere) must add
// no field, no byte and no change of $?.
var guardSame = []struct{ script, want string }{
	{`x=a; printf '[%s]' $x "$x" ${x}b; echo`, "[a][a][ab]\n"},
	{`set --; f() { echo $#; }; f "$@"; f $x"$@"; f ""$x`, "0\n0\n1\n"},
	{`set -- a "b c"; for w in "$@"; do printf '<%s>' "$w"; done; echo`, "<a><b c>\n"},
	{`x=; printf '[%s]' $x; printf '|%s|' "$x"; echo`, "[]||\n"},
	{`false; x=$y; echo $?`, "0\n"},
	{`x=$(false)$y; echo $?`, "1\n"},
	{`a=$(exit 3) b=$x$x; echo $?`, "3\n"},
	{`x=ab; y=${x//b/cc}; echo "$y ${x^^} ${#x} ${x:1}"`, "acc AB 2 b\n"},
	{`a=(1 2 3); a+=($x 4); echo ${#a[@]} "${a[@]}"`, "4 1 2 3 4\n"},
	{`a=([2]=x $y z); echo "${!a[@]}"`, "2 3\n"},
	{`declare -a b=($x q "$x"); echo ${#b[@]}`, "2\n"},
	{`x=v; declare y=$x z="$x$x"; f() { local w=$y$z; echo $w; }; f; echo $y $z`, "vvv\nv vv\n"},
	{`x=1; case $x$x in 11) echo yes;; *) echo no;; esac`, "yes\n"},
	{`x=1; case q in $x) echo one;; q) echo q;; esac`, "q\n"},
	{`x=ab; [[ $x$x == abab && -n $x ]] && echo ok`, "ok\n"},
	{`x=ab; [[ $x =~ ^a(b)$ ]] && echo ${BASH_REMATCH[1]}`, "b\n"},
	{`x=hi; cat <<EOF
$x there $x
EOF`, "hi there hi\n"},
	{`x=hi; cat <<<"$x$x"`, "hihi\n"},
	{`x=f; echo data > $x.txt; cat $x.txt; rm $x.txt`, "data\n"},
	{`for i in {1..3}$x; do printf %s $i; done; echo`, "123\n"},
	{`x=a; echo {b,c}$x`, "ba ca\n"},
	{`x=a; eval 'echo $x$x'; eval "y=\$x\$x"; echo $y`, "aa\naa\n"},
	{`x=a; trap 'echo bye $x$x' EXIT; echo hi`, "hi\nbye aa\n"},
	{`x=a; f() { local v=$1$1; echo $v; }; f $x`, "aa\n"},
	{`x=a; echo "$(echo $x$x)" $(echo $x)`, "aa a\n"},
	{`x=a; y=${z:-$x$x}; : ${w:=$x}; echo $y $w`, "aa a\n"},
	{`n=x; x=deep; echo ${!n}`, "deep\n"},
	{`__computerfs_guard() { echo spoofed; }; x=a; echo $x$x`, "aa\n"},
	{`x=3; (( y = $x * 2 )); echo $y`, "6\n"},
	{`x=abc; echo ${x/b/z} ${x%c}`, "azc ab\n"},
	{`x=1; while [ $x -lt 3 ]; do x=$((x+1)); done; echo $x`, "3\n"},
	{`x="a b"; set -- $x; echo $#`, "2\n"},
	{`read -ra p <<< "a b  c"; echo ${#p[@]} ${p[2]}`, "3 c\n"},
	{`printf 'x\\ y z\n' | { read -a p; echo ${#p[@]} ${p[0]}; }`, "2 x y\n"},
	{`printf 'a b\\\nc\n' | { read -a p; echo ${p[@]}; }`, "a bc\n"},
	{`read -a p < /dev/null; echo $? ${#p[@]}`, "1 0\n"},
	{`printf 'q w' | { read -r -a p; echo $? ${p[1]}; }`, "1 w\n"},
	{`printf 'one\ntwo\n' | { read -a p; read -a q; echo $p $q; }`, "one two\n"},
	{`read -p '' -a p <<< "k l"; echo ${p[1]}`, "l\n"},
	// array elements: each has its guard in front, inside its word
	{`set --; a=("$@" "$@"); echo ${#a[@]}`, "0\n"},
	{`set -- a "b c"; a=("$@" "$@"); echo ${#a[@]}`, "4\n"},
	{`x=" a  b "; a=($x $x x$x); echo ${#a[@]} "${a[*]}"`, "7 a b a b x a b\n"},
	{`x=; a=($x$x "" $x$x); echo ${#a[@]}`, "1\n"},
	{`x=; a=(~ ~/$x$x); [ "${a[0]}" = "$HOME" ] && [ "${a[1]}" = "$HOME/" ] && echo ok`, "ok\n"},
	{`x=ab; a=([3]=$x$x $x$x); echo "${!a[@]}" ${a[4]}`, "3 4 abab\n"},
}

func TestGuardsChangeNothing(t *testing.T) {
	s, _ := newShell(t)
	for _, c := range guardSame {
		var out, errb bytes.Buffer
		res, err := s.Exec(context.Background(), c.script, ExecOptions{Stdout: &out, Stderr: &errb, Timeout: time.Minute})
		if err != nil || out.String() != c.want {
			t.Errorf("%s:\n got %q (exit %d, stderr %q, %v)\nwant %q", c.script, out.String(), res.ExitCode, errb.String(), err, c.want)
		}
	}
}

// expansionBombs make gigabytes in one expansion (or one statement)
// from a variable that fits the budget: each is stopped by the guard in
// front of its statement, before the expansion starts.
var expansionBombs = []string{
	`x=aaaaaaaaaa; x=$x$x$x$x$x$x$x$x$x$x; x=$x$x$x$x$x$x$x$x$x$x; x=$x$x$x$x$x$x$x$x$x$x; x=$x$x$x$x$x$x$x$x$x$x; x=$x$x$x$x$x$x$x$x$x$x; x=$x$x$x$x$x$x$x$x$x$x; x=$x$x$x$x$x$x$x$x$x$x; x=$x$x$x$x$x$x$x$x$x$x; x=$x$x$x$x$x$x$x$x$x$x`,
	`x=$(yes | head -c 50000000); y=${x//y/yyyyyyyyyyyyyyyyyyyyyyyy}`,
	bigX + `y=${x//?/$x}`,
	bigX + `y=${x//a/${x//a/aaaaaaaaaaaaaaaa}}`,
	bigX + `y="${x^^}${x^^}${x^^}"`,
	bigX + `y=${x,,}${x,,}${x,,}`, // (${x@Q} is refused as divergent: divergent_test.go)
	bigX + `y=$x$x$x$x$x$x$x$x$x$x`,
	bigX + `y+=$x$x$x$x$x$x$x$x$x$x`,
	bigX + `declare y=$x$x$x$x$x$x$x$x$x$x`,
	bigX + `export y=$x$x$x$x$x$x$x$x$x$x`,
	bigX + `f() { local y=$x$x$x$x$x$x$x$x$x$x; }; f`,
	bigX + `a=$x$x b=$a$a c=$b$b d=$c$c`,
	bigX + `echo $x$x$x$x$x$x$x$x$x$x > /dev/null`,
	bigX + `echo {1..2000}"$x" > /dev/null`,
	bigX + `y=${z:-$x$x$x$x$x$x$x$x$x$x}`,
	bigX + `: ${z:=$x$x$x$x$x$x$x$x$x$x}`,
	bigX + `n=x; y=${!n}${!n}${!n}${!n}${!n}${!n}${!n}${!n}${!n}${!n}`,
	bigX + `[[ $x$x$x$x$x$x$x$x$x$x == a ]]`,
	bigX + `case $x$x$x$x$x$x$x$x$x$x in a) ;; esac`,
	bigX + `cat <<< $x$x$x$x$x$x$x$x$x$x > /dev/null`,
	bigX + "cat > /dev/null <<EOF\n$x$x$x$x$x$x$x$x$x$x\nEOF",
	bigX + `(( y = $x$x$x$x$x$x$x$x$x$x ))`,
	bigX + `eval 'y=$x$x$x$x$x$x$x$x$x$x'`,
	bigX + `trap 'y=$x$x$x$x$x$x$x$x$x$x' EXIT`,
	bigX + `echo 'y=$x$x$x$x$x$x$x$x$x$x' > b.sh; . ./b.sh`,
	bigX + `export x; bash -c 'y=$x$x$x$x$x$x$x$x$x$x'`,
	bigX + `set -- "$x" "$x"; set -- "$@" "$@" "$@" "$@" "$@" "$@"`,
	bigX + `set -- "$x"; y="$*$*$*$*$*$*$*$*$*$*"`,
	bigX + `y=${x:0}${x:0}${x:0}${x:0}${x:0}${x:0}${x:0}${x:0}${x:0}${x:0}`,
	`x=$(head -c 20000000 /dev/zero | tr '\0' ' '); set -- $x`,
	`x=$(head -c 20000000 /dev/zero | tr '\0' ' '); a=($x)`,
	// the interpreter expands each element of an array on its own, and
	// goes on after one that fails: each has a guard of its own
	`x=$(seq 3000000); a=($x)`,
	`x=$(seq 500000); a=(1 $x $x $x $x $x $x $x $x)`,
	`x=$(seq 500000); declare -a a=($x $x $x $x $x $x $x $x)`,
	`x=$(seq 500000); a=(); a+=(~ $x $x $x $x $x $x $x $x)`,
	`printf -v y '%1000000s' {1..2000}`,
	`printf -v y '%.1000000f' {1..2000}`,
	`md5sum $(yes /dev/null | head -n 10000000)`,
	`for f in $(yes a | head -n 100000000); do :; done`,
	// (declare -p is routed to the sandbox: divergent_test.go)
	bigX + `set > /dev/null; x=$x$x; y=$(set); z=$(set)`,
	// each eval's statements are kept for the call (a function it
	// defines runs later), and counted
	`x=a; for i in $(seq 1000000); do eval "y$i=\$x\$x; f$i() { :; }"; done`,
	`x=$(yes 'a' | head -n 10000000 | tr '\n' ' '); read -a arr <<< "$x"`,
}

// expansionShares look like bombs but are not: a word of one part is
// the variable's own string, not a copy, so they hold little more than x
// and must run to their end.
var expansionShares = []string{
	bigX + `for i in "$x" "$x" "$x" "$x" "$x" "$x" "$x" "$x" "$x" "$x"; do :; done`,
	bigX + `a=("$x" "$x" "$x" "$x" "$x" "$x" "$x" "$x" "$x" "$x")`,
	bigX + `a=("$x"); b=("${a[@]}" "${a[@]}" "${a[@]}" "${a[@]}" "${a[@]}" "${a[@]}" "${a[@]}" "${a[@]}")`,
	bigX + `y=$x; z=${x:0}; w="$x"; echo ${#y} ${#z} ${#w}`,
}

// bigX is 20 MB in x.
const bigX = `x=$(head -c 20000000 /dev/zero | tr '\0' a); `

// stoppedIn is what stops a bomb that is not stopped by its guard.
func stoppedIn(bomb string) []string {
	switch {
	case strings.Contains(bomb, "read -a"):
		return []string{"(in read)"}
	case strings.HasPrefix(bomb, "printf -v"):
		return []string{"(in printf -v of about"}
	case strings.Contains(bomb, `eval "y$i`):
		return []string{"(in eval)", "(in an expansion of about"}
	case strings.Contains(bomb, `set -- "$@"`):
		// "$@" is its parameters' own strings: the list is what is big
		return []string{"(in set)", "(in an expansion of about"}
	case strings.Contains(bomb, "| head -n"):
		return []string{"(in head)"} // a capture split into fields
	case strings.Contains(bomb, "$(set)"):
		return []string{"(in declare)", "(in set)"}
	}
	return []string{"(in an expansion of about"}
}

// TestExpansionBombs runs each expansion bomb in a child test process
// held in a memory cgroup: each must be stopped for its memory, with the
// heap far below what it asks for.
func TestExpansionBombs(t *testing.T) {
	if os.Getenv("COMPUTERFS_EXPBOMB_CHILD") == "1" {
		expansionBombsChild(t)
		return
	}
	limit := int64(3 << 30)
	if raceEnabled {
		limit = 8 << 30
	}
	runInMemCgroup(t, "TestExpansionBombs", "COMPUTERFS_EXPBOMB_CHILD", limit)
}

func expansionBombsChild(t *testing.T) {
	waitForCgroup(t)
	s, _ := newShell(t)
	peak, stop := heapPeak()
	defer stop()
	const budget = 256 << 20
	for _, b := range expansionShares {
		runtime.GC()
		peak.Store(0)
		var out bytes.Buffer
		res, err := s.Exec(context.Background(), b, ExecOptions{Stdout: &out, Stderr: &out, Timeout: 5 * time.Minute, MaxOutput: 1 << 20})
		p := peak.Load()
		t.Logf("%-70.70s exit %d peak heap %4d MiB %.90q", b, res.ExitCode, p>>20, strings.TrimSpace(out.String()))
		if err != nil || res.ExitCode != 0 {
			t.Errorf("%.80s: stopped: %v %+v %q", b, err, res, out.String())
		}
		if p > 2*256<<20 {
			t.Errorf("%.80s: the heap reached %d MiB", b, p>>20)
		}
	}
	for _, b := range expansionBombs {
		runtime.GC()
		peak.Store(0)
		var out bytes.Buffer
		start := time.Now()
		res, err := s.Exec(context.Background(), b, ExecOptions{Stdout: &out, Stderr: &out, Timeout: 5 * time.Minute, MaxOutput: 1 << 20})
		p := peak.Load()
		t.Logf("%-70.70s %-13s %5.1fs peak heap %4d MiB %.90q", b, res.Stopped, time.Since(start).Seconds(), p>>20, strings.TrimSpace(out.String()))
		if err != nil || res.Stopped != "memory limit" || !strings.Contains(out.String(), "memory limit of 256 MiB per call exceeded") {
			t.Errorf("%.80s: not stopped for its memory: %v %+v %q", b, err, res, out.String())
		} else if in := stoppedIn(b); !slices.ContainsFunc(in, func(s string) bool { return strings.Contains(out.String(), s) }) {
			t.Errorf("%.80s: stopped, but not %s: %q", b, in[0], out.String())
		}
		if p > 2*budget+64<<20 {
			t.Errorf("%.80s: the heap reached %d MiB for a budget of %d MiB", b, p>>20, budget>>20)
		}
	}
}

func TestSplitMarkKeepsStatus(t *testing.T) {
	s, _ := newShell(t)
	for _, c := range []struct{ script, want string }{
		{`false; echo $(echo $?)`, "1\n"},
		{`false; for x in $(echo a; echo $?); do echo $x; done`, "a\n0\n"},
		{`set -e; if ! false; then echo $(echo ok); fi`, "ok\n"},
		{`echo $(exit 4); echo $?`, "\n0\n"},
		{`x=$(exit 4); echo $?`, "4\n"},
		{`a=($(printf '%s\n' 1 2 3)); echo ${#a[@]}`, "3\n"},
	} {
		var out, errb bytes.Buffer
		res, err := s.Exec(context.Background(), c.script, ExecOptions{Stdout: &out, Stderr: &errb, Timeout: time.Minute})
		if err != nil || out.String() != c.want {
			t.Errorf("%s:\n got %q (exit %d, stderr %q, %v)\nwant %q", c.script, out.String(), res.ExitCode, errb.String(), err, c.want)
		}
	}
}
