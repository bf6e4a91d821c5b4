package shell

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/benhoyt/goawk/interp"
	"github.com/benhoyt/goawk/parser"
)

// TestAwkGuardKeepsMeaning: the rewrite that makes awk's loops and
// functions step changes no program's output: each program here prints
// the same guarded as written, and its guarded form calls the step in
// every loop and function.
func TestAwkGuardKeepsMeaning(t *testing.T) {
	for _, src := range []string{
		`BEGIN { for (i = 0; i < 5; i++) s = s i; print s }`,
		`BEGIN { for (;;) { if (++n > 3) break }; print n }`,
		`BEGIN { for (i = 0; ; i++) if (i == 4) break; print i }`,
		`BEGIN { while (n < 3) n++; print n }`,
		`BEGIN { do n += 2; while (n < 7); print n }`,
		`BEGIN { split("c b a", a); for (k in a) n++; print n }`,
		`BEGIN { split("c b a", a); for (k in a) { s = s a[k] }; print length(s) }`,
		`function f(n) { return n < 2 ? n : f(n-1) + f(n-2) } BEGIN { print f(15) }`,
		"function g(x)\n{\n\treturn x * 2\n}\nBEGIN { print g(21) }",
		`BEGIN { x = 10 / 2; y = x/2/1; print x, y }`,
		`/(a|b)/ { n++ } END { print n + 0 }`,
		`$0 ~ /while \(/ { print "w" } { for (i = 1; i <= NF; i++) s += $i } END { print s }`,
		`BEGIN { print "for (;;) while (1) function" }`,
		`BEGIN { if (1) for (k in a) x = 1; else print "else" ; print "done" }`,
		"BEGIN {\r\n while (i < 2) i++\r\n print i\r\n}",
		`{ a[$1] += $2 } END { for (k in a) n += a[k]; print n }`,
	} {
		want, err := runAwk(t, src, nil)
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		guarded, err := guardAwk(src)
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		steps := 0
		got, err := runAwk(t, guarded, awkNatives(&awkGuard{
			step:  func() error { steps++; return nil },
			alloc: func(int64) error { return nil },
			room:  func() int64 { return 1 << 62 },
		}))
		if err != nil {
			t.Fatalf("%q guarded as %q: %v", src, guarded, err)
		}
		if got != want {
			t.Errorf("%q guarded as %q prints %q, want %q", src, guarded, got, want)
		}
		loops := strings.Count(src, "for") + strings.Count(src, "while (") + strings.Count(src, "function")
		if strings.Contains(src, `"for (;;)`) {
			loops = 0 // only in a string
		}
		if loops > 0 && steps == 0 && !strings.Contains(src, "else") { // that one's array is empty
			t.Errorf("%q guarded as %q: no step was taken", src, guarded)
		}
	}
}

func runAwk(t *testing.T, src string, funcs map[string]any) (string, error) {
	return runAwkOn(t, src, "a 1\nb 2\na 3\n", funcs)
}

func runAwkOn(t testing.TB, src, in string, funcs map[string]any) (string, error) {
	t.Helper()
	prog, err := parser.ParseProgram([]byte(src), &parser.ParserConfig{Funcs: funcs})
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	_, err = interp.ExecProgram(prog, &interp.Config{Stdin: strings.NewReader(in), Output: &out, Error: &out, Funcs: funcs, NoExec: true, NoFileWrites: true, NoFileReads: true})
	return out.String(), err
}

// freeGuard is a guard with no budget, which records the largest
// allocation it was told of and the sum.
type freeGuard struct {
	largest, sum, steps int64
}

func (f *freeGuard) natives() map[string]any {
	return awkNatives(&awkGuard{
		step: func() error { f.steps++; return nil },
		alloc: func(n int64) error {
			f.largest = max(f.largest, n)
			f.sum += n
			return nil
		},
		room: func() int64 { return 1 << 62 },
	})
}

// awkMeaning are programs, with their input, whose output must not change
// when they are guarded: every construct the rewrite prints again.
var awkMeaning = []struct{ src, in string }{
	{`{ print $1 "," $2; s = s $0 } END { print s, length(s) }`, "a b\nc d\n"},
	{`BEGIN { x = 1; y = "2"; print x y, x + y, x y + 1, -x "" -y, 1 " " -1, 2^3 "" 2**2 }`, ""},
	{`BEGIN { print (1 > 2), (2 > 1), 1 < 2 }`, ""},
	{`BEGIN { CONVFMT = "%.2g"; x = 3.14159; y = x ""; print y; OFMT = "%.3f"; print x, x "" }`, ""},
	{`BEGIN { print 0.1 + 0.2, 1e6, 1e300 * 10, 123456789012, 3.0, 017, 1e-5 }`, ""},
	{`BEGIN { s = "a\tb\\c\"d\/e\001f"; print s, length(s); print "é" length("é") }`, ""},
	{`/a\/b/ { print "slash" } $0 ~ "c.d" { print "dyn" } /^x/, /^y/ { print "range", $0 }`, "a/b\ncxd\nx1\nq\ny2\nz\n"},
	{`NR == 1; NR == 2 { print "two" }`, "l1\nl2\n"},
	{`{ n = gsub(/o/, "0"); m = sub(/l/, "[&]"); print n, m, $0, $1 }`, "hello world\nfoo\n"},
	{`{ gsub(/o/, "<&&\\&>", $2); print; print NF }`, "a bob c\n"},
	{`{ a[NR] = $0 } END { for (i = 1; i <= NR; i++) { gsub("[aeiou]", "_", a[i]); print a[i] } }`, "banana\napple\n"},
	{`{ i = 1; gsub(/x/, "y", a[i++]); a[i++] = $0; sub(/x/, "z", a[i - 1]); print i, a[1], a[2] }`, "xx\n"},
	{`{ i = 1; sub(/./, "Z", $(i++)); print i, $0 }`, "abc def\n"},
	{`BEGIN { s = "aaa"; t = s; n = gsub("", "-", t); print n, t; sub(/$/, "!", s); print s }`, ""},
	{`BEGIN { printf "%5s|%-5s|%05d|%.2f|%c|%c|%x|%%|%*d|%.*f\n", "ab", "cd", 42, 3.14159, 65, "hi", 255, 4, 7, 2, 2.71828 }`, ""},
	{`BEGIN { x = sprintf("%s-%d-%s", "a", 3, f()); print x } function f() { n++; return "f" n }`, ""},
	{`BEGIN { printf("%s %s\n", g(), g()) } function g() { return ++k }`, ""},
	{`{ printf "%-10s %8.2f\n", $1, $2 * 1.5 }`, "apple 1\nbanana 22.5\n"},
	{`BEGIN { n = split("a:b:c", p, ":"); m = split("x  y z", q); k = split("a1b22c", r, /[0-9]+/); e = split("", z); c = split("abc", ch, ""); print n, p[3], m, q[2], k, r[3], e, c, ch[2] }`, ""},
	{`BEGIN { FS = "," } { split($0, f); print f[2], NF }`, "a,b,c\n"},
	{`{ NF = 2; print; print NF } END { $0 = "p q r s"; NF = 6; print $0 "|"; $7 = "x"; print; print NF }`, "a b c d\n"},
	{`BEGIN { OFS = "-" } { $3 = "X"; print; $1 = $1; print; $(NF+2) = "e"; print; NF++; print }`, "a b c\n"},
	{`{ $0 = $2 " " $1; print $1, NF; $2 = ""; print }`, "one two\n"},
	{`{ $1 += 5; $2++; ++$3; print }`, "1 2 3\n"},
	{`NR == 1 { while ((getline line) > 0) n++; print n, line, $0 }`, "a\nb\nc\n"},
	{`NR == 1 { getline; print $0, NR; getline x; print x, NR, $0 }`, "a\nb c\nd\n"},
	{`{ print toupper($0), tolower("ÀBC"), toupper(substr($1, 2)) }`, "hello World\n"},
	{`BEGIN { r = "^a.c$"; print ("abc" ~ r), ("abd" ~ r), ("x" !~ "y"), match("xxabc", "a.c"), RSTART, RLENGTH, match("q", /z/) }`, ""},
	{`BEGIN { a[1, 2] = 3; SUBSEP = ":"; a["x", "y"] = 4; for (k in a) n++; print n, ((1, 2) in a), (("x", "y") in a), a["x:y"]; delete a["x", "y"]; print length(a) }`, ""},
	{`BEGIN { a["x"]; if ("x" in a) print "in"; delete a; print length(a); if (!("y" in b)) print "not" }`, ""},
	{`function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2) } BEGIN { print fib(20) }`, ""},
	{`function fill(arr, n,   i) { for (i = 1; i <= n; i++) arr[i] = i * i } BEGIN { fill(sq, 5); print sq[5], length(sq) }`, ""},
	{`function j(a, sep,   s, i) { s = a[1]; for (i = 2; i in a; i++) s = s sep a[i]; return s } BEGIN { split("x y z", w); print j(w, "+") }`, ""},
	{`function f(x) { x[1] = 1 } BEGIN { f(arr); print length(arr) }`, ""},
	{`function g(s) { return sprintf("<%s>", s) } BEGIN { print g(g("a") g("b")) }`, ""},
	{`BEGIN { x; print length(x), x == 0, x == "", length() }`, ""},
	{`{ print length, length() }`, "abcd\n"},
	{`BEGIN { i = 5; do { i-- } while (i > 0); print i; for (;;) if (++j > 3) break; print j; while (k < 3) { k++; continue }; print k }`, ""},
	{`BEGIN { if (1) for (k in a) x = 1; else print "else" ; print "done" }`, ""},
	{`{ if ($1 == "skip") next; print } END { exit 3 }`, "a\nskip\nb\n"},
	{`BEGIN { print substr("hello", 2, 3), substr("hello", 0), substr("hello", -1, 3), index("hello", "ll"), int(-3.7), int("4x") }`, ""},
	{`BEGIN { srand(1); x = rand(); srand(1); y = rand(); print (x == y), sin(0), cos(0), exp(0), log(1), sqrt(16), atan2(0, 1) }`, ""},
	{`BEGIN { s = "x"; for (i = 0; i < 10; i++) s = s s; print length(s) }`, ""},
	{`BEGIN { print -1 " " -2; print 1 - -1; print !0 !1; x = 2; print x++ + ++x, x-- - --x }`, ""},
	{`BEGIN { $0 = "a b"; $5 = "e"; print NF; print }`, ""},
	{`BEGIN { FS = ":" } { print $2 } `, "a:b:c\n"},
	{`BEGIN { RS = "" } { print NR ": " $1 "/" NF }`, "a b\nc\n\nd\n"},
	{`END { print NR, $0 }`, "x\ny\n"},
	{`BEGIN { n = split("3 1 2", a); s = ""; for (i = n; i >= 1; i--) s = s a[i] (i > 1 ? "," : ""); print s }`, ""},
	{`BEGIN { x["a"] = 1; for (k in x) delete x[k]; print length(x) }`, ""},
	{`BEGIN { printf "%d %d\n", "0x1A", 1e3 }`, ""},
	{`BEGIN { s = "ab"; s = s; t = s s s; u = (s) (t); print u }`, ""},
	{"BEGIN {\r\n while (i < 2) i++\r\n print i\r\n}", ""},
	{`BEGIN { getline; print "got", $0; getline v; print v }`, "first\nsecond\n"},
	{`BEGIN { a = "A"; b = a "" (c = "C") c; print b, c }`, ""},
	{`{ $3 = $1 $2; print NF, $0 }`, "x y\n"},
	{`BEGIN { ORS = "|"; OFS = "," } { $1 = $1; print; print $1, $2 } END { printf "\n" }`, "a b\nc d\n"},
}

// TestAwkGuardMeaning: every construct the rewrite prints again prints
// the same output guarded as written.
func TestAwkGuardMeaning(t *testing.T) {
	for _, c := range awkMeaning {
		want, err := runAwkOn(t, c.src, c.in, nil)
		if err != nil {
			t.Fatalf("%q: %v", c.src, err)
		}
		guarded, err := guardAwk(c.src)
		if err != nil {
			t.Fatalf("%q: %v", c.src, err)
		}
		got, err := runAwkOn(t, guarded, c.in, (&freeGuard{}).natives())
		if err != nil {
			t.Errorf("%q guarded as %q: %v", c.src, guarded, err)
			continue
		}
		if got != want {
			t.Errorf("%q guarded as\n%s\nprints %q, want %q", c.src, guarded, got, want)
		}
	}
}

// TestAwkGuardCharges: every operation that makes much more than its
// program holds is told of it before it runs. Each program makes some
// 800 kB or more in one statement from operands of 100 kB or less; the
// guard must be told of at least that in one allocation, and a guard
// that refuses above 400 kB must stop the program.
func TestAwkGuardCharges(t *testing.T) {
	const mb = `m = sprintf("%100000s", ""); `
	for _, src := range []string{
		`BEGIN { ` + mb + `s = m m m m m m m m }`,
		`BEGIN { ` + mb + `a[1] = m; s = a[1] a[1] a[1] a[1] a[1] a[1] a[1] a[1] }`,
		`function f(x) { return x x x x x x x x } BEGIN { ` + mb + `f(m) }`,
		`BEGIN { ` + mb + `a[m, m, m, m, m, m, m, m] = 1 }`,
		`BEGIN { ` + mb + `if ((m, m, m, m, m, m, m, m) in a) print }`,
		`BEGIN { ` + mb + `gsub(/ /, "xxxxxxxx", m) }`,
		`BEGIN { ` + mb + `gsub(" ", "&&&&&&&&", m) }`,
		`BEGIN { ` + mb + `sub(/.*/, "&&&&&&&&", m) }`,
		`BEGIN { ` + mb + `a[1] = m; gsub(/ /, "xxxxxxxx", a[1]) }`,
		`BEGIN { ` + mb + `$0 = m; gsub(/ /, "xxxxxxxx") }`,
		`BEGIN { ` + mb + `$0 = "a"; $2 = m; gsub(/ /, "xxxxxxxx", $2) }`,
		`BEGIN { s = sprintf("%900000d", 1) }`,
		`BEGIN { s = sprintf("%*d%*d%*d%*d%*d%*d%*d%*d%*d", 99999, 1, 99999, 1, 99999, 1, 99999, 1, 99999, 1, 99999, 1, 99999, 1, 99999, 1, 99999, 1) }`,
		`BEGIN { ` + mb + `s = sprintf("%s%s%s%s%s%s%s%s", m, m, m, m, m, m, m, m) }`,
		`BEGIN { printf "%900000d", 1 }`,
		`BEGIN { ` + mb + `OFS = m; $0 = "x"; NF = 8 }`,
		`BEGIN { ` + mb + `OFS = m; $0 = "x"; NF += 8 }`,
		`BEGIN { ` + mb + `OFS = m; $8 = "x" }`,
		`BEGIN { ` + mb + `OFS = m; $0 = "a b c d e f g h"; $1 = $1 }`,
		`BEGIN { ` + mb + `OFS = m; $0 = "a"; $8++ }`,
		`BEGIN { NF = 100000 }`,
		`BEGIN { ` + mb + `gsub(/ /, "a ", m); n = split(m, arr) }`,
		`BEGIN { ` + mb + `n = split(m, arr, "") }`,
		`BEGIN { ` + mb + `gsub(/ /, "a,", m); n = split(m, arr, /,/) }`,
		`BEGIN { ` + mb + `gsub(/ /, "a ", m); $0 = m }`,
		`BEGIN { ` + mb + `gsub(/ /, "a ", m); FS = ","; $0 = m m m m }`,
		`BEGIN { ` + mb + `gsub(/ /, "a", m); r = m; if ("b" ~ r) print }`,
		`BEGIN { ` + mb + `gsub(/ /, "a", m); FS = m }`,
		`BEGIN { ` + mb + `s = toupper(m m m) }`,
	} {
		g := &freeGuard{}
		guarded, err := guardAwk(src)
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		if _, err := runAwkOn(t, guarded, "", g.natives()); err != nil {
			t.Fatalf("%q guarded as %q: %v", src, guarded, err)
		}
		if g.largest < 8e5 {
			t.Errorf("%q: the largest allocation charged is %d bytes, want 800 kB or more", src, g.largest)
		}
		refused := false
		stop := awkNatives(&awkGuard{
			step: func() error { return nil },
			alloc: func(n int64) error {
				if n > 400<<10 {
					refused = true
					return errMemoryLimit
				}
				return nil
			},
			room: func() int64 { return 400 << 10 },
		})
		if _, err := runAwkOn(t, guarded, "", stop); err == nil || !refused {
			t.Errorf("%q: not refused by a guard of 400 kB: %v", src, err)
		}
	}
}

// TestAwkGuardRecords: an input record is charged for the fields it
// splits into before any pattern reads one.
func TestAwkGuardRecords(t *testing.T) {
	line := strings.Repeat("a,", 1<<17) + "\n"
	for _, src := range []string{`{ n += NF } END { print n }`, `$2 == "a" { n++ } END { print n }`, `BEGIN { FS = "," } { print NF }`, `BEGIN { FS = ",+" } { print NF }`, `{ getline; print NF }`} {
		g := &freeGuard{}
		guarded, err := guardAwk(src)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := runAwkOn(t, guarded, line+line, g.natives()); err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		if g.largest < 1<<17*awkFieldBytes {
			t.Errorf("%q: a record of 131072 fields was charged %d bytes at most", src, g.largest)
		}
	}
}

// TestAwkGuardNotCharged: ordinary programs on small inputs are charged
// about what they make (a few times their output), not refused.
func TestAwkGuardNotCharged(t *testing.T) {
	in := strings.Repeat("alpha beta gamma 12 3.5\n", 2000)
	for _, src := range []string{
		`{ s = s $1 } END { print length(s) }`,
		`{ gsub(/a/, "A"); print }`,
		`{ printf "%-10s|%5d|%8.2f\n", $1, $4, $5 }`,
		`{ n = split($0, f); c += n } END { print c }`,
		`{ $2 = "B"; print }`,
	} {
		g := &freeGuard{}
		guarded, err := guardAwk(src)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := runAwkOn(t, guarded, in, g.natives()); err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		if g.largest > 1<<20 {
			t.Errorf("%q: charged %d bytes in one operation on lines of 25 bytes", src, g.largest)
		}
	}
}

// TestAwkOrdinaryPrograms: ordinary awk programs on the fast path give
// the output goawk gives them unguarded, with the default budget.
func TestAwkOrdinaryPrograms(t *testing.T) {
	s, fs := newShell(t)
	var words strings.Builder
	for i := 0; i < 10000; i++ { // some programs below copy all they built at each line
		fmt.Fprintf(&words, "w%d %d the quick brown fox %d.%d\n", i%997, i, i%13, i%7)
	}
	if err := fs.WriteFile("words.txt", []byte(words.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{
		`BEGIN { for (i = 0; i < 50000; i++) s = s "x"; print length(s) }`,
		`BEGIN { for (i = 0; i < 20; i++) s = s s "ab"; print length(s) }`,
		`{ n += gsub(/o/, "0") } END { print n, $0 }`,
		`{ gsub(/[aeiou]/, "<&>"); print }`,
		`{ printf "%-8s %6d %10.3f|%s\n", $1, $2, $NF, toupper($3) }`,
		`BEGIN { for (i = 0; i < 100000; i++) a[i] = i * 2; for (k in a) n += a[k]; print n, length(a) }`,
		`{ c[$1]++ } END { for (w in c) if (c[w] > m) { m = c[w]; b = w }; print length(c), m }`,
		`{ s = s $1 "," } END { n = split(s, p, ","); print n, p[1], p[n - 1] }`,
		`{ $3 = ""; $0 = $0; print NF }`,
		`BEGIN { OFS = "\t" } { $1 = $1; print }`,
		`{ line[NR] = $0 } END { for (i = NR; i > NR - 5; i--) print line[i] }`,
		`{ x = sprintf("%s:%s", x, $2) } END { print length(x) }`,
	} {
		start := time.Now()
		want, err := runAwkOn(t, src, words.String(), nil)
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		plain := time.Since(start)
		var out, errb bytes.Buffer
		start = time.Now()
		res, err := s.Exec(context.Background(), "awk '"+src+"' words.txt", ExecOptions{Stdout: &out, Stderr: &errb, Timeout: 2 * time.Minute})
		if err != nil || res.ExitCode != 0 {
			t.Errorf("%q: %v %+v %s", src, err, res, errb.String())
			continue
		}
		if out.String() != want {
			t.Errorf("%q: prints %.200q, want %.200q", src, out.String(), want)
		}
		t.Logf("%-70.70s goawk %6.1f ms, fast path %6.1f ms", src, plain.Seconds()*1e3, time.Since(start).Seconds()*1e3)
	}
}

// TestAwkGuardCountsAll: when the cheap bound of sub, gsub or split does
// not fit and the matches are counted, what is charged is still at least
// what the operation makes, also when the count stops early (a guard
// whose room is small, as before a collection, and that allows all, as
// after it).
func TestAwkGuardCountsAll(t *testing.T) {
	const mb = `m = sprintf("%100000s", ""); `
	for _, c := range []struct {
		src  string
		made int64
	}{
		{`BEGIN { ` + mb + `r = sprintf("%100s", ""); gsub(/ /, "\\&", r); gsub(/ |q/, r, m) }`, 10e6},
		{`BEGIN { ` + mb + `r = sprintf("%100s", ""); gsub(/ /, "\\&", r); gsub(/ /, r, m) }`, 10e6},
		{`BEGIN { ` + mb + `gsub(/ +|q/, "xxxxxxxxxx", m) }`, 1e5},
		{`BEGIN { ` + mb + `gsub(/ |q/, "xxxxxxxxxx", m) }`, 1e6},
		{`BEGIN { ` + mb + `sub(/ +|q/, "&&&&&&&&&&", m) }`, 1e6},
		{`BEGIN { ` + mb + `gsub(/ /, "a,", m); n = split(m, a, /,|;/) }`, 1e5 * awkElemBytes},
	} {
		largest := int64(0)
		natives := awkNatives(&awkGuard{
			step:  func() error { return nil },
			alloc: func(n int64) error { largest = max(largest, n); return nil },
			room:  func() int64 { return 400 << 10 },
		})
		guarded, err := guardAwk(c.src)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := runAwkOn(t, guarded, "", natives); err != nil {
			t.Fatalf("%q: %v", c.src, err)
		}
		if largest < c.made {
			t.Errorf("%q makes %d bytes, charged %d at most", c.src, c.made, largest)
		}
	}
}

// TestAwkGuardRefusesNF: NF set where it cannot be checked first (read
// by getline, replaced by sub or gsub, the variable of a for-in) makes a
// program the fast path does not run: NF = 1000000 with a long OFS
// makes a record of a million times OFS at once.
func TestAwkGuardRefusesNF(t *testing.T) {
	for _, src := range []string{
		`BEGIN { OFS = sprintf("%1000000s", ""); $0 = "x"; getline NF }`,
		`BEGIN { OFS = sprintf("%1000000s", ""); $0 = "x"; getline NF < "-" }`,
		`BEGIN { OFS = sprintf("%1000000s", ""); $0 = "x"; n = "1000000"; sub(/.*/, n, NF) }`,
		`BEGIN { OFS = sprintf("%1000000s", ""); $0 = "x"; a[1000000]; for (NF in a) ; }`,
	} {
		if g, err := guardAwk(src); err == nil {
			t.Errorf("%q is run, as %q", src, g)
		}
	}
	s, _ := newShell(t)
	var out bytes.Buffer
	res, err := s.Exec(context.Background(), "echo 1000000 | awk '"+`BEGIN { OFS = sprintf("%1000000s", ""); $0 = "x"; getline NF }`+"'", ExecOptions{Stdout: &out, Stderr: &out, Timeout: time.Minute})
	if err != nil || res.ExitCode == 0 || !strings.Contains(out.String(), "not supported") {
		t.Errorf("getline NF: %v %+v %q", err, res, out.String())
	}
}
