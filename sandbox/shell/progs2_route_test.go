package shell

import "testing"

// TestProgs2Routes: the forms of od, xxd, column, join and unzip that
// the fast path does not build in go to the sandbox, and the common ones
// stay.
func TestProgs2Routes(t *testing.T) {
	routed := []string{
		"od -t f4 a", "od -t fD a", "od -t d3 a", "od -t x16 a", "od a +10", "od -j 1x a", "od --endian=big a",
		"od --traditional a", "od -S 4 a", "od a 10", "od -N 1KB a",
		"xxd a out.bin", "xxd -r -s 16 a", "xxd -r -i a", "xxd -b a", "xxd -e a", "xxd -a a", "xxd -E a", "xxd -d a", "xxd -o 1 a",
		"xxd -n x -i a", "xxd -C -i a", "xxd -capitalize -i a", "xxd -s 2", "xxd -s 2 -", "xxd -col 4 a", "xxd -c", "xxd -h",
		"xxd -v", "xxd -R always a",
		"column", "column a", "column -x a", "column -c 40 -t a", "column -t -N a,b x", "column -t -R 1 x", "column -t -J x",
		"column -t -s '' x", "column -n x -t a", "column -t -H 1 x", "column -t -T 1 x", "column -t -W 1 x",
		"join -j1 2 a b", "join a b c", "join - -", "join -z a b", "join -o 1.1 a b 2.2", "join -1 99999999999 a b",
		"unzip a.zip", "unzip -o a.zip", "unzip -d out a.zip", "unzip -q a.zip", "unzip -v a.zip", "unzip -l a.zip -x b",
		"unzip -Z a.zip", "unzip -Zl a.zip", "unzip -lp a.zip", "unzip -lqq a.zip", "unzip -pq a.zip", "unzip -l",
		"unzip -C -l a.zip", "unzip -t a.zip -d x", "unzip -n a.zip",
		"file a", "file -b a",
	}
	for _, line := range routed {
		if ok, _ := CanRun(line); ok {
			t.Errorf("CanRun(%q) = true: want it routed to the sandbox", line)
		}
	}
	kept := []string{
		"od -c a", "od -An -tx1 a", "od -A x -t x1z -v a", "od -w a", "od -w -c a", "od -j 0x10 -N 4 a", "od -N 1k a", "od -x a b",
		"xxd a", "xxd -l 64 a", "xxd -s 0x10 a", "xxd -s -16 a", "xxd -p a", "xxd -ps -c 0 a", "xxd -i a", "xxd -r -p a",
		"xxd -p -r a", "xxd -r a", "xxd -rp a", "xxd -r -c 8 a", "xxd -u -g 4 -c 8 a", "xxd -", "cat a | xxd", "xxd -- a",
		"column -t", "column -t a", "column -t -s, a", "column -ts $'\\t' a", "column -t -s, -o ' | ' a", "column -t -L a",
		"join a b", "join -t, -1 2 -2 1 a b", "join -a 1 -e NULL -o auto a b", "join -v 2 a b", "join --header -t, a b", "join -i a -",
		"unzip -l a.zip", "unzip -lq a.zip", "unzip -Z1 a.zip", "unzip -Z -1 a.zip 'src/*'", "unzip -p a.zip x.txt", "unzip -t a.zip",
		"unzip -tq a.zip", "unzip -l a",
	}
	for _, line := range kept {
		if ok, why := CanRun(line); !ok {
			t.Errorf("CanRun(%q) = false (%s): want it on the fast path", line, why)
		}
	}
}
